"""The lessons' prose quotes numbers from the run committed with each solution notebook: these tests hold it to them.

Re-executing a notebook (``tools/run_notebooks.py``) moves every measured number; the sentences that quote them do
not move by themselves. Each test below finds one such sentence in a notebook's markdown and the number it quotes in
the same notebook's committed outputs, and fails (naming the sentence) when the two have drifted apart, so the prose
is brought back in line in the same commit that re-runs the notebook.
"""
import json
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
    """Lesson 12's arena table, its reconciliation table and its fixed-vs-adaptive table."""
    out = printed("12_drafter_arena")
    rows = table(out, "| task | T | drafter | N | acceptance rate")
    cell = {(r["task"], r["T"], r["drafter"]): r for r in rows}
    return {"cell": cell, "rows": rows, "factors": table(out, "| task | T | drafter | N | predicted ×"),
            "adaptive": table(out, "| drafter | N (mean)"), "out": out}


def test_lesson_12_prose_greedy_speedups(arena):
    text, cell = prose("12_drafter_arena"), arena["cell"]
    lookup, model, eagle = quoted(text, r"Prompt lookup is level with the draft model in this run and behind EAGLE "
                                        r"\(([\d.]+)× against ([\d.]+)× and ([\d.]+)×\)")
    assert (lookup, model, eagle) == tuple(cell[("prose", "0", d)]["measured ×"]
                                           for d in ("prompt lookup", "draft model", "EAGLE"))
    assert abs(float(lookup) - float(model)) <= 0.03 and float(lookup) < float(eagle)
    learned = sorted((cell[("prose", "0", d)]["α"] for d in ("draft model", "EAGLE", "Medusa")), key=float)
    others = [r["α"] for r in arena["rows"] if r["task"] == "prose" and r["T"] == "0" and r["α"]]
    assert sorted(others, key=float)[-3:] == learned, "learned drafters have the highest α"
    per_call = {r["drafter"]: float(r["tokens per target call"]) for r in arena["rows"]
                if r["task"] == "prose" and r["T"] == "0"}
    assert sorted(per_call, key=per_call.get)[-2:] in (["EAGLE", "Medusa"], ["Medusa", "EAGLE"])


def test_picker_quotes_lesson_12(arena):
    """lab.picker rates prompt lookup (and warns about Lookahead) on chat with lesson 12's prose measurements."""
    from lab.picker import ARENA_PROSE_SPEEDUPS

    labels = {"ngram": "prompt lookup", "lookahead": "lookahead"}
    for (method, temperature), speedup in ARENA_PROSE_SPEEDUPS.items():
        assert f"{speedup:.2f}" == arena["cell"][("prose", str(temperature), labels[method])]["measured ×"]


def test_lesson_12_temperature_drops(arena):
    text, cell = prose("12_drafter_arena"), arena["cell"]
    tasks = ("prose", "copy_edit", "structured")
    alpha = {(t, temp, d): float(cell[(t, temp, d)]["α"]) for t in tasks for temp in ("0", "1")
             for d in ("EAGLE", "draft model", "prompt lookup")}
    low, high = quoted(text, r"EAGLE's by ([\d.]+)–([\d.]+)")
    drops = [round(alpha[(t, "0", "EAGLE")] - alpha[(t, "1", "EAGLE")], 2) for t in tasks]
    assert (float(low), float(high)) == (min(drops), max(drops))
    says(text, "the draft model's not at all on the structured records")
    assert alpha[("structured", "1", "draft model")] >= alpha[("structured", "0", "draft model")]
    model0, model1, lookup0, lookup1 = quoted(text, r"draft model's falls ([\d.]+) → ([\d.]+), about as far as "
                                                    r"prompt lookup's ([\d.]+) → ([\d.]+)")
    assert (model0, model1, lookup0, lookup1) == tuple(
        cell[("copy_edit", temp, d)]["α"] for d in ("draft model", "prompt lookup") for temp in ("0", "1"))
    lookup_alpha = {t: alpha[(t, "0", "prompt lookup")] for t in tasks}
    assert max(lookup_alpha, key=lookup_alpha.get) == "copy_edit", "prompt lookup's highest α is on copy/edit"


def test_lesson_12_medusa_lookahead_and_early_exit(arena):
    text, rows, cell = prose("12_drafter_arena"), arena["rows"], arena["cell"]
    measured = {(r["task"], r["T"], r["drafter"]): float(r["measured ×"]) for r in rows}
    tasks = ("prose", "copy_edit", "structured")
    efficiency = {(r["task"], r["T"], r["drafter"]): float(r["efficiency"]) for r in rows}
    low, high = quoted(text, r"its efficiency is the lowest in every cell \(([\d.]+)–([\d.]+)\)")
    medusa = [efficiency[(t, temp, "Medusa")] for t in tasks for temp in ("0", "1")]
    assert (float(low), float(high)) == (min(medusa), max(medusa))
    for t in tasks:
        for temp in ("0", "1"):
            others = [v for (task, T, d), v in efficiency.items() if (task, T) == (t, temp) and d != "Medusa"]
            assert efficiency[(t, temp, "Medusa")] < min(others), (t, temp)
    low, high = quoted(text, r"its greedy speedup \(([\d.]+)–([\d.]+)×\s+in this run\)")
    greedy = [measured[(t, "0", "Medusa")] for t in tasks]
    assert (float(low), float(high)) == (min(greedy), max(greedy))
    chains = ("draft model", "EAGLE")
    says(text, "from ahead of the chain drafters on prose to behind both on copy/edit")
    assert measured[("prose", "0", "Medusa")] > max(measured[("prose", "0", d)] for d in chains)
    assert measured[("copy_edit", "0", "Medusa")] < min(measured[("copy_edit", "0", d)] for d in chains)
    assert all(measured[(t, "1", "Medusa")] < 1 for t in tasks)
    low, high = quoted(text, r"Lookahead gains little \(([\d.]+)–([\d.]+)×\s+greedy\)")
    ahead = [measured[(t, "0", "lookahead")] for t in tasks]
    assert (float(low), float(high)) == (min(ahead), max(ahead))
    per_call = {t: {r["drafter"]: float(r["tokens per target call"]) for r in rows if (r["task"], r["T"]) == (t, "0")}
                for t in tasks}
    assert max(per_call["prose"], key=per_call["prose"].get) == "Medusa"      # the most on greedy prose
    assert all(per_call[t]["Medusa"] < per_call[t]["EAGLE"] for t in tasks[1:])   # "fewer than EAGLE" elsewhere
    quoted_alpha = quoted(text, r"Medusa falls furthest, from α ([\d.]+)–([\d.]+)\s+"
                                r"to ([\d.]+)–([\d.]+)")
    alpha = {temp: sorted((cell[(t, temp, "Medusa")]["α"] for t in tasks), key=float) for temp in ("0", "1")}
    assert quoted_alpha == (alpha["0"][0], alpha["0"][-1], alpha["1"][0], alpha["1"][-1])
    drops = {d: [float(cell[(t, "0", d)]["α"]) - float(cell[(t, "1", d)]["α"]) for t in tasks]
             for d in ("Medusa", "prompt lookup", "lookahead", "draft model", "EAGLE")}
    assert all(max(drops[d]) < min(drops["Medusa"]) or d == "Medusa" for d in drops), drops   # falls furthest
    says(text, "slower than autoregressive decoding everywhere")
    assert all(float(r["measured ×"]) < 1 for r in rows if r["drafter"] == "early exit")
    says(text, "Its efficiency is among the highest in the table")
    for task_temp in {(r["task"], r["T"]) for r in rows}:
        drafters = [r for r in rows if (r["task"], r["T"]) == task_temp and r["drafter"] != "autoregressive"]
        ranked = sorted(drafters, key=lambda r: -float(r["efficiency"]))
        assert "early exit" in [r["drafter"] for r in ranked[:2]], task_temp


def test_lesson_12_efficiency_factors(arena):
    text = prose("12_drafter_arena")
    by_drafter = {r["drafter"]: r for r in arena["factors"]}
    low, high = quoted(text, r"the target call takes most of the loss \(× ([\d.]+)–([\d.]+) in this run\)")
    calls = [float(by_drafter[d]["× target call"]) for d in ("Medusa", "lookahead", "prompt lookup")]
    assert (float(low), float(high)) == (min(calls), max(calls))
    for d in ("Medusa", "lookahead", "prompt lookup"):
        others = [float(v) for k, v in by_drafter[d].items() if k.startswith("× ") and k != "× target call"]
        assert float(by_drafter[d]["× target call"]) < min(others), d
    low, high = quoted(text, r"For the draft model and EAGLE it is the largest of three losses in this run "
                             r"\(× ([\d.]+)–([\d.]+)\)")
    chain_calls = [float(by_drafter[d]["× target call"]) for d in ("draft model", "EAGLE")]
    assert (float(low), float(high)) == (min(chain_calls), max(chain_calls))
    low, high = quoted(text, r"next\s+to acceptance and the prefill of these short outputs "
                             r"\(each × ([\d.]+)–([\d.]+) here\)")
    model_call, = quoted(text, r"the draft model's factor of ([\d.]+) puts a call over 5 tokens")
    assert model_call == by_drafter["draft model"]["× target call"]
    shared = [float(by_drafter[d][f]) for d in ("draft model", "EAGLE") for f in ("× acceptance", "× prefill")]
    assert (float(low), float(high)) == (min(shared), max(shared))
    assert max(chain_calls) < min(shared)                                  # the largest of the three losses


def test_lesson_12_adaptive_lands_between_the_fixed_settings(arena):
    says(prose("12_drafter_arena"), "On our pair it lands between the fixed settings, below the best fixed N.")
    fixed = [float(r["measured ×"]) for r in arena["adaptive"] if r["drafter"] == "draft model"]
    adaptive = next(float(r["measured ×"]) for r in arena["adaptive"] if r["drafter"] == "draft model, adaptive N")
    assert min(fixed) < adaptive < max(fixed)
    formula, measured = quoted(arena["out"], r"best N for alpha = [\d.]+, c = [\d.]+: (\d+); "
                                             r"measured best fixed N: (\d+)")
    says(prose("12_drafter_arena"), "the measured best can land a step or two either side of the formula's")
    assert abs(int(formula) - int(measured)) <= 2


@pytest.fixture(scope="module")
def lesson_13():
    out = printed("13_when_not_to_speculate")
    temps = {}
    for line in out.splitlines():
        m = re.match(r"(draft model|EAGLE)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            name, T, rate, per_call, alpha, c, verify = m.groups()
            temps[(name, float(T))] = {"rate": float(rate), "alpha": alpha, "verify": float(verify)}
    assert len(temps) == 10, "lesson 13's temperature table changed shape"
    return {"text": prose("13_when_not_to_speculate"), "out": out, "temps": temps}


def test_lesson_13_short_outputs(lesson_13):
    text, out = lesson_13["text"], lesson_13["out"]
    (setup,) = quoted(out, r"set-up ([\d.]+) ms; per token")
    assert "its set-up, under a millisecond (measured below" in text and float(setup) < 1
    assert abs(float(quoted(text, r"repays its set-up \(about ([\d.]+) ms\)")[0]) - float(setup)) <= 0.05
    crossover, at15, at128, prefill = quoted(out, r"speculation first won at (\d+) new tokens; at 15 it was ([\d.]+)x, "
                                                  r"at 128 ([\d.]+)x \(prefill (\d+) ms")
    level, ahead, q15, q128, q_prefill = quoted(text, r"level at (\d+) new token, ahead from (\d+), ([\d.]+)× at 15 "
                                                      r"against ([\d.]+)× at 128 \(the shared (\d+) ms")
    assert ahead == crossover and int(level) == int(crossover) - 1
    assert (q15, q128, q_prefill) == (f"{float(at15):.1f}", f"{float(at128):.1f}", prefill)
    ar, spec = quoted(out, r"per token: autoregressive ([\d.]+) ms, speculative ([\d.]+) ms")
    (saving,) = quoted(text, r"at the measured saving of about ([\d.]+) ms per token")
    assert abs(float(saving) - (float(ar) - float(spec))) <= 0.25
    assert quoted(text, r"a 50 ms set-up needs about (\d+) tokens") == quoted(out, r"set-up of  50 ms would need "
                                                                                   r"(\d+) tokens")


def test_picker_and_lesson_14_quote_lesson_13_on_short_outputs(lesson_13):
    from lab.picker import SHORT_OUTPUT_MEASURED

    crossover, at15 = quoted(lesson_13["out"], r"speculation first won at (\d+) new tokens; at 15 it was ([\d.]+)x")
    assert SHORT_OUTPUT_MEASURED == {"first_win_tokens": int(crossover), "speedup_at_15": float(at15)}
    assert quoted(prose("14_choosing_a_strategy"), r"lesson 13 found our pair already ahead at (\d+) tokens") == (
        crossover,)


def test_lesson_13_temperature(lesson_13):
    text, out, temps = lesson_13["text"], lesson_13["out"], lesson_13["temps"]
    change, t_from, t_to = quoted(text, r"up to ([\d.]+) \(EAGLE, T = ([\d.]+) → ([\d.]+);")
    grid = sorted({T for _, T in temps})
    steps = {(name, a, b): abs(temps[(name, b)]["rate"] - temps[(name, a)]["rate"])
             for name in ("draft model", "EAGLE") for a, b in zip(grid, grid[1:])}
    biggest = max(steps, key=steps.get)
    assert biggest == ("EAGLE", float(t_from), float(t_to)) and f"{steps[biggest]:.2f}" == change
    assert all(temps[(name, 2.0)]["rate"] >= temps[(name, 0.0)]["rate"] for name in ("draft model", "EAGLE"))
    low, high = quoted(text, r"the `verify` column, between about ([\d.]+) and ([\d.]+)")
    verify = [v["verify"] for v in temps.values()]
    assert abs(float(low) - min(verify)) <= 0.05 and abs(float(high) - max(verify)) <= 0.05
    rate = {T: temps[("draft model", T)]["rate"] for T in grid}
    says(text, "a dip at T = 1–1.5, back up at T = 2")
    assert max(rate[1.0], rate[1.5]) < rate[0.0] < rate[2.0]
    all0, all2 = quoted(text, r'the "all positions" curve: ([\d.]+) at T = 0, ([\d.]+) at T = 2\)')
    assert (all0, all2) == quoted(out, r"all positions\s+T=0: ([\d.]+) .* T=2: ([\d.]+)")
    total, confident = quoted(out, r"(\d+) positions; confident: (\d+)")
    says(text, "Only about a third of our small pair's positions are confident")
    assert 0.25 <= int(confident) / int(total) <= 0.42
    at0, at15 = quoted(out, r"predicted speedup ([\d.]+)x at T = 0, [\d.]+x at T = 1, ([\d.]+)x at T = 1.5")
    says(text, "would lose about a third of its predicted speedup between T = 0 and T = 1.5")
    assert 0.25 <= 1 - float(at15) / float(at0) <= 0.42


def test_lesson_13_summary_quotes_the_printed_list(lesson_13):
    text, out = lesson_13["text"], lesson_13["out"]
    printed_alpha = quoted(out, r"draft model α ([\d.]+) at T = 0, [\d.]+ at T = 1, ([\d.]+) at T = 2")
    assert quoted(text, r"draft model α ≈ ([\d.]+) at T = 0 and ([\d.]+) at T = 2\)") == printed_alpha
    assert quoted(text, r"exact acceptance fell from ([\d.]+) at T = 0 to ([\d.]+) at T = 1.5") == quoted(
        out, r"on confident positions α fell from ([\d.]+) \(T = 0\) to ([\d.]+) \(T = 1.5\)")
    gb, more_cache, seqs, seqs_none = quoted(out, r"costs (\d+) GB and (\d+)% more KV cache per token: (\d+) "
                                                  r"instead of (\d+) sequences")
    assert quoted(text, r"(\d+) GB and \+(\d+) % cache per token, about a third fewer") == (gb, more_cache)
    assert 0.28 <= 1 - int(seqs) / int(seqs_none) <= 0.4
    b5, b1 = quoted(out, r"predicts a loss from batch (\d+) \(α 0.75, N = 5\) or (\d+) \(N = 1\)")
    q5, q1 = quoted(text, r"N = 5 lose from a batch of about (\d+); N = 1 holds out to about (\d+)")
    assert abs(int(q5) - int(b5)) <= 5 and abs(int(q1) - int(b1)) <= 5
    assert quoted(text, r"On this CPU the estimate fell below 1 at batch (\d+)\.") == quoted(
        out, r"on this CPU the estimated gain fell below 1 at batch (\d+)\.")


def test_lesson_14_quotes_lesson_13(lesson_13):
    printed_alpha = quoted(lesson_13["out"], r"draft model α ([\d.]+) at T = 0, [\d.]+ at T = 1, ([\d.]+) at T = 2")
    assert quoted(prose("14_choosing_a_strategy"), r"lesson 13 measured α ([\d.]+) at T = 0 and ([\d.]+) at "
                                                   r"T = 2") == printed_alpha


def test_lesson_10_medusa_against_its_chain_and_the_draft_model():
    text, out = prose("10_medusa_tree_attention"), printed("10_medusa_tree_attention")
    per_call = {name.strip(): value for name, value in re.findall(r"^(.+?)\s+([\d.]+) tokens per target call$", out,
                                                                     re.M)}
    chain, tree = quoted(text, r"even their top-1 chain does well here \(([\d.]+) tokens per\s+call\), and the tree "
                               r"adds more \(([\d.]+)\)")
    assert (chain, tree) == (per_call["Medusa chain (top-1)"], per_call["Medusa tree (14 nodes)"])
    (draft,) = quoted(text, r"yields fewer tokens per call than Medusa's tree here\s+\(([\d.]+)\)")
    assert draft == per_call["draft model (1x128), N=3"]
    assert float(draft) < float(per_call["Medusa tree (14 nodes)"])
    # the heads' card, which the lesson prints: own-text accuracy far above the corpus accuracy for every head
    own = re.findall(r"^Medusa head \d\s+t\+\d\s+([\d.]+)\s+[\d.]+\s+([\d.]+)", out, re.M)
    assert len(own) == 3 and all(float(o) > 2 * float(c) for o, c in own), own


def test_lesson_11_eagle_chain_against_medusa():
    text, out = prose("11_eagle_feature_drafts"), printed("11_eagle_feature_drafts")
    rows = {m[0].strip(): m[2] for m in re.findall(r"^(.+?)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+, ", out, re.M)}
    chain4, medusa, chain3 = quoted(text, r"EAGLE's N = 4 chain edges past it in tokens per call \(([\d.]+) against "
                                          r"([\d.]+) here\), though it is one level deeper; at Medusa's depth \(N = 3\) "
                                          r"the chain gets ([\d.]+)")
    assert (chain4, medusa, chain3) == (rows["EAGLE, chain N=4"], rows["Medusa, tree (14 nodes)"],
                                        rows["EAGLE, chain N=3"])
    assert float(chain4) > float(medusa) > float(chain3), rows


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
