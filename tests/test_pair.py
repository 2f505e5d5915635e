"""The bundled Shakespeare pair: offline loading, the oracles on real models, the CLI and the bench."""
import json
import os
import subprocess
import sys
import time

import pytest
import torch

from lab.decode import generate
from lab.drafters import DraftModelDrafter
from lab.kv import rollback
from lab.metrics import chi_square
from lab.models import ModelNotAvailableError, PRESETS, forward, held_out_prompts, load_pair, new_cache
from lab.sampling import probs_from_logits
from lab.train import PAIR_DIR


@pytest.fixture(scope="module")
def pair():
    return load_pair("shakespeare")


@pytest.fixture(scope="module")
def prompts(pair):
    return [pair.encode(p)[-60:] for p in held_out_prompts()[:3]]


def test_pair_shares_tokenizer_and_runs_on_the_chosen_device(pair):
    assert pair.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert pair.target.config.vocab_size == pair.draft.config.vocab_size == len(pair.tokenizer)
    text = "To be, or not to be: that is the question."
    assert pair.decode(pair.encode(text)) == text
    assert sum(p.numel() for p in pair.draft.parameters()) * 5 < sum(p.numel() for p in pair.target.parameters())


@pytest.mark.parametrize("n_draft", [1, 3, 6])
def test_greedy_parity_on_the_real_pair(pair, prompts, n_draft):
    for ids in prompts:
        ar = generate(pair.target, ids, max_new_tokens=48)
        sp = generate(pair.target, ids, drafter=DraftModelDrafter(pair.draft, n_draft), max_new_tokens=48)
        assert sp.tokens == ar.tokens
        assert sp.stats["target_calls"] < ar.stats["target_calls"]


def test_first_sampled_token_matches_target_distribution(pair, prompts):
    ids = prompts[0]
    target_probs = probs_from_logits(forward(pair.target, ids, new_cache())[-1], 1.0).cpu()
    counts = torch.zeros_like(target_probs)
    drafter = DraftModelDrafter(pair.draft, 3)
    for seed in range(1200):
        counts[generate(pair.target, ids, drafter=drafter, max_new_tokens=3, temperature=1.0, seed=seed).tokens[0]] += 1
    assert chi_square(counts, target_probs).pvalue > 1e-3


def test_rollback_on_the_real_target(pair, prompts):
    ids = prompts[0][:15]
    cache = new_cache()
    forward(pair.target, ids[:10], cache)
    forward(pair.target, ids[10:15], cache)
    rollback(cache, 12)
    after = forward(pair.target, [ids[12]], cache)[-1]
    fresh = forward(pair.target, ids[:13], new_cache())[-1]
    torch.testing.assert_close(after, fresh, atol=1e-4, rtol=1e-4)


def test_unknown_preset_lists_presets():
    with pytest.raises(ValueError, match="presets: shakespeare, gpt2"):
        load_pair("llama-9000")


def test_hub_preset_offline_fails_fast_with_instructions(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(ModelNotAvailableError, match="hf download"):
        load_pair("gpt2")
    assert time.perf_counter() - start < 10
    assert set(PRESETS) >= {"shakespeare", "gpt2", "smollm2", "qwen2.5"}


def test_context_overflow_is_a_clear_error(pair):
    with pytest.raises(ValueError, match="context"):
        generate(pair.target, [1] * 500, max_new_tokens=20)


def test_committed_card_meets_its_bars():
    m = json.loads((PAIR_DIR / "measurements.json").read_text())
    assert m["target"]["val_nats_per_char"] <= 1.50
    assert m["draft"]["val_nats_per_char"] - m["target"]["val_nats_per_char"] >= 0.10
    assert m["alpha_greedy"] >= 0.55
    assert m["cost_ratio_c"] <= 0.30
    card = (PAIR_DIR / "README.md").read_text()
    assert str(m["alpha_greedy"]) in card and str(m["cost_ratio_c"]) in card


def _cli(*args):
    env = dict(os.environ, PYTHONWARNINGS="ignore", TQDM_DISABLE="1")
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, env=env, timeout=300)


def test_demo_json():
    done = _cli("demo", "--json", "--max-new-tokens", "24", "--prompt", "KING HENRY.\nOnce more", "--n-draft", "3")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"text", "tokens", "stats"}
    assert len(out["tokens"]) == 24 or out["tokens"][-1] == 0
    assert out["stats"]["new_tokens"] == len(out["tokens"])
    assert 0 <= out["stats"]["acceptance_rate"] <= 1


def test_demo_colours_and_sampling():
    done = _cli("demo", "--color", "always", "--max-new-tokens", "30", "--temperature", "0.8", "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert "\x1b[32m" in done.stdout and "acceptance rate" in done.stdout and "tokens per target call" in done.stdout


def test_demo_rejects_bad_arguments():
    for args in (["--n-draft", "0"], ["--temperature", "-1"], ["--max-new-tokens", "0"]):
        done = _cli("demo", *args)
        assert done.returncode == 2 and "must be" in done.stderr


def test_bench_runs_all_four_and_agrees(pair):
    from lab.bench import format_table, run_bench

    result = run_bench(pair, held_out_prompts()[:1], max_new_tokens=24, n_draft=3)
    assert [r["method"] for r in result["rows"]] == ["lab autoregressive", "lab speculative", "HF generate",
                                                      "HF assisted"]
    assert result["identical"], result["mismatched"]
    assert "identical tokens: yes" in format_table(result)
