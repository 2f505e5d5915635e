"""Requests the target writes itself (lab.training.self_requests; Magpie, Xu et al. 2024): whole, distinct,
reproducible, never a held-out prompt, and what chat-data answers with source="self"."""
import json

import pytest
import torch

from lab.training.self_requests import self_requests


def test_requests_are_whole_distinct_and_reproducible(smollm2_pair):
    state = torch.random.get_rng_state()
    first = self_requests(smollm2_pair, 3, seed=5, batch=4, max_new_tokens=48, log=lambda m: None)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's RNG is left alone
    assert len(first) == 3 and len(set(first)) == 3
    assert all(len(text.split()) >= 4 and "<|im_" not in text for text in first)
    assert self_requests(smollm2_pair, 3, seed=5, batch=4, max_new_tokens=48, log=lambda m: None) == first
    again = self_requests(smollm2_pair, 2, seed=5, batch=4, max_new_tokens=48, exclude=first[:1], log=lambda m: None)
    assert first[0] not in again


class _Killed(Exception):
    pass


def _kill_after(batches: int):
    """A log callback that raises once ``batches`` batches have been logged: a run killed at that point."""
    seen = []

    def log(message):
        seen.append(message)
        if len(seen) == batches:
            raise _Killed(message)
    return log


def test_a_killed_run_resumes_from_its_checkpoint_to_the_same_requests(smollm2_pair, tmp_path):
    settings = dict(seed=7, batch=2, max_new_tokens=48)
    whole = self_requests(smollm2_pair, 3, **settings, log=lambda m: None)
    checkpoint = tmp_path / "requests-checkpoint.json"
    with pytest.raises(_Killed):  # at most 2 kept per batch of 2: the first batch cannot finish the job
        self_requests(smollm2_pair, 3, **settings, log=_kill_after(1), checkpoint=checkpoint)
    saved = json.loads(checkpoint.read_text(encoding="utf-8"))
    assert 0 < len(saved["kept"]) < 3 and saved["kept"] == whole[:len(saved["kept"])]
    messages = []
    assert self_requests(smollm2_pair, 3, **settings, log=messages.append, checkpoint=checkpoint) == whole
    assert messages[0].startswith(f"self-written requests: resuming at {len(saved['kept'])}/3")
    # a checkpoint made with other settings is not resumed: the result is that seed's own
    other = self_requests(smollm2_pair, 3, seed=8, batch=2, max_new_tokens=48, log=lambda m: None)
    assert self_requests(smollm2_pair, 3, seed=8, batch=2, max_new_tokens=48, log=lambda m: None,
                         checkpoint=checkpoint) == other
    assert json.loads(checkpoint.read_text(encoding="utf-8"))["settings"]["seed"] == 8


def test_a_pair_without_a_chat_template_and_bad_counts_are_refused(pair, smollm2_pair):
    with pytest.raises(ValueError, match="chat template"):
        self_requests(pair, 2)
    with pytest.raises(ValueError, match="count"):
        self_requests(smollm2_pair, 0)


def test_chat_data_answers_the_self_written_requests_once(smollm2_pair, tmp_path, monkeypatch):
    import importlib

    from lab.training.chat_data import build_chat_data, chat_data_dir, load_chat_data

    module = importlib.import_module("lab.training.self_requests")  # the package exports the function by that name
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    calls = []
    monkeypatch.setattr(module, "self_requests",
                        lambda pair, count, seed, exclude, log, checkpoint: calls.append((count, checkpoint))
                        or ["Name a big red fruit."])
    folder = build_chat_data(smollm2_pair, prompts=1, shard_size=1, max_new_tokens=3, source="self",
                             log=lambda m: None)
    assert folder == chat_data_dir(smollm2_pair, 0, "self") and folder.name == "self-0"
    build_chat_data(smollm2_pair, prompts=1, shard_size=1, max_new_tokens=3, source="self", log=lambda m: None)
    assert calls == [(1, folder / "requests-checkpoint.json")]  # sampled once, read back from requests.json
    (sequence,) = load_chat_data(folder)
    assert sequence["kind"] == "self"
    assert smollm2_pair.decode(sequence["ids"][:sequence["answer_start"]].tolist()).count("Name a big red fruit.") == 1
    with pytest.raises(ValueError, match="holds 1 self-written requests, not 2"):  # never resampled over
        build_chat_data(smollm2_pair, prompts=2, shard_size=1, max_new_tokens=3, source="self", log=lambda m: None)
    assert len(calls) == 1
    with pytest.raises(ValueError, match="source must be one of"):
        chat_data_dir(smollm2_pair, 0, "web")
