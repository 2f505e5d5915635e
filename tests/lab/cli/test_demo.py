"""``python -m lab demo`` (lab.cli.demo): errors that need the tokenizer (one line naming the flag, exit status 2,
before any generation), drafters a pair cannot have, the coloured stream of a token tree, and every drafter on the
bundled pair (subprocess runs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab import cli
from lab.cli.demo import ANSI
from lab.trace import Generation
from tests.lab.cli.helpers import CharPair
from tests.widgets.split_text import CONTINUATION, FFFD, PROMPT, chain_steps

ROOT = Path(__file__).resolve().parents[3]


def test_demo_prompt_beyond_the_context_is_one_line_naming_the_flag(char_pair, capsys):
    from lab.prompts import held_out_prompts

    n = len(held_out_prompts()[0])  # one token per character
    assert cli.main(["demo", "--max-new-tokens", "600"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # stopped before printing the prompt
    assert captured.err == (f"python -m lab demo: error: --max-new-tokens: prompt ({n} tokens) + 600 new tokens "
                            f"exceed the target's context of 512 positions: at most {512 - n} with this prompt\n")
    assert cli.main(["demo", "--prompt", "ab", "--max-new-tokens", "511"]) == 2  # 2 + 511 > 512
    assert "prompt (2 tokens) + 511 new tokens" in capsys.readouterr().err


def test_demo_prompt_that_alone_fills_the_context_names_the_prompt(char_pair, capsys):
    assert cli.main(["demo", "--prompt", "a" * 512, "--max-new-tokens", "5"]) == 2
    assert capsys.readouterr().err == ("python -m lab demo: error: --prompt: has 512 tokens; the target's context "
                                       "holds 512 positions, so a prompt may have at most 511 (one position is left "
                                       "for a new token)\n")
    assert cli.main(["demo", "--prompt", "a" * 511, "--max-new-tokens", "2"]) == 2  # 511 fit; 511 + 2 do not
    assert "--max-new-tokens: prompt (511 tokens) + 2 new tokens" in capsys.readouterr().err


def test_encoding_a_long_prompt_prints_no_tokenizer_warning(pair, capfd):
    capfd.readouterr()
    ids = pair.encode("To be or not to be. " * 150)
    assert len(ids) > pair.tokenizer.model_max_length  # past the length the tokenizer would warn about
    captured = capfd.readouterr()
    assert "sequence length" not in captured.err + captured.out, captured


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t"])
def test_demo_empty_or_blank_prompt_is_one_line_naming_the_flag_before_loading(prompt, monkeypatch, capsys):
    """As RaceDashboard refuses a blank free-text prompt (a chat pair took '' as an empty user turn, the dashboard
    refused it: the two disagreed)."""
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *a, **k: pytest.fail("must refuse before loading"))
    for pair in ("shakespeare", "smollm2-135m"):
        assert cli.main(["demo", "--pair", pair, "--prompt", prompt]) == 2
        assert capsys.readouterr().err == (f"python -m lab demo: error: --prompt: is empty or only whitespace, got "
                                           f"{prompt!r}: give some text, or leave --prompt out for the default\n")


def test_demo_prompt_of_no_tokens_is_one_line_naming_the_flag(monkeypatch, capsys):
    import lab.models

    class NoTokens(CharPair):
        def encode(self, text):
            return []

    monkeypatch.setattr(lab.models, "load_pair", lambda *a, **k: NoTokens())
    assert cli.main(["demo", "--prompt", "x"]) == 2
    assert capsys.readouterr().err == "python -m lab demo: error: --prompt: must contain at least one token, got 'x'\n"


def test_demo_prompt_that_is_not_utf8_is_one_line_naming_the_flag(pair, monkeypatch, capsys):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pair)
    assert cli.main(["demo", "--prompt", "a\udcff"]) == 2   # the byte 0xff on a command line
    assert capsys.readouterr().err == ("python -m lab demo: error: --prompt: character 2 (counting from 1) is "
                                       "'\\udcff', an unpaired surrogate (bytes that were not UTF-8?)\n")


def test_demo_of_one_token_reports_the_prefill_alone(pair, monkeypatch, capsys):
    """One new token comes from the prefill: no decode step, so no tokens per target call (not a crash)."""
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pair)
    assert cli.main(["demo", "--prompt", "ROMEO:", "--max-new-tokens", "1"]) == 0
    out = capsys.readouterr().out
    assert "tokens per target call n/a · 1 token, the prefill's: --max-new-tokens 1 allowed no more ·" in out
    from lab.cli.demo import _calls_phrase  # "ended there" only when the answer's end token came (a user read it
    # after --max-new-tokens 1, which cut the answer instead)
    assert _calls_phrase(1, 0, ended=True) == "1 token, the prefill's: the answer ended there"


def test_demo_stats_line_adds_up_and_names_the_prefill_in_the_rate(pair, monkeypatch, capsys):
    """The line's counts divide to its tokens per target call (the prefill's token apart), and the tokens/s says
    the prefill is in it, with the rate after it beside it."""
    import re

    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pair)
    assert cli.main(["demo", "--prompt", "ROMEO:", "--max-new-tokens", "12", "--drafter", "model"]) == 0
    out = capsys.readouterr().out
    per_call = float(re.search(r"tokens per target call ([0-9.]+)", out).group(1))
    decoded, calls = map(int, re.search(r"the prefill's first token, then (\d+) tokens? from (\d+) target calls?",
                                        out).groups())
    assert decoded == 11 and round(decoded / calls, 2) == per_call
    assert re.search(r"[0-9.]+ tokens/s \(the prefill's \d+ ms included; [0-9.]+ tokens/s after it\)", out)


def test_demo_warms_up_off_the_clock_and_warns_when_the_machine_was_busy(pair, monkeypatch, capsys):
    """Two tokens of the target alone run before the timed run (the first forwards pay one-off costs), and a run
    that other programs slowed ends with the busy warning under the stats line; a quiet one prints none."""
    import lab.decode
    import lab.load_meter
    import lab.models
    from lab.load_meter import BUSY_WARNING, thread_advice

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pair)
    calls = []
    real_generate = lab.decode.generate

    def counted(*args, **kwargs):
        calls.append((kwargs.get("drafter"), kwargs["max_new_tokens"]))
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(lab.decode, "generate", counted)

    class Meter(lab.load_meter.LoadMeter):
        busy_now = False

        def __exit__(self, *exc):
            super().__exit__(*exc)
            self.other_cores, self.busy = (1.5, True) if Meter.busy_now else (0.0, False)

    monkeypatch.setattr(lab.load_meter, "LoadMeter", Meter)
    assert cli.main(["demo", "--prompt", "ROMEO:", "--max-new-tokens", "8", "--drafter", "model"]) == 0
    assert calls[0] == (None, 2) and calls[1][0] is not None and calls[1][1] == 8 and len(calls) == 2
    assert BUSY_WARNING not in capsys.readouterr().out
    Meter.busy_now = True
    assert cli.main(["demo", "--prompt", "ROMEO:", "--max-new-tokens", "8", "--drafter", "model"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith(BUSY_WARNING + " (other processes kept 1.50 of " + f"{Meter().cores} cores busy)"
                                 + thread_advice())


@pytest.mark.parametrize("drafter, why", [("lookahead", "its window W and n-gram size"), ("medusa", "its tree")])
def test_demo_n_draft_for_a_drafter_that_takes_none_is_one_line(drafter, why, monkeypatch, capsys):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *a, **k: pytest.fail("must refuse before loading"))
    assert cli.main(["demo", "--drafter", drafter, "--n-draft", "6"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m lab demo: error: --n-draft: does not apply to --drafter {drafter}: {why}")
    assert err.count("\n") == 1


def test_demo_strikes_through_the_first_rejected_child_of_a_trees_path_end(monkeypatch, capsys):
    """A token-tree step strikes through one draft, as TokenStream does: the first child of the accepted path's end,
    which the target rejected before choosing its own token. Off-path nodes elsewhere are left out (14 of them made
    a Medusa run unreadable on a projector), a step whose path ends at a leaf strikes nothing, an accepted character
    split over two byte tokens prints whole, and the stats line counts the tree's nodes."""
    from types import SimpleNamespace

    import lab.decode
    import lab.models
    import lab.registry
    from lab.trace import StepRecord

    class BytePair(CharPair):  # one token per byte, as byte-level BPE can split a character
        def encode(self, text):
            return list(text.encode())

        def decode(self, ids):
            return bytes(ids).decode("utf-8", errors="replace")

    # step 1: A(0) -> {B(1), C(2)}, D(3) at the top; A accepted, B and C rejected, the target says "x".
    # step 2: E(0) -> 0xC3(1) -> 0xA9(2), F(3) at the top; the whole E-é path accepted, then the bonus "y".
    records = [StepRecord(index=1, position=1, drafted=[ord(c) for c in "ABCD"], num_accepted=1,
                          emitted=[ord("A"), ord("x")], last_kind="resampled", parents=[-1, 0, 0, -1], path=[0]),
               StepRecord(index=2, position=3, drafted=[ord("E"), 0xC3, 0xA9, ord("F")], num_accepted=3,
                          emitted=[ord("E"), 0xC3, 0xA9, ord("y")], last_kind="bonus", parents=[-1, 0, 1, -1],
                          path=[0, 1, 2])]

    def fake_generate(target, prompt_ids, on_step=None, **kwargs):
        for record in records if on_step is not None else ():  # None: the demo's warm-up
            on_step(record)
        return SimpleNamespace(tokens=[t for r in records for t in r.emitted], steps=records,
                               stats={"acceptance_rate": 0.5, "tokens_per_target_call": 3.0, "target_calls": 2,
                                      "new_tokens": 6, "tokens_per_second": 1.0, "accepted_tokens": 4,
                                      "drafted_tokens": 8})

    monkeypatch.setattr(lab.models, "load_pair", lambda name="shakespeare", **kwargs: BytePair())
    monkeypatch.setattr(lab.decode, "generate", fake_generate)
    monkeypatch.setattr(lab.registry, "make_drafter", lambda *args, **kwargs: None)
    assert cli.main(["demo", "--prompt", "p", "--color", "always", "--max-new-tokens", "6"]) == 0
    out = capsys.readouterr().out
    assert f"{ANSI['accepted']}A{ANSI['reset']}{ANSI['rejected']}B{ANSI['reset']}{ANSI['resampled']}x" in out, out
    assert out.count(ANSI["rejected"]) == 2, out  # the legend's and step 1's B: not C, D, F, nor an empty one
    assert f"{ANSI['accepted']}é{ANSI['reset']}{ANSI['bonus']}y" in out and "\ufffd" not in out
    assert f"{ANSI['resampled']}corrected (the target's argmax){ANSI['reset']}" in out  # greedy: nothing is sampled
    assert ("acceptance rate 0.50 (4 of 8 tree nodes accepted; a step keeps one path of its tree at most; the "
            "stream strikes through only the first rejected child at its end)") in out


def test_demo_shows_a_rejected_drafts_line_breaks_and_tabs_as_marks(monkeypatch, capsys):
    """A rejected draft is not in the answer, so it must not change the layout: a struck-through newline or tab is
    invisible and moved the cursor (a blank line and an indented line of code that the answer did not have). It
    shows as ↵ and ⇥, the marks TokenStream draws (lab.detok.token_display_text); the kept text keeps its newline."""
    from types import SimpleNamespace

    import lab.decode
    import lab.models
    import lab.registry
    from lab.trace import StepRecord

    records = [StepRecord(index=1, position=1, drafted=[ord(c) for c in "a.\n\n\treturn"], num_accepted=1,
                          emitted=[ord("a"), ord("\n")], last_kind="resampled")]

    def fake_generate(target, prompt_ids, on_step=None, **kwargs):
        for record in records if on_step is not None else ():  # None: the demo's warm-up
            on_step(record)
        return SimpleNamespace(tokens=[t for r in records for t in r.emitted], steps=records,
                               stats={"acceptance_rate": 0.1, "tokens_per_target_call": 2.0, "target_calls": 1,
                                      "new_tokens": 2, "tokens_per_second": 1.0})

    monkeypatch.setattr(lab.models, "load_pair", lambda name="shakespeare", **kwargs: CharPair())
    monkeypatch.setattr(lab.decode, "generate", fake_generate)
    monkeypatch.setattr(lab.registry, "make_drafter", lambda *args, **kwargs: None)
    assert cli.main(["demo", "--prompt", "p", "--color", "always", "--max-new-tokens", "2"]) == 0
    out = capsys.readouterr().out
    rejected = re.findall(re.escape(ANSI["rejected"]) + r"(.*?)" + re.escape(ANSI["reset"]), out, flags=re.S)
    assert rejected[-1] == ".\u21b5\u21b5\u21e5return", out  # [0] is the legend's "rejected"
    assert all("\n" not in text and "\t" not in text for text in rejected)
    assert f"{ANSI['resampled']}\n{ANSI['reset']}" in out  # the target's own newline breaks the line


@pytest.mark.parametrize("color", ["always", "never"])
def test_demo_marks_the_end_of_the_answer(color, monkeypatch, capsys):
    """The end-of-text token prints as ⟨end⟩, the label TokenStream gives it (it printed as nothing, an empty
    resampled span), and the closing line says the answer ended whatever its length (only a 1-token answer said
    so); a run that --max-new-tokens stopped says nothing of the kind."""
    from types import SimpleNamespace

    import lab.decode
    import lab.models
    import lab.registry
    from lab.cli.demo import END_MARK, _calls_phrase
    from lab.trace import StepRecord

    class EndPair(CharPair):  # token 3 is the end of the turn, decoded as its literal text
        eos_token_id = 3

        def decode(self, ids):
            return "".join("<|im_end|>" if i == 3 else chr(i) for i in ids)

    records = [StepRecord(index=1, position=1, drafted=[ord("a"), ord("x")], num_accepted=1,
                          emitted=[ord("a"), 3], last_kind="resampled")]

    def fake_generate(target, prompt_ids, on_step=None, **kwargs):
        for record in records if on_step is not None else ():  # None: the demo's warm-up
            on_step(record)
        return SimpleNamespace(tokens=[ord("b"), ord("a"), 3], steps=records,
                               stats={"acceptance_rate": 0.5, "tokens_per_target_call": 2.0, "target_calls": 1,
                                      "new_tokens": 3, "tokens_per_second": 1.0})

    monkeypatch.setattr(lab.models, "load_pair", lambda name="shakespeare", **kwargs: EndPair())
    monkeypatch.setattr(lab.decode, "generate", fake_generate)
    monkeypatch.setattr(lab.registry, "make_drafter", lambda *args, **kwargs: None)
    assert cli.main(["demo", "--prompt", "p", "--color", color, "--max-new-tokens", "5"]) == 0
    out = capsys.readouterr().out
    assert END_MARK == "\u27e8end\u27e9" and "<|im_end|>" not in out
    assert (f"{ANSI['resampled']}{END_MARK}{ANSI['reset']}" if color == "always" else f"a{END_MARK}\n") in out, out
    assert "the prefill's first token, then 2 tokens from 1 target call (the answer ended) ·" in out
    assert _calls_phrase(5, 2) == "the prefill's first token, then 4 tokens from 2 target calls"
    assert _calls_phrase(3, 0, ended=True) == "3 tokens (the answer ended)"


def test_demo_colours_mean_what_they_mean_in_the_widgets_and_the_help_names_them(capsys):
    """The terminal showed rejected drafts in red and resampled tokens in bold yellow (ANSI 33), while its help said
    orange and the widgets show rejected grey and resampled vermillion: "the red tokens" meant opposite things on
    the class's two screens. Each kind's terminal colour is now near its widget colour, and the help names it."""
    from widgets.style import KIND_COLORS

    def rgb(code):  # the colour an SGR sequence sets: basic 30-37 / 90-97 (xterm's defaults) or 256-colour 38;5;n
        params = [int(p) for p in code[2:-1].split(";")]
        if 38 in params:
            n = params[params.index(38) + 2]
            if n >= 232:  # the grey ramp
                return (8 + 10 * (n - 232),) * 3
            steps = [0, 95, 135, 175, 215, 255]
            n -= 16
            return steps[n // 36], steps[n // 6 % 6], steps[n % 6]
        basic = {31: (205, 0, 0), 32: (0, 205, 0), 33: (205, 205, 0), 34: (0, 0, 238), 90: (127, 127, 127)}
        return next(basic[p] for p in params if p in basic)

    def hls(red, green, blue):
        import colorsys

        return colorsys.rgb_to_hls(red / 255, green / 255, blue / 255)

    def hue_apart(a, b):
        return min(abs(a[0] - b[0]), 1 - abs(a[0] - b[0]))

    widget = {kind: hls(*(int(KIND_COLORS[kind][i:i + 2], 16) for i in (1, 3, 5)))
              for kind in ("accepted", "resampled", "bonus")}
    assert "9" in ANSI["rejected"][2:-1].split(";")  # struck through
    assert hls(*rgb(ANSI["rejected"]))[2] == 0  # grey, as in the widgets (no hue to mistake for another kind)
    assert "90" not in ANSI["rejected"][2:-1].split(";")  # not "bright black": the background in some dark themes
    for kind in widget:  # each coloured kind's nearest widget colour is its own kind's
        terminal = hls(*rgb(ANSI[kind]))
        assert min(widget, key=lambda other: hue_apart(terminal, widget[other])) == kind, kind
    assert hue_apart(hls(*rgb(ANSI["resampled"])), widget["resampled"]) < 0.01  # 256-colour 166 is vermillion
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "green accepted, grey struck-through rejected, orange resampled, blue bonus" in help_text
    assert not re.search(r"\b(red|yellow)\b", help_text)


def test_demo_names_what_the_acceptance_rate_divides():
    """A chain's rate names its drafts; without colour a tree's stats do not mention striking through."""
    from lab.cli.demo import _acceptance_phrase

    stats = {"acceptance_rate": 0.25, "accepted_tokens": 3, "drafted_tokens": 12}
    assert _acceptance_phrase(stats, tree=False, struck=True) == "acceptance rate 0.25 (3 of 12 drafts accepted)"
    assert _acceptance_phrase(stats, tree=True, struck=False) == \
        "acceptance rate 0.25 (3 of 12 tree nodes accepted; a step keeps one path of its tree at most)"
    assert _acceptance_phrase({"acceptance_rate": None}, tree=False, struck=True) == \
        "acceptance rate n/a (nothing drafted)"


def test_cli_demo_prints_split_characters_whole(pair, monkeypatch, capsys):
    import lab.decode
    import lab.models

    prompt_ids, generated = pair.encode(PROMPT), pair.encode(CONTINUATION)
    records = chain_steps(pair.tokenizer, prompt_ids, generated, pair.encode("\u00f1"))

    def replay(target, ids, on_step=None, **kwargs):
        for record in records if on_step is not None else ():  # None: the demo's warm-up
            on_step(record)
        stats = {"acceptance_rate": 0.5, "tokens_per_target_call": 2.0, "target_calls": len(records),
                 "new_tokens": len(generated), "tokens_per_second": 1.0}
        return Generation(tokens=list(generated), steps=records, stats=stats)

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pair)
    monkeypatch.setattr(lab.decode, "generate", replay)
    assert cli.main(["demo", "--prompt", PROMPT, "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(PROMPT + CONTINUATION + "\n\n") and FFFD not in out
    assert cli.main(["demo", "--prompt", PROMPT, "--color", "always"]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert FFFD not in out and "ROM\u00f1E\u00f1O" in out  # the struck-through "ñ" printed whole among the kept text


# --- a hub pair has no Medusa heads, no EAGLE draft, and (GPT-2) no Llama layers for an early exit ------------------
@pytest.mark.parametrize("drafter", ["medusa", "eagle", "mtp", "parallel", "eagle3"])
def test_demo_with_a_hub_pair_refuses_trained_drafters_before_loading(drafter, monkeypatch, capsys):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *a, **k: pytest.fail("must refuse before loading"))
    assert cli.main(["demo", "--pair", "gpt2", "--drafter", drafter, "--max-new-tokens", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.err.startswith(f"python -m lab demo: error: --drafter: {drafter}: no {drafter} weights are "
                                   "trained for the 'gpt2' pair (committed for 'shakespeare', 'smollm2-135m' only); "
                                   "with --pair gpt2 choose another drafter")


def test_demo_early_exit_on_gpt2_is_one_line_naming_the_flag(hub_pair, capsys):
    assert cli.main(["demo", "--pair", "gpt2", "--drafter", "early-exit", "--max-new-tokens", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("python -m lab demo: error: --drafter: early-exit does not work with --pair gpt2: ")
    assert "Llama-style" in captured.err


def test_demo_with_a_hub_pair_runs_the_drafters_it_has(hub_pair, capsys):
    assert cli.main(["demo", "--pair", "gpt2", "--drafter", "model", "--max-new-tokens", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["tokens"]) == 3 and out["stats"]["new_tokens"] == 3


def test_demo_runs_the_real_pair_with_its_draft_model_by_default(smollm2_pair, monkeypatch, capsys):
    import lab.models

    loads = []
    monkeypatch.setattr(lab.models, "load_pair", lambda name, **k: loads.append((name, k)) or smollm2_pair)
    assert cli.main(["demo", "--prompt", "Name three colours.", "--max-new-tokens", "12", "--json"]) == 0
    assert loads == [("smollm2-135m", {"dtype": "auto"})]  # the default pair, in its fast dtype
    out = json.loads(capsys.readouterr().out)
    assert out["stats"]["draft_calls"] > 0 and out["stats"]["new_tokens"] == len(out["tokens"])


def test_demo_on_the_real_pair_sends_the_prompt_as_a_user_turn(smollm2_pair, monkeypatch, capsys):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda name, **k: smollm2_pair if name == "smollm2-135m" else None)
    request = "Repeat exactly: the quick brown fox jumps over the lazy dog."
    assert cli.main(["demo", "--pair", "smollm2-135m", "--drafter", "ngram", "--prompt", request,
                     "--max-new-tokens", "16", "--temperature", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["text"].startswith("The quick brown fox jumps over the lazy dog.")  # an answer, not a continuation
    assert out["tokens"][-1] == smollm2_pair.eos_token_id and "<|im_end|>" not in out["text"]  # the turn's end
    assert out["stats"]["draft_calls"] == 0 and out["stats"]["target_calls"] < len(out["tokens"])


def _temperature_used(argv, loaded, monkeypatch, capsys) -> float:
    """The temperature ``python -m lab demo`` passes to generate for ``argv``, with ``loaded`` as the pair."""
    import lab.decode
    import lab.models

    used, real = [], lab.decode.generate
    monkeypatch.setattr(lab.models, "load_pair", lambda name, **kwargs: loaded)
    # the warm-up (two greedy tokens, no temperature given) is not the demo's run
    monkeypatch.setattr(lab.decode, "generate",
                        lambda *a, **k: ("temperature" in k and used.append(k["temperature"])) or real(*a, **k))
    assert cli.main(["demo", *argv, "--max-new-tokens", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stats"]["new_tokens"] >= 1
    assert len(used) == 1
    return used[0]


def test_demo_samples_a_chat_pair_by_default_and_keeps_the_shakespeare_pair_greedy(smollm2_pair, pair, monkeypatch,
                                                                                     capsys):
    """Greedy answers of the real pair loop on open requests, so its demo samples at 0.8 unless told otherwise."""
    from lab.cli.options import demo_temperature
    from lab.cli.options import CHAT_TEMPERATURE

    assert CHAT_TEMPERATURE == 0.8
    assert cli.build_parser().parse_args(["demo"]).temperature is None  # "not given", resolved once the pair loads
    assert (demo_temperature(None, True), demo_temperature(None, False), demo_temperature(0.0, True),
            demo_temperature(1.5, False)) == (0.8, 0.0, 0.0, 1.5)
    assert _temperature_used([], smollm2_pair, monkeypatch, capsys) == 0.8
    assert _temperature_used(["--temperature", "0"], smollm2_pair, monkeypatch, capsys) == 0.0
    assert _temperature_used(["--pair", "shakespeare", "--prompt", "ROMEO."], pair, monkeypatch, capsys) == 0.0
    assert _temperature_used(["--pair", "shakespeare", "--prompt", "ROMEO.", "--temperature", "0.5"], pair,
                             monkeypatch, capsys) == 0.5


def test_demo_help_and_stats_line_name_the_temperature(smollm2_pair, monkeypatch, capsys):
    import lab.models

    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "(default: 0.8 for a pair with a chat template such as smollm2-135m" in help_text
    assert "0 for a plain-text pair such as shakespeare)" in help_text
    monkeypatch.setattr(lab.models, "load_pair", lambda name, **kwargs: smollm2_pair)
    assert cli.main(["demo", "--max-new-tokens", "2", "--seed", "5", "--color", "never"]) == 0
    assert "temperature 0.8, seed 5" in capsys.readouterr().out


# --- the bundled pair in a subprocess, as a user runs it -----------------------------------------------------------
def _cli(*args):
    env = dict(os.environ, PYTHONWARNINGS="ignore", TQDM_DISABLE="1")
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("drafter", ["ngram", "lookahead", "medusa", "eagle", "early-exit"])
def test_demo_with_the_new_drafters(drafter):
    prompt = "KING HENRY.\nOnce more unto the breach, dear friends, once more;\n\nKING HENRY.\nOnce more"
    done = _cli("demo", "--pair", "shakespeare", "--drafter", drafter, "--json", "--max-new-tokens", "24", "--prompt",
                prompt)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["stats"]["new_tokens"] == len(out["tokens"]) == 24
    if drafter in ("ngram", "lookahead"):  # no draft model: nothing but the target runs
        assert out["stats"]["draft_calls"] == 0
    else:
        assert out["stats"]["draft_calls"] > 0
    plain = _cli("demo", "--pair", "shakespeare", "--drafter", "model", "--json", "--max-new-tokens", "24", "--prompt",
                 prompt)
    assert json.loads(plain.stdout)["tokens"] == out["tokens"]  # greedy: every drafter gives the target's text


def test_demo_json():
    done = _cli("demo", "--json", "--max-new-tokens", "24", "--prompt", "KING HENRY.\nOnce more", "--n-draft", "3")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"text", "tokens", "stats", "load"}
    assert out["load"]["seconds"] > 0 and out["load"]["cores"] >= 1
    assert len(out["tokens"]) == 24 or out["tokens"][-1] == 2  # the real pair's answer ends with <|im_end|> = 2
    assert out["stats"]["new_tokens"] == len(out["tokens"])
    assert 0 <= out["stats"]["acceptance_rate"] <= 1


def test_demo_colours_and_sampling():
    done = _cli("demo", "--color", "always", "--max-new-tokens", "30", "--temperature", "0.8", "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert "\x1b[32m" in done.stdout and "acceptance rate" in done.stdout and "tokens per target call" in done.stdout
    assert f"{ANSI['resampled']}resampled\x1b[0m" in done.stdout  # the legend at T > 0


def test_demo_rejects_bad_arguments():
    for args in (["--n-draft", "0"], ["--temperature", "-1"], ["--max-new-tokens", "0"]):
        done = _cli("demo", *args)
        assert done.returncode == 2 and "must be" in done.stderr


def test_cli_demo_beyond_the_context_is_one_line_and_exit_status_2(pair):
    from lab.prompts import held_out_prompts

    n = len(pair.encode(held_out_prompts()[0]))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-m", "lab", "demo", "--pair", "shakespeare", "--max-new-tokens", "600"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"python -m lab demo: error: --max-new-tokens: prompt ({n} tokens) + 600 new tokens "
                           f"exceed the target's context of 512 positions: at most {512 - n} with this prompt\n")


def test_demo_shortens_a_long_prompt_and_warms_up_on_its_tail(monkeypatch, capsys):
    """A prompt of more than 4 * ECHO_CHARS characters prints as head and tail (the tail stays: the answer continues
    it), and the warm-up prefills only the prompt's last WARM_UP_TOKENS tokens; the run itself gets every token."""
    from types import SimpleNamespace

    import lab.decode
    import lab.models
    from lab.cli.demo import ECHO_CHARS, ECHO_LINES, echoed_prompt
    from lab.cli.options import WARM_UP_TOKENS

    assert echoed_prompt("x" * 4 * ECHO_CHARS) == "x" * 4 * ECHO_CHARS
    lines = "\n".join(f"line {i}" for i in range(4 * ECHO_LINES + 1))  # short, but too many lines for a screen
    brief = "x\n" * (4 * ECHO_LINES + 1)  # many lines, few characters: shortening would lengthen it
    assert echoed_prompt(brief) == brief
    head = "\n".join(f"line {i}" for i in range(ECHO_LINES))
    tail = "\n".join(f"line {i}" for i in range(3 * ECHO_LINES + 1, 4 * ECHO_LINES + 1))
    assert echoed_prompt(lines) == (f"{head}\n[… {len(lines) - len(head) - len(tail):,} characters of the prompt not "
                                    f"shown …]\n{tail}")
    prompt = "".join(chr(ord("a") + i % 26) for i in range(5000))
    shown = echoed_prompt(prompt)
    assert shown == (prompt[:ECHO_CHARS] + f"\n[… {5000 - 2 * ECHO_CHARS:,} characters of the prompt not shown …]\n"
                     + prompt[-ECHO_CHARS:])
    calls = []

    def fake_generate(target, prompt_ids, on_step=None, **kwargs):
        calls.append(list(prompt_ids))
        stats = {"acceptance_rate": None, "tokens_per_target_call": None, "target_calls": 0, "new_tokens": 1,
                 "tokens_per_second": 1.0}
        return SimpleNamespace(tokens=[ord("z")], steps=[], stats=stats)

    pair = CharPair()
    pair.target.config.max_position_embeddings = 8192
    monkeypatch.setattr(lab.models, "load_pair", lambda name="shakespeare", **kwargs: pair)
    monkeypatch.setattr(lab.decode, "generate", fake_generate)
    assert cli.main(["demo", "--prompt", prompt, "--color", "never", "--drafter", "ngram",
                     "--max-new-tokens", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(shown) and prompt not in out
    warm_up, run = calls
    assert run == CharPair().encode(prompt) and warm_up == run[-WARM_UP_TOKENS:]


def test_demo_confidence_drafts_with_transformers_stop(smollm2_pair, monkeypatch, capsys):
    import lab.decode
    import lab.models
    from lab.drafters import DraftModelDrafter

    drafters, real = [], lab.decode.generate
    monkeypatch.setattr(lab.models, "load_pair", lambda name, **k: smollm2_pair)
    monkeypatch.setattr(lab.decode, "generate",
                        lambda target, ids, **k: drafters.append(k.get("drafter")) or real(target, ids, **k))
    assert cli.main(["demo", "--confidence", "0.4", "--max-new-tokens", "24", "--temperature", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    warm_up, drafter = drafters  # the warm-up runs the target alone
    assert warm_up is None and isinstance(drafter, DraftModelDrafter)
    assert (drafter.n_draft, drafter.confidence) == (20, 0.4)
    assert out["stats"]["draft_calls"] > 0 and out["stats"]["new_tokens"] == len(out["tokens"])
    # unsure drafts end steps before the 20-token cap: far fewer drafted tokens than 20 per target call
    assert out["stats"]["drafted_tokens"] < 10 * out["stats"]["target_calls"]
    assert cli.main(["demo", "--confidence", "0.4", "--n-draft", "3", "--max-new-tokens", "2", "--json"]) == 0
    assert drafters[-1].n_draft == 3  # --n-draft caps the step instead


def test_demo_confidence_with_another_drafter_is_one_line_naming_the_flag(char_pair, capsys):
    assert cli.main(["demo", "--drafter", "ngram", "--confidence", "0.4"]) == 2
    assert capsys.readouterr().err == ("python -m lab demo: error: --confidence: applies to --drafter model only (the "
                                       "draft model's confidence stop), not --drafter ngram; leave --confidence out\n")


def test_demo_shows_control_characters_as_pictures_not_terminal_codes(pair, monkeypatch, capsys):
    """An escape sequence in the prompt (or in a token) is printed as its control pictures: it must not recolour or
    move the learner's terminal. The speed keeps a decimal below 10 tokens/s ("0 tokens/s" on a busy machine)."""
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pair)
    assert cli.main(["demo", "--prompt", "KING\x1b[31mRED\r", "--max-new-tokens", "3", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and out.startswith("KING\u241b[31mRED\u240d")
    assert re.search(r" · \d+(\.\d)? tokens/s( \(the prefill.s \d+ ms included; \d+(\.\d)? tokens/s after "
                     r"it\))? · ", out)


def test_show_controls_keeps_newlines_and_tabs():
    from lab.detok import show_controls

    assert show_controls("a\tb\nc\x00\x07\x1b\x7f") == "a\tb\nc\u2400\u2407\u241b\u2421"
    assert show_controls("\x9b31mred\x85") == "\ufffd31mred\ufffd"  # C1: CSI would start an escape too


def test_a_token_of_a_step_that_drafted_nothing_is_plain_not_a_bonus(pair, monkeypatch, capsys):
    """The prefill's token and a step with no draft (a lookup miss) print in plain text; blue is kept for the bonus
    token after accepted drafts, and the legend says what plain means."""
    import lab.decode
    import lab.models
    from lab.trace import StepRecord

    first, second, third, fourth = pair.encode(" the cat sat")[:3] + pair.encode(" down")[:1]
    records = [StepRecord(index=0, position=0, drafted=[], num_accepted=0, emitted=[first], last_kind="bonus",
                          prefill=True),
               StepRecord(index=1, position=1, drafted=[], num_accepted=0, emitted=[second], last_kind="bonus"),
               StepRecord(index=2, position=2, drafted=[third], num_accepted=1, emitted=[third, fourth],
                          last_kind="bonus")]

    def replay(target, ids, on_step=None, **kwargs):
        for record in records if on_step is not None else ():  # None: the demo's warm-up
            on_step(record)
        stats = {"acceptance_rate": 1.0, "tokens_per_target_call": 1.5, "target_calls": 2, "new_tokens": 4,
                 "tokens_per_second": 1.0}
        return Generation(tokens=[first, second, third, fourth], steps=records, stats=stats)

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pair)
    monkeypatch.setattr(lab.decode, "generate", replay)
    assert cli.main(["demo", "--prompt", "ROMEO:", "--color", "always", "--drafter", "ngram"]) == 0
    out = capsys.readouterr().out
    assert "plain: the target's token where nothing was drafted" in out
    generated = out.split("drafted\n", 1)[1]
    # blue once, for the last step's bonus (it was three times: the prefill's token and the lookup miss's too)
    assert generated.count(ANSI["bonus"]) == 1 and generated.count(ANSI["accepted"]) == 1


def test_demo_fits_its_threads_and_says_so_only_when_it_changed_them(pair, monkeypatch, capsys):
    """A busy machine ran the terminal demo at 20 tokens/s on 2 threads, 44 on 1 (the lessons and the demo app fit
    their threads; this did not): it calls fit_threads, and names the change on stderr, keeping stdout the answer."""
    import torch

    import lab.models

    before = torch.get_num_threads()
    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pair)
    monkeypatch.setattr(lab.models, "fit_threads", lambda: "torch uses 2 CPU threads (quiet)")
    assert cli.main(["demo", "--prompt", "ROMEO:", "--max-new-tokens", "3"]) == 0
    assert "torch uses" not in capsys.readouterr().err  # nothing changed: nothing said

    def cut():
        torch.set_num_threads(1)
        return "torch uses 1 CPU thread, not 2: other programs kept 1.02 of 2 cores busy"

    monkeypatch.setattr(lab.models, "fit_threads", cut)
    try:
        torch.set_num_threads(2)
        assert cli.main(["demo", "--prompt", "ROMEO:", "--max-new-tokens", "3"]) == 0
        captured = capsys.readouterr()
        assert captured.err == "torch uses 1 CPU thread, not 2: other programs kept 1.02 of 2 cores busy\n"
        assert "torch uses" not in captured.out
    finally:
        torch.set_num_threads(before)
