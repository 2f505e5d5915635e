"""The lessons' prose quotes numbers from the run committed with each solution notebook: these tests hold it to them.

Re-executing a notebook (``tools/run_notebooks.py``) moves every measured number; the sentences that quote them do
not move by themselves. Each test below finds one such sentence in a notebook's markdown and the number it quotes in
the same notebook's committed outputs, and fails (naming the sentence) when the two have drifted apart, so the prose
is brought back in line in the same commit that re-runs the notebook.
"""
import json
import math
import re
from pathlib import Path

import pytest

SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions"


def _notebook(stem):
    return json.loads((SOLUTIONS / f"{stem}.ipynb").read_text())


def prose(stem):
    """All markdown of a notebook, with line breaks and runs of spaces folded to one space."""
    cells = _notebook(stem)["cells"]
    return " ".join(" ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")


def printed(stem):
    """Everything the committed run printed or displayed as text (stdout and text/markdown / text/plain data)."""
    parts = []
    for cell in _notebook(stem)["cells"]:
        for out in cell.get("outputs", []):
            if "text" in out:
                parts.append("".join(out["text"]))
            data = out.get("data", {})
            for kind in ("text/markdown", "text/plain"):
                if kind in data and not "".join(data[kind]).startswith("<"):
                    parts.append("".join(data[kind]))
    return "\n".join(parts)


def quoted(text, pattern):
    """The groups of ``pattern`` in ``text``; fails with the pattern when the sentence is gone or reworded."""
    match = re.search(pattern, text)
    assert match, f"sentence not found (reworded? update this test): {pattern}"
    return tuple(group.rstrip(".") for group in match.groups())   # a number may end its sentence


def says(text, phrase):
    """Fail with the phrase when the prose no longer contains it (reworded? update this test)."""
    assert phrase in " ".join(text.split()), f"sentence not found (reworded? update this test): {phrase}"


def table(text, header_start):
    """The rows of the markdown table whose header line starts with ``header_start``, as dicts of strings."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    header = [h.strip() for h in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (v.strip() for v in line.strip("|").split("|")))))
    return rows


@pytest.fixture(scope="module")
def arena():
    """The real pair's committed arena run (lab/assets/smollm2-135m/arena.json), which lesson 12 reads and the
    picker quotes: rows keyed by (task, T, drafter kind), the adaptive comparison, and the lesson's prose."""
    from lab.arena import committed_arena

    run = committed_arena("smollm2-135m")
    cell = {(r["task"], r["temperature"], r["drafter"]): r for r in run["arena"]["rows"]}
    return {"run": run, "cell": cell, "text": prose("12_drafter_arena"), "out": printed("12_drafter_arena")}


def _x(value, digits=2):
    return f"{value:.{digits}f}"


def test_lesson_12_shows_the_committed_run_and_names_its_machine(arena):
    settings = arena["run"]["arena"]["settings"]
    says(arena["text"], f"(real pair, {settings['dtype']}, 2-core AMD EPYC, "
                        f"{settings['prompts_per_task']} prompts × {settings['max_new_tokens']} tokens per cell)")
    assert settings["processor"] == "AMD EPYC" and settings["threads"] == 2 and not settings["busy"]
    assert f"on cpu: {settings['processor']} ({settings['dtype']}, 2 threads)" in arena["out"]  # the table is shown


KINDS = ("chat", "code", "structured", "copy_edit", "multi_turn", "agent")
LEARNED = ("model", "eagle", "eagle3", "medusa")


def _rows(arena, task=None, T=None, exclude=("autoregressive",)):
    """The committed arena's drafter rows, optionally of one task and / or temperature."""
    return [r for r in arena["run"]["arena"]["rows"] if r["drafter"] not in exclude
            and (task is None or r["task"] == task) and (T is None or r["temperature"] == T)]


def _span(values, digits=2):
    values = list(values)
    return _x(min(values), digits), _x(max(values), digits)


def _baselines(arena):
    """Each cell's autoregressive ms per step, keyed by (task, T)."""
    return {(r["task"], r["temperature"]): r["ar_ms_per_step"] for r in arena["run"]["arena"]["rows"]
            if r["drafter"] == "autoregressive"}


def test_lesson_12_reads_the_baseline_first(arena):
    """The paragraph that teaches the reader to check each cell's autoregressive baseline before its speedups: the
    baselines' spread, the fastest and slowest cells, the two signs of a flattered cell (and how little of them this
    run shows), and the same draft-model run timed again later by the same command."""
    text, cell = arena["text"], arena["cell"]
    baselines = _baselines(arena)
    fastest, slowest = min(baselines, key=baselines.get), max(baselines, key=baselines.get)
    assert (fastest, slowest) == (("chat", 0.0), ("agent", 1.0))
    assert quoted(text, r"one autoregressive step of the same target took from (\d+) ms to (\d+) ms depending on the "
                        r"cell \(`ar_ms_per_step`\), from ([\d.]+) ms on chat at T = 0 to ([\d.]+) ms on agent "
                        r"loops at T = 1") == _span(baselines.values(), 0) + (_x(baselines[fastest], 1),
                                                                              _x(baselines[slowest], 1))
    says(text, "a longer context makes a step dearer (chat's prompts are the shortest, the agent loops' the longest), "
               "and every kind's step took longer at T = 1 than at T = 0")
    prefill = {(r["task"], r["temperature"]): r["prefill_ms"] for r in arena["run"]["arena"]["rows"]
               if r["drafter"] == "autoregressive"}
    assert {min(prefill, key=prefill.get)[0], max(prefill, key=prefill.get)[0]} == {"chat", "agent"}
    assert all(baselines[(t, 1.0)] > baselines[(t, 0.0)] for t in KINDS)
    says(text, "Every method was timed twice per cell and the faster timing kept")
    assert arena["run"]["arena"]["settings"]["repeats"] == 2 and "--repeats 2" in arena["run"]["command"]
    # the two signs of a flattered cell, and how little of them this run shows
    rows = _rows(arena)
    says(text, "This run shows the first sign in one cell only, and the second not at all")
    below = [r for r in rows if r["target_call_cost"] < 1]
    over = [r for r in rows if r["decode_efficiency"] > 1]
    assert [(r["task"], r["temperature"], r["drafter"]) for r in below] == [("agent", 0.0, "suffix")]
    assert [(r["task"], r["temperature"], r["drafter"]) for r in over] == [("agent", 0.0, "suffix")]
    suffix = below[0]
    per_call = 1 + (suffix["tokens_per_target_call"] - 1) / suffix["acceptance_rate"]   # target tokens per call
    assert quoted(text, r"suffix decoding's target calls on agent loops at T = 0 \(about (\d+)\s+tokens each\) "
                        r"averaged ([\d.]+) of a one-token step, and its decode-only efficiency there is "
                        r"([\d.]+);") == (
        f"{per_call:.0f}", _x(suffix["target_call_cost"]), _x(suffix["decode_efficiency"]))
    says(text, "no speedup exceeds its tokens per target call")
    assert all(r["measured_speedup"] <= r["tokens_per_target_call"] for r in rows)
    above = [r for r in rows if r["efficiency"] > 1]
    early = [r for r in rows if r["drafter"] == "early-exit"]
    assert quoted(text, r"(\w+) other efficiencies are above 1 \(one only at ([\d.]+), which the table\s+shows as "
                        r"([\d.]+)\), all of them early exit's and by at most ([\d.]+), but not from\s+noise") == (
        "Six", f"{min(r['efficiency'] for r in above):.3f}", _x(min(r["efficiency"] for r in above)),
        _x(max(r["efficiency"] for r in above) - 1))
    assert sum(_x(r["efficiency"]) == "1.00" for r in above) == 1   # "one only at ..., shown as 1.00"
    assert len(above) == 6 and {r["drafter"] for r in above} == {"early-exit"}
    assert all(r["measured_speedup"] < 1 for r in early)   # a slowdown, which the shared prefill pulls towards 1x
    assert quoted(text, r"its decode-only efficiencies are ([\d.]+)–([\d.]+);") == _span(
        r["decode_efficiency"] for r in early)
    assert all(r["efficiency_factors"]["prefill"] > 1 for r in above)
    # the same draft model, N and requests, timed again by the adaptive comparison later in the same command
    again = next(r for r in arena["run"]["adaptive"]["rows"] if r["drafter"] == "model" and r["n_draft"] == 4)
    model = cell[("chat", 0.0, "model")]
    assert arena["run"]["adaptive"]["settings"]["task"] == "chat" and again["temperature"] == 0.0
    assert again["tokens_per_target_call"] == model["tokens_per_target_call"] and model["n_draft"] == 4
    gap = model["measured_speedup"] - again["measured_speedup"]
    slower = again["ar_ms_per_step"] / model["ar_ms_per_step"] - 1
    assert quoted(text, r"with the same ([\d.]+) tokens per target call\. Its baseline step took ([\d.]+) ms where the "
                        r"arena's greedy chat cell took ([\d.]+) ms, (\d+) % slower, yet the two speedups agree within "
                        r"([\d.]+)× \(([\d.]+)× against ([\d.]+)×\)") == (
        _x(model["tokens_per_target_call"]), _x(again["ar_ms_per_step"], 1), _x(model["ar_ms_per_step"], 1),
        f"{100 * slower:.0f}", _x(abs(gap)), _x(again["measured_speedup"]), _x(model["measured_speedup"]))
    assert slower > 0.1 and abs(gap) < 0.05   # the baselines moved; the ratios, each over its own baseline, did not


def test_lesson_12_which_drafter_where(arena):
    """The bullets on copy/edit, code, structured output and chat at T = 0."""
    from safetensors import safe_open

    text, cell = arena["text"], arena["cell"]
    # the chat bullet's draft size: the committed file's trained parameters (its embedding is the target's)
    with safe_open(str(SOLUTIONS.parent / "lab" / "assets" / "smollm2-135m" / "draft" / "model.safetensors"),
                   "pt") as f:
        trained = sum(math.prod(f.get_slice(key).get_shape()) for key in f.keys())
    says(text, f"a draft with {trained / 1e6:.2f} M trained parameters")
    row = lambda task, kind, T=0.0: cell[(task, T, kind)]  # noqa: E731
    speed = lambda r: r["measured_speedup"]  # noqa: E731
    # copy/edit: the two copying methods lead in speed and in tokens per call; suffix decoding yields more per call
    # but its longer proposals make its target calls dearer, and prompt lookup measured more
    lookup, suffix = row("copy_edit", "ngram"), row("copy_edit", "suffix")
    alpha, per_call, speedup = quoted(text, r"proposals are long runs the target accepts \(α ([\d.]+), ([\d.]+) tokens "
                                            r"per target call, ([\d.]+)× at T = 0\)")
    assert (alpha, per_call, speedup) == (_x(lookup["alpha"]), _x(lookup["tokens_per_target_call"]),
                                          _x(lookup["measured_speedup"]))
    copy = _rows(arena, "copy_edit", 0.0)
    for key in ("measured_speedup", "tokens_per_target_call"):
        assert {r["drafter"] for r in sorted(copy, key=lambda r: r[key])[-2:]} == {"ngram", "suffix"}, key
    assert quoted(text, r"yields more per call \(([\d.]+) tokens per target call, the most of any cell\) and measured "
                        r"more \(([\d.]+)×\): its target calls over those longer proposals were timed at ([\d.]+) "
                        r"one-token steps, prompt lookup's at ([\d.]+) \(`row\[\"target_call_cost\"\]`") == (
        _x(suffix["tokens_per_target_call"]), _x(suffix["measured_speedup"]), _x(suffix["target_call_cost"]),
        _x(lookup["target_call_cost"]))
    assert suffix["tokens_per_target_call"] > lookup["tokens_per_target_call"] and speed(suffix) > speed(lookup)
    assert len(suffix["per_position_acceptance"]) > lookup["n_draft"]   # "longer proposals"
    assert max(r["tokens_per_target_call"] for r in _rows(arena)) == suffix["tokens_per_target_call"]  # "pays most"
    low, high, *speeds = quoted(
        text, r"The learned drafters \(the draft model, EAGLE, EAGLE-3\s+and Medusa\) yield ([\d.]+)–([\d.]+) tokens "
              r"per call here \(EAGLE-3 ([\d.]+)×, EAGLE ([\d.]+)×, "
              r"Medusa ([\d.]+)×,\s+the draft model ([\d.]+)×\)")
    assert (low, high) == _span(row("copy_edit", k)["tokens_per_target_call"] for k in LEARNED)
    listed = ("eagle3", "eagle", "medusa", "model")
    assert tuple(speeds) == tuple(_x(speed(row("copy_edit", k))) for k in listed)
    assert sorted(listed, key=lambda k: -speed(row("copy_edit", k))) == list(listed)
    # code: the learned drafters accept the most and yield the most per call; the cost of drafting reorders the speeds
    code = _rows(arena, "code", 0.0)
    for key in ("alpha", "tokens_per_target_call"):
        assert {r["drafter"] for r in sorted(code, key=lambda r: r[key])[-len(LEARNED):]} == set(LEARNED), key
    assert quoted(text, r"accept the most \(α ([\d.]+)–([\d.]+) for the draft model, EAGLE, EAGLE-3 and Medusa\)") == (
        _span(row("code", k)["alpha"] for k in LEARNED))
    assert quoted(text, r"the most tokens per target call \(([\d.]+)–([\d.]+)\); prompt lookup") == _span(
        row("code", k)["tokens_per_target_call"] for k in LEARNED)
    assert quoted(text, r"function written from scratch, yields ([\d.]+)\.") == (
        _x(row("code", "ngram")["tokens_per_target_call"]),)
    assert quoted(text, r"In speed they all stay ahead of prompt lookup \(([\d.]+)×\)") == (
        _x(speed(row("code", "ngram"))),)
    assert min(speed(row("code", k)) for k in LEARNED) > speed(row("code", "ngram"))
    ranked = [r["drafter"] for r in sorted(code, key=speed, reverse=True)]
    assert ranked[:4] == ["eagle3", "eagle", "parallel", "medusa"]
    eagle, e3, model, par = (row("code", k) for k in ("eagle", "eagle3", "model", "parallel"))
    assert quoted(text, r"EAGLE-3 measured the most, ([\d.]+)× on ([\d.]+) tokens per call, and EAGLE ([\d.]+)× on "
                        r"([\d.]+), against the draft model's\s+([\d.]+)× on ([\d.]+), since its drafting took "
                        r"([\d.]+) ms a step against EAGLE's ([\d.]+) ms and EAGLE-3's ([\d.]+) ms, and its target\s+"
                        r"calls were timed dearer \(([\d.]+) one-token steps against ([\d.]+) and ([\d.]+)\); the "
                        r"parallel\s+draft, on ([\d.]+) tokens with ([\d.]+) ms of drafting, came third \(([\d.]+)×\), "
                        r"level with Medusa \(([\d.]+)×\)") == (
        _x(speed(e3)), _x(e3["tokens_per_target_call"]), _x(speed(eagle)), _x(eagle["tokens_per_target_call"]),
        _x(speed(model)), _x(model["tokens_per_target_call"]), _x(model["draft_ms_per_step"], 1),
        _x(eagle["draft_ms_per_step"], 1), _x(e3["draft_ms_per_step"], 1), _x(model["target_call_cost"]),
        _x(eagle["target_call_cost"]), _x(e3["target_call_cost"]), _x(par["tokens_per_target_call"]),
        _x(par["draft_ms_per_step"], 1), _x(speed(par)), _x(speed(row("code", "medusa"))))
    for fast in (eagle, e3):   # faster than the draft model: cheaper drafting and cheaper target calls
        assert fast["draft_ms_per_step"] < model["draft_ms_per_step"] and speed(fast) > speed(model)
        assert fast["target_call_cost"] < model["target_call_cost"]
        assert fast["n_draft"] == model["n_draft"]
    assert eagle["tokens_per_target_call"] < model["tokens_per_target_call"]
    assert par["tokens_per_target_call"] < min(row("code", k)["tokens_per_target_call"] for k in LEARNED)
    # structured output: EAGLE yields the most per call and measured the most; two cheap drafters beat the draft model
    structured = _rows(arena, "structured", 0.0)
    assert max(structured, key=lambda r: r["tokens_per_target_call"])["drafter"] == "eagle3"
    assert max(structured, key=speed)["drafter"] == "eagle3"
    s = lambda kind: row("structured", kind)  # noqa: E731
    assert quoted(text, r"EAGLE-3 yields the most tokens per target call \(α ([\d.]+), ([\d.]+) tokens; EAGLE "
                        r"([\d.]+), the draft model and Medusa ([\d.]+) each\) and measured the most, ([\d.]+)× "
                        r"\(EAGLE ([\d.]+)×, Medusa ([\d.]+)×, the draft model ([\d.]+)×\)") == (
        _x(s("eagle3")["alpha"]), _x(s("eagle3")["tokens_per_target_call"]), _x(s("eagle")["tokens_per_target_call"]),
        _x(s("model")["tokens_per_target_call"]), _x(speed(s("eagle3"))), _x(speed(s("eagle"))),
        _x(speed(s("medusa"))), _x(speed(s("model"))))
    assert _x(s("model")["tokens_per_target_call"]) == _x(s("medusa")["tokens_per_target_call"])
    assert speed(s("eagle")) > speed(s("medusa")) > speed(s("model"))
    assert quoted(text, r"The parallel draft \(([\d.]+)×\) and the MTP heads \(([\d.]+)×\) beat the draft model on "
                        r"fewer tokens per call, with cheaper drafting") == (_x(speed(s("parallel"))),
                                                                             _x(speed(s("mtp"))))
    for kind in ("parallel", "mtp"):
        assert speed(s(kind)) > speed(s("model")), kind
        assert s(kind)["tokens_per_target_call"] < s("model")["tokens_per_target_call"], kind
        assert s(kind)["draft_ms_per_step"] < s("model")["draft_ms_per_step"], kind
    # chat: small gains at T = 0, and the least tokens per call of any kind
    chat = _rows(arena, "chat", 0.0)
    says(text, "On **chat** the gains are small at T = 0")
    speeds = [r for r in chat if r["drafter"] != "early-exit"]
    assert quoted(text, r"every drafter but early exit measured ([\d.]+)–([\d.]+)×, the top four \(EAGLE-3, Medusa, "
                        r"EAGLE and the\s+parallel draft\) within ([\d.]+)× of one another\.") == _span(
        speed(r) for r in speeds) + (_x(speed(sorted(speeds, key=speed)[-1]) - speed(sorted(speeds, key=speed)[-4])),)
    assert [r["drafter"] for r in sorted(speeds, key=speed)[-4:]] == ["parallel", "eagle", "medusa", "eagle3"]
    assert max(speed(r) for r in speeds) < 1.25
    per_kind_best = {t: max(r["tokens_per_target_call"] for r in _rows(arena, t, 0.0)) for t in KINDS}
    assert min(per_kind_best, key=per_kind_best.get) == "chat"
    top, second, model_eagle, alpha, lookup_alpha = quoted(
        text, r"at most ([\d.]+) tokens \(Medusa; EAGLE-3 ([\d.]+)\), the draft model and EAGLE ([\d.]+)\..*?rarely "
              r"guesses \(α ([\d.]+)\).*?lookup's α ([\d.]+)\)")
    ranked = sorted(chat, key=lambda r: r["tokens_per_target_call"], reverse=True)
    assert [r["drafter"] for r in ranked[:2]] == ["medusa", "eagle3"]
    assert (top, second) == (_x(per_kind_best["chat"]), _x(ranked[1]["tokens_per_target_call"]))
    assert model_eagle == _x(row("chat", "model")["tokens_per_target_call"]) == _x(
        row("chat", "eagle")["tokens_per_target_call"])
    assert (alpha, lookup_alpha) == (_x(row("chat", "model")["alpha"]), _x(row("chat", "ngram")["alpha"]))
    baselines = _baselines(arena)
    assert sorted(baselines, key=baselines.get)[:2] == [("chat", 0.0), ("chat", 1.0)]   # "the run's two fastest"
    assert quoted(text, r"At T = 1, where the baseline step took ([\d.]+) ms \(chat's two cells had the run's two "
                        r"fastest\), the same drafters measured ([\d.]+)–([\d.]+)×, EAGLE-3 again the most") == (
        _x(baselines[("chat", 1.0)], 1),) + _span(speed(r) for r in _rows(arena, "chat", 1.0)
                                                 if r["drafter"] != "early-exit")
    assert max(_rows(arena, "chat", 1.0), key=speed)["drafter"] == "eagle3"


def test_lesson_12_and_the_picker_on_temperature(arena):
    text, cell = arena["text"], arena["cell"]
    a = lambda task, kind, T: _x(cell[(task, T, kind)]["alpha"])  # noqa: E731
    f = lambda task, kind, T, key: _x(cell[(task, T, kind)][key])  # noqa: E731
    assert quoted(text, r"Prompt lookup on copy/edit falls from α ([\d.]+) to ([\d.]+) \(([\d.]+) → ([\d.]+)\s+tokens "
                        r"per target call, ([\d.]+)× → ([\d.]+)×\), on agent loops from ([\d.]+) to ([\d.]+); Medusa "
                        r"on copy/edit from ([\d.]+) to ([\d.]+)\.") == (
        a("copy_edit", "ngram", 0.0), a("copy_edit", "ngram", 1.0),
        f("copy_edit", "ngram", 0.0, "tokens_per_target_call"), f("copy_edit", "ngram", 1.0, "tokens_per_target_call"),
        f("copy_edit", "ngram", 0.0, "measured_speedup"), f("copy_edit", "ngram", 1.0, "measured_speedup"),
        a("agent", "ngram", 0.0), a("agent", "ngram", 1.0), a("copy_edit", "medusa", 0.0),
        a("copy_edit", "medusa", 1.0))
    says(text, "on chat their α does not drop at all")
    assert all(cell[("chat", 1.0, k)]["alpha"] >= cell[("chat", 0.0, k)]["alpha"] for k in ("model", "eagle"))
    drop = lambda t, k: cell[(t, 0.0, k)]["alpha"] - cell[(t, 1.0, k)]["alpha"]  # noqa: E731
    sampled = {(t, k): drop(t, k) for t in KINDS for k in ("model", "eagle")}
    largest = max(sampled, key=sampled.get)
    assert largest == ("multi_turn", "model")
    eagle_most = max(KINDS, key=lambda t: sampled[(t, "eagle")])
    assert eagle_most == "agent"
    assert quoted(text, r"elsewhere it mostly drops too, by up to ([\d.]+) \(the draft model on multi-turn edits, from "
                        r"([\d.]+) to\s+([\d.]+); EAGLE's most on agent loops, from ([\d.]+) to ([\d.]+)\)") == (
        _x(sampled[largest]), a("multi_turn", "model", 0.0), a("multi_turn", "model", 1.0),
        a("agent", "eagle", 0.0), a("agent", "eagle", 1.0))
    assert quoted(text, r"where the draft model's α even rises \(([\d.]+) to ([\d.]+)\)") == (
        a("agent", "model", 0.0), a("agent", "model", 1.0))
    assert sampled[("agent", "model")] < 0
    elsewhere = [v for (t, _), v in sampled.items() if t != "chat"]
    assert sum(v > 0 for v in elsewhere) > len(elsewhere) / 2   # "mostly"
    says(text, "as far as Medusa's but half as far as prompt lookup's on agent loops")
    medusa = {t: drop(t, "medusa") for t in KINDS}
    assert max(medusa, key=medusa.get) == "copy_edit" and _x(medusa["copy_edit"]) == _x(sampled[largest])
    assert 1.6 < drop("agent", "ngram") / sampled[largest] < 2.4
    from lab.picker import recommend   # the picker's warning about sampling quotes the same two drops

    rec = recommend("chat", 1.0, False, False)
    assert rec.method == "ngram"
    assert any(f"copy/edit falling from {a('copy_edit', 'ngram', 0.0)} to {a('copy_edit', 'ngram', 1.0)} at T = 1, "
               f"Medusa's on copy/edit from {a('copy_edit', 'medusa', 0.0)} to {a('copy_edit', 'medusa', 1.0)}" in r
               for r in rec.reasons)
    assert any("on chat requests neither the draft model's α nor EAGLE's fell at T = 1" in r
               for r in recommend("chat", 0.9, True, False).reasons)


def test_picker_quotes_lesson_12(arena):
    """lab.picker rates prompt lookup (and Lookahead) on chat with the committed arena's chat rows, and its wording
    of them follows the numbers."""
    from lab.picker import ARENA_CHAT_SPEEDUPS, recommend
    from lab.picker.tables import ARENA_CHAT_PER_CALL

    assert set(ARENA_CHAT_PER_CALL) == set(ARENA_CHAT_SPEEDUPS)
    for (method, temperature), speedup in ARENA_CHAT_SPEEDUPS.items():
        row = arena["cell"][("chat", float(temperature), method)]
        assert f"{speedup:.2f}" == _x(row["measured_speedup"])
        assert f"{ARENA_CHAT_PER_CALL[(method, temperature)]:.2f}" == _x(row["tokens_per_target_call"])
    text = " ".join(recommend("chat", 0.0, False, False).reasons)
    assert "level or ahead" not in text
    for t in (0, 1):   # the warning appears exactly where the speedup exceeds the tokens per call
        assert (f"Its {ARENA_CHAT_SPEEDUPS[('ngram', t)]:.2f}×" in text) == (
            ARENA_CHAT_SPEEDUPS[("ngram", t)] > ARENA_CHAT_PER_CALL[("ngram", t)])


def test_lesson_12_conversations_and_mtp(arena):
    """The bullets on the conversation kinds (the copying methods against the rest) and on the MTP heads."""
    text, cell = arena["text"], arena["cell"]
    mtp = json.loads((SOLUTIONS.parent / "lab" / "assets" / "smollm2-135m" / "mtp" / "training.json").read_text())
    data = mtp["data"]
    says(text, f"trained on {data['train_sequences']} answers ({data['sequences']} sequences, "
               f"{data['held_out_sequences']} held out)")
    row = lambda task, kind, T=0.0: cell[(task, T, kind)]  # noqa: E731
    agent = _rows(arena, "agent", 0.0)
    others = [r for r in agent if r["drafter"] not in ("ngram", "suffix")]
    for key in ("measured_speedup", "tokens_per_target_call"):
        assert {r["drafter"] for r in sorted(agent, key=lambda r: r[key])[-2:]} == {"ngram", "suffix"}, key
    assert quoted(text, r"prompt\s+lookup ([\d.]+) tokens per target call and ([\d.]+)×, suffix decoding ([\d.]+) and "
                        r"([\d.]+)×; every other drafter at most ([\d.]+)\s+and ([\d.]+)×") == (
        _x(row("agent", "ngram")["tokens_per_target_call"]), _x(row("agent", "ngram")["measured_speedup"]),
        _x(row("agent", "suffix")["tokens_per_target_call"]), _x(row("agent", "suffix")["measured_speedup"]),
        _x(max(r["tokens_per_target_call"] for r in others)), _x(max(r["measured_speedup"] for r in others)))
    # multi-turn edits: the draft model and EAGLE-3 yield the most per call; suffix decoding, drafting for free,
    # measured the most on fewer tokens per call
    multi = _rows(arena, "multi_turn", 0.0)
    by_calls = sorted(multi, key=lambda r: r["tokens_per_target_call"])
    by_speed = sorted(multi, key=lambda r: r["measured_speedup"])
    assert [r["drafter"] for r in by_calls[-2:]] == ["eagle3", "model"]
    assert [r["drafter"] for r in by_speed[-3:]] == ["eagle3", "ngram", "suffix"]
    e3, suffix = row("multi_turn", "eagle3"), row("multi_turn", "suffix")
    assert suffix["tokens_per_target_call"] < e3["tokens_per_target_call"]
    assert suffix["draft_ms_per_step"] < 0.01 * suffix["ar_ms_per_step"]   # "drafts for free"
    assert quoted(text, r"On multi-turn edits the learned drafters yield the most per call \(the draft model ([\d.]+), "
                        r"EAGLE-3 ([\d.]+)\),\s+but suffix decoding, which drafts for free, measured the most "
                        r"\(([\d.]+)× on ([\d.]+) tokens per call; prompt lookup ([\d.]+)×,\s+EAGLE-3 ([\d.]+)×, the "
                        r"draft model ([\d.]+)×\)") == (
        _x(row("multi_turn", "model")["tokens_per_target_call"]), _x(e3["tokens_per_target_call"]),
        _x(suffix["measured_speedup"]), _x(suffix["tokens_per_target_call"]),
        _x(row("multi_turn", "ngram")["measured_speedup"]), _x(e3["measured_speedup"]),
        _x(row("multi_turn", "model")["measured_speedup"]))
    close = quoted(text, r"methods are close \(([\d.]+) against ([\d.]+) and ([\d.]+) against ([\d.]+) tokens\)")
    assert close == tuple(_x(row(t, k)["tokens_per_target_call"]) for t in ("multi_turn", "agent")
                          for k in ("suffix", "ngram"))
    mtp_kinds = ("code", "structured", "multi_turn")
    low, high, s_low, s_high, alpha, eagle_alpha = quoted(
        text, r"They reach ([\d.]+)–([\d.]+) tokens per\s+target call on code, structured output and multi-turn edits "
              r"\(([\d.]+)–([\d.]+)×\), with a lower α than EAGLE's on every\s+kind \(([\d.]+) against ([\d.]+) on "
              r"code\)")
    assert (low, high) == _span(row(t, "mtp")["tokens_per_target_call"] for t in mtp_kinds)
    assert (s_low, s_high) == _span(row(t, "mtp")["measured_speedup"] for t in mtp_kinds)
    assert min(row(t, "mtp")["tokens_per_target_call"] for t in mtp_kinds) > max(
        row(t, "mtp")["tokens_per_target_call"] for t in KINDS if t not in mtp_kinds)
    assert (alpha, eagle_alpha) == (_x(row("code", "mtp")["alpha"]), _x(row("code", "eagle")["alpha"]))
    assert all(row(t, "mtp")["alpha"] < row(t, "eagle")["alpha"] for t in KINDS)
    assert max(r["tokens_per_target_call"] for r in _rows(arena) if r["drafter"] == "mtp") <= 3


def test_lesson_12_eagle3_against_eagle(arena):
    """The EAGLE-3 bullet: EAGLE-3 against EAGLE on the real pair, from its card (held-out agreement, training data) and
    from the committed run (α, tokens per target call and speedup per kind at T = 0; α at T = 1)."""
    from lab.drafters.eagle3 import EAGLE3_DIRS

    text, cell = arena["text"], arena["cell"]
    e = lambda task, T=0.0: cell[(task, T, "eagle")]  # noqa: E731
    e3 = lambda task, T=0.0: cell[(task, T, "eagle3")]  # noqa: E731
    card = EAGLE3_DIRS["smollm2-135m"]
    training = json.loads((card / "training.json").read_text())
    says(text, "**EAGLE-3** (lesson 11) reads fused low, middle and high target layers where EAGLE reads the last, and "
               "was trained on the same chat data")
    assert len(training["recipe"]["hidden_layers"]) == 3
    assert "the same split as the EAGLE draft's" in (card / "README.md").read_text()
    ours = training["held_out_agreement"]["step_1"]["all"]
    eagles = training["eagle_on_the_same_held_out"]["agreement"]["all"]
    eagle_steps = json.loads((card.parent / "eagle" / "training.json").read_text())["recipe"]["steps"]
    assert quoted(text, r"for ([\d,]+) steps against EAGLE's ([\d,]+); its card puts it ahead of EAGLE on held-out "
                        r"agreement at the first drafting step \(([\d.]+) against ([\d.]+)\)") == (
        f"{training['recipe']['steps']:,}", f"{eagle_steps:,}", _x(ours, 3), _x(eagles, 3))
    assert ours > eagles
    # T = 0: α higher on five kinds (by 0.06-0.10 on four, 0.01 on chat), lower on agent loops
    says(text, "In the arena it accepts more on five kinds of six.")
    gain = {T: {t: e3(t, T)["alpha"] - e(t, T)["alpha"] for t in KINDS} for T in (0.0, 1.0)}
    four = ("code", "structured", "copy_edit", "multi_turn")
    assert [t for t in KINDS if gain[0.0][t] < 0] == ["agent"]
    assert quoted(text, r"At T = 0 its α\s+is higher than EAGLE's by ([\d.]+)–([\d.]+) on code, structured output, "
                        r"copy/edit and multi-turn edits, by ([\d.]+) on chat, and\s+lower on agent loops \(([\d.]+) "
                        r"against ([\d.]+)\); over the six kinds it is ahead by ([\d.]+) on average") == _span(
        gain[0.0][t] for t in four) + (_x(gain[0.0]["chat"]), _x(e3("agent")["alpha"]), _x(e("agent")["alpha"]),
                                       _x(sum(gain[0.0].values()) / len(KINDS)))
    calls = lambda r: r["tokens_per_target_call"]  # noqa: E731
    speed = lambda r: r["measured_speedup"]  # noqa: E731
    assert all((calls(e3(t)) > calls(e(t))) == (gain[0.0][t] > 0) for t in KINDS)   # "follow its α"
    assert all((speed(e3(t)) > speed(e(t))) == (gain[0.0][t] > 0) for t in KINDS)   # "and so, mostly, does its speed"
    ahead = [t for t in KINDS if t not in ("chat", "agent")]
    says(text, "ahead of EAGLE by")
    assert quoted(text, r"ahead of EAGLE by ([\d.]+)–([\d.]+)× on code, structured output, copy/edit and multi-turn "
                        r"edits") == _span(speed(e3(t)) - speed(e(t)) for t in ahead)
    assert quoted(text, r"Its tokens per target\s+call follow its α \(([\d.]+) against ([\d.]+) on code, ([\d.]+) "
                        r"against ([\d.]+) on agent loops\), and so, mostly, does its speed:\s+ahead of EAGLE by "
                        r"[\d.]+–[\d.]+× on code, structured output, copy/edit and multi-turn edits \(([\d.]+)× "
                        r"against ([\d.]+)× on\s+code, ([\d.]+)× against ([\d.]+)× on multi-turn edits\), level on "
                        r"chat \(([\d.]+)× against ([\d.]+)×\), behind on agent loops \(([\d.]+)×\s+against "
                        r"([\d.]+)×\)\.") == (
        _x(calls(e3("code"))), _x(calls(e("code"))), _x(calls(e3("agent"))), _x(calls(e("agent"))),
        _x(speed(e3("code"))), _x(speed(e("code"))), _x(speed(e3("multi_turn"))), _x(speed(e("multi_turn"))),
        _x(speed(e3("chat"))), _x(speed(e("chat"))), _x(speed(e3("agent"))), _x(speed(e("agent"))))
    assert abs(speed(e3("chat")) - speed(e("chat"))) < 0.05   # "level"
    others = [t for t in KINDS if t != "agent"]
    assert quoted(text, r"its target calls there were timed at ([\d.]+) one-token\s+steps against EAGLE's ([\d.]+), "
                        r"over the same five tokens, where on the other kinds the two differ by at most ([\d.]+),") == (
        _x(e3("agent")["target_call_cost"]), _x(e("agent")["target_call_cost"]),
        _x(max(abs(e3(t)["target_call_cost"] - e(t)["target_call_cost"]) for t in others)))
    assert e3("agent")["n_draft"] == e("agent")["n_draft"] == 4   # five tokens a call
    # T = 1: higher on five kinds, lower on structured output
    assert [t for t in KINDS if gain[1.0][t] < 0] == ["structured"]
    assert max(gain[1.0], key=gain[1.0].get) == "multi_turn"
    assert quoted(text, r"At T = 1 its α is higher on five kinds, by up to ([\d.]+) \(multi-turn edits\), and lower on "
                        r"structured output, by\s+([\d.]+)\.") == (
        _x(gain[1.0]["multi_turn"]), _x(-gain[1.0]["structured"]))
    # the training it had: the same test (training-time test, several unrolled passes), little data
    assert training["recipe"]["depth"] > 1
    assert quoted(text, r"this draft had the same test but ([\d,]+) answers of a 135 M-parameter target") == (
        f"{training['data']['train_sequences']:,}",)


def test_lesson_12_parallel_draft_against_its_draft_model(arena):
    """The parallel-draft bullet: the parallel draft against the draft model it was adapted from, at T = 0."""
    text, cell = arena["text"], arena["cell"]
    par = {t: cell[(t, 0.0, "parallel")] for t in KINDS}
    dm = {t: cell[(t, 0.0, "model")] for t in KINDS}
    assert all(par[t]["n_draft"] == dm[t]["n_draft"] == 4 for t in KINDS)
    fewer = [t for t in KINDS if par[t]["tokens_per_target_call"] < dm[t]["tokens_per_target_call"]]
    assert fewer == [t for t in KINDS if t != "agent"] and all(par[t]["alpha"] < dm[t]["alpha"] for t in fewer)
    says(text, "so on five kinds it accepts less")
    assert quoted(text, r"\(α ([\d.]+) against ([\d.]+) on code, ([\d.]+) against\s+([\d.]+) on multi-turn edits\) "
                        r"and yields fewer tokens per target call \(([\d.]+)–([\d.]+) against ([\d.]+)–([\d.]+)\)") == (
        _x(par["code"]["alpha"]), _x(dm["code"]["alpha"]), _x(par["multi_turn"]["alpha"]),
        _x(dm["multi_turn"]["alpha"])) + _span(par[t]["tokens_per_target_call"] for t in fewer) + _span(
        dm[t]["tokens_per_target_call"] for t in fewer)
    alpha, per_call = quoted(text, r"on agent loops\s+the two tie \(α ([\d.]+), ([\d.]+) tokens each\)")
    assert alpha == _x(par["agent"]["alpha"]) == _x(dm["agent"]["alpha"])
    assert per_call == _x(par["agent"]["tokens_per_target_call"]) == _x(dm["agent"]["tokens_per_target_call"])
    assert quoted(text, r"four forwards cost about four times one, ([\d.]+)–([\d.]+) ms a step, against "
                        r"([\d.]+)–([\d.]+) ms\s+for the parallel draft's single forward") == _span(
        (dm[t]["draft_ms_per_step"] for t in KINDS), 1) + _span((par[t]["draft_ms_per_step"] for t in KINDS), 1)
    # one draft forward a step for the parallel draft, about four for the draft model
    assert all(par[t]["draft_calls"] <= par[t]["target_calls"] for t in KINDS)
    assert all(3.5 < dm[t]["draft_calls"] / dm[t]["target_calls"] <= 4 for t in KINDS)
    assert all(0.25 < par[t]["draft_ms_per_step"] / dm[t]["draft_ms_per_step"] < 0.4 for t in KINDS)  # "a third"
    gap = {t: par[t]["measured_speedup"] - dm[t]["measured_speedup"] for t in KINDS}
    assert [t for t in KINDS if gap[t] > 0.05] == ["chat", "code", "structured", "agent"]
    assert abs(gap["copy_edit"]) < 0.05 and gap["multi_turn"] < -0.05   # "level on copy/edit", "behind"
    says(text, "In speed the saving won on four kinds: ahead of the draft model on chat, code, structured output and "
               "agent loops")
    assert quoted(text, r"\(([\d.]+)× against ([\d.]+)× on structured output; on agent loops, with the same tokens per "
                        r"call and about a third of the drafting time, ([\d.]+)× against ([\d.]+)×\), level on "
                        r"copy/edit \(([\d.]+)× against\s+([\d.]+)×\) and behind on multi-turn edits \(([\d.]+)× "
                        r"against ([\d.]+)×\), where it loses the most tokens per call \(([\d.]+) against\s+"
                        r"([\d.]+)\)") == tuple(
        _x(r["measured_speedup"]) for t in ("structured", "agent", "copy_edit", "multi_turn") for r in (par[t], dm[t])
    ) + (_x(par["multi_turn"]["tokens_per_target_call"]), _x(dm["multi_turn"]["tokens_per_target_call"]))
    lost = {t: dm[t]["tokens_per_target_call"] - par[t]["tokens_per_target_call"] for t in KINDS}
    assert max(lost, key=lost.get) == "multi_turn"
    assert _x(par["agent"]["tokens_per_target_call"]) == _x(dm["agent"]["tokens_per_target_call"])


def test_picker_quotes_the_arena_on_suffix_decoding(arena):
    """lab.picker's suffix-decoding row (agent loops, multi-turn edits) is the committed arena's measurement."""
    from lab.picker.tables import ARENA_SUFFIX_PER_CALL, ARENA_SUFFIX_SPEEDUPS

    cell = arena["cell"]
    for (task, temperature), speedup in ARENA_SUFFIX_SPEEDUPS.items():
        assert f"{speedup:.2f}" == _x(cell[(task, float(temperature), "suffix")]["measured_speedup"])
    for task, (ours, lookup) in ARENA_SUFFIX_PER_CALL.items():
        assert (f"{ours:.2f}", f"{lookup:.2f}") == (_x(cell[(task, 0.0, "suffix")]["tokens_per_target_call"]),
                                                    _x(cell[(task, 0.0, "ngram")]["tokens_per_target_call"]))


def test_lesson_12_early_exit_and_medusa(arena):
    text, cell = arena["text"], arena["cell"]
    rows = _rows(arena)
    early = [r for r in rows if r["drafter"] == "early-exit"]
    assert quoted(text, r"slower than autoregressive decoding everywhere \(([\d.]+)–([\d.]+)×\)") == _span(
        r["measured_speedup"] for r in early)
    assert max(r["measured_speedup"] for r in early) < 1
    c_low, c_high, steps_low, steps_high = quoted(
        text, r"make c\s+about ([\d.]+)–([\d.]+), so with N = 4 the drafting alone costs ([\d.]+)–([\d.]+) target "
              r"steps")
    costs = [r["cost_ratio"] for r in early]
    assert (c_low, c_high) == _span(costs) and (steps_low, steps_high) == _span((4 * c for c in costs), 1)
    assert all(r["n_draft"] == 4 for r in early)
    assert quoted(text, r"it accepts almost nothing\s+\(α ≤ ([\d.]+)\)") == (_x(max(r["alpha"] for r in early)),)
    assert quoted(text, r"Its efficiency is close to 1 in every cell \(([\d.]+)–([\d.]+)\)") == _span(
        r["efficiency"] for r in early)
    assert all(0.9 <= r["efficiency"] <= 1.1 for r in early)
    # Medusa: the lowest efficiency of its cell in all cells but one, where suffix decoding's is lower
    cells = {(r["task"], r["temperature"]) for r in rows}
    in_cell = lambda c: [r for r in rows if (r["task"], r["temperature"]) == c]  # noqa: E731
    lowest = {c: min(in_cell(c), key=lambda r: r["efficiency"]) for c in cells}
    medusa = {c: cell[c + ("medusa",)]["efficiency"] for c in cells}
    at_lowest = [c for c in cells if lowest[c]["drafter"] == "medusa"]
    total, low, high = quoted(text, r"its efficiency is the lowest of its cell in all (\d+) cells "
                                    r"\(([\d.]+)–([\d.]+)\)")
    assert sorted(at_lowest) == sorted(cells) and (low, high) == _span(medusa.values())
    assert total == str(len(cells)) == "12"
    call = lambda t, kind: cell[(t, 0.0, kind)]["target_call_cost"]  # noqa: E731
    assert all(call(t, "medusa") > call(t, "model") for t in KINDS)   # "in every greedy cell"
    assert quoted(text, r"in every greedy cell its target call took longer than the draft model's \(([\d.]+)–([\d.]+) "
                        r"against ([\d.]+)–([\d.]+) one-token steps\)") == _span(
        cell[(t, 0.0, "medusa")]["target_call_cost"] for t in KINDS) + _span(
        cell[(t, 0.0, "model")]["target_call_cost"] for t in KINDS)
    dearest = max(rows, key=lambda r: r["target_call_cost"])
    assert (dearest["task"], dearest["temperature"], dearest["drafter"]) == ("code", 0.0, "medusa")
    assert quoted(text, r"the run's dearest call is Medusa's on code at T = 0 \(([\d.]+) one-token steps\)") == (
        _x(dearest["target_call_cost"]),)


def test_lesson_12_efficiency_factors(arena):
    text, cell = arena["text"], arena["cell"]
    code = {r["drafter"]: r for r in _rows(arena, "code", 0.0)}
    factor = lambda k, f: code[k]["efficiency_factors"][f]  # noqa: E731
    says(text, "verification and the loop come within 2 % of 1 for every drafter, and acceptance within 1 % for every "
               "drafter but EAGLE-3 (× 0.97)")
    assert all(abs(factor(k, f) - 1) < 0.02 for k in code for f in ("verification", "loop"))
    assert [k for k in code if abs(factor(k, "acceptance") - 1) >= 0.01] == ["eagle3"]
    assert _x(factor("eagle3", "acceptance")) == "0.97"
    assert quoted(text, r"The prefill takes a little more\s+\(× ([\d.]+)–([\d.]+)\)") == _span(
        factor(k, "prefill") for k in code)
    assert min(factor(k, "prefill") for k in code) < min(factor(k, "verification") for k in code)   # "a little more"
    says(text, "for every drafter in that cell it is the largest loss")
    assert all(factor(k, "target_call") == min(code[k]["efficiency_factors"].values()) for k in code)
    order = ("medusa", "lookahead", "ngram", "model", "eagle3", "eagle")
    assert quoted(text, r"× ([\d.]+) for Medusa's tree, ([\d.]+) for Lookahead's window, ([\d.]+) for prompt lookup, "
                        r"([\d.]+)\s+for the draft model, ([\d.]+) for EAGLE-3 and ([\d.]+) for EAGLE") == tuple(
        _x(factor(k, "target_call")) for k in order)
    assert [factor(k, "target_call") for k in order] == sorted(factor(k, "target_call") for k in order)
    assert quoted(text, r"The draft model's factor of ([\d.]+) puts its call over 5 tokens at ([\d.]+) times a "
                        r"one-token call; EAGLE's call, over as many tokens, came out at ([\d.]+), EAGLE-3's at "
                        r"([\d.]+)\.") == (
        _x(factor("model", "target_call")), _x(code["model"]["target_call_cost"]),
        _x(code["eagle"]["target_call_cost"]), _x(code["eagle3"]["target_call_cost"]))
    assert code["model"]["n_draft"] == code["eagle"]["n_draft"] == code["eagle3"]["n_draft"] == 4   # 5 tokens a call
    baselines = _baselines(arena)
    assert quoted(text, r"code's step \(([\d.]+) ms\) was close to the run's fastest \(([\d.]+) ms\)") == (
        _x(baselines[("code", 0.0)], 1), _x(min(baselines.values()), 1))
    assert baselines[("code", 0.0)] / min(baselines.values()) < 1.1
    model_calls = {t: cell[(t, 0.0, "model")]["target_call_cost"] for t in KINDS}
    assert quoted(text, r"yet the draft model's call cost more there than on any other kind at T = 0\s+"
                        r"\(([\d.]+)–([\d.]+) one-token steps elsewhere\)") == _span(
        v for t, v in model_calls.items() if t != "code")
    assert max(model_calls, key=model_calls.get) == "code"
    above = [r for r in _rows(arena) if r["efficiency_factors"]["target_call"] > 1]
    assert [(r["task"], r["temperature"], r["drafter"]) for r in above] == [("agent", 0.0, "suffix")]
    assert quoted(text, r"a target-call\s+factor above 1, appears in one row of the run: suffix decoding's on agent "
                        r"loops at T = 0 \(× ([\d.]+)\)") == (_x(above[0]["efficiency_factors"]["target_call"]),)


def test_lesson_12_adaptive_in_the_committed_run(arena):
    from lab.metrics import optimal_n_draft

    text, adaptive = arena["text"], arena["run"]["adaptive"]
    fixed = [r for r in adaptive["rows"] if r["drafter"] == "model"]
    n4 = next(r for r in fixed if r["n_draft"] == 4)
    formula, measured, best = quoted(text, r"the two agreed: the formula's best N (\d+), the measured best N (\d+) "
                                           r"\(([\d.]+)×\), and\s+every fixed N from 3 on below\s+1×")
    assert (int(formula), int(measured)) == (optimal_n_draft(n4["alpha"], n4["cost_ratio"]), adaptive["best_fixed_n"])
    assert formula == measured and best == _x(max(r["measured_speedup"] for r in fixed))
    assert adaptive["settings"]["task"] == "chat" and all(r["measured_speedup"] < 1 for r in fixed if r["n_draft"] >= 3)
    arena_model = arena["cell"][("chat", 0.0, "model")]
    assert quoted(text, r"with the same ([\d.]+) tokens per target call: ([\d.]+)× here, ([\d.]+)× there, the "
                        r"baseline step ([\d.]+) ms here and ([\d.]+) ms there") == (
        _x(n4["tokens_per_target_call"]), _x(n4["measured_speedup"]), _x(arena_model["measured_speedup"]),
        _x(n4["ar_ms_per_step"], 1), _x(arena_model["ar_ms_per_step"], 1))
    assert n4["tokens_per_target_call"] == arena_model["tokens_per_target_call"]
    gap, mine, low, high = quoted(text, r"it came between the fixed settings, ([\d.]+)× below the best fixed N "
                                        r"\(([\d.]+)× against ([\d.]+)–([\d.]+)×\)")
    adaptive_x = next(r["measured_speedup"] for r in adaptive["rows"] if r["drafter"] == "adaptive")
    speeds = [r["measured_speedup"] for r in fixed]
    assert (gap, mine, low, high) == (_x(max(speeds) - adaptive_x), _x(adaptive_x), _x(min(speeds)), _x(max(speeds)))
    assert min(speeds) < adaptive_x < max(speeds)
    says(text, "it did not beat the best fixed N in the committed run")
    per_call = {r["n_draft"]: r["tokens_per_target_call"] for r in fixed}
    peak = max(per_call, key=per_call.get)
    says(text, f"in the committed run they peaked at N = {peak}, {per_call[peak]:.2f}, and were "
               f"{min(per_call[6], per_call[8]):.2f}–{max(per_call[6], per_call[8]):.2f} at N = 6 and 8")


def test_lesson_12_summary(arena):
    """The summary's drafter bullet, in tokens per target call at T = 0, and its noise bullet."""
    text, cell = arena["text"], arena["cell"]
    row = lambda task, kind: cell[(task, 0.0, kind)]  # noqa: E731
    suffix, lookup, speed = quoted(text, r"the copying methods on copy/edit requests \(suffix decoding ([\d.]+), "
                                         r"prompt lookup\s+([\d.]+), which made ([\d.]+)× greedy at no drafting cost\)")
    assert (suffix, lookup, speed) == (_x(row("copy_edit", "suffix")["tokens_per_target_call"]),
                                       _x(row("copy_edit", "ngram")["tokens_per_target_call"]),
                                       _x(row("copy_edit", "ngram")["measured_speedup"]))
    for task in ("copy_edit", "agent"):   # "the copying methods on copy/edit requests ... and on agent loops"
        top = sorted(_rows(arena, task, 0.0), key=lambda r: r["tokens_per_target_call"])[-2:]
        assert {r["drafter"] for r in top} == {"ngram", "suffix"}, task
    learned_kinds = ("code", "structured", "multi_turn")
    assert quoted(text, r"the learned drafters \(draft model, EAGLE, EAGLE-3, Medusa\) ([\d.]+)–([\d.]+) on code, "
                        r"structured output and multi-turn edits") == _span(
        row(t, k)["tokens_per_target_call"] for t in learned_kinds for k in LEARNED)
    best = {t: max(r["tokens_per_target_call"] for r in _rows(arena, t, 0.0)) for t in KINDS}
    assert quoted(text, r"open chat\s+questions give every drafter the least \(at most ([\d.]+)\)") == (
        _x(best["chat"]),)
    assert min(best, key=best.get) == "chat"
    cells = sorted({(r["task"], r["temperature"]) for r in _rows(arena)})
    gain = [cell[c + ("eagle3",)]["alpha"] - cell[c + ("eagle",)]["alpha"] for c in cells]
    higher, total, lower = quoted(text, r"EAGLE-3, trained on the same data as EAGLE for twice the\s+steps, beats it "
                                        r"on most of this pair's cells: its α is higher in (\d+) of the (\d+) cells "
                                        r"and lower in the other (\d+)")
    assert (higher, total, lower) == (str(sum(g > 0 for g in gain)), str(len(cells)), str(sum(g < 0 for g in gain)))
    assert int(higher) + int(lower) == len(cells) and int(higher) > int(lower)   # "beats it on most"
    says(text, "a drafting step about a third as long as the draft model's at T = 0")
    assert all(0.25 < row(t, "parallel")["draft_ms_per_step"] / row(t, "model")["draft_ms_per_step"] < 0.4
               for t in KINDS)
    says(text, "A decode-only efficiency above 1, or a speedup above the tokens per target call, is not a gain")
    rows = _rows(arena)
    over = [r for r in rows if r["decode_efficiency"] > 1]
    assert [(r["task"], r["temperature"], r["drafter"]) for r in over] == [("agent", 0.0, "suffix")]
    assert quoted(text, r"The committed run\s+shows one, faintly \(suffix decoding on agent loops at T = 0, "
                        r"decode-only efficiency ([\d.]+)\); its autoregressive step\s+on the same chat requests took "
                        r"([\d.]+) ms in the arena and ([\d.]+) ms in its adaptive comparison") == (
        _x(over[0]["decode_efficiency"]), _x(cell[("chat", 0.0, "model")]["ar_ms_per_step"], 1),
        _x(arena["run"]["adaptive"]["rows"][0]["ar_ms_per_step"], 1))
    largest_loss = {id(r): min(r["efficiency_factors"], key=r["efficiency_factors"].get) for r in rows}
    not_target_call = [r for r in rows if largest_loss[id(r)] != "target_call"]
    assert quoted(text, r"in (\d+) of the committed run's (\d+) rows \(the copying methods and the MTP heads on the "
                        r"conversations' long\s+prompts\) the prefill takes more") == (
        str(len(not_target_call)), str(len(rows)))
    assert all(r["task"] in ("multi_turn", "agent") and r["drafter"] in ("ngram", "suffix", "mtp")
               and min(r["efficiency_factors"], key=r["efficiency_factors"].get) == "prefill" for r in not_target_call)
    assert not any(r["measured_speedup"] > r["tokens_per_target_call"] for r in rows)


@pytest.fixture(scope="module")
def lesson_13():
    out = printed("13_when_not_to_speculate")
    temps = {}
    for line in out.splitlines():
        m = re.match(r"(draft model|EAGLE)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            name, T, rate, per_call, alpha, c, verify = m.groups()
            temps[(name, float(T))] = {"rate": float(rate), "alpha": float(alpha), "verify": float(verify)}
    assert len(temps) == 6, "lesson 13's temperature table changed shape"
    return {"text": prose("13_when_not_to_speculate"), "out": out, "temps": temps}


def draft_model_crossover(out):
    """Lesson 13's short-output verdict for the draft model, checked against the table it printed: ("won", N) when it
    says speculation first won at N new tokens (its sweep line says "ahead from token N on", and every printed length
    from N on shows a speedup of at least 1.00x), ("not ahead", M) when it says the draft model was not ahead for good
    within the M-token answer (a busy machine can honestly print this; the sweep line says the same and the row at M
    shows at most 1.00x). Either wording that disagrees with the table fails."""
    won = re.search(r"speculation \(the draft model\) first won at (\d+) new tokens", out)
    lost = re.search(r"the draft model was not ahead for good within (\d+) tokens", out)
    assert bool(won) != bool(lost), "lesson 13 must say exactly one of 'first won at N' / 'not ahead for good'"
    (answer,) = quoted(out, r"answer: (\d+) tokens")
    speedups = {int(n): float(x) for n, x in re.findall(
        r"\n\s*(\d+) \|\s+\d+\s+[\d.]+ \|\s+\d+\s+[\d.]+\s+([\d.]+)x", out)}
    assert int(answer) in speedups, "lesson 13's sweep table lost its last row (the whole answer)"
    if won:
        n = int(won.group(1))
        assert quoted(out, r"draft model: ahead from token (\d+) on, in this run") == (str(n),)
        assert 1 <= n <= int(answer) and all(x >= 1.0 for length, x in speedups.items() if length >= n)
        return "won", n
    m = int(lost.group(1))
    assert m == int(answer)
    assert quoted(out, r"draft model: not ahead for good within (\d+) tokens in this run") == (answer,)
    assert speedups[m] <= 1.0  # ahead at the last token would have made it "ahead from token M on" at least
    return "not ahead", m


def test_lesson_13_crossover_check_refuses_wrong_claims():
    """draft_model_crossover on made-up output: each honest wording passes, a claim the table contradicts fails."""
    head = "code request, 47 prompt tokens; answer: 8 tokens\n"
    rows = ("   4 |  386 10.4 |  291 13.8    {a}x |  240 16.7 1.61x\n"
            "   8 |  688 11.6 |  583 13.7    {b}x |  456 17.6 1.51x\n")
    won = ("draft model: ahead from token 4 on, in this run\n here speculation (the draft model) first won at 4 new "
           "tokens")
    lost = ("draft model: not ahead for good within 8 tokens in this run\n here the draft model was not ahead for good "
            "within 8 tokens")
    assert draft_model_crossover(head + rows.format(a="1.33", b="1.18") + won) == ("won", 4)
    assert draft_model_crossover(head + rows.format(a="1.33", b="0.97") + lost) == ("not ahead", 8)
    for wrong in (head + rows.format(a="1.33", b="0.97") + won,    # "won at 4", yet slower at 8
                  head + rows.format(a="1.33", b="1.18") + lost,   # "not ahead", yet faster at the last token
                  head + rows.format(a="1.33", b="1.18") + won.replace("first won at 4", "first won at 2"),
                  head + rows.format(a="1.33", b="1.18")):         # no verdict at all
        with pytest.raises(AssertionError):
            draft_model_crossover(wrong)


def test_lesson_13_short_outputs(lesson_13):
    text, out = lesson_13["text"], lesson_13["out"]
    says(text, "it is small next to the target's prefill on both pairs of this course")
    setup, prefill = quoted(out, r"set-up ([\d.]+) ms; per token: .* \(target prefill (\d+) ms\)")
    assert float(setup) < float(prefill) / 4
    # the verdict, in either honest wording, agrees with the sweep's table
    draft_model_crossover(out)
    # the list at the end quotes the sweep's table (the draft model's speedup at 15 new tokens)
    (at15,) = quoted(out, r"(?:first won at \d+ new tokens|was not ahead for good within \d+ tokens); at 15 it was "
                          r"([\d.]+)x")
    assert quoted(out, r"\n\s*15 \|\s+\d+\s+[\d.]+ \|\s+\d+\s+[\d.]+\s+([\d.]+)x") == (at15,)


def test_picker_and_lesson_14_leave_short_outputs_to_the_learners_run(lesson_13):
    """Where speculation first wins on a short output moved from 2 to 18 tokens between two quiet runs of lesson 13
    (2026-12-03), and on a busy machine the draft model may not be ahead for good at all: the picker and lesson 14
    point to lesson 13's own timing instead of quoting one run's number."""
    from lab.picker import recommend

    assert draft_model_crossover(lesson_13["out"])[0] in ("won", "not ahead")
    says(prose("14_choosing_a_strategy"), "lesson 13 times, on your machine, from how many new tokens the real pair's "
         "draft model stays ahead")
    revisit = " ".join(recommend("code", 0.0, True, False).revisit)
    assert "lesson 13 times, on your machine, from how many new tokens the draft model stays ahead" in revisit


def test_lesson_13_temperature(lesson_13):
    text, out, temps = lesson_13["text"], lesson_13["out"], lesson_13["temps"]
    # "A model answering requests ... lives on the falling curve": the committed run is the real pair's
    says(text, "A model answering requests is confident on most of its answer's tokens")
    says(text, "so it lives on the falling curve, where the seed is right")
    assert "pair smollm2-135m" in out
    share, trend = quoted(out, r"(\d+)% of this pair's answer positions are confident and \d+% unsure; over all of "
                               r"them, acceptance (falls|rises)")
    assert int(share) > 50 and trend == "falls"
    # the closing list quotes the table's α
    listed = quoted(out, r"draft model α ([\d.]+) at T = 0, ([\d.]+) at T = 1, ([\d.]+) at T = 2")
    assert all(abs(float(q) - temps[("draft model", T)]["alpha"]) <= 0.006 for q, T in zip(listed, (0.0, 1.0, 2.0)))


def test_lesson_13_summary_quotes_the_printed_list(lesson_13):
    text, out = lesson_13["text"], lesson_13["out"]
    gb, more_cache, seqs, seqs_none = quoted(out, r"costs (\d+) GB and (\d+)% more KV cache per token: (\d+) "
                                                  r"instead of (\d+) sequences")
    assert quoted(text, r"(\d+) GB and \+(\d+) % cache per token, about a third fewer") == (gb, more_cache)
    assert 0.28 <= 1 - int(seqs) / int(seqs_none) <= 0.4
    b5, b1 = quoted(out, r"predicts a loss from batch (\d+) \(α 0.75, N = 5\) or (\d+) \(N = 1\)")
    q5, q1 = quoted(text, r"N = 5 lose from a batch of about (\d+); N = 1 holds out to about (\d+)")
    assert abs(int(q5) - int(b5)) <= 5 and abs(int(q1) - int(b1)) <= 5


def test_lesson_14_quotes_lesson_13(lesson_13):
    from lab.picker import recommend

    printed_alpha = quoted(lesson_13["out"], r"draft model α ([\d.]+) at T = 0, [\d.]+ at T = 1, ([\d.]+) at T = 2")
    lesson_14 = prose("14_choosing_a_strategy")
    assert quoted(lesson_14, r"lesson 13 measured α ([\d.]+) at T = 0 and ([\d.]+) at T = 2") == printed_alpha
    says(lesson_14, "sampling at T = 2 lowered the real pair's α")
    assert float(printed_alpha[1]) < float(printed_alpha[0])
    reason = " ".join(recommend("chat", 1.3, True, True).reasons)
    assert "(α {} at T = 0, {} at T = 2)".format(*printed_alpha) in reason


def test_lesson_10_medusa_against_its_chain_and_the_draft_model():
    text, out = prose("10_medusa_tree_attention"), printed("10_medusa_tree_attention")
    per_call = {name.strip(): value for name, value in re.findall(r"^(.+?)\s+([\d.]+) tokens per target call$", out,
                                                                     re.M)}
    # the sentences the lesson prints from its table (the prose itself quotes no measured number)
    chain, tree = quoted(out, r"Medusa: the top-1 chain ([\d.]+) tokens per target call, the tree ([\d.]+) ")
    assert (chain, tree) == (per_call["Medusa chain (top-1)"], per_call["Medusa tree (14 nodes)"])
    assert float(tree) > float(chain)   # the prose: "The tree adds to their top-1 chain"
    draft, word, tree_again = quoted(out, r"the draft model, N = 3: ([\d.]+) tokens per target call, (more|fewer) than "
                                          r"Medusa's tree \(([\d.]+)\)")
    assert draft == next(value for name, value in per_call.items() if name.startswith("draft model"))
    assert tree_again == tree and (word == "more") == (float(draft) > float(tree))
    low, high = (float(value) for name, value in per_call.items() if name.startswith("early exit"))
    assert high > low   # the prose: "Cutting nearer the top drafts better"
    assert not re.search(r"\d\.\d\d tokens per", text), "a tokens-per-call number is back in the prose"
    # the heads' card as printed: each head further out is right less often, and top-5 beats top-1 (the prose)
    heads = re.findall(r"^Medusa head \d\s+t\+\d\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    top1 = [float(row[0]) for row in heads]
    assert len(heads) == 3 and top1 == sorted(top1, reverse=True), heads
    assert all(float(top5) > float(one) > float(init) for one, top5, init in heads), heads
    # the short training run: held-out loss falls, and the committed heads do much better (the prose)
    start, end, committed = (float(v) for v in quoted(out, r"held-out loss: ([\d.]+) at step 0, ([\d.]+) after \d+ "
                                                           r"steps on \d+ answers; the committed heads: ([\d.]+)"))
    assert committed < end < start
    # the real pair's heads: one shared output layer over 2,048 tokens, the size the prose quotes
    config = json.loads((SOLUTIONS.parent / "lab" / "assets" / "smollm2-135m" / "medusa" / "config.json").read_text())
    card = json.loads((SOLUTIONS.parent / "lab" / "assets" / "smollm2-135m" / "medusa" / "training.json").read_text())
    assert config["shared_head"] and config["draft_vocab_size"] == 2048 and round(card["parameters"] / 1e6, 1) == 2.2
    says(text, "the 2,048 tokens that are most frequent in the target's answers")
    says(text, "2.2 M trainable parameters, where the previous heads (three output layers of their own, over a draft "
               "vocabulary of 4,096 tokens) held 8.1 M")
    assert f"trainable parameters: {card['parameters']:,}" in out and "through one output layer the heads share" in out


def test_lesson_11_eagle_chain_against_medusa():
    """Lesson 11 prints its comparison sentences from the table it printed (numbers and words must agree with it),
    and its prose quotes the committed drafts' configs and card."""
    text, out = prose("11_eagle_feature_drafts"), printed("11_eagle_feature_drafts")
    rows = {m[0].strip(): (m[1], m[2]) for m in re.findall(r"^(.+?)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+, ", out, re.M)}
    chain, model = rows["EAGLE, chain N=3"], rows["draft model, chain N=3"]
    tree, medusa = rows["EAGLE, tree (6 nodes)"], rows["Medusa, tree (14 nodes)"]

    def agrees(word, a, b):  # the sentence's word follows the unrounded values: check it where the rounded differ
        return float(a) == float(b) or (not word.startswith("not")) == (float(a) > float(b))

    a, b, word = quoted(out, r"EAGLE's chain, acceptance rate ([\d.]+) against the draft model's ([\d.]+) "
                             r"\((higher|not higher)\)")
    assert (a, b) == (chain[0], model[0]) and agrees(word, a, b)
    a, b, word = quoted(out, r"EAGLE's tree, ([\d.]+) tokens per target call against Medusa's ([\d.]+) "
                             r"\((more|not more);")
    assert (a, b) == (tree[1], medusa[1]) and agrees(word, a, b)
    a, b, word, r1, r2 = quoted(out, r"same depth: ([\d.]+) against ([\d.]+) tokens per target call "
                                     r"\((more|not more)\), acceptance rate ([\d.]+) against ([\d.]+)\.")
    assert (a, b, r1, r2) == (tree[1], chain[1], tree[0], chain[0]) and agrees(word, a, b)
    says(text, "the sentences under it are built from this run's numbers")
    # the sizes the prose quotes, as the committed run printed them
    for fact in ("width D = 576, vocabulary V = 49,152", "its head scores a draft vocabulary of 8,192 tokens",
                 "classification weight 1.0"):
        assert fact in out, fact
    says(text, "SmolLM2's LM head is 49,152 × 576: 28 M multiply-adds for every token it scores, about six times the "
               "rest of the draft")
    says(text, "EAGLE weights the classification term 0.1, ours 1.0")
    whole = int(quoted(out, r"EAGLE, whole vocabulary\s+about\s+([\d,]+) multiply-adds")[0].replace(",", ""))
    assert round(49152 * 576 / (whole - 49152 * 576)) == 6
    # the model cards' numbers
    assets = SOLUTIONS.parent / "lab" / "assets"
    card = json.loads((assets / "smollm2-135m" / "eagle" / "training.json").read_text())
    readme = " ".join((assets / "smollm2-135m" / "README.md").read_text().split())
    says(text, "on the real pair's 115 held-out training-style sequences the two committed drafts agree with the "
               "target about equally often (its model card: 0.46 for EAGLE, 0.47 for the draft model, teacher-forced)")
    assert card["data"]["held_out_sequences"] == 115 and round(card["held_out_agreement"]["all"], 2) == 0.46
    assert "self-written 0.40, all 0.47" in readme and "self-written 0.44, all 0.46" in readme
    shakespeare = json.loads((assets / "shakespeare" / "eagle" / "config.json").read_text())
    says(text, "the Shakespeare pair's works at a narrower 160")
    says(text, "The Shakespeare pair's 2,048-token head needs no such cut")
    assert shakespeare["width"] == 160 and shakespeare["vocab_size"] == 2048


def _workload_tables(out):
    """Lesson 08's per-temperature workload tables: {T: {(kind, method): {"alpha", "per_call", "speedup"}}}."""
    tables, current = {}, None
    for line in out.splitlines():
        head = re.match(r"temperature ([\d.]+)$", line.strip())
        if head:
            current = tables.setdefault(float(head.group(1)), {})
            continue
        row = re.match(r"(\w+)\s+(draft model|prompt lookup)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)x$",
                       line.strip())
        if row and current is not None:
            kind, method, alpha, per_call, speedup = row.groups()
            current[(kind, method)] = {"alpha": float(alpha), "per_call": float(per_call), "speedup": float(speedup)}
    return tables


def test_lesson_08_reading_of_its_workload_tables():
    text, out = prose("08_prompt_lookup"), printed("08_prompt_lookup")
    tables = _workload_tables(out)
    kinds = ("chat", "code", "structured", "copy_edit")
    assert set(tables) == {0.0, 0.8} and len(tables[0.0]) == 8 and len(tables[0.8]) == 2, tables.keys()
    greedy, sampled = tables[0.0], tables[0.8]
    model = {k: greedy[(k, "draft model")]["alpha"] for k in kinds}
    lookup = {k: greedy[(k, "prompt lookup")]["alpha"] for k in kinds}
    says(text, "so its α changes less from one kind of request to another than prompt lookup's")
    assert max(model.values()) - min(model.values()) < max(lookup.values()) - min(lookup.values())
    says(text, "its α there is the highest of any method on any kind")
    assert lookup["copy_edit"] == max(v["alpha"] for v in greedy.values()) and greedy[
        ("copy_edit", "prompt lookup")]["per_call"] > 2
    says(text, "**Where does prompt lookup's α come from?** On an edit request, from the prompt")
    share = dict(re.findall(r"^(\w+)\s+\d+ accepted drafts:\s+(\d+)% copied from the prompt", out, re.M))
    assert int(share["copy_edit"]) >= 90, share
    says(text, "the last lines set each α beside its greedy value")
    pairs = re.findall(r"^(\w+): prompt lookup α ([\d.]+) greedy, ([\d.]+) at T = 0.8$", out, re.M)
    assert len(pairs) == 2 and all((float(g), float(t)) == (lookup[k], sampled[(k, "prompt lookup")]["alpha"])
                                   for k, g, t in pairs), pairs
    # the edit request of the first cells: several tokens per target call
    calls = quoted(out, r"acceptance rate [\d.]+, tokens per target call ([\d.]+)")
    assert float(calls[0]) > 2


def test_lesson_09_jacobi_on_the_code_request():
    """Lesson 09: most Jacobi updates converge one position, and on the real pair's code request `python`, a newline
    and `def` converge in one update (the converged prefix jumps from 1 to 4)."""
    text, out = prose("09_lookahead_jacobi"), printed("09_lookahead_jacobi")
    says(text, "Most updates converge exactly one position")
    ones, updates = quoted(out, r"(\d+) of (\d+) updates converged exactly one")
    assert 2 * int(ones) > int(updates)
    says(text, "on the real pair's code request, `python`, a newline and `def` after the opening backticks")
    assert "greedy text: '```python\\ndef" in out
    assert quoted(out, r"code +converged prefix per update \[0, 1, (\d+),") == ("4",)


def test_lesson_09_parallel_drafting_section():
    """Lesson 09's parallel-drafting section: the sentences it prints are built from the numbers it printed, and the
    committed run's sentences from the card it ran with (measurements.json, training.json): the real pair's when it
    has a committed parallel draft, else the Shakespeare pair's."""
    from lab.drafters.parallel import PARALLEL_DIRS
    from lab.registry import pair_has

    text, out = prose("09_lookahead_jacobi"), printed("09_lookahead_jacobi")
    # which pair ran: the real pair has a committed parallel draft, and the lesson says so
    real = pair_has("parallel", "smollm2-135m")
    name = "smollm2-135m" if real else "shakespeare"
    assert f"running on the {name!r} pair" in out
    if real:
        says(text, "The real pair has one: its draft model adapted the same way on the chat data")
        assert "the 'smollm2-135m' pair has a committed parallel draft" in out
    else:
        assert "no parallel weights are trained for the 'smollm2-135m' pair" in out
    # the learner's function drove a real proposal, and the teacher-forced agreement sentence reads its own numbers
    assert re.search(r"drafts 4 tokens: \[[\d, ]+\] == ParallelDrafter's proposal: True", out)
    agreement = [float(v) for v in quoted(out, r"at block position 1\.\.4: ([\d.]+), ([\d.]+), ([\d.]+), ([\d.]+)")]
    first, word, most = quoted(out, r"position 1 agreed ([\d.]+); positions 2\.\.4, guessed without the tokens in "
                                    r"between, (all less often|not all less often) \(([\d.]+) at most\)")
    assert float(first) == agreement[0] and float(most) == max(agreement[1:])
    assert (word == "all less often") == (max(agreement[1:]) < agreement[0])
    # draft cost per proposal, and the sentence built from it
    model_ms, par_ms = quoted(out, r"draft model ([\d.]+) ms \(4 forwards of one token\), parallel draft ([\d.]+) ms")
    ratio, word, par_again, model_again = quoted(
        out, r"proposal cost ([\d.]+)x (less|more) than the draft model's \(([\d.]+) ms against ([\d.]+) ms\)")
    assert (par_again, model_again) == (par_ms, model_ms)
    assert abs(float(ratio) - float(model_ms) / float(par_ms)) < 0.06
    assert (word == "less") == (float(model_ms) > float(par_ms))  # numbers, not strings: "15.48" < "7.98"
    # the decoding table, and the sentences built from it
    rows = {m[0]: {"per_call": m[1], "alpha": m[2:6], "speedup": m[6]} for m in re.findall(
        r"^(draft model|parallel draft) +([\d.]+) +([\d.]+|nan), ([\d.]+|nan), ([\d.]+|nan), ([\d.]+|nan) +([\d.]+)x$",
        out, re.M)}
    assert set(rows) == {"draft model", "parallel draft"}, rows
    model, par = rows["draft model"], rows["parallel draft"]
    assert quoted(out, r"its α was ([\d.]+) at position 1 and ([\d.]+) at position 2, the draft model's ([\d.]+) and "
                       r"([\d.]+);") == (*par["alpha"][:2], *model["alpha"][:2])
    made, against, more, at, vs, faster = quoted(
        out, r"it made ([\d.]+) tokens per target call against the draft model's ([\d.]+) \((more|fewer)\), and ran at "
             r"([\d.]+)x autoregressive decoding against ([\d.]+)x \((faster|not faster) than the draft model\)")
    assert (made, against, at, vs) == (par["per_call"], model["per_call"], par["speedup"], model["speedup"])
    assert float(made) == float(against) or (more == "more") == (float(made) > float(against))
    assert float(at) == float(vs) or (faster == "faster") == (float(at) > float(vs))
    assert "both drafts' output == greedy autoregressive output: True" in out
    # the committed run: the card's measurements, printed by the lesson
    assets = PARALLEL_DIRS[name]
    card = json.loads((assets / "measurements.json").read_text())
    cost, run = card["draft_step_ms"]["4"], card["greedy_decoding"]["4"]
    m, p = run["model"], run["parallel"]
    assert (f"committed run ({name!r} pair, {card['threads']} thread, K = 4): a proposal {cost['ratio']:.1f}x cheaper "
            f"({cost['parallel']:.2f} ms against {cost['autoregressive']:.2f} ms);") in out
    assert ("α at positions 1..4 " + ", ".join(_x(a) for a in p["conditional_acceptance"])
            + " against the draft model's " + ", ".join(_x(a) for a in m["conditional_acceptance"])) in out
    verdict = "faster" if p["speedup"] > m["speedup"] else "not faster"
    assert (f"{_x(p['tokens_per_target_call'])} tokens per target call against {_x(m['tokens_per_target_call'])}, "
            f"and {_x(p['speedup'])}x autoregressive decoding against {_x(m['speedup'])}x: {verdict} than the draft "
            "model it was adapted from.") in out
    step_m = m["tokens_per_target_call"] / m["tokens_per_second"] * 1000
    step_p = p["tokens_per_target_call"] / p["tokens_per_second"] * 1000
    step, per_step = quoted(out, r"A step took [\d.]+ ms with the draft model and [\d.]+ ms with the parallel draft "
                                 r"\((\d+)% (?:shorter|longer)\); each step brought (\d+)% (?:fewer|more) tokens")
    assert f"A step took {step_m:.1f} ms with the draft model and {step_p:.1f} ms" in out
    assert int(step) == round(100 * abs(1 - step_p / step_m))
    assert int(per_step) == round(100 * abs(1 - p["tokens_per_target_call"] / m["tokens_per_target_call"]))
    held_out = json.loads((assets / "training.json").read_text())["held_out_agreement"]
    assert ("agreement at block position 1..4 on held-out text: "
            + ", ".join(_x(held_out[f"position_{i}"]) for i in range(1, 5))) in out
    says(text, "Whether it beats the draft model it came from depends on drafting's share of a step")
    # the prose's Shakespeare example, held to that pair's card: a step shortened by less than the tokens it lost
    says(text, "as with the Shakespeare pair's 1-layer draft of width 128, cutting K draft forwards to one shortens a "
               "step by less than the lost tokens cost")
    toy = json.loads((PARALLEL_DIRS["shakespeare"] / "measurements.json").read_text())["greedy_decoding"]["4"]
    toy_m, toy_p = toy["model"], toy["parallel"]
    shorter = 1 - (toy_p["tokens_per_target_call"] / toy_p["tokens_per_second"]) / (
        toy_m["tokens_per_target_call"] / toy_m["tokens_per_second"])
    assert 0 < shorter < 1 - toy_p["tokens_per_target_call"] / toy_m["tokens_per_target_call"]


def test_lesson_08_suffix_decoding_section():
    """Lesson 08's suffix-decoding section: the worked tree its prose walks through is the one the run printed, and
    the comparison with prompt lookup on a conversation printed both drafters' numbers, their ratio from them, and
    equal tokens."""
    text, out = prose("08_prompt_lookup"), printed("08_prompt_lookup")
    says(text, "the tree gets at most 3 nodes: `9` (seen 2 times in 3), then `4` and `8` (1 in 3 each; `4` was found "
               "first)")
    assert "tree: tokens [9, 4, 8], parents [-1, -1, 0]" in out
    per_call = dict(re.findall(r"^(prompt lookup|suffix decoding) *: ([\d.]+) tokens per target call", out, re.M))
    assert set(per_call) == {"prompt lookup", "suffix decoding"}, per_call
    ratio, = quoted(out, r"suffix decoding made ([\d.]+)x as many tokens per target call as prompt lookup")
    assert abs(float(ratio) - float(per_call["suffix decoding"]) / float(per_call["prompt lookup"])) < 0.01
    assert "both drafters produced the same tokens: True" in out
    says(text, "prompt lookup proposes at most 5 tokens a step however long the match")


def test_lesson_11_eagle3_section():
    """Lesson 11's EAGLE-3 section runs on the real pair's committed EAGLE-3 draft: its verdict sentences follow its
    own table and the card, the card's numbers it prints are the committed ones, and the prose's facts (the d2t
    exercise on the Shakespeare pair, its vocabulary counted on 307,200 tokens) hold."""
    from lab.drafters.eagle import EAGLE_DIRS
    from lab.drafters.eagle3 import EAGLE3_DIRS

    text, out = prose("11_eagle_feature_drafts"), printed("11_eagle_feature_drafts")
    rows = {m[0]: float(m[1]) for m in re.findall(r"^(EAGLE(?:-3)?)\s+[\d.]+\s+([\d.]+)\s+[\d.]+, ", out, re.M)}
    word, a, b = quoted(out, r"In this run EAGLE-3 (earns more|does not earn more) tokens per target call than "
                             r"EAGLE \(([\d.]+) against ([\d.]+)\)")
    assert (float(a), float(b)) == (rows["EAGLE-3"], rows["EAGLE"])
    assert float(a) == float(b) or (word == "earns more") == (float(a) > float(b))
    assert ("EAGLE-3 wrote the same answers as EAGLE's chain, the target's greedy ones (both drafts are exact): True"
            in out)
    real = EAGLE3_DIRS["smollm2-135m"]
    train3 = json.loads((real / "training.json").read_text())
    card3 = json.loads((real / "measurements.json").read_text())["decoding"]
    decoded = {row["method"]: row for row in card3["rows"]}
    word, a, b, alpha3, alpha1 = quoted(
        out, r"In the card's committed decoding run EAGLE-3 (earned more|earned fewer) tokens per target call than "
             r"EAGLE \(([\d.]+) against ([\d.]+)\), with α ([\d.]+) against ([\d.]+)")
    e3, e1 = decoded["eagle3 N=3"], decoded["eagle N=3"]
    assert (a, b) == (f"{e3['tokens_per_target_call']:.2f}", f"{e1['tokens_per_target_call']:.2f}")
    assert (alpha3, alpha1) == (f"{e3['alpha']:.2f}", f"{e1['alpha']:.2f}")
    assert (word == "earned more") == (e3["tokens_per_target_call"] > e1["tokens_per_target_call"])
    steps = ", ".join(f"{train3['held_out_agreement'][f'step_{k}']['all']:.2f}" for k in (1, 2, 3))
    assert f"teacher-forced agreement at steps 1-3: EAGLE-3 {steps}; EAGLE at step 1 " in out
    eagle_steps = json.loads((EAGLE_DIRS["smollm2-135m"] / "training.json").read_text())["recipe"]["steps"]
    assert (f"EAGLE trained {eagle_steps:,} steps and EAGLE-3 {train3['recipe']['steps']:,} steps of "
            f"{train3['recipe']['batch']} sequences on the same chat data; on its "
            f"{train3['data']['held_out_sequences']} held-out sequences") in out
    says(text, f"a decoding run of {card3['settings']['prompts']} held-out requests × up to "
               f"{card3['settings']['max_new_tokens']} tokens")
    says(text, f"over {card3['settings']['prompts']} requests of up to {card3['settings']['max_new_tokens']} tokens")
    says(text, f"over the {train3['data']['held_out_sequences']} held-out sequences")
    says(text, "With twice EAGLE's training steps, EAGLE-3 pulls ahead of it at this scale, by a little. In the card "
               "it agrees with the target more often at drafting step 1")
    eagle_agreement = train3["eagle_on_the_same_held_out"]["agreement"]["all"]
    assert train3["held_out_agreement"]["step_1"]["all"] > eagle_agreement
    assert train3["recipe"]["steps"] == 2 * eagle_steps and train3["recipe"]["depth"] == 3   # "three passes"
    curve = [(h["step"], h["agreement"]["step_1"]["all"]) for h in train3["history"] if "agreement" in h]
    passed = next(i for i, (_, a) in enumerate(curve) if a > eagle_agreement)
    assert all(a > eagle_agreement for _, a in curve[passed:]) and curve[-1][1] > curve[-2][1]   # "still rising"
    assert quoted(text, r"its held-out agreement passed EAGLE's between steps ([\d,]+) and ([\d,]+) and was\s+still "
                        r"rising at step ([\d,]+)\)") == (f"{curve[passed - 1][0]:,}", f"{curve[passed][0]:,}",
                                                         f"{train3['recipe']['steps']:,}")
    says(text, "in the card's decoding run its α is higher at N = 2, 3 and 4, the more so the longer the chain")
    gaps = [decoded[f"eagle3 N={n}"]["alpha"] - decoded[f"eagle N={n}"]["alpha"] for n in (2, 3, 4)]
    assert 0 < gaps[0] < gaps[1] < gaps[2]
    says(text, "lesson 12's arena finds it ahead on most kinds of request and behind on agent loops at T = 0, and "
               "its α higher in 10 of its 12 cells")
    from lab.arena import committed_arena

    cells = {(r["task"], r["temperature"], r["drafter"]): r["alpha"]
             for r in committed_arena("smollm2-135m")["arena"]["rows"]}
    behind = [task for task, T, kind in cells if kind == "eagle3" and T == 0
              and cells[(task, T, "eagle3")] < cells[(task, T, "eagle")]]
    assert behind == ["agent"]
    assert sum(cells[(task, T, "eagle3")] > cells[(task, T, "eagle")]
               for task, T, kind in cells if kind == "eagle3") == 10
    says(text, "EAGLE trained 1,000 steps and EAGLE-3 2,000 on the same few thousand answers")
    eagle_recipe = json.loads((EAGLE_DIRS["smollm2-135m"] / "training.json").read_text())["recipe"]
    says(text, f"its MLP is narrower than the EAGLE draft's ({train3['recipe']['intermediate']:,} against "
               f"{eagle_recipe['intermediate']:,})")
    assert train3["recipe"]["intermediate"] < eagle_recipe["intermediate"] and train3["recipe"]["head"] == "target"
    small = SOLUTIONS.parent / "lab" / "assets" / "shakespeare"
    recipe = json.loads((small / "eagle3" / "training.json").read_text())["recipe"]
    says(text, "The small pair's draft counted its 1,024 ids on its 307,200 training tokens (1,200 windows of 256)")
    says(text, "the committed vocabulary was counted on 307,200 tokens")
    assert (recipe["sequences"], recipe["seq_len"], recipe["draft_vocab_size"]) == (1200, 256, 1024)
    # the coverage lines are printed by the same loop; the committed vocabulary's line follows them
    shares = [float(s) for s in re.findall(r"counted here: covers ([\d.]+)%", out)]
    assert len(shares) == 5 and shares == sorted(shares)   # a larger vocabulary never covers less
    word, a, b = quoted(out, r"The committed vocabulary covers (more|no more) of these tokens than the one of the same "
                             r"size counted here \(([\d.]+)% against ([\d.]+)%\)")
    assert float(b) == shares[-1] and (float(a) == float(b) or (word == "more") == (float(a) > float(b)))
    assert f"the committed draft's 1,024 ids, counted on its training data: covers {a}%" in out


def test_lesson_14_parallel_drafting():
    """Lesson 14's PARD paragraph quotes the picker's strategy row and both pairs' parallel-draft cards, and its printed
    recommendations are the ones the paragraph describes."""
    from lab import picker

    text, out = prose("14_choosing_a_strategy"), printed("14_choosing_a_strategy")
    row = next(r for r in picker.STRATEGY_TABLE if r.method == "parallel")
    assert row.speedup == (2.52, 2.72)
    says(text, "Its authors measure 2.52–2.72× on MT-Bench chat for three 8–70 B targets, in vLLM 0.16.0")
    reasons = " ".join(picker.recommend("chat", 0.0, False, False, has_parallel_draft=True).reasons)
    from lab.picker.tables import PARD_REPORT

    assert "vLLM 0.16.0" in PARD_REPORT and "EAGLE-3 1.66–2.64×" in reasons   # "the reasons print both"
    assert "vLLM notes: vLLM 0.34.0 has no PARD drafter" in out
    says(text, "1.11–1.22× against its autoregressive draft's 1.14–1.46× at N = 2–4")
    assert "parallel (PARD) draft model, N = 5, 2.52–2.72×" in out
    assert "the same, under load → no speculation" in out and "EAGLE head trainable → EAGLE draft head" in out
    assert "'decoding_type': 'PARD'" in out and '"method": "draft_model"' in out
    measured = json.loads((SOLUTIONS.parent / "lab" / "assets" / "shakespeare" / "parallel" / "measurements.json")
                          .read_text())
    speedups = {kind: [measured["greedy_decoding"][n][kind]["speedup"] for n in ("2", "3", "4")]
                for kind in ("parallel", "model")}
    for kind, (low, high) in (("parallel", (1.11, 1.22)), ("model", (1.14, 1.46))):
        assert abs(min(speedups[kind]) - low) < 0.006 and abs(max(speedups[kind]) - high) < 0.006, speedups
    says(text, "the saving won (1.22–1.27× against 1.01–1.17×, its card's run)")
    real = json.loads((SOLUTIONS.parent / "lab" / "assets" / "smollm2-135m" / "parallel" / "measurements.json")
                      .read_text())
    real_speedups = {kind: [real["greedy_decoding"][n][kind]["speedup"] for n in ("2", "3", "4")]
                     for kind in ("parallel", "model")}
    for kind, (low, high) in (("parallel", ("1.22", "1.27")), ("model", ("1.01", "1.17"))):
        assert (_x(min(real_speedups[kind])), _x(max(real_speedups[kind]))) == (low, high), real_speedups
