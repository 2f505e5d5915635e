"""Measures of speculative decoding and the formulas that predict them.

Definitions used everywhere in the course (engines use the same names for different things, see lesson 06):
- acceptance rate: accepted draft tokens / drafted tokens (for a token tree every node counts as drafted, so
  compare trees with chains by tokens per target call).
- α (alpha, Leviathan's per-token acceptance probability): accepted drafts / drafts the target examined
  (:func:`alpha_from_steps`). A step stops examining at its first rejection, so the drafts after it count in the
  acceptance rate's denominator but not in α's: α is never below the acceptance rate, and above it whenever a
  step rejects before its last draft.
- tokens per target call: tokens the decode steps committed / decode steps (the prefill, its forward and the
  first token it gives, not counted); vLLM calls this the mean acceptance length.
- per-position acceptance: for draft position i (0-based), the share of steps that drafted at least i+1
  tokens in which the token at position i was accepted (so it includes the chance that an earlier one failed);
  for a tree, position i (0-based) is depth i + 1 of the accepted path (the first level is depth 1).

The formulas take α, N and c as Python or NumPy numbers or one-element tensors (taken as their value,
:func:`lab.validation.plain_number`), so an acceptance rate computed with torch can be passed as it is.

Sources: Leviathan et al. 2023, section 3 (equation 1 and Theorem 3.8); seed lesson 000 (rule of thumb).
"""
from __future__ import annotations

import math
from numbers import Real
from types import SimpleNamespace

import torch

from lab.compare import LEVEL, beyond_tokens_per_call, compare_speedups  # re-exported for lessons and lab.arena_reading
from lab.trace import LAST_KINDS, step_records
from lab.validation import check_int, check_probs, is_integer, plain_number, refuse_complex_and_bool

__all__ = ["expected_tokens_per_call", "predicted_speedup", "optimal_n_draft", "kl_divergence",
           "total_variation", "acceptance_probability", "chi_square", "summarize_steps", "alpha_from_steps",
           "cost_ratio_from_steps", "conditional_acceptance", "LEVEL", "compare_speedups", "beyond_tokens_per_call"]


def _check_alpha(given) -> float:
    alpha = plain_number(given)  # a one-element tensor (an acceptance rate computed with torch) is its value
    # bool is a Real; True as a probability is almost always a mistake (as in lab.costs and lab.picker)
    if isinstance(alpha, bool) or not isinstance(alpha, Real) or math.isnan(alpha) or not 0 <= alpha <= 1:
        raise ValueError("alpha (the per-token acceptance probability) must be a number in [0, 1] (a one-element "
                         f"tensor works), got {given!r}")
    return float(alpha)


MAX_N_DRAFT = 2**53
"""The largest draft length the formulas take: every count up to it is exact as a float (optimal_n_draft searches up
to 10**6 and more), and beyond it alpha ** (N + 1) raised a bare OverflowError (N = 10**400)."""


def _check_n(given) -> int:
    value = plain_number(given)
    if is_integer(value) and value > MAX_N_DRAFT:  # named apart: "[1, 9007199254740992]" read as noise to learners
        raise ValueError(f"n_draft must be at most 2**53 (every count the formulas take is exact as a float), got "
                         f"{given!r}")
    return check_int("n_draft", value, 1, shown=given)


def _check_cost(given) -> float:
    cost_ratio = plain_number(given)
    if (isinstance(cost_ratio, bool) or not isinstance(cost_ratio, Real) or math.isnan(cost_ratio) or cost_ratio < 0
            or math.isinf(cost_ratio)):
        raise ValueError("cost_ratio (draft time / target time per forward pass) must be a finite number >= 0, "
                         f"got {given!r}")
    return float(cost_ratio)


def expected_tokens_per_call(alpha: float, n_draft: int) -> float:
    """Expected tokens emitted per target call, ``(1 - alpha**(N+1)) / (1 - alpha)``; ``N + 1`` when alpha = 1.

    Assumes each drafted token is accepted independently with probability ``alpha`` (Leviathan et al. 2023,
    equation 1). Raises ``ValueError`` for alpha outside [0, 1] or not a number (a bool included) or ``n_draft``
    outside [1, :data:`MAX_N_DRAFT`].
    """
    alpha, n = _check_alpha(alpha), _check_n(n_draft)
    if alpha == 1:
        return float(n + 1)
    return (1 - alpha ** (n + 1)) / (1 - alpha)


def predicted_speedup(alpha: float, n_draft: int, cost_ratio: float) -> float:
    """Predicted wall-clock speedup over autoregressive decoding: tokens per call / (1 + N * c).

    ``cost_ratio`` c = time of one draft forward / time of one target forward (unitless). One speculative step
    costs N draft passes plus one target pass over N+1 tokens, taken to cost the same as over one token
    (Leviathan et al. 2023, Theorem 3.8). Raises ``ValueError`` on bad alpha, N outside [1, 2**53], or c negative,
    infinite, NaN or not a number (a bool included).
    """
    return expected_tokens_per_call(alpha, n_draft) / (1 + _check_n(n_draft) * _check_cost(cost_ratio))


_SCAN_LIMIT = 1024  # up to this max_n, optimal_n_draft tries every N (at most a few milliseconds)


def optimal_n_draft(alpha: float, cost_ratio: float, max_n: int = 16) -> int:
    """The draft length N in 1..max_n with the largest :func:`predicted_speedup` (the smallest N on ties; speedups
    are compared rounded to 12 decimals, so float noise does not break ties).

    Up to ``max_n`` = 1024 it tries every N. Beyond, it searches, because trying every N took minutes for alpha
    near 1 (0.99999 with ``max_n`` = 10**9: best N 3,633,115): the speedup is quasi-concave in N (it rises to one
    peak, then falls), so a doubling search and bisection find the peak, and bisection the smallest N whose
    rounded speedup reaches the peak's, in about 3 log2(best N) evaluations. Forced onto small ``max_n``, the search
    gave the scan's answer in all 5,920 cases tried (alpha from 0 to 1 - 2**-53, c from 0 to 1.7e308; the test
    suite keeps a sample of them).
    Raises ``ValueError`` for alpha outside [0, 1], a negative or non-finite cost ratio (a bool is not a number
    for either), or ``max_n`` < 1."""
    alpha, cost_ratio = _check_alpha(alpha), _check_cost(cost_ratio)
    max_n = check_int("max_n (the longest draft length to consider)", plain_number(max_n), 1, shown=max_n)
    values: dict = {}

    def speedup(n: int) -> float:
        if n not in values:
            values[n] = round(predicted_speedup(alpha, n, cost_ratio), 12)
        return values[n]

    if max_n <= _SCAN_LIMIT:
        return max(range(1, max_n + 1), key=lambda n: (speedup(n), -n))
    log_alpha = None if alpha in (0, 1) else math.log(alpha) if alpha < 0.5 else math.log1p(-(1 - alpha))

    def rising(n: int) -> bool:
        """speedup(n + 1) > speedup(n) in exact arithmetic. Cross-multiplied, it is
        c (alpha^(n+1) - 1) + alpha^(n+1) (1 - alpha)(1 + n c) > 0, with alpha^(n+1) - 1 from expm1 so that it keeps
        its digits for alpha near 1 (subtracting two nearly equal speedups loses them long before the peak)."""
        if n >= max_n or alpha == 0:  # alpha = 0: 1 / (1 + n c) never rises
            return False
        if alpha == 1:  # (n + 1) / (1 + n c)
            return cost_ratio < 1
        power = alpha ** (n + 1)
        return cost_ratio * math.expm1((n + 1) * log_alpha) + power * (1 - alpha) * (1 + n * cost_ratio) > 0

    high = 1
    while rising(high):  # double until past the peak (or at max_n)
        high = min(2 * high, max_n)
    low = max(1, high // 2)
    while low < high:  # the first N that is not rising: the peak
        mid = (low + high) // 2
        low, high = (mid + 1, high) if rising(mid) else (low, mid)
    # Float rounding can blur the turn by a step: take the best rounded value next to it.
    peak = max(range(max(1, low - 2), min(max_n, low + 2) + 1), key=lambda n: (speedup(n), -n))
    low, high = 1, peak
    while low < high:  # the rounded speedup does not fall before the peak: bisect for the first N that reaches it
        mid = (low + high) // 2
        low, high = (low, mid) if speedup(mid) >= speedup(peak) else (mid + 1, high)
    return low


def _two_distributions(target_probs, draft_probs) -> tuple[torch.Tensor, torch.Tensor]:
    """Both arguments as float64 ``[V]`` tensors after checking each is a distribution (NaN, negative entries or
    a sum further than 1e-3 from 1 raise ``ValueError`` naming it) and that their shapes match."""
    # on the CPU: one argument may come from a CUDA model, the other from a list
    t = check_probs("target_probs", target_probs, dtype=torch.float64).cpu()
    d = check_probs("draft_probs", draft_probs, dtype=torch.float64).cpu()
    if t.dim() != 1 or d.dim() != 1:
        raise ValueError(f"target_probs {tuple(t.shape)} and draft_probs {tuple(d.shape)} must each be one "
                         "distribution [V]")
    if t.shape != d.shape:
        raise ValueError(f"target_probs {tuple(t.shape)} and draft_probs {tuple(d.shape)} must have the same shape "
                         "(same vocabulary)")
    return t, d


def kl_divergence(target_probs, draft_probs) -> float:
    """KL(target || draft) in nats for two distributions ``[V]`` (lists or tensors); ``inf`` if the draft gives 0
    to a token the target gives mass (terms with target 0 count 0).

    Raises ``ValueError`` naming the argument for NaN, negative entries, a sum further than 1e-3 from 1, a
    scalar or a batch, and for mismatched shapes; ``TypeError`` for an argument that is not numbers. Lesson 05
    compares it with the acceptance rate."""
    t, d = _two_distributions(target_probs, draft_probs)
    mask = t > 0
    if (d[mask] == 0).any():
        return math.inf
    return float((t[mask] * (t[mask] / d[mask]).log()).sum())


def total_variation(target_probs, draft_probs) -> float:
    """Total variation distance ``0.5 * sum |target - draft|`` in [0, 1] for two distributions ``[V]``.

    Raises ``ValueError`` and ``TypeError`` as :func:`kl_divergence` does. Lesson 05; ``1 - total_variation`` is
    :func:`acceptance_probability`."""
    t, d = _two_distributions(target_probs, draft_probs)
    return float(0.5 * (t - d).abs().sum())


def acceptance_probability(target_probs, draft_probs) -> float:
    """Probability that one drafted token is accepted: ``sum min(target, draft) = 1 - TV`` for two distributions
    ``[V]`` (Leviathan et al. 2023, section 3.1, where it is called β).

    Raises ``ValueError`` naming the argument for NaN, negative entries, a sum further than 1e-3 from 1, a
    scalar or a batch, and for mismatched shapes (a broadcast would silently give a wrong answer); ``TypeError`` for
    an argument that is not numbers."""
    t, d = _two_distributions(target_probs, draft_probs)
    return float(torch.minimum(t, d).sum())


def chi_square(counts, probs, min_expected: float = 5.0):
    """Pearson chi-square test of observed ``counts`` [V] against a distribution ``probs`` [V] (scipy).

    ``counts``: non-negative finite numbers (ints or floats), at least one of them positive; ``probs``: a
    distribution of the same length (sum within 1e-3 of 1; the expected counts are rescaled to the observed
    total). Categories whose expected count is below ``min_expected`` are pooled into one bin, as the test
    requires. Any observation in a zero-probability category makes the p-value 0; a distribution with a single
    possible token gives statistic 0 and p-value 1 (nothing to compare). Returns an object with ``statistic`` and
    ``pvalue`` (scipy's ``Power_divergenceResult``).

    Raises ``ValueError`` naming the argument for counts that are negative, NaN, infinite or all zero, or too few
    to test (every category pooled into one bin although several are possible, e.g. ``[0, 9]`` against ``[0.5,
    0.5]``; the message says how many samples to draw), probs that are not a distribution, mismatched lengths, or
    ``min_expected`` < 0; ``TypeError`` for ``counts`` or ``probs`` that are not real numbers (bools and complex
    numbers included). Lessons 03, 04 and 10
    test sampled tokens against the target with it.
    """
    from scipy.stats import chisquare

    refuse_complex_and_bool("counts", counts, "observation counts")  # as_tensor would read True as 1
    try:
        counts = torch.as_tensor(counts, dtype=torch.float64).cpu()
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"counts must be a sequence or tensor of real numbers, got {type(counts).__name__}") from None
    probs = check_probs("probs", probs, dtype=torch.float64).cpu()  # counts from a list, probs from a CUDA model
    if counts.dim() != 1 or probs.dim() != 1:
        raise ValueError(f"counts {tuple(counts.shape)} and probs {tuple(probs.shape)} must both be 1-D [V]")
    if counts.shape != probs.shape:
        raise ValueError(f"counts has {counts.numel()} categories but probs has {probs.numel()}; they must match "
                         "(count every token id, e.g. torch.bincount(tokens, minlength=V))")
    if not bool(torch.isfinite(counts).all()) or bool((counts < 0).any()):
        raise ValueError(f"counts must be finite numbers >= 0, got {counts.tolist()}")
    total = counts.sum()
    if total <= 0:
        raise ValueError("counts are all zero: the test needs at least one observation")
    if isinstance(min_expected, bool) or not isinstance(min_expected, Real) or not math.isfinite(min_expected) \
            or min_expected < 0:
        raise ValueError(f"min_expected must be a finite number >= 0, got {min_expected!r}")
    if ((probs == 0) & (counts > 0)).any():
        return SimpleNamespace(statistic=math.inf, pvalue=0.0)  # an impossible token was seen
    expected = probs * total
    big = expected >= min_expected
    obs = counts[big].tolist()
    exp = expected[big].tolist()
    if (~big).any() and float(expected[~big].sum()) > 0:  # zero-probability bins with no counts add nothing
        obs.append(float(counts[~big].sum()))
        exp.append(float(expected[~big].sum()))
    if len(obs) < 2:
        if int((probs > 0).sum()) > 1:  # several possible tokens pooled into one bin: too few observations
            # the likeliest token must expect min_expected to get a bin of its own (the rest pool into another)
            need = math.ceil(min_expected / float(probs.max()) - 1e-9)  # 5 / 0.1 is 50.000000000000004
            raise ValueError(f"counts: {total:.0f} observations are too few to test (no category expects "
                             f"min_expected = {min_expected:g} observations, so all of them pool into one bin); "
                             f"draw at least {need} samples")
        return SimpleNamespace(statistic=0.0, pvalue=1.0)  # one possible token: it matches, nothing to test
    scale = sum(obs) / sum(exp)
    return chisquare(obs, [e * scale for e in exp])


_SUMMARIZED = ("drafted", "num_accepted", "depth", "emitted", "draft_calls", "draft_ms", "verify_ms", "target_ms")


def summarize_steps(steps, new_tokens: int, wall_ms: float) -> dict:
    """The ``stats`` dict of a generation from its step records (see module docstring for definitions).

    ``steps``: the :class:`lab.trace.StepRecord` list of one generation; ``new_tokens``: the tokens it generated;
    ``wall_ms``: its wall time in ms. Returns counts (``new_tokens``, ``target_calls``, ``draft_calls``,
    ``drafted_tokens``, ``accepted_tokens``), ``acceptance_rate`` (None when nothing was drafted),
    ``tokens_per_target_call`` (None without decode steps), ``per_position_acceptance`` (list of floats), the
    steps' summed ``draft_ms``, ``verify_ms`` and ``target_ms`` with ``wall_ms`` (all ms), and
    ``tokens_per_second`` (all ``new_tokens`` over ``wall_ms``; None when ``wall_ms`` <= 0). Every count but
    ``new_tokens`` is over the decode steps: the prefill's record (``StepRecord.prefill``) is left out, as vLLM's
    counters leave out the prefill, while its token is one of ``new_tokens``. Lesson 14 compares these keys with
    vLLM's counters. Raises ``ValueError`` naming ``new_tokens`` (an integer >= 0) or ``wall_ms`` (a finite number),
    ``TypeError`` when ``steps`` is not step records (:func:`lab.trace.step_records`; a Generation is taken whole).
    """
    new_tokens = check_int("new_tokens", new_tokens, 0)
    if isinstance(wall_ms, bool) or not isinstance(wall_ms, Real) or not math.isfinite(wall_ms):
        raise ValueError(f"wall_ms must be a finite number of milliseconds, got {wall_ms!r}")
    steps = [s for s in step_records(steps, "summarize_steps", _SUMMARIZED) if not getattr(s, "prefill", False)]
    drafted = sum(len(s.drafted) for s in steps)
    accepted = sum(s.num_accepted for s in steps)
    longest = max((s.depth for s in steps), default=0)
    per_position = []
    for i in range(longest):  # position i (0-based) is tree depth i + 1
        eligible = [s for s in steps if s.depth > i]
        per_position.append(sum(s.num_accepted > i for s in eligible) / len(eligible))
    decoded = sum(len(s.emitted) for s in steps)
    return {
        "new_tokens": new_tokens,
        "target_calls": len(steps),
        "draft_calls": sum(s.draft_calls for s in steps),
        "drafted_tokens": drafted,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / drafted if drafted else None,
        "tokens_per_target_call": decoded / len(steps) if steps else None,
        "per_position_acceptance": per_position,
        "draft_ms": sum(s.draft_ms for s in steps),
        "verify_ms": sum(s.verify_ms for s in steps),
        "target_ms": sum(s.target_ms for s in steps),
        "wall_ms": wall_ms,
        "tokens_per_second": new_tokens / (wall_ms / 1000) if wall_ms > 0 else None,
    }


def conditional_acceptance(steps) -> list:
    """Per draft position i (0-based), the share of steps that accepted position i among the steps that reached it
    with every earlier draft accepted: steps with ``depth > i`` and ``num_accepted >= i``. This is the decay of
    acceptance along a draft (MTP, Medusa and parallel drafts lose accuracy with distance; an autoregressive draft
    holds up). It is not the ratio of consecutive :func:`summarize_steps` ``per_position_acceptance`` values: those
    are taken over different steps (near the end of a generation the drafts are shorter), so their ratio can exceed 1.

    ``steps``: an iterable of :class:`lab.trace.StepRecord` (or objects with ``depth`` and ``num_accepted``).
    Returns a list of floats in [0, 1], one per position up to the deepest step, or None at a position no step
    reached with its earlier drafts accepted. Raises ``TypeError`` naming the function for anything else
    (:func:`lab.trace.step_records`)."""
    steps = step_records(steps, "conditional_acceptance", ("depth", "num_accepted"))
    longest = max((s.depth for s in steps), default=0)
    out = []
    for i in range(longest):
        reached = [s for s in steps if s.depth > i and s.num_accepted >= i]
        out.append(sum(s.num_accepted > i for s in reached) / len(reached) if reached else None)
    return out


def alpha_from_steps(steps) -> float | None:
    """Leviathan's per-token acceptance α estimated from step records: accepted drafts / drafts the target examined.
    A step examines its drafts up to the first rejection, so each step that ended at a rejection (``last_kind`` is
    ``"resampled"``) adds one failed trial; drafts after a rejection are never examined. For a chain that is a step
    with ``num_accepted < len(drafted)``; for a token tree, a path that ends at a leaf above the tree's depth
    rejected nothing (the target's token is a bonus), so it adds no failed trial. None when no draft was examined.
    Source: Leviathan et al. 2023, §3.1 (α as the expected acceptance per draft); lesson 12.

    ``steps``: an iterable (a generator works) of :class:`lab.trace.StepRecord` or objects with its ``drafted``,
    ``num_accepted`` and ``last_kind``. Returns a float in [0, 1] or None. Raises ``TypeError`` if ``steps`` is not
    iterable or an item lacks those fields (:func:`lab.trace.step_records`), ``ValueError`` for a ``last_kind``
    other than "resampled" or "bonus"."""
    steps = step_records(steps, "alpha_from_steps", ("drafted", "num_accepted", "last_kind"))  # read twice below
    unknown = next((s for s in steps if s.last_kind not in LAST_KINDS), None)
    if unknown is not None:  # a stand-in record's typo would count as no rejection
        raise ValueError(f"alpha_from_steps: a step's last_kind must be one of {LAST_KINDS}, got "
                         f"{unknown.last_kind!r}")
    accepted = sum(s.num_accepted for s in steps)
    rejections = sum(1 for s in steps if s.drafted and s.last_kind == "resampled")
    return accepted / (accepted + rejections) if accepted + rejections else None


def cost_ratio_from_steps(steps, ar_ms_per_step: float) -> float:
    """Measured cost ratio c: the mean draft time per draft forward (total ``draft_ms`` / total ``draft_calls``, ms)
    over ``ar_ms_per_step``, the time of one autoregressive target step (ms). ``steps``: an iterable (a generator
    works) of :class:`lab.trace.StepRecord`. Returns a float. Raises ``ValueError`` when the steps made no draft
    forward or ``ar_ms_per_step`` is not a finite number > 0 (a one-element tensor counts; a bool does not),
    ``TypeError`` when ``steps`` is not step records (:func:`lab.trace.step_records`). Lesson 12."""
    given, ar_ms = ar_ms_per_step, plain_number(ar_ms_per_step)
    if isinstance(ar_ms, bool) or not isinstance(ar_ms, Real) or not math.isfinite(ar_ms) or not ar_ms > 0:
        raise ValueError(f"ar_ms_per_step must be a finite number of ms > 0, got {given!r}")
    steps = step_records(steps, "cost_ratio_from_steps", ("draft_calls", "draft_ms"))  # read twice below
    calls = sum(s.draft_calls for s in steps)
    if calls == 0:
        raise ValueError("steps must include draft forward passes (draft_calls > 0) to measure c")
    return float(sum(s.draft_ms for s in steps)) / calls / float(ar_ms)
