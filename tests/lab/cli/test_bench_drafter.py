"""``python -m lab bench --drafter NAME``: parsing (repeatable, comma-separated, each name once), the error that lists
the registry's drafters, the refusal beside --batch, run_bench's own check, and which rows a bench times (no model
runs)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from lab import cli
from lab.bench import (BASELINE_METHODS, DRAFTER_METHODS, EXTRA_METHODS, SAME_POLICY, SAME_RULE, bench_rows,
                       check_drafters, run_bench)
from lab.cli.bench import selected_drafters
from lab.registry import DRAFTERS
from tests.lab.cli.helpers import error_line, run_bad


def parse(*argv):
    return cli.build_parser().parse_args(["bench", *argv])


def test_drafter_is_repeatable_and_comma_separated():
    assert parse().drafter is None and selected_drafters(parse()) is None
    assert parse("--drafter", "parallel").drafter == [("parallel",)]
    args = parse("--drafter", "model, eagle", "--drafter", "parallel", "--drafter", "model")
    assert selected_drafters(args) == ("model", "eagle", "parallel")
    assert check_drafters(["ngram,suffix", "ngram"]) == ("ngram", "suffix")
    # every registry drafter has its rows, and no row belongs to two drafters
    assert tuple(DRAFTER_METHODS) == DRAFTERS
    rows = [row for names in DRAFTER_METHODS.values() for row in names]
    assert len(rows) == len(set(rows)) and not set(rows) & set(BASELINE_METHODS)


@pytest.mark.parametrize("value, bad", [("warp", "'warp'"), ("model,,eagle", "''"), ("EAGLE", "'EAGLE'")])
def test_an_unknown_drafter_is_refused_with_the_allowed_names(value, bad, capsys):
    line = error_line(run_bad(["bench", "--drafter", value], capsys))
    assert "argument --drafter: each name must be one of " + ", ".join(DRAFTERS) in line
    assert line.endswith(f"got {bad}")


def test_drafter_with_batch_is_refused_before_anything_loads(capsys):
    assert cli.main(["bench", "--batch", "--drafter", "ngram"]) == 2
    err = capsys.readouterr().err
    assert "--drafter: selects the drafters of the method tables; with --batch choose the drafter with " \
           "--batch-drafter" in err


@pytest.mark.parametrize("argv,flag,words", [
    (["--batch", "--n-draft", "2"], "--n-draft", "applies to the method tables; with --batch give the draft lengths "
                                                 "with --batch-n"),
    (["--batch", "--lookup-n-draft", "3"], "--lookup-n-draft", "applies to the method tables"),
    (["--drafter", "medusa,suffix", "--n-draft", "2"], "--n-draft", "does not apply to medusa, suffix"),
    (["--drafter", "ngram", "--n-draft", "2"], "--n-draft", "does not apply to ngram: prompt lookup drafts "
                                                        "--lookup-n-draft tokens"),
])
def test_a_draft_length_that_would_be_ignored_is_refused(capsys, argv, flag, words):
    """Before: the value was dropped without a word (the defaults 4 and 5 could not be told from a given value)."""
    assert cli.main(["bench", *argv]) == 2
    assert f"python -m lab bench: error: {flag}: {words}" in capsys.readouterr().err


def test_draft_lengths_keep_their_defaults_when_not_given():
    args = parse("--drafter", "model")
    assert (args.n_draft, args.lookup_n_draft) == (None, None)  # resolved by run() to 4 and 5
    assert parse("--drafter", "model,medusa", "--n-draft", "2").n_draft == 2  # applies to the draft model


def test_run_bench_checks_drafters_before_any_model_runs():
    fake = SimpleNamespace(draft=object())  # never used: the checks come first
    with pytest.raises(ValueError, match="drafters must be one of model, ngram"):
        run_bench(fake, ["ROMEO."], drafters=("nope",))
    with pytest.raises(ValueError, match="give extra or drafters, not both"):
        run_bench(fake, ["ROMEO."], extra=("lab lookahead",), drafters="ngram")
    with pytest.raises(ValueError, match="drafters must name at least one"):
        check_drafters([])
    with pytest.raises(ValueError, match="must be drafter names"):
        check_drafters([3])


def test_a_drafter_bench_times_only_the_baselines_and_its_rows():
    assert bench_rows(drafters=("ngram",)) == ("lab autoregressive", "HF generate", "lab prompt lookup", SAME_RULE,
                                               "HF prompt lookup")
    assert bench_rows(drafters=("parallel", "model")) == ("lab autoregressive", "lab speculative", "HF generate",
                                                          "HF assisted", *SAME_POLICY, "lab parallel")
    # without drafters, what a plain bench always timed: the base methods and the extra ones asked for
    assert bench_rows() == ("lab autoregressive", "lab speculative", "HF generate", "HF assisted")
    assert bench_rows(EXTRA_METHODS) == bench_rows()[:4] + EXTRA_METHODS
    # EAGLE-3 named: its chain and its dynamic tree (the row the chat bench adds to its defaults)
    from lab.bench import EAGLE3_TREE

    assert bench_rows(drafters=("eagle3",)) == ("lab autoregressive", "HF generate", "lab EAGLE-3", EAGLE3_TREE)


def test_the_plain_bench_times_the_drafters_whose_record_says_so(capsys):
    from lab.registry import DRAFTER_SPECS

    # EXTRA_METHODS is derived from the records, and still holds what a plain bench always timed, in that order
    assert EXTRA_METHODS == ("lab prompt lookup", SAME_RULE, "HF prompt lookup", "lab lookahead", "lab Medusa",
                             "lab EAGLE", "lab early exit")
    assert DRAFTER_SPECS["model"].plain_bench and "lab speculative" in bench_rows()  # a base row
    later = [name for name, spec in DRAFTER_SPECS.items() if not spec.plain_bench]
    assert later == ["suffix", "mtp", "parallel", "eagle3"]  # the four added after the bench's tables were set
    # --drafter's help names those, and no other, as timed only when named
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["bench", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "suffix, mtp, parallel and eagle3 are timed only when named here" in help_text
