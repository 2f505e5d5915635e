"""lab.training.eagle: train_eagle records the target the draft was trained for. Fake features, tmp folders."""

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from lab.assets import TARGET_KEY, target_weights_key
from lab.drafters.eagle import EagleDraftModel
from lab.models import new_cache
from lab.training import eagle
from lab.training.eagle import eagle_chain_predictions
from tests.lab.training.fakes import fake_features, retrained


def test_train_eagle_records_the_target(pair, tmp_path, monkeypatch):
    import copy

    import lab.models
    from lab.drafters.eagle import EagleDraftModel

    target = copy.deepcopy(pair.target).cpu()  # training freezes it in place: the session pair stays as it was
    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: dataclasses.replace(pair, target=target))
    monkeypatch.setattr(eagle, "target_features", fake_features)
    monkeypatch.setattr(eagle, "write_eagle_card", lambda folder: Path(folder) / "README.md")  # no measuring
    eagle.train_eagle(steps=1, out_dir=tmp_path / "eagle", sequences=4, seq_len=12, batch=2, chain_steps=0,
                      config={"width": 32, "heads": 2, "kv_heads": 2, "intermediate": 48})
    assert json.loads((tmp_path / "eagle" / "config.json").read_text())[TARGET_KEY] == target_weights_key(target)
    with pytest.raises(ValueError, match="trained for another target"):
        EagleDraftModel.from_pretrained(retrained(target), tmp_path / "eagle")


@pytest.mark.parametrize("bad, message", [({"chain_steps": -1}, r"chain_steps must be in \[0, steps = 3700\]"),
                                          ({"steps": 5, "chain_steps": 6}, r"chain_steps must be in \[0, steps = 5\]"),
                                          ({"chain_depth": 0}, "chain_depth must be an integer >= 1"),
                                          ({"steps": 0}, "steps must be an integer >= 1"),
                                          ({"batch": 0}, "batch must be an integer >= 1")])
def test_bad_arguments_are_refused_before_any_work(bad, message, monkeypatch):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pytest.fail("loaded the pair"))
    with pytest.raises(ValueError, match=message):
        eagle.train_eagle(**bad)


def test_training_chain_passes_see_what_drafting_sees(pair):
    """eagle_chain_predictions (the chained training passes) equals drafting step by step with a cache."""

    torch.manual_seed(2)
    model = EagleDraftModel(pair.target, {"width": 64, "heads": 4, "kv_heads": 2, "intermediate": 96}).eval()
    n, depth = 9, 3
    feats, toks = torch.randn(1, n, pair.target.config.hidden_size), torch.randint(0, 2048, (1, n))
    with torch.no_grad():
        chained = eagle_chain_predictions(model, feats, toks, depth)[0]
        for j in range(depth - 1, n):
            for k in range(depth):  # step k + 1 of a chain whose last true row is j - k
                cache, t = new_cache(), j - k
                f = model(feats[0, :t + 1], toks[0, :t + 1], cache, position_ids=torch.arange(1, t + 2))[-1]
                for s in range(1, k + 1):
                    f = model(f[None], toks[0, t + s:t + s + 1], cache, position_ids=[t + s + 1])[-1]
                torch.testing.assert_close(chained[k * n + j], f, atol=1e-4, rtol=1e-4)
