"""lab.training.checkpoints: models are saved as float16 safetensors and read back from safetensors only."""
import pytest
import torch

from lab.training.checkpoints import load_checkpoint, save_model
from tests.helpers import tiny_llama


def test_saved_in_float16_and_read_back_in_float32(tmp_path):
    model = tiny_llama(0, layers=1, hidden=16).cpu()
    save_model(model, None, tmp_path / "m")
    assert (tmp_path / "m" / "model.safetensors").is_file()
    assert next(model.parameters()).dtype == torch.float32  # the caller's model stays in float32
    loaded = load_checkpoint(tmp_path / "m")
    assert next(loaded.parameters()).dtype == torch.float32
    want = model.lm_head.weight.half().float()
    assert torch.equal(loaded.lm_head.weight, want)


def test_a_pickled_checkpoint_is_never_read(tmp_path):
    """A folder with only ``pytorch_model.bin`` (a pickle: loading it may run code) raises instead of loading, though
    transformers' from_pretrained would read it by default."""
    model = tiny_llama(0, layers=1, hidden=16).cpu()
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(OSError, match="model.safetensors"):
        load_checkpoint(tmp_path)


def test_a_training_state_resumes_only_the_same_plan(tmp_path):
    from lab.training.checkpoints import resume_training_state, save_training_state
    from lab.training.loop import make_optimizer

    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    opt = make_optimizer(model, 1e-3)
    model(torch.ones(2, 4)).sum().backward()
    opt.step()  # an optimizer with state to save
    plan = {"recipe": {"steps": 9}, "sequences": 40, "answer_tokens": 900}
    save_training_state(tmp_path / "ckpt", model, opt, plan, 5, [3, 1, 2], [{"step": 0}], 1.5)
    assert not (tmp_path / "ckpt.partial").exists()
    torch.manual_seed(3)
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    fresh_opt = make_optimizer(fresh, 1e-3)
    assert resume_training_state(tmp_path / "ckpt", fresh, fresh_opt, plan) == ([{"step": 0}], [3, 1, 2], 5, 1.5)
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)
    assert fresh_opt.state_dict()["state"].keys() == opt.state_dict()["state"].keys()
    more_data = dict(plan, sequences=80)  # another seed's shards reshuffle the split: start afresh
    assert resume_training_state(tmp_path / "ckpt", fresh, fresh_opt, more_data) == ([], [], 0, 0.0)
    assert resume_training_state(tmp_path / "missing", fresh, fresh_opt, plan) == ([], [], 0, 0.0)


def _saved_state(folder, step, seed=2):
    """A small model and optimizer with state, saved at ``step``; returns the model's weights."""
    from lab.training.checkpoints import save_training_state
    from lab.training.loop import make_optimizer

    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 3)
    opt = make_optimizer(model, 1e-3)
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    save_training_state(folder, model, opt, {"recipe": 1}, step, [step], [], 0.5)
    return model.state_dict()


def _resumed(folder, plan=None, log=None):
    from lab.training.checkpoints import resume_training_state
    from lab.training.loop import make_optimizer

    model = torch.nn.Linear(4, 3)
    step = resume_training_state(folder, model, make_optimizer(model, 1e-3), plan or {"recipe": 1}, log)[2]
    return step, model.state_dict()


def test_a_kill_during_a_save_leaves_a_checkpoint_to_resume(tmp_path):
    """A save writes ``<folder>.partial``, moves the old checkpoint to ``<folder>.old``, moves the new one in, then
    deletes the old: killed between the moves, the run resumes from the newest complete checkpoint left (moved back
    into place), and a partial save (no progress.json yet) is never read."""
    from lab.training.checkpoints import discard_training_state

    folder = tmp_path / "ckpt"
    _saved_state(folder, 100)
    assert _resumed(folder)[0] == 100
    second = _saved_state(folder, 200, seed=3)  # a second save replaces the first, leaving nothing beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    folder.rename(tmp_path / "ckpt.old")  # killed after moving the old one aside
    step, weights = _resumed(folder)
    assert step == 200 and all(torch.equal(weights[k], second[k]) for k in weights)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # moved back in
    _saved_state(tmp_path / "staging", 300)
    (tmp_path / "staging").rename(tmp_path / "ckpt.partial")  # complete beside the folder: the newest
    assert _resumed(folder)[0] == 300 and sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    _saved_state(tmp_path / "staging", 400)
    (tmp_path / "staging" / "progress.json").unlink()  # killed while writing it
    (tmp_path / "staging").rename(tmp_path / "ckpt.partial")
    assert _resumed(folder)[0] == 300
    discard_training_state(folder)
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_of_another_plan_is_set_aside_with_a_word(tmp_path):
    lines = []
    _saved_state(tmp_path / "ckpt", 100)
    assert _resumed(tmp_path / "ckpt", {"recipe": 2}, lines.append)[0] == 0
    assert len(lines) == 1 and "other settings or data: starting from step 0" in lines[0]


@pytest.mark.parametrize("kill_at", [1, 2, 3])
def test_a_save_killed_at_any_rename_resumes_from_the_newest_whole_checkpoint(tmp_path, monkeypatch, kill_at):
    """The save is killed at each of its renames (progress.json into place, the old folder aside, the new one in):
    a resume finds step 100 or step 200, never nothing, and after resuming the next save cannot lose it."""
    from pathlib import Path

    folder = tmp_path / "ckpt"
    _saved_state(folder, 100)
    rename, calls = Path.rename, []

    def killed(self, target):
        calls.append(self)
        if len(calls) == kill_at:
            raise KeyboardInterrupt
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", killed)
    with pytest.raises(KeyboardInterrupt):
        _saved_state(folder, 200, seed=3)
    monkeypatch.setattr(Path, "rename", rename)
    step = _resumed(folder)[0]
    assert step == (100 if kill_at == 1 else 200)  # from the 2nd rename on, the new checkpoint is whole
    assert (folder / "progress.json").exists()  # and in place: the next save starts by clearing .partial
    _saved_state(folder, 300)
    assert _resumed(folder)[0] == 300 and sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
