"""Fixtures of the drafters' tests: for the lookup drafters (prompt lookup, Lookahead), tiny Llamas whose greedy
text repeats, so n-gram lookups hit, their greedy references, and copy-heavy prompts on the bundled pair; for the
learned drafters (EAGLE, EAGLE-3, MTP), held-out prompts of the bundled pair and the target's greedy continuations
of them (their one_thread fixture is in tests/lab/conftest.py)."""
import pytest
import torch

from lab.decode import autoregressive, generate
from lab.prompts import held_out_prompts
from tests.helpers import tiny_llama
from tests.lab.drafters.lookup_cases import MAX_NEW, PROMPTS


@pytest.fixture(scope="module")
def prompts(pair):
    """The first three held-out prompts of the bundled pair, encoded (a module may override this fixture)."""
    return [pair.encode(text) for text in held_out_prompts()[:3]]


@pytest.fixture(scope="module")
def reference(request, pair, prompts):
    """Greedy autoregressive continuations of ``prompts`` (the requesting module's, when it overrides them) by the
    bundled target, ``NEW`` new tokens each, ``NEW`` being the requesting module's constant."""
    return [generate(pair.target, p, max_new_tokens=request.module.NEW).tokens for p in prompts]


@pytest.fixture(scope="session")
def sticky_target():
    """A tiny Llama whose next token depends mostly on the current one (attention and MLP scaled down): its
    greedy text soon repeats itself, as small real models do, so n-gram lookups hit. Attention still matters a
    little, so a wrong cache, mask or position still changes its argmax."""
    model = tiny_llama(5)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(0.05)
            layer.mlp.down_proj.weight.mul_(0.05)
    return model


@pytest.fixture(scope="session")
def references(target, sticky_target):
    """Greedy autoregressive continuations of PROMPTS by the random and the sticky target."""
    return {name: {tuple(p): autoregressive(model, p, max_new_tokens=MAX_NEW).tokens for p in PROMPTS}
            for name, model in (("random", target), ("sticky", sticky_target))}


@pytest.fixture(scope="session")
def bigram_target():
    """A tiny Llama whose next token depends on the current token only (attention and MLP switched off): its greedy
    text from a token is a fixed path, so a prompt holding that path makes every lookup propose exactly it."""
    model = tiny_llama(5)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    return model


@pytest.fixture(scope="session")
def path_prompt(bigram_target):
    path = autoregressive(bigram_target, [39], max_new_tokens=10).tokens
    assert len(set(path)) == 10 and 39 not in path  # distinct tokens: each can serve as EOS at one position
    return [39] + path + [39], path


@pytest.fixture(scope="module")
def copy_ids(pair):
    """Copy-heavy prompts on the bundled pair (lab.prompts), where lookups pay off."""
    from lab.prompts import copy_heavy_prompts, held_out_prompts

    return [pair.encode(text) for text in copy_heavy_prompts(pair, held_out_prompts()[:2])]
