"""lab.arena_reading: the arena read in words. Built on small hand-made runs whose orderings are known, so each test
can flip one number and see the wording follow it."""
import copy
import re

import pytest

from lab.arena import committed_arena, committed_tree_shapes
from lab.arena_reading import (LEVEL, TASK_LABELS, read_adaptive, read_arena, read_baselines, read_factors, read_kinds,
                               read_methods, read_temperature, read_tree_shapes)

FACTORS = ("acceptance", "drafting", "target_call", "verification", "loop", "prefill")


def _row(task, T, drafter, *, calls=1.0, speed=1.0, alpha=None, ar_ms=40.0, call_cost=1.0, draft_ms=0.0, n=4,
         eff=1.0, decode_eff=None, c=None, factors=None):
    f = dict.fromkeys(FACTORS, 1.0)
    f.update(factors or {})
    return {"task": task, "temperature": T, "drafter": drafter, "label": drafter, "n_draft": n, "alpha": alpha,
            "tokens_per_target_call": calls, "measured_speedup": speed, "ar_ms_per_step": ar_ms,
            "target_call_cost": call_cost, "draft_ms_per_step": draft_ms, "efficiency": eff,
            "decode_efficiency": eff if decode_eff is None else decode_eff, "cost_ratio": c,
            "efficiency_factors": f}


def _run():
    """Two kinds at T = 0 and 1: on code EAGLE yields the most per call and is fastest; on copy/edit prompt lookup
    yields the most but the draft model is fastest."""
    rows = []
    for T in (0.0, 1.0):
        hot = 0.1 if T else 0.0
        rows += [_row("code", T, "autoregressive", ar_ms=38.0 + 2 * T, n=None),
                 _row("code", T, "model", calls=2.0, speed=1.2, alpha=0.5 - hot, draft_ms=20.0, call_cost=1.3, c=0.1,
                      eff=0.8, factors={"target_call": 0.8}),
                 _row("code", T, "eagle", calls=2.4, speed=1.5, alpha=0.6 - hot, draft_ms=10.0, call_cost=1.2,
                      c=0.05, eff=0.85, factors={"target_call": 0.85}),
                 _row("code", T, "ngram", calls=1.1, speed=0.97, alpha=0.2 - 2 * hot, call_cost=1.1, eff=0.9,
                      factors={"target_call": 0.9}),
                 _row("copy_edit", T, "autoregressive", ar_ms=45.0 + 2 * T, n=None),
                 _row("copy_edit", T, "model", calls=2.5, speed=1.9, alpha=0.6 - hot, draft_ms=20.0, call_cost=1.1,
                      c=0.1, eff=0.9, factors={"target_call": 0.9}),
                 _row("copy_edit", T, "eagle", calls=2.2, speed=1.8, alpha=0.55 - hot, draft_ms=10.0,
                      call_cost=1.15, c=0.05, eff=0.9, factors={"target_call": 0.9}),
                 _row("copy_edit", T, "ngram", calls=3.0, speed=1.7, alpha=0.8 - 3 * hot, call_cost=1.5, eff=0.7,
                      factors={"target_call": 0.75, "prefill": 0.7})]
    return {"rows": rows, "settings": {}}


def test_kinds_name_the_leaders_and_explain_a_reordering():
    text = read_kinds(_run())
    code, copy_edit = text.splitlines()
    assert code == ("- **code**: most tokens per target call: EAGLE 2.40 (α 0.60), the draft model 2.00 (α 0.50); "
                    "fastest: EAGLE at 1.50×, then the draft model at 1.20× (all: 0.97–1.50×).")
    assert copy_edit.startswith("- **copy/edit**: most tokens per target call: prompt lookup 3.00 (α 0.80), the "
                                "draft model 2.50 (α 0.60); fastest: the draft model at 1.90×")
    # the fastest is not the one with the most tokens per call: the reading says what reordered them
    assert ("The draft model was faster than prompt lookup on fewer tokens per call (2.50 against 3.00): drafting "
            "20.0 ms a step against 0.0 ms, target calls of 1.10 one-token steps against 1.50.") in copy_edit
    run = _run()
    for r in run["rows"]:
        r["measured_speedup"] = min(r["measured_speedup"], 1.01)
    assert read_kinds(run).count("No drafter was clearly faster than autoregressive decoding here.") == 2
    assert read_kinds(run, temperature=0.5) == ""


def test_baselines_report_the_spread_and_each_sign_of_a_flattered_cell():
    run = _run()
    text = read_baselines(run)
    assert text.startswith("One autoregressive step took 38.0–47.0 ms depending on the cell (`ar_ms_per_step`): 38.0 "
                           "ms on code at T = 0, 47.0 ms on copy/edit at T = 1.")
    assert "No row shows a sign of a flattered cell" in text
    row = next(r for r in run["rows"] if (r["task"], r["temperature"], r["drafter"]) == ("code", 0.0, "eagle"))
    row.update(target_call_cost=0.96, decode_efficiency=1.04, measured_speedup=2.5)
    text = read_baselines(run)
    assert ("a target call over several tokens timed below a one-token step in EAGLE on code at T = 0 (0.96); a "
            "decode-only efficiency above 1 in EAGLE on code at T = 0 (1.04); a speedup above the tokens per target "
            "call beyond the course's level rule in EAGLE on code at T = 0 (2.50× on 2.40).") in text
    row.update(target_call_cost=1.0, decode_efficiency=1.0, measured_speedup=2.45)  # 2 % above: timing noise's share
    assert "No row shows a sign of a flattered cell" in read_baselines(run)
    assert "uneven timing" not in read_baselines(run)
    # a learner's live run: suffix decoding drafted nothing on code and measured 0.64x (0.94x when timed again)
    idle = dict(row, drafter="suffix", acceptance_rate=None, draft_calls=0, tokens_per_target_call=1.0,
                measured_speedup=0.64, decode_speedup=0.62)
    run["rows"].append(idle)
    assert ("A sign of uneven timing: suffix decoding on code at T = 0 (decode-only 0.62×) proposed nothing, so its "
            "decode steps were autoregressive ones with a lookup each") in read_baselines(run)
    run["rows"].append(dict(idle, drafter="ngram", decode_speedup=0.9))
    assert "Signs of uneven timing: suffix decoding on code at T = 0 (decode-only 0.62×) and prompt lookup" in (
        read_baselines(run))
    run["rows"].pop()
    # a row that drafted nothing made one-token calls: a target-call cost of 0.999 or a decode-only efficiency of
    # 1.001 is noise there, not a flattered cell (a new user's `arena --task code --drafter ngram,eagle3`)
    run["rows"][-1] = dict(idle, decode_speedup=0.999, target_call_cost=0.999, decode_efficiency=1.001)
    assert "No row shows a sign of a flattered cell" in read_baselines(run)
    run["rows"][-1] = dict(idle, acceptance_rate=0.0, target_call_cost=0.999, decode_efficiency=1.001)
    assert "a target call over several tokens timed below a one-token step in suffix decoding" in read_baselines(run)
    # not signs: level with 1x; a drafter that drafted and had everything rejected; Lookahead (its call carries
    # its window); a model drafter that proposed nothing in a 2-token run (its reset and forwards are real costs)
    for change in (dict(decode_speedup=0.98), dict(acceptance_rate=0.0), dict(drafter="lookahead"),
                   dict(drafter="model"), dict(drafter="medusa")):
        run["rows"][-1] = dict(idle, **change)
        assert "uneven timing" not in read_baselines(run), change
    with pytest.raises(ValueError, match="autoregressive"):
        read_baselines({"rows": [r for r in run["rows"] if r["drafter"] != "autoregressive"], "settings": {}})


def test_baselines_separate_prefill_pulled_slowdowns_and_read_the_retimed_run():
    run = _run()
    slow = next(r for r in run["rows"] if (r["task"], r["temperature"], r["drafter"]) == ("code", 1.0, "ngram"))
    slow.update(efficiency=1.02, decode_efficiency=0.98, measured_speedup=0.9)
    adaptive = {"settings": {"task": "code"}, "rows": [
        _row("code", 0.0, "model", calls=2.0, speed=1.18, ar_ms=44.0, n=4)]}
    text = read_baselines(run, adaptive)
    assert ("1 efficiency is above 1 only with the prefill counted (prompt lookup, at most 1.02; all of them "
            "slowdowns, which the prefill both runs share pulls towards 1×).") in text
    assert ("The adaptive comparison timed the draft model again at N = 4 on the same requests (code, T = 0), with "
            "2.00 tokens per target call against 2.00: its baseline step took 44.0 ms against 40.0 ms (+10 %), its "
            "speedup 1.18× against 1.20×.") in text


def test_methods_choose_ahead_level_or_behind_from_the_numbers():
    run = _run()
    run["rows"] += [_row("code", 0.0, "eagle3", calls=2.6, speed=1.5 + LEVEL / 2, alpha=0.65, n=4),
                    _row("copy_edit", 0.0, "eagle3", calls=2.1, speed=1.7, alpha=0.5, n=4)]
    text = read_methods(run)
    assert text.startswith("- **EAGLE-3 against EAGLE** (fused low, middle and high layers against the last layer). "
                           "At T = 0 its α is higher on code (by 0.05); lower on copy/edit (by 0.05); +0.00 on "
                           "average over 2 kinds.")
    assert "Tokens per target call: more on 1 of 2 kinds (code 2.60 against 2.40; copy/edit 2.10 against 2.20)." in text
    assert "Speed: level with EAGLE on code; behind EAGLE on copy/edit." in text
    run["rows"][-2]["measured_speedup"] = 1.5 + 2 * LEVEL
    assert "Speed: ahead of EAGLE on code; behind EAGLE on copy/edit." in read_methods(run)
    assert read_methods(_run()) == ""   # no neighbours to compare


def test_methods_read_early_exit_and_medusa():
    run = _run()
    run["rows"] += [_row("code", 0.0, "early-exit", speed=0.33, alpha=0.1, c=0.55, eff=1.01, n=4),
                    _row("copy_edit", 0.0, "early-exit", speed=0.31, alpha=0.12, c=0.6, eff=0.98, n=4),
                    _row("code", 0.0, "medusa", calls=2.0, speed=1.1, call_cost=1.45, eff=0.6),
                    _row("copy_edit", 0.0, "medusa", calls=2.0, speed=1.1, call_cost=1.4, eff=0.95)]
    text = read_methods(run)
    assert ("- **Early exit**: 0.31–0.33× in every cell; c 0.55–0.60, so N = 4 drafts cost 2.2–2.4 autoregressive "
            "steps of drafting alone, and α at most 0.12; efficiency 0.98–1.01.") in text
    assert ("- **Medusa**: efficiency 0.60–0.95, the lowest of its cell in 1 of 2 cells; its tree's target call cost "
            "1.40–1.45 one-token steps at T = 0, the draft model's chain 1.10–1.30.") in text


def test_temperature_averages_alpha_per_drafter_and_names_the_largest_falls():
    text = read_temperature(_run())
    assert text == ("- **From T = 0 to T = 1**, α averaged over the 2 kinds: prompt lookup 0.50 → 0.25, the draft "
                    "model 0.55 → 0.45, EAGLE 0.57 → 0.48. The largest single falls: prompt lookup on copy/edit "
                    "(0.80 → 0.50), prompt lookup on code (0.20 → 0.00) and the draft model on copy/edit (0.60 → "
                    "0.50).")
    run = _run()
    for r in run["rows"]:
        if r["temperature"] == 1.0 and r["alpha"] is not None:
            r["alpha"] += 0.5   # sampling helped everywhere: no fall to name
    assert "The largest single falls" not in read_temperature(run)
    assert "prompt lookup 0.50 → 0.75" in read_temperature(run)
    only_cold = {"rows": [r for r in _run()["rows"] if r["temperature"] == 0.0], "settings": {}}
    assert read_temperature(only_cold) == ""


def test_factors_group_drafters_by_their_largest_loss():
    text = read_factors(_run(), "copy_edit")
    assert text.startswith("On copy/edit at T = 0, the largest loss is the prefill for prompt lookup (× 0.70); the "
                           "target call for the draft model (× 0.90) and EAGLE (× 0.90).")
    assert ("Over N + 1 = 5 tokens, the target call cost 1.10 one-token steps for the draft model and 1.15 for "
            "EAGLE.") in text
    assert ("Over the whole run, 2 of 12 rows lose most to something other than the target call: the prefill for "
            "prompt lookup on copy/edit at T = 0 and prompt lookup on copy/edit at T = 1.") in text
    with pytest.raises(ValueError, match="'chat'"):
        read_factors(_run(), "chat")


@pytest.mark.parametrize("adaptive_speed, adaptive_calls, mean_n, where", [
    (1.30, 1.6, 4.0, "1.30×, above every fixed N."),
    # an instructor's 24-token run: adaptive "above every fixed N" at the same tokens per call as N = 6 and 8
    (1.30, 1.4, 4.0, "1.30×, above every fixed N, though with no more tokens per target call than N = 1 and 4 (1.40 "
                     "against 1.40 and 1.50) and at least as many drafts a step (mean N 4.0): a gap neither "
                     "explains is timing noise, which a longer run (more prompts and tokens) would settle."),
    # the reviewer: fewer drafts a step make cheaper steps, a real gain
    (1.30, 1.4, 2.0, "1.30×, above every fixed N, though with no more tokens per target call than N = 1 (1.40 "
                     "against 1.40) and at least as many drafts a step (mean N 2.0): a gap neither explains is "
                     "timing noise, which a longer run (more prompts and tokens) would settle."),
    (1.30, 1.4, 0.5, "1.30×, above every fixed N, with no more tokens per target call than N = 1 and 4 but fewer "
                     "drafts a step (mean N 0.5): cheaper steps, which may explain part of the gap."),
    # a row without mean_n_draft (the gpt2 arena in CI): the calls alone are named
    (1.30, 1.4, None, "1.30×, above every fixed N, though with no more tokens per target call than N = 1 and 4: a "
                      "longer run (more prompts and tokens) would show whether the gap holds."),
    # compared as printed (the reviewer): 1.4049 tokens per call and a mean N of 3.96 read as 1.40 and 4.0
    (1.30, 1.4049, 3.96, "1.30×, above every fixed N, though with no more tokens per target call than N = 1 and 4 "
                         "(1.40 against 1.40 and 1.50) and at least as many drafts a step (mean N 4.0): a gap neither "
                         "explains is timing noise, which a longer run (more prompts and tokens) would settle."),
    (1.21, 1.4, 4.0, f"1.21×, level with the fastest fixed N (within {LEVEL:.0%})."),
    (1.10, 1.4, 4.0, "1.10×, between the fixed settings, 0.10× below the fastest."),
    (0.80, 1.4, 4.0, "0.80×, below every fixed N."),
    (0.88, 1.4, 4.0, "0.88×, level with the slowest fixed N (N = 4), 0.32× below the fastest.")])
def test_adaptive_places_the_rule_among_the_fixed_n(adaptive_speed, adaptive_calls, mean_n, where):
    adaptive = {"settings": {"task": "chat"}, "rows": [
        _row("chat", 0.0, "model", n=1, calls=1.4, speed=1.2, alpha=0.3, c=0.06),
        _row("chat", 0.0, "model", n=4, calls=1.5, speed=0.9, alpha=0.3, c=0.06),
        {**_row("chat", 0.0, "adaptive", n=4, calls=adaptive_calls, speed=adaptive_speed), "mean_n_draft": mean_n}]}
    text = read_adaptive(adaptive)
    assert text.startswith("Tokens per target call by N: 1: 1.40, 4: 1.50; speedup 0.90–1.20×, fastest at N = 1 "
                           "(1.20×). The formula's best of these N for α = 0.30, c = 0.060 (the N = 4 row): 1, "
                           "agreeing.")
    assert text.endswith("The adaptive rule: " + where)
    with pytest.raises(ValueError, match="fixed-N"):
        read_adaptive({"rows": [], "settings": {}})
    # a learner's busy run read "fastest at N = 1 ... level with the fastest" with no word of the load
    busy = {**adaptive, "settings": {"task": "chat", "busy": True, "load_note": "WARNING: busy."}}
    assert read_adaptive(busy) == "**Read with care: the machine was busy during this run.** WARNING: busy.\n\n" + text


def test_adaptive_names_the_n_level_with_the_fastest_and_only_measured_n():
    """Speeds within LEVEL of the fastest are a tie, not a win over them; and the formula's best is taken among the
    N that ran (for α = 0.85, c = 0.02 its best over 1..16 is 14, which was never measured)."""
    rows = [_row("chat", 0.0, "model", n=n, calls=1.2, speed=speed, alpha=0.32, c=0.09)
            for n, speed in ((1, 0.984), (4, 0.999), (8, 0.90))]
    text = read_adaptive({"settings": {}, "rows": rows})
    assert "fastest at N = 4 (1.00×; N = 1 level with it, within 3%)." in text
    assert "(the N = 4 row): 1, level with the fastest." in text
    for r in rows:
        r["alpha"], r["cost_ratio"] = 0.85, 0.02
    assert "(the N = 4 row): 8, not the fastest or level with it." in read_adaptive({"settings": {}, "rows": rows})


def test_a_row_that_lost_nothing_is_not_called_a_loss():
    run = _run()
    run["rows"].append(_row("copy_edit", 0.0, "suffix", calls=3.0, speed=2.5, factors={"drafting": 1.02}))
    text = read_factors(run, "copy_edit")
    assert "suffix (× 1.00)" not in text and "Suffix decoding lost nothing: every factor at least 1.00." in text
    assert "Over the whole run, 2 of 12 rows lose most" in text  # the 13th row lost nothing


def test_temperature_says_on_how_many_kinds_a_drafter_was_averaged():
    run = _run()
    for r in run["rows"]:
        if r["drafter"] == "ngram" and r["task"] == "code":
            r["alpha"] = None
    text = read_temperature(run)
    assert text.startswith("- **From T = 0 to T = 1**, α averaged over the kinds each drafter has α at both "
                           "temperatures on (2 unless said): prompt lookup 0.80 → 0.50 (1 kind),")


def test_the_retimed_draft_model_is_on_the_same_requests_only_when_it_was():
    run = copy.deepcopy(committed_arena("smollm2-135m"))
    assert "timed the draft model again at N = 4 on the same requests" in read_baselines(run["arena"], run["adaptive"])
    run["adaptive"]["settings"]["max_new_tokens"] = 128
    assert "on its own requests (2 × 128 tokens)" in read_baselines(run["arena"], run["adaptive"])


def test_the_committed_run_reads_whole():
    run = committed_arena("smollm2-135m")
    text = read_arena(run)
    for title in ("The baseline", "Which drafter, where (T = 0)", "Methods against their neighbours", "Temperature"):
        assert f"**{title}.**" in text
    assert "The adaptive comparison timed the draft model again" in text
    for kind in run["arena"]["settings"]["tasks"]:   # each kind's bullet opens with its leader in tokens per call
        rows = [r for r in run["arena"]["rows"] if r["task"] == kind and r["temperature"] == 0.0
                and r["drafter"] != "autoregressive"]
        top = max(rows, key=lambda r: r["tokens_per_target_call"])
        assert re.search(rf"- \*\*{re.escape(TASK_LABELS[kind])}\*\*: most tokens per target call: [^,;(]+ "
                         rf"{top['tokens_per_target_call']:.2f} \(α {top['alpha']:.2f}\)", text), kind
    assert "timed the draft model again" not in read_arena(run["arena"])   # a bare run_arena result has no comparison
    with pytest.raises(ValueError, match="run must be"):
        read_arena({"rows": []})
    assert read_arena(copy.deepcopy(run)) == text   # reading does not change the run
    assert not run["arena"]["settings"]["busy"] and "busy" not in text.split("**The baseline.**")[0]


def test_a_busy_run_is_read_with_a_warning_first():
    """A learner's busy run: lesson 12's reading compared its timings without repeating the table's warning."""
    run = copy.deepcopy(committed_arena("smollm2-135m"))
    run["arena"]["settings"].update(busy=True, load_note="other processes kept 1.20 of 2 cores busy. Rerun it.")
    text = read_arena(run)
    assert text.startswith("**Read with care: the machine was busy during this run.** other processes kept 1.20 of 2 "
                           "cores busy. Rerun it.\n\n**The baseline.**")


def test_level_speedups_are_named_level_and_explain_nothing():
    """Two fastest drafters within LEVEL of each other are level; a drafter faster by less than that on fewer tokens
    per call gets no explanation of a reordering that is noise."""
    run = _run()
    for r in run["rows"]:
        if r["task"] == "copy_edit" and r["drafter"] in ("model", "ngram"):
            r["measured_speedup"] = 1.85 if r["drafter"] == "model" else 1.84
    copy_edit = read_kinds(run).splitlines()[1]
    assert "fastest, level: the draft model at 1.85× and prompt lookup at 1.84×" in copy_edit
    assert "was faster than" not in copy_edit


def test_alpha_is_compared_as_printed():
    run = _run()
    run["rows"] += [_row("code", 0.0, "eagle3", calls=2.4, speed=1.5, alpha=0.6004, n=4),
                    _row("copy_edit", 0.0, "eagle3", calls=2.2, speed=1.8, alpha=0.5496, n=4)]
    text = read_methods(run)
    assert "At T = 0 its α is equal on code and copy/edit; +0.00 on average over 2 kinds." in text
    assert "more on 0 of 2 kinds" in text and "Speed: level with EAGLE on code and copy/edit." in text


def test_a_run_at_one_temperature_reads_that_temperature():
    """A T = 1 run (no T = 0 cell) is read at T = 1, and has no temperature section."""
    run = {"rows": [r for r in _run()["rows"] if r["temperature"] == 1.0], "settings": {}}
    text = read_arena(run)
    assert "**Which drafter, where (T = 1).**" in text and "- **code**:" in text
    assert "**Temperature.**" not in text and read_temperature(run) == ""
    assert read_factors(run).startswith("On code at T = 1,")


def test_missing_values_do_not_break_the_reading():
    """Rows without α (a drafter whose chain never examined a draft), MTP rows without per-position acceptance and
    baselines that all took the same time."""
    run = _run()
    for r in run["rows"]:
        r["ar_ms_per_step"] = 40.0
    run["rows"] += [_row("code", 0.0, "early-exit", speed=0.33, alpha=None, c=0.55, n=4),
                    _row("code", 0.0, "mtp", calls=1.5, speed=1.1, alpha=0.4),
                    _row("copy_edit", 0.0, "mtp", calls=1.4, speed=1.0, alpha=0.3)]
    assert read_baselines(run).startswith("One autoregressive step took 40.0 ms in every cell")
    text = read_methods(run)
    assert "- **Early exit**: 0.33× in every cell; c 0.55, so N = 4 drafts cost 2.2 autoregressive steps of " \
           "drafting alone; efficiency 1.00." in text
    assert "They made 1.40–1.50 tokens per call." in text
    for r in run["rows"]:
        if r["drafter"] == "mtp":
            r["per_position_acceptance"] = [0.5, 0.3]
    assert "With a chain of 2, a call yields at most 3 tokens; they made 1.40–1.50." in read_methods(run)


def test_flags_near_one_print_their_side_of_one():
    run = _run()
    row = next(r for r in run["rows"] if (r["task"], r["temperature"], r["drafter"]) == ("code", 0.0, "model"))
    row["decode_efficiency"] = 1.004
    assert "a decode-only efficiency above 1 in the draft model on code at T = 0 (1.004)" in read_baselines(run)



def test_one_kind_is_singular_and_a_bad_run_is_named():
    rows = [r for r in _run()["rows"] if r["task"] == "code"]
    rows += [dict(r, drafter="eagle3", label="eagle3", alpha=r["alpha"] + 0.05) for r in rows
             if r["drafter"] == "eagle"]
    text = read_methods({"rows": rows, "settings": {}})
    assert "Tokens per target call: more on 0 of 1 kind (code 2.40 against 2.40)" in text
    for bad in ([], "arena.json", None):
        with pytest.raises(ValueError, match="run must be run_arena"):
            read_arena(bad)


def _shapes(chain=1.1, trees=(1.3, 1.4), medusa=1.25):
    rows = [{"method": "autoregressive", "speedup": 1.0, "new_tokens": 64},
            {"method": "EAGLE-3, chain N=4", "speedup": chain, "tokens_per_target_call": 1.5, "new_tokens": 64}]
    rows += [{"method": f"EAGLE-3, dynamic {i}", "speedup": s, "tokens_per_target_call": 2.0 + i, "new_tokens": 64}
             for i, s in enumerate(trees)]
    rows.append({"method": "Medusa (14-node tree)", "speedup": medusa, "tokens_per_target_call": 1.6,
                 "new_tokens": 64})
    return rows


def test_tree_shapes_name_the_fastest_tree_and_compare_both_shapes_with_medusa():
    """Per kind: the chain, the fastest tree by name and Medusa; the gain of the tree over the chain as printed; the
    standings against Medusa follow compare_speedups (level within LEVEL), kind by kind."""
    run = {"date": "d", "dtype": "torch.bfloat16", "threads": 2, "prompts": 4, "max_new_tokens": 64,
           "kinds": {"chat": {"rows": _shapes()}, "code": {"rows": _shapes(chain=1.5, trees=(1.6, 1.2), medusa=1.3)},
                     "copy_edit": {"rows": _shapes(chain=1.26, trees=(1.2,), medusa=1.25)}}}
    text = read_tree_shapes(run)
    assert "4 held-out requests per kind × 64 new tokens, bfloat16, 2 threads, d" in text
    assert "| chat | 1.10× (1.50) | 1.40× (3.00): dynamic 1 | 1.25× (1.60) |" in text
    assert "| code | 1.50× (1.50) | 1.60× (2.00): dynamic 0 | 1.30× (1.60) |" in text
    assert "+0.30× on chat, +0.10× on code and −0.06× on copy/edit" in text
    assert ("EAGLE-3's chain is ahead of it on code, level with it on copy/edit, behind it on chat. EAGLE-3's fastest "
            "tree is ahead of it on chat and code, behind it on copy/edit.") in text
    assert "| requests | EAGLE-3, chain N=4 | EAGLE-3, fastest tree | Medusa's tree |" in text
    assert "Answers equal" not in text  # the rows say nothing of it
    named = read_tree_shapes({**run, "processor": "AMD EPYC"})  # tools/tree_shapes.py records the machine
    assert "bfloat16, 2 threads, on AMD EPYC, d. Speedup" in named
    assert read_tree_shapes({**run, "processor": ""}) == text
    tied = copy.deepcopy(run)
    for i, row in enumerate(tied["kinds"]["code"]["rows"]):
        row["identical_outputs"] = i % 3
    tied["kinds"]["code"]["rows"][3]["speedup"] = 1.6  # dynamic 1 ties dynamic 0: both named
    tied["kinds"] = {"code": tied["kinds"]["code"]}
    text = read_tree_shapes(tied)
    assert "| code | 1.50× (1.50) | 1.60× (2.00): dynamic 0 and dynamic 1 | 1.30× (1.60) |" in text
    assert "the chain 1 of 4, the fastest trees 2 of 4, Medusa 1 of 4 (in bfloat16" in text
    for bad in ({}, {"kinds": {}}, [], None, {"kinds": run["kinds"]}):
        with pytest.raises(ValueError, match="committed_tree_shapes"):
            read_tree_shapes(bad)
    settings = {key: run[key] for key in ("date", "dtype", "threads", "prompts", "max_new_tokens")}
    with pytest.raises(ValueError, match="'chat' rows must hold one autoregressive row, one EAGLE-3 chain"):
        read_tree_shapes({**settings, "kinds": {"chat": {"rows": _shapes()[2:]}}})
    for entry in ({}, {"rows": "x"}, []):
        with pytest.raises(ValueError, match="'chat' entry must hold 'rows', a list of dicts"):
            read_tree_shapes({**settings, "kinds": {"chat": entry}})
    for broken in ({"speedup": "1.2"}, {"speedup": None}, {"speedup": float("nan")}, {"method": None},
                   {"new_tokens": 0}):
        rows = _shapes()
        rows[1] = {**rows[1], **broken}
        with pytest.raises(ValueError, match="every 'chat' row needs a 'method'"):
            read_tree_shapes({**settings, "kinds": {"chat": {"rows": rows}}})
    rows = _shapes()
    del rows[1]["tokens_per_target_call"]
    assert "| chat | 1.10× (n/a) |" in read_tree_shapes({**settings, "kinds": {"chat": {"rows": rows}}})


def test_tree_shapes_leave_out_a_tree_that_wrote_other_text():
    """A tree whose answers ran to another length than autoregressive decoding's timed other text: it is named and
    is not the fastest, unless every tree of its kind did."""
    settings = {"date": "d", "dtype": "float32", "threads": 2, "prompts": 4, "max_new_tokens": 64}
    rows = _shapes(trees=(1.3, 1.6))
    rows[3]["new_tokens"] = 80   # dynamic 1, the faster tree, wrote 80 tokens against 64
    text = read_tree_shapes({**settings, "kinds": {"copy_edit": {"rows": rows}}})
    assert "| copy/edit | 1.10× (1.50) | 1.30× (2.00): dynamic 0 |" in text
    assert ("Not the same work: EAGLE-3, dynamic 1 on copy/edit (80 tokens against 64) wrote another number of tokens "
            "than autoregressive decoding (its answers parted from it), so its speedup times other text") in text
    rows[2]["new_tokens"] = 70   # now every tree did: the fastest of them is shown
    text = read_tree_shapes({**settings, "kinds": {"copy_edit": {"rows": rows}}})
    assert "1.60× (3.00): dynamic 1 |" in text and "their speedups time other text" in text


def test_the_committed_tree_shapes_read_whole():
    """The real pair's committed timing reads without error, one table row per kind, every number from the file."""
    run = committed_tree_shapes("smollm2-135m")
    text = read_tree_shapes(run)
    for kind, entry in run["kinds"].items():
        chain = next(r for r in entry["rows"] if r["method"].startswith("EAGLE-3, chain"))
        assert f"| {TASK_LABELS[kind]} | {chain['speedup']:.2f}× ({chain['tokens_per_target_call']:.2f}) |" in text
    assert text.count("\n| ") == 1 + len(run["kinds"])  # the header, then one row per kind


def test_the_readings_name_a_result_that_is_not_one():
    """A tester's `read_baselines({})` and `format_arena({})` raised KeyError: 'rows' / 'settings'."""
    from lab.arena import format_adaptive, format_arena

    for call in (lambda: read_baselines({}), lambda: read_kinds(None), lambda: read_methods({"rows": [{}]}),
                 lambda: read_temperature({"rows": [], "settings": 3}), lambda: read_factors([]),
                 lambda: format_arena({})):
        with pytest.raises(TypeError, match=r"result must be run_arena\(\.\.\.\)'s result"):
            call()
    for call in (lambda: read_adaptive({}), lambda: format_adaptive({"rows": []})):
        with pytest.raises(TypeError, match=r"compare_adaptive\(\.\.\.\)'s result"):
            call()


def test_the_mtp_heads_take_a_plural_verb():
    """The reading printed "The MTP heads was faster than ..." and "its α" for the heads."""
    run = _run()
    for r in run["rows"]:
        if r["drafter"] == "model":
            r["drafter"] = r["label"] = "mtp"
    assert ("The MTP heads were faster than prompt lookup on fewer tokens per call (2.50 against 3.00)"
            in read_kinds(run))
    run["rows"] = [r for r in run["rows"] if not (r["drafter"] == "mtp" and r["temperature"] == 1.0)]
    text = read_methods(run)
    assert "- **The MTP heads against EAGLE**" in text and "At T = 0 their α is higher on" in text, text
    assert " its α " not in text.split("The MTP heads against EAGLE")[1]
