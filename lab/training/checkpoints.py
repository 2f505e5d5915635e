"""How training saves and reloads Llama checkpoints: float16 safetensors out, safetensors only in."""
from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["save_model", "load_checkpoint"]


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
