"""Review of the command line (``python -m lab bench | demo | arena``) and the instructor demo (widgets.race):
what the bench times, drafters a hub pair does not have, and the race's controls and summary.

Short runs on the bundled pair (2 to 12 new tokens); the hub pairs are stood in for by the bundled models under
another name, so nothing here needs a network.
"""
from __future__ import annotations

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


# --- a hub pair has no Medusa heads, no EAGLE draft, and (GPT-2) no Llama layers for an early exit ---------------------
@pytest.fixture(scope="module")
def gpt2_pair(pair):
    """A stand-in for ``load_pair("gpt2")``: two tiny random GPT-2 models on the bundled tokenizer."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from lab.models import ModelPair

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(pair.tokenizer), n_positions=1024, n_embd=32, n_layer=2, n_head=2)
    target, draft = GPT2LMHeadModel(config).eval(), GPT2LMHeadModel(config).eval()
    return ModelPair(name="gpt2", target=target, draft=draft, tokenizer=pair.tokenizer, device=torch.device("cpu"),
                     dtype=torch.float32)


@pytest.fixture
def hub_pair(gpt2_pair, monkeypatch):
    """``load_pair`` returns the stand-in for any hub preset (and fails the test for the bundled pair)."""
    import lab.models

    def load(name="shakespeare", **kwargs):
        assert name == "gpt2", name
        return gpt2_pair

    monkeypatch.setattr(lab.models, "load_pair", load)
    return gpt2_pair


@pytest.mark.parametrize("drafter", ["medusa", "eagle"])
def test_demo_with_a_hub_pair_refuses_trained_drafters_before_loading(drafter, monkeypatch, capsys):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *a, **k: pytest.fail("must refuse before loading"))
    assert cli.main(["demo", "--pair", "gpt2", "--drafter", drafter, "--max-new-tokens", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.err.startswith(f"python -m lab demo: error: --drafter: {drafter} needs ")
    assert "only the bundled shakespeare pair has" in captured.err


def test_demo_early_exit_on_gpt2_is_one_line_naming_the_flag(hub_pair, capsys):
    assert cli.main(["demo", "--pair", "gpt2", "--drafter", "early-exit", "--max-new-tokens", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("python -m lab demo: error: --drafter: early-exit does not work with --pair gpt2: ")
    assert "Llama-style" in captured.err


def test_demo_with_a_hub_pair_runs_the_drafters_it_has(hub_pair, capsys):
    import json

    assert cli.main(["demo", "--pair", "gpt2", "--drafter", "model", "--max-new-tokens", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["tokens"]) == 3 and out["stats"]["new_tokens"] == 3


def test_bench_with_a_hub_pair_skips_the_drafters_it_lacks_and_says_so(hub_pair, capsys):
    assert cli.main(["bench", "--pair", "gpt2", "--prompts", "1", "--max-new-tokens", "2"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    out = captured.out
    methods = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")]
    methods = [m for m in methods if m not in ("method", "---")]
    expected = ["lab autoregressive", "lab speculative", "HF generate", "HF assisted", "lab prompt lookup",
                "HF prompt lookup", "lab lookahead"]
    assert methods == expected * 2  # both tables
    assert out.count("all seven produced identical tokens: yes") == 2
    assert out.count("not run with pair gpt2: lab Medusa (") == 2
    assert "lab EAGLE (" in out and "lab early exit (" in out


def test_arena_with_a_hub_pair_skips_the_drafters_it_lacks(hub_pair, monkeypatch, capsys):
    import lab.bench

    seen = {}
    real = lab.bench.run_arena

    def spy(pair, **kwargs):
        seen.update(kwargs)
        kwargs["tasks"] = ("prose",)  # one task keeps this short
        return real(pair, **kwargs, progress=False)

    monkeypatch.setattr(lab.bench, "run_arena", spy)
    assert cli.main(["arena", "--pair", "gpt2", "--prompts", "1", "--max-new-tokens", "2", "--json"]) == 0
    captured = capsys.readouterr()
    assert seen["drafters"] == ("model", "ngram", "lookahead")
    assert "not run with pair gpt2: medusa (" in captured.err


# --- the instructor demo: RaceDashboard ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dashboard(pair):
    from widgets.race import RaceDashboard

    return RaceDashboard(pair, max_new_tokens=6)


def test_race_n_slider_is_disabled_for_drafters_that_set_their_own_draft(dashboard):
    """Lookahead's window and Medusa's tree set what they draft (python -m lab demo refuses --n-draft for them): the
    N slider must not look as if it did something."""
    for kind, disabled in (("lookahead", True), ("medusa", True), ("model", False), ("ngram", False),
                           ("eagle", False), ("early-exit", False), ("medusa", True), ("model", False)):
        dashboard.drafter_choice.value = kind
        assert dashboard.n_draft.disabled is disabled, kind


def test_race_medusa_ignores_n_loads_its_heads_once_and_records_no_n(dashboard):
    dashboard.race(drafter="medusa", temperature=0.0)
    first = dashboard.drafter
    assert dashboard.settings["n_draft"] is None
    dashboard.n_draft.value = 9 if dashboard.n_draft.value != 9 else 3
    dashboard.race(drafter="medusa")
    assert dashboard.drafter is first  # the same heads, not a second copy read from disk for another N
    assert dashboard.settings["n_draft"] is None and dashboard.identical is True
    dashboard.race(drafter="model", n_draft=2)
    assert dashboard.settings["n_draft"] == 2 and dashboard.drafter.n_draft == 2


@pytest.mark.parametrize("kind", ["lookahead", "medusa"])
def test_race_refuses_an_explicit_n_for_drafters_that_take_none(dashboard, kind):
    with pytest.raises(ValueError, match=f"n_draft does not apply to drafter {kind!r}"):
        dashboard.race(drafter=kind, n_draft=6)


@pytest.mark.parametrize("kind", ["lookahead", "medusa"])
def test_race_dashboard_refuses_an_explicit_n_for_drafters_that_take_none(pair, kind):
    """The constructor follows race(): an N that would be silently ignored is an error, the default is not."""
    from widgets.race import RaceDashboard

    with pytest.raises(ValueError, match=f"n_draft does not apply to drafter {kind!r}"):
        RaceDashboard(pair, drafter=kind, n_draft=8, max_new_tokens=6)
    built = RaceDashboard(pair, drafter=kind, max_new_tokens=6)
    assert built.n_draft.disabled is True and built.n_draft.value == 4
    assert RaceDashboard(pair, drafter="model", n_draft=7, max_new_tokens=6).n_draft.value == 7


def test_race_summary_at_t_above_0_does_not_claim_the_texts_differ_when_they_are_equal(dashboard):
    dashboard.race(drafter="model", n_draft=4, temperature=0.0)
    greedy = dashboard.summary.value
    assert "identical token for token (greedy)" in greedy
    settings = {**dashboard.settings, "temperature": 0.7}
    dashboard.identical = True  # a short sampled race can give the same tokens on both sides
    same = dashboard._summary_html(settings)
    assert "differ" not in same and "the same tokens" in same
    dashboard.identical = False
    other = dashboard._summary_html(settings)
    assert "the texts differ" in other


# --- python -m lab train: --threads reaches the card's measurements too --------------------------------------------
def test_train_card_honours_threads(monkeypatch, tmp_path, capsys):
    """``train card`` times the pair's decoding (cost per token, cost ratio c): --threads must apply to it, as it
    does to the training commands; no training runs here (write_card is replaced by a recorder)."""
    import torch

    from lab import train

    seen = []
    card = tmp_path / "README.md"
    card.write_text("card\n")

    def fake_write_card(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return card

    monkeypatch.setattr(train, "write_card", fake_write_card)
    monkeypatch.setattr(train, "PAIR_DIR", tmp_path)
    monkeypatch.setattr(train, "train_pair", lambda **k: pytest.fail("train card must not train"))
    before = torch.get_num_threads()
    want = 1 if before != 1 else 2
    try:
        assert cli.main(["train", "card", "--threads", str(want)]) == 0
    finally:
        torch.set_num_threads(before)
    assert seen == [want]
    assert capsys.readouterr().out == "card\n\n"


def test_bench_n_draft_help_says_which_methods_it_sets():
    """bench's --n-draft sets the draft model's N (ours and transformers' assistant), EAGLE's and the early exit's;
    prompt lookup keeps 5 and Lookahead / Medusa their window / tree, as the table's header shows."""
    bench = next(a for a in cli.build_parser()._subparsers._group_actions[0].choices["bench"]._actions
                 if "--n-draft" in a.option_strings)
    for words in ("draft model", "EAGLE", "early exit", "prompt lookup", "Lookahead", "Medusa"):
        assert words in bench.help, words
