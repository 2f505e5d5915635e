"""``python -m lab bench --batch`` (lab.cli.bench, lab.goodput): the goodput table's structure on tiny sizes of the
Shakespeare pair, the crossover and the vLLM schedule consistent with the printed table (never a speed value),
the JSON form, and the options argparse rejects."""
from __future__ import annotations

import json
import re

import pytest
import torch

from lab import cli
from lab.compare import LEVEL
from lab.goodput import batch_schedule, best_n_per_batch, crossover_batch
from tests.lab.cli.helpers import error_line, run_bad

ARGS = ["bench", "--batch", "--pair", "shakespeare", "--batch-sizes", "1,3", "--batch-n", "0,2", "--max-new-tokens",
        "3", "--prompts", "2", "--batch-drafter", "ngram"]


@pytest.fixture
def loaded(pair, monkeypatch):
    """The command loads the session's Shakespeare pair instead of a second copy (seconds saved, same weights)."""
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda name, **kwargs: pair if name == "shakespeare" else None)
    return pair


def test_bench_batch_prints_the_table_the_crossover_and_the_schedule(loaded, capsys):
    assert cli.main(ARGS) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("goodput (committed tokens/s over the batch), pair shakespeare on cpu")
    assert ("drafter ngram drafting per row, the same 6 requests (held-out passages) at every batch size B, served "
            "with continuous batching (at most B at once), 3 new tokens per row") in lines[0]
    header = next(i for i, line in enumerate(lines) if line.startswith("| batch |"))
    assert lines[header] == "| batch | N = 0 tokens/s | N = 2 tokens/s (× N = 0, acceptance rate) | best N |"
    table = {}
    for line in lines[header + 2: header + 4]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        batch, ar, spec, best = int(cells[0]), float(cells[1]), cells[2], int(cells[3])
        goodput, ratio, rate = re.fullmatch(r"([\d.]+) \(([\d.]+)×, ([\d.]+|-)\)", spec).group(1, 2, 3)
        table[batch] = {0: ar, 2: float(goodput), "best": best, "ratio": float(ratio), "rate": rate}
    assert sorted(table) == [1, 3]
    for batch, row in table.items():  # N = 2 wins only ahead of N = 0 by lab.compare.LEVEL, with drafts accepted
        # (goodputs printed to 0.1: a margin of 0.1 either way)
        if row["best"] == 2:
            assert row[2] + 0.1 >= row[0] * (1 + LEVEL) and float(row["rate"]) > 0
        else:
            assert row[2] - 0.1 <= row[0] * (1 + LEVEL) or row["rate"] in ("-", "0.00")
        slack = 0.05 / row[0] * (1 + row[2] / row[0]) + 0.006  # goodputs printed to 0.1, the ratio to 0.01
        assert abs(row["ratio"] - row[2] / row[0]) <= slack
    best = {batch: row["best"] for batch, row in table.items()}
    crossover = next(line for line in lines if line.startswith("crossover batch size"))
    expected = crossover_batch(best)
    assert crossover.endswith(str(expected) if expected is not None else "none up to 3")
    schedule = next(line for line in lines if line.startswith("N schedule, as vLLM's --speculative-config"))
    setting = json.loads(schedule.split("setting: ", 1)[1])
    assert setting == {"num_speculative_tokens_per_batch_size": batch_schedule(best)}
    assert setting["num_speculative_tokens_per_batch_size"][0][0] == 1  # ranges start at batch 1 and cover 1..3
    assert setting["num_speculative_tokens_per_batch_size"][-1][1] == 3
    assert "other processes kept" in lines[-1] or "could not be read" in lines[-1]


def test_bench_batch_json(loaded, capsys):
    args = ["bench", "--batch", "--pair", "shakespeare", "--batch-sizes", "2", "--batch-n", "0,1", "--max-new-tokens",
            "3", "--prompts", "1", "--json"]
    assert cli.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"rows", "best", "crossover", "schedule", "load", "note", "settings"}
    assert [(row["batch"], row["n_draft"]) for row in out["rows"]] == [(2, 0), (2, 1)]
    assert out["settings"]["batch_sizes"] == [2] and out["settings"]["drafter"] == "ngram"
    assert out["settings"]["requests"] == 4 and out["settings"]["task"] == "held-out passages"  # twice B
    assert out["settings"]["scheduling"] == "continuous batching"
    assert out["settings"]["prompts"] == 1  # the queue of 4 repeats the one prompt
    assert out["rows"][0]["vs_autoregressive"] == 1.0 and out["rows"][0]["acceptance_rate"] is None
    assert all(row["new_tokens"] == 4 * 3 for row in out["rows"])  # 4 requests x 3 tokens (no EOS this soon)
    # 2 rows at a time over 4 requests of 3 tokens, the first from each prefill: 2 decode forwards for the first
    # two, 2 for the next two (N = 0)
    assert out["rows"][0]["target_calls"] == 4
    args[args.index("--max-new-tokens"):args.index("--max-new-tokens")] = ["--batch-requests", "3"]
    assert cli.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["requests"] == 3 and all(row["new_tokens"] == 3 * 3 for row in out["rows"])
    best = best_n_per_batch(out["rows"])
    assert out["best"] == {"2": best[2]} and out["crossover"] == crossover_batch(best)


@pytest.mark.parametrize("flag,value,words", [("--batch-sizes", "0,2", "whole numbers >= 1"),
                                               ("--batch-n", "2,-1", "whole numbers >= 0"),
                                               ("--batch-sizes", "two", "whole numbers >= 1")])
def test_bad_batch_options_are_named(capsys, flag, value, words):
    line = error_line(run_bad(["bench", "--batch", flag, value], capsys))
    assert f"argument {flag}: must be comma-separated {words}" in line


def test_bench_batch_task_takes_one_kind_of_request(monkeypatch, capsys):
    """--batch-task picks the chat pair's requests of one kind (never loading a model here: measure_goodput is
    replaced by a recorder), and its choices are lab.prompts' chat task kinds."""
    import lab.goodput
    import lab.models
    from lab.cli.bench import BATCH_TASKS
    from lab.prompts import CHAT_TASKS, chat_prompts

    assert BATCH_TASKS == CHAT_TASKS
    seen = {}

    class FakePair:
        draft, name = object(), "smollm2-135m"

        def encode_chat(self, text):
            return [len(text) % 7 + 1, 2, 3]

    def record(pair, encoded, **kwargs):
        seen["encoded"] = encoded
        return {"rows": [], "best": {}, "crossover": None, "schedule": [], "load": {}, "note": "",
                "settings": {}}

    monkeypatch.setattr(lab.models, "load_pair", lambda name, **kwargs: FakePair())
    monkeypatch.setattr(lab.goodput, "measure_goodput", record)
    monkeypatch.setattr("lab.cli.bench.context_problem", lambda *args: None, raising=False)
    monkeypatch.setattr("lab.prompts.context_problem", lambda *args: None)
    monkeypatch.setattr("lab.prompts.encode_prompts", lambda pair, prompts: [list(p) for p in prompts])
    assert cli.main(["bench", "--batch", "--batch-task", "copy_edit", "--json", "--batch-n", "0,2"]) == 0
    assert seen["encoded"] == [list(p) for p in chat_prompts("copy_edit")]
    assert json.loads(capsys.readouterr().out)["settings"]["task"] == "copy_edit"
    line = error_line(run_bad(["bench", "--batch", "--batch-task", "poems"], capsys))
    assert "argument --batch-task: invalid choice: 'poems'" in line


@pytest.mark.parametrize("args,words", [
    (["--batch-n", "2,4"], "--batch-n: must include 0 (autoregressive decoding)"),
    (["--batch-n", "0"], "and an N > 0 to compare with it; got 0"),
    (["--batch-sizes", "1,4", "--batch-requests", "2"], "--batch-requests: must be at least the largest --batch-sizes, "
                                                        "4 (a smaller queue never fills that batch), got 2"),
    (["--batch-drafter", "medusa", "--batch-n", "0,2,4"], "--batch-n: medusa sets its own draft (its tree of"),
    # one N > 0 was taken as "on" without a word, and printed in the settings as if it were drafted
    (["--batch-drafter", "medusa", "--batch-n", "0,2"], "so N does not apply: give 0,1 (off and on) or leave "
                                                        "--batch-n out; got 0,2"),
    # a batch the machine cannot hold is refused before anything loads (100,000 rows were killed for memory)
    (["--batch-sizes", "4,100000"], "--batch-sizes: must each be at most 256 on this machine"
     if not torch.cuda.is_available() else "--batch-sizes: must each be at most 1024 on this machine"),
    (["--batch-sizes", "4", "--batch-requests", "100000"], "--batch-requests: must be at most "),
])
def test_bench_batch_refuses_a_table_without_a_baseline_or_with_ns_that_do_not_apply(loaded, capsys, args, words):
    """Without N = 0 there is nothing to compare with; Medusa, Lookahead, suffix decoding and the MTP heads ignore N,
    so several N would fill columns with the same drafter and pick the best N from noise."""
    assert cli.main(["bench", "--batch", "--pair", "shakespeare", "--max-new-tokens", "2", *args]) == 2
    assert words in capsys.readouterr().err


def test_a_drafter_with_its_own_draft_gets_one_column_named_after_it(loaded, capsys):
    """Without --batch-n, suffix decoding (which sets its own draft, so N does not apply) is timed once beside
    N = 0, its column and best cell name it, and no N schedule is offered for vLLM."""
    args = ["bench", "--batch", "--pair", "shakespeare", "--batch-sizes", "1,2", "--max-new-tokens", "3",
            "--prompts", "2", "--batch-drafter", "suffix"]
    assert cli.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| batch |"))
    assert lines[header] == "| batch | N = 0 tokens/s | suffix tokens/s (× N = 0, acceptance rate) | best |"
    bests = [line.strip("|").split("|")[-1].strip() for line in lines[header + 2: header + 4]]
    assert len(bests) == 2 and set(bests) <= {"suffix", "N = 0"}
    assert any(line.startswith("crossover batch size (smallest measured B where suffix does not beat N = 0): ")
               for line in lines)
    assert "N schedule: none, suffix sets its own draft" in lines
    assert "1 threads" not in lines[0] and "1 requests" not in lines[0]


@pytest.mark.parametrize("flag,value", [("--batch-sizes", "4"), ("--batch-n", "0,2"), ("--batch-drafter", "model"),
                                        ("--batch-task", "code"), ("--batch-requests", "3"), ("--rounds", "2")])
def test_a_batch_option_without_batch_is_refused_not_ignored(capsys, flag, value):
    """Before: the option was dropped and the whole method-table bench ran instead (minutes of timing)."""
    assert cli.main(["bench", flag, value]) == 2
    assert capsys.readouterr().err == (f"python -m lab bench: error: {flag}: applies only with --batch (goodput "
                                       f"against batch size); add --batch, or leave {flag} out for the method "
                                       "tables\n")
