"""``python -m lab``: bad options give one error line naming the flag, before any model is loaded; help is complete.

Everything runs in-process through :func:`lab.cli.main` (argparse errors are ``SystemExit(2)``), with the model
entry points replaced by functions that fail the test if they are reached, so no model is ever loaded here; one
subprocess run checks that a bad --pair exits before torch is even imported.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab import cli, picker

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_model_work(monkeypatch):
    """Make every command's model work fail the test if it is reached."""
    import lab.bench

    def forbidden(*args, **kwargs):
        raise AssertionError("the command reached model work; the bad option should have stopped it")

    monkeypatch.setattr(lab.bench, "arena_main", forbidden)
    monkeypatch.setattr(lab.bench, "main", forbidden)
    monkeypatch.setattr(cli, "demo", forbidden)


def run_bad(argv, capsys) -> str:
    """Run the CLI with options argparse must reject; return its stderr (exit status 2 asserted)."""
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    return captured.err


def error_line(stderr: str) -> str:
    """The one error line argparse prints after the usage."""
    lines = [line for line in stderr.splitlines() if ": error: " in line]
    assert len(lines) == 1, stderr
    return lines[0]


# --- --pair ------------------------------------------------------------------------------------------------------
def test_pair_choices_are_the_model_presets():
    from lab.models import PRESETS

    assert cli.PAIRS == tuple(PRESETS)


@pytest.mark.parametrize("command", ["arena", "demo", "bench"])
def test_unknown_pair_is_one_line_naming_the_flag_and_the_presets(command, capsys, no_model_work):
    line = error_line(run_bad([command, "--pair", "nosuch"], capsys))
    assert line.startswith(f"python -m lab {command}: error: argument --pair: invalid choice: 'nosuch'")
    for name in ("shakespeare", "gpt2", "smollm2", "qwen2.5"):
        assert repr(name) in line


def test_unknown_pair_exits_before_torch_is_imported():
    code = ("import sys\nfrom lab.cli import main\ntry:\n    main(['arena', '--pair', 'nosuch'])\n"
            "except SystemExit as e:\n    print('exit', e.code, 'torch' in sys.modules)\n")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=60)
    assert done.stdout.strip() == "exit 2 False", (done.stdout, done.stderr)
    assert "argument --pair" in done.stderr and "Traceback" not in done.stderr


def test_model_not_available_is_one_line_and_exit_status_1(monkeypatch, capsys):
    import lab.models

    def unavailable(name="shakespeare", **kwargs):
        raise lab.models.ModelNotAvailableError(f"preset {name!r} is not in the local cache (test)")

    monkeypatch.setattr(lab.models, "load_pair", unavailable)
    assert cli.main(["demo", "--pair", "gpt2", "--max-new-tokens", "1"]) == 1
    captured = capsys.readouterr()
    assert captured.err == ("python -m lab demo: preset 'gpt2' is not in the local cache (test) On the command line: "
                            "leave out --pair gpt2 to run the bundled pair.\n")


# --- argparse types: the flag and the allowed range, no internal names ----------------------------------------------
@pytest.mark.parametrize("argv, flag, expected", [
    (["demo", "--max-new-tokens", "x"], "--max-new-tokens", "must be a whole number >= 1, got 'x'"),
    (["demo", "--max-new-tokens", "0"], "--max-new-tokens", "must be a whole number >= 1, got '0'"),
    (["demo", "--n-draft", "1.5"], "--n-draft", "must be a whole number >= 1, got '1.5'"),
    (["demo", "--temperature", "abc"], "--temperature", "must be a number >= 0 (0 = greedy), got 'abc'"),
    (["demo", "--temperature", "-1"], "--temperature", "must be a finite number >= 0 (0 = greedy), got '-1'"),
    (["demo", "--temperature", "inf"], "--temperature", "must be a finite number >= 0 (0 = greedy), got 'inf'"),
    (["demo", "--temperature", "nan"], "--temperature", "must be a finite number >= 0 (0 = greedy), got 'nan'"),
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
     "must be a finite number >= 0 (0 = greedy), got '-0.5'"),
    (["demo", "--seed", "99999999999999999999999"], "--seed",
     "must be a whole number from -2**63 to 2**64 - 1, got '99999999999999999999999'"),
    (["demo", "--seed", "1.5"], "--seed", "must be a whole number, got '1.5'"),
])
def test_bad_values_name_the_flag_and_the_allowed_range(argv, flag, expected, capsys, no_model_work):
    line = error_line(run_bad(argv, capsys))
    assert line.endswith(f"error: argument {flag}: {expected}"), line
    assert "_positive_int" not in line and "_temperature" not in line and "_gigabytes" not in line
    assert "memory_headroom_gb" not in line


def test_bad_choices_list_the_allowed_values(capsys):
    line = error_line(run_bad(["pick", "--task", "poetry"], capsys))
    assert "argument --task: invalid choice: 'poetry'" in line and "'copy_edit'" in line
    line = error_line(run_bad(["pick", "--task", "chat", "--exclude", "warp"], capsys))
    assert "argument --exclude: invalid choice: 'warp'" in line and "'eagle'" in line


def test_seed_range_is_what_torch_accepts():
    parser = cli.build_parser()
    for seed in (-2 ** 63, 0, 2 ** 64 - 1):
        assert parser.parse_args(["demo", "--seed", str(seed)]).seed == seed
    for seed in (-2 ** 63 - 1, 2 ** 64):
        with pytest.raises(SystemExit):
            parser.parse_args(["demo", "--seed", str(seed)])


# --- errors that need the tokenizer: one line naming the flag, exit status 2, before any generation ----------------
class CharPair:
    """A stand-in for a loaded pair: one token per character, a 512-position target, no weights."""
    name, device, eos_token_id = "fake", "cpu", None

    def __init__(self):
        from types import SimpleNamespace

        self.target = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=512))

    def encode(self, text):
        return [ord(ch) for ch in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


@pytest.fixture
def char_pair(monkeypatch):
    """``load_pair`` returns a :class:`CharPair`; generating, timing or the arena fail the test if reached."""
    import lab.bench
    import lab.decode
    import lab.models

    def forbidden(*args, **kwargs):
        raise AssertionError("the command started generating; the context check should have stopped it")

    monkeypatch.setattr(lab.models, "load_pair", lambda name="shakespeare", **kwargs: CharPair())
    for module, name in ((lab.decode, "generate"), (lab.bench, "run_bench"), (lab.bench, "run_arena"),
                         (lab.bench, "compare_adaptive")):
        monkeypatch.setattr(module, name, forbidden)


def test_demo_prompt_beyond_the_context_is_one_line_naming_the_flag(char_pair, capsys):
    from lab.models import held_out_prompts

    n = len(held_out_prompts()[0])  # one token per character
    assert cli.main(["demo", "--max-new-tokens", "600"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # stopped before printing the prompt
    assert captured.err == (f"python -m lab demo: error: --max-new-tokens: prompt ({n} tokens) + 600 new tokens "
                            "exceed the target's context of 512 positions\n")
    assert cli.main(["demo", "--prompt", "ab", "--max-new-tokens", "511"]) == 2  # 2 + 511 > 512
    assert "prompt (2 tokens) + 511 new tokens" in capsys.readouterr().err


def test_demo_prompt_that_alone_fills_the_context_names_the_prompt(char_pair, capsys):
    assert cli.main(["demo", "--prompt", "a" * 512, "--max-new-tokens", "5"]) == 2
    assert capsys.readouterr().err == ("python -m lab demo: error: --prompt: has 512 tokens; the target's context "
                                       "holds 512 positions, so a prompt may have at most 511 (one position is left "
                                       "for a new token)\n")
    assert cli.main(["demo", "--prompt", "a" * 511, "--max-new-tokens", "2"]) == 2  # 511 fit; 511 + 2 do not
    assert "--max-new-tokens: prompt (511 tokens) + 2 new tokens" in capsys.readouterr().err


def test_encoding_a_long_prompt_prints_no_tokenizer_warning(capfd):
    from lab.models import load_pair

    pair = load_pair("shakespeare")
    capfd.readouterr()
    ids = pair.encode("To be or not to be. " * 150)
    assert len(ids) > pair.tokenizer.model_max_length  # past the length the tokenizer would warn about
    captured = capfd.readouterr()
    assert "sequence length" not in captured.err + captured.out, captured


def test_demo_empty_prompt_is_one_line_naming_the_flag(char_pair, capsys):
    assert cli.main(["demo", "--prompt", ""]) == 2
    assert capsys.readouterr().err == "python -m lab demo: error: --prompt: must contain at least one token, got ''\n"


@pytest.mark.parametrize("drafter, why", [("lookahead", "its window W and n-gram size"), ("medusa", "its tree")])
def test_demo_n_draft_for_a_drafter_that_takes_none_is_one_line(drafter, why, monkeypatch, capsys):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *a, **k: pytest.fail("must refuse before loading"))
    assert cli.main(["demo", "--drafter", drafter, "--n-draft", "6"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m lab demo: error: --n-draft: does not apply to --drafter {drafter}: {why}")
    assert err.count("\n") == 1


@pytest.mark.parametrize("command", ["bench", "arena"])
def test_bench_and_arena_prompts_beyond_the_context_are_one_line(command, char_pair, capsys):
    assert cli.main([command, "--max-new-tokens", "500", "--prompts", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    from lab.bench import arena_prompts, copy_heavy_prompts
    from lab.models import held_out_prompts

    if command == "bench":  # held-out prompts and their copy-heavy versions
        chosen = held_out_prompts()[:2]
        texts = chosen + copy_heavy_prompts(CharPair(), chosen)
    else:  # the arena's default tasks (compare_adaptive's prose is one of them)
        texts = [p for task in ("prose", "copy_edit", "structured") for p in arena_prompts(CharPair(), task)[:2]]
    longest = max(len(text) for text in texts)
    assert longest < 512
    assert captured.err == (f"python -m lab {command}: error: --max-new-tokens: the longest prompt ({longest} tokens) "
                            "+ 500 new tokens exceed the target's context of 512 positions\n")


@pytest.mark.parametrize("command, count, message", [
    ("arena", 5, "must be at most 4 (the structured prompts bundled), got 5"),
    ("bench", 9, "must be at most 8 (the held-out prompts bundled), got 9"),
])
def test_prompt_count_is_checked_before_the_pair_loads(command, count, message, monkeypatch, capsys):
    import lab.bench
    import lab.models

    def forbidden(*args, **kwargs):
        raise AssertionError(f"{command} loaded the pair before checking --prompts")

    monkeypatch.setattr(lab.models, "load_pair", forbidden)
    assert cli.main([command, "--prompts", str(count)]) == 2
    assert capsys.readouterr().err == f"python -m lab {command}: error: --prompts: {message}\n"
    # the limits are the real ones: every arena task has at least 4 prompts, the bench 8 held-out prompts
    assert min(len(lab.models.held_out_prompts()), len(lab.bench.record_prompts(None))) == 4
    assert len(lab.models.held_out_prompts()) == 8


# --- pick: errors that argparse cannot see ---------------------------------------------------------------------------
def test_markdown_into_a_missing_folder_is_a_clear_error(tmp_path, capsys):
    target = tmp_path / "nosuch" / "g.md"
    assert cli.main(["pick", "--task", "chat", "--markdown", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # stopped before printing the recommendation
    assert captured.err == (f"python -m lab pick: --markdown: cannot write {target}: the folder {target.parent} "
                            "does not exist\n")
    assert not target.parent.exists()


def test_markdown_with_an_empty_name_is_a_clear_error(capsys):
    assert cli.main(["pick", "--task", "chat", "--markdown", ""]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ("python -m lab pick: --markdown: give a file name, e.g. guide.md "
                                                   "(got an empty one)\n")


def test_markdown_onto_a_folder_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["pick", "--task", "chat", "--markdown", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m lab pick: --markdown: {tmp_path} is a folder") and err.count("\n") == 1


def test_markdown_write_failure_is_one_line_and_exit_status_1(tmp_path, monkeypatch, capsys):
    def full_disk(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    target = tmp_path / "g.md"
    assert cli.main(["pick", "--task", "code", "--markdown", str(target)]) == 1
    captured = capsys.readouterr()
    assert "Method: n-gram prompt lookup (ngram)" in captured.out
    assert captured.err == f"python -m lab pick: --markdown: cannot write {target}: No space left on device\n"


def test_pick_names_flags_in_errors_from_recommend(capsys):
    """Values that reach recommend() (bypassing argparse's checks) still come back under the flag's name."""
    args = argparse.Namespace(task="chat", temperature=0.0, small_model=True, can_finetune=False, throughput=False,
                              memory_gb=-3.0, exclude=None, target="m", tensor_parallel_size=1, markdown=None,
                              json=False)
    assert picker.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m lab pick: --memory-gb must be") and "memory_headroom_gb" not in err
    args.memory_gb, args.tensor_parallel_size = None, 0
    assert picker.main(args) == 2
    assert capsys.readouterr().err.startswith("python -m lab pick: --tensor-parallel-size must be an integer >= 1")


# --- help ------------------------------------------------------------------------------------------------------------
def subparsers() -> dict:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_subcommand_has_a_description_and_every_option_help_and_default():
    commands = subparsers()
    assert set(commands) == {"demo", "bench", "arena", "train", "pick"}
    for name, sub in commands.items():
        assert sub.description and len(sub.description) > 40, name
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            flag = action.option_strings[0] if action.option_strings else action.dest
            assert action.help and len(action.help) > 10, (name, flag)
            shows_default = action.default not in (None, False) and not isinstance(
                action, argparse.BooleanOptionalAction)
            if shows_default:
                assert "%(default)s" in action.help, (name, flag)


def test_arena_help_describes_the_options_with_their_defaults(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["arena", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # unwrap argparse's line breaks
    assert "The drafter arena (lesson 12)" in text
    for part in ("--json print the arena and the adaptive comparison as JSON",
                 "--max-new-tokens MAX_NEW_TOKENS tokens to generate per prompt, >= 1 (default: 64)",
                 "--n-draft N_DRAFT draft tokens per step N for the drafters that take one, >= 1 (default: 4)",
                 "--pair PAIR model pair preset, one of shakespeare, gpt2, smollm2, qwen2.5 (default: shakespeare",
                 "--prompts PROMPTS prompts per task, 1 to 4 with the bundled pair (default: 3)",
                 "--repeats REPEATS time each run this often and keep the fastest, >= 1 (default: 1)"):
        assert part in text, part


def test_a_closed_pipe_ends_quietly():
    """`python -m lab demo | head -c 1`: the reader leaves while tokens are still streaming; no BrokenPipeError
    traceback, exit status 1."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "lab", "demo", "--max-new-tokens", "200", "--color", "never"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    assert proc.stdout.read(1)
    proc.stdout.close()  # the reader is gone; the demo is still writing
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err
    assert proc.returncode == 1


def test_demo_shows_a_trees_rejected_nodes_one_alternative_each(monkeypatch, capsys):
    """A token tree's rejected nodes print as alternatives (one per node off the accepted path that completes a
    character, joined by "|"), each decoded after its ancestors: here "é" is split over a node and its child."""
    from types import SimpleNamespace

    import lab.decode
    import lab.models
    from lab.trace import StepRecord

    class BytePair(CharPair):  # one token per byte, as byte-level BPE can split a character
        def encode(self, text):
            return list(text.encode())

        def decode(self, ids):
            return bytes(ids).decode("utf-8", errors="replace")

    # tree: A(0) -> 0xC3(1) -> 0xA9(2), and D(3) at the top. A accepted; the target then says "x".
    drafted = [ord("A"), 0xC3, 0xA9, ord("D")]
    record = StepRecord(index=0, position=0, drafted=drafted, num_accepted=1, emitted=[ord("A"), ord("x")],
                        last_kind="resampled", parents=[-1, 0, 1, -1], path=[0])

    def fake_generate(target, prompt_ids, on_step=None, **kwargs):
        on_step(record)
        return SimpleNamespace(tokens=record.emitted, stats={"acceptance_rate": 0.25, "tokens_per_target_call": 2.0,
                                                              "target_calls": 1, "new_tokens": 2,
                                                              "tokens_per_second": 1.0})

    monkeypatch.setattr(lab.models, "load_pair", lambda name="shakespeare", **kwargs: BytePair())
    monkeypatch.setattr(lab.decode, "generate", fake_generate)
    monkeypatch.setattr(cli, "make_drafter", lambda *args, **kwargs: None)
    assert cli.main(["demo", "--prompt", "p", "--color", "always", "--max-new-tokens", "2"]) == 0
    out = capsys.readouterr().out
    assert f"{cli.ANSI['rejected']}é|D{cli.ANSI['reset']}" in out, out       # off the path: é (two nodes), D
    assert "\ufffd" not in out
    assert f"{cli.ANSI['accepted']}A{cli.ANSI['reset']}" in out and f"{cli.ANSI['resampled']}x" in out
