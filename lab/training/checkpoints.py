"""How training saves and reloads: finished Llama models (float16 safetensors out, safetensors only in), and the
state of a run in progress, so that a killed run resumes."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

__all__ = ["save_model", "load_checkpoint", "save_training_state", "resume_training_state", "discard_training_state"]


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


def _beside(folder: Path, suffix: str) -> Path:
    return folder.with_name(folder.name + suffix)


def save_training_state(folder: Path, model, opt, plan: dict, step: int, order: list[int], history: list,
                        minutes: float) -> None:
    """Save a training run's state to ``folder``: ``model``'s weights (safetensors), ``opt``'s state, and the progress
    (``plan``: what a resume must match; the next ``step``; the remaining data ``order``; ``history``; ``minutes``
    so far). Written into ``<folder>.partial`` (``progress.json`` last), then the previous checkpoint is renamed to
    ``<folder>.old``, the new one into place, and the old one deleted: at every moment one complete checkpoint
    exists, which :func:`resume_training_state` finds wherever a kill left it."""
    from safetensors.torch import save_file

    partial, old = _beside(folder, ".partial"), _beside(folder, ".old")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(partial / "model.safetensors"))
    torch.save(opt.state_dict(), partial / "optimizer.pt")
    progress = {"plan": plan, "step": step, "order": order, "history": history, "minutes": minutes}
    (partial / "progress.tmp").write_text(json.dumps(progress))
    (partial / "progress.tmp").rename(partial / "progress.json")  # its presence marks the folder complete
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    partial.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def discard_training_state(folder: Path) -> None:
    """Delete the checkpoint in ``folder`` and what a killed save left beside it (a finished run calls this)."""
    for path in (folder, _beside(folder, ".partial"), _beside(folder, ".old")):
        shutil.rmtree(path, ignore_errors=True)


def resume_training_state(folder: Path, model, opt, plan: dict, log=None
                          ) -> tuple[list, list[int], int, float]:
    """(history, order, next step, minutes so far) from the checkpoint :func:`save_training_state` wrote in
    ``folder`` (the newest complete one after a kill during a save: ``<folder>.partial``, ``folder``, then
    ``<folder>.old``), loaded into ``model`` and ``opt``; a fresh start (``[], [], 0, 0.0``) when there is none or
    it was made with another ``plan`` (recipe or data), which ``log`` (a callable taking a line, or None) is told
    about: the next save overwrites it. The weights load strictly, the optimizer state with ``weights_only=True``."""
    from safetensors.torch import load_file

    found = next((path for path in (_beside(folder, ".partial"), folder, _beside(folder, ".old"))
                  if (path / "progress.json").exists()), None)
    if found is None:
        return [], [], 0, 0.0
    progress = json.loads((found / "progress.json").read_text())
    if found != folder and progress.get("plan") == plan:
        # a kill left it beside the folder: move it in, so that the next save (which clears .partial first)
        # cannot lose it
        old = _beside(folder, ".old")
        if found.name.endswith(".partial"):
            shutil.rmtree(old, ignore_errors=True)
            if folder.exists():
                folder.rename(old)
        found.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
        found = folder
    if progress.get("plan") != plan:
        if log is not None:
            log(f"{found} was saved by a run with other settings or data: starting from step 0 (the next "
                "checkpoint replaces it)")
        return [], [], 0, 0.0
    model.load_state_dict(load_file(str(found / "model.safetensors")), strict=True)
    opt.load_state_dict(torch.load(found / "optimizer.pt", weights_only=True))
    return progress["history"], progress["order"], progress["step"], progress["minutes"]
