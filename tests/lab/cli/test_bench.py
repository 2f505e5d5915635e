"""``python -m lab bench`` (lab.cli.bench): the drafters a hub pair lacks, the help of --n-draft, and the real pair's
run: a table per kind of request, the cost curve, the efficiency and the goal lines."""
from __future__ import annotations

import pytest

from lab import cli
from lab.bench import FR_SPEC, SAME_RULE


def test_bench_with_a_hub_pair_skips_the_drafters_it_lacks_and_says_so(hub_pair, capsys):
    assert cli.main(["bench", "--pair", "gpt2", "--prompts", "1", "--max-new-tokens", "2"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    out = captured.out
    methods = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")]
    methods = [m for m in methods if m not in ("method", "---")]
    expected = ["lab autoregressive", "lab speculative", "HF generate", "HF assisted", "lab prompt lookup",
                SAME_RULE, "HF prompt lookup", "lab lookahead"]
    assert methods == expected * 2  # both tables
    assert out.count("all eight produced identical tokens: yes") == 2
    assert out.count("not run with pair gpt2: lab Medusa (") == 2
    assert "lab EAGLE (" in out and "lab early exit (" in out


def test_bench_n_draft_help_says_which_methods_it_sets():
    """bench's --n-draft sets the draft model's N (ours and transformers' assistant), EAGLE's and the early exit's;
    prompt lookup keeps 5 and Lookahead / Medusa their window / tree, as the table's header shows."""
    bench = next(a for a in cli.build_parser()._subparsers._group_actions[0].choices["bench"]._actions
                 if "--n-draft" in a.option_strings)
    for words in ("draft model", "EAGLE", "early exit", "prompt lookup", "Lookahead", "Medusa"):
        assert words in bench.help, words


def test_bench_on_the_real_pair_times_every_kind_and_prints_the_goals(smollm2_pair, monkeypatch, capsys):
    """The real pair in its fast dtype: one table per kind of request (its Medusa heads and EAGLE draft among the
    methods), the K-token cost curve, the draft model's and EAGLE's c, the draft's efficiency, and the ten goal
    lines; in bfloat16 the tables report agreement instead of identity."""
    import json

    import lab.models
    from lab.prompts import CHAT_TASKS

    loads = []
    real = lab.models.load_pair
    monkeypatch.setattr(lab.models, "load_pair", lambda name, **k: loads.append((name, k)) or real(name, **k))
    assert cli.main(["bench", "--prompts", "1", "--max-new-tokens", "6", "--json"]) == 0
    assert loads == [("smollm2-135m", {"dtype": "auto"})]  # the default pair, in its fast dtype
    out = json.loads(capsys.readouterr().out)
    assert list(out) == [*CHAT_TASKS, "summary"]
    for kind in CHAT_TASKS:
        methods = [row["method"] for row in out[kind]["rows"]]
        assert methods == ["lab autoregressive", "lab speculative", FR_SPEC, "HF generate", "HF assisted",
                           "lab prompt lookup", SAME_RULE, "HF prompt lookup", "lab Medusa", "lab EAGLE",
                           "lab early exit"], kind
        agreement = out[kind]["agreement"]["lab speculative"]
        assert agreement["prompts"] == 1 and agreement["same"] in (0, 1)
    summary = out["summary"]
    assert [int(k) for k in summary["cost_curve_ms"]] == [1, 2, 3, 4, 5, 7, 9, 17]  # JSON keys are strings
    assert 0 < summary["cost_ratio_c"] < 1 and summary["draft_ms"] > 0
    assert set(summary["draft_step_ms"]) == {"whole", "fr_spec"} and min(summary["draft_step_ms"].values()) > 0
    sweep = summary["n_sweep"]
    assert [row["n_draft"] for row in sweep] == [1, 2, 3, 4, 6, 8]
    curve, c = {int(k): ms for k, ms in summary["cost_curve_ms"].items()}, summary["cost_ratio_c"]
    for row in (row for row in sweep if row["alpha"] is not None):
        n, alpha = row["n_draft"], row["alpha"]
        assert alpha >= row["acceptance_rate"]  # accepted ÷ examined >= accepted ÷ drafted
        # predicted from this N's α (not accepted ÷ drafted), c and the cost of a target forward over N + 1 tokens
        expected = (1 - alpha ** (n + 1)) / (1 - alpha) if alpha < 1 else n + 1.0
        assert row["predicted"] == pytest.approx(expected / (n * c + curve[n + 1] / curve[1]), rel=5e-3)
        # efficiency is rounded to 3 decimals (an absolute error), predicted too (a relative one, which grows with
        # efficiency: 1.73 on a CPU whose float32 verification is costly), so the tolerance takes the larger of both
        assert row["efficiency"] == pytest.approx(row["vs_lab_autoregressive"] / row["predicted"], rel=5e-3, abs=1e-3)
    best = max(sweep, key=lambda row: row["vs_lab_autoregressive"])
    goals = summary["goals"]
    assert summary["best_n"] == best["n_draft"] and goals[6]["measured"] == best["efficiency"]
    assert [goal["threshold"] for goal in goals] == [2.0, 2.5, 1.2, 1.2, 1.0, 1.0, 0.9, 0.1, 0.10, 0.1]
    assert [goal["at_most"] for goal in goals] == [False] * 7 + [True, False, True]
    chat = {row["method"]: row for row in out["chat"]["rows"]}
    assert goals[3]["measured"] == chat[FR_SPEC]["vs_hf_counterpart"] and "FR-Spec" in goals[3]["goal"]
    copy_edit = {row["method"]: row for row in out["copy_edit"]["rows"]}
    assert goals[5]["measured"] == copy_edit[SAME_RULE]["vs_hf_counterpart"] and "earliest" in goals[5]["goal"]
    assert goals[7]["measured"] == pytest.approx(c, abs=1e-4)
    assert goals[9]["measured"] == pytest.approx(summary["eagle_cost_ratio_c"], abs=1e-4)
    assert goals[8]["measured"] == pytest.approx(chat["lab EAGLE"]["alpha"] - chat["lab speculative"]["alpha"],
                                                 abs=1e-3)
    rate_gain = chat["lab EAGLE"]["acceptance_rate"] - chat["lab speculative"]["acceptance_rate"]
    assert goals[8]["goal"].startswith("EAGLE alpha") and f"(acceptance rate: {rate_gain:+.3f})" in goals[8]["goal"]
    assert all(goal["met"] == (goal["measured"] is not None and (goal["measured"] <= goal["threshold"]
                                                                 if goal["at_most"] else
                                                                 goal["measured"] >= goal["threshold"]))
               for goal in goals)
