"""lab.bench: the timing table of lab vs transformers on the bundled pair (every method, the timed region holding
the decoding only) and its heading."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from lab.bench import EXTRA_METHODS, FR_SPEC, SAME_RULE, format_table, run_bench
from lab.prompts import copy_heavy_prompts, held_out_prompts


def test_bench_runs_all_four_and_agrees(pair):
    result = run_bench(pair, held_out_prompts()[:1], max_new_tokens=24, n_draft=3)
    assert [r["method"] for r in result["rows"]] == ["lab autoregressive", "lab speculative", "HF generate",
                                                      "HF assisted"]
    assert result["identical"], result["mismatched"]
    assert "identical tokens: yes" in format_table(result)
    # alpha (accepted / examined) is the draft model's over the prompt's steps, the same run in float32 greedy
    from lab.decode import generate
    from lab.drafters import DraftModelDrafter
    from lab.metrics import alpha_from_steps

    gen = generate(pair.target, pair.encode(held_out_prompts()[0]), drafter=DraftModelDrafter(pair.draft, 3),
                   max_new_tokens=24)
    spec = result["rows"][1]
    assert spec["alpha"] == alpha_from_steps(gen.steps) and spec["acceptance_rate"] <= spec["alpha"]
    assert "alpha" not in result["rows"][3]  # transformers' rows have no step records
    rows = result["rows"]  # unrounded: a ratio judged against a goal must not have been rounded onto it
    for row in rows:
        assert row["tokens_per_second"] == row["tokens"] / row["seconds"], row["method"]
        assert row["vs_lab_autoregressive"] == row["tokens_per_second"] / rows[0]["tokens_per_second"], row["method"]
    assert rows[0]["vs_hf_counterpart"] == rows[0]["tokens_per_second"] / rows[2]["tokens_per_second"]
    assert rows[1]["vs_hf_counterpart"] == rows[1]["tokens_per_second"] / rows[3]["tokens_per_second"]
    # rounded only where printed
    assert f"| {spec['acceptance_rate']:.3f} | {spec['alpha']:.3f} | {spec['tokens_per_target_call']:.3f} |" in \
        format_table(result)


def test_the_same_policy_row_drafts_as_transformers_assisted_generation(pair):
    """DraftModelDrafter with transformers' default policy (HF_ASSISTED_POLICY: up to 20 drafts, stop below draft
    probability 0.4) writes transformers' assisted-generation tokens (float32, greedy, the same draft) with as many
    target forwards or one more: transformers verifies its first drafts in the prefill's forward, the lab's prefill
    gives the first token alone (as vLLM's does); the bench times it beside HF assisted when asked for the draft
    model."""
    from lab.bench import HF_ASSISTED_POLICY, SAME_POLICY
    from lab.decode import generate
    from lab.drafters import DraftModelDrafter

    forwards = [0]
    hook = pair.target.register_forward_hook(lambda module, inputs, output: forwards.__setitem__(0, forwards[0] + 1))
    try:
        lengths = set()
        for text in held_out_prompts()[:3]:
            ids = pair.encode(text)
            forwards[0] = 0
            x = torch.tensor([ids])
            hf = pair.target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=40, do_sample=False,
                                      assistant_model=pair.draft)[0, len(ids):].tolist()
            hf_calls = forwards[0]
            drafter = DraftModelDrafter(pair.draft, HF_ASSISTED_POLICY[0], confidence=HF_ASSISTED_POLICY[1])
            ours = generate(pair.target, ids, drafter=drafter, max_new_tokens=40)
            assert ours.tokens == hf
            assert ours.steps[0].prefill and hf_calls <= len(ours.steps) <= hf_calls + 1, text[:30]
            lengths |= {len(s.drafted) for s in ours.steps}
        assert len(lengths) > 2   # the stop, not N, ends most proposals
    finally:
        hook.remove()
    result = run_bench(pair, held_out_prompts()[:1], max_new_tokens=24, drafters=("model",))
    assert [r["method"] for r in result["rows"]] == ["lab autoregressive", "lab speculative", "HF generate",
                                                      "HF assisted", *SAME_POLICY]
    assert result["identical"], result["mismatched"]
    rows = {r["method"]: r for r in result["rows"]}
    ours, theirs = (rows[name] for name in SAME_POLICY)
    assert ours["vs_hf_counterpart"] == pytest.approx(ours["tokens_per_second"] / theirs["tokens_per_second"], abs=0.01)
    assert rows["lab speculative"]["vs_hf_counterpart"] == pytest.approx(
        rows["lab speculative"]["tokens_per_second"] / rows["HF assisted"]["tokens_per_second"], abs=0.01)
    assert ours["tokens_per_target_call"] != rows["lab speculative"]["tokens_per_target_call"]   # another policy
    assert "stopping after one below draft probability 0.4" in format_table(result)
    assert pair.draft.generation_config.num_assistant_tokens is None   # the shared draft's config is restored
    # what the bench set transformers' assistant to, in the JSON and on the settings line
    from transformers.utils import is_sklearn_available

    settings = result["settings"]
    assert settings["hf_assistant"] == {"num_assistant_tokens": 4, "num_assistant_tokens_schedule": "constant",
                                        "assistant_confidence_threshold": 0.0}
    assert settings["hf_default_policy"] == {"num_assistant_tokens": 20, "num_assistant_tokens_schedule": "constant",
                                             "assistant_confidence_threshold": 0.4}
    assert settings["sklearn_available"] is is_sklearn_available()
    heading = format_table(result).splitlines()[0]
    assert ("HF assisted: num_assistant_tokens = 4, schedule constant, assistant_confidence_threshold 0 (no "
            "confidence stop)") in heading
    assert ("scikit-learn is installed, so transformers retunes that threshold" if is_sklearn_available() else
            "a fixed threshold here: transformers retunes it only when scikit-learn is installed, and it is "
            "not") in heading


def test_bench_with_the_new_rows_agrees(pair):
    result = run_bench(pair, copy_heavy_prompts(pair, held_out_prompts()[:1]), max_new_tokens=24, n_draft=4,
                       extra=EXTRA_METHODS)
    assert [r["method"] for r in result["rows"]] == ["lab autoregressive", "lab speculative", "HF generate",
                                                      "HF assisted", "lab prompt lookup", SAME_RULE,
                                                      "HF prompt lookup", "lab lookahead", "lab Medusa", "lab EAGLE",
                                                      "lab early exit"]
    assert result["identical"], result["mismatched"]
    rows = {r["method"]: r for r in result["rows"]}
    assert rows["lab prompt lookup"]["tokens_per_target_call"] > 1 and "vs_hf_counterpart" in rows["lab prompt lookup"]
    for name in ("lab speculative", "lab prompt lookup", SAME_RULE, "lab EAGLE"):
        row = rows[name]  # decode steps only: the prompt's first new token came from the prefill
        assert row["tokens_per_target_call"] == (row["tokens"] - 1) / row["target_calls"], name
        assert row["tokens_per_target_call"] <= 5 + 1, name   # at most every draft and the target's token
    assert "all eleven produced identical tokens: yes" in format_table(result, "copy-heavy")
    assert all(name in result["settings"]["extra"] for name in ("prompt lookup:", "lookahead:", "Medusa:", "EAGLE:",
                                                                 "early exit:"))
    with pytest.raises(ValueError, match="extra"):
        run_bench(pair, held_out_prompts()[:1], extra=("nope",))


def test_the_fr_spec_row_drafts_with_the_eagle_drafts_vocabulary_on_the_real_pair(smollm2_pair, pair, monkeypatch):
    """The draft model with its head cut to the real pair's 8,192-token draft vocabulary writes the target's greedy
    tokens (float32), is compared with transformers' assisted generation, and drafts only tokens of that vocabulary;
    a pair without a draft vocabulary refuses the row before timing anything."""
    from lab.drafters.eagle import saved_draft_vocab
    from lab.prompts import chat_prompts

    import lab.drafters

    built = []
    real = lab.drafters.DraftModelDrafter

    def recording(*args, **kwargs):
        drafter = real(*args, **kwargs)
        built.append(drafter.draft_vocab)
        return drafter

    monkeypatch.setattr(lab.drafters, "DraftModelDrafter", recording)
    result = run_bench(smollm2_pair, chat_prompts("code")[:1], max_new_tokens=16, n_draft=4, extra=(FR_SPEC,))
    assert [r["method"] for r in result["rows"]] == ["lab autoregressive", "lab speculative", FR_SPEC, "HF generate",
                                                      "HF assisted"]
    assert result["identical"], result["mismatched"]
    rows = {r["method"]: r for r in result["rows"]}
    assert rows[FR_SPEC]["vs_hf_counterpart"] == pytest.approx(
        rows[FR_SPEC]["tokens_per_second"] / rows["HF assisted"]["tokens_per_second"], abs=0.01)
    vocab = saved_draft_vocab(smollm2_pair)
    assert vocab.shape == (8192,) and saved_draft_vocab(pair) is None
    with_vocab = [v for v in built if v is not None]  # warm-up and prompt: the FR-Spec row's drafters
    assert len(with_vocab) == 2 and all(torch.equal(v.cpu(), vocab) for v in with_vocab)
    assert len(built) == 4  # and lab speculative's two, with the whole head
    # the settings line names what was timed, and only that
    assert result["settings"]["extra"].split("; ") == [
        "HF assisted: num_assistant_tokens = 4, schedule constant, assistant_confidence_threshold 0 (no confidence "
        "stop)", "FR-Spec head: the draft scores 8,192 of its 49,152 tokens"]
    with pytest.raises(ValueError, match="has no draft vocabulary"):
        run_bench(pair, held_out_prompts()[:1], max_new_tokens=2, extra=(FR_SPEC,))


def test_draft_step_ms_times_one_drafting_step_through_the_drafters_own_call(draft, monkeypatch):
    """draft_step_ms rebuilds the cache with reset before each step and times next_logits on one token: one untimed
    and `repeats` timed calls, each after a reset to the same `context` tokens; bad arguments are named."""
    from lab.bench import draft_step_ms
    from lab.drafters import DraftModelDrafter

    drafter = DraftModelDrafter(draft, 1, draft_vocab=torch.arange(0, 64, 2))
    calls = []
    real_reset, real_next = drafter.reset, drafter.next_logits
    monkeypatch.setattr(drafter, "reset", lambda ids: (calls.append(("reset", len(ids))), real_reset(ids))[1])
    monkeypatch.setattr(drafter, "next_logits", lambda feed: (calls.append(("step", drafter.kv_length())),
                                                               real_next(feed))[1])
    assert draft_step_ms(drafter, context=20, repeats=3) > 0
    assert calls == [("reset", 21), ("step", 20)] * 4
    for bad in ({"repeats": 0}, {"context": -1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            draft_step_ms(drafter, **bad)


def test_bench_builds_every_drafter_outside_the_timed_region(pair, monkeypatch):
    """Medusa heads and the EAGLE draft are read from disk when their drafters are built (tens of ms, a sizeable
    share of a 128-token run): the bench's tokens/s must not count that, as its header promises decoding time."""
    import time as real_time

    import lab.bench
    import lab.drafters

    events = []
    fake_time = SimpleNamespace(perf_counter=lambda: (events.append("clock"), real_time.perf_counter())[1])
    monkeypatch.setattr(lab.bench, "time", fake_time)

    def logged(make):
        def build(*args, **kwargs):
            events.append("build")
            return make(*args, **kwargs)
        return build

    monkeypatch.setattr(lab.bench, "make_drafter", logged(lab.bench.make_drafter))
    for name in ("DraftModelDrafter", "PromptLookupDrafter", "LookaheadDrafter"):
        monkeypatch.setattr(lab.drafters, name, logged(getattr(lab.drafters, name)))
    result = lab.bench.run_bench(pair, ["ROMEO.\n"], max_new_tokens=2, extra=lab.bench.EXTRA_METHODS)
    assert len(result["rows"]) == 11
    clocks = [i for i, event in enumerate(events) if event == "clock"]
    assert len(clocks) == 2 * 11  # one start and one stop per method and prompt
    builds = [i for i, event in enumerate(events) if event == "build"]
    assert len(builds) >= 2 * 8  # the eight lab drafters, for the warm-up and the prompt
    for start, stop in zip(clocks[::2], clocks[1::2]):
        inside = [i for i in builds if start < i < stop]
        assert inside == [], f"a drafter was built while the clock ran (events {start}..{stop}: {events})"


def test_the_bench_heading_names_the_processor():
    """A committed run was labelled with the wrong CPU from memory: the heading now says which one ran it."""
    settings = {"pair": "p", "device": "cpu", "processor": "Intel(R) Xeon(R) Processor", "dtype": "bfloat16",
                "threads": 2, "prompts": 3, "max_new_tokens": 128, "n_draft": 4}
    heading = format_table({"settings": settings, "rows": [], "identical": True, "mismatched": []}).splitlines()[0]
    assert heading.startswith("pair p on cpu, Intel(R) Xeon(R) Processor (bfloat16, 2 threads), 3 held-out prompts")


def test_bench_heading_counts_one_prompt_and_one_thread():
    bench = {"rows": [], "identical": True, "mismatched": [],
             "settings": {"pair": "p", "device": "cpu", "dtype": "float32", "threads": 1, "prompts": 1,
                          "max_new_tokens": 8, "n_draft": 4}}
    assert "(float32, 1 thread), 1 copy-heavy prompt ×" in format_table(bench, "copy-heavy").splitlines()[0]


# --- bench: arguments, and the shared pair is left as it was -------------------------------------------------------
def test_run_bench_rejects_bad_prompts(pair):
    from lab.bench import run_bench

    with pytest.raises(TypeError, match=r"prompts must be a list of strings, got one str: wrap it in a list"):
        run_bench(pair, "ROMEO.")
    with pytest.raises(ValueError, match="prompts must be a non-empty list of strings"):
        run_bench(pair, [])
    with pytest.raises(TypeError, match="prompts must be a list of strings, got an item of type int"):
        run_bench(pair, ["ROMEO.", 3])
    with pytest.raises(ValueError, match=r"prompts\[1\] is '', which has no tokens"):
        run_bench(pair, ["ROMEO.", ""])
    with pytest.raises(ValueError, match="max_new_tokens must be an integer >= 1, got 0"):
        run_bench(pair, ["ROMEO."], max_new_tokens=0)
    with pytest.raises(ValueError, match=r"max_new_tokens: prompt \(\d+ tokens\) \+ 600 new tokens exceed the "
                                         r"target's context of 512 positions"):
        run_bench(pair, ["ROMEO."], max_new_tokens=600)


def test_run_bench_restores_the_drafts_generation_config(pair, monkeypatch):
    import lab.decode
    from lab.bench import run_bench

    config = pair.draft.generation_config
    before = (config.num_assistant_tokens, config.num_assistant_tokens_schedule, config.assistant_confidence_threshold)
    config.num_assistant_tokens, config.num_assistant_tokens_schedule = 7, "heuristic"
    config.assistant_confidence_threshold = 0.25
    try:
        result = run_bench(pair, ["ROMEO.\nBut soft"], max_new_tokens=2, n_draft=3)
        assert result["identical"] and result["settings"]["n_draft"] == 3
        assert (config.num_assistant_tokens, config.num_assistant_tokens_schedule,
                config.assistant_confidence_threshold) == (7, "heuristic", 0.25)

        seen = []

        def failing(*args, **kwargs):  # what the config is during the run, then a failure mid-run
            seen.append((config.num_assistant_tokens, config.num_assistant_tokens_schedule,
                         config.assistant_confidence_threshold))
            raise RuntimeError("boom")

        monkeypatch.setattr(lab.decode, "generate", failing)
        with pytest.raises(RuntimeError, match="boom"):
            run_bench(pair, ["ROMEO."], max_new_tokens=2, n_draft=5)
        assert seen == [(5, "constant", 0.0)]
        assert (config.num_assistant_tokens, config.num_assistant_tokens_schedule,
                config.assistant_confidence_threshold) == (7, "heuristic", 0.25)
    finally:
        config.num_assistant_tokens, config.num_assistant_tokens_schedule, \
            config.assistant_confidence_threshold = before


# --- agreement in bfloat16, the cost curve, the prediction and the goal lines ------------------------------------
def test_agreement_counts_identical_prompts_and_the_first_divergence():
    from lab.bench import agreement_with

    reference = [[1, 2, 3, 4], [5, 6, 7], [8, 9]]
    assert agreement_with(reference, reference) == {"same": 3, "prompts": 3, "first_divergence": None}
    outputs = [[1, 2, 9, 9], [5, 6, 7], [8]]  # parts at token 2; the third stops early, at token 1
    assert agreement_with(reference, outputs) == {"same": 1, "prompts": 3, "first_divergence": 1}
    with pytest.raises(ValueError, match="the same number of prompts, got 1 and 2"):  # zip dropped the second
        agreement_with([[1, 2]], [[1, 2], [3]])


def test_a_bf16_table_reports_agreement_instead_of_identity():
    bench = {"rows": [], "identical": False, "mismatched": ["lab speculative"],
             "agreement": {"lab autoregressive": {"same": 2, "prompts": 2, "first_divergence": None},
                           "lab speculative": {"same": 1, "prompts": 2, "first_divergence": 19}},
             "settings": {"pair": "p", "device": "cpu", "dtype": "bfloat16", "threads": 2, "prompts": 2,
                          "max_new_tokens": 8, "n_draft": 4, "load": [1.5, 1.75]}}
    text = format_table(bench, "chat request")
    assert "identical tokens: NO" not in text
    assert "agreement with lab autoregressive in bfloat16" in text
    assert "lab speculative 1/2 (first divergence at token 19)" in text
    assert "load average 1.5 before, 1.75 after" in text.splitlines()[0]


def test_a_drafter_row_that_drafted_nothing_reads_n_a_and_one_token_is_singular():
    rows = [{"method": "lab autoregressive", "tokens_per_second": 30.0, "vs_lab_autoregressive": 1.0},
            {"method": "lab suffix decoding", "tokens_per_second": 29.0, "vs_lab_autoregressive": 0.97, "alpha": None,
             "tokens_per_target_call": 1.0, "target_calls": 1},
            {"method": "HF generate", "tokens_per_second": 28.0, "vs_lab_autoregressive": 0.93}]
    bench = {"rows": rows, "identical": True, "mismatched": [],
             "settings": {"pair": "p", "device": "cpu", "dtype": "float32", "threads": 2, "prompts": 1,
                          "max_new_tokens": 1, "n_draft": 4}}
    text = format_table(bench, "chat")
    assert "| lab suffix decoding | 29.0 | 0.97 |  | n/a | n/a | 1.000 |" in text
    assert "| HF generate | 28.0 | 0.93 |  |  |  |  |" in text  # transformers' rows have no step records
    assert "1 chat prompt × 1 new token, greedy" in text.splitlines()[0]


def test_predicted_speedup_uses_the_measured_verification_cost():
    from lab.bench import speedup_with_verify_cost
    from lab.metrics import predicted_speedup

    # α = 0.5, N = 2: 1.75 tokens per call; cost 2 · 0.1 + 1.2 = 1.4 target forwards per step
    assert speedup_with_verify_cost(0.5, 2, 0.1, 1.2) == pytest.approx(1.75 / 1.4)
    assert speedup_with_verify_cost(0.7, 3, 0.05, 1.0) == pytest.approx(predicted_speedup(0.7, 3, 0.05))
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="verify_ratio must be a finite number > 0"):
            speedup_with_verify_cost(0.5, 2, 0.1, bad)
    with pytest.raises(TypeError, match="verify_ratio"):
        speedup_with_verify_cost(0.5, 2, 0.1, "1.2")
    with pytest.raises(ValueError):
        speedup_with_verify_cost(None, 2, 0.1, 1.2)
    # one-element tensors (an α computed with torch) give a float, as annotated
    from_tensors = speedup_with_verify_cost(torch.tensor(0.5), 2, torch.tensor(0.1), 1.2)
    assert type(from_tensors) is float and from_tensors == pytest.approx(1.75 / 1.4)


def test_eagle_step_time_is_one_pair_on_a_cache(pair, monkeypatch):
    """One timed step feeds one pair at the position after the cached ones and reads its logits."""
    from lab.bench import eagle_step_ms
    from lab.drafters.eagle import EagleDraftModel

    model = EagleDraftModel.from_pretrained(pair.target)
    seen = []
    original = EagleDraftModel.forward

    def spy(self, features, tokens, cache=None, position_ids=None, attention_mask=None):
        seen.append((tuple(features.shape), torch.as_tensor(position_ids).flatten().tolist()[:1],
                     0 if cache is None else cache.get_seq_length()))
        return original(self, features, tokens, cache, position_ids, attention_mask)

    monkeypatch.setattr(EagleDraftModel, "forward", spy)
    ms = eagle_step_ms(model, context=8, repeats=2)
    assert ms > 0
    assert seen[0] == ((8, 384), [1], 0)                    # the context, once
    assert seen[1:] == [((1, 384), [9], 8)] * 3              # warm-up + 2 timed steps, each on a cache of 8


def test_cost_curve_times_one_forward_per_block_size(pair):
    from lab.bench import cost_curve

    curve = cost_curve(pair.target, tokens=(1, 5), context=16, repeats=2)
    assert list(curve) == [1, 5] and all(ms > 0 for ms in curve.values())


def test_cost_curve_times_other_steps_in_the_same_rotating_rounds(monkeypatch):
    """``also``: the draft's forward (or an EAGLE step) is timed in the curve's rounds, the order rotating, so that
    c = draft / curve[1] compares times taken under the same load; each keeps its unrounded median over the rounds."""
    import lab.costs
    from lab.bench import cost_curve

    order, times = [], iter([1.0, 2.0, 0.5, 2.0, 0.25, 1.5, 0.125, 1.25, 3.0])

    def fake_forward(model, new_tokens, context, repeats):
        order.append(new_tokens)
        return next(times)

    def draft():
        order.append("draft")
        return next(times)

    monkeypatch.setattr(lab.costs, "time_forward", fake_forward)
    timed = cost_curve("target", tokens=(1, 2), rounds=3, also={"draft": draft})
    assert order == [1, 2, "draft", 2, "draft", 1, "draft", 1, 2]
    # K = 1 took 1.0, 1.5, 1.25; K = 2: 2.0, 2.0, 3.0; the draft 0.5, 0.25, 0.125
    assert timed == {1: 1.25, 2: 2.0, "draft": 0.25}


def test_cost_curve_rejects_no_k_a_repeated_k_and_bad_timers(pair):
    from lab.bench import cost_curve

    with pytest.raises(ValueError, match="tokens must name at least one K"):
        cost_curve(pair.target, tokens=())
    with pytest.raises(ValueError, match=r"tokens must name each K once, got \[1, 2, 1\]"):
        cost_curve(pair.target, tokens=(1, 2, 1))
    with pytest.raises(ValueError, match="tokens must be an integer >= 1"):
        cost_curve(pair.target, tokens=(0, 1))
    with pytest.raises(ValueError, match="also must map names"):
        cost_curve(pair.target, tokens=(1,), also={"draft": 3.0})


def _record_runs(pair, monkeypatch):
    """Patch lab's and transformers' generate to record which method ran: "AR", "spec" or "HF" / "HF assisted"."""
    import lab.decode

    order = []
    lab_generate, hf_generate = lab.decode.generate, pair.target.generate  # the target's alone, not the assistant's

    def ours(target, ids, drafter=None, **kw):
        order.append("AR" if drafter is None else f"spec {drafter.n_draft}")
        return lab_generate(target, ids, drafter=drafter, **kw)

    def theirs(*a, assistant_model=None, **kw):
        order.append("HF" if assistant_model is None else "HF assisted")
        return hf_generate(*a, assistant_model=assistant_model, **kw)

    monkeypatch.setattr(lab.decode, "generate", ours)
    monkeypatch.setattr(pair.target, "generate", theirs)
    return order


def test_bench_interleaves_methods_and_reports_the_load(pair, monkeypatch):
    import lab.load_meter

    order = _record_runs(pair, monkeypatch)
    loads = iter([1.5, 1.75])   # the 1-minute load average before and after the timed block
    monkeypatch.setattr(lab.load_meter, "_load_average", lambda: next(loads))
    # a quiet machine: the kernel counts no busy time beyond our own
    monkeypatch.setattr(lab.load_meter, "_busy_cpu_seconds", lambda cpus=None: 0.0)
    result = run_bench(pair, held_out_prompts()[:2], max_new_tokens=4, n_draft=2)
    settings = result["settings"]
    assert settings["load"] == [1.5, 1.75]
    assert settings["load_note"].startswith("other processes kept ")
    assert "1-minute load average 1.5 before, 1.75 after" in settings["load_note"]
    # printed also when the machine was quiet
    assert settings["busy"] is False and "WARNING" not in settings["load_note"]
    assert format_table(result).splitlines()[-1] == settings["load_note"]
    assert result["agreement"]["lab speculative"] == {"same": 2, "prompts": 2, "first_divergence": None}
    methods = ["AR", "spec 2", "HF", "HF assisted"]
    # a warm-up each, then prompt by prompt every method, the order rotating by one per prompt
    assert order == methods + methods + methods[1:] + methods[:1]


def test_the_n_sweep_measures_decode_only_speedups_and_builds_drafters_before_the_clock(pair, monkeypatch):
    """The sweep's decode-only speedup is decoded tokens (each prompt's first, the prefill's, left out) over wall less
    prefill (the target's and the draft's, in DraftModelDrafter.reset), against autoregressive decoding's; and no
    drafter is built while a clock runs (the bench's own or generate's)."""
    import time as real_time

    import lab.bench
    import lab.decode
    import lab.drafters
    from lab.bench import sweep_n_draft

    events, gens = [], []
    real_generate, real_drafter = lab.decode.generate, lab.drafters.DraftModelDrafter

    def generate(target, ids, drafter=None, **kw):
        events.append("start")
        gen = real_generate(target, ids, drafter=drafter, **kw)
        events.append("stop")
        gens.append((0 if drafter is None else drafter.n_draft, gen))
        return gen

    monkeypatch.setattr(lab.decode, "generate", generate)
    monkeypatch.setattr(lab.drafters, "DraftModelDrafter",
                        lambda *a, **k: (events.append("build"), real_drafter(*a, **k))[1])
    monkeypatch.setattr(lab.bench, "time", SimpleNamespace(
        perf_counter=lambda: (events.append("clock"), real_time.perf_counter())[1]))
    rows = sweep_n_draft(pair, held_out_prompts()[:2], max_new_tokens=12, n_values=(2,))
    clocks = [i for i, event in enumerate(events) if event == "clock"]
    regions = list(zip(clocks[::2], clocks[1::2])) + [
        (i, events.index("stop", i)) for i, event in enumerate(events) if event == "start"]
    builds = [i for i, event in enumerate(events) if event == "build"]
    assert len(builds) == 3 and all(not start < i < stop for i in builds for start, stop in regions), events
    timed = gens[2:]  # after the warm-ups of autoregressive decoding and N = 2

    def decode_rate(n):
        runs = [gen for m, gen in timed if m == n]
        return sum(len(g.tokens) - 1 for g in runs) / sum(g.stats["wall_ms"] - g.stats["prefill_ms"] for g in runs)

    def whole_rate(n):
        runs = [gen for m, gen in timed if m == n]
        return sum(len(g.tokens) for g in runs) / sum(g.stats["wall_ms"] for g in runs)

    assert [n for n, _ in timed] == [0, 2, 2, 0]
    assert rows[0]["decode_vs_lab_autoregressive"] == pytest.approx(decode_rate(2) / decode_rate(0), rel=1e-9)
    assert rows[0]["vs_lab_autoregressive"] == pytest.approx(whole_rate(2) / whole_rate(0), rel=1e-9)


def test_the_n_sweep_warms_up_rotates_and_measures_alpha(pair, monkeypatch):
    from lab.bench import sweep_n_draft

    order = _record_runs(pair, monkeypatch)
    rows = sweep_n_draft(pair, held_out_prompts()[:2], max_new_tokens=12, n_values=(1, 3))
    assert order == ["AR", "spec 1", "spec 3"] * 2 + ["spec 1", "spec 3", "AR"]
    assert [row["n_draft"] for row in rows] == [1, 3]
    for row in rows:
        assert 0 <= row["acceptance_rate"] <= row["alpha"] <= 1 and row["tokens_per_target_call"] >= 1
    assert rows[0]["alpha"] == rows[0]["acceptance_rate"]  # at N = 1 every draft is examined
    with pytest.raises(ValueError, match="n_values"):
        sweep_n_draft(pair, held_out_prompts()[:1], n_values=(0,))
    for bad in ((), (2, 2)):
        with pytest.raises(ValueError, match="n_values must name at least one draft length N, each once"):
            sweep_n_draft(pair, held_out_prompts()[:1], n_values=bad)


def test_time_methods_interleaves_and_pools(pair):
    from lab.bench import format_timing, time_methods
    from lab.drafters import DraftModelDrafter

    prompts = held_out_prompts()[:2]
    result = time_methods(pair, prompts, {"autoregressive": None,
                                          "draft model": lambda: DraftModelDrafter(pair.draft, n_draft=3)},
                          max_new_tokens=12)
    gens = result["generations"]
    assert [g.tokens for g in gens["autoregressive"]] == [g.tokens for g in gens["draft model"]]  # greedy, float32
    base, spec = result["rows"]
    assert base["speedup"] == 1.0 and "alpha" not in base
    assert base["new_tokens"] == sum(len(g.tokens) for g in gens["autoregressive"])
    assert base["tokens_per_second"] == pytest.approx(base["new_tokens"] / base["seconds"], rel=1e-2)
    calls = sum(g.stats["target_calls"] for g in gens["draft model"])
    # the decode steps' tokens: each prompt's first came from its prefill
    assert spec["target_calls"] == calls and spec["tokens_per_target_call"] == round((spec["new_tokens"] - 2) / calls,
                                                                                     3)
    def rate(name):  # unrounded tokens/s from the generations: the speedup divides these, not the rounded rates
        return sum(len(g.tokens) for g in gens[name]) / sum(g.stats["wall_ms"] for g in gens[name])

    assert spec["speedup"] == round(rate("draft model") / rate("autoregressive"), 2)
    assert 0 <= spec["acceptance_rate"] <= spec["alpha"] <= 1
    text = format_timing(result)
    assert "| draft model |" in text and result["note"] in text and "interleaved" in text
    # one timing per prompt is said so ("fastest of 1" read oddly in lesson 00); several are "fastest of N"
    assert "one timing per prompt" in text and "fastest of" not in text
    assert "fastest of 3" in format_timing({**result, "settings": {**result["settings"], "repeats": 3}})
    assert set(result["load"]) == {"seconds", "cores", "other_cores", "load_average", "busy"}
    from lab.models import processor_name

    # a card built from these rows names its machine, not only "cpu"
    assert result["settings"]["processor"] == processor_name(pair.device) and result["settings"]["device"] == "cpu"


def test_time_methods_speedup_divides_the_unrounded_rates(pair, monkeypatch):
    """0.0149 and 0.02 tokens/s print as 0.01 and 0.02, whose ratio is 2.0; the rates' own ratio is 1.34."""
    import lab.bench as bench

    from lab.drafters import PromptLookupDrafter

    real, rates = bench.pool_runs, iter([0.0149, 0.02])  # pooled once per method, in the methods' order

    monkeypatch.setattr(bench, "pool_runs", lambda gens: {**real(gens), "tokens_per_second": next(rates)})
    rows = bench.time_methods(pair, held_out_prompts()[:1], {"ar": None, "prompt lookup": PromptLookupDrafter},
                              max_new_tokens=4)["rows"]
    assert [row["tokens_per_second"] for row in rows] == [0.01, 0.02]
    assert [row["speedup"] for row in rows] == [1.0, 1.34]


def test_a_drafter_that_never_drafts_has_no_alpha(pair):
    """alpha is accepted / examined, the acceptance rate accepted / drafted: a method that proposed nothing on any
    prompt has neither (n/a in the table, as lab.metrics.summarize_steps gives None)."""
    from lab.bench import format_timing, time_methods
    from lab.drafters.base import Draft

    class Silent:
        def reset(self, prompt_ids):
            pass

        def propose(self, request):
            return Draft()

        def update(self, num_accepted, next_token):
            pass

    result = time_methods(pair, held_out_prompts()[:1], {"autoregressive": None, "silent": Silent}, max_new_tokens=4)
    silent = result["rows"][1]
    assert silent["alpha"] is None and silent["acceptance_rate"] is None and silent["tokens_per_target_call"] == 1.0
    assert "| silent |" in format_timing(result) and "| n/a | n/a | 1.00 |" in format_timing(result)


def test_without_a_decode_step_the_rows_say_so_instead_of_dividing_by_zero(pair):
    """max_new_tokens = 1: the prefill writes the only token, no decode step runs; tokens per target call, the
    acceptance rate and α are None (n/a in the tables) in time_methods, run_bench and the N sweep."""
    from lab.bench import NO_DECODE_STEP, format_timing, sweep_n_draft, time_methods
    from lab.drafters import DraftModelDrafter

    prompts = held_out_prompts()[:1]
    timing = time_methods(pair, prompts, {"ar": None, "spec": lambda: DraftModelDrafter(pair.draft, 2)},
                          max_new_tokens=1)
    spec = timing["rows"][1]
    assert (spec["target_calls"], spec["tokens_per_target_call"], spec["acceptance_rate"], spec["alpha"]) == \
        (0, None, None, None)
    assert f"| spec | {spec['tokens_per_second']:.1f} | {spec['speedup']:.2f}× | n/a | n/a | {NO_DECODE_STEP} |" \
        in format_timing(timing)
    bench = run_bench(pair, prompts, max_new_tokens=1, n_draft=2)
    spec = {row["method"]: row for row in bench["rows"]}["lab speculative"]
    assert (spec["target_calls"], spec["tokens_per_target_call"], spec["acceptance_rate"], spec["alpha"]) == \
        (0, None, None, None)
    assert f"| n/a | n/a | {NO_DECODE_STEP} |" in format_table(bench)   # a lab row, not blank like transformers'
    rows = sweep_n_draft(pair, prompts, max_new_tokens=1, n_values=(2,))
    assert (rows[0]["tokens_per_target_call"], rows[0]["decode_vs_lab_autoregressive"], rows[0]["alpha"]) == \
        (None, None, None)


def test_run_interleaved_rotates_the_order(pair):
    from lab.bench import run_interleaved
    from lab.drafters import PromptLookupDrafter

    order = []

    def factory(name):
        return lambda: order.append(name) or PromptLookupDrafter()

    encoded = [pair.encode(p) for p in held_out_prompts()[:3]]
    run_interleaved(pair, encoded, {n: factory(n) for n in "abc"}, max_new_tokens=2)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]


def test_time_methods_rejects_bad_arguments(pair):
    from lab.bench import time_methods

    prompts = held_out_prompts()[:1]
    with pytest.raises(ValueError, match="methods must be a non-empty dict"):
        time_methods(pair, prompts, {})
    with pytest.raises(ValueError, match=r"methods\['x'\] must be a callable"):
        time_methods(pair, prompts, {"x": 3})
    with pytest.raises(TypeError, match="prompts must be a list of strings"):
        time_methods(pair, prompts[0], {"ar": None})
    with pytest.raises(ValueError, match="temperature"):
        time_methods(pair, prompts, {"ar": None}, temperature=-1)
    with pytest.raises(ValueError, match="max_new_tokens"):
        time_methods(pair, prompts, {"ar": None}, max_new_tokens=0)


def test_the_same_rule_row_looks_up_as_transformers_prompt_lookup(pair):
    """PromptLookupDrafter with transformers' lookup (HF_LOOKUP_RULE: n-grams <= 2, the earliest occurrence) writes
    transformers' prompt-lookup tokens (float32, greedy) with as many target forwards or one more (one more only
    where transformers' first forward, over the prompt and a lookup from it, accepts a draft: the lab's prefill
    gives the first token alone, as vLLM's does); the bench times it beside HF prompt lookup, so that pair of rows
    compares the two loops on the same proposals."""
    from lab.bench import HF_LOOKUP_RULE
    from lab.decode import generate
    from lab.drafters import PromptLookupDrafter

    forwards = [0]
    hook = pair.target.register_forward_hook(lambda module, inputs, output: forwards.__setitem__(0, forwards[0] + 1))
    try:
        for text in copy_heavy_prompts(pair, held_out_prompts()[:2]):
            ids = pair.encode(text)
            forwards[0] = 0
            x = torch.tensor([ids], device=pair.device)
            hf = pair.target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=40, do_sample=False,
                                      prompt_lookup_num_tokens=5)[0, len(ids):].tolist()
            hf_calls = forwards[0]
            ours = generate(pair.target, ids, drafter=PromptLookupDrafter(HF_LOOKUP_RULE[0], 5,
                                                                          match=HF_LOOKUP_RULE[1]), max_new_tokens=40)
            assert ours.tokens == hf
            assert ours.steps[0].prefill and hf_calls <= len(ours.steps) <= hf_calls + 1, text[:30]
            course = generate(pair.target, ids, drafter=PromptLookupDrafter(3, 5), max_new_tokens=40)
            assert course.tokens == hf  # another rule, the same greedy text
    finally:
        hook.remove()
    result = run_bench(pair, copy_heavy_prompts(pair, held_out_prompts()[:1]), max_new_tokens=24,
                       drafters=("ngram",))
    rows = {r["method"]: r for r in result["rows"]}
    assert list(rows) == ["lab autoregressive", "HF generate", "lab prompt lookup", SAME_RULE, "HF prompt lookup"]
    assert result["identical"], result["mismatched"]
    assert rows[SAME_RULE]["vs_hf_counterpart"] == pytest.approx(
        rows[SAME_RULE]["tokens_per_second"] / rows["HF prompt lookup"]["tokens_per_second"], abs=0.01)


def test_the_table_names_the_draft_models_n_only_where_a_draft_model_drafted():
    settings = {"pair": "p", "device": "cpu", "dtype": "float32", "threads": 2, "prompts": 1, "max_new_tokens": 8,
                "n_draft": 4, "load": [1.0, 1.0]}
    row = {"tokens_per_second": 10.0, "vs_lab_autoregressive": 1.0}
    lookup_only = {"settings": settings, "identical": True, "mismatched": [], "agreement": {},
                   "rows": [{"method": "lab autoregressive", **row}, {"method": "lab prompt lookup", **row}]}
    assert "draft model N" not in format_table(lookup_only).splitlines()[0]
    with_draft = {**lookup_only, "rows": lookup_only["rows"] + [{"method": "lab speculative", **row}]}
    assert format_table(with_draft).splitlines()[0].endswith("greedy, draft model N = 4; load average 1.0 before, "
                                                             "1.0 after")


def test_a_pair_without_a_draft_model_times_the_rows_that_need_none(pair):
    """Prompt lookup needs no draft model: run_bench asks for one only when a row drafts with it, and the settings
    line discloses the lookup rules (ours, and transformers' max_matching_ngram_size) of the rows timed."""
    import dataclasses

    from lab.bench import needs_draft_model

    alone = dataclasses.replace(pair, draft=None)
    assert needs_draft_model() and needs_draft_model(drafters=("ngram", "model"))
    assert not needs_draft_model(drafters=("ngram", "eagle"))
    result = run_bench(alone, copy_heavy_prompts(pair, held_out_prompts()[:1]), max_new_tokens=8, lookup_n_draft=3,
                       drafters=("ngram",))
    assert [r["method"] for r in result["rows"]] == ["lab autoregressive", "HF generate", "lab prompt lookup",
                                                      SAME_RULE, "HF prompt lookup"]
    assert result["identical"], result["mismatched"]
    settings = result["settings"]
    assert settings["lookup_n_draft"] == 3 and "hf_assistant" not in settings
    assert settings["lookup_rule"] == {"lab": {"max_ngram": 3, "match": "recent"},
                                       "hf": {"max_matching_ngram_size": 2, "match": "earliest"}}
    heading = format_table(result, "copy-heavy").splitlines()[0]
    assert heading.endswith("greedy; prompt lookup: n-grams <= 3 tokens, 3 drafted (HF's rule: <= 2, the earliest "
                            "occurrence; HF prompt_lookup_num_tokens = 3, max_matching_ngram_size = 2); load "
                            f"average {settings['load'][0]} before, {settings['load'][1]} after")
    with pytest.raises(ValueError, match="needs a draft model, and the 'shakespeare' pair has none"):
        run_bench(alone, held_out_prompts()[:1], max_new_tokens=2)


# The course README's "Measured speed" table, row by row, and the names the bench prints for the same methods.
README_ROWS = {"lab EAGLE-3, dynamic tree (3 levels, top-3, 8 tokens)": "lab EAGLE-3, dynamic tree",
               "lab Medusa (14-node tree)": "lab Medusa", "lab EAGLE (chain, N = 4)": "lab EAGLE",
               "lab draft model (N = 4)": "lab speculative",
               "lab draft model, FR-Spec head": "lab speculative, FR-Spec head",
               "transformers assisted generation (the same draft, N = 4)": "HF assisted",
               "lab prompt lookup (n-grams ≤ 3, 5 drafted)": "lab prompt lookup",
               "lab prompt lookup, transformers' rule": "lab prompt lookup, HF's rule",
               "transformers prompt lookup": "HF prompt lookup",
               "lab early exit (15 of 30 layers, N = 4)": "lab early exit", "transformers `generate`": "HF generate"}


def test_the_readme_quotes_the_committed_bench_run():
    """README "Measured speed" quotes lab/assets/smollm2-135m/bench.md, the committed output of ``python -m lab
    bench``: every cell (speedup, α and tokens per target call, as the bench printed them, rounded half up to 2
    decimals) and every goal line's number and verdict. A re-run that replaces bench.md must update the table, or
    this fails."""
    import re
    from decimal import ROUND_HALF_UP, Decimal
    from pathlib import Path

    def two(printed: str) -> str:  # "0.415" -> "0.42", as a reader rounds (float formatting gives 0.41)
        return str(Decimal(printed).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))

    root = Path(__file__).resolve().parents[2]
    bench = (root / "lab" / "assets" / "smollm2-135m" / "bench.md").read_text()
    readme = " ".join((root / "README.md").read_text().split("### The Shakespeare pair")[0].split())
    measured = {}  # (kind, bench method) -> its table row's cells
    for block in bench.split("\npair smollm2-135m on cpu")[1:]:
        kind = re.search(r"3 (chat|code|structured|copy/edit) prompts", block).group(1)
        for line in block.splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if line.startswith("| ") and len(cells) == 7 and cells[0] not in ("method", "---"):
                measured[kind, cells[0]] = cells
    kinds = ("chat", "code", "structured", "copy/edit")
    for row, method in README_ROWS.items():
        expected = []
        for kind in kinds:
            _, _, speedup, _, _, alpha, per_call = measured[kind, method]
            shown = f"{two(speedup)}×"
            if alpha:
                shown += f" ({two(alpha)}, {two(per_call)})"
            expected.append(shown)
        assert f"| {row} | " + " | ".join(expected) + " |" in readme, (row, expected)
    goals = re.findall(r"^- \[( |x)\] (.*): ([0-9.]+) \(goal", bench, flags=re.M)
    assert len(goals) == 10
    for mark, _, number in goals:  # each goal's number is quoted; the met ones before "Not met:", the others after
        met_part, missed_part = readme.split("**Goal lines of this run**")[1].split("**What the run shows.**")[0] \
            .split("Not met:")
        assert number.rstrip("0").rstrip(".") in (met_part if mark == "x" else missed_part) or \
            f"{float(number):.3f}".rstrip("0") in (met_part if mark == "x" else missed_part), (mark, number)
