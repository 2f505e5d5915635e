"""RaceDashboard (widgets/race.py, the instructor demo): kernel-side behaviour of short races on the bundled pair.

The browser side (button, live streams, speedup shown under Voila) is checked by tests/browser/test_browser.py.
"""
import json
import math

import pytest
import torch

from lab.drafters import PromptLookupDrafter
from lab.trace import StepRecord
from lab.train import PAIR_DIR
from widgets.race import FREE_TEXT, RaceDashboard, chain_view

TOKENS = 24  # short races keep this file at a few seconds on a 2-core CPU


@pytest.fixture(scope="module")
def pair():
    from lab.models import load_pair

    return load_pair("shakespeare", device="cpu")


@pytest.fixture(scope="module")
def dashboard(pair):
    return RaceDashboard(pair, max_new_tokens=TOKENS)


def test_greedy_race_identical_outputs_and_speedup_from_the_two_timings(dashboard, pair):
    results = dashboard.race(drafter="model", n_draft=4, temperature=0.0)
    ar, spec = results["autoregressive"], results["speculative"]
    assert ar["tokens"] == spec["tokens"] and len(ar["tokens"]) == TOKENS  # greedy: same text, token for token
    assert dashboard.identical is True
    assert ar["text"] == pair.decode(ar["tokens"])
    for side in (ar, spec):
        assert side["seconds"] > 0
        assert side["tokens_per_second"] == pytest.approx(len(side["tokens"]) / side["seconds"])
    assert dashboard.speedup == pytest.approx(spec["tokens_per_second"] / ar["tokens_per_second"])
    assert dashboard.speedup == pytest.approx(ar["seconds"] / spec["seconds"])  # same token count at T=0
    assert f"{dashboard.speedup:.2f}\u00d7" in dashboard.summary.value
    assert "identical token for token" in dashboard.summary.value
    # the autoregressive side makes one target call per token, the speculative side fewer
    assert ar["target_calls"] == TOKENS and spec["target_calls"] < TOKENS
    # both streams show what was generated
    assert dashboard.autoregressive_stream.generated_ids == ar["tokens"]
    assert dashboard.speculative_stream.generated_ids == spec["tokens"]
    ar_kinds = {t["kind"] for t in dashboard.autoregressive_stream.tokens if t["kind"] != "prompt"}
    assert ar_kinds == {"bonus"}  # no drafts: every token is the target's own
    assert "accepted" in {t["kind"] for t in dashboard.speculative_stream.tokens}
    assert dashboard.status.value == "done" and dashboard.error is None


def test_the_two_sides_take_turns(dashboard):
    dashboard.race(drafter="model", n_draft=4, temperature=0.0)
    turns = dashboard.turns
    assert turns.count("autoregressive") == dashboard.results["autoregressive"]["steps"]
    assert turns.count("speculative") == dashboard.results["speculative"]["steps"]
    # interleaved, not one after the other: the speculative side moves before the autoregressive side finishes
    last_ar = len(turns) - 1 - turns[::-1].index("autoregressive")
    assert turns.index("speculative") < last_ar


def test_drafter_choice_is_honoured(dashboard):
    dashboard.race(drafter="ngram", n_draft=3, temperature=0.0)
    assert dashboard.settings["drafter"] == "ngram" and dashboard.settings["n_draft"] == 3
    assert isinstance(dashboard.drafter, PromptLookupDrafter) and dashboard.drafter.n_draft == 3
    assert dashboard.drafter_choice.value == "ngram"
    assert "speculative (ngram)" in dashboard._headers["speculative"].value
    drafted = [len(record.drafted) for record in dashboard.speculative_stream.steps]
    assert max(drafted) <= 3
    assert dashboard.identical is True


def test_tree_drafter_races_through_the_chain_view(dashboard):
    dashboard.race(drafter="medusa", temperature=0.0)  # Medusa drafts token trees; the streams draw chains
    assert dashboard.identical is True
    assert dashboard.speculative_stream.generated_ids == dashboard.results["speculative"]["tokens"]


def test_sampled_race_and_free_text(dashboard):
    results = dashboard.race(prompt="ROMEO.\n", drafter="model", temperature=0.8)
    assert dashboard.settings["prompt"] == "ROMEO.\n" and dashboard.prompt_choice.value == FREE_TEXT
    assert len(results["autoregressive"]["tokens"]) == TOKENS == len(results["speculative"]["tokens"])
    assert math.isfinite(dashboard.speedup) and dashboard.speedup > 0
    assert "sampled" in dashboard.summary.value
    dashboard.prompt_choice.value = 0  # back to a held-out prompt for the other tests


@pytest.mark.parametrize("kwargs", [
    {"max_new_tokens": 0}, {"max_new_tokens": 10_000}, {"max_new_tokens": 2.5}, {"n_draft": 0}, {"n_draft": 17},
    {"temperature": -0.1}, {"temperature": float("nan")}, {"temperature": 5.0}, {"drafter": "bogus"},
    {"prompt": "   "}, {"prompt": "word " * 600},  # empty; longer than the target's context
])
def test_bad_input_is_rejected(dashboard, kwargs):
    before = dashboard.results
    with pytest.raises(ValueError):
        dashboard.race(**kwargs)
    assert dashboard.results is before  # nothing ran
    assert not dashboard.race_button.disabled
    dashboard.prompt_choice.value = 0


def test_bad_constructor_arguments(pair):
    with pytest.raises(ValueError):
        RaceDashboard(pair, drafter="bogus")
    with pytest.raises(ValueError):
        RaceDashboard(pair, max_new_tokens=0)


def test_button_shows_errors_instead_of_raising(dashboard):
    dashboard.prompt_choice.value = FREE_TEXT
    dashboard.free_text.value = ""
    dashboard.race_button.click()  # what a press in the browser does
    assert "empty" in dashboard.error and "empty" in dashboard.status.value
    assert dashboard.free_text.layout.display is None  # the free-text box is shown for the free-text choice
    dashboard.prompt_choice.value = 0
    assert dashboard.free_text.layout.display == "none"


def test_chain_view_of_a_token_tree():
    # root children: nodes 0 and 1; node 0's children: 2 and 3. The target accepted 0 then rejected 2 and 3.
    parents = [-1, -1, 0, 0]
    vocab = 5
    target = torch.arange(5 * vocab, dtype=torch.float32).reshape(5, vocab)
    draft = torch.arange(4 * vocab, dtype=torch.float32).reshape(4, vocab) + 100
    record = StepRecord(index=0, position=0, drafted=[10, 11, 12, 13], num_accepted=1, emitted=[10, 4],
                        last_kind="resampled", parents=parents, path=[0], target_probs=target, draft_probs=draft)
    chain = chain_view(record)
    assert chain.parents is None
    assert chain.drafted == [10, 12]  # the path, then the first rejected child of its last node
    assert chain.emitted == [10, 4] and chain.num_accepted == 1 and chain.last_kind == "resampled"
    assert torch.equal(chain.target_probs, target[[0, 1, 3]])  # rows after: committed text, node 0, node 2
    assert torch.equal(chain.draft_probs, draft[[0, 2]])
    bonus = StepRecord(index=0, position=0, drafted=[10, 11, 12], num_accepted=2, emitted=[10, 12, 7],
                       last_kind="bonus", parents=[-1, -1, 0], path=[0, 2])
    assert chain_view(bonus).drafted == [10, 12]
    plain = StepRecord(index=0, position=0, drafted=[1, 2], num_accepted=2, emitted=[1, 2, 3], last_kind="bonus")
    assert chain_view(plain) is plain


def test_explorers_are_built_when_their_tab_opens(pair):
    dashboard = RaceDashboard(pair)
    assert dashboard.residual_explorer is None and dashboard.speedup_explorer is None
    dashboard.tabs.selected_index = 1  # what clicking the "Explore" tab does
    assert dashboard.residual_explorer in dashboard.tabs.children[1].children
    assert dashboard.speedup_explorer.n_draft == dashboard.n_draft.value
    assert dashboard.speedup_explorer.alpha == pytest.approx(json.loads(
        (PAIR_DIR / "measurements.json").read_text())["alpha_greedy"], abs=0.01)
    explorer = dashboard.residual_explorer
    dashboard.tabs.selected_index = 0
    dashboard.tabs.selected_index = 1
    assert dashboard.residual_explorer is explorer  # built once
