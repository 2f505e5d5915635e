"""lab.registry: drafter names -> drafters, and which drafters a pair can have (the bundled pair has all of them; a
hub pair has no Medusa heads or EAGLE draft, and GPT-2 no Llama layers for an early exit)."""
from __future__ import annotations

import pytest

from lab.registry import (DRAFTERS, OWN_DRAFT, TRAINED_FOR_BUNDLED, drafter_problem, make_drafter, own_draft_reason,
                          try_drafter)
from tests.lab.cli.helpers import gpt2_stand_in


def test_every_name_builds_a_drafter_for_the_bundled_pair(pair):
    for kind in DRAFTERS:
        drafter = make_drafter(kind, pair, 3)
        assert callable(drafter.propose) and callable(drafter.reset), kind
        assert drafter_problem(kind, pair) is None
    assert make_drafter("model", pair, 3).n_draft == 3 and make_drafter("ngram", pair, 2).n_draft == 2
    with pytest.raises(ValueError, match="unknown drafter 'oracle'; choose from model, ngram"):
        make_drafter("oracle", pair, 3)


def test_own_draft_reason_names_what_sets_the_draft():
    assert set(OWN_DRAFT) <= set(DRAFTERS) and set(TRAINED_FOR_BUNDLED) <= set(DRAFTERS)
    assert own_draft_reason("lookahead") == "its window W and n-gram size set what it drafts"
    assert own_draft_reason("medusa") == "its tree of candidates sets what it drafts"
    assert all(own_draft_reason(kind) is None for kind in DRAFTERS if kind not in OWN_DRAFT)


def test_a_hub_pair_lacks_the_trained_drafters_and_the_early_exit(pair):
    hub = gpt2_stand_in(pair)
    for kind in ("model", "ngram", "lookahead"):
        drafter, why = try_drafter(kind, hub)
        assert drafter is not None and why is None, kind
    for kind in ("medusa", "eagle", "early-exit"):
        drafter, why = try_drafter(kind, hub)
        assert drafter is None and why, kind
        assert drafter_problem(kind, hub) == why
    assert "Llama-style" in drafter_problem("early-exit", hub)


def test_the_real_pair_has_no_draft_model_but_the_drafters_that_need_none(smollm2_pair):
    """"smollm2-135m" (no draft model yet): the draft-model drafter is refused with a message, Medusa and EAGLE
    are left out (trained for the bundled target), and prompt lookup, Lookahead and the early exit run, greedy
    output equal to autoregressive decoding."""
    from lab.decode import generate

    pair = smollm2_pair
    why = drafter_problem("model", pair)
    assert why == ("the 'smollm2-135m' pair has no draft model yet; draft with ngram (prompt lookup), lookahead or "
                   "early-exit, which need none")
    with pytest.raises(ValueError, match="no draft model yet"):
        make_drafter("model", pair, 4)
    assert "no Medusa heads for the 'smollm2-135m' pair" in drafter_problem("medusa", pair)
    assert "feature_size 384, this target has 576" in drafter_problem("eagle", pair)
    prompt = pair.encode_chat("Write a haiku about the sea.")
    plain = generate(pair.target, prompt, max_new_tokens=8)
    for kind in ("ngram", "lookahead", "early-exit"):  # short runs: the float32 oracles are in test_models.py
        drafter, why = try_drafter(kind, pair, 2)
        assert why is None and drafter_problem(kind, pair) is None, kind
        assert generate(pair.target, prompt, drafter=drafter, max_new_tokens=8).tokens == plain.tokens, kind
