"""The checker harness (lab.exercises.harness), through the checkers that use it: a stub prints "not solved yet", an
error or a non-callable is reported and never raised, every call of the learner's function is time-limited, an
argument changed in place is reported and the cases stay intact, and the comparison helpers tell near misses, strings,
wrapped numbers and wrong shapes from right answers, with the hint that fits."""
from __future__ import annotations

import math
import signal
import time

import numpy as np
import pytest
import torch

from lab import metrics, sampling
from lab.drafters.prompt_lookup import ngram_lookup
from lab.exercises import (harness, lesson01, lesson02, lesson03, lesson04, lesson05, lesson06, lesson07, lesson08,
                           lesson09, lesson10, lesson12, lesson13, lesson14)
from lab.kv import emitted_tokens, next_position
from tests.helpers import rejects


def stub(*args, **kwargs):
    raise NotImplementedError


def run(checker, fn, capsys):
    """(returned bool, printed text)."""
    ok = checker(fn)
    return ok, capsys.readouterr().out


ALL_CHECKERS = [lesson01.step_latency, lesson01.arithmetic_intensity, lesson02.accept_probability,
                lesson02.accept_or_reject, lesson03.residual_distribution, lesson03.residual_after_rejection,
                lesson03.residual_without_softmax, lesson03.residual_zero_mass, lesson04.speculative_step,
                lesson04.chi_square_pvalue, lesson04.greedy_draft, lesson04.topk_draft, lesson05.expected_acceptance,
                lesson06.expected_tokens_per_call, lesson06.predicted_speedup, lesson06.best_n_draft,
                lesson06.speculation_metrics]


def in_place_residual(t, d):
    missing = t.sub_(d).clamp_(min=0)  # the learner's in-place version: edits target_probs
    mass = missing.sum(-1, keepdim=True)
    return torch.where(mass > 0, missing / torch.where(mass > 0, mass, torch.ones_like(mass)), t)


def forever(*args, **kwargs):
    while True:
        pass


def _models():
    from tests.helpers import tiny_llama

    return tiny_llama(0, layers=1)


HANGING = [
    ("speculative_step", lambda: lesson04.speculative_step(forever)),
    ("greedy_draft", lambda: lesson04.greedy_draft(forever)),
    ("topk_draft", lambda: lesson04.topk_draft(forever)),
    ("accept_or_reject", lambda: lesson02.accept_or_reject(forever)),
    ("chi_square_pvalue", lambda: lesson04.chi_square_pvalue(forever)),
    ("speculation_metrics", lambda: lesson06.speculation_metrics(forever)),
    ("next_n_draft", lambda: lesson12.next_n_draft(forever)),
    ("stats_from_vllm_counters", lambda: lesson14.stats_from_vllm_counters(forever)),
    ("medusa_loss", lambda: lesson10.medusa_loss(forever)),
    ("tree_mask", lambda: lesson10.tree_mask(forever)),
    ("rollback_after_rejection", lambda: lesson07.rollback_after_rejection(forever, _models(), [1, 2, 3],
                                                                           [4, 5])),
]


def run_with_args(capsys, checker, fn, *args):
    ok = checker(fn, *args)
    return ok, capsys.readouterr().out


@pytest.mark.parametrize("checker", ALL_CHECKERS, ids=lambda c: c.__name__)
def test_stub_prints_not_solved_yet(checker, capsys):
    ok, out = run(checker, stub, capsys)
    assert ok is False
    assert "not solved yet" in out


@pytest.mark.parametrize("checker", ALL_CHECKERS, ids=lambda c: c.__name__)
def test_unexpected_error_is_reported_not_raised(checker, capsys):
    def broken(*args):
        raise KeyError("oops")

    ok, out = run(checker, broken, capsys)
    assert ok is False and out.startswith("✗") and "KeyError" in out


def test_non_callable_is_reported(capsys):
    ok, out = run(lesson02.accept_or_reject, 0.5, capsys)
    assert ok is False and "pass your function" in out


def test_a_call_that_never_returns_is_reported(monkeypatch, capsys):
    """Every compare-based checker stops a learner's endless loop after CALL_TIME_LIMIT_S and says so; the alarm
    and its handler are put back as they were. (lesson 13's checker tests its tighter limit and the thread fallback.)"""
    import signal
    import time

    def forever(target_ms, draft_ms, n_draft):
        while True:
            pass

    monkeypatch.setattr(harness, "CALL_TIME_LIMIT_S", 0.3)
    handler = signal.getsignal(signal.SIGALRM)
    start = time.perf_counter()
    ok, out = run(lesson01.step_latency, forever, capsys)
    assert time.perf_counter() - start < 3
    assert ok is False
    assert out.startswith("✗ step_latency: forever(30, 3, 5) did not return within 0.3 s."), out
    assert "loop with no way out" in out
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is handler
    # and an answer that comes back in time is checked as before, under the same limit
    ok, out = run(lesson01.step_latency, lambda t, d, n: n * d + t, capsys)
    assert ok and out.startswith("✓")


@pytest.mark.parametrize("checker, fn", [
    (lesson03.residual_distribution, in_place_residual),
    (lesson03.residual_zero_mass, in_place_residual),
    (lesson03.residual_after_rejection, lambda t, d, token: in_place_residual(t, d)),
    (lesson05.expected_acceptance, lambda t, d: float(torch.minimum(t, d.clamp_(max=0.5)).sum())),
], ids=["residual", "zero_mass", "after_rejection", "acceptance"])
def test_inputs_modified_in_place(checker, fn, capsys):
    before = [[a.clone() for a in case if isinstance(a, torch.Tensor)]
              for case in lesson03._RESIDUAL_CASES + lesson03._AFTER_REJECTION_CASES + lesson05._ACCEPTANCE_CASES]
    rejects(checker, fn, capsys, "in place", "don't modify your inputs")
    after = [[a for a in case if isinstance(a, torch.Tensor)]
             for case in lesson03._RESIDUAL_CASES + lesson03._AFTER_REJECTION_CASES + lesson05._ACCEPTANCE_CASES]
    for old, new in zip(before, after):  # the module-level cases are intact for the rest of the session
        assert all(torch.equal(a, b) for a, b in zip(old, new))
    ok, out = run(lesson03.residual_distribution, sampling.residual_distribution, capsys)
    assert ok, out


def test_in_place_hint_names_the_argument(capsys):
    ok, out = run(lesson03.residual_distribution,
                  lambda target_probs, draft_probs: in_place_residual(target_probs, draft_probs), capsys)
    assert not ok and "changed its argument `target_probs` in place" in out


def test_a_raise_matches_a_planted_fault_only_with_the_same_message():
    def planted(x):
        raise ValueError("planted message")

    def other(x):
        raise ValueError("something else")

    faults = [(planted, "PLANTED HINT")]
    with pytest.raises(harness.Fail) as failure:
        harness.compare("f", other, [(1.0,)], lambda x: x, faults, harness.same_float, "GENERIC HINT")
    assert "GENERIC HINT" in str(failure.value) and "PLANTED HINT" not in str(failure.value)
    with pytest.raises(harness.Fail) as failure:
        harness.compare("f", planted, [(1.0,)], lambda x: x, faults, harness.same_float, "GENERIC HINT")
    assert "PLANTED HINT" in str(failure.value)


def test_a_crash_no_planted_mistake_explains_is_the_case_shown():
    """A learner's function wrong on one case and raising on another, matching no planted mistake: the message shows
    the case that raised (its exception is the plainest clue), not the first wrong answer."""
    def learner(x):
        if x > 2:
            raise KeyError(0)
        return x + 1

    with pytest.raises(harness.Fail) as failure:
        harness.compare("f", learner, [(1.0,), (3.0,)], lambda x: x, [], harness.same_float, "GENERIC HINT")
    assert "f(3) raised KeyError: 0; expected 3" in str(failure.value) and "GENERIC HINT" in str(failure.value)


def test_integer_checkers_treat_inf_and_nan_as_wrong_answers(capsys):
    for bad in (math.inf, math.nan):
        ok, out = run(lesson06.best_n_draft, lambda a, c, m, bad=bad: bad, capsys)
        assert ok is False and out.startswith("✗") and "OverflowError" not in out, out


def test_numeric_strings_are_not_numeric_answers(capsys):
    """float("45.0") parses, so answers returned as strings used to pass; later cells then failed on them."""
    rejects(lesson01.step_latency, lambda t, d, n: f"{n * d + t}", capsys, "returned a string")
    rejects(lesson06.expected_tokens_per_call, lambda a, n: str(metrics.expected_tokens_per_call(a, n)), capsys,
            "returned a string")
    rejects(lesson06.best_n_draft, lambda a, c, m: str(metrics.optimal_n_draft(a, c, m)), capsys, "returned a string")
    ok = lesson07.next_position(lambda p, k: str(next_position(p, k)))
    assert not ok and "returned a string" in capsys.readouterr().out


# _same_float's relative tolerance is 1e-6; an answer 0.5 % off is wrong, not "close enough".
@pytest.mark.parametrize("checker, right", [
    (lesson01.step_latency, lambda t, d, n: n * d + t),
    (lesson06.predicted_speedup, metrics.predicted_speedup),
    (lesson06.expected_tokens_per_call, metrics.expected_tokens_per_call),
    (lesson12.efficiency, lesson12.reference_efficiency),
], ids=["step_latency", "predicted_speedup", "expected_tokens_per_call", "efficiency"])
def test_an_answer_half_a_percent_off_is_rejected(checker, right, capsys):
    assert checker(right)
    rejects(checker, lambda *a: right(*a) * 1.005, capsys, "expected")


# an integer answer must be a whole number; 2.5 is not "2".
def test_integer_checkers_reject_non_whole_numbers(capsys):
    rejects(lesson06.best_n_draft, lambda a, c, m: metrics.optimal_n_draft(a, c, m) + 0.5, capsys, "returned")
    rejects(lesson07.next_position, lambda p, k: p + k + 1.5, capsys, "returned")
    # a whole float has the right value but breaks lesson 06's table (it formats N with :d): refused with that hint
    rejects(lesson06.best_n_draft, lambda a, c, m: float(metrics.optimal_n_draft(a, c, m)), capsys,
            "return N as an int")


# a fraction where a count is due, when no planted mistake explains it, gets a hint that says a whole number is due;
# a whole float that is wrong shows as a float ("2.0", not "2", which reads as the int the checker wanted)
def test_a_fraction_or_a_whole_float_where_a_count_is_due_is_shown_as_such(capsys):
    rejects(lesson13.break_even_tokens, lambda s, a, p: s / (a - p) + 0.5 if p < a else None, capsys,
            "returned 2.5; expected 3", "the answer is a whole number (a count or a position)")
    rejects(lesson13.break_even_tokens, lambda s, a, p: s / (a - p) if p < a else None, capsys,
            "returned 2.0; expected 3", "a number of tokens is a whole number")


# two floats that differ in the 4th digit are shown with the same number of digits: "0.5646; expected 0.5650"
def test_near_floats_are_shown_with_their_trailing_zeros(capsys):
    from lab import costs

    def gain(batch, n, alpha, c, fpb):  # the draft passes cost t(B + N): a mistake no hint names
        return (costs.expected_tokens_per_call(alpha, n) * max(1, batch / fpb)
                / (n * c * max(1, (batch + n) / fpb) + max(1, batch * (n + 1) / fpb)))
    rejects(lesson13.throughput_gain, gain, capsys, "returned 0.5646; expected 0.5650.")


def test_an_infinite_answer_is_not_shown_as_a_near_miss():
    """A learner's inf fell into the near-miss branch (|inf - x| <= 0.01 * inf) and read "returned inf; expected
    1.000", the trailing zeros meant for two close floats."""
    from lab.exercises.harness import Fail, compare, same_float

    with pytest.raises(Fail) as failure:
        compare("f", lambda x: float("inf"), [(1.0,)], lambda x: 1.0, [], same_float, "a hint")
    assert str(failure.value).splitlines()[0] == "f(1) returned inf; expected 1.", str(failure.value)
    with pytest.raises(Fail) as failure:  # two close floats keep their trailing zeros
        compare("f", lambda x: 1.004, [(1.0,)], lambda x: 1.0, [], same_float, "a hint")
    assert str(failure.value).splitlines()[0] == "f(1) returned 1.004; expected 1.000.", str(failure.value)


# a function that forgot its `return` gets the hint that says so.
@pytest.mark.parametrize("checker", [lesson01.step_latency, lesson06.expected_tokens_per_call, lesson12.efficiency],
                         ids=lambda c: c.__name__)
def test_missing_return_gets_its_own_hint(checker, capsys):
    rejects(checker, lambda *a: None, capsys, "returned None", "did you forget a `return` statement?")


# token ids are integers; bools and fractional numbers are not ids.
def test_token_lists_must_hold_whole_integers(capsys):
    assert not harness.same_ints([True, False, True], [1, 0, 1])
    assert not harness.same_ints([2.5, 3], [2, 3])
    assert harness.same_ints([2.0, 3], [2, 3])  # a whole float is an id
    rejects(lesson07.emitted_tokens, lambda d, k, t: [x + 0.25 for x in emitted_tokens(d, k, t)], capsys,
            "not floats")  # a list of token ids is refused floats outright (want_token_list), whole or not


# A planted fault that reproduces only a few of the learner's wrong answers must not lend them its hint: these
# answers are wrong in ways no planted fault explains, and used to get one that pointed the wrong way.
@pytest.mark.parametrize("checker, fn, misleading, generic", [
    # (min(t, d) and max(1, t / d) were examples here until lesson 02 planted them as mistakes of their own)
    (lesson02.accept_probability, lambda t, d: t * d, "upside down", "two zero cases handled first"),
    (lesson02.accept_probability, lambda t, d: (t + d) / 2, "upside down", "two zero cases handled first"),
    (lesson07.draft_keep_length, lambda held, k, n: k, "LAST draft", "held is the draft cache's length after"),
])
def test_a_fault_that_explains_few_wrong_answers_gives_no_hint(checker, fn, misleading, generic, capsys):
    out = rejects(checker, fn, capsys, generic)
    assert misleading not in out, out


def test_a_hint_that_fits_most_wrong_answers_says_how_many(capsys):
    # always the longest draft: the tokens-per-call mistake on 6 of the 8 wrong cases (with alpha = 0 it is a tie)
    out = rejects(lesson06.best_n_draft, lambda a, c, m: m, capsys, "SPEEDUP")
    assert "Hint (it fits 6 of the 8 wrong answers):" in out, out
    out = rejects(lesson06.best_n_draft, lambda a, c, m: max(range(1, m + 1),
                                                          key=lambda n: metrics.expected_tokens_per_call(a, n)),
                  capsys, "SPEEDUP")
    assert "\n  Hint: maximise" in out, out


def test_messages_show_the_learners_own_function_name(capsys):
    def advance(position, num_accepted):
        return position + num_accepted

    out = rejects(lesson07.next_position, advance, capsys, "advance(9, 0) returned 9; expected 10")
    assert out.startswith("✗ next_position: ") and "next_position(" not in out, out


@pytest.mark.parametrize("name, call", HANGING, ids=[h[0] for h in HANGING])
def test_a_call_that_never_returns_is_stopped_in_every_checker(name, call, monkeypatch, capsys):
    monkeypatch.setattr(harness, "CALL_TIME_LIMIT_S", 0.3)
    handler = signal.getsignal(signal.SIGALRM)
    start = time.perf_counter()
    ok = call()
    out = capsys.readouterr().out
    assert time.perf_counter() - start < 10, out
    assert ok is False
    assert out.startswith(f"✗ {name}: forever("), out
    assert "did not return within 0.3 s" in out and "loop with no way out" in out
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is handler


def test_the_time_out_message_shows_models_and_long_lists_briefly(monkeypatch, capsys):
    # rollback_after_rejection's arguments include a model: its repr is dozens of lines
    monkeypatch.setattr(harness, "CALL_TIME_LIMIT_S", 0.3)
    assert lesson07.rollback_after_rejection(forever, _models(), [1, 2, 3], [4, 5]) is False
    out = capsys.readouterr().out
    assert "forever(<LlamaForCausalLM>, [1, 2, 3], [4, 5], 1)" in out, out
    assert len(out.splitlines()) == 2, out
    # chi_square_pvalue's first argument is 2000 tokens
    assert lesson04.chi_square_pvalue(forever) is False
    out = capsys.readouterr().out
    assert len(out.splitlines()[0]) < 300, out
    # a tensor argument with many values: its shape and dtype
    assert harness.show_brief(torch.zeros(2, 2048)) == "<tensor [2, 2048] float32>"
    assert harness.show_brief(torch.tensor([0.5, 0.25])) == harness.show_value(torch.tensor([0.5, 0.25]))


def test_step_records_changed_in_place_are_reported_and_the_cases_stay(capsys):
    before = [[(list(s.drafted), s.num_accepted, s.draft_ms) for s in steps] for steps in lesson12._STEP_LISTS]

    def truncates(steps):  # right alpha, but it cuts every record's drafts down to the accepted ones
        accepted = sum(s.num_accepted for s in steps)
        rejections = sum(1 for s in steps if s.drafted and s.num_accepted < len(s.drafted))
        for s in steps:
            s.drafted = s.drafted[:s.num_accepted]
        return accepted / (accepted + rejections) if accepted + rejections else None

    rejects(lesson12.alpha_from_steps, truncates, capsys, "in place")
    after = [[(list(s.drafted), s.num_accepted, s.draft_ms) for s in steps] for steps in lesson12._STEP_LISTS]
    assert after == before


@pytest.mark.parametrize("wrap, shown", [(lambda x: [x], "returned [45]"), (lambda x: (x,), "returned (45,)"),
                                         (lambda x: np.array([x]), "returned array([45.])")],
                         ids=["list", "tuple", "array"])
def test_a_number_wrapped_in_a_container_gets_its_own_hint(wrap, shown, capsys):
    out = rejects(lesson01.step_latency, lambda t, d, n: wrap(n * d + t), capsys, shown, "a single number")
    assert "one step = n_draft draft passes" not in out, out


def test_a_residual_with_an_extra_batch_dimension_gets_a_shape_hint(capsys):
    def batched(t, d):  # right values, shape [1, V] for a [V] input
        return sampling.residual_distribution(t, d).reshape(1, *t.shape)

    out = rejects(lesson03.residual_distribution, batched, capsys, "shape", "[1, 4]", "[4]")
    assert "max(0, target - draft) / its sum" not in out, out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_right_residual_computed_on_the_gpu_is_accepted(capsys):
    # was "your function raised RuntimeError: Expected all tensors to be on the same device" (the checker's allclose)
    ok = lesson03.residual_distribution(lambda t, d: sampling.residual_distribution(t.cuda(), d.cuda()))
    out = capsys.readouterr().out
    assert ok, out


def test_a_limited_call_inside_another_runs_directly_and_the_outer_limit_still_holds(monkeypatch):
    threads = []
    monkeypatch.setattr(harness, "_call_in_thread", lambda *a: threads.append(a) or pytest.fail("no thread needed"))
    inner = harness.time_limited(lambda x: x + 1, 5.0)
    outer = harness.time_limited(lambda x: inner(x) * 10, 5.0)
    assert outer(1) == 20 and not threads

    def spin():
        while True:
            pass

    stuck = harness.time_limited(lambda: harness.time_limited(spin, 60.0)(), 0.3)
    start = time.monotonic()
    with pytest.raises(harness.NoReturn):
        stuck()
    assert time.monotonic() - start < 10 and not getattr(harness._LIMIT, "active", False)


@pytest.mark.parametrize("wrap,phrase", [
    (torch.tensor, "return a list of int token ids"), (lambda xs: (x for x in xs), "return a list of int token ids"),
    (lambda xs: map(int, xs), "return a list of int token ids"),
    # a list of 0-d tensors prints as [tensor(3)] in the lesson's id lists
    (lambda xs: [torch.tensor(x) for x in xs], "returned a list of tensors"),
], ids=["tensor", "generator", "map", "0-d"])
def test_token_list_checkers_refuse_tensors_and_one_shot_iterators(wrap, phrase, capsys):
    from lab.kv import emitted_tokens

    for checker, right in ((lesson07.emitted_tokens, emitted_tokens), (lesson08.ngram_lookup, ngram_lookup)):
        assert checker(right), capsys.readouterr().out
        capsys.readouterr()
        rejects(checker, lambda *a, right=right: wrap(right(*a)), capsys, phrase)
    # a tuple of ints is still a right answer
    assert lesson07.emitted_tokens(lambda *a: tuple(emitted_tokens(*a))), capsys.readouterr().out


def test_every_checker_reports_a_stub_as_not_solved(capsys, target):
    for checker, args in [(lesson07.next_position, ()), (lesson07.draft_keep_length, ()),
                          (lesson07.emitted_tokens, ()), (lesson08.ngram_lookup, ()), (lesson09.count_converged, ()),
                          (lesson09.jacobi_step, (target, [1, 2, 3])),
                          (lesson07.rollback_after_rejection, (target, list(range(10)), [11, 12, 13, 14, 15]))]:
        ok, out = run_with_args(capsys, checker, stub, *args)
        assert not ok and "not solved yet" in out
    ok, out = run_with_args(capsys, lesson07.next_position, 42)
    assert not ok and "pass your function itself" in out


def test_long_answers_are_shown_by_their_first_items_and_length():
    assert harness.show_value(list(range(harness.SHOWN_ITEMS))) == str(list(range(harness.SHOWN_ITEMS)))
    text = harness.show_value(list(range(49152)))
    assert text == "[" + ", ".join(map(str, range(harness.SHOWN_ITEMS // 4))) + ", … (49152 items)]"
    assert harness.show_value(tuple(range(100))).endswith("… (100 items))")
    assert harness.show_value(list(range(100)), exact=True) == str(list(range(100)))  # compare's every-digit view


def test_two_long_answers_that_differ_late_are_shown_in_full():
    """The short texts of two 100-item answers that differ in the last item read alike: the message shows both
    in full, as it shows every digit of a near miss."""
    with pytest.raises(harness.Fail) as failed:
        harness.compare("f", lambda n: list(range(n - 1)) + [0], [(100,)], lambda n: list(range(n)), [],
                        harness.same_ints, "generic")
    message = str(failed.value)
    assert "98, 0]; expected [0, 1" in message and "98, 99]." in message, message


def test_a_parameter_list_that_does_not_fit_is_named(capsys):
    """A function with one parameter too few or too many raised TypeError on every case and got the formula's
    generic hint (a learner's run of lesson 06)."""
    from lab.exercises import lesson06

    for wrong in (lambda alpha: 1.0, lambda alpha, n_draft, extra: 1.0):
        out = rejects(lesson06.expected_tokens_per_call, wrong, capsys, "calls expected_tokens_per_call with 2 "
                      "arguments", "raised TypeError")
        assert "it fits" not in out, out


def test_answers_written_as_several_lines_are_shown_side_by_side():
    """compare's show_answer writes a grid answer (a mask) as lines: the learner's beside the expected one, row by
    row; an answer it cannot write falls back to the one-line value."""
    def rows(value):
        return "\n".join("".join(str(int(v)) for v in row) for row in value.tolist())

    with pytest.raises(harness.Fail) as failure:
        harness.compare("f", lambda x: torch.eye(2, dtype=torch.bool), [(1,)], lambda x: torch.ones(2, 2, dtype=bool),
                        [], harness.same_tensor, "GENERIC HINT", show_answer=rows)
    assert str(failure.value).startswith("f(1) returned a wrong answer:\n    returned   expected\n    10         11\n"
                                         "    01         11\n  Hint: GENERIC HINT"), str(failure.value)
    with pytest.raises(harness.Fail) as failure:  # one row too: the same layout
        harness.compare("f", lambda x: torch.zeros(1, 2, dtype=bool), [(1,)], lambda x: torch.ones(1, 2, dtype=bool),
                        [], harness.same_tensor, "GENERIC HINT", show_answer=rows)
    assert str(failure.value).startswith("f(1) returned a wrong answer:\n    returned   expected\n    00         11\n"
                                         "  Hint:"), str(failure.value)
    with pytest.raises(harness.Fail) as failure:
        harness.compare("f", lambda x: [[True]], [(1,)], lambda x: torch.ones(2, 2, dtype=bool),
                        [], harness.same_tensor, "GENERIC HINT", show_answer=rows)
    assert str(failure.value).startswith("f(1) returned [[True]]; expected tensor([[True, True], [True, True]])."), \
        str(failure.value)
    with pytest.raises(harness.Fail) as failure:  # the legend says how to read the rows, under them
        harness.compare("f", lambda x: torch.eye(2, dtype=torch.bool), [(1,)], lambda x: torch.ones(2, 2, dtype=bool),
                        [], harness.same_tensor, "GENERIC HINT", show_answer=rows, answer_legend="row i: node i")
    assert "    01         11\n  (row i: node i)\n  Hint: GENERIC HINT" in str(failure.value), str(failure.value)
