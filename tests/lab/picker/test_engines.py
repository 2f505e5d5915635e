"""lab.picker.engines: the vLLM settings use only current SpeculativeConfig keys and values vLLM accepts; the
transformers settings are real generate arguments that run and match plain greedy decoding; the course's drafter."""
from __future__ import annotations

import copy
import json
import shlex

import numpy as np
import pytest

from lab import picker
from lab.picker import recommend
from tests.lab.picker.helpers import VLLM_DRAFT_SAMPLE_METHODS, VLLM_KEYS, VLLM_METHOD_VALUES, all_recommendations

# --- vLLM -------------------------------------------------------------------------------------------------------------


def test_vllm_config_uses_only_current_keys_and_methods():
    # the renderer's display lists are subsets of what the pinned vLLM source defines
    assert picker.VLLM_SPECULATIVE_KEYS <= VLLM_KEYS, picker.VLLM_SPECULATIVE_KEYS - VLLM_KEYS
    assert picker.VLLM_METHODS <= VLLM_METHOD_VALUES, picker.VLLM_METHODS - VLLM_METHOD_VALUES
    seen_keys, seen_methods = set(), set()
    for rec in all_recommendations():
        for config in (rec.vllm_config(), rec.vllm_config(draft_model="org/draft", draft_tensor_parallel_size=1)):
            assert set(config) <= VLLM_KEYS, set(config) - VLLM_KEYS
            seen_keys |= set(config)
            if config:
                assert config["method"] in VLLM_METHOD_VALUES and config["num_speculative_tokens"] == rec.n_draft
                seen_methods.add(config["method"])
                assert config.get("draft_sample_method", "greedy") in VLLM_DRAFT_SAMPLE_METHODS
                if config["method"] == "ngram":
                    assert 1 <= config["prompt_lookup_min"] <= config["prompt_lookup_max"]
                elif config["method"] == "mtp":  # the target's own checkpoint holds the modules
                    assert "model" not in config
                elif config["method"] != "suffix":  # suffix decoding needs no weights
                    assert config["model"]
    assert {"method", "model", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min",
            "draft_tensor_parallel_size", "draft_sample_method"} <= seen_keys
    assert seen_methods == {"ngram", "draft_model", "eagle3", "suffix", "mtp"}  # no Medusa in vLLM 0.34.0
    # None of the keys the seed lessons used (old vLLM) survive.
    assert not seen_keys & {"speculative_model", "ngram_prompt_lookup_max", "use_v2_block_manager",
                            "speculative_draft_tensor_parallel_size"}


def test_vllm_settings_per_method():
    rec = recommend("chat", 0.7, True, False)
    assert rec.vllm_config(draft_model="meta-llama/Llama-3.2-1B-Instruct") == {
        "method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 4,
        "draft_sample_method": "probabilistic"}
    assert "draft_sample_method" not in recommend("chat", 0.0, True, False).vllm_config()
    assert recommend("code", 0.0, False, False).vllm_config() == {
        "method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    lookahead = recommend("chat", 0.0, False, False, exclude=("ngram",))  # prompt lookup, its substitute, excluded
    assert lookahead.method == "lookahead" and lookahead.vllm_config() == {}
    assert any("Lookahead" in n for n in lookahead.notes)
    assert "draft_tensor_parallel_size" not in recommend("code", 0.0, False, False).vllm_config(
        draft_tensor_parallel_size=2, tensor_parallel_size=2)
    with pytest.raises(ValueError, match="draft_tensor_parallel_size"):
        rec.vllm_config(draft_tensor_parallel_size=0)
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        rec.vllm_command(tensor_parallel_size=0)


@pytest.mark.parametrize("method_args, tp, draft_tp, ok", [
    (("chat", 0.0, False, True), 4, 1, True),  # EAGLE head on one GPU beside a TP-4 target
    (("chat", 0.0, False, True), 4, 4, True),
    (("chat", 0.0, False, True), 4, 3, False),
    (("chat", 0.0, False, True), 4, 2, False),
    (("chat", 0.0, False, True), 1, 2, False),
    (("chat", 0.0, True, False), 4, 4, True),
    (("chat", 0.0, True, False), 4, 1, True),  # a draft model on one GPU: vLLM 0.34.0 allows it (older ones did not)
    (("chat", 0.0, True, False), 4, 2, False),
    (("chat", 0.0, True, False), 2, 3, False),
    (("code", 0.0, False, False), 4, 3, False),  # n-gram: the key is dropped, but 3 is still impossible
])
def test_draft_tensor_parallel_size_must_be_one_vllm_accepts(method_args, tp, draft_tp, ok):
    rec = recommend(*method_args)
    if ok:
        argv = shlex.split(rec.vllm_command("m", tensor_parallel_size=tp, draft_tensor_parallel_size=draft_tp))
        config = json.loads(argv[argv.index("--speculative-config") + 1])
        assert config.get("draft_tensor_parallel_size") == draft_tp
        assert rec.vllm_config(draft_tensor_parallel_size=draft_tp, tensor_parallel_size=tp) == config
        return
    with pytest.raises(ValueError) as info:
        rec.vllm_command("m", tensor_parallel_size=tp, draft_tensor_parallel_size=draft_tp)
    message = str(info.value)
    assert message.startswith("draft_tensor_parallel_size must") and f"({tp})" in message
    with pytest.raises(ValueError, match="draft_tensor_parallel_size"):
        rec.vllm_config(draft_tensor_parallel_size=draft_tp, tensor_parallel_size=tp)


def test_tensor_parallel_sizes_must_be_integers():
    rec = recommend("chat", 0.0, False, True)
    for bad in (0, -1, 2.0, True, "4", 1025, np.int64(10 ** 18), 10 ** 20):
        with pytest.raises(ValueError, match="tensor_parallel_size must be an integer from 1 to 1024"):
            rec.vllm_command("m", tensor_parallel_size=bad)
        with pytest.raises(ValueError, match="tensor_parallel_size must be an integer from 1 to 1024"):
            rec.sglang_command("m", tensor_parallel_size=bad)
        with pytest.raises(ValueError, match="draft_tensor_parallel_size must be an integer from 1 to 1024"):
            rec.vllm_config(draft_tensor_parallel_size=bad)
    assert "--tensor-parallel-size 1024" in rec.vllm_command("m", tensor_parallel_size=np.int64(1024))


def test_vllm_command_round_trips_through_the_shell():
    rec = recommend("chat", 0.5, True, True)
    command = rec.vllm_command("meta-llama/Llama-3.1-70B-Instruct", tensor_parallel_size=4,
                               draft_model="it's/a head", draft_tensor_parallel_size=1)
    argv = shlex.split(command)
    assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "4"
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config == rec.vllm_config(draft_model="it's/a head", draft_tensor_parallel_size=1)
    assert shlex.split(recommend("chat", 2.0, True, True).vllm_command("m")) == ["vllm", "serve", "m"]


def test_numpy_tensor_parallel_sizes_render_as_json():
    rec = recommend("chat", 0.0, True, True)
    config = json.loads(rec.vllm_json(draft_tensor_parallel_size=np.int64(4), tensor_parallel_size=np.int64(4)))
    assert config["draft_tensor_parallel_size"] == 4
    assert "--tensor-parallel-size 4" in rec.vllm_command(tensor_parallel_size=np.int64(4))


def test_vllm_command_states_the_draft_tensor_parallel_rule_it_applies():
    """1 or the target's size for every model-based method (vLLM 0.34.0's _verify_and_get_draft_tp), a draft model
    included: the docstring said a draft model needed the target's size, which the code (rightly) does not enforce."""
    from lab.picker.engines import EngineSettings

    doc = " ".join(EngineSettings.vllm_command.__doc__.split())
    assert "1 or ``tensor_parallel_size``, for every model-based method" in doc and "for ``draft_model``" not in doc
    rec = recommend("chat", 0.0, True, False)
    assert rec.vllm_config(draft_tensor_parallel_size=1, tensor_parallel_size=4)["draft_tensor_parallel_size"] == 1


# --- transformers -----------------------------------------------------------------------------------------------------
def test_transformers_citations_name_the_installed_release():
    """The transformers defaults the settings rely on (assistant_confidence_threshold 0.4, the "constant" schedule)
    were read from the installed release; its docstrings cite that release, so that an upgrade fails here first."""
    import transformers
    from transformers import GenerationConfig

    from lab.picker import engines
    from lab.picker.engines import TRANSFORMERS_CHECKED, EngineSettings

    assert transformers.__version__ == TRANSFORMERS_CHECKED == "5.25.0"
    defaults = GenerationConfig._get_default_generation_params()
    assert defaults["assistant_confidence_threshold"] == 0.4 and defaults["num_assistant_tokens_schedule"] == "constant"
    for doc in (engines.__doc__, EngineSettings.hf_kwargs.__doc__, EngineSettings.hf_assistant_config.__doc__):
        assert TRANSFORMERS_CHECKED in doc and "5.24" not in doc



def generation_config_keys() -> set:
    from transformers import GenerationConfig

    return set(GenerationConfig().to_dict())


def test_hf_kwargs_are_real_generate_arguments():
    import transformers

    assert transformers.__version__.startswith("5.")
    keys = generation_config_keys()
    for rec in all_recommendations():
        kwargs = rec.hf_kwargs()
        assert set(kwargs) <= keys | {"assistant_model"}, set(kwargs) - keys
        assert set(rec.hf_assistant_config()) <= keys
        assert kwargs["do_sample"] == (rec.temperature > 0)
        assert ("temperature" in kwargs) == (rec.temperature > 0)
        if rec.method == "draft_model":
            assert "assistant_model" in kwargs and rec.hf_assistant_config() == {
                "num_assistant_tokens": rec.n_draft, "num_assistant_tokens_schedule": "constant",
                "assistant_confidence_threshold": 0.0}
        if rec.method in ("ngram", "lookahead"):
            assert kwargs["prompt_lookup_num_tokens"] == rec.n_draft and "assistant_model" not in kwargs
        if rec.method == "none":
            assert set(kwargs) <= {"do_sample", "temperature"}


def test_hf_settings_run_in_transformers_and_match_plain_greedy(target, draft):
    """Greedy: assisted and prompt-lookup generation with the picker's settings give the plain greedy tokens."""
    import torch

    x = torch.tensor([[5, 6, 7, 5, 6, 7, 5, 6]], device=target.device)
    plain = target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=12, do_sample=False,
                            pad_token_id=0)
    saved = copy.deepcopy(draft.generation_config)  # the fixture is shared: put its config back afterwards
    try:
        for rec in (recommend("chat", 0.0, True, False), recommend("code", 0.0, False, False)):
            kwargs = rec.hf_kwargs(assistant_model=draft)
            for key, value in rec.hf_assistant_config().items():
                setattr(draft.generation_config, key, value)
            out = target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=12, pad_token_id=0, **kwargs)
            assert out.tolist() == plain.tolist(), rec.method
        assert draft.generation_config.num_assistant_tokens == 5
    finally:
        draft.generation_config = saved


def test_assistant_drafts_n_tokens_per_step_only_with_the_threshold_off(target, draft):
    """transformers 5.25.0 fills an unset assistant_confidence_threshold with 0.4 and stops drafting at the first token
    the assistant gives less probability than that; the picker's 0.0 keeps every draft at N."""
    import torch
    from transformers import GenerationConfig
    from transformers.generation import candidate_generator

    assert GenerationConfig._get_default_generation_params()["assistant_confidence_threshold"] == 0.4
    rec = recommend("chat", 0.0, True, False)
    lengths = []
    original = candidate_generator.AssistedCandidateGenerator.get_candidates

    def recording(self, input_ids, *args, **kwargs):  # later arguments differ between transformers 5.x releases
        out = original(self, input_ids, *args, **kwargs)
        lengths.append(out[0].shape[-1] - input_ids.shape[-1])
        return out

    x = torch.tensor([[5, 6, 7, 5, 6, 7, 5, 6]], device=target.device)
    runs = {}
    for label, settings in (("picker", rec.hf_assistant_config()),
                            ("no threshold", {k: v for k, v in rec.hf_assistant_config().items()
                                              if k != "assistant_confidence_threshold"})):
        assistant = copy.deepcopy(draft)
        for key, value in settings.items():
            setattr(assistant.generation_config, key, value)
        lengths.clear()
        candidate_generator.AssistedCandidateGenerator.get_candidates = recording
        try:
            target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=24, pad_token_id=0,
                            **rec.hf_kwargs(assistant_model=assistant))
        finally:
            candidate_generator.AssistedCandidateGenerator.get_candidates = original
        runs[label] = list(lengths)
    n = rec.n_draft
    assert runs["picker"][:5] == [n] * 5 and runs["picker"].count(n) >= len(runs["picker"]) // 2, runs
    assert max(runs["no threshold"]) < n, runs  # the default cut every draft short here


# transformers' prompt lookup matches n-grams up to prompt_lookup_max = 4 tokens (seed lesson 002).
def test_hf_kwargs_for_prompt_lookup():
    rec = recommend("code", 0.0, False, False)
    assert rec.method == "ngram"
    assert rec.hf_kwargs() == {"do_sample": False, "prompt_lookup_num_tokens": 5, "max_matching_ngram_size": 4}
    assert recommend("code", 0.8, False, False).hf_kwargs() == {
        "do_sample": True, "temperature": 0.8, "prompt_lookup_num_tokens": 3, "max_matching_ngram_size": 4}


# --- this course ------------------------------------------------------------------------------------------------------


def test_lab_drafter_and_guide_snippet_run_as_written():
    rec = recommend("structured", 0.0, False, True)
    assert rec.method == "eagle" and rec.n_draft == 7
    assert rec.lab_drafter() == "EagleDrafter.from_pretrained(pair, n_draft=7)"
    snippet = rec.to_markdown().split("## Try it in this course")[1].split("```python")[1].split("```")[0]
    assert "pair = load_pair()" in snippet  # the course's default, real pair
    assert f"prompt_ids = pair.encode_chat({picker.tables.TASK_EXAMPLES['structured']!r})" in snippet
    agent = recommend("agent", 0.0, False, False)
    assert agent.method == "suffix"
    snippet = agent.to_markdown().split("## Try it in this course")[1]
    assert "SuffixDecodingDrafter(prompt_outputs=lambda ids: assistant_turns(pair, ids))" in snippet
    assert 'conversation_requests("agent")[-1]' in snippet


def test_every_guide_snippet_runs_on_the_real_pair(smollm2_pair, monkeypatch, capsys):
    """The decision guide's "Try it in this course" code, one per method the picker recommends: run as written (on
    the float32 pair the tests load, 8 tokens instead of 128), a greedy one writes the target's own tokens."""
    import lab.models
    from lab.decode import generate
    from lab.picker.recommendation import Recommendation
    from lab.prompts import conversation_requests
    from tests.lab.picker.helpers import suffix_recommendations

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: smollm2_pair)
    snippets = {}
    lookahead = Recommendation("lookahead", 4, 0.0, 0.0, workload={**all_recommendations()[0].workload, "task": "code",
                                                                    "temperature": 0.0})  # picked with ngram excluded
    for rec in all_recommendations() + suffix_recommendations() + (lookahead,):
        if rec.lab_drafter() and (rec.method, rec.temperature == 0) not in snippets:
            snippets[rec.method, rec.temperature == 0] = (rec, rec.to_markdown().split("## Try it in this course")[1]
                                                          .split("```python")[1].split("```")[0])
    assert {method for method, _ in snippets} == {"draft_model", "ngram", "lookahead", "medusa", "eagle", "suffix",
                                                  "mtp", "parallel"}
    assert snippets["suffix", True][0].workload["task"] == "agent"  # an agent loop, with its earlier answers
    for (method, greedy), (rec, snippet) in snippets.items():
        assert snippet.count("max_new_tokens=128") == 1
        scope = {}
        exec(snippet.replace("max_new_tokens=128", "max_new_tokens=8"), scope)
        printed = capsys.readouterr().out.splitlines()
        run, pair = scope["run"], scope["pair"]
        assert printed[-1] == f"{run.stats['acceptance_rate']} {run.stats['tokens_per_target_call']}", method
        assert 1 <= len(run.tokens) <= 8 and len(run.steps) >= 2, method
        task = rec.workload["task"]
        request = conversation_requests("agent")[-1] if task == "agent" else picker.tables.TASK_EXAMPLES[task]
        assert scope["prompt_ids"] == pair.encode_chat(request), method
        assert "\n".join(printed[:-1]) == pair.decode([t for t in run.tokens if t != pair.eos_token_id])  # no EOS
        if greedy:
            assert run.tokens == generate(pair.target, scope["prompt_ids"], max_new_tokens=8,
                                          eos_token_id=pair.eos_token_id).tokens, method
        if method == "suffix" and task == "agent":  # the loop's earlier answers are cached: drafts are accepted
            assert run.stats["accepted_tokens"] > 0, run.stats
