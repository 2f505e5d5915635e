"""The drafter protocol's helpers (lab.drafters.base): check_pair, which the from_pretrained constructors call."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lab.decode import generate
from lab.drafters import EagleDrafter, MedusaDrafter
from lab.drafters.base import DraftRequest


def test_from_pretrained_wants_a_pair(target):
    with pytest.raises(TypeError, match=r"ModelPair .*got str 'shakespeare'"):
        MedusaDrafter.from_pretrained("shakespeare")
    with pytest.raises(TypeError, match=r"not pair\.target"):
        EagleDrafter.from_pretrained(target)
    with pytest.raises(TypeError, match="ModelPair"):
        EagleDrafter.from_pretrained(None)


def test_hidden_state_drafters_name_a_target_of_another_width(target):
    from lab.drafters.medusa import MedusaDrafter, MedusaHeads
    from tests.helpers import tiny_llama

    drafter = MedusaDrafter(target, MedusaHeads(target.config.hidden_size, target.config.vocab_size, 2),
                            tree=[(0,), (0, 0)])
    narrower = tiny_llama(6, hidden=16)
    with pytest.raises(ValueError, match="built for a target of hidden size 32, but this target's is 16"):
        generate(narrower, [1, 2, 3], drafter=drafter, max_new_tokens=4)


def test_learned_drafters_check_the_ids_they_are_handed(pair):
    """Driven by hand, EAGLE, EAGLE-3, MTP and the parallel draft took floats (3.9 committed token 3), ids past the
    vocabulary (an IndexError at the next propose) and the parallel draft's own mask id as committed tokens."""
    import torch

    from lab.drafters import Eagle3Drafter, MTPDrafter, ParallelDrafter

    prompt = pair.encode("ROMEO: What")
    rows = len(prompt) - 1
    for drafter in (EagleDrafter.from_pretrained(pair), Eagle3Drafter.from_pretrained(pair),
                    MTPDrafter.from_pretrained(pair), ParallelDrafter.from_pretrained(pair)):
        hidden = {} if isinstance(drafter, ParallelDrafter) else {"hidden": torch.zeros(rows, 1)}
        with pytest.raises(TypeError, match="prompt_ids must hold integer token ids, got float"):
            drafter.reset([t + 0.7 for t in prompt], **hidden)
        with pytest.raises(ValueError, match=r"prompt_ids must be token ids in \[0, 2048\), got \[2048\]"):
            drafter.reset(prompt[:-1] + [2048], **hidden)  # 2048 is also the parallel draft's mask id
        if hidden:
            with pytest.raises(TypeError, match="hidden must be a tensor"):
                drafter.reset(prompt, hidden=[[0.0]] * rows)
    parallel = ParallelDrafter.from_pretrained(pair)
    with pytest.raises(RuntimeError, match="update before reset"):
        parallel.update(0, 5)
    parallel.reset(prompt)
    for bad, error in ((3.9, ValueError), (2048, ValueError), (-1, ValueError)):
        with pytest.raises(error, match=r"next_token must be an integer in \[0, 2047\]"):
            parallel.update(0, bad)


@pytest.mark.parametrize("bad", [2.5, -1, True, "3"])
def test_a_draft_request_checks_max_tokens(bad):
    """2.5 raised a bare slice TypeError inside some drafters, -1 drafted nothing without a word."""
    with pytest.raises(ValueError, match="DraftRequest.max_tokens must be an integer >= 0"):
        DraftRequest([1, 2], bad)
    assert DraftRequest([1, 2], np.int64(3)).max_tokens == 3
    assert type(DraftRequest([1], torch.tensor(2)).max_tokens) is int


def test_a_draft_request_names_tokens_that_are_not_token_ids():
    """DraftRequest(None, 4) reached the drafters, which raised an AttributeError or TypeError of their own."""
    for bad, error, words in ((None, TypeError, "must be a list of token ids"), ("ab", TypeError, "got text"),
                              (torch.tensor([1.5]), TypeError, "integer token ids"),
                              ((1, -2), ValueError, "integers >= 0")):
        with pytest.raises(error, match=f"DraftRequest.tokens .*{words}"):
            DraftRequest(bad, 4)
    assert DraftRequest(torch.tensor([[3, 4]]), 2).tokens == [3, 4]  # a tensor or tuple becomes the loop's list
    ids = [1, 2]
    assert DraftRequest(ids, 2).tokens is ids  # the loop's own list is taken as it is (see the docstring)


def test_every_drafter_names_a_request_that_is_not_a_draft_request(pair):
    """propose(None) raised an AttributeError about max_tokens from inside each drafter; it is checked first, before
    the drafter's own state (a drafter not yet reset says so only for a real request)."""
    from lab.registry import DRAFTERS, make_drafter

    for kind in DRAFTERS:
        drafter = make_drafter(kind, pair, 3)
        for bad in (None, [1, 2], {"tokens": [1], "max_tokens": 2}):
            with pytest.raises(TypeError, match=r"request must be a lab.drafters.base.DraftRequest .* got "
                                                f"{type(bad).__name__}"):
                drafter.propose(bad)


def test_a_draft_request_checks_its_sampling_settings():
    """A tester's DraftRequest(ids, 4, temperature=-1) was taken: every drafter then sampled from garbage."""
    for bad, words in ((dict(temperature=-1), "temperature must be a finite number >= 0"),
                       (dict(top_k=0), "top_k must be None or an integer >= 1"), (dict(top_p=1.5), "top_p")):
        with pytest.raises(ValueError, match=words):
            DraftRequest([1, 2], 4, **bad)
    assert DraftRequest([1, 2], 4, temperature=np.float64(0.5)).temperature == 0.5
