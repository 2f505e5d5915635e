"""lab.costs and lab.picker edge values: a config.json's torch_dtype, the temperature limit itself, prompt lookup's
transformers arguments."""
import math

import pytest

from lab import costs
from lab.picker import MAX_TEMPERATURE, recommend


# a config.json dict names its dtype as "torch_dtype" (older transformers) — the size comes from there.
def test_kv_bytes_from_a_config_json_with_torch_dtype():
    config = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
              "torch_dtype": "bfloat16"}
    assert costs.kv_cache_bytes_per_token(config) == 131_072          # 2 · 32 · 8 · 128 · 2 bytes
    assert costs.kv_cache_bytes_per_token({**config, "torch_dtype": "float32"}) == 262_144


# speculation is turned off only ABOVE MAX_TEMPERATURE; T = 1 itself still speculates.
def test_max_temperature_itself_still_speculates():
    assert MAX_TEMPERATURE == 1.0
    at = recommend("chat", MAX_TEMPERATURE, True, False)
    assert at.method == "draft_model" and at.n_draft == 4 and at.draft_temperature == 1.0
    assert recommend("chat", MAX_TEMPERATURE + 0.01, True, False).method == "none"


# transformers' prompt lookup matches n-grams up to prompt_lookup_max = 4 tokens (seed lesson 002).
def test_hf_kwargs_for_prompt_lookup():
    rec = recommend("code", 0.0, False, False)
    assert rec.method == "ngram"
    assert rec.hf_kwargs() == {"do_sample": False, "prompt_lookup_num_tokens": 5, "max_matching_ngram_size": 4}
    assert recommend("code", 0.8, False, False).hf_kwargs() == {
        "do_sample": True, "temperature": 0.8, "prompt_lookup_num_tokens": 3, "max_matching_ngram_size": 4}


# --- review findings (session 10) -------------------------------------------------------------------------------
def test_cost_ratio_from_steps_reads_a_generator_once_and_checks_the_step_time():
    from types import SimpleNamespace

    from lab.metrics import cost_ratio_from_steps

    steps = [SimpleNamespace(draft_calls=4, draft_ms=2.0), SimpleNamespace(draft_calls=4, draft_ms=6.0)]
    assert cost_ratio_from_steps((s for s in steps), 4.0) == pytest.approx(0.25)  # 8 ms / 8 calls / 4 ms
    for bad in ("5", True, math.inf, 0.0, -1.0):
        with pytest.raises(ValueError, match="ar_ms_per_step"):
            cost_ratio_from_steps(steps, bad)


def test_ridge_that_overflows_names_both_arguments():
    from lab import costs

    with pytest.raises(ValueError, match="flops_per_byte \\* bytes_per_param"):
        costs.speculative_throughput_gain(1, 4, 0.75, 0.1, 1e308, 1e308)
    with pytest.raises(ValueError, match="flops_per_byte \\* bytes_per_param"):
        costs.speculative_throughput_gain(1, 4, 0.75, 0.1, 1e-320)


def test_llama_parameter_count_defaults_to_untied_and_wants_a_bool():
    from lab import costs

    untied = costs.llama_parameter_count(costs.LLAMA_3_1_8B)
    config = {k: v for k, v in costs.LLAMA_3_1_8B.items() if k != "tie_word_embeddings"}
    assert costs.llama_parameter_count(config) == untied == 8_030_261_248  # LlamaConfig's default: untied
    with pytest.raises(ValueError, match="tie_word_embeddings"):
        costs.llama_parameter_count({**config, "tie_word_embeddings": "false"})


def test_kv_config_errors_name_the_problem():
    from lab import costs

    config = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}
    with pytest.raises(ValueError, match="does not know .'bf16'"):
        costs.kv_cache_bytes_per_token({**config, "dtype": "bf16"})
    for key in ("head_dim", "num_key_value_heads"):
        with pytest.raises(ValueError, match=key):
            costs.kv_cache_bytes_per_token({**config, key: 0}, 2)


def test_chi_square_min_expected_must_be_finite():
    from lab.metrics import chi_square

    for bad in (math.inf, True, math.nan):
        with pytest.raises(ValueError, match="min_expected"):
            chi_square([5, 5], [0.5, 0.5], min_expected=bad)
