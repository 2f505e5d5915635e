"""Every engine setting the picker renders, checked against that engine's own code at a pinned release
(tests/data/engines/): vLLM's SpeculativeConfig fields and methods, SGLang's server-argument fields and algorithms,
TensorRT-LLM's decoding-config classes and decoding_type values, llama.cpp's argument table and --spec-type names,
transformers' generate arguments. The parsers are tested first on spot values, so that a parser that finds nothing
fails here rather than letting every check pass."""
from __future__ import annotations

import ast
import json
import re
import shlex

import pytest
import yaml

from lab.picker import (LLAMACPP_SPEC_TYPES, SGLANG_ALGORITHMS, TRTLLM_DECODING_TYPES, VLLM_METRICS,
                        VLLM_SUFFIX_DEFAULTS, recommend)
from tests.lab.picker.engine_sources import (LLAMACPP_ROOT, SGLANG_SAMPLING_FILE, VLLM_FILE, VLLM_SAMPLING_FILE,
                                             llamacpp_source, llamacpp_struct_defaults, module_constant,
                                             sglang_source, transformers_generate_keys, trtllm_source,
                                             vllm_max_temperature, vllm_source, vllm_suffix_source)
from tests.lab.picker.helpers import all_recommendations, suffix_recommendations


def every_recommendation():
    return all_recommendations() + suffix_recommendations()


# --- the parsers find what the engines really define ------------------------------------------------------------------
def test_vllm_parser_reads_the_pinned_release():
    source = vllm_source()
    assert {"num_speculative_tokens", "method", "model", "prompt_lookup_max", "draft_sample_method",
            "num_speculative_tokens_per_batch_size", "suffix_decoding_max_tree_depth"} <= source.keys
    assert not source.keys & {"target_model_config", "draft_model_config", "custom_method"}  # internal / init=False
    # the examples: these are gone from vLLM's config
    assert not source.keys & {"disable_by_batch_size", "speculative_token_tree", "speculative_model"}
    assert {"ngram", "draft_model", "suffix", "eagle", "eagle3", "mtp", "deepseek_mtp"} <= source.methods
    assert "medusa" not in source.methods  # dropped in 0.34.0
    assert source.draft_sample_methods == {"greedy", "probabilistic"}
    assert source.defaults["suffix_decoding_max_tree_depth"] == 24


def test_sglang_parser_reads_the_pinned_release():
    source = sglang_source()
    assert source.cli_name_rule == "'--' + name.replace('_', '-')"  # the rule the parser applies to field names
    assert {"--speculative-algorithm", "--speculative-draft-model-path", "--speculative-draft-model",
            "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
            "--speculative-ngram-max-bfs-breadth", "--model-path", "--tp-size",
            "--tensor-parallel-size"} <= source.flags
    assert "--speculative-boundary-reduction" not in source.flags  # declared no_cli
    assert {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"} <= source.algorithms and "NONE" not in source.algorithms


def test_trtllm_parser_reads_the_pinned_skeleton():
    source = trtllm_source()
    assert {"Draft_Target", "Eagle", "Eagle3", "NGram", "MTP", "SA", "AUTO"} <= set(source.fields)
    assert not {"Medusa", "Lookahead"} & set(source.fields)
    assert {"max_draft_len", "speculative_model", "draft_len_schedule"} <= source.fields["Eagle3"]
    assert {"max_matching_ngram_size", "is_public_pool"} <= source.fields["NGram"]
    assert "num_nextn_predict_layers" not in source.fields["MTP"]  # init=False


def test_llamacpp_parser_reads_the_pinned_table():
    source = llamacpp_source()
    assert {"-m", "-md", "--spec-draft-model", "--model-draft", "--spec-type", "--spec-draft-n-max",
            "--spec-draft-n-min", "--spec-ngram-simple-size-n", "--spec-ngram-mod-n-max"} <= source.flags
    assert {"--draft-max", "--draft-min", "--draft"} <= source.removed and not source.removed & source.flags
    assert {"draft-simple", "draft-eagle3", "ngram-simple", "ngram-mod", "none"} <= source.spec_types


def test_transformers_keys_come_from_the_installed_package():
    keys = transformers_generate_keys()
    assert {"prompt_lookup_num_tokens", "assistant_model", "num_assistant_tokens", "do_sample"} <= keys


# --- every rendered setting is one the engine defines -----------------------------------------------------------------
def test_every_vllm_setting_is_a_vllm_field_and_method():
    source = vllm_source()
    for rec in every_recommendation():
        for config in (rec.vllm_config(), rec.vllm_config(draft_model="org/d", draft_tensor_parallel_size=1)):
            assert set(config) <= source.keys, set(config) - source.keys
            if config:
                assert config["method"] in source.methods
                assert config.get("draft_sample_method", "greedy") in source.draft_sample_methods


def test_vllm_draft_tensor_parallel_rule_is_the_pinned_releases():
    """The picker accepts a draft tensor-parallel size exactly when vLLM's _verify_and_get_draft_tp does: 1 or the
    target's size, for every model-based method (the function's `not in (1, target size)` test, read from the
    source)."""
    tree = ast.parse(VLLM_FILE.read_text(encoding="utf-8"))
    verify = next(node for node in ast.walk(tree)
                  if isinstance(node, ast.FunctionDef) and node.name == "_verify_and_get_draft_tp")
    tests = [node for node in ast.walk(verify) if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.NotIn)]
    assert len(tests) == 1
    allowed = [ast.unparse(element) for element in tests[0].comparators[0].elts]
    assert allowed == ["1", "target_parallel_config.tensor_parallel_size"]
    for args in (("chat", 0.0, True, False), ("chat", 0.0, False, True)):  # a draft model, an EAGLE head
        rec = recommend(*args)
        for target_tp in (1, 2, 4):
            for draft_tp in range(1, 6):
                if draft_tp in (1, target_tp):
                    config = rec.vllm_config(draft_model="org/d", draft_tensor_parallel_size=draft_tp,
                                             tensor_parallel_size=target_tp)
                    assert config["draft_tensor_parallel_size"] == draft_tp
                else:
                    with pytest.raises(ValueError, match="draft_tensor_parallel_size"):
                        rec.vllm_config(draft_tensor_parallel_size=draft_tp, tensor_parallel_size=target_tp)


def _squash(promql: str) -> str:
    """PromQL without spaces or brackets, our 5-minute window written as vLLM's docstring writes it."""
    return re.sub(r"[\s()]", "", promql.replace("[5m]", "[$interval]"))


def test_vllm_metrics_name_vllms_own_counters_and_formulas():
    """Every counter VLLM_METRICS reads is one vLLM's Prometheus logger creates (metrics.py, plus the _total
    Prometheus appends), and our acceptance-rate and tokens-per-target-call formulas are the ones its docstring
    gives for the acceptance rate and the mean acceptance length."""
    metrics = VLLM_FILE.parents[1] / "v1" / "spec_decode" / "metrics.py"
    tree = ast.parse(metrics.read_text(encoding="utf-8"))
    prom = next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == "SpecDecodingProm")
    created = {node.value for node in ast.walk(prom)
               if isinstance(node, ast.Constant) and isinstance(node.value, str)
               and node.value.startswith("vllm:spec_decode_")}
    assert created == {"vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                       "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_per_pos"}
    read = {name.removesuffix("_total") for expression in VLLM_METRICS.values()
            for name in re.findall(r"vllm:[a-z_]+", expression)}
    assert read == created
    doc = " ".join(ast.get_docstring(prom).split())
    assert _squash(VLLM_METRICS["acceptance_rate"]) in _squash(doc)
    assert _squash(VLLM_METRICS["tokens_per_target_call"]) in _squash(doc)
    # the per-position counter counts, per draft, the positions before the first rejection (observe_draft)
    stats = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "observe_draft")
    assert "for i in range(num_accepted_tokens): self.num_accepted_tokens_per_pos[i] += 1" in " ".join(
        ast.unparse(stats).split())


def test_vllm_suffix_config_uses_vllm_defaults():
    defaults = vllm_source().defaults
    assert VLLM_SUFFIX_DEFAULTS == {key: defaults[key] for key in VLLM_SUFFIX_DEFAULTS}
    config = suffix_recommendations()[0].vllm_config()
    assert config == {"method": "suffix", "num_speculative_tokens": 4, **VLLM_SUFFIX_DEFAULTS}


def test_sglangs_cap_on_running_requests_is_the_one_the_picker_overrides():
    """The 48 SGLang sets for a speculating server without --max-running-requests, read in the pinned
    speculative_hook.py (every handler that resets it), and the flag in the pinned fields/schedule.py."""
    import re

    from lab.picker.sglang import SGLANG_DEFAULT_RUNNING_REQUESTS

    hook = (SGLANG_SPEC.parents[1] / "speculative_hook.py").read_text(encoding="utf-8")
    caps = {int(v) for v in re.findall(r"max_running_requests=(\d+)", hook)}
    assert caps == {SGLANG_DEFAULT_RUNNING_REQUESTS}
    assert "--max-running-requests" in sglang_source().flags


def test_every_sglang_flag_and_algorithm_is_sglangs():
    source = sglang_source()
    assert {v.upper() for v in SGLANG_ALGORITHMS.values()} <= source.algorithms
    for rec in every_recommendation():
        argv = shlex.split(rec.sglang_command("org/model", tensor_parallel_size=2, draft_model="org/d"))
        flags = [a for a in argv if a.startswith("--")]
        assert set(flags) <= source.flags, set(flags) - source.flags
        args = rec.sglang_args()
        assert (args == []) == (rec.sglang_method() == "none")
        if args:
            assert args[args.index("--speculative-algorithm") + 1] in source.algorithms
            assert int(args[args.index("--speculative-num-draft-tokens") + 1]) == rec.n_draft + 1


def test_every_trtllm_config_is_a_decoding_config_of_the_union():
    source = trtllm_source()
    assert set(TRTLLM_DECODING_TYPES.values()) <= set(source.fields)
    for rec in every_recommendation():
        config = rec.trtllm_config(draft_model="org/d")
        if rec.method == "none":
            assert config == {} and rec.trtllm_yaml() == ""
            continue
        fields = source.fields[config["decoding_type"]]
        assert set(config) <= fields, set(config) - fields
        assert config["max_draft_len"] == rec.n_draft
        assert yaml.safe_load(rec.trtllm_yaml(draft_model="org/d")) == {"speculative_config": config}
        schedule = config.get("draft_len_schedule")
        if schedule:  # TensorRT-LLM requires the smallest batch size to map to max_draft_len
            assert schedule[min(schedule)] == config["max_draft_len"]


def test_every_llamacpp_flag_and_type_is_llamacpps():
    source = llamacpp_source()
    assert set(LLAMACPP_SPEC_TYPES.values()) <= source.spec_types
    for rec in every_recommendation():
        argv = shlex.split(rec.llamacpp_command("t.gguf", draft_model="d.gguf"))
        assert argv[:3] == ["llama-server", "-m", "t.gguf"]
        flags = [a for a in argv if a.startswith("-")]
        assert set(flags) <= source.flags, set(flags) - source.flags
        if "--spec-type" in argv:
            assert argv[argv.index("--spec-type") + 1] in source.spec_types


def test_every_transformers_argument_is_a_generate_argument():
    keys = transformers_generate_keys()
    for rec in every_recommendation():
        assert set(rec.hf_kwargs()) <= keys and set(rec.hf_assistant_config()) <= keys


# --- what each engine gets per method ---------------------------------------------------------------------------------
def test_settings_per_method_and_engine():
    draft = recommend("chat", 0.0, True, False)  # draft model, N = 5
    assert draft.sglang_args("org/d") == ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path",
                                          "org/d", "--speculative-num-steps", "5", "--speculative-eagle-topk", "1",
                                          "--speculative-num-draft-tokens", "6"]
    assert draft.trtllm_config("org/d") == {"decoding_type": "Draft_Target", "max_draft_len": 5,
                                            "speculative_model": "org/d"}
    assert draft.llamacpp_args("d.gguf") == ["--spec-type", "draft-simple", "--spec-draft-model", "d.gguf",
                                             "--spec-draft-n-max", "5"]
    lookup = recommend("code", 0.0, False, False)  # prompt lookup, N = 5
    assert lookup.trtllm_config() == {"decoding_type": "NGram", "max_draft_len": 5, "max_matching_ngram_size": 4,
                                      "is_public_pool": False}
    assert lookup.llamacpp_args() == ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "4",
                                      "--spec-ngram-simple-size-m", "5"]
    load = recommend("chat", 0.0, False, True, latency_bound=False)  # EAGLE at N = 1 with the batch schedule
    schedule = load.settings["num_speculative_tokens_per_batch_size"]
    last_drafting = max(last for _first, last, n in schedule if n > 0)
    assert load.trtllm_config()["draft_len_schedule"] == {last_drafting: 1}
    assert any("SGLang has no per-batch-size" in n for n in load.engine_notes())


@pytest.mark.parametrize("small, nearest", [(True, "draft_model"), (False, "ngram")])
def test_medusa_gets_the_nearest_method_with_a_note_in_every_engine(small, nearest):
    rec = recommend("chat", 0.0, small, True, exclude=("eagle",))
    assert rec.method == "medusa"
    assert rec.vllm_config()["method"] == nearest
    assert rec.sglang_args()[1] == {"draft_model": "STANDALONE", "ngram": "NGRAM"}[nearest]
    assert rec.trtllm_config()["decoding_type"] == {"draft_model": "Draft_Target", "ngram": "NGram"}[nearest]
    assert rec.llamacpp_args()[1] == {"draft_model": "draft-simple", "ngram": "ngram-simple"}[nearest]
    notes = " ".join(rec.engine_notes())
    for engine in ("vLLM 0.34.0", "SGLang", "TensorRT-LLM", "llama.cpp", "transformers"):
        assert f"{engine}" in notes and "Medusa" in notes


def test_suffix_decoding_per_engine():
    rec = suffix_recommendations()[0]
    assert rec.sglang_args() == ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "5"]
    assert rec.trtllm_config() == {"decoding_type": "SA", "max_draft_len": 4, "max_matching_ngram_size": -1,
                                   "enable_global_pool": True}
    assert rec.llamacpp_args() == ["--spec-type", "ngram-mod", "--spec-ngram-mod-n-min", "1",
                                   "--spec-ngram-mod-n-max", "4", "--spec-ngram-mod-n-match", "16"]
    assert rec.hf_kwargs()["prompt_lookup_num_tokens"] == 4
    assert rec.lab_drafter() == "SuffixDecodingDrafter()"
    notes = " ".join(rec.engine_notes())
    assert "SGLang has no suffix" in notes and "SA (suffix automaton)" in notes and "ngram-mod" in notes


def test_none_renders_nothing_for_any_engine():
    rec = recommend("chat", 2.0, True, True)
    assert rec.method == "none"
    assert rec.sglang_args() == [] and rec.trtllm_config() == {} and rec.llamacpp_args() == []
    assert shlex.split(rec.llamacpp_command("t.gguf")) == ["llama-server", "-m", "t.gguf"]


def test_json_output_carries_every_engine():
    data = json.loads(json.dumps(recommend("chat", 0.0, True, False).to_dict()))
    assert data["sglang_args"][:2] == ["--speculative-algorithm", "STANDALONE"]
    assert data["trtllm_config"]["decoding_type"] == "Draft_Target" and data["llamacpp_args"][1] == "draft-simple"


# --- sampling, load and head kinds, against the pinned sources --------------------------------------------------------
def _sglang_spec_default(field: str):
    """The default of a ``Spec`` field in the pinned fields/spec.py."""
    tree = ast.parse((SGLANG_SPEC).read_text(encoding="utf-8"))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == field)
    return ast.literal_eval(node.value)


SGLANG_SPEC = VLLM_FILE.parents[3] / "sglang-0.5.23" / "sglang" / "srt" / "arg_groups" / "fields" / "spec.py"


def test_sampling_turns_on_rejection_sampling_only_where_the_engine_takes_it():
    """SGLang's --speculative-use-rejection-sampling and TensorRT-LLM's use_rejection_sampling default off (verify
    the draft as one-hot / by exact match). When sampling, the picker sets SGLang's for NEXTN only (its hook refuses
    it for STANDALONE and NGRAM, and eagle_worker_v2 for an EAGLE-3 head with a reduced draft vocabulary) and
    TensorRT-LLM's for its one-model paths, Eagle3 and MTP; elsewhere a note says acceptance is lower."""
    assert _sglang_spec_default("speculative_use_rejection_sampling") is False
    assert "--speculative-use-rejection-sampling" in sglang_source().flags
    assert all("use_rejection_sampling" in fields for fields in trtllm_source().fields.values())
    mtp_hot = recommend("chat", 0.7, False, False, target_has_mtp=True)
    assert mtp_hot.method == "mtp" and mtp_hot.sglang_args()[-1] == "--speculative-use-rejection-sampling"
    assert mtp_hot.trtllm_config()["use_rejection_sampling"] is True
    mtp_greedy = recommend("chat", 0.0, False, False, target_has_mtp=True)
    assert "--speculative-use-rejection-sampling" not in mtp_greedy.sglang_args()
    assert "use_rejection_sampling" not in mtp_greedy.trtllm_config()
    eagle_hot = recommend("chat", 0.7, False, True)
    assert eagle_hot.trtllm_config()["use_rejection_sampling"] is True
    assert "--speculative-use-rejection-sampling" not in eagle_hot.sglang_args()
    assert any("SGLang 0.5.23 refuses it for a reduced one" in n for n in eagle_hot.engine_notes())
    draft_hot = recommend("chat", 0.7, True, False)
    assert "--speculative-use-rejection-sampling" not in draft_hot.sglang_args()
    assert "use_rejection_sampling" not in draft_hot.trtllm_config()
    assert any("refused for STANDALONE" in n for n in draft_hot.engine_notes())
    for rec in every_recommendation():
        if "--speculative-use-rejection-sampling" in rec.sglang_args():
            assert rec.sglang_method() == "mtp" and rec.temperature > 0


def test_sglang_caps_running_requests_at_the_schedules_last_drafting_batch_under_load():
    """SGLang 0.5.23 resets max_running_requests to 48 when it speculates and none is given (speculative_hook.py);
    under load the flags set it to the last batch size lesson 13's schedule drafts at, or to the caller's value."""
    load = recommend("chat", 0.0, False, True, latency_bound=False)
    schedule = load.settings["num_speculative_tokens_per_batch_size"]
    last = max(last for _first, last, n in schedule if n > 0)
    assert last == 262  # lesson 13's break-even batch is 263
    args = load.sglang_args()
    assert args[args.index("--max-running-requests") + 1] == "262"
    mine = shlex.split(load.sglang_command("m", max_running_requests=64))
    assert mine[mine.index("--max-running-requests") + 1] == "64"
    assert any("caps a speculating server at 48 running requests" in n for n in load.engine_notes())
    assert "--max-running-requests" not in recommend("chat", 0.0, False, True).sglang_args()  # latency-bound
    latency = shlex.split(recommend("code", 0.0, False, False).sglang_command("m", max_running_requests=8))
    assert latency[latency.index("--max-running-requests") + 1] == "8"
    assert recommend("chat", 0.0, True, False, latency_bound=False).sglang_args(max_running_requests=8) == []
    for bad in (0, -1, 2.0, True, 1 << 17):
        with pytest.raises(ValueError, match="max_running_requests must be an integer from 1 to 65536"):
            load.sglang_args(max_running_requests=bad)


def test_ngram_mod_match_length_is_the_shortest_llamacpp_takes_without_warning():
    """ngram-mod drafts only once the last n_match tokens recur (24 by default); the picker sets 16, the threshold
    under which speculative.cpp warns of poor drafts."""
    speculative = (VLLM_FILE.parents[3] / "llama.cpp-from-llama-cpp-python-0.3.36" / "common" / "speculative.cpp")
    warning = re.search(r"if \(this->params\.n_match < (\d+)\)\s*\{\s*SPC_WRN\(\"ngram_mod n_match=%d is too small",
                        speculative.read_text(encoding="utf-8"))
    assert warning and int(warning.group(1)) == 16
    assert "--spec-ngram-mod-n-match" in llamacpp_source().flags
    args = suffix_recommendations()[0].llamacpp_args()
    assert args[args.index("--spec-ngram-mod-n-match") + 1] == "16"
    assert any("only once the last 16 tokens recur" in n for n in suffix_recommendations()[0].engine_notes())


def test_ngram_mod_defaults_the_picker_quotes_are_llamacpps():
    """The ngram-mod defaults the picker's note and docstrings quote (n_match 24; n_min 48 and n_max 64) are the
    member defaults of common_params_speculative_ngram_mod in the pinned common/common.h, the struct the three
    --spec-ngram-mod-* flags of arg.cpp set; the picker's n_match is shorter than the default."""
    import inspect

    from lab.picker import llamacpp

    defaults = llamacpp_struct_defaults("common_params_speculative_ngram_mod")
    assert set(defaults) == {"n_match", "n_min", "n_max"}
    arg = (LLAMACPP_ROOT / "arg.cpp").read_text(encoding="utf-8")
    for field in defaults:
        flag = "--spec-ngram-mod-" + field.replace("_", "-")
        block = arg[arg.index('{"' + flag + '"}'):]
        block = block[:block.index("add_opt(")]
        assert f"params.speculative.ngram_mod.{field} = value;" in block, flag
        assert f"(default: %d)\", params.speculative.ngram_mod.{field})" in block, flag
    note = " ".join(n for n in suffix_recommendations()[0].engine_notes() if "ngram-mod" in n)
    assert f"its default is {defaults['n_match']}," in note
    assert llamacpp.NGRAM_MOD_MATCH < defaults["n_match"]
    doc = " ".join(inspect.getsource(llamacpp).split())
    assert f"Its default ({defaults['n_match']}, ``common/common.h``" in doc
    assert f"(its defaults, {defaults['n_min']} and {defaults['n_max']}, are long drafts" in doc
    assert defaults["n_min"] < defaults["n_max"]  # the order the docstring names them in: n-min, then n-max


def test_the_suffix_config_the_picker_renders_is_what_vllms_suffix_speculator_reads():
    """The picker's suffix config sets num_speculative_tokens itself (else vLLM's configure would default it to
    min(8, depth)) and the keys the GPU speculator reads (suffix/speculator.py: the tree depth, the corpus size and
    whether requests are cached at all); the two deprecated keys it leaves out are read nowhere there."""
    config = suffix_recommendations()[0].vllm_config()
    read = {name for expression in vllm_suffix_source().reads.values()
            for name in re.findall(r"spec\.(\w+)", expression)}
    assert set(config) - {"method"} <= read
    assert {"num_speculative_tokens", *VLLM_SUFFIX_DEFAULTS} <= read
    assert "num_speculative_tokens" in config
    speculator = (VLLM_FILE.parents[1] / "v1" / "worker" / "gpu" / "spec_decode" / "suffix" / "speculator.py")
    for deprecated in ("suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob"):
        assert deprecated not in config and deprecated not in speculator.read_text(encoding="utf-8")


def test_eagle_note_names_each_engines_eagle_1_2_setting():
    """The settings load an EAGLE-3 head everywhere; the note gives each engine's name for an EAGLE-1/2 head, each
    one the engine defines, and says llama.cpp has none."""
    note = next(n for n in recommend("chat", 0.0, False, True).engine_notes() if "EAGLE-1/2 head" in n)
    assert "vLLM's \"eagle\"" in note and "eagle" in vllm_source().methods and "eagle3" in vllm_source().methods
    assert "SGLang's EAGLE" in note and {"EAGLE", "EAGLE3"} <= sglang_source().algorithms
    assert "decoding_type Eagle;" in note and {"Eagle", "Eagle3"} <= set(trtllm_source().fields)
    assert "llama.cpp has no EAGLE-1/2 type" in note
    assert {t for t in llamacpp_source().spec_types if "eagle" in t} == {"draft-eagle3"}


def test_sglang_eagle_note_quotes_the_pinned_shape_defaults():
    """The EAGLE note's default shapes (5, 4, 8 for Llama and Grok; 3, 1, 4 for the rest) are what the pinned
    speculative_hook.py's _auto_choose_speculative_params returns, and SGLang asserts that top-k and draft tokens are
    unset when the steps are (so the flags give all three)."""
    hook = (SGLANG_SPEC.parents[1] / "speculative_hook.py").read_text(encoding="utf-8")
    func = next(node for node in ast.walk(ast.parse(hook))
                if isinstance(node, ast.FunctionDef) and node.name == "_auto_choose_speculative_params")
    returns = {}
    for branch in ast.walk(func):
        if isinstance(branch, ast.If) and isinstance(branch.test, ast.Compare) and \
                isinstance(branch.test.comparators[0], ast.List):
            archs = [elt.value for elt in branch.test.comparators[0].elts]
            value = ast.literal_eval(branch.body[0].value)
            returns.update({arch: value for arch in archs})
    assert returns["LlamaForCausalLM"] == returns["Grok1ForCausalLM"] == (5, 4, 8)
    branch = func.body[-1]
    while isinstance(branch, ast.If):  # down the elif chain to its else
        branch = branch.orelse[0]
    assert ast.literal_eval(branch.value) == (3, 1, 4)  # every other architecture
    assert {v for k, v in returns.items() if "Llama" not in k and "Grok" not in k} == {(3, 1, 4)}
    # _handle_eagle_family asserts top-k and draft tokens unset when the steps are (so the flags give all three)
    family = next(node for node in ast.walk(ast.parse(hook))
                  if isinstance(node, ast.FunctionDef) and node.name == "_handle_eagle_family")
    unset = [ast.unparse(node.test) for node in ast.walk(family) if isinstance(node, ast.Assert)]
    assert "cfg.speculative_eagle_topk is None and cfg.speculative_num_draft_tokens is None" in unset, unset
    # and rejection sampling refuses any top-k but 1
    assert "--speculative-use-rejection-sampling requires --speculative-eagle-topk=1." in hook
    rec = recommend("chat", 0.0, False, True)
    note = next(n for n in rec.engine_notes() if "_auto_choose_speculative_params" in n)
    assert "5 steps, top-k 4 and 8 verified tokens for LlamaForCausalLM and Grok-1" in note and "chain of 3" in note
    assert f"chain of {rec.n_draft} (top-k 1)" in note and rec.sglang_method() == "eagle"
    assert "rejection-sampling" not in note
    args = rec.sglang_args()
    assert args[args.index("--speculative-eagle-topk") + 1] == "1"
    sampled = next(n for n in recommend("chat", 0.7, False, True).engine_notes() if "_auto_choose" in n)
    assert "keep top-k 1 when sampling" in sampled
    # under load the chain is short on purpose: no invitation to a tree
    loaded = recommend("chat", 0.0, False, True, latency_bound=False)
    assert loaded.sglang_method() == "eagle"
    assert not any("_auto_choose_speculative_params" in n for n in loaded.engine_notes())


def test_the_greedy_threshold_and_the_temperature_bound_are_the_engines_own():
    """The picker takes a temperature below SAMPLING_EPS as greedy, as vLLM does (its sampling type is GREEDY below
    _SAMPLING_EPS); the SGLang threshold its docstring names is SGLang's; it refuses temperatures above the bound
    vLLM's SamplingParams enforces."""
    import inspect

    import lab.picker.tables as tables

    assert module_constant(VLLM_SAMPLING_FILE, "_SAMPLING_EPS") == tables.SAMPLING_EPS == 1e-5
    vllm = VLLM_SAMPLING_FILE.read_text(encoding="utf-8")
    assert re.search(r"if self\.temperature < _SAMPLING_EPS:\s*return SamplingType\.GREEDY", vllm)
    sglang_eps = module_constant(SGLANG_SAMPLING_FILE, "_SAMPLING_EPS")
    source = inspect.getsource(tables)
    doc = " ".join(source[source.index("SAMPLING_EPS = "):source.index("SAMPLING_WARN_TEMPERATURE = ")].split())
    (said,) = re.findall(r"SGLang 0\.5\.23's ``sampling_params\.py``, pinned there too, uses ([0-9.e-]+)", doc)
    assert float(said) == sglang_eps == 1e-6
    assert vllm_max_temperature() == tables.MAX_API_TEMPERATURE == 2.0


def test_every_pinned_file_has_the_hash_its_readme_row_gives():
    """tests/data/engines/README.md lists each engine's files with their sha256 row by row; the files on disk are
    those (a file edited or replaced by hand without a new row fails here). `.../x.py` names a file by its tail."""
    import hashlib

    from tests.lab.picker.engine_sources import ENGINES

    rows = [line.split("|") for line in (ENGINES / "README.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `")]
    checked = 0
    for row in rows:
        folder = ENGINES / row[1].strip().strip("`").rstrip("/")
        files = [p for p in folder.rglob("*") if p.is_file()]
        for name, digest in re.findall(r"`([^`]+)`(?: \([^)]*\))? ([0-9a-f]{64})", row[4]):
            tail = name.removeprefix(".../")
            (path,) = [p for p in files if p.relative_to(folder).as_posix().endswith(tail)
                       and (name.startswith(".../") or p.relative_to(folder).as_posix() == tail)]
            assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, path
            checked += 1
        listed = re.findall(r"`([^`]+)`", row[4])
        for path in files:  # every file on disk is listed in its row
            rel = path.relative_to(folder).as_posix()
            assert any(rel == n or n.startswith(".../") and rel.endswith(n[4:]) for n in listed), rel
    assert checked >= 21  # 6 vLLM, 10 SGLang, 4 llama.cpp, 1 TensorRT-LLM files
