"""Parallel (PARD) drafting (method "parallel") in lab.picker: picked where a draft model would be, latency-bound,
when a PARD draft of the target's family exists; never under load (N = 1 leaves it nothing to save); the published
range and this course's own measurement behind it; and every engine's setting, each checked against the pinned
engine sources (an engine without a PARD drafter runs the draft as an ordinary draft model and says so)."""
import ast
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from lab import cli, picker
from lab.picker import recommend
from lab.picker.tables import (PARALLEL_MEASURED, PARALLEL_MEASURED_REAL, PARD_CHAT_SPEEDUPS, PARD_VLLM_TABLE,
                               STRATEGY_BY_METHOD)
from tests.lab.picker.engine_sources import (VLLM_FILE, llamacpp_source, sglang_source, transformers_generate_keys,
                                             trtllm_source, vllm_source)
from tests.lab.picker.helpers import all_recommendations

ROOT = Path(__file__).resolve().parents[3]
CARD = ROOT / "lab" / "assets" / "shakespeare" / "parallel"
REAL_CARD = ROOT / "lab" / "assets" / "smollm2-135m" / "parallel"


def pard(task="chat", temperature=0.0, small=True, finetune=False, **kwargs):
    return recommend(task, temperature, small, finetune, has_parallel_draft=True, **kwargs)


# --- the row and its numbers ------------------------------------------------------------------------------------------
def test_the_parallel_row_is_the_pard_authors_mt_bench_range():
    row = STRATEGY_BY_METHOD["parallel"]
    assert PARD_CHAT_SPEEDUPS == (2.52, 2.70, 2.72) and row.speedup == (2.52, 2.72)
    assert row.source.startswith("An et al. 2025, PARD (arXiv 2504.18583)") and "MT-Bench" in row.source
    # in the authors' own runs PARD led EAGLE-3 on every target and benchmark
    assert all(par > eagle for bench in PARD_VLLM_TABLE.values() for par, eagle in bench.values())
    assert picker.METHOD_LABELS["parallel"] == "parallel (PARD) draft model"
    from lab.picker.decision import OBSTACLES
    from lab.picker.tables import SETUP_ORDER

    assert "no_parallel_draft" in OBSTACLES
    # a model adapted from a draft you have, once per family: after the draft model, before per-target heads
    assert SETUP_ORDER.index("draft_model") < SETUP_ORDER.index("parallel") < SETUP_ORDER.index("medusa")
    # a draft model with one more embedding row: the same memory
    assert picker.MEMORY_NEEDED_GB["parallel"] == picker.MEMORY_NEEDED_GB["draft_model"] == 4.0


@pytest.mark.parametrize("table, card, faster", [(PARALLEL_MEASURED, CARD, False),
                                                 (PARALLEL_MEASURED_REAL, REAL_CARD, True)])
def test_the_measured_numbers_are_the_cards(table, card, faster):
    """Each pair's table is its card's: not faster than its autoregressive draft on the Shakespeare pair, faster at
    every N on the real pair."""
    measured = json.loads((card / "measurements.json").read_text(encoding="utf-8"))
    training = json.loads((card / "training.json").read_text(encoding="utf-8"))
    assert table["pair"] == card.parent.name
    for k, (par, ar) in table["draft_ms_per_step"].items():
        step = measured["draft_step_ms"][str(k)]
        assert (par, ar) == (round(step["parallel"], 2), round(step["autoregressive"], 2))
    for k in (2, 3, 4):
        run = measured["greedy_decoding"][str(k)]
        # to the card's two decimals (its 1.11 is 1.105 rounded half up)
        assert table["speedup"][k] == pytest.approx((run["parallel"]["speedup"], run["model"]["speedup"]),
                                                    abs=0.0051)
        assert table["tokens_per_target_call"][k] == (round(run["parallel"]["tokens_per_target_call"], 2),
                                                       round(run["model"]["tokens_per_target_call"], 2))
        assert (run["parallel"]["speedup"] > run["model"]["speedup"]) == faster
    agreement = training["held_out_agreement"]
    assert table["agreement"] == tuple(round(agreement[f"position_{i}"], 2) for i in range(1, 5))


# --- when it wins ---------------------------------------------------------------------------------------------------
def test_parallel_replaces_the_draft_model_where_one_is_served():
    for task, greedy_n, sampled_n in (("chat", 5, 4), ("long_text", 4, 3)):
        greedy, sampled = pard(task), pard(task, 0.6)
        assert (greedy.method, greedy.n_draft, greedy.draft_temperature) == ("parallel", greedy_n, 0.0)
        assert (sampled.method, sampled.n_draft, sampled.draft_temperature) == ("parallel", sampled_n, 0.6)
        assert greedy.expected_speedup == (2.52, 2.72)
        assert greedy.source == STRATEGY_BY_METHOD["parallel"].source + ', row "Parallel draft (PARD)"'
        assert recommend(task, 0.0, True, False).method == "draft_model"  # the same team without a PARD draft
    text = " ".join(pard("chat").reasons)
    assert "one forward instead of N sequential ones" in text and "above the 2–2.5× of a vanilla draft model" in text
    # the course's counter-example is quoted with its numbers: a tiny draft, not faster than its AR draft
    assert "3.16 to 1.30 ms per step at N = 4" in text and "1.11–1.22× at N = 2–4" in text
    assert "autoregressive draft's 1.14–1.46×" in text and "0.56 / 0.24 / 0.18 / 0.16" in text
    assert any("draft_sample_method = \"probabilistic\"" in r for r in pard("chat", 0.6).reasons)
    assert any(r.startswith("its acceptance from the second position on") for r in pard("chat").revisit)


def test_parallel_against_the_other_drafters():
    # 2.52–2.72× (middle 2.62) ranks above Medusa's 2–3× and the target's MTP modules' 1.8×, below EAGLE's 3–4×
    assert pard("chat", finetune=True, exclude=("eagle",)).method == "parallel"
    assert pard("chat", small=False, target_has_mtp=True).method == "parallel"
    eagle = pard("chat", finetune=True)
    assert eagle.method == "eagle"
    assert any(r.startswith("A parallel (PARD) draft was a candidate too (2.52–2.72×") for r in eagle.reasons)
    # code and JSON keep prompt lookup (the draft model is not their row's method); a fallback once it is ruled out
    for task in ("code", "structured", "copy_edit"):
        assert pard(task).method == "ngram"
    assert pard("agent").method == "suffix"
    assert pard("code", exclude=("ngram", "lookahead")).method == "parallel"
    assert recommend("code", 0.0, True, False, exclude=("ngram", "lookahead")).method == "draft_model"


def test_parallel_does_not_win_when_it_should_not():
    # under load: N = 1 is one forward either way, so EAGLE or nothing, and the reasons say why
    load = pard("chat", finetune=True, latency_bound=False)
    assert (load.method, load.n_draft) == ("eagle", 1)
    assert any(r.startswith("The parallel (PARD) draft is not used under load") for r in load.reasons)
    assert pard("chat", latency_bound=False).method == "none"
    assert not any("PARD" in r for r in recommend("chat", 0.0, True, True, latency_bound=False).reasons)
    assert pard("chat", 1.3).method == "none"  # too hot for any method
    assert pard("chat", exclude=("parallel",)).method == "draft_model"
    assert pard("chat", memory_headroom_gb=2.0).method == "ngram"  # ~4 GB for a 1B draft and its cache
    # can_finetune is about heads on the target; it does not make a PARD draft appear
    assert recommend("chat", 0.0, True, True, exclude=("eagle", "medusa")).method == "draft_model"


def test_a_none_that_a_pard_draft_would_lift_says_so():
    none = recommend("chat", 0.0, False, False, exclude=("ngram", "lookahead"))
    assert none.method == "none"
    assert any(r.startswith("a parallel (PARD) draft of the target's family becomes available") for r in none.revisit)
    under_load = recommend("chat", 0.0, False, False, latency_bound=False)
    assert not any("PARD" in r for r in under_load.revisit)  # it would not lift a verdict made under load


def test_every_parallel_recommendation_is_feasible():
    seen = 0
    for rec in all_recommendations():
        w = rec.workload
        if rec.method == "parallel":
            seen += 1
            assert w["has_parallel_draft"] and "parallel" not in w["exclude"] and w["latency_bound"]
            assert w["task"] in ("chat", "long_text") or w["exclude"]  # elsewhere only as a fallback
            assert rec.draft_temperature == rec.temperature
            assert w["memory_headroom_gb"] is None or w["memory_headroom_gb"] >= picker.MEMORY_NEEDED_GB["parallel"]
        if not w["has_parallel_draft"]:
            assert rec.method != "parallel"
    assert seen > 20


# --- every engine -----------------------------------------------------------------------------------------------------
def test_each_engine_gets_its_pard_setting_or_the_nearest():
    rec = pard("chat")
    # vLLM 0.34.0: no PARD drafter; the PARD draft runs as a draft model
    assert rec.vllm_config() == {"method": "draft_model", "model": "<same-family draft model>",
                                 "num_speculative_tokens": 5}
    assert rec.vllm_config(draft_model="amd/PARD-Llama-3.2-1B")["model"] == "amd/PARD-Llama-3.2-1B"
    # SGLang 0.5.23: STANDALONE with the chain flags
    assert rec.sglang_args("org/pard") == ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path",
                                           "org/pard", "--speculative-num-steps", "5", "--speculative-eagle-topk", "1",
                                           "--speculative-num-draft-tokens", "6"]
    # TensorRT-LLM: its own PARD decoding type; the mask token id is read from the draft's config
    assert rec.trtllm_config() == {"decoding_type": "PARD", "max_draft_len": 5,
                                   "speculative_model": "<PARD draft for the target's family>"}
    assert yaml.safe_load(rec.trtllm_yaml("org/pard")) == {"speculative_config": {
        "decoding_type": "PARD", "max_draft_len": 5, "speculative_model": "org/pard"}}
    # llama.cpp: no PARD type; draft-simple
    assert rec.llamacpp_args("pard.gguf") == ["--spec-type", "draft-simple", "--spec-draft-model", "pard.gguf",
                                              "--spec-draft-n-max", "5"]
    # transformers: the PARD draft as the assistant, N through its generation config
    assert rec.hf_kwargs(assistant_model="A") == {"do_sample": False, "assistant_model": "A"}
    assert rec.hf_assistant_config()["num_assistant_tokens"] == 5
    ast.parse(rec.hf_snippet())
    assert [getattr(rec, f"{e}_method")() for e in ("vllm", "sglang", "trtllm", "llamacpp")] == \
        ["draft_model", "draft_model", "parallel", "draft_model"]
    notes = " ".join(rec.engine_notes())
    for text in ("vLLM 0.34.0 has no PARD drafter", "SGLang 0.5.23 has no PARD drafter", "llama.cpp has no PARD",
                 "transformers has no parallel drafter"):
        assert text in notes
    assert "TensorRT-LLM" not in notes  # it serves PARD itself
    # this course: the committed parallel draft, exported by lab.drafters
    assert rec.lab_drafter() == "ParallelDrafter.from_pretrained(pair, n_draft=5)"
    assert "from lab.drafters import ParallelDrafter" in rec.to_markdown()
    exported = ast.literal_eval(next(node.value for node in ast.parse(
        (ROOT / "lab" / "drafters" / "__init__.py").read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__"))
    assert "ParallelDrafter" in exported
    data = json.loads(json.dumps(rec.to_dict()))
    assert data["workload"]["has_parallel_draft"] is True and data["trtllm_config"]["decoding_type"] == "PARD"
    assert "parallel (PARD) draft of the family: yes" in rec.summary()
    assert "PARD" not in recommend("chat", 0.0, True, False).summary()


def test_pard_settings_are_the_engines_own_names():
    """Read from the pinned sources: only TensorRT-LLM has a PARD config; vLLM's parallel_drafting is for DFlash and
    DSpark only; SGLang and llama.cpp name no PARD drafter."""
    rec = pard("long_text", 0.5)
    config = rec.vllm_config()
    assert config["method"] in vllm_source().methods and set(config) <= vllm_source().keys
    assert "parallel_drafting" in vllm_source().keys and "parallel_drafting" not in config
    assert not {m for m in vllm_source().methods if "pard" in m or "parallel" in m}
    vllm_text = VLLM_FILE.read_text(encoding="utf-8")
    assert 'self.parallel_drafting and self.method not in ("dflash", "dspark")' in vllm_text
    assert "parallel_drafting is deprecated and has no effect" in vllm_text
    assert not {a for a in sglang_source().algorithms if "PARD" in a or "PARALLEL" in a}
    assert set(a for a in rec.sglang_args() if a.startswith("--")) <= sglang_source().flags
    fields = trtllm_source().fields["PARD"]
    assert picker.TRTLLM_DECODING_TYPES["parallel"] == "PARD"
    assert set(rec.trtllm_config()) <= fields and "mask_token_id" in fields
    assert not {t for t in llamacpp_source().spec_types if "pard" in t or "parallel" in t}
    assert set(a for a in rec.llamacpp_args() if a.startswith("-")) <= llamacpp_source().flags
    keys = transformers_generate_keys()
    assert set(rec.hf_kwargs()) <= keys and not {k for k in keys if "pard" in k or "parallel" in k}


# --- the input --------------------------------------------------------------------------------------------------------
def test_has_parallel_draft_is_checked_and_defaults_to_false(capsys):
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="has_parallel_draft must be True or False"):
            recommend("chat", 0.0, True, False, has_parallel_draft=bad)
    assert recommend("chat", 0.0, True, False, has_parallel_draft=np.bool_(True)).method == "parallel"
    assert recommend("chat", 0.0, True, False).workload["has_parallel_draft"] is False
    parser = cli.build_parser()
    assert parser.parse_args(["pick", "--task", "chat"]).has_parallel_draft is False
    assert parser.parse_args(["pick", "--task", "chat", "--parallel-draft"]).has_parallel_draft is True
    assert cli.main(["pick", "--task", "chat", "--small-model", "--parallel-draft"]) == 0
    out = capsys.readouterr().out
    assert "(parallel)" in out and "decoding_type: PARD" in out
