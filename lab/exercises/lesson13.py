"""Exercise checkers for lesson 13 (when not to speculate: set-up time, KV-cache memory, throughput
under load). The reference answers come from :mod:`lab.costs`.

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import torch

from lab import costs as _costs
from lab.exercises.harness import checker, compare, Fail, NoReturn, outcome_of, same_float, same_whole, show_value
from lab.metrics import expected_tokens_per_call

__all__ = ["break_even_tokens", "kv_bytes_from_config", "throughput_gain", "TIME_LIMIT_S",
           "reference_kv_bytes_from_config"]


# ---------------------------------------------------------------------------------------------------------
# Exercise 1: how many tokens before a fixed set-up cost is paid back.

# Exact binary fractions where the answer sits on a tie (6 / 3 = 2, 20 / 4 = 5, 100 / 0.25 = 400). The cases where
# speculation never catches up come last, in a list of their own: a loop with no way out stops there, and the learner
# sees the hints about the finite answers first.
_BREAK_EVEN_CASES = [
    (6.0, 4.5, 1.5), (0.0, 5.0, 3.0), (1.5, 4.6, 2.8), (50.0, 4.6, 2.8), (20.0, 10.0, 6.0), (7.0, 4.0, 2.0),
    (100.0, 1.25, 1.0),
]
_NEVER_CASES = [(30.0, 3.0, 3.0), (10.0, 2.0, 2.5)]

# Seconds one call of the learner's function may take: the reference answers every case in microseconds, and a
# plain counting loop needs at most a few hundred steps, so only a loop that never ends comes near this.
TIME_LIMIT_S = 2.0


def _count_key(value):
    """What a break-even answer means, for comparing answers: ("none",); ("int", n) for a whole number (an int, a
    float such as 28.0, a one-element tensor); ("float", x) for any other number, ±inf included; ("nan",); None for
    anything else (a string, a bool, a list), which then equals nothing. Only whole numbers and None can match the
    reference. Never raises (``int(math.inf)`` would raise OverflowError)."""
    if value is None:
        return ("none",)
    if isinstance(value, bool):
        return None
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            return None
        value = value.item()
    if isinstance(value, Integral):
        return ("int", int(value))
    if not isinstance(value, Real):   # a string such as "3" is not a count
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if math.isnan(number):
        return ("nan",)
    return ("int", int(number)) if number.is_integer() else ("float", number)


def _same_count(a, b) -> bool:
    key = _count_key(a)
    return key is not None and key == _count_key(b)


_NEVER_HINT = ("when spec_ms_per_token >= ar_ms_per_token each token saves nothing, so the set-up can never be "
               "recovered: return None there (not a number such as 0, -1 or infinity, which would read as a count of "
               "tokens).")


@checker
def break_even_tokens(fn):
    """Check ``fn(setup_ms, ar_ms_per_token, spec_ms_per_token) -> int | None``: the fewest new tokens for which
    speculation is strictly faster (``setup + n * spec < n * ar``), None when it never is.
    Reference: :func:`lab.costs.break_even_tokens`. Each call of ``fn`` may take at most ``TIME_LIMIT_S`` seconds;
    a call that runs longer is reported as a loop that does not end. Returns True/False."""
    def saving(ar, spec):
        return ar - spec

    faults = [
        (lambda s, a, p: math.ceil(s / saving(a, p)) if p < a else None,
         "at n = setup / (ar − spec) the two take exactly the same time, and the question asks when speculation is "
         "strictly faster: where setup / saving is a whole number, your answer is the tie, one token short."),
        (lambda s, a, p: s / saving(a, p) if p < a else None,
         "a number of tokens is a whole number: the first n with setup + n·spec < n·ar."),
        (lambda s, a, p: math.floor(s / a) + 1 if p < a else None,
         "each token saves (ar − spec) ms, not ar ms: divide the set-up by the saving per token."),
        (lambda s, a, p: round(s / saving(a, p)) if p < a else None,
         "don't round to the nearest: the set-up is paid back at the first n with setup + n·spec < n·ar."),
        (lambda s, a, p: None if p < a else 1,
         "your function returned None where speculation does catch up (spec_ms_per_token < ar_ms_per_token on "
         "every case here): return None only when spec_ms_per_token >= ar_ms_per_token (is that comparison the "
         "wrong way round, or a `return` missing?)."),
    ]
    generic = ("return the smallest n >= 1 with setup_ms + n * spec_ms_per_token < n * ar_ms_per_token, or None "
               "when spec_ms_per_token >= ar_ms_per_token.")
    try:
        n = compare("break_even_tokens", fn, _BREAK_EVEN_CASES, _costs.break_even_tokens, faults, _same_count,
                    generic, time_limit=TIME_LIMIT_S, none_allowed=True)
        # The finite answers are right, so whatever goes wrong now (a number, an error) is the never case.
        n += compare("break_even_tokens", fn, _NEVER_CASES, _costs.break_even_tokens, [], _same_count,
                     _NEVER_HINT, time_limit=TIME_LIMIT_S)
    except NoReturn as stuck:
        args = ", ".join(show_value(a) for a in stuck.args[0])
        raise Fail(f"break_even_tokens({args}) did not return within {TIME_LIMIT_S:g} s: a loop with no way out "
                   "when the saving per token (ar − spec) is ≤ 0?\n  Hint: check spec_ms_per_token >= "
                   "ar_ms_per_token first and return None; only then count up.") from None
    return f"correct on all {n} cases (a 50 ms set-up at 4.6 vs 2.8 ms per token pays back after 28 tokens)."


# ---------------------------------------------------------------------------------------------------------
# Exercise 2: KV-cache bytes per token from a config.json.

def _cfg(layers, heads, kv, hidden, head_dim=None):
    config = {"num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv,
              "hidden_size": hidden}
    if head_dim is not None:
        config["head_dim"] = head_dim
    return config


# Published configs (their config.json on the Hugging Face hub) and our bundled pair.
_KV_CASES = [
    (_cfg(80, 64, 8, 8192), torch.bfloat16),          # Llama 3.1 70B
    (_cfg(32, 32, 8, 4096), torch.bfloat16),          # Llama 3.1 8B
    (_cfg(32, 32, 8, 4096), torch.float8_e4m3fn),     # the same with an fp8 KV cache
    (_cfg(6, 6, 6, 384, 64), torch.float32),          # our target
    (_cfg(1, 4, 4, 128, 32), torch.float32),          # our draft
    (_cfg(28, 16, 16, 3072, 256), torch.bfloat16),    # Gemma 7B: head_dim 256, not 3072 / 16
    (_cfg(24, 14, 2, 896), torch.bfloat16),           # Qwen2.5 0.5B
    (_cfg(28, 12, 2, 1536), torch.float16),           # Qwen2.5 1.5B
]


def reference_kv_bytes_from_config(config, dtype):
    """The answer to the KV-cache exercise: bytes one token adds for a ``config.json`` dict and a torch ``dtype``
    (:func:`lab.costs.kv_cache_bytes_per_token`)."""
    return _costs.kv_cache_bytes_per_token(config, torch.empty((), dtype=dtype).element_size())


def _kv_variant(*, factor=2, heads_key="num_key_value_heads", bits=False, head_dim="ref", layers=True,
                fixed_size=None):
    def fn(config, dtype):
        size = torch.finfo(dtype).bits if bits else torch.empty((), dtype=dtype).element_size()
        if fixed_size is not None:
            size = fixed_size
        if head_dim == "ref":
            hd = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        elif head_dim == "by_kv":
            hd = config["hidden_size"] // config["num_key_value_heads"]
        else:  # "ignore_explicit"
            hd = config["hidden_size"] // config["num_attention_heads"]
        return factor * (config["num_hidden_layers"] if layers else 1) * config[heads_key] * hd * size
    return fn


def _show_kv(args):
    config, dtype = args
    extra = f", head_dim={config['head_dim']}" if "head_dim" in config else ""
    return (f"{{layers {config['num_hidden_layers']}, heads {config['num_attention_heads']}, kv_heads "
            f"{config['num_key_value_heads']}, hidden {config['hidden_size']}{extra}}}, {dtype}")


# Counting num_attention_heads and a head width of hidden_size // num_key_value_heads give the same number
# (2 · layers · hidden_size · bytes) whenever the config has no head_dim, so one hint names both.
_HEADS_HINT = ("your number is 2 · layers · hidden_size · bytes, as if every query head had its own keys and values. "
               "With grouped-query attention several query heads share one KV head: count num_key_value_heads "
               "heads (Llama 3 70B: 64 query heads, 8 KV heads), each as wide as a query head, "
               "hidden_size // num_attention_heads (not hidden_size // num_key_value_heads).")


@checker
def kv_bytes_from_config(fn):
    """Check ``fn(config: dict, dtype: torch.dtype) -> int``: KV-cache bytes one token adds,
    ``2 * num_hidden_layers * num_key_value_heads * head_dim * bytes per value``, with ``head_dim`` from the
    config when given, else ``hidden_size // num_attention_heads``. Reference:
    :func:`lab.costs.kv_cache_bytes_per_token`. Returns True/False."""
    faults = [
        (_kv_variant(fixed_size=1),
         "your number counts values, not bytes: multiply by the bytes per value of the dtype argument (float32 4, "
         "bf16/fp16 2, fp8 1), torch.empty((), dtype=dtype).element_size() or dtype.itemsize."),
        (_kv_variant(factor=1),
         "the cache stores a key AND a value vector per head per layer: multiply by 2."),
        (_kv_variant(heads_key="num_attention_heads"), _HEADS_HINT),
        (_kv_variant(bits=True),
         "torch.finfo(dtype).bits counts bits; the cache is measured in bytes (bfloat16 = 2 bytes, not 16): use "
         "torch.empty((), dtype=dtype).element_size() or dtype.itemsize."),
        (_kv_variant(head_dim="by_kv"), _HEADS_HINT),
        (_kv_variant(head_dim="ignore_explicit"),
         "some configs (Gemma, our own) give head_dim explicitly and it need not be hidden_size // heads: use "
         "config['head_dim'] when it is there."),
        (_kv_variant(layers=False),
         "every decoder layer keeps its own keys and values: multiply by num_hidden_layers."),
        (_kv_variant(fixed_size=2),
         "the bytes per value depend on the dtype argument (float32 4, bf16/fp16 2, fp8 1): use "
         "torch.empty((), dtype=dtype).element_size() or dtype.itemsize instead of a fixed 2."),
        (_kv_variant(fixed_size=4),
         "the bytes per value depend on the dtype argument (float32 4, bf16/fp16 2, fp8 1): use "
         "torch.empty((), dtype=dtype).element_size() or dtype.itemsize instead of a fixed 4."),
    ]
    n = compare("kv_bytes_from_config", fn, _KV_CASES, reference_kv_bytes_from_config, faults, same_float,
                "work the failing config above by hand: what the cache keeps per layer, for how many heads, how "
                "wide each head is (not every config has a head_dim key), and how many bytes a value of this "
                "dtype takes.", show_args=_show_kv)
    answer = outcome_of(fn, _KV_CASES[0])
    if answer[0] == "ok" and not same_whole(answer[1], reference_kv_bytes_from_config(*_KV_CASES[0])):
        raise Fail(f"the values are right, but kv_bytes_from_config returned {answer[1]!r} on the first config, a "
                   f"{type(answer[1]).__name__}.\n  Hint: a count of bytes is a whole number, and the lesson formats "
                   "it with a thousands separator as one: hidden_size / num_attention_heads is a float division "
                   "even when it divides evenly; use // (or int(...)).")
    return f"correct on all {n} configs (Llama 3.1 70B in bf16: 327,680 bytes = 320 KiB per token)."


# ---------------------------------------------------------------------------------------------------------
# Exercise 3: throughput gain of speculation at batch B (roofline).

_GAIN_CASES = [
    (1, 4, 0.75, 0.1, 295.0), (1, 5, 0.8, 0.05, 295.0), (64, 4, 0.75, 0.1, 295.0), (128, 4, 0.75, 0.1, 295.0),
    (512, 4, 0.75, 0.1, 295.0), (2048, 1, 0.7, 0.02, 295.0), (16, 3, 0.6, 0.1, 20.0), (40, 7, 0.9, 0.0, 150.0),
    (300, 2, 0.5, 0.2, 295.0), (1, 4, 0.75, 0.1, 2.0), (8, 4, 0.0, 0.1, 16.0),
]


def _gain_variant(*, ar_scales=True, draft_scales=True, verify_tokens="n+1", tokens="expected", combine="max",
                  ridge="ref", draft_passes="n", inverted=False):
    def fn(batch, n, alpha, c, fpb):
        r = {"ref": fpb, "no_2_flops": 2 * fpb, "no_bytes": fpb / 2}[ridge]

        def t(tok):
            return {"max": max, "min": min}[combine](1.0, tok / r) if combine != "sum" else 1.0 + tok / r

        one = t(batch)
        verify = t({"n+1": batch * (n + 1), "n": batch * n, "b+n": batch + n, "bn+1": batch * n + 1}[verify_tokens])
        passes = n + 1 if draft_passes == "n+1" else n
        spec = passes * c * (one if draft_scales else 1.0) + verify
        emitted = {"expected": lambda: expected_tokens_per_call(alpha, n), "all": lambda: n + 1,
                   "no_bonus": lambda: expected_tokens_per_call(alpha, n) - alpha ** n}[tokens]()
        gain = emitted * (one if ar_scales else 1.0) / spec
        return 1 / gain if inverted else gain
    return fn


def _no_roofline(batch, n, alpha, c, fpb):
    return expected_tokens_per_call(alpha, n) / (1 + n * c)


@checker
def throughput_gain(fn):
    """Check ``fn(batch, n_draft, alpha, cost_ratio, flops_per_byte) -> float``: the predicted throughput of
    speculation over autoregressive decoding at ``batch`` sequences, with bf16 weights (2 bytes per parameter) and a
    roofline pass time ``max(1, tokens / flops_per_byte)``. Reference: :func:`lab.costs.speculative_throughput_gain`.
    Returns True/False."""
    faults = [
        (_no_roofline,
         "the batch matters: a pass over B·(N+1) tokens is compute-bound once that passes the ridge point, and "
         "then it takes max(1, tokens / flops_per_byte) units, not 1."),
        (_gain_variant(ar_scales=False),
         "the autoregressive step over B tokens also turns compute-bound past the ridge: its time is t(B) too."),
        (_gain_variant(draft_scales=False),
         "the draft's passes process B tokens each: they cost N · c · t(B), not N · c."),
        (_gain_variant(verify_tokens="n"),
         "verification feeds N + 1 tokens per sequence (the last committed token + N drafts): t(B · (N + 1))."),
        (_gain_variant(verify_tokens="b+n"),
         "verification feeds N + 1 tokens for EACH of the B sequences: B · (N + 1) tokens, not B + N."),
        (_gain_variant(verify_tokens="bn+1"),
         "each sequence feeds its own last committed token plus its N drafts: B · (N + 1) tokens, not B · N + 1."),
        (_gain_variant(tokens="all"),
         "not every draft is accepted: a step emits expected_tokens_per_call(alpha, N) tokens per sequence, not "
         "N + 1."),
        (_gain_variant(tokens="no_bonus"),
         "a step also emits the target's own token (the resampled one, or the bonus token when every draft was "
         "accepted): E = expected_tokens_per_call(alpha, N) = (1 − alpha^(N+1)) / (1 − alpha)."),
        (_gain_variant(inverted=True),
         "the gain is speculative throughput over autoregressive throughput (above 1 when speculation helps), "
         "not the other way round."),
        (_gain_variant(draft_passes="n+1"),
         "the draft runs N times a step (one pass per drafted token); the (N + 1)-th token comes from the target's "
         "verification pass, so drafting costs N · c · t(B)."),
        (_gain_variant(combine="min"),
         "a pass never takes less than the time to read the weights once: t(T) = max(1, T / flops_per_byte), the "
         "LONGER of the two times, not the shorter."),
        (_gain_variant(combine="sum"),
         "roofline: a pass takes the LONGER of its memory time and its compute time, max(1, T / ridge), not their "
         "sum."),
        (_gain_variant(ridge="no_2_flops"),
         "a multiply-add is 2 FLOPs: with 2-byte weights a pass over T tokens does 2T FLOPs per 2 bytes, so its "
         "intensity is T and it turns compute-bound at T = flops_per_byte."),
        (_gain_variant(ridge="no_bytes"),
         "divide the FLOPs by the bytes read (2 per bf16 parameter): intensity 2T / 2 = T FLOPs per byte."),
    ]

    def ref(batch, n, alpha, c, fpb):
        return _costs.speculative_throughput_gain(batch, n, alpha, c, fpb, bytes_per_param=2.0)

    n = compare("throughput_gain", fn, _GAIN_CASES, ref, faults, same_float,
                "work the failing case above by hand from the section's model: what one autoregressive step over "
                "the batch costs and yields, what one speculative step (its draft passes and its verification "
                "pass) costs and yields, and how long a pass over T tokens takes.")
    return (f"correct on all {n} cases (at α = 0.75, N = 4, c = 0.1 on an H100: 2.18× at batch 1, "
            f"{ref(512, 4, 0.75, 0.1, 295.0):.2f}× at batch 512).")
