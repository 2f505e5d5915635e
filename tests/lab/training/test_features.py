"""lab.training.features: target features and generations, cached per target, the caches read as data only."""

import copy
import pickle

import pytest
import torch

import lab.training.corpus
from lab import assets
from lab.training import corpus, features
from tests.lab.training.fakes import RAN, Planted


def test_target_generations_leaves_the_callers_rng_alone(pair, tmp_path, monkeypatch):
    """It seeds its samples with manual_seed, which reseeds the CPU and every CUDA generator: all must be restored
    (the CUDA half runs where there is a GPU)."""
    fake = torch.arange(3, 403, dtype=torch.int16) * 5 % 2000      # a fake corpus: no download, no cache
    monkeypatch.setattr(corpus, "corpus_ids", lambda pair_dir=None: (fake, fake[:100]))
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    torch.manual_seed(1234)
    cpu_before = torch.get_rng_state()
    cuda_before = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    features.target_generations(pair.target, 65, prompt_len=4, seq_len=6, seed=3)   # the second batch samples
    assert torch.equal(torch.get_rng_state(), cpu_before)
    if torch.cuda.is_available():
        assert all(torch.equal(a, b) for a, b in zip(torch.cuda.get_rng_state_all(), cuda_before))


@pytest.mark.parametrize("make", [
    lambda target: features.target_features(target, 3, seq_len=8, split="val"),
    lambda target: features.target_generations(target, 3, prompt_len=2, seq_len=5, split="val"),
], ids=["target_features", "target_generations"])
def test_a_planted_feature_cache_cannot_run_code(make, target, tmp_path, monkeypatch):
    """Both caches are read with weights_only=True: the file they wrote reads back, a pickle that calls a function
    put in its place is refused, even where torch.load's default still unpickles anything (torch < 2.6, or
    TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 as set here)."""
    fake = torch.arange(1, 61, dtype=torch.int16).repeat(5)  # ids of the tiny target's 64-token vocabulary
    monkeypatch.setattr(corpus, "corpus_ids", lambda pair_dir=None: (fake, fake))
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    first = make(target)
    (path,) = tmp_path.glob("*.pt")
    again = make(target)  # read from the cache
    assert torch.equal(again["ids"], first["ids"]) and torch.equal(again["hidden"], first["hidden"])
    torch.save({"ids": Planted(), "hidden": Planted()}, path)
    RAN.clear()
    with pytest.raises(pickle.UnpicklingError):
        make(target)
    assert RAN == []


def test_bad_windows_are_refused(target):
    with pytest.raises(ValueError, match="split must be 'train' or 'val'"):
        features.target_features(target, 2, seq_len=8, split="test")
    with pytest.raises(ValueError, match=r"seq_len must be at most the target's context \(256\)"):
        features.target_features(target, 2, seq_len=300)
    with pytest.raises(ValueError, match="sequences must be an integer >= 1"):
        features.target_generations(target, 0)
    with pytest.raises(ValueError, match=r"prompt_len must be in \[1, seq_len\)"):
        features.target_generations(target, 2, prompt_len=8, seq_len=8)


def test_target_generations_are_the_targets_own_continuations(pair, tmp_path, monkeypatch):
    from lab.decode import generate

    corpus = torch.arange(3, 403, dtype=torch.int16) * 5 % 2000      # a fake corpus: no download, no cache
    monkeypatch.setattr(lab.training.corpus, "corpus_ids", lambda pair_dir=None: (corpus, corpus[:100]))
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    out = features.target_generations(pair.target, 66, prompt_len=4, seq_len=12, seed=3)
    ids, hidden = out["ids"], out["hidden"]
    assert ids.shape == (66, 12) and ids.dtype == torch.long and hidden.shape == (66, 12, 384)
    assert hidden.dtype == torch.float16
    starts = [int(torch.nonzero(corpus == int(row[0]))[0]) for row in ids]
    assert all(torch.equal(row[:4], corpus[s:s + 4].long()) for row, s in zip(ids, starts))   # corpus prompts
    # the first batch of 64 is greedy: token for token what lab's own greedy decoding gives
    for row in ids[:3]:
        assert row[4:].tolist() == generate(pair.target, row[:4].tolist(), max_new_tokens=8).tokens
    # the next batch samples at T = 1: not the greedy continuation
    sampled = [row[4:].tolist() != generate(pair.target, row[:4].tolist(), max_new_tokens=8).tokens for row in ids[64:]]
    assert any(sampled)
    with torch.no_grad():
        fresh = pair.target.model(input_ids=ids[:2]).last_hidden_state
    assert torch.allclose(hidden[:2].float(), fresh, atol=2e-2, rtol=1e-2)
    # cached: the second call reads the file instead of generating
    monkeypatch.setattr(pair.target, "generate", lambda *a, **k: pytest.fail("generated again"))
    assert torch.equal(features.target_generations(pair.target, 66, prompt_len=4, seq_len=12, seed=3)["ids"], ids)
    # another target (here: one weight changed) does not read this one's cache
    other = copy.deepcopy(pair.target)
    with torch.no_grad():
        other.model.norm.weight[0] += 1.0
    assert assets.weights_key(other) != assets.weights_key(pair.target)
    monkeypatch.setattr(other, "generate", lambda *a, **k: pytest.fail("generated for the other target"))
    with pytest.raises(pytest.fail.Exception, match="generated for the other target"):
        features.target_generations(other, 66, prompt_len=4, seq_len=12, seed=3)
    with pytest.raises(ValueError, match="split"):
        features.target_generations(pair.target, 2, split="test")
    with pytest.raises(ValueError, match="prompt_len"):
        features.target_generations(pair.target, 2, prompt_len=12, seq_len=12)
