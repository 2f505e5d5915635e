"""lab.picker.substitutes and what each engine serves: a substitute honours exclude and the memory headroom (an engine
with every substitute ruled out renders nothing and says why), and the summary quotes the speedup of what each engine
serves, not only of the method recommended."""
from __future__ import annotations

import json

import pytest

from lab.picker import ARENA_CHAT_SPEEDUPS, recommend
from lab.picker.engines import served_methods
from lab.picker.substitutes import SUBSTITUTES, nearest_method
from lab.picker.tables import WORKLOAD_BY_TASK
from tests.lab.picker.helpers import all_recommendations

ENGINES = ("vllm", "sglang", "trtllm", "llamacpp", "transformers")
LOOKUP = ARENA_CHAT_SPEEDUPS[("ngram", 1)], ARENA_CHAT_SPEEDUPS[("ngram", 0)]  # lower first on the committed run


def rendered(rec) -> str:
    """Every engine's settings for ``rec``, as one JSON text (what a reader would copy)."""
    return json.dumps([rec.vllm_config(), rec.sglang_args(), rec.trtllm_config(), rec.llamacpp_args(),
                       rec.hf_kwargs(), rec.hf_assistant_config()])


def test_nearest_method_skips_what_the_workload_rules_out():
    native = {"draft_model", "ngram"}
    workload = {"has_small_same_family_model": True, "exclude": [], "memory_headroom_gb": None}
    assert nearest_method("medusa", native, workload) == "draft_model"
    assert nearest_method("medusa", native, {**workload, "exclude": ["draft_model"]}) == "ngram"
    assert nearest_method("medusa", native, {**workload, "memory_headroom_gb": 3.9}) == "ngram"  # a draft needs 4 GB
    assert nearest_method("medusa", native, {**workload, "has_small_same_family_model": False}) == "ngram"
    assert nearest_method("medusa", native, {**workload, "exclude": ["draft_model", "ngram"]}) == "none"
    assert nearest_method("lookahead", native, {**workload, "exclude": ["ngram"]}) == "none"
    # a PARD draft is its own draft model: no small model needed to run it as one
    assert nearest_method("parallel", native, {**workload, "has_small_same_family_model": False}) == "draft_model"
    assert nearest_method("medusa", {"medusa"}, {**workload, "exclude": ["ngram"]}) == "medusa"  # native: itself
    assert nearest_method("none", native, workload) == "none"


def test_excluded_prompt_lookup_is_not_rendered_for_lookahead():
    """The reviewer's repro: --task chat --exclude ngram recommends Lookahead, whose only substitute is prompt
    lookup; every engine rendered prompt lookup anyway."""
    rec = recommend("chat", 0.0, False, False, exclude=("ngram",))
    assert rec.method == "lookahead"
    assert rec.served() == dict.fromkeys(ENGINES, "none")
    assert rec.vllm_config() == {} and rec.sglang_args() == [] and rec.trtllm_config() == {}
    assert rec.llamacpp_args() == [] and rec.hf_kwargs() == {"do_sample": False}
    assert "ngram" not in rendered(rec).lower() and "prompt_lookup" not in rendered(rec)
    notes = rec.engine_notes()
    assert rec.notes[0].endswith("nor has transformers, and their nearest, prompt lookup, is ruled out here, so their "
                                 "settings serve the target alone. This course runs real Lookahead with "
                                 "LookaheadDrafter.")
    for engine in ("SGLang 0.5.23", "TensorRT-LLM", "llama.cpp"):
        assert f"{engine} has no drafter for Lookahead decoding, and what it would run instead (n-gram prompt " \
               "lookup) cannot run here: n-gram prompt lookup is ruled out (exclude). Its settings therefore leave " \
               "speculation off, and it serves the target alone." in notes
    assert "Expected speedup: 1.3–1.6× (this course's loop only)" in rec.summary()
    assert "As served: vLLM, SGLang, TensorRT-LLM, llama.cpp and transformers serve the target alone" in rec.summary()
    assert not any("serves the config below as prompt lookup" in r for r in rec.reasons)


def test_excluded_draft_model_is_not_rendered_for_medusa():
    """The reviewer's second repro: Medusa with a small model but draft_model excluded rendered the draft model in
    vLLM, SGLang, TensorRT-LLM and transformers."""
    rec = recommend("chat", 0.0, True, True, exclude=("eagle", "draft_model"))
    assert rec.method == "medusa"
    assert rec.served() == dict.fromkeys(ENGINES, "ngram")
    assert rec.vllm_config()["method"] == "ngram" and rec.sglang_args()[1] == "NGRAM"
    assert rec.trtllm_config()["decoding_type"] == "NGram" and rec.llamacpp_args()[1] == "ngram-simple"
    assert "assistant_model" not in rec.hf_kwargs() and rec.hf_kwargs()["prompt_lookup_num_tokens"] == 4
    assert "draft model>" not in rendered(rec) and "STANDALONE" not in rendered(rec)
    # without the exclusion the same workload gets the draft model everywhere
    assert recommend("chat", 0.0, True, True, exclude=("eagle",)).served() == dict.fromkeys(ENGINES, "draft_model")


def test_a_substitute_over_the_memory_headroom_is_not_rendered():
    """EAGLE fits 2 GB (1.01 GB); transformers' nearest, an assistant model, needs 4 GB: prompt lookup instead."""
    rec = recommend("chat", 0.0, True, True, memory_headroom_gb=2.0)
    assert rec.method == "eagle" and rec.hf_method() == "ngram"
    assert rec.hf_kwargs() == {"do_sample": False, "prompt_lookup_num_tokens": 5, "max_matching_ngram_size": 4}
    assert rec.hf_assistant_config() == {}
    assert recommend("chat", 0.0, True, True).hf_kwargs()["assistant_model"] == "<same-family draft model>"


def test_a_parallel_draft_falls_back_when_its_draft_model_form_is_excluded():
    rec = recommend("chat", 0.0, False, False, has_parallel_draft=True, exclude=("draft_model",))
    assert rec.method == "parallel"
    assert rec.served() == {"vllm": "ngram", "sglang": "ngram", "trtllm": "parallel", "llamacpp": "ngram",
                            "transformers": "ngram"}
    assert any("vLLM 0.34.0 has no drafter for a parallel (PARD) draft model, and the nearest it has cannot run here "
               "(a vanilla draft model is ruled out (exclude))" in n for n in rec.engine_notes())
    nothing = recommend("chat", 0.0, False, False, has_parallel_draft=True, exclude=("draft_model", "ngram"))
    assert nothing.vllm_config() == {} and nothing.trtllm_config()["decoding_type"] == "PARD"


def test_no_engine_ever_renders_an_excluded_or_unaffordable_method():
    for rec in all_recommendations():
        for engine, runs in rec.served().items():
            if runs in ("none", rec.method):
                continue
            assert runs in SUBSTITUTES[rec.method], (rec.method, engine, runs)
            assert runs not in rec.workload["exclude"], (rec.workload, engine)
            memory = rec.workload["memory_headroom_gb"]
            assert memory is None or runs == "ngram" or memory >= 4.0, (rec.workload, engine, runs)
        assert rec.served() == served_methods(rec.method, rec.workload)
        assert rec.vllm_method() == rec.served()["vllm"] and rec.hf_method() == rec.served()["transformers"]


# --- what is served, and its speedup -------------------------------------------------------------------------------
def test_the_headline_speedup_says_where_it_holds_and_what_the_engines_serve():
    """--task chat --can-finetune --exclude eagle: Medusa's 2–3× is this course's loop only; every engine serves
    prompt lookup, which lesson 12 measured at 1.03–1.08× on chat."""
    rec = recommend("chat", 0.0, False, True, exclude=("eagle",))
    assert rec.method == "medusa" and rec.expected_speedup == (2.0, 3.0)
    summary = rec.summary()
    assert "Expected speedup: 2–3× (this course's loop only) — source: seed lesson 000" in summary
    assert (f"As served: vLLM, SGLang, TensorRT-LLM, llama.cpp and transformers serve n-gram prompt lookup instead: "
            f"{LOOKUP[0]:g}–{LOOKUP[1]:g}× (source: lesson 12's committed arena") in summary
    assert rec.served_speedups()["vllm"][:2] == ("ngram", LOOKUP)
    data = json.loads(json.dumps(rec.to_dict()))
    assert data["served"] == dict.fromkeys(ENGINES, "ngram")
    assert data["served_speedup"]["sglang"]["expected_speedup"] == list(LOOKUP)
    assert "| as served | vLLM, SGLang, TensorRT-LLM, llama.cpp and transformers serve n-gram" in rec.to_markdown()
    # the memory lines are those of what is served: Medusa's 4.34 GB only for the course's loop
    memory = [r for r in rec.reasons if " GB " in r or "extra memory" in r]
    assert memory == [
        "This course's loop (Medusa heads): memory headroom not given: this assumes the extra ~4.34 GB fits "
        "(computed for a Llama 3 8B target in bfloat16); give it (memory_headroom_gb, or --memory-gb on the command "
        "line) to check.",
        "vLLM, SGLang, TensorRT-LLM, llama.cpp and transformers (n-gram prompt lookup): it needs no extra parameters "
        "and no extra memory."]


def test_a_parallel_draft_quotes_the_draft_model_figure_where_it_runs_as_one():
    rec = recommend("chat", 0.0, False, False, has_parallel_draft=True)
    assert rec.method == "parallel"
    chat = WORKLOAD_BY_TASK["chat"].speedup
    assert rec.speedup_where() == " (TensorRT-LLM and this course's loop)"
    assert rec.served_text() == (
        f"vLLM, SGLang, llama.cpp and transformers serve the PARD draft as a vanilla draft model (one forward per "
        f"drafted token): {chat[0]:g}–{chat[1]:g}× (source: seed lesson 002, production-settings table, row "
        "\"General chat\")")


@pytest.mark.parametrize("args", [("code", 0.0, False, False), ("chat", 0.7, True, False),
                                  ("chat", 0.0, False, False, False, None)])
def test_nothing_extra_is_printed_when_every_engine_serves_the_method(args):
    rec = recommend(*args, target_has_mtp=True) if len(args) == 6 else recommend(*args)  # the last: MTP under load
    assert rec.served_speedups() == {} and rec.served_text() == "" and rec.speedup_where() == ""
    assert "As served" not in rec.summary() and "| as served |" not in rec.to_markdown()


def test_under_load_a_substitute_is_not_given_a_latency_bound_figure():
    rec = recommend("chat", 0.0, False, True, latency_bound=False)  # EAGLE at N = 1; transformers has no EAGLE
    assert rec.method == "eagle"
    assert rec.served_speedups() == {"transformers": ("ngram", None, "not rated under load")}
    assert rec.served_text() == "transformers serves n-gram prompt lookup instead: not rated under load"
