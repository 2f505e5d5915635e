"""Fixtures of the training tests: nothing is downloaded and every cache lives in tmp."""
import pytest

from tests.lab.training.fakes import WORKS


@pytest.fixture
def no_download(tmp_path, monkeypatch):
    """The made-up corpus instead of the real one, and a cache in tmp; returns the list fetch_corpus appends to."""
    import lab.training.corpus
    import lab.training.pair

    calls = []
    (tmp_path / "cache").mkdir()
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    for module in (lab.training.corpus, lab.training.pair):  # each looks fetch_corpus up in its own namespace
        monkeypatch.setattr(module, "fetch_corpus", lambda: calls.append(1) or WORKS)
    return calls
