"""Exercise checkers for lesson 01 (the sequential bottleneck: step latency, arithmetic intensity).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

from lab.exercises.harness import checker, compare, same_float

__all__ = ["step_latency", "arithmetic_intensity", "reference_step_latency", "reference_arithmetic_intensity"]


def reference_step_latency(target_ms, draft_ms, n_draft):
    """The answer to the step-latency exercise: ms of one draft-then-verify step, ``n_draft`` draft passes and one
    target pass over all drafted positions."""
    return n_draft * draft_ms + target_ms


_STEP_LATENCY_CASES = [(30.0, 3.0, 5), (30.0, 3.0, 1), (10.0, 1.0, 4), (7.6, 0.93, 4), (30.0, 0.0, 5),
                       (12.0, 2.5, 8), (7.6, 0.937, 3)]  # 10.411 ms: round(x, 2) passed the others


@checker
def step_latency(fn):
    """Check ``fn(target_ms, draft_ms, n_draft) -> ms`` for one draft-then-verify step (seed lesson 000).

    Reference: ``n_draft * draft_ms + target_ms`` (one target pass verifies all drafts). Returns True/False.
    """
    faults = [
        (lambda t, d, n: (n + 1) * d + t,
         "the draft runs once per drafted token: N passes, not N + 1 (the target supplies the extra token)."),
        (lambda t, d, n: n * d + (n + 1) * t,
         "the target verifies all drafted positions in ONE forward pass, so it costs target_ms once per step."),
        (lambda t, d, n: t,
         "the draft's passes are not free: add n_draft * draft_ms."),
        (lambda t, d, n: d + t,
         "the draft is autoregressive: it runs once per drafted token, n_draft passes in all."),
        (lambda t, d, n: n * (d + t),
         "one step has N draft passes and a single target pass, not N of each."),
        (lambda t, d, n: n * t + d,
         "target and draft are swapped: the DRAFT runs n_draft times (draft_ms each), the target once."),
        (lambda t, d, n: round(n * d + t),
         "return the time unrounded (no round() or int()): milliseconds have decimals, and later cells compute "
         "with the value."),
        (lambda t, d, n: int(n * d + t),
         "return the time unrounded (no int() or round()): milliseconds have decimals, and later cells compute "
         "with the value."),
        *[(lambda t, d, n, digits=digits: round(n * d + t, digits),
           "return the time unrounded (no round() to some decimals): later cells compute with the value, and a "
           "rounded time makes their ratios wrong in the last digits.") for digits in (1, 2)],
    ]
    n = compare("step_latency", fn, _STEP_LATENCY_CASES, reference_step_latency, faults, same_float,
                "one step = n_draft draft passes + one target pass over all drafted positions.")
    return f"correct on all {n} cases (30 ms target, 3 ms draft, N = 5 gives 45 ms)."


def reference_arithmetic_intensity(k_tokens, bytes_per_param):
    """The answer to the intensity exercise: FLOPs per byte of one forward pass over ``k_tokens`` tokens, 2 FLOPs
    per parameter per token over ``bytes_per_param`` bytes read once per pass."""
    return 2 * k_tokens / bytes_per_param


_INTENSITY_CASES = [(1, 2), (16, 2), (1, 4), (300, 2), (8, 1), (5, 4)]


@checker
def arithmetic_intensity(fn):
    """Check ``fn(k_tokens, bytes_per_param) -> FLOPs per byte`` of one forward pass over ``k_tokens``.

    Reference: ``2 * k_tokens / bytes_per_param`` (each parameter does one multiply-add per token and is read
    from memory once per pass; attention and activations ignored). Returns True/False.
    """
    faults = [
        (lambda k, b: k / b, "a multiply-add is 2 FLOPs: each parameter costs 2 FLOPs per token."),
        (lambda k, b: b / (2 * k), "intensity is FLOPs divided by bytes, not bytes divided by FLOPs."),
        # also what 2 * k / (b * k) gives: bytes counted per token instead of once per pass
        (lambda k, b: 2 / b, "the weights are read once per pass (one read serves all k tokens) but used once per "
                             "token: FLOPs grow with k, bytes do not."),
        (lambda k, b: 2 * k * b, "divide by the bytes read (bytes_per_param per parameter), don't multiply."),
        (lambda k, b: 2 * k / (8 * b), "bytes_per_param is already in bytes: don't multiply it by 8 (that counts "
                                       "bits). Intensity is FLOPs per BYTE."),
        (lambda k, b: 2 * k * 8 / b, "keep everything in bytes: FLOPs per byte is 2 * k / bytes_per_param, with no "
                                     "factor of 8."),
        # round(2 * k / b) gives the same answers on these cases: the hint names both
        (lambda k, b: 2 * k // b, "keep the fraction: //, round() and int() all make a whole number of it "
                                  "(2 * 1 // 4 = 0, round(0.5) = 0), and an intensity below one FLOP per byte is "
                                  "exactly what a single token gives. Divide with / and return the result as it is."),
    ]
    n = compare("arithmetic_intensity", fn, _INTENSITY_CASES, reference_arithmetic_intensity, faults, same_float,
                "count what one pass computes and what it reads: each of the k tokens costs two FLOPs (a multiply and "
                "an add) per parameter, while the weights are read once per pass however many tokens it holds.")
    return f"correct on all {n} cases."
