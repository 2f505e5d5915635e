"""The target's own multi-token-prediction modules (method "mtp") in lab.picker: picked when and only when the target
ships them and they rank first, at N = 1, under load before EAGLE; every engine's setting for them; the published
range and its source; memory; and the input that turns them on (target_has_mtp)."""
import ast
import json
from pathlib import Path

import pytest
import yaml

from lab import picker
from lab.picker import recommend
from lab.picker.tables import MTP_ACCEPTANCE, MTP_N, MTP_REPORT, MTP_SPEEDUP, STRATEGY_BY_METHOD
from tests.lab.picker.engine_sources import (llamacpp_source, sglang_source, transformers_generate_keys,
                                             trtllm_source, vllm_source)
from tests.lab.picker.helpers import all_recommendations

ROOT = Path(__file__).resolve().parents[3]
SCHEDULE = [[1, 262, 1], [263, 512, 0]]  # lesson 13's N = 1 schedule (test_rules holds it to the roofline model)


def mtp(task="chat", temperature=0.0, small=False, finetune=False, **kwargs):
    return recommend(task, temperature, small, finetune, target_has_mtp=True, **kwargs)


# --- the row and its numbers ------------------------------------------------------------------------------------------
def test_the_mtp_row_is_the_deepseek_v3_report_not_a_seed():
    row = STRATEGY_BY_METHOD["mtp"]
    assert row.speedup == (1.8, 1.8) and MTP_SPEEDUP == 1.8 and MTP_ACCEPTANCE == (0.85, 0.90) and MTP_N == 1
    assert row.source.startswith("DeepSeek-V3 technical report (arXiv 2412.19437), §5.4.3")
    assert "85–90 %" in row.source and not row.source.startswith("seed lesson")
    assert MTP_REPORT in row.source
    assert "mtp" in picker.METHODS and picker.METHOD_LABELS["mtp"] == "the target's MTP modules"
    from lab.picker.decision import OBSTACLES
    from lab.picker.tables import SETUP_ORDER

    assert "no_mtp" in OBSTACLES
    # nothing to set up: after the draft-free methods, before anything you must have or train
    assert SETUP_ORDER.index("lookahead") < SETUP_ORDER.index("mtp") < SETUP_ORDER.index("draft_model")


def test_one_mtp_module_weighs_what_an_eagle_1_2_head_does():
    assert picker.MEMORY_PARAMS["mtp"] == picker.MEMORY_PARAMS["eagle"] == 251_658_240
    assert picker.MEMORY_NEEDED_GB["mtp"] == pytest.approx(2 * 2 * 251_658_240 / 1e9, abs=0.01) == 1.01


# --- when the rules pick it -------------------------------------------------------------------------------------------
def test_mtp_is_picked_only_when_the_target_ships_it():
    rec = mtp("chat")
    assert (rec.method, rec.n_draft, rec.draft_temperature, rec.expected_speedup) == ("mtp", 1, 0.0, (1.8, 1.8))
    assert rec.source == STRATEGY_BY_METHOD["mtp"].source + ', row "MTP modules of the target"'
    assert rec.speedup_text() == "1.8×"
    assert recommend("chat", 0.0, False, False).method == "ngram"  # the same team, a target without modules
    # code: 1.8× beats the code row's prompt lookup (1.5–2×, middle 1.75); JSON's 2–3× beats MTP
    assert mtp("code").method == "mtp" and recommend("code", 0.0, False, False).method == "ngram"
    assert mtp("structured").method == "ngram"
    # higher-ranked methods keep their place, and say that MTP was considered
    for small, finetune, method in ((True, False, "draft_model"), (False, True, "eagle"), (True, True, "eagle")):
        rec = mtp("chat", small=small, finetune=finetune)
        assert rec.method == method
        assert any(r.startswith("The target's own MTP modules were a candidate too (1.8× at N = 1")
                   for r in rec.reasons)
    assert mtp("chat", finetune=True, exclude=("eagle",)).method == "medusa"  # 2–3× above 1.8×
    # excluded, or without room for one module and its cache (~1.01 GB)
    assert mtp("chat", exclude=("mtp",)).method == "ngram"
    assert mtp("chat", memory_headroom_gb=0.5).method == "ngram"
    assert mtp("chat", memory_headroom_gb=2.0).method == "mtp"


def test_copy_edit_and_agent_keep_their_defaults():
    for small, finetune in ((False, False), (True, True)):
        assert mtp("copy_edit", small=small, finetune=finetune).method == "ngram"
        assert mtp("agent", small=small, finetune=finetune).method == "suffix"
    # their default ruled out, MTP is a fallback: above Lookahead (1.3–1.6×), below a draft model (1.8–2.3×)
    assert mtp("copy_edit", exclude=("ngram",)).method == "mtp"
    assert mtp("copy_edit", small=True, exclude=("ngram",)).method == "draft_model"
    assert recommend("copy_edit", 0.0, False, False, exclude=("ngram",)).method == "lookahead"


def test_under_load_mtp_at_n_1_comes_before_eagle():
    rec = mtp("chat", finetune=True, latency_bound=False)
    assert (rec.method, rec.n_draft, rec.expected_speedup) == ("mtp", 1, (1.0, 1.8))
    assert rec.vllm_config() == {"method": "mtp", "num_speculative_tokens": 1,
                                 "num_speculative_tokens_per_batch_size": SCHEDULE}
    assert rec.trtllm_config() == {"decoding_type": "MTP", "max_draft_len": 1, "draft_len_schedule": {262: 1}}
    assert rec.source.startswith(MTP_REPORT) and "0.89× there without it" in rec.source
    text = " ".join(rec.reasons)
    assert "first exception" in text and "85–90 %" in text and "from a batch of 263 sequences" in text
    assert "to the report's 1.8×" in text
    # without the modules: EAGLE as before; with them excluded and no head to train: nothing, and it says why
    assert recommend("chat", 0.0, False, True, latency_bound=False).method == "eagle"
    assert mtp("chat", finetune=True, latency_bound=False, exclude=("mtp",)).method == "eagle"
    none = mtp("chat", latency_bound=False, exclude=("mtp",))
    assert none.method == "none"
    assert any(r.startswith("Nor are the target's own MTP modules") and "(exclude)" in r for r in none.reasons)
    # a "none" under load that MTP modules would lift says so (lifts() asks the rules again with target_has_mtp)
    plain = recommend("chat", 0.0, False, False, latency_bound=False)
    assert plain.method == "none"
    assert any(r.startswith("you serve a target whose checkpoint ships MTP modules") and "under load" in r
               for r in plain.revisit)
    assert not any("MTP" in r for r in mtp("chat", latency_bound=False).revisit if r.startswith("you serve"))


def test_too_hot_is_still_none():
    for latency in (True, False):
        rec = mtp("chat", 1.3, latency_bound=latency)
        assert rec.method == "none" and rec.vllm_config() == {}


def test_mtp_drafts_at_the_target_temperature():
    greedy, sampled = mtp("chat"), mtp("chat", 0.6)
    assert greedy.draft_temperature == 0.0 and "draft_sample_method" not in greedy.vllm_config()
    assert sampled.draft_temperature == 0.6 and sampled.n_draft == 1
    assert sampled.vllm_config() == {"method": "mtp", "num_speculative_tokens": 1,
                                     "draft_sample_method": "probabilistic"}
    assert sampled.hf_kwargs() == {"do_sample": True, "temperature": 0.6, "use_mtp": True}
    assert any("draft_sample_method = \"probabilistic\"" in r for r in sampled.reasons)


def test_every_mtp_recommendation_is_feasible():
    seen = 0
    for rec in all_recommendations():
        w = rec.workload
        if rec.method == "mtp":
            seen += 1
            assert w["target_has_mtp"] and "mtp" not in w["exclude"] and rec.n_draft == MTP_N
            # for copy/edit and agent loops only as a fallback, or under load (rule 2 does not look at the task)
            assert w["task"] not in ("copy_edit", "agent") or w["exclude"] or not w["latency_bound"]
            assert rec.draft_temperature == rec.temperature
            assert w["memory_headroom_gb"] is None or w["memory_headroom_gb"] >= picker.MEMORY_NEEDED_GB["mtp"]
        if not w["target_has_mtp"]:
            assert rec.method != "mtp"
    assert seen > 100


# --- every engine -----------------------------------------------------------------------------------------------------
def test_each_engine_gets_the_targets_own_modules():
    rec = mtp("chat")
    # vLLM: "mtp", no model (the draft is the target's checkpoint); a draft model given is ignored
    assert rec.vllm_config() == rec.vllm_config(draft_model="org/d") == {"method": "mtp", "num_speculative_tokens": 1}
    assert rec.vllm_config(draft_tensor_parallel_size=1)["draft_tensor_parallel_size"] == 1
    # SGLang: NEXTN with the chain flags of its DeepSeek MTP example (steps N, top-k 1, N + 1 draft tokens)
    assert rec.sglang_args() == rec.sglang_args("org/d") == [
        "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "2"]
    # TensorRT-LLM: MTP, max_draft_len only (num_nextn_predict_layers is init=False at the pinned commit)
    assert rec.trtllm_config() == rec.trtllm_config("org/d") == {"decoding_type": "MTP", "max_draft_len": 1}
    assert yaml.safe_load(rec.trtllm_yaml()) == {"speculative_config": {"decoding_type": "MTP", "max_draft_len": 1}}
    # llama.cpp: draft-mtp with the draft length, no draft model
    assert rec.llamacpp_args() == rec.llamacpp_args("d.gguf") == ["--spec-type", "draft-mtp", "--spec-draft-n-max", "1"]
    # transformers: use_mtp, no assistant; the snippet is valid Python
    assert rec.hf_kwargs() == {"do_sample": False, "use_mtp": True} and rec.hf_assistant_config() == {}
    snippet = rec.hf_snippet("deepseek-ai/DeepSeek-V3")
    ast.parse(snippet)
    assert "use_mtp=True" in snippet and "assistant" not in snippet
    # this course: the committed MTP heads
    assert rec.lab_drafter() == "MTPDrafter.from_pretrained(pair, n_draft=1)"
    assert "from lab.drafters import MTPDrafter" in rec.to_markdown()
    exported = ast.literal_eval(next(node.value for node in ast.parse(
        (ROOT / "lab" / "drafters" / "__init__.py").read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__"))
    assert "MTPDrafter" in exported
    for engine in ("vllm", "sglang", "trtllm", "llamacpp"):
        assert getattr(rec, f"{engine}_method")() == "mtp"
    notes = " ".join(rec.engine_notes())
    assert "reserved alias of its EAGLE algorithm" in notes and "runs a module again" in notes
    assert "num_mtp_layers" in notes
    data = json.loads(json.dumps(rec.to_dict()))
    assert data["workload"]["target_has_mtp"] is True and data["sglang_args"][1] == "NEXTN"
    assert "target ships MTP modules: yes" in rec.summary()
    assert "target ships MTP modules: no" in recommend("chat", 0.0, True, False).summary()


def test_mtp_settings_are_the_engines_own_names():
    """The names MTP renders, read from the pinned engine sources (the every-recommendation tests in
    test_engine_sources.py also cover every MTP workload through tests/lab/picker/helpers.py)."""
    rec = mtp("code", 0.5, latency_bound=True)
    assert rec.method == "mtp"
    assert rec.vllm_config()["method"] in vllm_source().methods and set(rec.vllm_config()) <= vllm_source().keys
    assert {"mtp", "deepseek_mtp", "qwen3_next_mtp", "mimo_mtp", "glm4_moe_mtp"} <= vllm_source().methods
    assert picker.SGLANG_ALGORITHMS["mtp"] == "NEXTN" and "NEXTN" in sglang_source().algorithms
    assert set(a for a in rec.sglang_args() if a.startswith("--")) <= sglang_source().flags
    fields = trtllm_source().fields["MTP"]
    assert set(rec.trtllm_config()) <= fields and "num_nextn_predict_layers" not in fields
    assert picker.LLAMACPP_SPEC_TYPES["mtp"] == "draft-mtp" and "draft-mtp" in llamacpp_source().spec_types
    assert set(a for a in rec.llamacpp_args() if a.startswith("-")) <= llamacpp_source().flags
    assert "use_mtp" in transformers_generate_keys()


# --- the input --------------------------------------------------------------------------------------------------------
def test_target_has_mtp_is_checked_and_defaults_to_false():
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="target_has_mtp must be True or False"):
            recommend("chat", 0.0, False, False, target_has_mtp=bad)
    import numpy as np

    assert recommend("chat", 0.0, False, False, target_has_mtp=np.bool_(True)).workload["target_has_mtp"] is True
    assert recommend("chat", 0.0, False, False).workload["target_has_mtp"] is False
    rec = mtp("chat", exclude=("mtp", "ngram", "lookahead"))
    assert rec.method == "none" and rec.workload["exclude"] == ["mtp", "lookahead", "ngram"]
    assert any("a method you excluded (mtp, lookahead, ngram)" in r for r in rec.revisit)


def test_mtp_against_prompt_lookup_on_code_is_a_point_inside_a_range():
    # the report's one 1.8× lies inside the code row's 1.5–2×: "above" that range would overstate the gap
    reason = next(r for r in mtp("code").reasons if r.startswith("The target's checkpoint ships MTP modules"))
    assert "inside the 1.5–2× of n-gram prompt lookup and above that range's middle (1.75×)" in reason, reason
    assert "the two overlap" in reason and "above the 1.5–2×" not in reason, reason
