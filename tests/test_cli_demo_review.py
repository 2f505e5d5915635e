"""Review of the command line (``python -m lab bench | demo | arena``) and the instructor demo (widgets.race):
what the bench times, drafters a hub pair does not have, and the race's controls and summary.

Short runs on the bundled pair (2 to 12 new tokens); the hub pairs are stood in for by the bundled models under
another name, so nothing here needs a network.
"""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from lab import cli


@pytest.fixture(scope="module")
def pair():
    from lab.models import load_pair

    return load_pair("shakespeare", device="cpu")


# --- python -m lab bench: the timed region holds the decoding only ------------------------------------------------
def test_bench_builds_every_drafter_outside_the_timed_region(pair, monkeypatch):
    """Medusa heads and the EAGLE draft are read from disk when their drafters are built (tens of ms, a sizeable
    share of a 128-token run): the bench's tokens/s must not count that, as its header promises decoding time."""
    import lab.bench
    import lab.drafters
    import time as real_time

    events = []
    fake_time = SimpleNamespace(perf_counter=lambda: (events.append("clock"), real_time.perf_counter())[1])
    monkeypatch.setattr(lab.bench, "time", fake_time)

    def logged(make):
        def build(*args, **kwargs):
            events.append("build")
            return make(*args, **kwargs)
        return build

    monkeypatch.setattr(cli, "make_drafter", logged(cli.make_drafter))
    for name in ("DraftModelDrafter", "PromptLookupDrafter", "LookaheadDrafter"):
        monkeypatch.setattr(lab.drafters, name, logged(getattr(lab.drafters, name)))
    result = lab.bench.run_bench(pair, ["ROMEO.\n"], max_new_tokens=2, extra=lab.bench.EXTRA_METHODS)
    assert len(result["rows"]) == 10
    clocks = [i for i, event in enumerate(events) if event == "clock"]
    assert len(clocks) == 2 * 10  # one start and one stop per method and prompt
    builds = [i for i, event in enumerate(events) if event == "build"]
    assert len(builds) >= 2 * 7  # the seven lab drafters, for the warm-up and the prompt
    for start, stop in zip(clocks[::2], clocks[1::2]):
        inside = [i for i in builds if start < i < stop]
        assert inside == [], f"a drafter was built while the clock ran (events {start}..{stop}: {events})"
