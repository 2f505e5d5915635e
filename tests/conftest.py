"""Shared fixtures: tiny random transformers models that make the engine's oracles fast to check on a CPU."""
import os

import pytest
import torch

os.environ.setdefault("TQDM_DISABLE", "1")
# tools/gpu_check.sh sets LAB_TEST_DEVICE=cuda to run the engine's oracles on a GPU.
DEVICE = os.environ.get("LAB_TEST_DEVICE", "cpu")


def tiny_llama(seed: int, layers: int = 2, hidden: int = 32, vocab: int = 64, max_positions: int = 256):
    """A random Llama with spread-out logits (a wide init), so argmax ties are practically impossible."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=max_positions,
                         initializer_range=0.4, tie_word_embeddings=False)
    return LlamaForCausalLM(config).to(DEVICE).eval()


@pytest.fixture(scope="session")
def target():
    return tiny_llama(0, layers=2)


@pytest.fixture(scope="session")
def draft():
    return tiny_llama(1, layers=1)


@pytest.fixture(scope="session")
def noisy_draft(target):
    """A draft that agrees with the target often but not always: the target's weights plus noise."""
    import copy

    torch.manual_seed(7)
    model = copy.deepcopy(target)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.03 * p.std() * torch.randn_like(p))
    return model.eval()


def rejects(checker, fn, capsys, *words):
    """Assert that ``checker(fn)`` returns False with a "✗" message containing each of ``words``; return it."""
    capsys.readouterr()
    ok = checker(fn)
    out = capsys.readouterr().out
    assert ok is False, out
    assert out.startswith("✗"), out
    for word in words:
        assert word in out, f"{word!r} not in:\n{out}"
    return out
