"""RaceDashboard (widgets/race.py, the instructor demo): kernel-side behaviour of short races on the Shakespeare pair,
and on the real pair (its default): chat requests as user turns, sampling by default, the answer's end.

The browser side (button, live streams, speedup shown under Voila) is checked by tests/browser/test_browser.py.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from lab.assets import PAIR_DIR
from lab.cli.options import CHAT_TEMPERATURE
from lab.drafters import PromptLookupDrafter
from lab.prompts import chat_prompts, held_out_prompts
from widgets.race import CHAT_PROMPTS_PER_TASK, FREE_TEXT, RACE_AGAIN, RaceDashboard

ROOT_DIR = Path(__file__).resolve().parents[2]
TOKENS = 24  # short races keep this file at a few seconds on a 2-core CPU


@pytest.fixture(autouse=True)
def _threads_left_alone(monkeypatch):
    """Every race first fits torch's threads to the machine's load (lab.models.fit_threads): half a second's sample
    each, and whatever else runs would change the threads and the summaries. The test of the fitting sets its own."""
    import lab.models

    monkeypatch.setattr(lab.models, "fit_threads", lambda sample_s=0.5: "torch threads left as they were (test)")


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
    # the autoregressive side makes one target call per token (the prefill gave the first), the speculative side
    # fewer; Generation.stats leaves the prefill out of target_calls, the records include it
    assert ar["target_calls"] == TOKENS - 1 and spec["target_calls"] < TOKENS - 1
    assert (ar["steps"], spec["steps"]) == (ar["target_calls"] + 1, spec["target_calls"] + 1)
    assert f"{spec['target_calls']} vs {TOKENS - 1} target calls after the prefill" in dashboard.summary.value
    # both streams show what was generated
    assert dashboard.autoregressive_stream.generated_ids == ar["tokens"]
    assert dashboard.speculative_stream.generated_ids == spec["tokens"]
    ar_kinds = {t["kind"] for t in dashboard.autoregressive_stream.tokens if t["kind"] != "prompt"}
    assert ar_kinds == {"target"}  # no drafts: every token is the target's own, not a bonus
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


def test_race_stream_stats_equal_the_summary_and_show_one_speed(pair):
    dashboard = RaceDashboard(pair, max_new_tokens=24)
    results = dashboard.race(drafter="medusa", temperature=0.0)
    stream = dashboard.speculative_stream
    assert stream.stats["acceptance_rate"] == pytest.approx(results["speculative"]["acceptance_rate"])
    assert stream.stats["drafted"] == sum(len(r.drafted) for r in stream.steps)
    # a tree's rate counts its nodes, as the stream and the CLI say: a bare "acceptance rate 0.12" beside 2.6 tokens
    # per target call read as a contradiction
    spec = results["speculative"]
    assert spec["tree"] is True and results["autoregressive"]["tree"] is False
    assert (f"acceptance rate {spec['acceptance_rate']:.2f} ({stream.stats['accepted']} of {stream.stats['drafted']} "
            "tree nodes accepted; a step keeps one path of its tree at most)") in html.unescape(dashboard.summary.value)
    # tokens/s appears once per side, in the header (own compute clock), not in the stream's stats line
    for side in ("autoregressive", "speculative"):
        assert "tokens/s" not in dashboard._streams[side].stats_text
        assert "tokens/s" in dashboard._headers[side].value
        assert "tokens/s" not in dashboard._streams[side].html


def test_race_near_the_context_limit_warms_up_within_what_was_asked(pair):
    """The warm-up used to ask for 4 new tokens whatever the race asked for: 510 + 2 tokens passed the dashboard's
    check and then failed in the warm-up with an error about 4."""
    limit = pair.target.config.max_position_embeddings
    text = pair.tokenizer.decode(list(range(300, 300 + limit)))
    ids = pair.encode(text)[: limit - 2]
    prompt = pair.tokenizer.decode(ids)
    assert len(pair.encode(prompt)) == limit - 2
    dashboard = RaceDashboard(pair, prompts=[prompt], max_new_tokens=2)
    results = dashboard.race(drafter="model", n_draft=2)
    assert dashboard.error is None
    assert all(len(result["tokens"]) == 2 for result in results.values())


def test_race_warms_up_on_the_prompts_tail_only(pair, monkeypatch):
    """The warm-up generated from the whole prompt twice before the two timed prefills: a 3,000-token prompt spent
    half the race warming up. It now prefills the prompt's last WARM_UP_TOKENS tokens, as python -m lab demo does
    (lab.cli.options.warm_up_ids); each side's race still gets every token."""
    import widgets.race
    from lab.cli.options import WARM_UP_TOKENS

    calls, real = [], widgets.race.generate

    def recording(target, prompt_ids, **kwargs):
        calls.append((kwargs.get("on_step") is None, list(prompt_ids)))
        return real(target, prompt_ids, **kwargs)

    monkeypatch.setattr(widgets.race, "generate", recording)
    dashboard = RaceDashboard(pair, max_new_tokens=3)
    prompt = "ROMEO.\nBut soft, what light through yonder window breaks? " * 8
    dashboard.race(prompt=prompt, drafter="model", n_draft=2, temperature=0.0)
    ids = dashboard.settings["prompt_ids"]
    assert len(ids) > 2 * WARM_UP_TOKENS and dashboard.error is None
    assert [prompt_ids for warm, prompt_ids in calls if warm] == [ids[-WARM_UP_TOKENS:]] * 2
    assert [prompt_ids for warm, prompt_ids in calls if not warm] == [ids] * 2


def test_each_race_fits_the_threads_and_says_so_when_they_change(pair, monkeypatch):
    """The demo app fitted torch's threads once, at page load: a busy start kept one thread through quiet races, and
    its advice ("run it again") could not be followed under Voila. Each race now fits them first; the summary shows
    the sentence when the count changed, with advice that works on the page, and nothing when it did not."""
    import lab.models

    start = torch.get_num_threads()
    other = 1 if start != 1 else 2
    counts, fits = [other, start, start], []  # what each race's fit sets: a busy machine, then a quiet one twice

    def fit(sample_s=0.5):
        torch.set_num_threads(counts[len(fits)])
        fits.append(sample_s)
        return (f"torch uses {torch.get_num_threads()} CPU threads: other programs kept 1.20 of 2 cores busy "
                f"({lab.models.FIT_AGAIN})")

    monkeypatch.setattr(lab.models, "fit_threads", fit)
    dashboard = RaceDashboard(pair, max_new_tokens=3)
    try:
        for race, changed in enumerate((True, True, False), 1):
            dashboard.race(drafter="ngram", temperature=0.0)
            summary = html.unescape(dashboard.summary.value)
            assert len(fits) == race and torch.get_num_threads() == counts[race - 1]
            assert ("sdl-race-threads" in summary) is changed and (dashboard.threads_note is not None) is changed
            if changed:
                assert f"torch uses {counts[race - 1]} CPU threads" in summary and "run it again" not in summary
                assert f"({RACE_AGAIN})" in summary
    finally:
        torch.set_num_threads(start)


def test_race_dashboard_takes_numpy_scalars(pair):
    dashboard = RaceDashboard(pair, prompts=["ROMEO."], n_draft=np.int64(3), max_new_tokens=np.int64(5),
                              temperature=np.float32(0.5), seed=np.int64(1), record_probs=np.bool_(True))
    assert dashboard.n_draft.value == 3 and dashboard.new_tokens.value == 5
    assert math.isclose(dashboard.temperature.value, 0.5) and dashboard.seed == 1 and type(dashboard.seed) is int
    assert dashboard.record_probs is True
    for kwargs, word in (({"temperature": True}, "temperature"), ({"temperature": float("inf")}, "temperature"),
                         ({"temperature": -0.5}, "temperature"),
                         ({"max_new_tokens": None}, "max_new_tokens"), ({"n_draft": 0}, "n_draft")):
        with pytest.raises(ValueError, match=word):
            RaceDashboard(pair, prompts=["ROMEO."], **kwargs)
    with pytest.raises(TypeError, match="record_probs"):
        RaceDashboard(pair, prompts=["ROMEO."], record_probs="no")
    with pytest.raises(TypeError, match=r"seed must be an integer \(a whole number"):  # generate's TypeError too
        RaceDashboard(pair, prompts=["ROMEO."], seed=1.5)


@pytest.fixture(scope="module")
def short_dashboard(pair):
    """A 6-token race: enough for the N control and the summary."""
    from widgets.race import RaceDashboard

    return RaceDashboard(pair, max_new_tokens=6)


def test_race_n_slider_is_disabled_for_drafters_that_set_their_own_draft(short_dashboard):
    """Lookahead's window and Medusa's tree set what they draft (python -m lab demo refuses --n-draft for them): the
    N slider must not look as if it did something."""
    for kind, disabled in (("lookahead", True), ("medusa", True), ("model", False), ("ngram", False),
                           ("eagle", False), ("early-exit", False), ("medusa", True), ("model", False)):
        short_dashboard.drafter_choice.value = kind
        assert short_dashboard.n_draft.disabled is disabled, kind


def test_race_medusa_ignores_n_loads_its_heads_once_and_records_no_n(short_dashboard):
    short_dashboard.race(drafter="medusa", temperature=0.0)
    first = short_dashboard.drafter
    assert short_dashboard.settings["n_draft"] is None
    short_dashboard.n_draft.value = 9 if short_dashboard.n_draft.value != 9 else 3
    short_dashboard.race(drafter="medusa")
    assert short_dashboard.drafter is first  # the same heads, not a second copy read from disk for another N
    assert short_dashboard.settings["n_draft"] is None and short_dashboard.identical is True
    short_dashboard.race(drafter="model", n_draft=2)
    assert short_dashboard.settings["n_draft"] == 2 and short_dashboard.drafter.n_draft == 2


@pytest.mark.parametrize("kind", ["lookahead", "medusa"])
def test_race_refuses_an_explicit_n_for_drafters_that_take_none(short_dashboard, kind):
    with pytest.raises(ValueError, match=f"n_draft does not apply to drafter {kind!r}"):
        short_dashboard.race(drafter=kind, n_draft=6)


@pytest.mark.parametrize("kind", ["lookahead", "medusa"])
def test_race_dashboard_refuses_an_explicit_n_for_drafters_that_take_none(pair, kind):
    """The constructor follows race(): an N that would be silently ignored is an error, the default is not."""
    from widgets.race import RaceDashboard

    with pytest.raises(ValueError, match=f"n_draft does not apply to drafter {kind!r}"):
        RaceDashboard(pair, drafter=kind, n_draft=8, max_new_tokens=6)
    built = RaceDashboard(pair, drafter=kind, max_new_tokens=6)
    assert built.n_draft.disabled is True and built.n_draft.value == 4
    assert RaceDashboard(pair, drafter="model", n_draft=7, max_new_tokens=6).n_draft.value == 7


def test_race_summary_at_t_above_0_does_not_claim_the_texts_differ_when_they_are_equal(short_dashboard):
    short_dashboard.race(drafter="model", n_draft=4, temperature=0.0)
    greedy = short_dashboard.summary.value
    assert "identical token for token (greedy)" in greedy
    assert "tree nodes" not in greedy  # a chain's rate counts its drafts
    settings = {**short_dashboard.settings, "temperature": 0.7}
    short_dashboard.identical = True  # a short sampled race can give the same tokens on both sides
    same = short_dashboard._summary_html(settings)
    assert "differ" not in same and "the same tokens" in same
    short_dashboard.identical = False
    other = short_dashboard._summary_html(settings)
    assert "the texts differ" in other


def test_a_plain_text_pair_races_greedily_by_default_and_prompts_must_be_a_list(pair):
    dashboard = RaceDashboard(pair, max_new_tokens=6)
    assert dashboard.temperature.value == 0.0  # the Shakespeare pair does not loop: greedy stays its default
    assert dashboard.prompts == held_out_prompts() and dashboard.prompt_choice.value == 0
    assert dashboard._read_settings()["prompt_ids"] == pair.encode(held_out_prompts()[0])  # plain text, no template
    with pytest.raises(TypeError, match="prompts must be a list of strings"):
        RaceDashboard(pair, prompts="ROMEO.")
    with pytest.raises(TypeError, match=r"prompts must be a list of strings, got an item of type NoneType: "
                                        r"prompts\[1\] is None"):
        RaceDashboard(pair, prompts=[5 * "a", None])  # was raced as the text "None"
    with pytest.raises(TypeError, match="prompts must be a list of strings, got int"):
        RaceDashboard(pair, prompts=5)
    with pytest.raises(TypeError, match="RaceDashboard expected a ModelPair .* got str 'shakespeare'"):
        RaceDashboard(pair="shakespeare")  # the name instead of load_pair(name)
    with pytest.raises(TypeError, match="prompts must be a list of strings, got a dict: pass a list"):
        RaceDashboard(pair, prompts={"greeting": "Hello"})  # its keys were offered as the prompts
    # a prompt that is not text is refused before any control changes (it left the choice on free text)
    with pytest.raises(TypeError, match="prompt must be the prompt's text .a str., got int 5"):
        dashboard.race(prompt=5)
    assert dashboard.prompt_choice.value == 0 and dashboard.results == {}


# --- the real pair, the default -------------------------------------------------------------------------------------
def test_default_dashboard_races_the_real_pair_on_chat_requests_sampling(smollm2_pair, monkeypatch):
    import lab.models

    loads = []
    monkeypatch.setattr(lab.models, "load_pair", lambda name, **kwargs: loads.append((name, kwargs)) or smollm2_pair)
    dashboard = RaceDashboard(max_new_tokens=6)
    assert loads == [("smollm2-135m", {"dtype": "auto"})]  # the real pair, in its fast dtype
    assert CHAT_TEMPERATURE == 0.8 and dashboard.temperature.value == pytest.approx(0.8)  # greedy loops on chat
    expected = [(task, text) for task in ("code", "structured", "copy_edit", "chat")
                for text in chat_prompts(task)[:CHAT_PROMPTS_PER_TASK]]
    assert dashboard.prompts == [text for _task, text in expected]
    labels = [label for label, value in dashboard.prompt_choice.options if value != FREE_TEXT]
    assert [label.split(" \u00b7 ")[0] for label in labels] == [task.replace("_", "/") for task, _ in expected]
    assert labels[0].startswith("code \u00b7 Write a Python function") and "\n" not in "".join(labels)
    settings = dashboard._read_settings()  # a user turn with the chat template, not plain text
    assert settings["prompt_ids"] == smollm2_pair.encode_chat(dashboard.prompts[0])
    assert settings["temperature"] == pytest.approx(0.8)
    dashboard.prompt_choice.value = FREE_TEXT
    dashboard.free_text.value = "Name a colour."
    assert dashboard._read_settings()["prompt_ids"] == smollm2_pair.encode_chat("Name a colour.")
    assert RaceDashboard(smollm2_pair, temperature=0.0).temperature.value == 0.0  # an explicit 0 is kept


def test_real_pair_race_stops_at_the_end_of_the_answer_and_shows_it_readably(smollm2_pair):
    dashboard = RaceDashboard(smollm2_pair, max_new_tokens=8)
    results = dashboard.race(prompt="Reply with one word: yes or no. Is water wet?", drafter="model",
                             temperature=0.0)  # float32 greedy: "No." and the end of the turn, on both sides
    assert dashboard.identical is True and dashboard.error is None
    for side, stream in (("autoregressive", dashboard.autoregressive_stream),
                         ("speculative", dashboard.speculative_stream)):
        tokens = results[side]["tokens"]
        assert tokens[-1] == smollm2_pair.eos_token_id and len(tokens) < 8, (side, tokens)
        assert results[side]["text"] == smollm2_pair.decode(tokens[:-1]) and "<|" not in results[side]["text"]
        page = stream.html
        assert "\u27e8end\u27e9</span>" in page and "<|" not in page  # the closing <|im_end|> as a badge
    dashboard.build_explorers()  # the committed arena's α and c of the draft model on chat, said so
    from lab.arena import committed_arena

    row = next(r for r in committed_arena("smollm2-135m")["arena"]["rows"]
               if (r["drafter"], r["task"], r["temperature"]) == ("model", "chat", 0.0))
    explorer = dashboard.speedup_explorer
    assert (explorer.alpha, explorer.cost_ratio) == (round(row["alpha"], 2), round(row["cost_ratio"], 2))
    assert 0.2 < explorer.alpha < 0.5  # the real pair's chat α, not the example 0.75
    assert "draft model's \u03b1 and c on chat requests in the committed arena run of 2026-" in \
        dashboard._explore_tab.children[2].value


def test_race_offers_only_the_drafters_the_pair_has(pair):
    """The drafter dropdown lists what the pair has: the parallel draft is trained for the committed pairs only, so
    a pair under another name neither offers it nor accepts it (the reason is named)."""
    import dataclasses

    from widgets.race import RaceDashboard

    assert "parallel" in RaceDashboard(pair, max_new_tokens=4).drafter_choice.options
    other = dataclasses.replace(pair, name="my-pair")
    options = RaceDashboard(other, max_new_tokens=4).drafter_choice.options
    assert "parallel" not in options and "model" in options and "ngram" in options
    with pytest.raises(ValueError, match="no parallel weights are trained for the 'my-pair' pair"):
        RaceDashboard(other, drafter="parallel", max_new_tokens=4)


def test_the_n_slider_says_what_sets_the_draft_and_the_explorer_where_its_numbers_come_from(pair):
    """Greyed out for a drafter that sets its own draft, the N slider's tooltip says what sets it (the suffix
    drafter's match, the MTP heads' modules: not "tree"); a pair with no measured α and c starts the speedup
    explorer from example values and its heading says so."""
    import dataclasses

    from lab.registry import OWN_DRAFT, own_draft_reason
    from widgets.race import RaceDashboard

    dashboard = RaceDashboard(pair, max_new_tokens=4)
    for kind in OWN_DRAFT:
        dashboard.drafter_choice.value = kind
        assert dashboard.n_draft.disabled and dashboard.n_draft.tooltip == f"N does not apply: {own_draft_reason(kind)}"
    assert "match" in own_draft_reason("suffix") and "modules" in own_draft_reason("mtp")
    dashboard.drafter_choice.value = "model"
    assert not dashboard.n_draft.disabled and dashboard.n_draft.tooltip == "draft tokens per step"
    dashboard.build_explorers()
    assert "the Shakespeare pair's measured \u03b1 and c" in dashboard._explore_tab.children[2].value
    other = RaceDashboard(dataclasses.replace(pair, name="my-pair"), max_new_tokens=4)
    other.build_explorers()
    assert "example values: no measured \u03b1 and c for this pair" in other._explore_tab.children[2].value
    assert (other.speedup_explorer.alpha, other.speedup_explorer.cost_ratio) == (0.75, 0.1)


def test_a_race_that_ends_at_the_prefills_token_shows_its_summary(pair):
    """max_new_tokens=1 (the control allows it) or a first token that ends the answer: no decode step on either
    side, so no tokens per target call; the summary used to raise TypeError formatting None."""
    dashboard = RaceDashboard(pair, max_new_tokens=1, temperature=0)
    results = dashboard.race()
    assert dashboard.error is None and dashboard.status.value == "done"
    for side in results.values():
        assert len(side["tokens"]) == 1 and side["target_calls"] == 0 and side["tokens_per_target_call"] is None
    summary = html.unescape(dashboard.summary.value)
    assert "0 vs 0 target calls after the prefill; \u2013 tokens per target call)" in summary
    assert "The run ended at the prefill's token (no decode step on either side)" in summary
    # the ratio of two prefills is no speedup: the summary shows none (the attribute keeps the measured ratio)
    assert "sdl-race-speedup\">\u2013 (no decode step)</b>" in summary
    assert f"{dashboard.speedup:.2f}\u00d7" not in summary
    assert "1 token in " in html.unescape(dashboard._headers["speculative"].value)


def test_greedy_outputs_that_part_in_bfloat16_are_explained_and_in_float32_reported(short_dashboard, pair,
                                                                                      monkeypatch):
    """The real pair loads in bfloat16 where the hardware has it: a verification can round a near-tie the other way
    there, so parted greedy outputs are not a bug to report (the bench reports agreement the same way)."""
    import dataclasses

    short_dashboard.race(drafter="model", n_draft=4, temperature=0.0)
    ar = short_dashboard.results["autoregressive"]["tokens"]
    spec = ar[:3] + [(ar[3] + 1) % len(pair.tokenizer)] + ar[4:]
    short_dashboard.results["speculative"]["tokens"] = spec
    short_dashboard.identical = False
    settings = short_dashboard.settings
    assert "NOT identical — greedy outputs should match; please report this" in short_dashboard._summary_html(settings)
    monkeypatch.setattr(short_dashboard, "pair", dataclasses.replace(pair, dtype=torch.bfloat16))
    summary = html.unescape(short_dashboard._summary_html(settings))
    assert "please report" not in summary
    assert ("greedy in bfloat16: the outputs agree on the first 3 new tokens and differ from token 4 on, because "
            "in bfloat16 the verification") in summary
    # in full size, not in the small grey print under the speedup, with the way to race in float32
    parity = summary.split('class="sdl-race-parity" style="font-size: 14px;">')[1].split("</span>")[0]
    assert parity.startswith("greedy in bfloat16")
    assert "RaceDashboard(load_pair('shakespeare')) races in float32" in parity
    short_dashboard.identical = True
    short_dashboard.results["speculative"]["tokens"] = ar
    assert "sdl-race-parity" not in short_dashboard._summary_html(settings)  # nothing parted: nothing to explain


def test_the_warm_up_leaves_a_suffix_drafters_cache_to_the_races(pair):
    """The warm-up ran the race's own suffix drafter on the same prompt: its first tokens were cached before the
    race, which then needed fewer target calls than a first request can."""
    from lab.decode import generate
    from lab.registry import make_drafter

    dashboard = RaceDashboard(pair, max_new_tokens=TOKENS)
    first = dashboard.race(drafter="suffix", temperature=0.0)["speculative"]
    fresh = generate(pair.target, dashboard.settings["prompt_ids"], drafter=make_drafter("suffix", pair, 4),
                     max_new_tokens=TOKENS, temperature=0.0)
    assert first["tokens"] == fresh.tokens and first["target_calls"] == fresh.stats["target_calls"]
    drafter = dashboard.drafter
    drafter.finish()  # the race's output joins the cache
    assert len(drafter.cache) == 1 and first["tokens"] in drafter.cache
    second = dashboard.race(drafter="suffix", temperature=0.0)["speculative"]
    assert dashboard.drafter is drafter and second["tokens"] == first["tokens"]
    assert second["target_calls"] < first["target_calls"]  # the same request again: its answer is cached


def test_a_prompt_with_a_right_to_left_override_gets_a_label_that_names_it(pair):
    """The dropdown's label obeyed U+202E and showed the rest of the prompt reversed; the prompt itself is raced as
    given."""
    from widgets.race import RaceDashboard

    prompt = "ROMEO. \u202egnirts desrever"
    dashboard = RaceDashboard(pair, prompts=[prompt], max_new_tokens=2)
    (label, index), *_ = dashboard.prompt_choice.options
    assert label == "ROMEO. \u27e8U+202E\u27e9gnirts desrever" and dashboard.prompts[index] == prompt


def test_the_summary_warns_of_a_busy_machine_and_of_a_speedup_the_calls_rule_out(dashboard, monkeypatch):
    """A race records how busy the machine was (LoadMeter) and says so when it was; a speedup above what the two
    sides' target calls allow (each speculative call costs at least an autoregressive one) is flagged, since only
    uneven interference can produce it. A quiet, plausible race carries neither warning."""
    import widgets.race as race_module

    dashboard.race(drafter="model", n_draft=4, temperature=0.0)
    assert dashboard.load is not None and dashboard.load.seconds > 0
    assert ("WARNING: the machine was busy" in dashboard.summary.value) == bool(dashboard.load.busy)

    class BusyMeter(race_module.LoadMeter):
        def __exit__(self, *exc):
            super().__exit__(*exc)
            self.other_cores, self.busy = 1.5, True

    monkeypatch.setattr(race_module, "LoadMeter", BusyMeter)
    dashboard.race(drafter="model", n_draft=4, temperature=0.0)
    assert "other processes kept 1.50 of" in dashboard.summary.value
    assert dashboard.summary.value.count("WARNING: the machine was busy") == 1
    ar, spec = dashboard.results["autoregressive"], dashboard.results["speculative"]
    per_call = {side: len(run["tokens"]) / (run["target_calls"] + 1) for side, run in (("ar", ar), ("spec", spec))}
    cap = per_call["spec"] / per_call["ar"]
    dashboard.speedup = 2 * cap  # as if the autoregressive side had been slowed by another program
    text = dashboard._summary_html(dashboard.settings)
    assert f"The speedup is above the {cap:.2f}\u00d7 that {len(spec['tokens'])} tokens in " \
           f"{spec['target_calls'] + 1} target calls against {len(ar['tokens'])} in {ar['target_calls'] + 1} " \
           "(the prefills included) allow" in text
    # a sampled race whose answers end at different lengths (an instructor's T = 0.8 race: 26 tokens in 26 calls
    # against 48 in 41, 1.05x): within what the calls allow, so no warning
    dashboard.results["autoregressive"] = dict(ar, tokens=list(range(26)), target_calls=25)
    dashboard.results["speculative"] = dict(spec, tokens=list(range(48)), target_calls=40)
    dashboard.speedup = 1.05
    assert "The speedup is above" not in dashboard._summary_html(dashboard.settings)


def test_an_interrupted_race_says_it_stopped_releases_its_threads_and_the_next_race_runs(dashboard, monkeypatch):
    """The kernel handles no click while a race runs, so the interrupt stops it: the status names that way while
    the race runs, says "stopped" after one (not "racing…" for ever), both sides' threads end, and a new race runs.
    An error from inside a race started from Python shows on the status too, as the button shows it."""
    import threading

    import widgets.race as race_module

    seen = []
    original = race_module.TokenStream.on_step

    def interrupt_on_the_third_step(stream, record):
        seen.append(dashboard.status.value)
        if len(seen) == 3:
            raise KeyboardInterrupt
        return original(stream, record)

    monkeypatch.setattr(race_module.TokenStream, "on_step", interrupt_on_the_third_step)
    with pytest.raises(KeyboardInterrupt):
        dashboard.race(drafter="model", n_draft=4, temperature=0.0)
    assert seen[0].startswith("racing\u2026") and "interrupt the kernel" in seen[0]
    assert dashboard.status.value.startswith("stopped") and not dashboard.race_button.disabled
    assert not [t for t in threading.enumerate() if t.name.startswith("race-")]

    def fail(stream, record):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(race_module.TokenStream, "on_step", fail)
    with pytest.raises(RuntimeError):
        dashboard.race()
    assert "drawing failed" in dashboard.status.value and "drawing failed" in dashboard.error

    monkeypatch.setattr(race_module.TokenStream, "on_step", original)
    dashboard.race(drafter="model", n_draft=4, temperature=0.0)
    assert dashboard.status.value == "done" and dashboard.results["speculative"]["tokens"]


def test_the_demo_apps_text_names_the_request_kinds_as_the_dropdown_labels_them():
    """The app said "code, JSON, copy/edit or chat" above a dropdown whose labels read "structured"."""
    from widgets.race import _CHAT_TASK_ORDER

    app = json.loads((ROOT_DIR / "demo" / "app.ipynb").read_text(encoding="utf-8"))
    text = "".join(app["cells"][0]["source"])
    labels = [task.replace("_", "/") for task in _CHAT_TASK_ORDER]  # default_prompts' labels
    assert f"Pick a request ({', '.join(labels[:-1])} or {labels[-1]})" in text and "JSON" not in text


def test_the_race_takes_the_seeds_generate_and_the_cli_take(pair):
    """The race refused negative seeds, which generate and python -m lab demo --seed take: all three now share
    lab.validation.check_seed's range, -2**63 to 2**64 - 1, and name it when a seed is outside."""
    import argparse

    from lab.cli.options import seed as cli_seed
    from lab.decode import generate
    from lab.validation import SEED_RANGE, check_seed

    for value in (-2 ** 63, -1, 0, 2 ** 64 - 1):
        assert RaceDashboard(pair, prompts=["ROMEO."], seed=value, max_new_tokens=2).seed == value
        assert cli_seed(str(value)) == value == check_seed("seed", value)
    for value in (-2 ** 63 - 1, 2 ** 64):
        with pytest.raises(ValueError, match=rf"^seed must be {SEED_RANGE.replace('*', '[*]')} \(what "
                                             rf"torch.Generator.manual_seed accepts\), got {value}$"):
            RaceDashboard(pair, prompts=["ROMEO."], seed=value)
        with pytest.raises(argparse.ArgumentTypeError, match=SEED_RANGE.replace("*", "[*]")):
            cli_seed(str(value))
    dashboard = RaceDashboard(pair, prompts=["ROMEO."], seed=-3, max_new_tokens=4)
    sampled = dashboard.race(temperature=0.8)["autoregressive"]["tokens"]
    assert sampled == generate(pair.target, dashboard.settings["prompt_ids"], max_new_tokens=4, temperature=0.8,
                               seed=-3, eos_token_id=pair.eos_token_id).tokens  # the sides sample with that seed


def test_the_race_says_which_answer_ended_and_words_its_busy_advice_for_the_page(short_dashboard):
    """A race where one answer ended at the end-of-text token and the other ran to the limit said nothing about it
    (its target calls differ for that reason, not the drafter's); a busy race advised torch.set_num_threads(1), which
    the next race undoes and which a Voila page has no cell for."""
    from lab.load_meter import LoadMeter

    dashboard = short_dashboard
    dashboard.race(drafter="model", n_draft=4, temperature=0.0)
    eos = dashboard.pair.eos_token_id
    settings = dict(dashboard.settings)
    ar, spec = dashboard.results["autoregressive"], dashboard.results["speculative"]
    ar_tokens, spec_tokens = list(ar["tokens"]), list(spec["tokens"])
    try:
        ar["tokens"] = ar_tokens[:3] + [eos]
        text = html.unescape(dashboard._summary_html(settings))
        assert (f"The autoregressive answer ended (\u27e8end\u27e9) after 4 tokens; the speculative answer ran to the "
                f"{settings['max_new_tokens']}-token limit.") in text
        spec["tokens"] = ar_tokens[:3] + [eos]
        text = html.unescape(dashboard._summary_html(settings))
        assert "Both answers ended (\u27e8end\u27e9) after 4 tokens." in text
    finally:
        ar["tokens"], spec["tokens"] = ar_tokens, spec_tokens
    busy = LoadMeter()
    busy.seconds, busy.other_cores, busy.busy, busy.load_average = 1.0, 1.5, True, (2.0, 2.0)
    dashboard.load = busy
    text = html.unescape(dashboard._summary_html(settings))
    assert f"({RACE_AGAIN})" in text and "set_num_threads" not in text


def test_a_prompt_longer_than_the_context_is_told_so_apart_from_too_many_tokens(short_dashboard):
    from lab.models import context_limit

    limit = context_limit(short_dashboard.pair.target)
    too_long = "ROMEO. " * limit  # at least one token a word
    assert len(short_dashboard.pair.encode(too_long)) >= limit
    with pytest.raises(ValueError, match=rf"so a prompt may have at most {limit - 1}"):
        short_dashboard.race(prompt=too_long)
