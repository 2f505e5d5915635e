"""``python -m lab`` (lab.cli.main, build_parser and lab/__main__.py): the subcommands and their help, a bad --pair
stopping before torch is imported, a model that cannot be loaded, a closed pipe and Ctrl-C."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab import cli
from tests.lab.cli.helpers import run_bad

ROOT = Path(__file__).resolve().parents[3]


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
                            "--pair shakespeare runs the pair that ships in the repository.\n")


def test_the_loaders_python_advice_is_worded_for_the_flag(monkeypatch, capsys):
    """An instructor: the offline error for `--pair gpt2` told a command-line user to call load_pair(...)."""
    import lab.models

    def unavailable(name="shakespeare", **kwargs):
        raise lab.models.ModelNotAvailableError(f"preset {name!r} is not here; or {lab.models.OFFLINE_PAIRS_HINT}.")

    monkeypatch.setattr(lab.models, "load_pair", unavailable)
    assert cli.main(["demo", "--pair", "gpt2", "--max-new-tokens", "1"]) == 1
    assert capsys.readouterr().err == ("python -m lab demo: preset 'gpt2' is not here; or use an offline pair: --pair "
                                       "smollm2-135m (the default) or --pair shakespeare (it ships in the "
                                       "repository).\n")


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


def test_ctrl_c_prints_one_line_and_exits_130(monkeypatch, capsys):
    """Ctrl-C during a run (KeyboardInterrupt out of lab.cli.main) ends `python -m lab` with one line on stderr and
    the shell's status for an interrupted command, not a traceback."""
    import runpy
    import sys

    import lab.cli

    def interrupted():
        print("half a line", end="")
        raise KeyboardInterrupt

    monkeypatch.setattr(lab.cli, "main", interrupted)
    monkeypatch.delitem(sys.modules, "lab.__main__", raising=False)
    with pytest.raises(SystemExit) as info:
        runpy.run_module("lab", run_name="__main__")
    assert info.value.code == 130
    captured = capsys.readouterr()
    assert captured.out == "half a line"
    assert captured.err == "\ninterrupted (Ctrl-C): stopped before the run finished, so nothing was summarised\n"


def test_an_unknown_option_names_its_command(capsys):
    """A new user: `arena --temperature 0` printed the top-level usage and "python -m lab: error", not the command's."""
    err = run_bad(["arena", "--temperature", "0"], capsys)
    assert err.splitlines()[-1] == ("python -m lab arena: error: unrecognized arguments: --temperature 0 (python -m "
                                    "lab arena --help lists its options)")
    assert err.startswith("usage: python -m lab arena")


def test_output_that_cannot_be_written_is_one_line():
    """`pick --json > /dev/full` raised OSError (No space left on device) from print(), and `>&-` (stdout closed) an
    AttributeError from the final flush."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "lab", "pick", "--task", "code", "--json"], cwd=ROOT, env=env,
                              stdout=full, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr, proc.stderr
    assert b"python -m lab: cannot write the output: No space left on device" in proc.stderr
    closed = subprocess.run([sys.executable, "-m", "lab", "pick", "--task", "code"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
                            preexec_fn=lambda: os.close(1))
    assert closed.returncode == 0 and b"Traceback" not in closed.stderr, closed.stderr
