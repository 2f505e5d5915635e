"""lab.check_costs: every checker passes the reference, rejects planted mistakes with the right hint, prints "not
solved yet" for a stub and never raises."""
from __future__ import annotations

import math

import pytest

from lab import check_costs as check
from lab import costs
from lab.check_costs import _gain_variant, _kv_variant, _no_roofline
from lab.metrics import expected_tokens_per_call


def stub(*args):
    raise NotImplementedError


def rejects(checker, fn, capsys, *words):
    capsys.readouterr()
    assert checker(fn) is False
    out = capsys.readouterr().out
    assert out.startswith("✗"), out
    for word in words:
        assert word in out, f"{word!r} not in:\n{out}"


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
    assert not check.break_even_tokens(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_kv_bytes_from_config(capsys):
    def solution(config, dtype):
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * dtype.itemsize

    assert check.kv_bytes_from_config(solution)
    for kwargs, word in [(dict(factor=1), "AND a value"), (dict(heads_key="num_attention_heads"), "grouped-query"),
                         (dict(bits=True), "bytes"), (dict(head_dim="by_kv"), "QUERY heads"),
                         (dict(head_dim="ignore_explicit"), "Gemma"), (dict(layers=False), "num_hidden_layers")]:
        rejects(check.kv_bytes_from_config, _kv_variant(**kwargs), capsys, word)
    rejects(check.kv_bytes_from_config, lambda c, d: None, capsys, "return")
    assert not check.kv_bytes_from_config(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_throughput_gain(capsys):
    def solution(batch, n, alpha, c, fpb):
        def t(tokens):
            return max(1.0, tokens / fpb)
        return expected_tokens_per_call(alpha, n) * t(batch) / (n * c * t(batch) + t(batch * (n + 1)))

    assert check.throughput_gain(solution)
    rejects(check.throughput_gain, _no_roofline, capsys, "batch matters")
    for kwargs, word in [(dict(ar_scales=False), "autoregressive step"), (dict(draft_scales=False), "draft's passes"),
                         (dict(verify_tokens="n"), "N + 1 tokens"), (dict(tokens="all"), "not every draft"),
                         (dict(combine="sum"), "LONGER"), (dict(ridge="no_2_flops"), "2 FLOPs"),
                         (dict(ridge="no_bytes"), "bytes read")]:
        rejects(check.throughput_gain, _gain_variant(**kwargs), capsys, word)
    assert not check.throughput_gain(stub)
    assert "not solved yet" in capsys.readouterr().out


@pytest.mark.parametrize("checker", [check.break_even_tokens, check.kv_bytes_from_config, check.throughput_gain])
def test_never_raises(checker, capsys):
    assert checker(lambda *a: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out
    assert checker("not a function") is False
