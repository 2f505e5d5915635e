"""``python -m lab bench`` (lab.cli.bench): option errors before any timing, the drafters a hub pair lacks,
the help of --n-draft, and the refusal of a pair without a draft model (bench and arena)."""
from __future__ import annotations

import pytest

from lab import cli


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


def test_bench_n_draft_help_says_which_methods_it_sets():
    """bench's --n-draft sets the draft model's N (ours and transformers' assistant), EAGLE's and the early exit's;
    prompt lookup keeps 5 and Lookahead / Medusa their window / tree, as the table's header shows."""
    bench = next(a for a in cli.build_parser()._subparsers._group_actions[0].choices["bench"]._actions
                 if "--n-draft" in a.option_strings)
    for words in ("draft model", "EAGLE", "early exit", "prompt lookup", "Lookahead", "Medusa"):
        assert words in bench.help, words


@pytest.mark.parametrize("command", ["bench", "arena"])
def test_bench_and_arena_refuse_a_pair_without_a_draft_model_before_loading(command, monkeypatch, capsys):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *a, **k: pytest.fail("must refuse before loading"))
    assert cli.main([command, "--pair", "smollm2-135m"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"python -m lab {command}: error: --pair: smollm2-135m has no draft model yet, "
                                   f"and {command} times the draft model")
