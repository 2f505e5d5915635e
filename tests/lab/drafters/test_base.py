"""The drafter protocol's helpers (lab.drafters.base): check_pair, which the from_pretrained constructors call."""

from __future__ import annotations

import pytest

from lab.decode import generate
from lab.drafters import EagleDrafter, MedusaDrafter


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
