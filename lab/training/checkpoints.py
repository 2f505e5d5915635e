"""How training saves and reloads: finished Llama models (float16 safetensors out, safetensors only in), and the
state of a run in progress, so that a killed run resumes."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

__all__ = ["save_model", "load_checkpoint", "save_training_state", "resume_training_state"]


def save_model(model, tokenizer, path: Path) -> None:
    """Save ``model`` to the folder ``path`` as float16 safetensors plus ``config.json``, and leave it in float32.

    Half precision keeps the committed files small; loading upcasts on CPU. ``tokenizer`` is not written here
    (the pair's tokenizer is saved once, beside its models)."""
    model.to(torch.float16).save_pretrained(path, safe_serialization=True)
    model.to(torch.float32)


def load_checkpoint(path: Path):
    """The ``LlamaForCausalLM`` saved in the local folder ``path``, in float32.

    Reads ``model.safetensors`` only (``use_safetensors=True``): a ``pytorch_model.bin`` there is a pickle, which
    can run code when loaded, so a folder holding only that raises ``OSError`` instead of being read."""
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(path, dtype=torch.float32, use_safetensors=True)


def save_training_state(folder: Path, model, opt, plan: dict, step: int, order: list[int], history: list,
                        minutes: float) -> None:
    """Save a training run's state to ``folder``: ``model``'s weights (safetensors), ``opt``'s state, and the progress
    (``plan``: what a resume must match; the next ``step``; the remaining data ``order``; ``history``; ``minutes``
    so far), written beside ``folder`` and renamed into place, so a kill never leaves half a checkpoint."""
    from safetensors.torch import save_file

    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(partial / "model.safetensors"))
    torch.save(opt.state_dict(), partial / "optimizer.pt")
    progress = {"plan": plan, "step": step, "order": order, "history": history, "minutes": minutes}
    (partial / "progress.json").write_text(json.dumps(progress))
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)


def resume_training_state(folder: Path, model, opt, plan: dict) -> tuple[list, list[int], int, float]:
    """(history, order, next step, minutes so far) from the checkpoint :func:`save_training_state` wrote in
    ``folder``, loaded into ``model`` and ``opt``; a fresh start (``[], [], 0, 0.0``) when there is none or it was
    made with another ``plan`` (recipe or data). The weights load strictly, the optimizer state with
    ``weights_only=True``."""
    from safetensors.torch import load_file

    if not (folder / "progress.json").exists():
        return [], [], 0, 0.0
    progress = json.loads((folder / "progress.json").read_text())
    if progress.get("plan") != plan:
        return [], [], 0, 0.0
    model.load_state_dict(load_file(str(folder / "model.safetensors")), strict=True)
    opt.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
    return progress["history"], progress["order"], progress["step"], progress["minutes"]
