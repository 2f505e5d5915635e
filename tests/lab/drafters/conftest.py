"""Fixtures of the lookup drafters' tests (prompt lookup, Lookahead): tiny Llamas whose greedy text repeats, so
n-gram lookups hit, their greedy references, and copy-heavy prompts on the bundled pair."""
import pytest
import torch

from lab.decode import autoregressive
from tests.helpers import tiny_llama
from tests.lab.drafters.lookup_cases import MAX_NEW, PROMPTS


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
