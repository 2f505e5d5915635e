"""Loading draft/target pairs: the bundled Shakespeare pair (offline) and hub presets (online or cached).

The only module that knows transformers model classes and keyword names. Weights load from safetensors only,
never with ``trust_remote_code``. The device is chosen here, once: CUDA when present, else CPU (never MPS by
default, whose kernels are not yet reliable for the exactness checks).
"""
from __future__ import annotations

import functools
import inspect
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import torch

from lab.train import PAIR_DIR

__all__ = ["ModelPair", "PRESETS", "load_pair", "pick_device", "forward", "new_cache", "ModelNotAvailableError",
           "held_out_prompts", "cache_kwarg"]

# name -> (target id, draft id); each pair shares one tokenizer (same family).
PRESETS: dict[str, tuple[str, str]] = {
    "shakespeare": (str(PAIR_DIR / "target"), str(PAIR_DIR / "draft")),
    "gpt2": ("openai-community/gpt2", "distilbert/distilgpt2"),
    "smollm2": ("HuggingFaceTB/SmolLM2-360M", "HuggingFaceTB/SmolLM2-135M"),
    "qwen2.5": ("Qwen/Qwen2.5-1.5B", "Qwen/Qwen2.5-0.5B"),
}


class ModelNotAvailableError(FileNotFoundError):
    """A model is neither bundled nor in the local Hugging Face cache, and the hub cannot be reached."""


@dataclass
class ModelPair:
    """A target (the model whose distribution we keep) and a cheaper draft sharing one tokenizer."""

    name: str
    target: torch.nn.Module
    draft: torch.nn.Module
    tokenizer: object
    device: torch.device
    dtype: torch.dtype

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode(self, ids) -> str:
        return self.tokenizer.decode(list(ids))

    @property
    def eos_token_id(self) -> int | None:
        return self.tokenizer.eos_token_id


def held_out_prompts() -> list[str]:
    """Passages from the bundled pair's held-out split (never trained on), for demos, lessons and the bench."""
    import json

    return json.loads((PAIR_DIR / "prompts.json").read_text(encoding="utf-8"))


def pick_device(device=None) -> torch.device:
    """``device`` if given, else CUDA when available, else CPU."""
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _hub_reachable(timeout: float = 2.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "") or os.environ.get("TRANSFORMERS_OFFLINE", "0") not in ("0", ""):
        return False
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _from_pretrained(cls, ident: str, name: str, **kwargs):
    local = Path(ident).is_dir()
    try:
        return cls.from_pretrained(ident, local_files_only=True, **kwargs)
    except OSError as first:
        if local or name == "shakespeare":
            raise ModelNotAvailableError(
                f"the bundled model files at {ident} are missing or broken ({first}); "
                "restore them with `git checkout lab/assets` or retrain with `python -m lab train pair`") from first
        if not _hub_reachable():
            raise ModelNotAvailableError(
                f"preset {name!r} needs {ident}, which is not in the local Hugging Face cache, and the hub cannot be "
                f"reached from here. On a machine with network run `hf download {ident}` (or load the preset once "
                "online), then copy the cache (HF_HOME) here; or use the bundled offline pair: load_pair('shakespeare')."
            ) from first
    return cls.from_pretrained(ident, **kwargs)


def load_pair(name: str = "shakespeare", device=None, dtype=None) -> ModelPair:
    """Load a draft/target pair by preset name; both models in eval mode on one device.

    ``name``: one of :data:`PRESETS` (``"shakespeare"`` is bundled and works offline). ``device``: defaults to
    :func:`pick_device`. ``dtype``: defaults to float32 (exact parity checks need it; pass torch.bfloat16 on a
    GPU for the larger hub pairs). Raises ``ValueError`` for an unknown name (listing the presets),
    :class:`ModelNotAvailableError` when a model is missing and the hub is unreachable, and ``ValueError`` if
    the two models' vocabularies differ.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the bars of a 2-file load are noise in lessons and the CLI
    if name not in PRESETS:
        raise ValueError(f"unknown model pair {name!r}; presets: {', '.join(PRESETS)}")
    device = pick_device(device)
    dtype = dtype or torch.float32
    target_id, draft_id = PRESETS[name]
    common = dict(dtype=dtype, use_safetensors=True, trust_remote_code=False)
    tokenizer = _from_pretrained(AutoTokenizer, str(PAIR_DIR) if name == "shakespeare" else target_id, name)
    target = _from_pretrained(AutoModelForCausalLM, target_id, name, **common).to(device).eval()
    draft = _from_pretrained(AutoModelForCausalLM, draft_id, name, **common).to(device).eval()
    check_same_vocab(target, draft)
    return ModelPair(name, target, draft, tokenizer, device, dtype)


def vocab_size(model) -> int:
    """Width of the model's output layer (the vocabulary its logits cover)."""
    return model.get_output_embeddings().weight.shape[0]


def check_same_vocab(target, draft) -> None:
    """Raise ``ValueError`` unless target and draft produce logits over the same vocabulary."""
    if vocab_size(target) != vocab_size(draft):
        raise ValueError(f"target and draft vocabularies differ ({vocab_size(target)} vs {vocab_size(draft)} "
                         "logits): speculative decoding needs one shared tokenizer")


def context_limit(model) -> int | None:
    """The longest sequence the model's position embeddings cover, or None if unbounded."""
    return getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)


def new_cache():
    """An empty transformers ``DynamicCache`` (the KV cache one model fills during decoding)."""
    from transformers import DynamicCache

    return DynamicCache()


@functools.lru_cache(maxsize=None)
def cache_kwarg(model_cls) -> str:
    """The keyword under which ``model_cls.forward`` (a transformers model or decoder-layer class) takes its KV
    cache: ``"cache"`` from transformers 5.24 on, ``"past_key_values"`` in older 5.x releases (5.24 still accepts
    the old name, with a FutureWarning)."""
    return "cache" if "cache" in inspect.signature(model_cls.forward).parameters else "past_key_values"


@torch.inference_mode()
def forward(model, input_ids, cache, logits_to_keep: int = 0, output_hidden_states: bool = False, *,
            attention_mask=None, position_ids=None):
    """Run ``model`` on new tokens ``input_ids`` (list[int] or LongTensor ``[n]``) appending to ``cache``.

    Returns logits ``[n, V]`` (or ``[logits_to_keep, V]``; 0 keeps all), float32, on the model's device; the cache
    grows by n positions, whose position ids continue from the cache length. With ``output_hidden_states`` it
    returns ``(logits, hidden)``: ``hidden`` float32 ``[n, D]`` is the last layer's state after the final norm,
    the input of the LM head (what Medusa heads and EAGLE drafts read, lessons 10-11).

    For a branching block (Lookahead decoding, lesson 09; token trees later) pass ``attention_mask``, a bool
    ``[n, n]`` saying which of the *new* tokens each new token may attend to (True = may attend; every cached
    position is always visible), and ``position_ids`` (``[n]`` ints, absolute positions). Without them the block
    is causal and continues from the cache length. Raises ``ValueError`` for empty ``input_ids`` and for masks or
    positions of the wrong shape.
    """
    ids = torch.as_tensor(input_ids, dtype=torch.long, device=model.device).view(1, -1)
    if ids.size(1) == 0:
        raise ValueError("input_ids must hold at least one token id, got none")
    kwargs = {cache_kwarg(type(model)): cache, "use_cache": True, "logits_to_keep": logits_to_keep}
    n = ids.size(1)
    if attention_mask is not None:
        allow = torch.as_tensor(attention_mask, dtype=torch.bool, device=model.device)
        if allow.shape != (n, n):
            raise ValueError(f"attention_mask must be a bool [n, n] = [{n}, {n}] over the new tokens, "
                             f"got shape {tuple(allow.shape)}")
        past = int(cache.get_seq_length())
        full = torch.cat([torch.ones(n, past, dtype=torch.bool, device=model.device), allow], dim=1)
        dtype = next(model.parameters()).dtype
        additive = torch.zeros(full.shape, dtype=dtype, device=model.device)
        additive.masked_fill_(~full, torch.finfo(dtype).min)  # 0 = attend; works for eager and sdpa attention
        kwargs["attention_mask"] = additive[None, None]
    if position_ids is not None:
        positions = torch.as_tensor(position_ids, dtype=torch.long, device=model.device).view(1, -1)
        if positions.size(1) != n:
            raise ValueError(f"position_ids must hold one position per new token ({n}), got {positions.size(1)}")
        kwargs["position_ids"] = positions
    if output_hidden_states:
        kwargs["output_hidden_states"] = True
    out = model(input_ids=ids, **kwargs)
    if output_hidden_states:
        return out.logits[0].float(), out.hidden_states[-1][0].float()
    return out.logits[0].float()
