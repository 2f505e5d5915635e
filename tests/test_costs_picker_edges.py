"""lab.costs and lab.picker edge values: a config.json's torch_dtype, the temperature limit itself, prompt lookup's
transformers arguments."""
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
