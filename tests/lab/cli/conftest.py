"""Fixtures of the command-line tests: stand-ins for the model work, so that option errors are checked without
loading a model, and a GPT-2 stand-in for the hub pairs (no network)."""
from __future__ import annotations

import pytest

from tests.lab.cli.helpers import CharPair, gpt2_stand_in


@pytest.fixture(autouse=True)
def _threads_left_alone(monkeypatch):
    """demo, bench and arena fit torch's threads to the machine's load (lab.models.fit_threads) and say so on stderr
    when that changed them: these tests read stderr line by line, so the load of whatever else runs must not add a
    line (one did, under a parallel job), nor a half-second sample each run. The tests of the fitting set their own."""
    import lab.models

    monkeypatch.setattr(lab.models, "fit_threads", lambda: "torch threads left as they were (test)")


@pytest.fixture
def no_model_work(monkeypatch):
    """Make every command's model work fail the test if it is reached."""
    import lab.cli.arena
    import lab.cli.bench
    import lab.cli.demo

    def forbidden(*args, **kwargs):
        raise AssertionError("the command reached model work; the bad option should have stopped it")

    for module in (lab.cli.arena, lab.cli.bench, lab.cli.demo):
        monkeypatch.setattr(module, "run", forbidden)


@pytest.fixture
def char_pair(monkeypatch):
    """``load_pair`` returns a :class:`CharPair`; generating, timing or the arena fail the test if reached."""
    import lab.arena
    import lab.bench
    import lab.decode
    import lab.models

    def forbidden(*args, **kwargs):
        raise AssertionError("the command started generating; the context check should have stopped it")

    monkeypatch.setattr(lab.models, "load_pair", lambda name="shakespeare", **kwargs: CharPair())
    for module, name in ((lab.decode, "generate"), (lab.bench, "run_bench"), (lab.arena, "run_arena"),
                         (lab.arena, "compare_adaptive")):
        monkeypatch.setattr(module, name, forbidden)


@pytest.fixture(scope="session")
def gpt2_pair(pair):
    """A stand-in for ``load_pair("gpt2")``: two tiny random GPT-2 models on the bundled tokenizer."""
    return gpt2_stand_in(pair)


@pytest.fixture
def hub_pair(gpt2_pair, monkeypatch):
    """``load_pair`` returns the stand-in for any hub preset (and fails the test for the bundled pair)."""
    import lab.models

    def load(name="shakespeare", **kwargs):
        assert name == "gpt2", name
        return gpt2_pair

    monkeypatch.setattr(lab.models, "load_pair", load)
    return gpt2_pair
