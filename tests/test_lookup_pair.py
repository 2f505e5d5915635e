"""Prompt lookup and Lookahead on the bundled Shakespeare pair: the oracles on real models, the CLI and the bench."""
import json
import os
import subprocess
import sys

import pytest
import torch

from lab.bench import EXTRA_METHODS, copy_heavy_prompts, edit_prompts, format_table, record_prompts, run_bench
from lab.decode import generate
from lab.drafters import LookaheadDrafter, PromptLookupDrafter
from lab.drafters.base import DraftRequest
from lab.metrics import chi_square
from lab.models import forward, held_out_prompts, load_pair, new_cache
from lab.sampling import probs_from_logits


@pytest.fixture(scope="module")
def pair():
    return load_pair("shakespeare")


@pytest.fixture(scope="module")
def copy_ids(pair):
    return [pair.encode(text) for text in copy_heavy_prompts(pair, held_out_prompts()[:2])]


@pytest.mark.parametrize("make", [lambda: PromptLookupDrafter(3, 5), lambda: PromptLookupDrafter(2, 2),
                                  lambda: LookaheadDrafter(), lambda: LookaheadDrafter(window=6, ngram=4)])
def test_greedy_parity_on_the_real_pair(pair, copy_ids, make):
    prose = [pair.encode(text)[-48:] for text in held_out_prompts()[:2]]
    for ids in prose + copy_ids:
        ar = generate(pair.target, ids, max_new_tokens=40, eos_token_id=pair.eos_token_id)
        assert generate(pair.target, ids, drafter=make(), max_new_tokens=40,
                        eos_token_id=pair.eos_token_id).tokens == ar.tokens


def test_prompt_lookup_pays_off_on_copy_heavy_prompts(pair, copy_ids):
    for ids in copy_ids:
        gen = generate(pair.target, ids, drafter=PromptLookupDrafter(3, 5), max_new_tokens=40)
        assert gen.stats["tokens_per_target_call"] > 1.5 and gen.stats["draft_calls"] == 0


def test_first_sampled_token_matches_target_distribution(pair):
    ids = pair.encode("KING.\nHow is that, my lord?\n\nKING.\nHow")  # the lookup proposes " is that, …"
    assert len(PromptLookupDrafter(3, 3).propose(DraftRequest(ids, 3)).tokens) == 3  # a real draft is verified
    target_probs = probs_from_logits(forward(pair.target, ids, new_cache())[-1], 1.0).cpu()
    counts = torch.zeros_like(target_probs)
    drafter = PromptLookupDrafter(3, 3)
    for seed in range(700):  # max_new_tokens=2: the first step verifies one drafted token, then the target's own
        counts[generate(pair.target, ids, drafter=drafter, max_new_tokens=2, temperature=1.0, seed=seed).tokens[0]] += 1
    assert chi_square(counts, target_probs).pvalue > 1e-3


def test_workload_prompts_fit_the_context(pair):
    limit = pair.target.config.max_position_embeddings
    for prompts in (copy_heavy_prompts(pair), edit_prompts(pair), record_prompts(pair)):
        assert prompts and all(len(pair.encode(p)) + 128 <= limit for p in prompts)
    assert record_prompts(pair)[0].startswith('{"speaker": ')


def test_bench_with_the_new_rows_agrees(pair):
    result = run_bench(pair, copy_heavy_prompts(pair, held_out_prompts()[:1]), max_new_tokens=24, n_draft=4,
                       extra=EXTRA_METHODS)
    assert [r["method"] for r in result["rows"]] == ["lab autoregressive", "lab speculative", "HF generate",
                                                      "HF assisted", "lab prompt lookup", "HF prompt lookup",
                                                      "lab lookahead", "lab Medusa", "lab EAGLE", "lab early exit"]
    assert result["identical"], result["mismatched"]
    rows = {r["method"]: r for r in result["rows"]}
    assert rows["lab prompt lookup"]["tokens_per_target_call"] > 1 and "vs_hf_counterpart" in rows["lab prompt lookup"]
    assert "all ten produced identical tokens: yes" in format_table(result, "copy-heavy")
    with pytest.raises(ValueError, match="extra"):
        run_bench(pair, held_out_prompts()[:1], extra=("nope",))


def _cli(*args):
    env = dict(os.environ, PYTHONWARNINGS="ignore", TQDM_DISABLE="1")
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("drafter", ["ngram", "lookahead", "medusa", "eagle", "early-exit"])
def test_demo_with_the_new_drafters(drafter):
    prompt = "KING HENRY.\nOnce more unto the breach, dear friends, once more;\n\nKING HENRY.\nOnce more"
    done = _cli("demo", "--drafter", drafter, "--json", "--max-new-tokens", "24", "--prompt", prompt)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["stats"]["new_tokens"] == len(out["tokens"]) == 24
    if drafter in ("ngram", "lookahead"):  # no draft model: nothing but the target runs
        assert out["stats"]["draft_calls"] == 0
    else:
        assert out["stats"]["draft_calls"] > 0
    plain = _cli("demo", "--drafter", "model", "--json", "--max-new-tokens", "24", "--prompt", prompt)
    assert json.loads(plain.stdout)["tokens"] == out["tokens"]  # greedy: every drafter gives the target's text
