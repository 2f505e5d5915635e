"""lab.training.medusa: train_medusa records the target the heads were trained for. Fake features, tmp folders."""
import dataclasses
import json

import pytest

from lab.assets import TARGET_KEY, target_weights_key
from lab.training import medusa
from tests.lab.training.fakes import fake_features, retrained


def test_train_medusa_records_the_target(pair, tmp_path, monkeypatch):
    import copy

    import lab.models
    from lab.drafters.medusa import MedusaHeads

    target = copy.deepcopy(pair.target).cpu()  # training freezes it in place: the session pair stays as it was
    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: dataclasses.replace(pair, target=target))
    monkeypatch.setattr(medusa, "target_features", fake_features)
    monkeypatch.setattr(medusa, "target_generations", fake_features)
    medusa.train_medusa(steps=1, out_dir=tmp_path / "medusa", num_heads=2, sequences=4, prompt_len=4, seq_len=12,
                        batch=2, warmup=1, val_sequences=2)
    assert json.loads((tmp_path / "medusa" / "config.json").read_text())[TARGET_KEY] == target_weights_key(target)
    assert {"README.md", "training.json", "model.safetensors"} <= {p.name for p in (tmp_path / "medusa").iterdir()}
    with pytest.raises(ValueError, match="trained for another target"):
        MedusaHeads.load(tmp_path / "medusa", target=retrained(target))


@pytest.mark.parametrize("bad", [{"steps": 0}, {"batch": 0}, {"steps": 1.5}])
def test_bad_arguments_are_refused_before_any_work(bad, monkeypatch):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pytest.fail("loaded the pair"))
    name = next(iter(bad))
    with pytest.raises(ValueError, match=f"{name} must be an integer >= 1"):
        medusa.train_medusa(**bad)
