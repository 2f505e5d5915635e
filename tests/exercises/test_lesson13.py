"""The exercise checkers of lesson 13 (when not to speculate; lab.exercises.lesson13): the reference passes, planted
mistakes are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import math
import signal
import threading
import time

import numpy as np
import pytest
import torch

from lab import costs, metrics
from lab.exercises import lesson13 as check
from lab.metrics import expected_tokens_per_call
from tests.helpers import rejects


def _kv(config, dtype):
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * dtype.itemsize


def stub(*args):
    raise NotImplementedError


def right_or(never):
    """The right answer where speculation catches up, ``never`` where it does not."""
    return lambda s, a, p: costs.break_even_tokens(s, a, p) if p < a else never


def naive_loop(setup, ar, spec):
    # the loop without the None guard: never ends when spec >= ar
    n = 1
    while not setup + n * spec < n * ar:
        n += 1
    return n


# the batch-1 shortcut "gain = predicted_speedup" is wrong once B(N+1) passes the ridge (a tiny ridge here).
def test_throughput_gain_batch_one_past_the_ridge(capsys):
    def batch_one_shortcut(batch, n, alpha, c, fpb):
        if batch == 1:
            return metrics.predicted_speedup(alpha, n, c)
        return costs.speculative_throughput_gain(batch, n, alpha, c, fpb, bytes_per_param=2.0)

    rejects(check.throughput_gain, batch_one_shortcut, capsys, "batch_one_shortcut(1, 4, 0.75, 0.1, 2)")


def test_kv_bytes_from_config_reports_a_config_changed_in_place_and_keeps_its_cases(capsys):
    import copy

    before = copy.deepcopy(check._KV_CASES)

    def pops_head_dim(config, dtype):  # right numbers, but Gemma's head_dim is gone from the case afterwards
        head_dim = config.pop("head_dim", None) or config["hidden_size"] // config["num_attention_heads"]
        return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * dtype.itemsize

    def fills_head_dim_wrongly(config, dtype):
        head_dim = config.setdefault("head_dim", config["hidden_size"] // config["num_key_value_heads"])
        return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * dtype.itemsize

    out = rejects(check.kv_bytes_from_config, pops_head_dim, capsys, "changed its argument `config` in place",
                  "pop")
    out = rejects(check.kv_bytes_from_config, fills_head_dim_wrongly, capsys, "in place")
    assert "head_dim=1024" not in out, out  # the case is shown as it was, not with the learner's addition
    assert check._KV_CASES == before
    # the cases still tell a right answer from one that ignores an explicit head_dim (Gemma's 256)
    assert check.kv_bytes_from_config(_kv)
    rejects(check.kv_bytes_from_config,
            lambda c, d: 2 * c["num_hidden_layers"] * c["num_key_value_heads"]
            * (c["hidden_size"] // c["num_attention_heads"]) * d.itemsize, capsys, "head_dim explicitly")


def test_break_even_tokens(capsys):
    assert check.break_even_tokens(costs.break_even_tokens)

    def loop(setup, ar, spec):
        if spec >= ar:
            return None
        n = 1
        while not setup + n * spec < n * ar:
            n += 1
        return n

    assert check.break_even_tokens(loop)
    rejects(check.break_even_tokens, lambda s, a, p: math.ceil(s / (a - p)) if p < a else None, capsys,
            "strictly faster")
    rejects(check.break_even_tokens, lambda s, a, p: s / (a - p) if p < a else None, capsys, "whole number")
    rejects(check.break_even_tokens, lambda s, a, p: math.floor(s / a) + 1 if p < a else None, capsys,
            "saving per token")
    rejects(check.break_even_tokens, lambda s, a, p: math.floor(s / (a - p)) + 1, capsys, "return None")
    # the None test the wrong way round answers None on every finite case: not only "a missing return"
    out = rejects(check.break_even_tokens, lambda s, a, p: None if p < a else loop(s, a, p), capsys,
                  "wrong way round")
    assert "did you forget" not in out, out
    assert not check.break_even_tokens(stub)
    assert "not solved yet" in capsys.readouterr().out


@pytest.mark.parametrize("never", [0, -1, math.inf, float("-inf"), 0.0, math.nan, "never", [None]])
def test_break_even_tokens_wrong_never_value(never, capsys):
    """A number (or anything else) in place of None is a wrong answer with a hint, not a crash of the checker's own
    comparison (int(inf) raised OverflowError inside it)."""
    capsys.readouterr()
    assert check.break_even_tokens(right_or(never)) is False
    out = capsys.readouterr().out
    assert out.startswith("✗") and "break_even_tokens(30, 3, 3) returned" in out and "expected None" in out, out
    assert "can never be recovered: return None" in out, out
    assert "OverflowError" not in out and "raised" not in out, out


def test_same_count_never_raises():
    for value in (math.inf, -math.inf, math.nan, 1e400, "3", None, [1], True, object()):
        for other in (None, 3, math.inf, 2.5):
            assert isinstance(check._same_count(value, other), bool)
    assert check._same_count(28, 28.0) and check._same_count(math.inf, math.inf)
    assert not check._same_count(math.inf, None) and not check._same_count(True, 1)
    assert not check._same_count(0, None) and not check._same_count("3", "3")


def test_break_even_tokens_loop_without_exit_is_reported(capsys):
    """A loop that never ends on (30, 3, 3) is stopped after TIME_LIMIT_S and reported as such; the alarm and its
    handler are put back as they were."""
    handler = signal.getsignal(signal.SIGALRM)
    capsys.readouterr()
    start = time.perf_counter()
    assert check.break_even_tokens(naive_loop) is False
    assert time.perf_counter() - start < check.TIME_LIMIT_S + 5
    out = capsys.readouterr().out
    assert out.startswith("✗") and "naive_loop(30, 3, 3) did not return within 2 s" in out, out
    assert "return None" in out
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is handler


def test_break_even_tokens_finite_hints_come_before_the_time_limit(capsys):
    """The never-catches-up cases run last: a function wrong on the finite cases gets their hint at once, even if
    it would also loop forever."""
    def wrong_and_stuck(s, a, p):
        if p < a:
            return math.ceil(s / (a - p))
        while True:
            pass

    start = time.perf_counter()
    rejects(check.break_even_tokens, wrong_and_stuck, capsys, "strictly faster")
    assert time.perf_counter() - start < 1.0


def test_break_even_tokens_time_limit_off_the_main_thread(capsys):
    """Away from the main thread (no SIGALRM there) a watched thread enforces the same limit and stops the loop."""
    results = []
    before = threading.active_count()
    worker = threading.Thread(target=lambda: results.append(check.break_even_tokens(naive_loop)))
    worker.start()
    worker.join(check.TIME_LIMIT_S + 10)
    assert not worker.is_alive() and results == [False]
    assert "did not return within" in capsys.readouterr().out
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:   # the stuck loop was stopped
        time.sleep(0.05)
    assert threading.active_count() == before


def test_kv_bytes_from_config(capsys):
    def solution(config, dtype):
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * dtype.itemsize

    assert check.kv_bytes_from_config(solution)
    for kwargs, word in [(dict(factor=1), "AND a value"), (dict(heads_key="num_attention_heads"), "grouped-query"),
                         (dict(bits=True), "bytes"), (dict(head_dim="by_kv"), "not hidden_size // num_key_value_heads"),
                         (dict(head_dim="ignore_explicit"), "Gemma"), (dict(layers=False), "num_hidden_layers")]:
        rejects(check.kv_bytes_from_config, check._kv_variant(**kwargs), capsys, word)
    # key and value counted, but 2 bytes per value whatever the dtype: the hint names the dtype, not the factor 2
    rejects(check.kv_bytes_from_config, lambda c, d: solution(c, torch.bfloat16), capsys, "instead of a fixed 2")
    rejects(check.kv_bytes_from_config, lambda c, d: solution(c, torch.float32), capsys, "instead of a fixed 4")
    # head_dim read as if every config had it: the failing case (KeyError) is shown and the hint says when it is there
    out = rejects(check.kv_bytes_from_config,
                  lambda c, d: 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * c["head_dim"] * d.itemsize,
                  capsys, "not every config has a head_dim key")
    assert "KeyError: 'head_dim'" in out, out
    # a learner's: key and value counted, the bytes per value forgotten (in bf16 it reads like a missing factor 2)
    out = rejects(check.kv_bytes_from_config, lambda c, d: solution(c, torch.float8_e4m3fn), capsys,
                  "counts values, not bytes")
    assert "AND a value" not in out, out
    rejects(check.kv_bytes_from_config, lambda c, d: None, capsys, "return")
    # a learner's: hidden_size / heads, a float division, gave 327680.0, and the lesson's table printed "327,680.0"
    out = rejects(check.kv_bytes_from_config,
                  lambda c, d: 2 * c["num_hidden_layers"] * c["num_key_value_heads"]
                  * (c.get("head_dim") or c["hidden_size"] / c["num_attention_heads"]) * d.itemsize, capsys,
                  "the values are right", "a float", "use //")
    assert check.kv_bytes_from_config(lambda c, d: np.int64(solution(c, d)))  # any integer type is a whole number
    assert not check.kv_bytes_from_config(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_throughput_gain(capsys):
    def solution(batch, n, alpha, c, fpb):
        def t(tokens):
            return max(1.0, tokens / fpb)
        return expected_tokens_per_call(alpha, n) * t(batch) / (n * c * t(batch) + t(batch * (n + 1)))

    assert check.throughput_gain(solution)
    rejects(check.throughput_gain, check._no_roofline, capsys, "batch matters")
    for kwargs, word in [(dict(ar_scales=False), "autoregressive step"), (dict(draft_scales=False), "draft's passes"),
                         (dict(verify_tokens="n"), "N + 1 tokens"), (dict(tokens="all"), "not every draft"),
                         (dict(combine="sum"), "LONGER"), (dict(ridge="no_2_flops"), "2 FLOPs"),
                         (dict(ridge="no_bytes"), "bytes read"), (dict(tokens="no_bonus"), "bonus token"),
                         (dict(inverted=True), "not the other way round"), (dict(draft_passes="n+1"), "N times a step"),
                         (dict(combine="min"), "not the shorter")]:
        rejects(check.throughput_gain, check._gain_variant(**kwargs), capsys, word)
    assert not check.throughput_gain(stub)
    assert "not solved yet" in capsys.readouterr().out


@pytest.mark.parametrize("checker", [check.break_even_tokens, check.kv_bytes_from_config, check.throughput_gain])
def test_never_raises(checker, capsys):
    assert checker(lambda *a: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out
    assert checker("not a function") is False


def test_an_unexplained_mistake_gets_a_pointer_not_the_formula(capsys):
    """The fallback hints (no planted mistake matches) send the learner back to the case and the lesson's model,
    without the formula to copy."""
    assert not check.throughput_gain(lambda batch, n, alpha, c, fpb: 1.5)
    out = capsys.readouterr().out
    assert "by hand" in out and "t(B · (N + 1))" not in out and "max(1, T / flops_per_byte)" not in out, out
    assert not check.kv_bytes_from_config(lambda config, dtype: 1024)
    out = capsys.readouterr().out
    assert "by hand" in out and "2 * layers" not in out, out
