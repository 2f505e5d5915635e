"""Early-exit drafting: the target's own first layers, its final norm and its LM head make the draft model.

The seed lesson's "vanilla draft made by truncating the same model" (lesson 10's Hard exercise compares it with
Medusa heads). Nothing is trained and no weights are copied: the truncated model shares every tensor with the
target, so it costs no memory beyond its own KV cache, and a forward through L of the target's layers costs
about L / num_layers of a target forward. Its weakness is that the head was trained on the last layer's output,
not the L-th. Self-speculative methods make the target's own layers a better draft in two different ways:
Draft & Verify (Zhang et al. 2023) trains nothing and instead searches for a set of intermediate layers to skip
while drafting; LayerSkip (Elhoushi et al. 2024) trains the model with layer dropout and an early-exit loss so
that exits after its first layers predict well. We use the plain target, with neither.
"""
from __future__ import annotations

import copy

import torch

from lab.drafters.draft_model import DraftModelDrafter
from lab.validation import check_int

__all__ = ["EarlyExitDrafter", "truncated_model"]


def truncated_model(target, num_layers: int):
    """A causal LM made of ``target``'s embedding, its first ``num_layers`` decoder layers, its final norm and its
    LM head — the same module objects, so the weights are shared, not copied.

    Only the shell's own modules (the model object, its inner decoder and the list of layers) are put in eval mode;
    the shared modules keep the target's mode, so building a draft never switches part of the target to eval while
    the rest stays in train mode. The draft therefore runs in the target's mode: a Llama-style model has no dropout
    by default (``attention_dropout`` 0), so its draft is the same in either, and :func:`lab.models.load_pair`
    loads the target in eval mode anyway.

    Works for transformers models laid out as ``model.model.layers`` (Llama, Qwen2, SmolLM2, Mistral).
    Raises ``ValueError`` for another layout or ``num_layers`` outside ``[1, layers - 1]``.
    """
    inner = getattr(target, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        hint = (" (a ModelPair: pass its target, EarlyExitDrafter(pair.target, num_layers))"
                if hasattr(target, "target") and hasattr(target, "draft") else "")
        raise ValueError(f"{type(target).__name__} has no `model.layers`: early exit needs a Llama-style model"
                         f"{hint}")
    total = len(layers)
    if total < 2:  # no valid num_layers at all: say so rather than print an empty range
        raise ValueError(f"early exit needs a target with at least 2 layers (it drafts with the first num_layers "
                         f"of them and must leave at least one out); this model has {total} layer"
                         f"{'s' * (total != 1)} (got num_layers={num_layers!r}); use a deeper target, e.g. pair.target")
    num_layers = check_int(f"num_layers (the target has {total} layers)", num_layers, 1, total - 1)
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = num_layers
    if getattr(config, "layer_types", None):
        config.layer_types = config.layer_types[:num_layers]
    with torch.device("meta"):  # an empty shell: every module is replaced by the target's own below
        shell = type(target)(config)
    for name, module in inner.named_children():
        setattr(shell.model, name, torch.nn.ModuleList(layers[:num_layers]) if name == "layers" else module)
    shell.lm_head = target.lm_head
    shared = {id(module) for module in target.modules()}
    for module in shell.modules():  # not shell.eval(): it would recurse into the target's own modules
        if id(module) not in shared:
            module.training = False
    return shell


class EarlyExitDrafter(DraftModelDrafter):
    """Draft ``n_draft`` tokens per step with the target's first ``num_layers`` layers (:func:`truncated_model`),
    keeping that truncated model's own KV cache exactly as :class:`~lab.drafters.DraftModelDrafter` does.

    ``target``: the transformers model being verified (Llama layout); its modules keep their train / eval mode
    (:func:`truncated_model`). Raises ``ValueError`` for ``num_layers`` outside ``[1, layers - 1]`` or ``n_draft``
    < 1.
    """

    def __init__(self, target, num_layers: int, n_draft: int = 4):
        super().__init__(truncated_model(target, num_layers), n_draft)
        self.num_layers = int(num_layers)

    def __repr__(self) -> str:
        return f"EarlyExitDrafter(num_layers={self.num_layers}, n_draft={self.n_draft})"
