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
