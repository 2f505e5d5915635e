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
from safetensors import SafetensorError

from lab.assets import PAIR_DIR
from lab.validation import check_token_ids

__all__ = ["ModelPair", "PRESETS", "load_pair", "pick_device", "forward", "new_cache", "ModelNotAvailableError",
           "cache_kwarg"]

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
        """Token ids of ``text`` (no special tokens added), a list of ints. Raises ``TypeError`` naming ``text``
        for anything but a ``str`` (a list of strings would come back as a batch, list[list[int]])."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__} {text!r:.60}")
        # verbose=False: the tokenizer's "longer than the maximum sequence length" warning is premature here;
        # generate and the CLI check the context themselves and name the argument to change.
        return self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    def decode(self, ids) -> str:
        """Text of the token ids ``ids`` (list of ints, NumPy integers, or a LongTensor ``[L]`` / ``[1, L]``), special
        tokens kept.

        Raises ``ValueError`` for an id outside the vocabulary ``[0, V)`` (V: the larger of the tokenizer's size
        and the target's logit width), which the tokenizer would otherwise turn into "" without a word, and
        ``TypeError`` for ids that are not integers."""
        vocab = max(len(self.tokenizer), vocab_size(self.target))
        return self.tokenizer.decode(check_token_ids("ids", ids, vocab, allow_empty=True))

    @property
    def eos_token_id(self) -> int | None:
        """The tokenizer's end-of-text id (None if it has none): pass it to ``generate(eos_token_id=...)``."""
        return self.tokenizer.eos_token_id


def _available_devices() -> list[str]:
    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


def pick_device(device=None) -> torch.device:
    """``device`` if given (a ``torch.device`` or a string such as ``"cpu"``, ``"cuda"``, ``"cuda:1"``), else CUDA
    when available, else CPU.

    Raises ``ValueError`` naming the devices this machine has when ``device`` is not a device name, names one
    that is not available here (CUDA on a CPU-only machine, a GPU index past the last one, MPS off Apple) or is
    ``"meta"`` (shapes without data: a model there has no weights)."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    available = _available_devices()
    try:
        chosen = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be a torch device name; this machine has {', '.join(available)}; "
                         f"got {device!r}") from None
    if chosen.type == "cuda":
        ok = torch.cuda.is_available() and (chosen.index is None or chosen.index < torch.cuda.device_count())
    elif chosen.type == "mps":
        ok = "mps" in available
    elif chosen.type == "meta":  # shapes without data: the weights would be dropped and nothing could run
        raise ValueError(f"device must be one that holds data ({', '.join(available)}), got 'meta': tensors there "
                         "have a shape only, so models loaded there would have no weights and could not run")
    else:
        ok = chosen.type == "cpu"
    if not ok:
        raise ValueError(f"device {str(chosen)!r} is not available on this machine; available: "
                         f"{', '.join(available)}")
    return chosen


def _check_dtype(dtype) -> torch.dtype:
    """``dtype`` as a floating ``torch.dtype`` (None = float32); strings such as ``"bfloat16"`` name one."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.removeprefix("torch."), dtype)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError("dtype must be None or a torch floating dtype (torch.float32, torch.bfloat16, "
                         f"torch.float16), got {dtype!r}")
    return dtype


def _hub_reachable(timeout: float = 2.0) -> bool:
    """Can the hub be tried? False in offline mode (huggingface_hub's rule, read now: HF_HUB_OFFLINE, else
    TRANSFORMERS_OFFLINE, set to 1 / on / yes / true); True behind a proxy (HTTPS_PROXY and the like: the download
    goes through it, with huggingface_hub's own time-outs); else whether huggingface.co:443 answers within
    ``timeout`` seconds."""
    from huggingface_hub.constants import ENV_VARS_TRUE_VALUES

    flag = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    if flag is not None and flag.upper() in ENV_VARS_TRUE_VALUES:
        return False
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _from_pretrained(cls, ident: str, name: str, **kwargs):
    local = Path(ident).is_dir()
    try:
        return cls.from_pretrained(ident, local_files_only=True, **kwargs)
    except (OSError, SafetensorError, ValueError) as first:  # missing, or a truncated / git-lfs pointer file
        if local or name == "shakespeare":
            raise ModelNotAvailableError(
                f"the bundled model files at {ident} are missing or broken ({first}); "
                "restore them with `git checkout lab/assets` or retrain with `python -m lab train pair`") from first
        if not isinstance(first, OSError):
            raise ModelNotAvailableError(
                f"the cached files of {ident} cannot be read ({first}); remove them (`hf cache rm model/{ident}`) and "
                "download the model again") from first
        if not _hub_reachable():
            raise ModelNotAvailableError(
                f"preset {name!r} needs {ident}, which is not in the local Hugging Face cache, and the hub cannot be "
                f"reached from here. On a machine with network run `hf download {ident}` (or load the preset once "
                "online), then copy the cache (HF_HOME) here; or use the bundled offline pair: "
                "load_pair('shakespeare')."
            ) from first
    return cls.from_pretrained(ident, **kwargs)


def load_pair(name: str = "shakespeare", device=None, dtype=None) -> ModelPair:
    """Load a draft/target pair by preset name; both models in eval mode on one device.

    ``name``: one of :data:`PRESETS` (``"shakespeare"`` is bundled and works offline). ``device``: defaults to
    :func:`pick_device`. ``dtype``: defaults to float32 (exact parity checks need it; pass torch.bfloat16 on a
    GPU for the larger hub pairs; a string such as ``"bfloat16"`` works too). Raises ``ValueError`` for a name
    that is not one of the preset strings (listing the presets), a device this machine does not have or ``"meta"``
    (listing those it has), a ``dtype`` that is not a torch floating dtype, and if the two models' vocabularies differ;
    :class:`ModelNotAvailableError` when a model is missing and the hub is unreachable.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the bars of a 2-file load are noise in lessons and the CLI
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"unknown model pair {name!r}; name must be one of the presets: {', '.join(PRESETS)}")
    device = pick_device(device)
    dtype = _check_dtype(dtype)
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
    positions of the wrong shape or below 0, and for a batch (``input_ids`` of shape ``[b, n]`` with b > 1: one
    sequence per cache). Raises ``TypeError`` for ids that are not integers, and ``ValueError`` for ids
    outside the vocabulary ``[0, V)`` and for a block that would run past the model's context
    (:func:`context_limit`): the largest position (the largest ``position_ids`` entry, else cache length + n − 1)
    must be below it, since rotary models would otherwise extrapolate silently.
    """
    ids = torch.as_tensor(input_ids)
    if ids.dim() > 2 or (ids.dim() == 2 and ids.size(0) != 1):  # view(1, -1) would glue a batch into one sequence
        raise ValueError(f"input_ids must be one sequence, list[int] or [n] / [1, n], got shape {tuple(ids.shape)}")
    ids = ids.view(1, -1)
    n = ids.size(1)
    if n == 0:
        raise ValueError("input_ids must hold at least one token id, got none")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"input_ids must be integer token ids, got dtype {ids.dtype}")
    vocab = getattr(model.config, "vocab_size", None) or vocab_size(model)  # the config: 10x faster, runs per call
    low, high = (int(x) for x in ids.aminmax())  # one pass, on the CPU for list input (before the copy to the device)
    if low < 0 or high >= vocab:
        raise ValueError(f"input_ids must be token ids in [0, {vocab}) (the model's vocabulary), got "
                         f"{low if low < 0 else high}")
    past = int(cache.get_seq_length())
    positions = None
    if position_ids is not None:  # read once, on the CPU: checked here, moved to the device below
        positions = torch.as_tensor(position_ids, dtype=torch.long).view(1, -1)
        if positions.size(1) != n:
            raise ValueError(f"position_ids must hold one position per new token ({n}), got {positions.size(1)}")
        if int(positions.min()) < 0:
            raise ValueError(f"position_ids must be positions >= 0, got {int(positions.min())}")
    last = int(positions.max()) if positions is not None else past + n - 1
    limit = context_limit(model)
    if limit is not None and last >= limit:
        raise ValueError(f"this forward would use position {last}, past the model's context limit of {limit} "
                         f"positions (cache length {past} + {n} new tokens); keep prompt + new tokens within {limit}")
    ids = ids.to(device=model.device, dtype=torch.long)
    kwargs = {cache_kwarg(type(model)): cache, "use_cache": True, "logits_to_keep": logits_to_keep}
    if attention_mask is not None:
        allow = torch.as_tensor(attention_mask, dtype=torch.bool, device=model.device)
        if allow.shape != (n, n):
            raise ValueError(f"attention_mask must be a bool [n, n] = [{n}, {n}] over the new tokens, "
                             f"got shape {tuple(allow.shape)}")
        full = torch.cat([torch.ones(n, past, dtype=torch.bool, device=model.device), allow], dim=1)
        dtype = next(model.parameters()).dtype
        additive = torch.zeros(full.shape, dtype=dtype, device=model.device)
        additive.masked_fill_(~full, torch.finfo(dtype).min)  # 0 = attend; works for eager and sdpa attention
        kwargs["attention_mask"] = additive[None, None]
    if positions is not None:
        kwargs["position_ids"] = positions.to(model.device)
    if output_hidden_states:
        kwargs["output_hidden_states"] = True
    out = model(input_ids=ids, **kwargs)
    if output_hidden_states:
        return out.logits[0].float(), out.hidden_states[-1][0].float()
    return out.logits[0].float()
