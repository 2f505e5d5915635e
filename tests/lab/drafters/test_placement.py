"""A feature draft is built on its target's device: every parameter and buffer, not only the LM-head rows it copies.
The target here sits on the meta device, so a CPU run catches a draft left half on the CPU (as a CUDA run of
tests/lab/test_decode.py did on an H200 before the constructors moved themselves)."""
import copy

import pytest
import torch

from lab.drafters.eagle import EagleDraftModel
from lab.drafters.eagle3 import Eagle3DraftModel
from lab.drafters.mtp import MTPHeads

SMALL = {"width": 64, "heads": 4, "kv_heads": 2, "intermediate": 96}


@pytest.fixture(scope="module")
def meta_target(pair):
    return copy.deepcopy(pair.target).to("meta")


@pytest.mark.parametrize("build", [
    lambda t: EagleDraftModel(t, SMALL),
    lambda t: EagleDraftModel(t, SMALL, draft_vocab=torch.arange(0, 512, 2)),
    lambda t: Eagle3DraftModel(t, SMALL),
    lambda t: Eagle3DraftModel(t, dict(SMALL, width=int(t.config.hidden_size), head="target"),
                               draft_vocab=torch.arange(0, 512, 2)),
    lambda t: MTPHeads(t, {"depth": 2, "intermediate": 96}),
    lambda t: MTPHeads(t, {"depth": 1, "intermediate": 96}, draft_vocab=torch.arange(0, 512, 2)),
], ids=["eagle", "eagle-draft-vocab", "eagle3", "eagle3-target-head", "mtp", "mtp-draft-vocab"])
def test_the_draft_is_built_on_the_targets_device(meta_target, build):
    model = build(meta_target)
    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    assert tensors and {name: t.device.type for name, t in tensors.items() if t.device.type != "meta"} == {}
    assert all(t.dtype in (torch.float32, torch.long) for t in tensors.values())


def test_the_drafts_move_their_inputs_to_their_weights(meta_target):
    """Inputs built on another device (the CPU here, the weights on the meta device) are moved to the weights', as a
    CUDA run needs when a caller's tensors are on the CPU; without the moves these raised a device mismatch. (The MTP
    module's step moves its inputs too, but its transformers block cannot run on the meta device: gpu_check.sh's
    CUDA run of tests/lab/drafters covers it.)"""
    from lab.drafters.medusa import MedusaHeads

    D, V = int(meta_target.config.hidden_size), int(meta_target.config.vocab_size)
    eagle = EagleDraftModel(meta_target, SMALL, draft_vocab=torch.arange(0, 512, 2))
    eagle3 = Eagle3DraftModel(meta_target, SMALL)
    medusa = MedusaHeads(D, V, 2).to("meta")
    outputs = {"eagle head": eagle.head_logits(torch.randn(2, D)),
               "eagle3 fuse": eagle3.fuse(torch.randn(2, 3 * D)),
               "eagle3 head": eagle3.head_logits(torch.randn(2, SMALL["width"])),
               "medusa heads": medusa(torch.randn(2, D, dtype=torch.float64))}
    assert {name: out.device.type for name, out in outputs.items()} == dict.fromkeys(outputs, "meta")
    assert outputs["eagle head"].shape == (2, 256) and outputs["medusa heads"].shape == (2, 2, V)
