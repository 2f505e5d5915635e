"""Review of the exercise checkers as learners use them: answers written differently from the reference are accepted,
plausible mistakes get the hint that names them, and no checker hangs, crashes or corrupts its own cases."""
from __future__ import annotations

import math
import signal
import time

import numpy as np
import pytest
import torch

from conftest import rejects
from lab import check, check_arena, check_costs, check_decoding, check_picker, check_trees, metrics, sampling


def forever(*args, **kwargs):
    while True:
        pass


# --- every call of the learner's function is time-limited, not only those made through _compare -------------------

def _models():
    from conftest import tiny_llama

    return tiny_llama(0, layers=1)


HANGING = [
    ("speculative_step", lambda: check.speculative_step(forever)),
    ("greedy_draft", lambda: check.greedy_draft(forever)),
    ("topk_draft", lambda: check.topk_draft(forever)),
    ("accept_or_reject", lambda: check.accept_or_reject(forever)),
    ("chi_square_pvalue", lambda: check.chi_square_pvalue(forever)),
    ("speculation_metrics", lambda: check.speculation_metrics(forever)),
    ("next_n_draft", lambda: check_arena.next_n_draft(forever)),
    ("stats_from_vllm_counters", lambda: check_picker.stats_from_vllm_counters(forever)),
    ("medusa_loss", lambda: check_trees.medusa_loss(forever)),
    ("tree_mask", lambda: check_trees.tree_mask(forever)),
    ("rollback_after_rejection", lambda: check_decoding.rollback_after_rejection(forever, _models(), [1, 2, 3],
                                                                                 [4, 5])),
]


@pytest.mark.parametrize("name, call", HANGING, ids=[h[0] for h in HANGING])
def test_a_call_that_never_returns_is_stopped_in_every_checker(name, call, monkeypatch, capsys):
    monkeypatch.setattr(check, "CALL_TIME_LIMIT_S", 0.3)
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
    monkeypatch.setattr(check, "CALL_TIME_LIMIT_S", 0.3)
    assert check_decoding.rollback_after_rejection(forever, _models(), [1, 2, 3], [4, 5]) is False
    out = capsys.readouterr().out
    assert "forever(<LlamaForCausalLM>, [1, 2, 3], [4, 5], 1)" in out, out
    assert len(out.splitlines()) == 2, out
    # chi_square_pvalue's first argument is 2000 tokens
    assert check.chi_square_pvalue(forever) is False
    out = capsys.readouterr().out
    assert len(out.splitlines()[0]) < 300, out
