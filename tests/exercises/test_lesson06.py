"""The exercise checkers of lesson 06 (the speedup formula and its metrics; lab.exercises.lesson06): the reference
passes, planted mistakes are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import math

import numpy as np

from lab import metrics
from lab.exercises import lesson06 as check
from tests.helpers import rejects


def run(checker, fn, capsys):
    """(returned bool, printed text)."""
    ok = checker(fn)
    return ok, capsys.readouterr().out


def test_expected_tokens_per_call(capsys):
    ok, _ = run(check.expected_tokens_per_call, metrics.expected_tokens_per_call, capsys)
    assert ok
    rejects(check.expected_tokens_per_call, lambda a, n: (1 - a ** n) / (1 - a) if a < 1 else n, capsys,
                   "exponent is N + 1")
    rejects(check.expected_tokens_per_call, lambda a, n: (1 - a ** (n + 1)) / (1 - a), capsys, "alpha = 1")
    rejects(check.expected_tokens_per_call, lambda a, n: 1 + n * a, capsys, "first rejection")
    rejects(check.expected_tokens_per_call, lambda a, n: 1 / (1 - a) if a < 1 else math.inf, capsys,
                   "unbounded N")

    def numpy_style(a, n):  # NumPy divides 0 by 0 without raising

        with np.errstate(divide="ignore", invalid="ignore"):
            return float((1 - np.float64(a) ** (n + 1)) / (1 - np.float64(a)))

    rejects(check.expected_tokens_per_call, numpy_style, capsys, "0 / 0 (NaN")
    # the sum started at i = 1 (the target's own token left out): every answer one short
    rejects(check.expected_tokens_per_call, lambda a, n: sum(a ** i for i in range(1, n + 1)), capsys,
            "exactly one short", "starts at i = 0")


def test_predicted_speedup(capsys):
    ok, _ = run(check.predicted_speedup, metrics.predicted_speedup, capsys)
    assert ok
    e = metrics.expected_tokens_per_call
    rejects(check.predicted_speedup, lambda a, n, c: e(a, n), capsys, "that is tokens per target call")
    rejects(check.predicted_speedup, lambda a, n, c: e(a, n) / (1 + (n + 1) * c), capsys, "not N + 1")
    rejects(check.predicted_speedup, lambda a, n, c: e(a, n) / (1 + c), capsys, "N*c, not c")
    rejects(check.predicted_speedup, lambda a, n, c: (1 - a ** (n + 1)) / (1 - a) / (1 + n * c), capsys,
                   "Reuse your expected_tokens_per_call")


def test_best_n_draft(capsys):
    ok, _ = run(check.best_n_draft, metrics.optimal_n_draft, capsys)
    assert ok
    s = metrics.predicted_speedup
    rejects(check.best_n_draft, lambda a, c, m: m, capsys, "SPEEDUP")
    rejects(check.best_n_draft, lambda a, c, m: max(range(1, m), key=lambda n: s(a, n, c)), capsys,
                   "include max_n")
    rejects(check.best_n_draft, lambda a, c, m: max(s(a, n, c) for n in range(1, m + 1)), capsys,
                   "not the best speedup")
    rejects(check.best_n_draft,
                   lambda a, c, m: max(range(m, 0, -1), key=lambda n: round(s(a, n, c), 12)), capsys, "smallest N")


    def zero_based(a, c, m):  # np.argmax over the speedups of N = 1..max_n: the index, not N

        return int(np.argmax([s(a, n, c) for n in range(1, m + 1)]))

    rejects(check.best_n_draft, zero_based, capsys, "exactly one short", "index + 1")


def test_speculation_metrics(capsys):
    def good(steps, c):
        drafted = sum(len(s.drafted) for s in steps)
        accepted = sum(s.num_accepted for s in steps)
        emitted = sum(len(s.emitted) for s in steps)
        return {"acceptance_rate": accepted / drafted, "tokens_per_target_call": emitted / len(steps),
                "cost_per_token": (len(steps) + c * drafted) / emitted}

    ok, out = run(check.speculation_metrics, good, capsys)
    assert ok, out

    def changed(**kw):
        def fn(steps, c):
            out = good(steps, c)
            out.update({k: f(steps, c) for k, f in kw.items()})
            return out
        return fn

    acc = lambda s: sum(x.num_accepted for x in s)  # noqa: E731
    drafted = lambda s: sum(len(x.drafted) for x in s)  # noqa: E731
    emitted = lambda s: sum(len(x.emitted) for x in s)  # noqa: E731
    rejects(check.speculation_metrics, changed(acceptance_rate=lambda s, c: emitted(s) / drafted(s)), capsys,
                   "accepted DRAFTS only")
    rejects(check.speculation_metrics,
                   changed(cost_per_token=lambda s, c: (len(s) + c * drafted(s)) / acc(s)), capsys, "not by accepted")
    rejects(check.speculation_metrics, changed(tokens_per_target_call=lambda s, c: (acc(s) + len(s)) / len(s)),
                   capsys, "cut short")
    # a learner counts emitted tokens as accepted + 1 per step once and uses that count for both keys
    rejects(check.speculation_metrics, changed(tokens_per_target_call=lambda s, c: (acc(s) + len(s)) / len(s),
                                               cost_per_token=lambda s, c: (len(s) + c * drafted(s))
                                               / (acc(s) + len(s))), capsys, "len(step.emitted)", "cut short")
    rejects(check.speculation_metrics,
                   changed(acceptance_rate=lambda s, c: sum(x.num_accepted / len(x.drafted) for x in s) / len(s)),
                   capsys, "mean of per-step ratios")
    rejects(check.speculation_metrics, lambda s, c: {"acceptance_rate": 0.5}, capsys, "missing")


def test_predicted_speedup_with_alpha_to_the_n(capsys):
    rejects(check.predicted_speedup, lambda a, n, c: sum(a ** i for i in range(n)) / (1 + n * c), capsys,
            "exponent is N + 1")


def test_best_n_draft_that_ignores_max_n(capsys):
    rejects(check.best_n_draft,
            lambda a, c, m: max(range(1, 17), key=lambda n: metrics.predicted_speedup(a, n, c)), capsys,
            "the max_n argument, not a fixed range")


def test_speculation_metrics_without_a_return(capsys):
    rejects(check.speculation_metrics, lambda steps, c: None, capsys, "returned None", "`return`")


def test_best_n_draft_must_be_an_int(capsys):
    from lab.metrics import optimal_n_draft

    rejects(check.best_n_draft, lambda a, c, m: float(optimal_n_draft(a, c, m)), capsys, "return N as an int")
    rejects(check.best_n_draft, lambda a, c, m: np.arange(1.0, m + 1)[optimal_n_draft(a, c, m) - 1], capsys,
            "np.arange")   # cell 16 formats N with :2d
    assert check.best_n_draft(lambda a, c, m: np.int64(optimal_n_draft(a, c, m)))


def test_speculation_metrics_counts_a_step_without_drafts_as_a_target_call(capsys):
    def only_drafting_steps(steps, cost_ratio):
        ref = check.reference_speculation_metrics(steps, cost_ratio)
        calls = sum(1 for s in steps if s.drafted)
        emitted = sum(len(s.emitted) for s in steps)
        return {**ref, "tokens_per_target_call": emitted / calls}

    rejects(check.speculation_metrics, only_drafting_steps, capsys, "tokens_per_target_call")


def test_speculation_metrics_that_reports_alpha_as_the_acceptance_rate(capsys):
    """The lesson computes alpha from the records right after the table of names; returning it as the acceptance
    rate (accepted / drafts examined, instead of accepted / drafted) gets a hint that names the difference."""
    def alpha_as_rate(steps, c):
        out = check.reference_speculation_metrics(steps, c)
        accepted = sum(s.num_accepted for s in steps)
        tested = sum(s.num_accepted + (s.num_accepted < len(s.drafted)) for s in steps)  # as lesson 06 counts them
        out["acceptance_rate"] = accepted / tested
        return out

    out = rejects(check.speculation_metrics, alpha_as_rate, capsys, "that is alpha", "never tested",
                  "accepted / drafted")
    # the first run: 8 accepted of 16 drafted (rate 0.5), of 11 drafts examined (alpha 8/11)
    assert "0.727" in out and "0.5" in out, out


def test_alpha_one_returning_n_and_a_best_n_pair_get_their_own_hints(capsys):
    rejects(check.expected_tokens_per_call, lambda a, n: n if a == 1 else (1 - a ** (n + 1)) / (1 - a), capsys,
            "return N + 1, not N")

    def pair(a, c, m):
        best = metrics.optimal_n_draft(a, c, m)
        return best, metrics.predicted_speedup(a, best, c)

    rejects(check.best_n_draft, pair, capsys, "the best N alone")


def test_speculation_metrics_names_the_wrong_key(capsys):
    """The generic hint never said which of the three numbers was off (a learner's run)."""
    def learner(steps, cost_ratio):
        out = check.reference_speculation_metrics(steps, cost_ratio)
        out["cost_per_token"] *= 2  # a slip no planted mistake explains
        return out

    out = rejects(check.speculation_metrics, learner, capsys, "Wrong there: cost_per_token (")
    assert "acceptance_rate (" not in out.split("Wrong there:")[1], out
    percent = rejects(check.speculation_metrics, lambda steps, c: {
        **check.reference_speculation_metrics(steps, c),
        "acceptance_rate": 100 * check.reference_speculation_metrics(steps, c)["acceptance_rate"]}, capsys,
        "not a percentage")
    assert "Wrong there" not in percent


def test_a_solved_function_that_calls_another_exercises_stub_is_told_which(capsys):
    def expected_tokens_per_call(alpha, n):
        raise NotImplementedError

    def predicted_speedup(alpha, n, c):
        return expected_tokens_per_call(alpha, n) / (1 + n * c)

    capsys.readouterr()
    assert check.predicted_speedup(predicted_speedup) is False
    out = capsys.readouterr().out
    assert "your predicted_speedup calls expected_tokens_per_call, which still raises NotImplementedError" in out

    def stub(alpha, n, c):
        raise NotImplementedError

    assert check.predicted_speedup(stub) is False
    assert "replace `raise NotImplementedError` with your code" in capsys.readouterr().out


def test_more_planted_mistakes_and_pointers(capsys):
    """Mistakes the planted list missed (a learner's): the sum from alpha^1, (N - 1)c; and an unexplained answer gets
    a pointer to the reasoning, not the formula."""
    rejects(check.expected_tokens_per_call, lambda a, n: sum(a ** i for i in range(1, n + 2)), capsys,
            "starting at i = 0")
    rejects(check.predicted_speedup,
            lambda a, n, c: (n + 1 if a == 1 else (1 - a ** (n + 1)) / (1 - a)) / (1 + (n - 1) * c), capsys,
            "not (N - 1)*c")
    out = rejects(check.predicted_speedup, lambda a, n, c: 1.25, capsys, "what does one step yield")
    assert "1 + N * cost_ratio" not in out
    out = rejects(check.expected_tokens_per_call, lambda a, n: 2.0, capsys, "the chance of each")
    assert "(1 - alpha^(N+1))" not in out
