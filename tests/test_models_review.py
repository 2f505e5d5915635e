"""lab.models and lab.trace edges found in review: the hub probe's offline and proxy rules, broken weight files, batched
ids, tree records without a path."""
import json

import pytest
import torch

from lab import models
from lab.models import ModelNotAvailableError, forward, load_pair, new_cache


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
    from lab.train import PAIR_DIR

    broken = tmp_path / "draft"
    broken.mkdir()
    (broken / "config.json").write_text((PAIR_DIR / "draft" / "config.json").read_text())
    # what a clone without git-lfs holds instead of the weights
    (broken / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n")
    from transformers import LlamaForCausalLM

    with pytest.raises(ModelNotAvailableError, match="missing or broken"):
        models._from_pretrained(LlamaForCausalLM, str(broken), "shakespeare")
    json.loads((broken / "config.json").read_text())  # the config itself was fine


def test_forward_refuses_a_batch_instead_of_gluing_it():
    pair = load_pair()
    with pytest.raises(ValueError, match=r"one sequence.*\(2, 3\)"):
        forward(pair.target, torch.tensor([[1, 2, 3], [4, 5, 6]]), new_cache())
    with pytest.raises(ValueError, match="position_ids must be positions >= 0"):
        forward(pair.target, [1, 2], new_cache(), position_ids=[-1, 0])
    assert forward(pair.target, torch.tensor([[1, 2, 3]]), new_cache()).shape == (3, pair.target.config.vocab_size)


def test_a_tree_record_without_its_path_is_refused():
    from lab.trace import StepRecord

    # node 2 hangs under node 0: the accepted nodes [0, 2] are not the first two, so no default path can be right
    with pytest.raises(ValueError, match="needs its path"):
        StepRecord(index=0, position=0, drafted=[5, 6, 7], num_accepted=2, emitted=[5, 7, 9], last_kind="bonus",
                   parents=[-1, -1, 0])
    record = StepRecord(index=0, position=0, drafted=[5, 6, 7], num_accepted=2, emitted=[5, 7, 9],
                        last_kind="bonus", parents=[-1, -1, 0], path=[0, 2])
    assert record.rejected == [6]
    chain = StepRecord(index=0, position=0, drafted=[5, 6, 7], num_accepted=2, emitted=[5, 6, 1],
                       last_kind="resampled")
    assert chain.path == [0, 1] and chain.rejected == [7]
