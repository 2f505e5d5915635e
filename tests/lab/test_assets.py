"""lab.assets: the weight fingerprints that tie Medusa heads and EAGLE drafts to the target they were trained for,
and the committed ones recording the bundled target. ``lab/assets`` is only read."""
import copy
import dataclasses
import json

import pytest
import torch

from lab.assets import EAGLE_DIR, MEDUSA_DIR, PAIR_DIR, TARGET_KEY, check_target_key, target_weights_key, weights_key


@pytest.fixture(scope="module")
def other(pair):
    """The bundled pair with a re-trained target (here: one weight changed); the session pair is left as it was."""
    target = copy.deepcopy(pair.target)
    with torch.no_grad():
        target.model.norm.weight[0] += 1.0
    return dataclasses.replace(pair, target=target)


def test_paths_name_the_bundled_files():
    assert (PAIR_DIR / "target" / "config.json").is_file() and (PAIR_DIR / "tokenizer.json").is_file()
    assert MEDUSA_DIR == PAIR_DIR / "medusa" and EAGLE_DIR == PAIR_DIR / "eagle"


def test_target_weights_key_names_the_weights_not_their_dtype(pair, other):
    key = target_weights_key(pair.target)
    assert len(key) == 12 and target_weights_key(other.target) != key
    for dtype in (torch.float16, torch.bfloat16):
        assert target_weights_key(copy.deepcopy(pair.target).to(dtype)) == key
    assert weights_key(pair.target) != weights_key(pair.target, dtype=torch.bfloat16)  # caches: as is
    # remembered per target, but not past an in-place change
    target = copy.deepcopy(pair.target)
    assert target_weights_key(target) == key
    with torch.no_grad():
        target.model.norm.weight[0] += 1.0
    assert target_weights_key(target) == target_weights_key(other.target)
    target.load_state_dict(pair.target.state_dict())
    assert target_weights_key(target) == key


def test_check_target_key_refuses_only_a_recorded_other_target(target, draft):
    check_target_key({}, target, "somewhere", "heads", "retrain")  # nothing recorded: unchecked
    check_target_key({TARGET_KEY: target_weights_key(target)}, target, "somewhere", "heads", "retrain")
    with pytest.raises(ValueError, match="somewhere holds heads trained for another target; retrain with `retrain`"):
        check_target_key({TARGET_KEY: target_weights_key(target)}, draft, "somewhere", "heads", "retrain")


def test_committed_medusa_and_eagle_record_the_bundled_target(pair):
    from lab.drafters import EagleDrafter, MedusaDrafter

    key = target_weights_key(pair.target)
    for folder in (MEDUSA_DIR, EAGLE_DIR):
        assert json.loads((folder / "config.json").read_text())[TARGET_KEY] == key, folder
    assert MedusaDrafter.from_pretrained(pair).heads.num_heads == 3
    assert EagleDrafter.from_pretrained(pair).model.config["feature_size"] == 384


def test_medusa_refuses_heads_of_another_target(pair, other, tmp_path):
    from lab.drafters import MedusaDrafter
    from lab.drafters.medusa import MedusaHeads

    message = r"medusa holds Medusa heads trained for another target; retrain with `python -m lab train medusa`"
    with pytest.raises(ValueError, match=message):
        MedusaDrafter.from_pretrained(other)
    with pytest.raises(ValueError, match="trained for another target"):
        MedusaHeads.load(MEDUSA_DIR, target=other.target)
    # heads saved for a target load for it and not for another
    MedusaHeads.from_target(other.target).save(tmp_path / "medusa", target=other.target)
    assert MedusaHeads.load(tmp_path / "medusa", target=other.target).num_heads == 3
    assert MedusaDrafter.from_pretrained(other, directory=tmp_path / "medusa").heads.num_heads == 3
    with pytest.raises(ValueError, match=str(tmp_path / "medusa")):
        MedusaDrafter.from_pretrained(pair, directory=tmp_path / "medusa")
    # a config without the record (saved without a target, or made before it existed) loads unchecked
    MedusaHeads.from_target(other.target).save(tmp_path / "plain")
    assert TARGET_KEY not in json.loads((tmp_path / "plain" / "config.json").read_text())
    assert MedusaDrafter.from_pretrained(pair, directory=tmp_path / "plain").heads.num_heads == 3


def test_eagle_refuses_a_draft_of_another_target(pair, other, tmp_path):
    from lab.drafters import EagleDrafter
    from lab.drafters.eagle import EagleDraftModel

    message = r"eagle holds an EAGLE draft trained for another target; retrain with `python -m lab train eagle`"
    with pytest.raises(ValueError, match=message):
        EagleDrafter.from_pretrained(other)
    with pytest.raises(ValueError, match="trained for another target"):
        EagleDraftModel.from_pretrained(other.target, EAGLE_DIR)
    small = {"width": 32, "heads": 2, "kv_heads": 2, "intermediate": 48}
    EagleDraftModel(other.target, small).save_pretrained(tmp_path / "eagle")
    config = json.loads((tmp_path / "eagle" / "config.json").read_text())
    assert config[TARGET_KEY] == target_weights_key(other.target)
    assert EagleDraftModel.from_pretrained(other.target, tmp_path / "eagle").config["width"] == 32
    with pytest.raises(ValueError, match=str(tmp_path / "eagle")):
        EagleDraftModel.from_pretrained(pair.target, tmp_path / "eagle")
    del config[TARGET_KEY]  # a config from before the record: loads unchecked
    (tmp_path / "eagle" / "config.json").write_text(json.dumps(config))
    assert EagleDraftModel.from_pretrained(pair.target, tmp_path / "eagle").config["width"] == 32
