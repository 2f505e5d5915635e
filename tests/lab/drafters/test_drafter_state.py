"""The drafters' state oracle: after every step, a drafter proposes what a fresh drafter of its kind proposes from the
committed text alone.

Verification keeps the output exact whatever a drafter proposes, so greedy parity and the distribution test cannot
see a drafter whose own state drifted from the committed tokens (a rejected draft kept in its cache or its tables, a
missed update): it only accepts less. A contributor's planted bug of that kind passed every other oracle. Here each
drafter of :data:`lab.registry.DRAFTERS` decodes greedily on the bundled pair; before each of its proposals a fresh
drafter of the same kind is reset on the committed tokens (with the target's hidden states over them, for a drafter
that reads them) and must propose the same tokens; then the same on the real pair, in float32. Lookahead is left
out: its n-gram pool holds the Jacobi window's past guesses, which the committed text does not determine.
"""
from __future__ import annotations

import pytest

from lab.decode import generate
from lab.models import forward, hidden_layers_of, new_cache
from lab.prompts import held_out_prompts
from lab.registry import DRAFTERS, OWN_DRAFT, make_drafter

HISTORY_DEPENDENT = ("lookahead",)  # drafters whose proposals depend on more than the committed text
KINDS = [kind for kind in DRAFTERS if kind not in HISTORY_DEPENDENT]


class FreshComparison:
    """Wraps a drafter for :func:`lab.decode.generate`; before each proposal, compares it with a fresh drafter's."""

    def __init__(self, drafter, make_fresh, target):
        self.inner, self.make_fresh, self.target = drafter, make_fresh, target
        self.compared = 0

    def __getattr__(self, name):  # observe, kv_length, needs_hidden_states, hidden_layers: the inner drafter's
        return getattr(self.inner, name)

    def reset(self, prompt_ids, **kwargs):
        self.inner.reset(prompt_ids, **kwargs)

    def update(self, num_accepted, next_token):
        self.inner.update(num_accepted, next_token)

    def propose(self, request):
        draft = self.inner.propose(request)
        fresh = self.make_fresh()
        committed = list(request.tokens)
        if getattr(fresh, "needs_hidden_states", False):
            _, hidden = forward(self.target, committed[:-1], new_cache(), output_hidden_states=True,
                                hidden_layers=hidden_layers_of(fresh))
            fresh.reset(committed, hidden=hidden)
        else:
            fresh.reset(committed)
        expected = fresh.propose(request)
        assert (draft.tokens, draft.parents) == (expected.tokens, expected.parents), (
            f"after {len(committed)} committed tokens the drafter proposed {draft.tokens}, "
            f"a fresh one {expected.tokens}")
        self.compared += 1
        return draft


@pytest.mark.parametrize("kind", KINDS)
def test_a_drafter_proposes_what_a_fresh_one_proposes_from_the_committed_text(pair, kind):
    n_draft = None if kind in OWN_DRAFT else 3
    prompt = pair.encode(held_out_prompts()[1])[-48:]
    wrapped = FreshComparison(make_drafter(kind, pair, n_draft), lambda: make_drafter(kind, pair, n_draft),
                              pair.target)
    gen = generate(pair.target, prompt, drafter=wrapped, max_new_tokens=40)
    reference = generate(pair.target, prompt, max_new_tokens=40)
    assert gen.tokens == reference.tokens
    assert wrapped.compared == len(gen.steps) - 1 >= 5  # every decode step was compared
    assert any(step.num_accepted < len(step.drafted) for step in gen.steps), "no rejection: nothing to roll back"


def test_the_oracle_sees_a_drafter_that_keeps_a_rejected_draft(pair):
    """The oracle's own check: a prompt-lookup drafter that also remembers its rejected drafts (it reads its own copy
    of the text instead of the request's) proposes otherwise than a fresh one, and is caught, while the output stays
    the target's."""
    from lab.drafters import PromptLookupDrafter

    class KeepsRejected(PromptLookupDrafter):
        def reset(self, prompt_ids):
            self.text = list(prompt_ids)

        def propose(self, request):
            draft = PromptLookupDrafter.propose(self, type(request)(list(self.text), request.max_tokens))
            self.last = draft.tokens
            return draft

        def update(self, num_accepted, next_token):
            self.text += list(self.last) + [next_token]  # every draft, the rejected ones too

    prompt = pair.encode(held_out_prompts()[1])[-48:]
    wrapped = FreshComparison(KeepsRejected(3, 3), lambda: PromptLookupDrafter(3, 3), pair.target)
    with pytest.raises(AssertionError, match="the drafter proposed .*, a fresh one"):
        generate(pair.target, prompt, drafter=wrapped, max_new_tokens=40)


@pytest.mark.parametrize("kind", KINDS)
def test_on_the_real_pair_too(smollm2_pair, kind):
    """The same oracle on the real pair in float32, on a chat request (its drafts: the draft model, EAGLE, EAGLE-3
    with its reduced vocabulary, Medusa, MTP and the parallel draft trained for this target)."""
    pair = smollm2_pair
    n_draft = None if kind in OWN_DRAFT else 3
    prompt = pair.encode_chat("Write a Python function that returns the cube of a number.")
    wrapped = FreshComparison(make_drafter(kind, pair, n_draft), lambda: make_drafter(kind, pair, n_draft),
                              pair.target)
    gen = generate(pair.target, prompt, drafter=wrapped, max_new_tokens=24, eos_token_id=pair.eos_token_id)
    assert wrapped.compared == len(gen.steps) - 1 >= 3
