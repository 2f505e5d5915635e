"""What speculation costs besides time per token: memory (weights and KV cache), fixed set-up time, and the
throughput it gives up when the accelerator is busy with a large batch (lesson 13, "when not to speculate"); and the
timings those costs are measured with: one forward (:func:`time_forward`), one drafting step of the draft model
(:func:`draft_step_ms`) or of the EAGLE draft (:func:`eagle_step_ms`).

Units: bytes for memory, milliseconds for time, tokens per second for throughput. A "forward-pass time unit" is the
time of one memory-bound target forward pass (reading every weight once).

Sources:
- KV cache: every decoder layer stores one key and one value vector per KV head per token (Vaswani et al. 2017;
  grouped-query attention, Ainslie et al. 2023, shares each KV head among several query heads), so
  ``bytes per token = 2 * layers * kv_heads * head_dim * bytes_per_value``.
- Throughput under load: Leviathan et al. 2023, section 3, "Number of Arithmetic Operations" (speculation spends
  extra computation — every rejected draft token is verified for nothing — to make fewer serial target calls, which
  pays only while compute is idle) and the roofline model
  (Williams, Waterman and Patterson 2009): a pass takes the longer of its memory time and its compute time.
- Published configurations: the ``config.json`` files of meta-llama/Llama-3.1-70B and meta-llama/Llama-3.1-8B on
  the Hugging Face hub; the H100 SXM numbers are NVIDIA's data sheet, as in lesson 01.
"""
from __future__ import annotations

import math
import statistics
import time
from fractions import Fraction
from numbers import Real

import torch

from lab.metrics import expected_tokens_per_call
from lab.models import synchronize
from lab.validation import MAX_LENGTH, check_int, plain_number

__all__ = [
    "parameter_bytes", "extra_parameter_bytes", "llama_parameter_count",
    "kv_bytes_per_token", "kv_cache_bytes_per_token", "cache_bytes",
    "pass_time", "speculative_throughput_gain", "break_even_batch", "draft_length_schedule", "break_even_tokens",
    "time_forward", "draft_step_ms", "eagle_step_ms", "MAX_REPEATS", "MAX_TIMED_BATCH", "MAX_MODEL_DIM",
    "MAX_BYTES_PER_VALUE",
    "LLAMA_3_1_70B", "LLAMA_3_1_8B", "H100_SXM",
]

# --- published numbers ----------------------------------------------------------------------------------------
LLAMA_3_1_70B = {
    "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192,
    "intermediate_size": 28672, "vocab_size": 128256, "tie_word_embeddings": False, "dtype": "bfloat16",
}
"""meta-llama/Llama-3.1-70B, ``config.json`` on the Hugging Face hub (head_dim = 8192 / 64 = 128)."""

LLAMA_3_1_8B = {
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
    "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False, "dtype": "bfloat16",
}
"""meta-llama/Llama-3.1-8B, ``config.json`` on the Hugging Face hub (head_dim = 4096 / 32 = 128)."""

H100_SXM = {"peak_flops": 989e12, "bandwidth": 3.35e12}
"""NVIDIA H100 SXM data sheet: dense bf16 FLOP/s and HBM3 bytes/s (lesson 01). Ridge point ≈ 295 FLOPs per byte."""


# --- argument checks --------------------------------------------------------------------------------------------
def _positive_int(name, given, minimum=1, maximum=None) -> int:
    """``given`` as an int in [``minimum``, ``maximum``] (``lab.validation.check_int``); a one-element tensor counts as
    its value, as in lab.metrics."""
    return check_int(name, plain_number(given), minimum, maximum)


MAX_MODEL_DIM = 1 << 20
"""The largest layer count, KV-head count or head size :func:`kv_bytes_per_token` takes (about a million, far beyond
any model's: 126 layers, 128 heads, 256 per head): a larger one is a mistake, and 10**400 overflowed a float."""
MAX_BYTES_PER_VALUE = 8
"""The largest ``bytes_per_value`` (float64): 16 or 32 is a size in bits (bf16, float32), not bytes."""


MAX_TIMED_BATCH = 4096
"""The largest batch :func:`time_forward` times (10**9 sequences asked the allocator for 264 GB)."""
MAX_REPEATS = 1000
"""The most timed repeats one call of :func:`time_forward`, :func:`draft_step_ms` or :func:`eagle_step_ms` takes: a
median over more says nothing new, and 10**9 ran for hours."""


def _timing_args(repeats, context, seed) -> tuple[int, int, int]:
    """``repeats`` in [1, :data:`MAX_REPEATS`], ``context`` >= 0 and ``seed`` a 64-bit integer >= 0, checked by name
    (a float seed raised torch's own "manual_seed expected a long")."""
    return (check_int("repeats", plain_number(repeats), 1, MAX_REPEATS), check_int("context", plain_number(context), 0),
            check_int("seed", plain_number(seed), 0, 2**63 - 1))


def _number(name, given, *, positive=False) -> float:
    value = plain_number(given)
    try:
        bad = isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value)
    except OverflowError:  # an int too large for a float (10**400) is no finite float either
        bad = True
    if bad or value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be a finite number {'> 0' if positive else '>= 0'}, got {given!r}")
    return float(value)


def _alpha(given) -> float:
    value = plain_number(given)
    if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(value) or not 0 <= value <= 1:
        raise ValueError("alpha (the per-token acceptance probability) must be a number in [0, 1] (a one-element "
                         f"tensor works), got {given!r}")
    return float(value)


def _check_module(name, value) -> None:
    if not isinstance(value, torch.nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module (a model), got {type(value).__name__}")


# --- memory: weights -----------------------------------------------------------------------------------------------
def _unique_parameters(model):
    seen = set()
    for p in model.parameters():
        key = (p.untyped_storage().data_ptr(), p.storage_offset(), tuple(p.shape))
        if key not in seen:
            seen.add(key)
            yield p


def parameter_bytes(model: torch.nn.Module) -> int:
    """Bytes of ``model``'s parameters: ``sum(numel * element_size)``, each tensor counted once (tied embeddings
    are one tensor). Buffers (e.g. rotary frequency tables) are not counted. Unit: bytes.

    Raises ``TypeError`` when ``model`` is not a ``torch.nn.Module`` (e.g. a model pair: pass ``pair.target``)."""
    _check_module("model", model)
    return sum(p.numel() * p.element_size() for p in _unique_parameters(model))


def extra_parameter_bytes(model: torch.nn.Module, target: torch.nn.Module) -> int:
    """Bytes of ``model``'s parameters that are *not* the target's own tensors: what keeping ``model`` next to
    ``target`` adds to memory. A separate draft model adds all of its bytes; an early-exit draft (the target's own
    first layers, :func:`lab.drafters.early_exit.truncated_model`) adds 0; Medusa heads and an EAGLE draft add their
    own layers (they reuse the target's embedding and LM head without registering them). Unit: bytes. Raises
    ``TypeError`` when ``model`` or ``target`` is not a ``torch.nn.Module``."""
    _check_module("model", model)
    _check_module("target", target)
    shared = {p.untyped_storage().data_ptr() for p in target.parameters()}
    return sum(p.numel() * p.element_size() for p in _unique_parameters(model)
               if p.untyped_storage().data_ptr() not in shared)


def _get(config, key, default=None):
    if isinstance(config, dict):
        return config.get(key, default)
    return getattr(config, key, default)


def _require(config, key) -> int:
    value = _get(config, key)
    if value is None:
        raise ValueError(f"config has no {key!r}; pass a transformers config or a dict with the config.json keys")
    return _positive_int(f"config[{key!r}]", value)


def _head_dim(config) -> int:
    explicit = _get(config, "head_dim")
    if explicit is not None:  # 0 is an error, not "absent"
        return _positive_int("config['head_dim']", explicit)
    hidden, heads = _require(config, "hidden_size"), _require(config, "num_attention_heads")
    if hidden % heads:
        raise ValueError(f"config['hidden_size'] ({hidden}) is not a multiple of num_attention_heads ({heads}) "
                         "and the config gives no head_dim")
    return hidden // heads


def _kv_heads(config) -> int:
    kv = _get(config, "num_key_value_heads")
    return _positive_int("config['num_key_value_heads']", kv) if kv is not None else \
        _require(config, "num_attention_heads")


def llama_parameter_count(config) -> int:
    """Parameters of a Llama-layout causal LM (Llama 2/3, Qwen2 without biases, Mistral) from its config numbers:
    embedding + per layer (q, k, v, o projections; gate, up, down MLP; two RMS norms) + final norm + LM head (none
    extra when ``tie_word_embeddings``; a config without that key is untied, as ``LlamaConfig``, ``Qwen2Config`` and
    ``MistralConfig`` default to). ``config``: a transformers config or a dict with the ``config.json`` keys.
    Raises ``ValueError`` when a needed key is missing or not a positive integer, or ``tie_word_embeddings`` is not
    a bool. Unit: parameters."""
    hidden, layers = _require(config, "hidden_size"), _require(config, "num_hidden_layers")
    heads, mlp, vocab = _require(config, "num_attention_heads"), _require(config, "intermediate_size"), \
        _require(config, "vocab_size")
    head_dim, kv = _head_dim(config), _kv_heads(config)
    attention = hidden * heads * head_dim * 2 + hidden * kv * head_dim * 2   # q and o; k and v
    per_layer = attention + 3 * hidden * mlp + 2 * hidden                   # + gate, up, down; two norms
    tied = _get(config, "tie_word_embeddings", False)
    if not isinstance(tied, bool):  # the string "false" would count as tied
        raise ValueError(f"config['tie_word_embeddings'] must be True or False, got {tied!r}")
    return vocab * hidden * (1 if tied else 2) + layers * per_layer + hidden


# --- memory: KV cache ------------------------------------------------------------------------------------------
def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_value: float) -> int:
    """KV-cache bytes one token adds: ``2 * layers * kv_heads * head_dim * bytes_per_value`` (a key and a value
    vector of ``head_dim`` numbers per KV head per layer). ``bytes_per_value``: 4 for float32, 2 for bf16/fp16,
    1 for fp8, 0.5 for 4-bit (bytes, not bits). Raises ``ValueError`` naming the argument for a count (``layers``,
    ``kv_heads``, ``head_dim``) that is not an integer in [1, :data:`MAX_MODEL_DIM`] or a size that is not a number
    in (0, :data:`MAX_BYTES_PER_VALUE`]: a model without layers caches nothing, and is no model to size. Unit:
    bytes."""
    layers = _positive_int("layers", layers, 1, MAX_MODEL_DIM)
    kv_heads = _positive_int("kv_heads", kv_heads, 1, MAX_MODEL_DIM)
    head_dim = _positive_int("head_dim", head_dim, 1, MAX_MODEL_DIM)
    size = _number("bytes_per_value", bytes_per_value, positive=True)
    if size > MAX_BYTES_PER_VALUE:
        raise ValueError(f"bytes_per_value must be a number of bytes in (0, {MAX_BYTES_PER_VALUE}] (2 for bf16/fp16, "
                         f"4 for float32, 1 for fp8), got {bytes_per_value!r}: is that a size in bits?")
    return int(round(2 * layers * kv_heads * head_dim * size))


def _bytes_of_dtype(dtype) -> int:
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.replace("torch.", ""), None)
    if not isinstance(dtype, torch.dtype):
        return 0
    if not dtype.is_floating_point:  # an int8 or bool "dtype" is no size of cached keys and values
        raise ValueError(f"the config's dtype {dtype} is not a floating-point type, so it gives no KV-cache size; "
                         "pass bytes_per_value (2 for bf16/fp16, 4 for float32, 1 for fp8)")
    return torch.empty((), dtype=dtype).element_size()


def kv_cache_bytes_per_token(config, bytes_per_value: float | None = None) -> int:
    """KV-cache bytes per token of a model from its config: :func:`kv_bytes_per_token` with
    ``num_hidden_layers``, ``num_key_value_heads`` (default ``num_attention_heads``) and ``head_dim`` (default
    ``hidden_size // num_attention_heads``).

    ``config``: a transformers config, a dict with the ``config.json`` keys, or a transformers model (its
    ``.config``, and by default the element size of its parameters). ``bytes_per_value`` defaults to that, else to
    the size of the config's ``dtype`` (``load_pair`` models record the dtype they were loaded in). Assumes every
    layer caches every token (no sliding window, no layers sharing a cache). Raises ``ValueError`` for a missing
    key, or no ``bytes_per_value`` and no floating-point dtype to take it from. Unit: bytes."""
    if isinstance(config, torch.nn.Module):
        model = config
        config = getattr(model, "config", None)
        if config is None:
            raise ValueError(f"{type(model).__name__} has no .config; pass its transformers config")
        if bytes_per_value is None:
            bytes_per_value = next(model.parameters()).element_size()
    if bytes_per_value is None:
        dtype = _get(config, "dtype") or (config.get("torch_dtype") if isinstance(config, dict) else None)
        bytes_per_value = _bytes_of_dtype(dtype)
        if not bytes_per_value:
            named = "names no dtype" if dtype is None else f"names a dtype torch does not know ({dtype!r})"
            raise ValueError(f"bytes_per_value is needed: the config {named}; pass 2 for bf16/fp16, 4 for float32, "
                             "1 for fp8 (or a config dtype such as 'bfloat16')")
    return kv_bytes_per_token(_require(config, "num_hidden_layers"), _kv_heads(config), _head_dim(config),
                              bytes_per_value)


def cache_bytes(cache) -> int:
    """Bytes held by a transformers KV cache right now: the sum of ``numel * element_size`` over every layer's key
    and value tensors (``DynamicCache.layers`` in transformers 5; a legacy tuple of ``(key, value)`` pairs also
    works). Layers not filled yet count 0. Raises ``TypeError`` for an object with neither layout (a tuple whose items
    are not pairs included). Unit: bytes."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        pairs = [(getattr(layer, "keys", None), getattr(layer, "values", None)) for layer in layers]
    elif isinstance(cache, (tuple, list)):
        pairs = list(cache)
    else:
        raise TypeError(f"{type(cache).__name__} is not a transformers cache (no `.layers`) nor a tuple of "
                        "(key, value) pairs")
    bad = next((pair for pair in pairs if not (isinstance(pair, (tuple, list)) and len(pair) == 2)), None)
    if bad is not None:  # a bare int raised "'int' object is not iterable"
        raise TypeError(f"cache must be a transformers cache or a tuple of (key, value) pairs, got an item "
                        f"{type(bad).__name__} {str(bad)[:40]}")
    total = 0
    for pair in pairs:
        for tensor in pair:
            if isinstance(tensor, torch.Tensor):
                total += tensor.numel() * tensor.element_size()
    return total


# --- throughput under load ---------------------------------------------------------------------------------------
def pass_time(tokens: float, ridge_tokens: float) -> float:
    """Roofline time of one forward pass over ``tokens`` tokens (summed over the batch), in memory-bound pass units:
    ``max(1, tokens / ridge_tokens)``. Below ``ridge_tokens`` the pass is memory-bound (reading the weights
    dominates, extra tokens are free); above it, compute-bound (time grows with the tokens).

    Raises ``ValueError`` naming the argument when ``tokens`` is not a finite number >= 0 or ``ridge_tokens`` not a
    finite number > 0 (NaN, a bool or a string included)."""
    tokens = _number("tokens", tokens)
    return max(1.0, tokens / _number("ridge_tokens", ridge_tokens, positive=True))


def _ridge_tokens(flops_per_byte: float, bytes_per_param: float) -> float:
    # A pass over T tokens does 2 FLOPs per parameter per token and reads bytes_per_param per parameter:
    # intensity 2T / bytes_per_param (lesson 01), which reaches the chip's ridge flops_per_byte at this T.
    ridge = flops_per_byte * bytes_per_param / 2
    if not (math.isfinite(ridge) and ridge > 0):  # each finite and > 0, but the product over- or underflowed
        raise ValueError(f"flops_per_byte * bytes_per_param / 2 (the ridge, in tokens) must be finite and > 0, got "
                         f"{flops_per_byte!r} * {bytes_per_param!r} / 2 = {ridge!r}")
    return ridge


def speculative_throughput_gain(batch: int, n_draft: int, alpha: float, cost_ratio: float, flops_per_byte: float,
                                bytes_per_param: float = 2.0) -> float:
    """Predicted throughput of speculative decoding over autoregressive decoding (tokens/s ÷ tokens/s) when
    ``batch`` sequences decode together on one accelerator. Above 1 speculation helps; below 1 it costs throughput.

    The model (Leviathan et al. 2023, section 3, "Number of Arithmetic Operations", with the roofline model):
    - a forward pass over T tokens (all sequences together) takes ``pass_time(T, R)`` = max(1, T / R) units, where
      R = ``flops_per_byte * bytes_per_param / 2`` is the token count at which its arithmetic intensity
      (2 FLOPs per parameter per token over ``bytes_per_param`` bytes per parameter read once) reaches the chip's
      ridge point ``flops_per_byte`` (peak FLOP/s ÷ bandwidth bytes/s; H100 SXM bf16 ≈ 295);
    - autoregressive: one pass over ``batch`` tokens emits ``batch`` tokens;
    - speculative: ``n_draft`` draft passes over ``batch`` tokens, each ``cost_ratio`` (c) times the target's time
      for the same tokens (the draft is on the same roofline: same chip, same bytes per parameter), then one target
      pass over ``batch * (n_draft + 1)`` tokens; it emits ``batch * expected_tokens_per_call(alpha, n_draft)``.

    So gain = E · t(B) / (N · c · t(B) + t(B(N+1))): at batch 1 (while N + 1 < R) it is lesson 06's
    ``predicted_speedup``; once B ≥ R it is E / (N + 1 + N c) < 1 — every rejected draft is compute thrown away.

    Ignores, on purpose: attention's reads of the KV cache (they grow with batch and context and would favour
    speculation a little, since one verification reads each sequence's cache once for N + 1 tokens), the catch-up
    token a draft model feeds after a full acceptance, scheduling and sampling overheads, and the draft's own KV
    cache taking memory from the batch. Raises ``ValueError`` for ``batch`` outside [1,
    :data:`lab.validation.MAX_LENGTH`], ``n_draft`` < 1, ``alpha`` outside [0, 1], a negative ``cost_ratio``,
    ``flops_per_byte`` / ``bytes_per_param`` <= 0, or numbers so large that a pass's time overflows a float.
    """
    batch = _positive_int("batch", batch, 1, MAX_LENGTH)
    n = _positive_int("n_draft", n_draft)
    alpha = _alpha(alpha)
    c = _number("cost_ratio", cost_ratio)
    ridge = _ridge_tokens(_number("flops_per_byte", flops_per_byte, positive=True),
                          _number("bytes_per_param", bytes_per_param, positive=True))
    one = pass_time(batch, ridge)
    verify = pass_time(batch * (n + 1), ridge)
    if not (math.isfinite(one) and math.isfinite(verify)):  # a ridge so small that batch / ridge overflows
        raise ValueError(f"flops_per_byte * bytes_per_param / 2 = {ridge!r} tokens is too small a ridge for batch "
                         f"{batch}: give flops_per_byte in FLOPs per byte (an H100 SXM in bf16 is about 295)")
    speculative = n * c * one + verify
    if not math.isfinite(speculative):  # n_draft * cost_ratio overflowed
        raise ValueError(f"n_draft * cost_ratio = {n} * {c!r} draft passes overflow a float: cost_ratio is the "
                         "draft's time over the target's (a small number, such as 0.05)")
    return expected_tokens_per_call(alpha, n) * one / speculative


def break_even_batch(n_draft: int, alpha: float, cost_ratio: float, flops_per_byte: float,
                     bytes_per_param: float = 2.0, max_batch: int = 1 << 16) -> int | None:
    """The smallest batch at which :func:`speculative_throughput_gain` falls below 1 (speculation starts to cost
    throughput), searching 1..``max_batch``; None if it never does there. The gain never rises with the batch,
    so a bisection finds it. Same arguments as :func:`speculative_throughput_gain`; raises ``ValueError`` naming the
    argument as it does (``n_draft`` < 1, ``alpha`` outside [0, 1], a negative or non-finite ``cost_ratio``,
    ``flops_per_byte`` / ``bytes_per_param`` <= 0; bools are not numbers) and for ``max_batch`` that is not an
    integer in [1, :data:`lab.validation.MAX_LENGTH`]."""
    max_batch = _positive_int("max_batch", max_batch, 1, MAX_LENGTH)

    def loses(b):
        return speculative_throughput_gain(b, n_draft, alpha, cost_ratio, flops_per_byte, bytes_per_param) < 1

    if not loses(max_batch):
        return None
    lo, hi = 1, max_batch  # loses(hi) is True
    if loses(lo):
        return 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if loses(mid):
            hi = mid
        else:
            lo = mid
    return hi


def draft_length_schedule(alpha: float, cost_ratio: float, flops_per_byte: float, max_n: int = 8,
                          max_batch: int = 512, bytes_per_param: float = 2.0) -> list[list[int]]:
    """The draft length with the highest :func:`speculative_throughput_gain` at every batch size 1..``max_batch``,
    as ranges ``[[first_batch, last_batch, n_draft], ...]`` in batch order; ``n_draft`` 0 = do not speculate (gain
    1), chosen wherever no N in 1..``max_n`` beats it. On ties the smaller N wins (gains compared rounded to 12
    decimals).

    This is the shape of vLLM's dynamic speculative decoding setting, ``num_speculative_tokens_per_batch_size`` in
    ``--speculative-config`` (vLLM docs, "Dynamic Speculative Decoding"; with ``num_speculative_tokens`` at least
    the largest N listed; past the last range vLLM keeps the last N). Older vLLM releases (V0) had a single threshold,
    ``speculative_disable_by_batch_size``, instead. Lesson 13.
    Assumes α does not change with the batch. Same arguments as :func:`speculative_throughput_gain` (``alpha`` in
    [0, 1], ``cost_ratio`` >= 0, ``flops_per_byte`` and ``bytes_per_param`` > 0); raises ``ValueError`` naming the
    argument as it does, and for ``max_n`` outside [1, 64] or ``max_batch`` outside [1, 4096] (the schedule scores
    every N at every batch size: 1,000 × 1,000 took 8 s on the course's CPU, the largest allowed about 2)."""
    max_n = check_int("max_n", max_n, 1, 64)
    max_batch = check_int("max_batch", max_batch, 1, 4096)
    ranges: list[list[int]] = []
    for batch in range(1, max_batch + 1):
        best_n, best = 0, 1.0
        for n in range(1, max_n + 1):
            gain = round(speculative_throughput_gain(batch, n, alpha, cost_ratio, flops_per_byte, bytes_per_param), 12)
            if gain > best:
                best_n, best = n, gain
        if ranges and ranges[-1][2] == best_n:
            ranges[-1][1] = batch
        else:
            ranges.append([batch, batch, best_n])
    return ranges


def break_even_tokens(setup_ms: float, ar_ms_per_token: float, spec_ms_per_token: float) -> int | None:
    """The fewest new tokens for which speculative decoding takes strictly less time than autoregressive decoding,
    when speculation pays a fixed ``setup_ms`` once (the draft's prefill, drafter reset, …) and then
    ``spec_ms_per_token`` per token against ``ar_ms_per_token`` (the target's shared prefill cancels out).
    Smallest n >= 1 with ``setup_ms + n * spec_ms_per_token < n * ar_ms_per_token``; None when speculation's
    per-token time is not below autoregressive (it never catches up). Raises ``ValueError`` for a negative or
    non-finite time. Unit: tokens.

    Closed form, ``floor(setup / (ar - spec)) + 1`` (at least 1), computed exactly on the given numbers (as
    fractions, no rounding): a set-up that is an exact multiple of the saving per token is a tie at that n, not a
    win, and nearly equal per-token times give a very large n at once instead of a long count."""
    setup = _number("setup_ms", setup_ms)
    ar = _number("ar_ms_per_token", ar_ms_per_token)
    spec = _number("spec_ms_per_token", spec_ms_per_token)
    if spec >= ar:
        return None
    saving = Fraction(ar) - Fraction(spec)   # exact: a float converts to a Fraction without rounding
    return max(1, math.floor(Fraction(setup) / saving) + 1)


# --- timing ----------------------------------------------------------------------------------------------------
@torch.inference_mode()
def time_forward(model, batch: int = 1, new_tokens: int = 1, context: int = 32, repeats: int = 5,
                 seed: int = 0) -> float:
    """Median wall time (ms) of one forward pass of ``model`` over ``new_tokens`` new tokens for each of ``batch``
    sequences, on top of a KV cache already holding ``context`` tokens per sequence: the shape of one decoding
    step (``new_tokens`` = 1) or one verification (``new_tokens`` = N + 1) at that batch size.

    Token ids are random (fixed ``seed``); what they say does not change the cost. One untimed warm-up pass, then
    ``repeats`` timed ones, each after cutting the cache back to ``context``. Raises ``ValueError`` for a
    non-positive ``batch``, ``new_tokens`` or ``repeats``, a negative ``context``, or more positions than the
    model's context, a ``batch`` above :data:`MAX_TIMED_BATCH` or ``repeats`` above :data:`MAX_REPEATS`, and
    ``TypeError`` for a ``model`` that is not a torch model (a pair: pass ``pair.target``). Unit: ms."""
    from lab.kv import rollback
    from lab.models import cache_kwarg, context_limit, new_cache, vocab_size

    _check_module("model", model)
    batch = check_int("batch", plain_number(batch), 1, MAX_TIMED_BATCH)
    new_tokens = _positive_int("new_tokens", new_tokens)
    repeats, context, seed = _timing_args(repeats, context, seed)
    limit = context_limit(model)
    if limit is not None and context + new_tokens > limit:
        raise ValueError(f"context ({context}) + new_tokens ({new_tokens}) exceeds the model's {limit} positions")
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(vocab_size(model), (batch, context + new_tokens), generator=generator).to(device)
    key = cache_kwarg(type(model))
    cache = new_cache()
    if context:
        model(input_ids=ids[:, :context], use_cache=True, logits_to_keep=1, **{key: cache})
    times = []
    for i in range(repeats + 1):
        rollback(cache, context)
        synchronize(device)
        start = time.perf_counter()
        model(input_ids=ids[:, context:], use_cache=True, **{key: cache})
        synchronize(device)
        if i:  # the first pass warms up allocators and kernels
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


@torch.no_grad()
def draft_step_ms(drafter, context: int = 128, repeats: int = 5, seed: int = 0) -> float:
    """Median wall time (ms) of one drafting step of a :class:`lab.drafters.DraftModelDrafter`: one token through
    its draft model on a KV cache of ``context`` tokens, and its logits (over the whole head, or its draft
    vocabulary's rows), as :meth:`~lab.drafters.DraftModelDrafter.propose` runs it per drafted token
    (:meth:`~lab.drafters.DraftModelDrafter.next_logits`). Random tokens (fixed ``seed``); the cache is rebuilt by
    ``reset`` before each of one untimed and ``repeats`` timed steps. Raises ``ValueError`` for ``repeats`` outside
    [1, :data:`MAX_REPEATS`], a negative ``context`` or a ``seed`` that is not an integer >= 0, ``TypeError`` for a
    ``drafter`` without ``reset`` and ``next_logits`` (a draft model itself: wrap it,
    ``DraftModelDrafter(model, 1)``)."""
    repeats, context, seed = _timing_args(repeats, context, seed)
    if not (hasattr(drafter, "reset") and hasattr(drafter, "next_logits")):
        raise TypeError(f"drafter must be a lab.drafters.DraftModelDrafter (e.g. DraftModelDrafter(pair.draft, 1)), "
                        f"got {type(drafter).__name__}")
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(drafter.vocab_size, (context + 1,), generator=generator).tolist()
    device = next(drafter.model.parameters()).device
    times = []
    for i in range(repeats + 1):
        drafter.reset(ids)  # the cache holds the first `context` tokens; the last one is fed, timed
        synchronize(device)
        start = time.perf_counter()
        drafter.next_logits(ids[-1:])
        synchronize(device)
        if i:
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def eagle_step_ms(model, context: int = 128, repeats: int = 5, seed: int = 0) -> float:
    """Median wall time (ms) of one EAGLE drafting step (:class:`lab.drafters.eagle.EagleDraftModel`): one
    (feature, token) pair through the draft layer on a KV cache of ``context`` pairs, then its logits over the whole
    vocabulary (the draft vocabulary's rows, or the target's LM head), as :class:`lab.drafters.eagle.EagleDrafter`
    runs it per drafted token. Random features and tokens (fixed ``seed``); one untimed warm-up. Divided by a target
    forward it is the draft's cost ratio c. Raises ``ValueError`` for ``repeats`` outside [1, :data:`MAX_REPEATS`], a
    negative ``context`` or a ``seed`` that is not an integer >= 0, ``TypeError`` for a ``model`` that is not an EAGLE
    draft (its ``config`` a dict with ``feature_size``)."""
    from lab.kv import rollback
    from lab.models import new_cache

    repeats, context, seed = _timing_args(repeats, context, seed)
    if not (isinstance(model, torch.nn.Module) and isinstance(getattr(model, "config", None), dict)
            and "feature_size" in model.config):
        raise TypeError(f"model must be an EAGLE draft (lab.drafters.eagle.EagleDraftModel, e.g. "
                        f"EagleDrafter.from_pretrained(pair).model), got {type(model).__name__}")
    param = next(model.parameters())
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(context + 1, model.config["feature_size"], generator=generator).to(param.device,
                                                                                              param.dtype)
    tokens = torch.randint(model.config["vocab_size"], (context + 1,), generator=generator).tolist()
    cache = new_cache()
    if context:
        model(features[:context], tokens[:context], cache, position_ids=torch.arange(1, context + 1))
    times = []
    for i in range(repeats + 1):
        rollback(cache, context)
        synchronize(param.device)
        start = time.perf_counter()
        predicted = model(features[context:], tokens[context:], cache, position_ids=[context + 1])
        model.logits(predicted[-1]).argmax()
        synchronize(param.device)
        if i:
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)
