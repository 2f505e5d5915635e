"""lab.models: loading pairs (presets, devices, the offline hub probe, broken files) and forward (blocks appended to a
KV cache, branching masks and positions, the cache keyword of the installed transformers)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch

from lab import models
from lab.assets import PAIR_DIR
from lab.kv import rollback
from lab.models import PRESETS, ModelNotAvailableError, forward, load_pair, new_cache, pick_device
from tests.helpers import DEVICE, SHORT_CONTEXT, TOKENS, close, fresh


def test_pair_shares_tokenizer_and_runs_on_the_chosen_device(pair):
    assert pair.device.type == torch.device(DEVICE).type
    assert pick_device().type == ("cuda" if torch.cuda.is_available() else "cpu")  # the default when none is given
    assert pair.target.config.vocab_size == pair.draft.config.vocab_size == len(pair.tokenizer)
    text = "To be, or not to be: that is the question."
    assert pair.decode(pair.encode(text)) == text
    assert sum(p.numel() for p in pair.draft.parameters()) * 5 < sum(p.numel() for p in pair.target.parameters())


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


def test_load_pair_refuses_the_meta_device():
    """A pair on "meta" has shapes and no weights: nothing could run on it, so load_pair says so up front."""
    with pytest.raises(ValueError, match="device must be one that holds data .*got 'meta'"):
        load_pair("shakespeare", device="meta")
    with pytest.raises(ValueError, match="device"):
        pick_device(torch.device("meta"))
    assert pick_device("cpu") == torch.device("cpu")


# --- the hub probe and broken files ----------------------------------------------------------------------------

@pytest.fixture()
def no_hub_env(monkeypatch):
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    calls = []

    def connect(address, timeout):
        calls.append(address)

        class Conn:
            def close(self):
                pass
        return Conn()

    monkeypatch.setattr(models.socket, "create_connection", connect)
    return calls


@pytest.mark.parametrize("name, value, reachable", [
    ("HF_HUB_OFFLINE", "1", False), ("HF_HUB_OFFLINE", "TRUE", False), ("TRANSFORMERS_OFFLINE", "yes", False),
    ("HF_HUB_OFFLINE", "false", True), ("HF_HUB_OFFLINE", "0", True)])
def test_offline_flags_follow_huggingface_hub(no_hub_env, monkeypatch, name, value, reachable):
    monkeypatch.setenv(name, value)
    assert models._hub_reachable() is reachable
    assert no_hub_env == ([("huggingface.co", 443)] if reachable else [])


def test_a_proxy_is_trusted_instead_of_a_direct_socket(no_hub_env, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert models._hub_reachable() is True and no_hub_env == []


def test_a_broken_weights_file_is_reported_as_such(tmp_path):
    broken = tmp_path / "draft"
    broken.mkdir()
    (broken / "config.json").write_text((PAIR_DIR / "draft" / "config.json").read_text())
    # what a clone without git-lfs holds instead of the weights
    (broken / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n")
    from transformers import LlamaForCausalLM

    with pytest.raises(ModelNotAvailableError, match="missing or broken"):
        models._from_pretrained(LlamaForCausalLM, str(broken), "shakespeare")
    json.loads((broken / "config.json").read_text())  # the config itself was fine


# --- forward: a block on the cache, a branching mask, its argument checks --------------------------------------

def test_branch_mask_gives_the_logits_of_separate_forwards(target):
    """[last] + chain causal, then a window that sees only the last token and itself, at the chain's positions."""
    prefix, chain, window = TOKENS[:10], [30, 31, 32], [40, 41, 42, 43]
    cache = new_cache()
    forward(target, prefix[:-1], cache)
    base = len(prefix) - 1
    n, w = len(chain), len(window)
    mask = torch.ones(1 + n + w, 1 + n + w, dtype=torch.bool).tril()
    mask[1 + n:] = False
    mask[1 + n:, 0] = True
    mask[1 + n:, 1 + n:] = torch.ones(w, w, dtype=torch.bool).tril()
    positions = list(range(base, base + n + 1)) + list(range(base + 1, base + w + 1))
    logits = forward(target, [prefix[-1]] + chain + window, cache, attention_mask=mask, position_ids=positions)
    close(logits[: 1 + n], fresh(target, prefix + chain)[-(1 + n):])
    close(logits[1 + n:], fresh(target, prefix + window)[-w:])
    rollback(cache, base + 1 + 2)  # keep last + 2 chain tokens: the window's entries go with the rejected ones
    close(forward(target, [chain[2]], cache)[-1], fresh(target, prefix + chain)[-1])


def test_forward_rejects_bad_layouts(target):
    with pytest.raises(ValueError, match="attention_mask"):
        forward(target, [1, 2], new_cache(), attention_mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="position_ids"):
        forward(target, [1, 2], new_cache(), position_ids=[0])


def test_forward_rejects_an_empty_block(target):
    with pytest.raises(ValueError, match="input_ids must hold at least one token"):
        forward(target, [], new_cache())


def test_forward_refuses_a_batch_instead_of_gluing_it(pair):
    with pytest.raises(ValueError, match=r"one sequence.*\(2, 3\)"):
        forward(pair.target, torch.tensor([[1, 2, 3], [4, 5, 6]]), new_cache())
    with pytest.raises(ValueError, match="position_ids must be positions >= 0"):
        forward(pair.target, [1, 2], new_cache(), position_ids=[-1, 0])
    assert forward(pair.target, torch.tensor([[1, 2, 3]]), new_cache()).shape == (3, pair.target.config.vocab_size)


def test_cache_kwarg_names_a_parameter_of_forward(target):
    import inspect
    import warnings

    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    from lab.models import cache_kwarg

    for cls in (type(target), LlamaDecoderLayer):
        key = cache_kwarg(cls)
        assert key in ("cache", "past_key_values") and key in inspect.signature(cls.forward).parameters
    # the name it gives is the one the installed transformers wants: passing it raises no deprecation warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        target(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True, **{cache_kwarg(type(target)): new_cache()})


def test_forward_refuses_positions_past_the_context(short_target):
    cache = new_cache()
    assert forward(short_target, list(range(SHORT_CONTEXT)), cache).shape == (SHORT_CONTEXT, 64)  # exactly full: fine
    with pytest.raises(ValueError, match=rf"context limit of {SHORT_CONTEXT}.*cache length {SHORT_CONTEXT} \+ 1 new tokens"):
        forward(short_target, [1], cache)
    with pytest.raises(ValueError, match=rf"position {SHORT_CONTEXT + 7}.*context limit of {SHORT_CONTEXT}.*cache length 0 \+ 40"):
        forward(short_target, [1] * 40, new_cache())
    cache = new_cache()
    forward(short_target, [1, 2], cache)
    with pytest.raises(ValueError, match=rf"position {SHORT_CONTEXT}, past the model's context limit"):
        forward(short_target, [3, 4], cache, position_ids=[5, SHORT_CONTEXT])  # explicit positions count, not the length
    assert forward(short_target, [3, 4], cache, position_ids=[2, SHORT_CONTEXT - 1]).shape == (2, 64)


def test_forward_checks_token_ids(short_target):
    with pytest.raises(ValueError, match=r"input_ids must be token ids in \[0, 64\).*got 64"):
        forward(short_target, [1, 64], new_cache())
    with pytest.raises(ValueError, match=r"input_ids .*\[0, 64\).*got -1"):
        forward(short_target, torch.tensor([-1, 3]), new_cache())
    with pytest.raises(TypeError, match="input_ids must be integer token ids"):
        forward(short_target, [1.7, 2.2], new_cache())
    assert forward(short_target, np.array([1, 63]), new_cache()).shape == (2, 64)


def test_load_pair_checks_name_device_and_dtype():
    with pytest.raises(ValueError, match="unknown model pair \\['gpt2'\\]; name must be one of the presets"):
        models.load_pair(["gpt2"])
    with pytest.raises(ValueError, match="dtype must be None or a torch floating dtype.*'foo'"):
        models.load_pair(dtype="foo")
    with pytest.raises(ValueError, match="dtype must be None or a torch floating dtype.*torch.int64"):
        models.load_pair(dtype=torch.int64)
    with pytest.raises(ValueError, match="device must be a torch device name; this machine has cpu"):
        models.load_pair(device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda' is not available on this machine; available: cpu"):
            models.load_pair(device="cuda")
    else:
        with pytest.raises(ValueError, match="device 'cuda:99' is not available"):
            models.pick_device("cuda:99")
    assert models.pick_device("cpu") == torch.device("cpu")
    assert models._check_dtype("bfloat16") is torch.bfloat16 and models._check_dtype(None) is torch.float32


def test_pair_decode_refuses_ids_outside_the_vocabulary():
    pair = models.load_pair()
    ids = pair.encode("ROMEO.")
    assert pair.decode(ids) == "ROMEO." == pair.decode(torch.tensor(ids)) == pair.decode(np.array(ids))
    with pytest.raises(ValueError, match=r"ids must be token ids in \[0, 2048\).*\[99999\]"):
        pair.decode([65, 99999])
    with pytest.raises(ValueError, match=r"\[-1\]"):
        pair.decode([-1])
    with pytest.raises(TypeError, match="ids must hold integer token ids, got float"):
        pair.decode([1.5])
    assert pair.decode.__doc__ and "Raises" in pair.decode.__doc__
    for bad in (123, None, ["ROMEO."], b"ROMEO."):  # a list would come back as a batch of id lists
        with pytest.raises(TypeError, match="text must be a str"):
            pair.encode(bad)
