"""Exercise checkers for lesson 06 (the speedup formula and the metrics people quote).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import math

from lab import metrics as _metrics
from lab.exercises.harness import checker, compare, Fail, outcome_of, same_float, same_int, same_whole, show_value
from lab.trace import StepRecord

__all__ = ["expected_tokens_per_call", "predicted_speedup", "best_n_draft", "speculation_metrics",
           "reference_speculation_metrics"]


_TOKENS_CASES = [(0.75, 5), (0.5, 1), (0.0, 4), (1.0, 4), (0.9, 10), (0.6, 3), (0.85, 7)]


@checker
def expected_tokens_per_call(fn):
    """Check ``fn(alpha, n_draft) -> float``: (1 - alpha^(N+1)) / (1 - alpha), and N + 1 at alpha = 1.

    Reference: :func:`lab.metrics.expected_tokens_per_call` (Leviathan et al. 2023, equation 1). Returns True/False.
    """
    faults = [
        (lambda a, n: (1 - a ** n) / (1 - a),
         "the exponent is N + 1: a step emits the accepted drafts plus one target token (resampled or bonus)."),
        (lambda a, n: 1 / (1 - a), "1/(1 - alpha) is the limit for unbounded N; with N drafts the sum stops at "
                                   "alpha^N: (1 - alpha^(N+1)) / (1 - alpha)."),
        (lambda a, n: (1 - a ** (n + 1)) / (1 - a),
         "at alpha = 1 the formula divides by zero; every draft is accepted then, so return N + 1."),
        (lambda a, n: math.nan if a == 1 else _metrics.expected_tokens_per_call(a, n),
         "at alpha = 1 the formula is 0 / 0 (NaN with NumPy or torch); every draft is accepted then, so return "
         "N + 1."),
        (lambda a, n: math.inf if a == 1 else _metrics.expected_tokens_per_call(a, n),
         "at alpha = 1 the formula divides by zero (inf with NumPy or torch); every draft is accepted then, so "
         "return N + 1."),
        (lambda a, n: 1 + n * a,
         "acceptance stops at the first rejection, so draft i counts only if drafts 1..i were all accepted: "
         "1 + alpha + alpha^2 + ... + alpha^N."),
        (lambda a, n: n if a == 1 else _metrics.expected_tokens_per_call(a, n),
         "at alpha = 1 all N drafts are accepted AND the target adds its bonus token: return N + 1, not N."),
        (lambda a, n: n * a, "count the target's own token too: a step always emits at least one token."),
        (lambda a, n: sum(a ** i for i in range(1, n + 2)),
         "the sum runs from alpha^0 (the target's own token, emitted every step) to alpha^N (all N drafts "
         "accepted): N + 1 terms, starting at i = 0."),
        (lambda a, n: sum(a ** i for i in range(n + 2)),
         "one term too many: the last is alpha^N (all N drafts accepted), so range(N + 1), not range(N + 2)."),
        (lambda a, n: _metrics.expected_tokens_per_call(a, n) - 1,
         "every answer is exactly one short: the sum starts at i = 0 (alpha^0 = 1, the target's own token, which "
         "every step emits), not at i = 1."),
    ]
    n = compare("expected_tokens_per_call", fn, _TOKENS_CASES, _metrics.expected_tokens_per_call, faults,
                same_float, "list what one step can emit (0, 1, ..., N accepted drafts, then the target's token) "
                "and the chance of each, then add them up for the case above; alpha = 1 needs its own answer.")
    return f"correct on all {n} cases, including alpha = 0 and alpha = 1."


_SPEEDUP_CASES = [(0.75, 5, 0.2), (0.75, 5, 0.1), (0.5, 1, 0.0), (0.9, 8, 0.05), (1.0, 4, 0.25), (0.0, 3, 0.1)]


@checker
def predicted_speedup(fn):
    """Check ``fn(alpha, n_draft, cost_ratio) -> float``: tokens per call / (1 + N c).

    Reference: :func:`lab.metrics.predicted_speedup` (Leviathan et al. 2023, Theorem 3.8). Returns True/False.
    """
    def tokens(a, n):
        return _metrics.expected_tokens_per_call(a, n)

    faults = [
        (lambda a, n, c: tokens(a, n) / (n * c) if c > 0 else math.inf,
         "a step also costs one target pass: divide by 1 + N*c (in units of one target pass)."),
        (lambda a, n, c: tokens(a, n),
         "that is tokens per target call; the draft's N passes cost N*c target passes: divide by 1 + N*c."),
        (lambda a, n, c: tokens(a, n) / (1 + (n + 1) * c),
         "the draft runs N times per step, not N + 1."),
        (lambda a, n, c: tokens(a, n) * (1 - n * c), "costs add: divide by (1 + N*c), don't multiply by 1 - N*c."),
        (lambda a, n, c: tokens(a, n) / (1 + c),
         "the draft runs once per drafted token: N*c, not c."),
        (lambda a, n, c: tokens(a, n) / (1 + (n - 1) * c),
         "each of the N drafted tokens takes one draft pass: N*c, not (N - 1)*c."),
        (lambda a, n, c: tokens(a, n) * (1 + n * c),
         "the cost of a step divides the tokens it yields (tokens per unit of time), it does not multiply them."),
        (lambda a, n, c: tokens(a, n) / (n + c),
         "count a step's cost in target passes: one target pass plus N draft passes of c each, 1 + N*c."),
        (lambda a, n, c: (1 - a ** (n + 1)) / (1 - a) / (1 + n * c),
         "at alpha = 1 the closed form divides by zero: every draft is accepted, so a call yields N + 1 tokens. "
         "Reuse your expected_tokens_per_call, which handles alpha = 1."),
        (lambda a, n, c: (n if a == 1 else (1 - a ** n) / (1 - a)) / (1 + n * c),
         "the expected tokens per call are (1 - alpha^(N+1)) / (1 - alpha): the exponent is N + 1, since a step "
         "emits the accepted drafts plus one target token (resampled or bonus)."),
    ]
    n = compare("predicted_speedup", fn, _SPEEDUP_CASES, _metrics.predicted_speedup, faults, same_float,
                "a speedup is tokens per unit of time against autoregressive decoding's one token per target pass: "
                "what does one step yield, and what does it cost in target passes?")
    return f"correct on all {n} cases."


_BEST_N_CASES = [(0.75, 0.1, 16), (0.5, 0.1, 16), (0.85, 0.05, 16), (0.7, 0.2, 16), (0.9, 0.0, 8), (0.0, 0.1, 16),
                 (0.95, 0.02, 12), (1.0, 0.0, 5), (0.0, 0.0, 8), (1.0, 1.0, 6), (1.0, 1.5, 6)]


@checker
def best_n_draft(fn):
    """Check ``fn(alpha, cost_ratio, max_n) -> int``: the N in 1..max_n with the largest predicted speedup
    (the smallest such N on ties). Reference: :func:`lab.metrics.optimal_n_draft`. Returns True/False.
    """
    def speedups(a, c, m):
        return {n: _metrics.predicted_speedup(a, n, c) for n in range(1, m + 1)}

    faults = [
        (lambda a, c, m: max(range(1, m + 1), key=lambda n: _metrics.expected_tokens_per_call(a, n)),
         "maximise the predicted SPEEDUP (which pays for the draft's passes), not tokens per call, which always "
         "grows with N."),
        (lambda a, c, m: max(range(1, m), key=lambda n: _metrics.predicted_speedup(a, n, c)),
         "include max_n itself: range(1, max_n + 1)."),
        (lambda a, c, m: max(speedups(a, c, m).values()), "return the best N, not the best speedup."),
        (lambda a, c, m: max(sorted(speedups(a, c, m), reverse=True), key=lambda n: speedups(a, c, m)[n]),
         "on ties keep the smallest N (fewer wasted draft passes)."),
        (lambda a, c, m: max(range(0, m + 1), key=lambda n: _metrics.expected_tokens_per_call(a, max(n, 1))
                             / (1 + n * c)) if m else 0,
         "N starts at 1: with N = 0 there is no speculation."),
        (lambda a, c, m: max(range(1, 17), key=lambda n: _metrics.predicted_speedup(a, n, c)),
         "search N = 1 … max_n, the max_n argument, not a fixed range (range(1, 17)): range(1, max_n + 1)."),
        (lambda a, c, m: max(range(m), key=lambda n: _metrics.predicted_speedup(a, max(n, 1), c)),
         "range(max_n) runs from 0 to max_n - 1: the draft lengths to try are 1 … max_n, range(1, max_n + 1)."),
        (lambda a, c, m: _metrics.optimal_n_draft(a, c, m) - 1,
         "every answer is exactly one short: that is the 0-based index of the best speedup (np.argmax over a list "
         "that starts at N = 1); the draft length is that index + 1."),
    ]
    first = outcome_of(fn, _BEST_N_CASES[0])  # a pair such as (N, its speedup) holding the right N
    if (first[0] == "ok" and isinstance(first[1], (tuple, list)) and len(first[1]) == 2
            and same_whole(first[1][0], _metrics.optimal_n_draft(*_BEST_N_CASES[0]))):
        raise Fail(f"best_n_draft{_BEST_N_CASES[0]} returned {first[1]!r}: the right N, with something else.\n  "
                   "Hint: return the best N alone, not (N, its speedup): the lesson formats the answer as one whole "
                   "number.")
    n = compare("best_n_draft", fn, _BEST_N_CASES, _metrics.optimal_n_draft, faults, same_int,
                "try every N from 1 to max_n and keep the one with the largest predicted_speedup (smallest on ties).")
    answer = outcome_of(fn, _BEST_N_CASES[0])
    if answer[0] == "ok" and not same_whole(answer[1], _metrics.optimal_n_draft(*_BEST_N_CASES[0])):
        raise Fail(f"the values are right, but best_n_draft{_BEST_N_CASES[0]} returned {answer[1]!r}, a "
                   f"{type(answer[1]).__name__}.\n  Hint: return N as an int (int(...), or range() values instead "
                   "of a float array such as np.arange(1.0, ...)): a draft length is a whole count, and the lesson "
                   "formats it with :d.")
    return f"correct on all {n} cases."


def _records(specs):
    """StepRecords from (n_drafted, n_accepted, n_emitted) triples."""
    out = []
    position = 0
    for i, (drafted, accepted, emitted) in enumerate(specs):
        out.append(StepRecord(index=i, position=position, drafted=list(range(drafted)), num_accepted=accepted,
                              emitted=list(range(emitted)), last_kind="bonus" if accepted == drafted else "resampled",
                              draft_calls=drafted))
        position += emitted
    return out


_METRIC_CASES = [
    ([(4, 4, 5), (4, 1, 2), (4, 0, 1), (4, 3, 4)], 0.1),
    # the last step had nothing left to draft (one token to go): a target call all the same
    ([(5, 5, 6), (5, 5, 6), (2, 0, 1), (0, 0, 1)], 0.25),
    ([(3, 1, 2), (1, 1, 2), (4, 2, 3), (4, 4, 3)], 0.05),  # the last step was cut by max_new_tokens
    ([(4, 0, 1)] * 3, 0.5),
]


def reference_speculation_metrics(steps, cost_ratio):
    """The answer to the metrics exercise: a dict of ``acceptance_rate``, ``tokens_per_target_call`` and
    ``cost_per_token`` (in target passes) for the step records ``steps`` (one target call each). The lesson uses it
    while the exercise is unsolved. Raises ``ZeroDivisionError`` when nothing was drafted or emitted."""
    drafted = sum(len(s.drafted) for s in steps)
    accepted = sum(s.num_accepted for s in steps)
    emitted = sum(len(s.emitted) for s in steps)
    return {"acceptance_rate": accepted / drafted,
            "tokens_per_target_call": emitted / len(steps),
            "cost_per_token": (len(steps) + cost_ratio * drafted) / emitted}


_EMITTED_HINT = ("count the tokens actually emitted (len(step.emitted)): a step cut short by max_new_tokens or EOS "
                 "emits fewer than accepted + 1.")


@checker
def speculation_metrics(fn):
    """Check ``fn(steps: list[StepRecord], cost_ratio) -> dict`` with three numbers:

    - ``acceptance_rate``: accepted drafts / drafted tokens (over the whole run);
    - ``tokens_per_target_call``: emitted tokens / target calls (one call per step);
    - ``cost_per_token``: (target calls + cost_ratio × draft passes) / emitted tokens, in target passes, where
      each drafted token costs one draft pass.
    Returns True/False.
    """
    cases = [(_records(specs), c) for specs, c in _METRIC_CASES]

    def ref(steps, c):
        return reference_speculation_metrics(steps, c)

    def variant(**changes):
        def fn_(steps, c):
            out = ref(steps, c)
            for key, f in changes.items():
                out[key] = f(steps, c)
            return out
        return fn_

    drafted = lambda steps: sum(len(s.drafted) for s in steps)  # noqa: E731
    accepted = lambda steps: sum(s.num_accepted for s in steps)  # noqa: E731
    emitted = lambda steps: sum(len(s.emitted) for s in steps)  # noqa: E731
    faults = [
        (variant(acceptance_rate=lambda s, c: emitted(s) / drafted(s)),
         "acceptance_rate counts accepted DRAFTS only; the resampled/bonus token is the target's, not an accepted "
         "draft."),
        (variant(acceptance_rate=lambda s, c: _metrics.alpha_from_steps(s)),
         "that is alpha, accepted / drafts the target examined (a step examines its drafts up to the first "
         "rejection; the drafts after it are never tested). The acceptance rate counts every drafted token, tested "
         "or not: accepted / drafted, summed over all steps."),
        (variant(acceptance_rate=lambda s, c: sum(x.num_accepted / len(x.drafted) for x in s) / len(s)),
         "divide total accepted by total drafted over the run; the mean of per-step ratios weights short drafts "
         "too much."),
        (variant(tokens_per_target_call=lambda s, c: accepted(s) / len(s)),
         "tokens per target call counts every emitted token, including the target's own token each step."),
        (variant(tokens_per_target_call=lambda s, c: (accepted(s) + len(s)) / len(s)), _EMITTED_HINT),
        # the same miscount used for both keys, as a learner who counts emitted tokens once would
        (variant(tokens_per_target_call=lambda s, c: (accepted(s) + len(s)) / len(s),
                 cost_per_token=lambda s, c: (len(s) + c * drafted(s)) / (accepted(s) + len(s))), _EMITTED_HINT),
        (variant(cost_per_token=lambda s, c: (len(s) + c * drafted(s)) / accepted(s) if accepted(s) else math.inf),
         "divide the cost by the tokens the user gets (all emitted tokens), not by accepted drafts only."),
        (variant(cost_per_token=lambda s, c: (len(s) + drafted(s)) / emitted(s)),
         "a draft pass costs cost_ratio target passes: weight the draft passes by cost_ratio."),
        (variant(cost_per_token=lambda s, c: len(s) / emitted(s)),
         "cost per token must include the draft's passes (cost_ratio each)."),
        (variant(acceptance_rate=lambda s, c: 100 * accepted(s) / drafted(s)),
         "acceptance_rate is a fraction in [0, 1] (0.6), as the other lessons print it, not a percentage (60)."),
    ]

    def same(a, b):
        if not isinstance(a, dict):
            return False
        keys = ("acceptance_rate", "tokens_per_target_call", "cost_per_token")
        return all(k in a and same_float(a[k], b[k]) for k in keys)

    def show(args):
        steps, c = args
        return ("[" + ", ".join(f"(drafted {len(s.drafted)}, accepted {s.num_accepted}, emitted {len(s.emitted)})"
                                for s in steps) + f"], cost_ratio={c}")

    generic = ("count by hand on the run above: how many tokens were drafted, accepted and emitted, how many target "
               "calls there were, and what they all cost in target passes, per emitted token.")
    named = False  # the generic hint names the keys that are off on the first run the answer gets wrong
    for steps, c in cases:
        out = outcome_of(fn, (steps, c))
        if out[0] == "ok" and out[1] is None:
            raise Fail(f"speculation_metrics({show((steps, c))}) returned None: did you forget a `return` "
                       "statement? Return a dict with the keys 'acceptance_rate', 'tokens_per_target_call' and "
                       "'cost_per_token'.")
        if out[0] == "ok":
            missing = [k for k in ("acceptance_rate", "tokens_per_target_call", "cost_per_token")
                       if not isinstance(out[1], dict) or k not in out[1]]
            if missing:
                raise Fail(f"return a dict with the keys 'acceptance_rate', 'tokens_per_target_call' and "
                           f"'cost_per_token'; missing {missing}.")
            want = ref(steps, c)
            if not named and not same(out[1], want):
                named = True
                generic += " Wrong there: " + ", ".join(f"{k} ({show_value(out[1][k])}, expected "
                                                        f"{show_value(want[k])})" for k in want
                                                        if not same_float(out[1][k], want[k])) + "."
    n = compare("speculation_metrics", fn, cases, ref, faults, same, generic, show_args=show)
    return f"all three metrics correct on {n} runs."
