"""Distillation data of the real pair: the target's answers with its top-k log-probabilities, in resumable shards."""
import pytest

from lab.training.chat_data import TOP_K, build_chat_data, chat_data_dir, load_chat_data


@pytest.fixture
def tiny_data(smollm2_pair, tmp_path, monkeypatch):
    """Answers of 4 tokens to one prompt of each kind, two per shard, in a cache under tmp; short prompts only."""
    import lab.training.chat_data as module

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    prompts = [("chat", "Name a colour."), ("code", "Write print('hi') in Python."),
               ("structured", "Give a JSON object with a key a."), ("copy_edit", "Repeat exactly: red fox.")]
    monkeypatch.setattr(module, "training_prompts", lambda count, seed, exclude=(): prompts[:count])
    folder = build_chat_data(smollm2_pair, prompts=4, shard_size=2, max_new_tokens=4, log=lambda m: None)
    return folder, prompts


def test_shards_hold_the_targets_greedy_answers_and_top_k(smollm2_pair, tiny_data):
    folder, prompts = tiny_data
    assert folder == chat_data_dir(smollm2_pair, 0)
    assert sorted(p.name for p in folder.glob("shard-*")) == ["shard-00000.safetensors", "shard-00001.safetensors"]
    sequences = load_chat_data(folder.parent)
    assert sorted(s["kind"] for s in sequences) == sorted(kind for kind, _ in prompts)
    for s in sequences:
        answer = s["ids"][s["answer_start"]:]
        assert 1 <= len(answer) <= 4 and s["topk_ids"].shape == (len(answer), TOP_K)
        assert (s["topk_logprobs"] <= 0).all() and (s["topk_logprobs"].diff(dim=-1) <= 1e-3).all()
        # both shards are greedy (the fourth of every four samples): each answer token is the target's top-1
        assert s["topk_ids"][:, 0].tolist() == answer.tolist()
        prompt = s["ids"][:s["answer_start"]].tolist()
        text = smollm2_pair.decode(prompt)
        assert prompt[0] == 1 and text.rstrip().endswith("assistant")  # the chat template's assistant prefix


def test_a_second_build_resumes_and_other_settings_are_refused(smollm2_pair, tiny_data):
    folder, _ = tiny_data
    before = {p.name: p.stat().st_mtime_ns for p in folder.glob("shard-*")}
    build_chat_data(smollm2_pair, prompts=4, shard_size=2, max_new_tokens=4, log=lambda m: None)
    assert {p.name: p.stat().st_mtime_ns for p in folder.glob("shard-*")} == before
    with pytest.raises(ValueError, match="other settings"):
        build_chat_data(smollm2_pair, prompts=4, shard_size=2, max_new_tokens=5, log=lambda m: None)


def test_only_the_seed_and_self_folders_are_read(tiny_data):
    """A shard anywhere else under the data folder (a backup, an old run) is not training data."""
    import shutil

    folder, prompts = tiny_data
    stray = folder.parent / "backup" / folder.name
    stray.mkdir(parents=True)
    shutil.copy(folder / "shard-00000.safetensors", stray / "shard-00000.safetensors")
    assert len(load_chat_data(folder.parent)) == len(prompts)
    assert len(load_chat_data(folder)) == len(prompts)   # a seed folder itself reads its own shards


def test_no_shards_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="train chat-data"):
        load_chat_data(tmp_path)


def test_a_pair_without_a_chat_template_is_refused(pair):
    with pytest.raises(ValueError, match="chat template"):
        build_chat_data(pair, prompts=4)


def _asked(prompt: list[int], answer: list[int], kind: str = "chat") -> dict:
    import torch

    return {"ids": torch.tensor(prompt + answer), "answer_start": len(prompt), "kind": kind,
            "topk_ids": torch.zeros(len(answer), TOP_K, dtype=torch.long)}


def test_the_split_keeps_every_answer_to_a_request_on_one_side():
    """The templated requests repeat, and greedy answers to a repeated request are the same text: a request's
    answers must all be held out or all train, or the held-out agreement measures answers the draft learnt."""
    from lab.training.chat_data import split_by_request

    requests = [[1, 2, r] for r in range(40)]
    sequences = [_asked(requests[i % 40], [5, 6, 7]) for i in range(100)]  # 20 requests asked 3 times, 20 twice
    for seed in range(5):
        held, train = split_by_request(sequences, seed, 0.1)
        assert sorted(held + train) == list(range(100))
        held_requests = {i % 40 for i in held}
        assert held_requests.isdisjoint(i % 40 for i in train)
        assert 10 <= len(held) <= 12  # requests are taken whole until 10 % of the sequences are held out
        assert (held, train) == split_by_request(sequences, seed, 0.1)  # the same split every time
    assert len(split_by_request(sequences, 0, 0.0)[0]) >= 8  # a share of 0 still holds out 8
    import numpy as np

    assert split_by_request(sequences, 1, np.float32(0.1)) == split_by_request(sequences, 1, 0.1)
    with pytest.raises(ValueError, match=r"held_out_share must be a number in \[0, 1\), got 1"):
        split_by_request(sequences, 0, 1)
    with pytest.raises(ValueError, match="leaves none to train on"):
        split_by_request(sequences[:8], 0, 0.5)  # 8 held out of 8


def test_the_data_fingerprint_names_the_answers_and_their_order():
    from lab.training.chat_data import data_digest

    data = [_asked([1, 2], [3, 4]), _asked([1, 2], [3, 5])]
    assert data_digest(data) == data_digest([_asked([1, 2], [3, 4]), _asked([1, 2], [3, 5])])
    assert data_digest(data) != data_digest(data[::-1])  # another order: another split and batches
    assert data_digest(data) != data_digest([_asked([1, 2], [3, 4]), _asked([1, 2], [3, 6])])  # same counts
    assert data_digest(data) != data_digest([_asked([1], [2, 3, 4]), _asked([1, 2], [3, 5])])  # prompt vs answer
    rescored = [_asked([1, 2], [3, 4]), _asked([1, 2], [3, 5])]
    rescored[1]["topk_ids"] = rescored[1]["topk_ids"] + 1  # the same answers, other top-k scores
    assert data_digest(data) != data_digest(rescored)


@pytest.mark.parametrize("change, message", [
    ({"steps": 0}, r"recipe.steps must be an integer >= 1, got 0"),
    ({"batch": 0}, r"recipe.batch must be an integer >= 1, got 0"),
    ({"warmup": -1}, r"recipe.warmup must be an integer >= 0, got -1"),
    ({"lr": float("nan")}, r"recipe.lr must be a finite number >= 0, got nan"),
    ({"held_out_share": 1.0}, r"recipe.held_out_share must be in \[0, 1\), got 1.0")])
@pytest.mark.parametrize("module, recipe", [("chat_draft", "ChatDraftRecipe"), ("chat_eagle", "ChatEagleRecipe"),
                                            ("chat_medusa", "ChatMedusaRecipe"), ("chat_mtp", "ChatMTPRecipe")])
def test_a_bad_recipe_is_refused_before_any_data_loads(module, recipe, change, message, smollm2_pair, monkeypatch):
    """Untrained weights saved after steps=0, or 'max() arg is an empty sequence' from batch=0, were what these
    recipes gave before they checked their settings."""
    import importlib
    from dataclasses import replace

    trainer = importlib.import_module(f"lab.training.{module}")
    monkeypatch.setattr(trainer, "load_chat_data", lambda *a: pytest.fail("loaded data"), raising=False)
    monkeypatch.setattr(trainer, "feature_data", lambda *a, **k: pytest.fail("loaded data"), raising=False)
    with pytest.raises(ValueError, match=message):
        getattr(trainer, f"train_{module}")(smollm2_pair, replace(getattr(trainer, recipe)(), **change),
                                            log=lambda m: None)
