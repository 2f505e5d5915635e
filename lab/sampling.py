"""From logits to probabilities, sampling, and the two formulas of speculative sampling.

Notation: ``target_probs`` is the distribution of the big model that verifies (Leviathan et al. 2023 call it
p, Chen et al. 2023 and seed lesson 000 call it q); ``draft_probs`` is the small model's (Leviathan's q, Chen's
and the seed's p).

Sources: Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative Decoding" (2023),
section 2.3 and Appendix A.1; Chen et al., "Accelerating Large Language Model Decoding with Speculative
Sampling" (2023), Algorithm 2.
"""
from __future__ import annotations

import math
import random
from collections.abc import Mapping
from collections.abc import Set as AbstractSet

import torch

from lab.validation import check_number, check_probs, check_sampling_args

__all__ = ["probs_from_logits", "sample", "residual_distribution", "residual_unchecked", "accept_or_reject",
           "categorical", "uniform", "probability_list", "invert_cdf"]

# probs_from_logits divides by the temperature in float32 unless that could overflow (see there).
_MIN_PLAIN_TEMPERATURE = 1e-30
_MAX_SCALED_LOGIT = 1e38  # float32 overflows to inf just above 3.4e38


def _raise_too_large(original: torch.Tensor):
    largest = float(original[torch.isfinite(original)].abs().max())
    raise ValueError(f"logits are too large for float32 (largest finite magnitude {largest:.3g}; float32 holds up to "
                     "3.4e38): rescale them, e.g. subtract each row's maximum")


def _raise_bad_logits(logits: torch.Tensor, original: torch.Tensor | None = None):
    # Only reached when a row's maximum is not finite; find out why (rare, so the extra passes cost nothing).
    if torch.isnan(logits).any():
        raise ValueError("logits contain NaN; check the model's output")
    # A float64 input can overflow float32 without holding any inf itself.
    overflow = original is not None and original.dtype != torch.float32
    if torch.isposinf(logits).any():
        if overflow and not torch.isposinf(original).any():
            _raise_too_large(original)
        raise ValueError("logits contain +inf; check the model's output")
    if overflow and torch.isfinite(original).any(-1).all():  # every row had a finite logit before the cast
        _raise_too_large(original)
    raise ValueError("every logit in a row is -inf, so no token has any probability; check the mask or the "
                     "logits processing that produced them")


_TOP_P_SLACK = 1e-6  # a mass this close to top_p reaches it (float32 probabilities carry ~1e-7 relative error)


def probs_from_logits(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None) -> torch.Tensor:
    """Turn logits ``[..., V]`` into float32 probabilities ``[..., V]`` after temperature, top-k and top-p.

    - ``temperature == 0`` is greedy decoding: a one-hot vector on the argmax (first index on ties);
      top-k and top-p change nothing then. Any temperature > 0 works, however small: when ``logits /
      temperature`` would overflow float32 (temperature below 1e-30, or a row maximum above 1e38 times the
      temperature), each row's maximum is subtracted first and the division is done in float64, so the result
      is the exact low-temperature limit (all mass shared by the tied maxima) rather than NaN.
    - top-k keeps the k largest logits (ties at the k-th value are kept, as transformers'
      ``TopKLogitsWarper`` does); top-p keeps the smallest set of most likely tokens whose mass reaches
      ``top_p`` (at least one token; a mass within 1e-6 of ``top_p`` counts as reaching it, as float32 sums of
      round probabilities miss by about 1e-7), applied after top-k and temperature, as transformers does. Among tokens
      tied at the top-p cut the lowest ids are kept (a stable sort), on every device; transformers' warper leaves
      the choice to an unstable sort (on CPU it keeps the highest ids), so the kept sets can differ there only.
    Verification is exact whatever the draft's settings, as long as the target rows are the distribution to sample
    from (this call with the user's settings) and each draft row is the distribution its token was actually drawn
    from (Leviathan et al. 2023, section 2.3: any draft distribution works). Applying the same settings to both
    usually raises acceptance when the draft tracks the target, but need not (a draft that ranks the target's top
    tokens the other way round loses more under a low temperature).

    Raises ``ValueError`` for non-floating-point logits, logits without a vocabulary axis or with an empty batch
    axis (shape ``[0, V]``), NaN or +inf logits, a row whose logits are all -inf, temperature < 0 or a bool,
    top_k < 1 (any integer type but bool), top_p outside (0, 1] or a bool; ``TypeError`` for logits that are no
    tensor nor numbers (None, text).
    """
    temperature, top_k, top_p = check_sampling_args(temperature, top_k, top_p)
    try:
        logits = torch.as_tensor(logits)
    except (TypeError, ValueError, RuntimeError):  # None raised torch's "Could not infer dtype of NoneType"
        raise TypeError(f"logits must be a floating-point tensor [..., V], got {type(logits).__name__}") from None
    if not logits.is_floating_point():
        raise ValueError(f"logits must be a floating-point tensor, got dtype {logits.dtype}")
    if logits.dim() == 0 or logits.size(-1) == 0:
        raise ValueError(f"logits must have a non-empty vocabulary axis [..., V], got shape {tuple(logits.shape)}")
    if logits.numel() == 0:  # an empty batch axis: nothing to normalise, and amax below would fail
        raise ValueError(f"logits must hold at least one row [..., V], got shape {tuple(logits.shape)}")
    original, logits = logits, logits.float()
    row_max = logits.amax(-1, keepdim=True)  # NaN anywhere in a row propagates to its maximum
    peak = float(row_max.abs().max())  # one check (one device sync) for NaN, +inf and all -inf rows
    if not math.isfinite(peak):
        _raise_bad_logits(logits, original)
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.size(-1)).float()
    if temperature < _MIN_PLAIN_TEMPERATURE or peak > temperature * _MAX_SCALED_LOGIT:
        # Shifted, every row's maximum is exactly 0 and stays 0 after dividing by any temperature > 0 (float64
        # keeps even 5e-324 nonzero), so softmax never meets inf - inf.
        logits = ((logits - row_max).double() / temperature).float()
    else:
        logits = logits / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, int(top_k), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
        # a cut 1e-6 early: float32 sums miss round masses (six 0.1s can add up to just below 0.6, and float32(0.7)
        # is 0.69999999), which made a uniform row keep 7 tokens for top_p = 0.6. float32 throughout: MPS has no
        # float64.
        mass_before = sorted_probs.cumsum(-1) - sorted_probs
        drop_sorted = mass_before >= top_p - _TOP_P_SLACK
        drop_sorted[..., 0] = False  # always keep the most likely token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """Draw one token id from a probability vector ``[V]``, using ``generator`` (a ``torch.Generator``, or None for
    torch's global one) for reproducibility.

    ``probs``: a 1-D float tensor, list or NumPy array of V probabilities (float64 tensors are sampled as they are,
    anything else as float32). It is checked with :func:`check_probs` (a few passes over V; nothing in the decode
    loop calls this function, which samples with ``torch.multinomial`` on ``probs_from_logits`` output directly).
    Raises ``ValueError`` for a batch or scalar (not one vector ``[V]``), NaN, negative or infinite entries, or a
    sum further than 1e-3 from 1 (logits or counts); ``TypeError`` for something that is not numbers or a
    ``generator`` that is not a ``torch.Generator``."""
    dtype = torch.float64 if isinstance(probs, torch.Tensor) and probs.dtype == torch.float64 else torch.float32
    probs = check_probs("probs", probs, dtype=dtype)
    if probs.dim() != 1:
        raise ValueError(f"probs must be one distribution [V], got shape {tuple(probs.shape)}; sample each row "
                         "separately")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be None or a torch.Generator, got {type(generator).__name__}")
    if generator is not None:  # CUDA probabilities with a CPU generator: sampled where the generator is
        probs = probs.to(generator.device)
    return int(torch.multinomial(probs, 1, generator=generator))


def residual_distribution(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """The distribution to resample from after a rejection: ``max(0, target - draft)`` normalised.

    Shapes: both ``[..., V]`` (same V); returns ``[..., V]``. Where the positive part has zero mass
    (target == draft), a rejection cannot happen, and the function returns ``target_probs`` so callers never
    divide by zero (DESIGN oracle 4). Tokens with target probability 0 get residual probability 0.

    Dtype: the subtraction is done in the inputs' precision, which the result keeps: float64 when either input is
    a float64 tensor or NumPy array, else float32 (lists, float16 / bfloat16 tensors). Computing a float64
    difference in float32 would round a gap of 1e-9 to 0 and return the target instead of the residual.

    Raises ``ValueError`` if the shapes differ (mismatched vocabularies) or either input is not a distribution,
    ``TypeError`` if either is not numbers.
    Source: Leviathan et al. 2023, Algorithm 1 and Appendix A.1; Chen et al. 2023, Algorithm 2.
    """
    dtype = torch.float64 if torch.float64 in (_input_dtype(target_probs), _input_dtype(draft_probs)) \
        else torch.float32
    target_probs = check_probs("target_probs", target_probs, dtype=dtype)
    draft_probs = check_probs("draft_probs", draft_probs, dtype=dtype)
    if target_probs.shape != draft_probs.shape:
        raise ValueError(f"target_probs {tuple(target_probs.shape)} and draft_probs {tuple(draft_probs.shape)} "
                         "must have the same shape (same vocabulary)")
    return residual_unchecked(target_probs, draft_probs)


def _input_dtype(values):
    """The float dtype a tensor or NumPy array holds (its ``dtype``), None for anything else (lists)."""
    dtype = getattr(values, "dtype", None)
    if isinstance(values, torch.Tensor):
        return dtype
    return torch.float64 if str(dtype) == "float64" else None


def residual_unchecked(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """:func:`residual_distribution` without its checks, for inputs known to be distributions of one shape and
    dtype (the verifiers' rows come from :func:`probs_from_logits`).

    ``target_probs``, ``draft_probs``: float tensors ``[..., V]`` of the same shape and dtype, on one device.
    Returns ``norm(max(0, target - draft))`` ``[..., V]`` in that dtype, or ``target_probs`` itself in the rows
    where nothing is left. Raises nothing of its own: torch's errors for mismatched shapes or devices."""
    positive = (target_probs - draft_probs).clamp_min(0)
    mass = positive.sum(-1, keepdim=True)
    # the smallest normal float32 (float64 for float64 rows) only guards a division that torch.where discards
    tiny = torch.finfo(torch.float64 if positive.dtype == torch.float64 else torch.float32).tiny
    return torch.where(mass > 0, positive / mass.clamp_min(tiny), target_probs)


def accept_or_reject(target_prob: float, draft_prob: float, u: float) -> bool:
    """The rejection step: accept a drafted token iff ``u < min(1, target_prob / draft_prob)``.

    ``target_prob`` and ``draft_prob`` are the two models' probabilities of the drafted token (floats in
    [0, 1]; one-element tensors work too); ``u`` is a uniform draw in [0, 1). Computed as
    ``u * draft_prob < target_prob`` so a draft probability of 0 needs no division. A token with
    ``target_prob == 0`` is never accepted, and ``u == 0`` accepts every token the target can produce.

    Raises ``TypeError`` naming the argument for something that is not a number (a string, None, a bool, a
    longer tensor), ``ValueError`` if a probability is outside [0, 1] or NaN, or ``u`` is outside [0, 1).
    Source: Chen et al. 2023, Algorithm 2 (keep iff r < min(1, ratio)); Leviathan et al. 2023, Algorithm 1 rejects
    iff r > ratio, so it keeps a draw equal to the ratio. For a continuous draw the two rules agree with probability
    1; a float draw can equal the ratio (u = 0 against a ratio of 0: lesson 02). Seed lesson 000, step 2.
    """
    target = check_number("target_prob", target_prob, "[0, 1]")
    draft = check_number("draft_prob", draft_prob, "[0, 1]")
    u = check_number("u", u, "[0, 1)")
    for name, value in (("target_prob", target), ("draft_prob", draft)):
        if not 0 <= value <= 1:  # also rejects NaN
            raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    if not 0 <= u < 1:
        raise ValueError(f"u must be a uniform draw in [0, 1), got {u!r}")
    if target <= 0:
        return False
    return u * draft < target


def uniform(rng) -> float:
    """One uniform draw in [0, 1) from a ``random.Random`` or a ``torch.Generator``.

    Raises ``TypeError`` for any other ``rng``."""
    if isinstance(rng, random.Random):
        return rng.random()
    if isinstance(rng, torch.Generator):
        return float(torch.rand((), generator=rng, dtype=torch.float64))
    raise TypeError(f"rng must be random.Random or torch.Generator, got {type(rng).__name__}")


def probability_list(name, probs, atol: float = 1e-3) -> list[float]:
    """``probs`` (a sequence of V numbers or a 1-D tensor ``[V]``) as a list of V Python floats after checking it is
    a distribution: entries >= 0 summing to 1 within ``atol``. A list of floats is returned as it is (not copied).

    Pure Python, one pass: meant for toy vocabularies (:mod:`lab.toy`). Raises ``ValueError`` naming ``name`` for a
    tensor that is not 1-D, an empty sequence, NaN or negative entries or a sum further than ``atol`` from 1
    (infinite entries included) and an ``atol`` outside [0, 1]; ``TypeError`` for text, a mapping or a set
    (``{0: 0.7, 1: 0.3}`` would be read as its keys) or items that are not numbers (a bool or a str such as "0.5"
    included). ``name``: a string, or a
    function returning one, called only to build an error message (so a caller can name a model and its context
    without formatting them on every call)."""
    if type(atol) is not float:  # the toy models' default is a float: checked only when it is not one
        atol = check_number("atol", atol, "[0, 1]")
    if not 0 <= atol <= 1:
        raise ValueError(f"atol must be a number in [0, 1] (how far the sum may be from 1), got {atol!r}")
    if callable(name):
        try:
            return probability_list("", probs, atol)
        except (TypeError, ValueError) as error:
            raise type(error)(f"{name()}{error}") from None
    if isinstance(probs, torch.Tensor):
        if probs.dim() != 1:
            raise ValueError(f"{name} must be one distribution [V], got a tensor of shape {tuple(probs.shape)}")
        values = probs.tolist()
    else:
        if isinstance(probs, (str, bytes, Mapping, AbstractSet)):
            what = f"{type(probs).__name__} {probs!r}"[:80]
            raise TypeError(f"{name} must be a sequence of probabilities (one per token id, in order), got {what}")
        values = probs if type(probs) is list else None  # a list of floats needs no copy (the toy models' case)
        try:
            if values is None or not all(type(v) is float for v in values):
                if any(isinstance(p, (bool, str, bytes)) for p in probs):  # float() takes True and "0.5"
                    raise TypeError
                values = [float(p) for p in probs]
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{name} must be a sequence of V probabilities (floats), got {probs!r}") from None
    if not values:
        raise ValueError(f"{name} is empty; it must hold one probability per token")
    total = sum(values)
    if abs(total - 1) <= atol and min(values) >= 0:  # a NaN or inf entry makes the sum fail the test
        return values
    shown = values if len(values) <= 10 else values[:10] + ["..."]
    if any(math.isnan(v) for v in values):
        raise ValueError(f"{name} contains NaN: {shown}")
    if min(values) < 0:
        raise ValueError(f"{name} has negative entries ({shown}); probabilities must be >= 0")
    raise ValueError(f"{name} must sum to 1, got a sum of {total:.6g} ({shown}); pass probabilities, not "
                     "logits or counts")


def invert_cdf(values: list[float], u: float) -> int:
    """The index ``i`` whose cumulative mass first exceeds ``u``: the draw of inverse-CDF sampling.

    ``values``: V probabilities (a list of floats, already checked, e.g. by :func:`probability_list`); ``u``: a
    uniform draw in [0, 1) (:func:`uniform`). Tokens with probability 0 are never returned; when rounding leaves
    ``u`` above the summed mass, the last token with mass is. Unchecked: returns 0 for an all-zero list."""
    total = 0.0
    last = 0
    for i, p in enumerate(values):
        if p > 0:
            last = i
            total += p
            if u < total:
                return i
    return last  # rounding left u above the summed mass: the last token with mass


def categorical(probs, rng) -> int:
    """Draw an index from a probability sequence ``[V]`` (list or 1-D tensor) by inverting its CDF with one
    uniform draw from ``rng`` (``random.Random`` or ``torch.Generator``).

    Raises ``ValueError`` when ``probs`` is not a distribution (NaN, a negative entry, or a sum further than
    1e-3 from 1), ``TypeError`` for a non-numeric ``probs`` or another kind of ``rng``.
    """
    values = probability_list("probs", probs)
    return invert_cdf(values, uniform(rng))
