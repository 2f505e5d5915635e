"""The options every command shares (lab.cli.options): the --pair choices and the argparse types, whose errors name
the flag and the allowed range in one line, before any model is loaded (the model work is replaced by functions
that fail the test if they are reached)."""
from __future__ import annotations

import pytest

from lab import cli
from tests.lab.cli.helpers import CharPair, error_line, run_bad


def test_pair_choices_are_the_model_presets():
    from lab.models import PRESETS

    assert cli.PAIRS == tuple(PRESETS)


@pytest.mark.parametrize("command", ["arena", "demo", "bench"])
def test_unknown_pair_is_one_line_naming_the_flag_and_the_presets(command, capsys, no_model_work):
    line = error_line(run_bad([command, "--pair", "nosuch"], capsys))
    assert line.startswith(f"python -m lab {command}: error: argument --pair: invalid choice: 'nosuch'")
    for name in ("shakespeare", "gpt2", "smollm2", "qwen2.5"):
        assert repr(name) in line


@pytest.mark.parametrize("argv, flag, expected", [
    (["demo", "--max-new-tokens", "x"], "--max-new-tokens", "must be a whole number >= 1, got 'x'"),
    (["demo", "--max-new-tokens", "0"], "--max-new-tokens", "must be a whole number >= 1, got '0'"),
    (["demo", "--n-draft", "1.5"], "--n-draft", "must be a whole number >= 1, got '1.5'"),
    (["demo", "--temperature", "abc"], "--temperature",
     "must be a number from 0 (greedy) to 2 (the OpenAI API's range), got 'abc'"),
    (["demo", "--temperature", "-1"], "--temperature",
     "must be a number from 0 (greedy) to 2 (the OpenAI API's range), got '-1'"),
    (["demo", "--temperature", "inf"], "--temperature",
     "must be a number from 0 (greedy) to 2 (the OpenAI API's range), got 'inf'"),
    (["demo", "--temperature", "nan"], "--temperature",
     "must be a number from 0 (greedy) to 2 (the OpenAI API's range), got 'nan'"),
    (["demo", "--temperature", "1e9"], "--temperature",
     "must be a number from 0 (greedy) to 2 (the OpenAI API's range), got '1e9'"),
    (["bench", "--prompts", "-2"], "--prompts", "must be a whole number >= 1, got '-2'"),
    (["arena", "--repeats", "0"], "--repeats", "must be a whole number >= 1, got '0'"),
    (["arena", "--max-new-tokens", "ten"], "--max-new-tokens", "must be a whole number >= 1, got 'ten'"),
    (["train", "card", "--threads", "0"], "--threads", "must be a whole number >= 1, got '0'"),
    (["pick", "--task", "chat", "--tensor-parallel-size", "0"], "--tensor-parallel-size",
     "must be a whole number >= 1, got '0'"),
    (["pick", "--task", "chat", "--memory-gb", "-3"], "--memory-gb", "must be a finite number of GB >= 0, got '-3'"),
    (["pick", "--task", "chat", "--memory-gb", "nan"], "--memory-gb", "must be a finite number of GB >= 0, got 'nan'"),
    (["pick", "--task", "chat", "--memory-gb", "lots"], "--memory-gb", "must be a number of GB >= 0, got 'lots'"),
    (["pick", "--task", "chat", "--temperature", "-0.5"], "--temperature",
     "must be a number from 0 (greedy) to 2 (the OpenAI API's range), got '-0.5'"),
    (["demo", "--seed", "99999999999999999999999"], "--seed",
     "must be a whole number from -2**63 to 2**64 - 1, got '99999999999999999999999'"),
    (["demo", "--seed", "1.5"], "--seed", "must be a whole number, got '1.5'"),
    (["demo", "--confidence", "1"], "--confidence", "must be a number in (0, 1), e.g. 0.4, got '1'"),
    (["demo", "--confidence", "0"], "--confidence", "must be a number in (0, 1), e.g. 0.4, got '0'"),
    (["demo", "--confidence", "high"], "--confidence", "must be a number in (0, 1), e.g. 0.4, got 'high'"),
])
def test_bad_values_name_the_flag_and_the_allowed_range(argv, flag, expected, capsys, no_model_work):
    line = error_line(run_bad(argv, capsys))
    assert line.endswith(f"error: argument {flag}: {expected}"), line
    # argparse names the type function only when it fails with its own error ("invalid positive_int value")
    assert "positive_int" not in line and "parse value" not in line and "gigabytes" not in line
    assert "memory_headroom_gb" not in line


def test_seed_range_is_what_torch_accepts():
    parser = cli.build_parser()
    for seed in (-2 ** 63, 0, 2 ** 64 - 1):
        assert parser.parse_args(["demo", "--seed", str(seed)]).seed == seed
    for seed in (-2 ** 63 - 1, 2 ** 64):
        with pytest.raises(SystemExit):
            parser.parse_args(["demo", "--seed", str(seed)])


def _bench_texts(pair):
    from lab.prompts import copy_heavy_prompts, held_out_prompts

    chosen = held_out_prompts()[:2]  # held-out prompts and their copy-heavy versions
    return chosen + copy_heavy_prompts(pair, chosen)


def _arena_texts(pair):
    from lab.prompts import arena_prompts

    # the arena's default tasks (compare_adaptive's prose is one of them)
    return [p for task in ("prose", "copy_edit", "structured") for p in arena_prompts(pair, task)[:2]]


@pytest.mark.parametrize("command, texts", [("bench", _bench_texts), ("arena", _arena_texts)])
def test_bench_and_arena_prompts_beyond_the_context_are_one_line(command, texts, char_pair, capsys):
    assert cli.main([command, "--pair", "shakespeare", "--max-new-tokens", "500", "--prompts", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    longest = max(len(text) for text in texts(CharPair()))
    assert longest < 512
    assert captured.err == (f"python -m lab {command}: error: --max-new-tokens: the longest prompt ({longest} "
                            f"tokens) + 500 new tokens exceed the target's context of 512 positions: at most "
                            f"{512 - longest} with these prompts\n")


def _held_out_count():
    from lab.prompts import held_out_prompts

    return len(held_out_prompts())


def _structured_count():
    from lab.prompts import held_out_prompts, record_prompts

    return min(len(held_out_prompts()), len(record_prompts(None)))  # every arena task has at least this many


def _chat_count():
    from lab.prompts import CHAT_TASKS, chat_prompts

    return min(len(chat_prompts(task)) for task in CHAT_TASKS)


@pytest.mark.parametrize("command, pair, count, limit, message", [
    ("bench", "shakespeare", _held_out_count, 8, "must be at most 8 (the held-out prompts bundled), got 9"),
    ("arena", "shakespeare", _structured_count, 4, "must be at most 4 (the structured prompts bundled), got 5"),
    ("bench", "smollm2-135m", _chat_count, 8, "must be at most 8 (the held-out requests per kind), got 9"),
    ("arena", "smollm2-135m", _chat_count, 8, "must be at most 8 (the chat prompts bundled), got 9"),
])
def test_prompt_count_is_checked_before_the_pair_loads(command, pair, count, limit, message, monkeypatch, capsys):
    import lab.models

    def forbidden(*args, **kwargs):
        raise AssertionError(f"{command} loaded the pair before checking --prompts")

    monkeypatch.setattr(lab.models, "load_pair", forbidden)
    assert cli.main([command, "--pair", pair, "--prompts", str(limit + 1)]) == 2
    assert capsys.readouterr().err == f"python -m lab {command}: error: --prompts: {message}\n"
    assert count() == limit  # the limit is the real one
