"""``python -m lab arena`` (lab.cli.arena): option errors before any run, the drafters a hub pair lacks, and the
help."""
from __future__ import annotations

import json
import re

import pytest

from lab import cli
from lab.registry import DRAFTERS, TRAINED_FOR


def test_arena_with_a_hub_pair_skips_the_drafters_it_lacks(hub_pair, monkeypatch, capsys):
    import lab.arena

    seen = {}
    real = lab.arena.run_arena

    def spy(pair, **kwargs):
        seen.update(kwargs)
        kwargs["tasks"] = ("prose",)  # one task keeps this short
        return real(pair, **kwargs, progress=False)

    monkeypatch.setattr(lab.arena, "run_arena", spy)
    assert cli.main(["arena", "--pair", "gpt2", "--prompts", "1", "--max-new-tokens", "2", "--json"]) == 0
    captured = capsys.readouterr()
    # every drafter without trained weights (suffix decoding needs none) and with no Llama layers to exit from
    assert seen["drafters"] == tuple(kind for kind in DRAFTERS if kind not in TRAINED_FOR and kind != "early-exit")
    assert seen["drafters"][:4] == ("model", "ngram", "lookahead", "suffix")
    assert "not run with pair gpt2: medusa (" in captured.err


def test_arena_prints_its_reading_after_the_tables(hub_pair, monkeypatch, capsys):
    """Without --json the command ends with the run read in words (lab.arena_reading), built from the same rows."""
    import lab.arena
    from lab.arena_reading import read_adaptive, read_arena

    runs = {}
    real_arena, real_adaptive = lab.arena.run_arena, lab.arena.compare_adaptive

    def arena_spy(pair, **kwargs):
        kwargs.update(tasks=("prose",), temperatures=(0.0,))
        runs["arena"] = real_arena(pair, **kwargs, progress=False)
        return runs["arena"]

    def adaptive_spy(pair, **kwargs):
        runs["adaptive"] = real_adaptive(pair, **dict(kwargs, n_values=(1, 2)), progress=False)
        return runs["adaptive"]

    monkeypatch.setattr(lab.arena, "run_arena", arena_spy)
    monkeypatch.setattr(lab.arena, "compare_adaptive", adaptive_spy)
    assert cli.main(["arena", "--pair", "gpt2", "--prompts", "1", "--max-new-tokens", "2"]) == 0
    out = capsys.readouterr().out
    reading = out.split("The run, read (lab.arena_reading)\n\n", 1)[1]
    assert reading.startswith(read_arena(runs))
    assert reading.rstrip().endswith(read_adaptive(runs["adaptive"]))
    assert "**The baseline.**" in reading and "- **prose**: most tokens per target call:" in reading


def test_arena_help_describes_the_options_with_their_defaults(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["arena", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # unwrap argparse's line breaks
    assert "The drafter arena (lesson 12)" in text
    for part in ("--json print the arena, the adaptive comparison, the command and the time as JSON (what "
                 "lab/assets/<pair>/arena.json commits)",
                 "--max-new-tokens MAX_NEW_TOKENS tokens to generate per prompt, >= 2: the prefill writes the first "
                 "(default: 64)",
                 "--n-draft N_DRAFT draft tokens per step N for the drafters that take one, 1 to 64 (default: 4)",
                 "--pair PAIR model pair preset, one of shakespeare, smollm2-135m, gpt2, smollm2, qwen2.5 (default: "
                 "smollm2-135m; shakespeare and smollm2-135m work offline)",
                 "--prompts PROMPTS prompts per task, from 1 to the prompts bundled for each task run: 4 for "
                 "shakespeare's structured, 8 for its other tasks and smollm2-135m's single requests, 12 for "
                 "multi_turn and agent (default: 3)",
                 "--repeats REPEATS time each run this often and keep the fastest, >= 1 (default: 1)"):
        assert part in text, part
    assert "chat, code, structured output and copy/edit requests (sent as user turns)" in text


def test_arena_refuses_one_new_token_before_the_pair_loads(monkeypatch, capsys):
    """The arena measures decode steps, and the prefill writes the first token: 1 is refused as an option error
    (it was a traceback after the pair had loaded)."""
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pytest.fail("the pair was loaded"))
    assert cli.main(["arena", "--max-new-tokens", "1", "--prompts", "1"]) == 2
    assert "error: --max-new-tokens: must be >= 2 in the arena" in capsys.readouterr().err


def test_arena_prompt_limits_of_the_bundled_pairs_are_the_real_ones():
    from lab.cli.arena import _bundled_prompt_counts
    from lab.prompts import CHAT_TASKS, chat_prompts

    # the counts the help names, known before the pair loads: 1 to 4 with shakespeare, 1 to 8 with smollm2-135m
    assert _bundled_prompt_counts("shakespeare") == {"prose": 8, "copy_edit": 8, "structured": 4}
    assert _bundled_prompt_counts("smollm2-135m") == {**{task: 8 for task in CHAT_TASKS}, "multi_turn": 12,
                                                      "agent": 12}  # 4 conversations x 3 later requests
    assert all(len(chat_prompts(task)) == 8 for task in CHAT_TASKS)
    assert _bundled_prompt_counts("gpt2") is None  # a hub pair's tasks are known once it loads


@pytest.fixture(scope="module")
def chat_pair(smollm2_pair):
    """The real pair's models under a hub preset's name ("smollm2"), the target as its own draft: a hub chat pair,
    whose tasks are known only once it loads."""
    import dataclasses

    return dataclasses.replace(smollm2_pair, name="smollm2", draft=smollm2_pair.target)


def test_arena_with_a_chat_pair_runs_its_requests_and_skips_the_drafters_it_lacks(chat_pair, monkeypatch, capsys):
    import lab.arena
    import lab.models
    from lab.prompts import CHAT_TASKS

    seen = {}
    real_arena, real_adaptive = lab.arena.run_arena, lab.arena.compare_adaptive

    def arena_spy(pair, **kwargs):
        seen["arena"] = dict(kwargs)
        kwargs.update(tasks=("chat",), drafters=("ngram",), temperatures=(0.0,), prompts_per_task=1)  # kept short
        return real_arena(pair, **kwargs, progress=False)

    def adaptive_spy(pair, **kwargs):
        seen["adaptive"] = dict(kwargs)
        kwargs.update(prompts=1, start_n=1, max_n_draft=1)
        return real_adaptive(pair, **kwargs, n_values=(1,), progress=False)

    monkeypatch.setattr(lab.arena, "run_arena", arena_spy)
    monkeypatch.setattr(lab.arena, "compare_adaptive", adaptive_spy)
    monkeypatch.setattr(lab.models, "load_pair", lambda name, **kwargs: chat_pair if name == "smollm2" else None)
    # 6 prompts per task: the chat requests have 8 (the Shakespeare tasks only 4)
    assert cli.main(["arena", "--pair", "smollm2", "--prompts", "6", "--max-new-tokens", "2", "--json"]) == 0
    captured = capsys.readouterr()
    assert seen["arena"]["tasks"] == CHAT_TASKS and seen["arena"]["prompts_per_task"] == 6
    assert seen["arena"]["drafters"] == tuple(kind for kind in DRAFTERS if kind not in TRAINED_FOR)
    assert seen["arena"]["drafters"][:5] == ("model", "ngram", "lookahead", "early-exit", "suffix")
    assert seen["adaptive"]["task"] == "chat" and seen["adaptive"]["prompts"] == 6
    assert "max_n_draft" not in seen["adaptive"]  # compare_adaptive's own cap: 16, or --n-draft when longer
    assert "not run with pair smollm2: medusa (no Medusa heads for the 'smollm2' pair" in captured.err
    assert "; eagle (no EAGLE draft for the 'smollm2' pair" in captured.err
    out = json.loads(captured.out)
    # the file a committed arena is (lab.arena.committed_arena), with the command and time that made it
    assert out["command"] == "python -m lab arena --pair smollm2 --prompts 6 --max-new-tokens 2 --json"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", out["date"])
    assert out["arena"]["settings"]["prompt_format"] == out["adaptive"]["settings"]["prompt_format"] == "chat"
    assert out["adaptive"]["settings"]["task"] == "chat"
    assert all(r["same_as_autoregressive"] is True for r in out["arena"]["rows"] + out["adaptive"]["rows"])
    # a hub pair's prompt count is checked once it loads, against its own tasks
    assert cli.main(["arena", "--pair", "smollm2", "--prompts", "9"]) == 2
    assert capsys.readouterr().err == ("python -m lab arena: error: --prompts: must be at most 8 (the chat prompts "
                                       "bundled), got 9\n")


def test_arena_task_and_drafter_options_make_a_small_run(hub_pair, monkeypatch, capsys):
    """--task and --drafter pass to run_arena; without the draft model among the drafters, fixed vs adaptive N (the
    draft model's) is left out of the tables, the reading and the JSON; a drafter the pair cannot have, asked for by
    name, is an option error; an unknown task names the pair's tasks."""
    import lab.arena

    seen = {}
    real = lab.arena.run_arena

    def spy(pair, **kwargs):
        seen.update(kwargs)
        return real(pair, **dict(kwargs, temperatures=(0.0,)), progress=False)

    monkeypatch.setattr(lab.arena, "run_arena", spy)
    monkeypatch.setattr(lab.arena, "compare_adaptive", lambda *a, **k: pytest.fail("adaptive without the draft model"))
    args = ["arena", "--pair", "gpt2", "--prompts", "1", "--max-new-tokens", "3", "--task", "prose",
            "--drafter", "ngram"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert seen["tasks"] == ("prose",) and seen["drafters"] == ("ngram",)
    assert "Where the predicted speedup went" in out and "The run, read (lab.arena_reading)" in out
    assert "adaptive" not in out.split("The run, read")[0].lower()
    assert cli.main(args + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["adaptive"] is None
    assert cli.main(["arena", "--pair", "gpt2", "--prompts", "1", "--drafter", "medusa"]) == 2
    assert "error: --drafter: medusa cannot run with pair gpt2:" in capsys.readouterr().err
    assert cli.main(["arena", "--pair", "gpt2", "--prompts", "1", "--task", "chat"]) == 2
    assert "error: --task: 'chat' is not a task of this pair; choose from prose, copy_edit, structured" in \
        capsys.readouterr().err


def test_arena_and_bench_fit_threads_after_the_pair_loads(monkeypatch, capsys):
    """An instructor's class-sized arena on a busy machine timed 2 spinning threads (798 ms a step against 37): arena
    and bench now fit torch's threads after the pair loads with demo's helper, which says nothing when nothing changed
    (the message on a cut: tests/lab/cli/test_demo.py)."""
    import inspect

    import lab.cli.arena
    import lab.cli.bench
    import lab.models
    from lab.cli.options import fit_threads_noting_changes

    calls = []
    monkeypatch.setattr(lab.models, "fit_threads", lambda: calls.append(1) or "torch uses 2 CPU threads (quiet)")
    fit_threads_noting_changes()
    assert calls and capsys.readouterr().err == ""
    assert "fit_threads_noting_changes()" in inspect.getsource(lab.cli.arena.run)
    assert inspect.getsource(lab.cli.bench).count("fit_threads_noting_changes()") == 3  # one per loaded pair


def test_arena_checks_n_draft_and_untrained_drafters_before_the_pair_loads(monkeypatch, capsys):
    """A CLI tester's `arena --n-draft 17` ran the whole arena and then failed in the adaptive comparison (its cap
    was 16); `--drafter lookahead --n-draft 7` printed "N = 7" for a drafter that sets its own draft; `--pair gpt2
    --drafter medusa` loaded the pair before refusing it."""
    import lab.models
    from tests.lab.cli.helpers import error_line, run_bad

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pytest.fail("the pair was loaded"))
    assert "--n-draft: must be a whole number from 1 to 64, got '65'" in error_line(
        run_bad(["arena", "--n-draft", "65"], capsys))
    assert cli.main(["arena", "--pair", "shakespeare", "--drafter", "lookahead,medusa", "--n-draft", "7"]) == 2
    assert "error: --n-draft: does not apply to lookahead, medusa:" in capsys.readouterr().err
    assert cli.main(["arena", "--pair", "gpt2", "--drafter", "medusa"]) == 2
    err = capsys.readouterr().err
    assert "error: --drafter: medusa cannot run with pair gpt2: no medusa weights are trained" in err
