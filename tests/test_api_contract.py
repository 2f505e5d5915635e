"""DESIGN.md's public API contract, called exactly as written there: the names, argument names and defaults,
return types, and what each line's comment promises. Tests outside the project call these, so a rename or a new
required argument must fail here first."""
import inspect
import json
import random
import sys

import pytest
import torch

import lab.drafters as drafters
from lab import decode, kv, metrics, models, picker, sampling, toy, trees
from lab.trace import Generation, StepRecord


def _params(fn) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


E = inspect.Parameter.empty
POS = inspect.Parameter.POSITIONAL_OR_KEYWORD
KW = inspect.Parameter.KEYWORD_ONLY


@pytest.mark.parametrize("fn, expected", [
    (sampling.probs_from_logits, [("logits", POS, E), ("temperature", POS, 1.0), ("top_k", POS, None),
                                  ("top_p", POS, None)]),
    (sampling.residual_distribution, [("target_probs", POS, E), ("draft_probs", POS, E)]),
    (sampling.accept_or_reject, [("target_prob", POS, E), ("draft_prob", POS, E), ("u", POS, E)]),
    (toy.speculative_step, [("prefix", POS, E), ("target_model", POS, E), ("draft_model", POS, E),
                            ("n_draft", POS, E), ("rng", POS, E)]),
    (metrics.expected_tokens_per_call, [("alpha", POS, E), ("n_draft", POS, E)]),
    (metrics.predicted_speedup, [("alpha", POS, E), ("n_draft", POS, E), ("cost_ratio", POS, E)]),
    (metrics.optimal_n_draft, [("alpha", POS, E), ("cost_ratio", POS, E), ("max_n", POS, 16)]),
    (models.load_pair, [("name", POS, "smollm2-135m"), ("device", POS, None), ("dtype", POS, None)]),
    (kv.rollback, [("cache", POS, E), ("length", POS, E)]),
    (trees.position_ids, [("parents", POS, E), ("prefix_len", POS, E)]),
    (trees.tree_attention_mask, [("parents", POS, E), ("prefix_len", POS, E)]),
])
def test_signatures_as_written(fn, expected):
    assert _params(fn) == expected


def test_signatures_with_contract_prefixes():
    """Where the contract lists the first arguments, later ones may follow with defaults."""
    gen = _params(decode.generate)
    assert gen[:2] == [("target", POS, E), ("prompt_ids", POS, E)]
    assert gen[2:10] == [("drafter", KW, None), ("max_new_tokens", KW, E), ("temperature", KW, 0.0),
                         ("top_k", KW, None), ("top_p", KW, None), ("eos_token_id", KW, None), ("seed", KW, None),
                         ("on_step", KW, None)]
    assert all(p[2] is not E for p in gen[10:])
    for cls, head in ((drafters.DraftModelDrafter, [("draft_model", POS, E), ("n_draft", POS, 4)]),
                      (drafters.PromptLookupDrafter, [("max_ngram", POS, 3), ("n_draft", POS, 5)]),
                      (drafters.EarlyExitDrafter, [("target", POS, E), ("num_layers", POS, E)])):
        got = _params(cls)
        assert got[:len(head)] == head, cls
        assert all(p[2] is not E for p in got[len(head):]), cls
    assert all(p[2] is not E for p in _params(drafters.LookaheadDrafter))  # sensible defaults for everything
    rec = _params(picker.recommend)
    assert rec[:6] == [("task", POS, E), ("temperature", POS, E), ("has_small_same_family_model", POS, E),
                       ("can_finetune", POS, E), ("latency_bound", POS, True), ("memory_headroom_gb", POS, None)]
    assert all(p[2] is not E for p in rec[6:])
    for cls in (drafters.MedusaDrafter, drafters.EagleDrafter):
        got = _params(cls.from_pretrained)
        assert got[0] == ("pair", POS, E) and all(p[2] is not E for p in got[1:]), cls


def test_sampling_lines():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]], dtype=torch.float64)
    probs = sampling.probs_from_logits(logits)
    assert probs.dtype == torch.float32 and probs.shape == (1, 4)
    assert torch.allclose(probs, torch.softmax(logits.float(), -1))
    assert sampling.probs_from_logits(logits, temperature=0.0).tolist() == [[1.0, 0.0, 0.0, 0.0]]  # greedy one-hot
    target = torch.tensor([0.5, 0.3, 0.2, 0.0])
    draft = torch.tensor([0.2, 0.5, 0.2, 0.1])
    # normalised max(0, target - draft) = [0.3, 0, 0, 0] / 0.3
    assert torch.allclose(sampling.residual_distribution(target, draft), torch.tensor([1.0, 0.0, 0.0, 0.0]))
    # where that mass is 0, the target itself
    assert torch.equal(sampling.residual_distribution(target, target.clone()), target)
    assert sampling.accept_or_reject(0.3, 0.6, 0.49) is True       # u < 0.3 / 0.6
    assert sampling.accept_or_reject(0.3, 0.6, 0.5) is False
    assert sampling.accept_or_reject(0.9, 0.6, 0.999) is True      # min(1, ·) = 1
    assert sampling.accept_or_reject(0.0, 0.6, 0.0) is False       # target_prob 0: never, even at u = 0


@pytest.mark.parametrize("rng", [random.Random(0), torch.Generator().manual_seed(0)], ids=["random", "torch"])
def test_toy_speculative_step_returns_prefix_drafts_and_one_more(rng):
    def target(ctx):
        return [0.6, 0.3, 0.1]

    def draft(ctx):
        return [0.2, 0.2, 0.6]

    prefix = [1, 2]
    lengths = set()
    for _ in range(200):
        out = toy.speculative_step(list(prefix), target, draft, 3, rng)
        assert out[:2] == prefix and all(t in (0, 1, 2) for t in out)
        lengths.add(len(out) - len(prefix))
    assert lengths <= {1, 2, 3, 4} and 1 in lengths and len(lengths) > 1
    # a draft equal to the target is always accepted: N drafts and the bonus token
    assert len(toy.speculative_step([0], target, target, 3, rng)) == 1 + 3 + 1


def test_metrics_lines():
    a, n, c = 0.7, 4, 0.1
    e = (1 - a ** (n + 1)) / (1 - a)
    assert metrics.expected_tokens_per_call(a, n) == pytest.approx(e)
    assert metrics.predicted_speedup(a, n, c) == pytest.approx(e / (1 + n * c))
    best = max(range(1, 17), key=lambda k: metrics.predicted_speedup(a, k, c))
    assert metrics.optimal_n_draft(a, c) == best == 4
    assert metrics.optimal_n_draft(0.95, 0.01, max_n=5) == 5  # capped by max_n


@pytest.fixture(scope="module")
def pair():
    return models.load_pair("shakespeare")


def test_load_pair_defaults_to_the_real_pair(smollm2_pair):
    import inspect

    assert inspect.signature(models.load_pair).parameters["name"].default == "smollm2-135m"
    assert smollm2_pair.name == "smollm2-135m" and smollm2_pair.has_chat_template
    assert smollm2_pair.draft is not None and smollm2_pair.eos_token_id == 2


def test_load_pair_and_generate(pair):
    assert all(hasattr(pair, name) for name in ("target", "draft", "tokenizer"))
    prompt = pair.tokenizer("ROMEO: But soft")["input_ids"]
    records = []
    gen = decode.generate(pair.target, prompt, drafter=drafters.DraftModelDrafter(pair.draft, 3),
                          max_new_tokens=9, on_step=records.append)
    auto = decode.generate(pair.target, prompt, max_new_tokens=9)
    assert isinstance(gen, Generation) and isinstance(gen.tokens, list) and len(gen.tokens) == 9
    assert all(type(t) is int for t in gen.tokens) and gen.tokens == auto.tokens  # new tokens only, greedy-exact
    assert gen.steps == records and all(isinstance(r, StepRecord) for r in gen.steps)
    assert gen.steps[0].prefill and gen.decode_steps == gen.steps[1:]  # the prefill's record, then decode steps
    for r in gen.steps:
        assert isinstance(r.drafted, list) and isinstance(r.num_accepted, int) and r.last_kind in ("resampled",
                                                                                                   "bonus")
        assert r.emitted[:r.num_accepted] == r.drafted[:r.num_accepted] and r.draft_ms >= 0
    assert all(r.verify_ms > 0 for r in gen.decode_steps)
    assert sum(len(r.emitted) for r in gen.steps) == 9
    stats = gen.stats
    assert stats["target_calls"] == len(gen.steps) - 1
    assert stats["acceptance_rate"] == pytest.approx(sum(r.num_accepted for r in gen.steps)
                                                     / sum(len(r.drafted) for r in gen.steps))
    assert stats["tokens_per_target_call"] == pytest.approx(8 / len(gen.decode_steps))  # the prefill wrote 1 of 9
    assert {"draft_calls", "per_position_acceptance", "tokens_per_second"} <= set(stats)
    sampled = decode.generate(pair.target, prompt, drafter=drafters.PromptLookupDrafter(), max_new_tokens=4,
                              temperature=0.8, top_k=20, top_p=0.9, seed=1, record_probs=True)
    assert sampled.tokens == decode.generate(pair.target, prompt, drafter=drafters.PromptLookupDrafter(),
                                             max_new_tokens=4, temperature=0.8, top_k=20, top_p=0.9,
                                             seed=1).tokens
    assert all(r.target_probs is not None for r in sampled.steps)  # per-position probabilities when asked


def test_every_contract_drafter_builds_and_stays_exact(pair):
    prompt = pair.tokenizer("KING HENRY: Once more unto the breach")["input_ids"]
    auto = decode.generate(pair.target, prompt, max_new_tokens=8).tokens
    built = [drafters.DraftModelDrafter(pair.draft), drafters.PromptLookupDrafter(), drafters.LookaheadDrafter(),
             drafters.MedusaDrafter.from_pretrained(pair), drafters.EagleDrafter.from_pretrained(pair),
             drafters.EarlyExitDrafter(pair.target, 3)]
    for drafter in built:
        assert decode.generate(pair.target, prompt, drafter=drafter, max_new_tokens=8).tokens == auto, drafter


def test_kv_rollback_keeps_the_first_positions(pair):
    ids = torch.tensor([pair.tokenizer("To be, or not to be")["input_ids"]])
    cache = models.new_cache()
    with torch.inference_mode():
        pair.target(ids, past_key_values=cache, use_cache=True)
        out = kv.rollback(cache, 3)
        assert kv.cache_length(out) == 3
        again = pair.target(ids[:, 3:4], past_key_values=out, use_cache=True).logits[0, -1]
        fresh = pair.target(ids[:, :4]).logits[0, -1]
    assert torch.allclose(again, fresh, atol=1e-5)


def test_tree_lines():
    parents = [-1, -1, 0, 2]
    pos = trees.position_ids(parents, 5)
    assert pos.dtype == torch.long and pos.tolist() == [5, 5, 6, 7]
    mask = trees.tree_attention_mask(parents, 5)
    assert mask.dtype == torch.bool and mask.shape == (4, 9)
    assert mask[:, :5].all()  # the prefix is always visible
    assert mask[:, 5:].tolist() == [[True, False, False, False], [False, True, False, False],
                                    [True, False, True, False], [True, False, True, True]]


def test_recommend_line():
    for task in ("chat", "code", "structured", "long_text", "copy_edit"):
        rec = picker.recommend(task, 0.0, True, False)
        assert isinstance(rec.method, str) and isinstance(rec.reasons, list) and rec.reasons
        assert isinstance(rec.vllm_config(), dict) and isinstance(rec.hf_kwargs(), dict)
        assert rec.n_draft is None or rec.n_draft >= 1
        assert rec.draft_temperature is None or rec.draft_temperature >= 0
    with pytest.raises(ValueError, match="task"):
        picker.recommend("poetry", 0.0, True, False)


@pytest.mark.parametrize("drafter", ["model", "ngram", "lookahead"])
def test_cli_demo_json_is_one_object(drafter, capsys, monkeypatch):
    from lab.cli import main

    monkeypatch.setattr(sys, "argv", ["lab"])
    argv = ["demo", "--drafter", drafter, "--prompt", "ROMEO:", "--max-new-tokens", "6", "--temperature", "0",
            "--seed", "3", "--json"]
    if drafter != "lookahead":
        argv += ["--n-draft", "2"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    # the default pair is the chat pair: its answer may end (<|im_end|>) before 6 tokens
    assert {"text", "tokens", "stats"} <= set(out) and 1 <= len(out["tokens"]) == out["stats"]["new_tokens"] <= 6
    assert isinstance(out["text"], str) and out["stats"]["target_calls"] >= 1
