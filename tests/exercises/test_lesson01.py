"""The exercise checkers of lesson 01 (the sequential bottleneck; lab.exercises.lesson01): the reference passes, planted
mistakes are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

from lab.exercises import lesson01 as check
from tests.helpers import rejects


def run(checker, fn, capsys):
    """(returned bool, printed text)."""
    ok = checker(fn)
    return ok, capsys.readouterr().out


def test_step_latency(capsys):
    ok, out = run(check.step_latency, lambda t, d, n: n * d + t, capsys)
    assert ok and out.startswith("✓")
    rejects(check.step_latency, lambda t, d, n: (n + 1) * d + t, capsys, "N passes, not N + 1")
    rejects(check.step_latency, lambda t, d, n: n * d + (n + 1) * t, capsys, "ONE forward pass")
    rejects(check.step_latency, lambda t, d, n: t, capsys, "not free")
    rejects(check.step_latency, lambda t, d, n: d + t, capsys, "once per drafted token")


def test_arithmetic_intensity(capsys):
    ok, _ = run(check.arithmetic_intensity, lambda k, b: 2 * k / b, capsys)
    assert ok
    rejects(check.arithmetic_intensity, lambda k, b: k / b, capsys, "2 FLOPs")
    rejects(check.arithmetic_intensity, lambda k, b: b / (2 * k), capsys, "FLOPs divided by bytes")
    rejects(check.arithmetic_intensity, lambda k, b: 2 / b, capsys, "FLOPs grow with k")
    rejects(check.arithmetic_intensity, lambda k, b: 2 * k * b, capsys, "don't multiply")
    # a learner's round() was told "divide with /, not //", which it had not written: the hint names both
    for rounded in (lambda k, b: 2 * k // b, lambda k, b: round(2 * k / b), lambda k, b: int(2 * k / b)):
        rejects(check.arithmetic_intensity, rounded, capsys, "keep the fraction: //, round() and int()")


def test_arithmetic_intensity_bits_instead_of_bytes(capsys):
    rejects(check.arithmetic_intensity, lambda k, b: 2 * k / (8 * b), capsys, "counts bits")
    ok, out = run(check.arithmetic_intensity, lambda k, b: 2 * k / (8 * b), capsys)
    assert "FLOPs grow with k" not in out
    rejects(check.arithmetic_intensity, lambda k, b: 2 * k * 8 / b, capsys, "no factor of 8")


# every planted fault is caught with its own hint (this one was not exercised).
def test_step_latency_n_of_each(capsys):
    rejects(check.step_latency, lambda t, d, n: n * (d + t), capsys, "not N of each")


def test_rounding_swapping_and_floor_division_get_their_own_hints(capsys):
    """Each got the generic formula in a learner's run."""
    rejects(check.step_latency, lambda t, d, n: round(n * d + t), capsys, "unrounded")
    rejects(check.step_latency, lambda t, d, n: int(n * d + t), capsys, "unrounded")
    for digits in (1, 2):  # round(x, 2) passed every case until one had three decimals
        rejects(check.step_latency, lambda t, d, n, digits=digits: round(n * d + t, digits), capsys, "unrounded")
    rejects(check.step_latency, lambda t, d, n: n * t + d, capsys, "swapped")
    rejects(check.arithmetic_intensity, lambda k, b: 2 * k // b, capsys, "//, round() and int()")
