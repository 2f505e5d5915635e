"""An arena run read in words (lesson 12): the sentences a careful reader of :func:`lab.arena.format_arena`'s table
would write, built from the run's own rows.

The arena's numbers move every time it is run (the machine, its load, a change to the decode loop), and a reading
written by hand goes stale with them. :func:`read_arena` writes the reading from the rows instead, so lesson 12 can
show the committed run's reading and the learner's own with the same code: the baseline check, which drafter leads
on each kind of request, the methods set against their nearest neighbours (EAGLE-3 against EAGLE, the parallel
draft against the draft model it came from, the MTP heads against EAGLE) and temperature. :func:`read_factors` says
where the predicted speedup went, :func:`read_adaptive` reads :func:`lab.arena.compare_adaptive`'s result. Every
part reads the temperatures the run has and leaves out what it did not measure (a task, a temperature, a drafter).

The wording follows the numbers: "ahead", "level" and "behind" are chosen from the values
(:func:`lab.metrics.compare_speedups`, level within :data:`lab.metrics.LEVEL`), and a
value is compared as it is printed (two decimals), so the text never calls 0.25 "lower" than 0.25. The explanations
(why copying wins on copy/edit requests, why Medusa's tree is dear on a CPU) stay in the lesson's prose; this module
only says what was measured.
"""
from __future__ import annotations

from numbers import Real
from statistics import mean

from lab.arena import DRAFTER_LABELS, check_result
from lab.metrics import LEVEL, beyond_tokens_per_call, compare_speedups
from lab.words import in_words

__all__ = ["read_arena", "read_baselines", "read_kinds", "read_methods", "read_temperature", "read_factors",
           "read_adaptive", "read_tree_shapes", "TASK_LABELS", "LEVEL"]

TASK_LABELS = {"chat": "chat", "code": "code", "structured": "structured output", "copy_edit": "copy/edit",
               "multi_turn": "multi-turn edits", "agent": "agent loops", "prose": "prose", "copy": "copy"}
"""How the reading names each task kind of :data:`lab.prompts.CHAT_TASKS`, :data:`lab.prompts.CONVERSATION_TASKS`
and :data:`lab.prompts.ARENA_TASKS`."""
# how running text names a drafter; the others go by their table label
_NAMES = {"model": "the draft model", "parallel": "the parallel draft", "mtp": "the MTP heads",
          "lookahead": "Lookahead", "early-exit": "early exit"}
_PLURAL = {"mtp"}  # "the MTP heads were", "their α"
_FACTOR_LABELS = {"acceptance": "acceptance", "drafting": "drafting", "target_call": "the target call",
                  "verification": "verification", "loop": "the loop", "prefill": "the prefill"}


def _x(value, digits=2):
    return f"{value:.{digits}f}"


def _r(value):
    """A value as the reading prints it: compare these, never the raw floats."""
    return round(value, 2)


def _span(values, digits=2, unit=""):
    values = list(values)
    low, high = _x(min(values), digits), _x(max(values), digits)
    return f"{low}{unit}" if low == high else f"{low}–{high}{unit}"


def _label(kind):
    return _NAMES.get(kind) or DRAFTER_LABELS.get(kind, kind)


def _was(kind):
    return "were" if kind in _PLURAL else "was"


def _its(kind):
    return "their" if kind in _PLURAL else "its"


def _cap(text):
    return text[:1].upper() + text[1:]


def _signed(value):
    return f"{value if round(value, 2) else 0.0:+.2f}".replace("-", "−")   # never "−0.00"


def _task(task):
    return TASK_LABELS.get(task, task)


_LOOKUP_DRAFTERS = ("ngram", "suffix")
"""The drafters that run no model and add no token to the target's call: a step in which they propose nothing is an
autoregressive step plus a lookup."""


def _drafter_rows(result, task=None, temperature=None):
    return [r for r in result["rows"] if r["drafter"] != "autoregressive"
            and (task is None or r["task"] == task) and (temperature is None or r["temperature"] == temperature)]


def _cells(result):
    """(task, T) pairs in the order the run made them."""
    seen = []
    for r in result["rows"]:
        if (r["task"], r["temperature"]) not in seen:
            seen.append((r["task"], r["temperature"]))
    return seen


def _temperatures(result):
    return sorted({T for _, T in _cells(result)})


def _row(result, task, temperature, kind):
    return next((r for r in result["rows"] if (r["task"], r["temperature"], r["drafter"]) == (task, temperature, kind)),
                None)


def _where(row):
    return f"{_label(row['drafter'])} on {_task(row['task'])} at T = {row['temperature']:g}"


def _speed(row):
    return row["measured_speedup"]


def _calls(row):
    return row["tokens_per_target_call"]


def _level(a, b):
    return compare_speedups(a, b) == "level with"


def _largest_loss(row):
    """The efficiency factor that took most of the row's predicted speedup (its smallest factor); None when no
    factor is below 1.00 as printed (the row lost nothing)."""
    factor = min(row["efficiency_factors"], key=row["efficiency_factors"].get)
    return factor if _r(row["efficiency_factors"][factor]) < 1 else None


def _flag(value):
    """A value near 1 printed so that its side of 1 shows (1.006, not 1.01 or 1.00)."""
    return _x(value, 3) if abs(value - 1) < 0.01 else _x(value)


def read_baselines(result: dict, adaptive: dict | None = None) -> str:
    """The baseline check, in Markdown: the spread of the cells' autoregressive step time, the rows whose timing
    shows a flattered cell (a target call over several tokens timed below a one-token step, a decode-only efficiency
    above 1, a speedup beyond its tokens per target call by :func:`lab.metrics.beyond_tokens_per_call`),
    a lookup drafter (prompt lookup, suffix decoding) that proposed nothing yet decoded behind 1× (uneven timing),
    efficiencies above 1 that only the shared prefill explains, and, given ``adaptive``
    (:func:`lab.arena.compare_adaptive` on the same task), the draft model timed twice.

    ``result``: :func:`lab.arena.run_arena`'s return value. Raises ``ValueError`` when it has no autoregressive
    row."""
    check_result(result)
    base = {(r["task"], r["temperature"]): r["ar_ms_per_step"] for r in result["rows"]
            if r["drafter"] == "autoregressive"}
    if not base:
        raise ValueError("result holds no autoregressive row: pass run_arena(...)'s return value")
    fast, slow = min(base, key=base.get), max(base, key=base.get)
    parts = []
    if _x(base[fast], 1) != _x(base[slow], 1):
        parts.append(f"One autoregressive step took {_span(base.values(), 1)} ms depending on the cell "
                     f"(`ar_ms_per_step`): {_x(base[fast], 1)} ms on {_task(fast[0])} at T = {fast[1]:g}, "
                     f"{_x(base[slow], 1)} ms on {_task(slow[0])} at T = {slow[1]:g}.")
    else:
        parts.append(f"One autoregressive step took {_x(base[fast], 1)} ms in every cell (`ar_ms_per_step`).")
    rows = _drafter_rows(result)
    # a row that drafted nothing made one-token target calls, priced against a one-token step: 0.999 or 1.001 there
    # is noise, not a call over several tokens that cost too little (its timing has the check below)
    drafted = [r for r in rows if r.get("acceptance_rate", 0.0) is not None]
    below = [r for r in drafted if r["target_call_cost"] < 1]
    over = [r for r in drafted if r["decode_efficiency"] > 1]
    beyond = [r for r in rows if beyond_tokens_per_call(_speed(r), _calls(r))]
    signs = []
    if below:
        signs.append("a target call over several tokens timed below a one-token step in "
                     + in_words(f"{_where(r)} ({_flag(r['target_call_cost'])})" for r in below))
    if over:
        signs.append("a decode-only efficiency above 1 in "
                     + in_words(f"{_where(r)} ({_flag(r['decode_efficiency'])})" for r in over))
    if beyond:
        signs.append("a speedup above the tokens per target call beyond the course's level rule in "
                     + in_words(f"{_where(r)} ({_x(_speed(r))}× on {_x(_calls(r))})" for r in beyond))
    if signs:
        parts.append("Signs of a cell whose baseline ran slow or whose drafter ran fast: " + "; ".join(signs) + ".")
    else:
        parts.append("No row shows a sign of a flattered cell: every target call over several tokens cost at least "
                     "a one-token step, no decode-only efficiency is above 1 and no speedup is above its tokens per "
                     "target call beyond the course's level rule.")
    # Prompt lookup and suffix decoding run no model and add no token to the target's call: a run in which they
    # proposed nothing decoded autoregressively with a lookup per step, so its decode-only speedup (the prefill and
    # the drafter's reset left out) should be level with 1x. Behind it, one of the two runs timed unevenly.
    idle = [r for r in rows if r["drafter"] in _LOOKUP_DRAFTERS and "acceptance_rate" in r
            and r["acceptance_rate"] is None and _positive(r.get("decode_speedup"))
            and compare_speedups(r["decode_speedup"], 1.0) == "behind"]
    if idle:
        one = len(idle) == 1
        parts.append(("A sign of uneven timing: " if one else "Signs of uneven timing: ")
                     + in_words(f"{_where(r)} (decode-only {_x(r['decode_speedup'])}×)" for r in idle)
                     + (" proposed nothing, so " + ("its decode steps were" if one else "their decode steps were")
                        + " autoregressive ones with a lookup each, yet "
                        + ("its" if one else "their") + " decode-only speedup came out behind 1× beyond the "
                        "course's level rule: that run or its cell's baseline was timed on a busier moment; time "
                        "it again."))
    pulled = [r for r in rows if r["efficiency"] > 1 and r["decode_efficiency"] <= 1]
    if pulled:
        slowdowns = all(_speed(r) < 1 for r in pulled)
        kinds = sorted({_label(r["drafter"]) for r in pulled})
        parts.append(f"{len(pulled)} {'efficiency is' if len(pulled) == 1 else 'efficiencies are'} above 1 only "
                     f"with the prefill counted ({in_words(kinds)}, at most "
                     f"{_flag(max(r['efficiency'] for r in pulled))}"
                     + ("; all of them slowdowns, which the prefill both runs share pulls towards 1×)." if slowdowns
                        else ")."))
    again = _retimed(result, adaptive)
    if again is not None:
        first, second = again
        change = second["ar_ms_per_step"] / first["ar_ms_per_step"] - 1
        mine, theirs = result.get("settings", {}), (adaptive.get("settings") or {})
        same = all(theirs.get(a) == mine.get(b) for a, b in (("prompts", "prompts_per_task"), ("pair", "pair"),
                                                             ("max_new_tokens", "max_new_tokens"), ("seed", "seed")))
        requests = ("the same requests" if same else
                    f"its own requests ({theirs.get('prompts')} × {theirs.get('max_new_tokens')} tokens)")
        parts.append(f"The adaptive comparison timed the draft model again at N = {second['n_draft']} on {requests} "
                     f"({_task(first['task'])}, T = {first['temperature']:g}), with "
                     f"{_x(_calls(second))} tokens per target call against {_x(_calls(first))}: its baseline step "
                     f"took {_x(second['ar_ms_per_step'], 1)} ms against {_x(first['ar_ms_per_step'], 1)} ms "
                     f"({100 * change:+.0f} %), its speedup {_x(_speed(second))}× against {_x(_speed(first))}×.")
    return " ".join(parts)


def _retimed(result, adaptive):
    """(the arena's draft-model row, the adaptive comparison's row of the same N, task and T), or None."""
    if not adaptive:
        return None
    settings = adaptive.get("settings", {})
    for second in adaptive["rows"]:
        if second["drafter"] != "model":
            continue
        first = _row(result, settings.get("task"), second["temperature"], "model")
        if first is not None and first["n_draft"] == second["n_draft"]:
            return first, second
    return None


def _with_alpha(row):
    return f"{_label(row['drafter'])} {_x(_calls(row))}" + (f" (α {_x(row['alpha'])})" if row["alpha"] is not None
                                                             else "")


def read_kinds(result: dict, temperature: float | None = None) -> str:
    """One Markdown bullet per task kind at ``temperature`` (default: the run's lowest): the two drafters with the
    most tokens per target call (with their α), the fastest, and, where a drafter with fewer tokens per call was
    faster by more than :data:`LEVEL`, the drafting time and target-call cost of the two. Empty when the run has no
    cell at that temperature."""
    check_result(result)
    if temperature is None:
        temperature = _temperatures(result)[0] if result["rows"] else 0.0
    bullets = []
    for task, T in _cells(result):
        rows = _drafter_rows(result, task, T)
        if T != temperature or not rows:
            continue
        by_calls = sorted(rows, key=_calls, reverse=True)
        by_speed = sorted(rows, key=_speed, reverse=True)
        top, fastest = by_calls[0], by_speed[0]
        text = (f"- **{_task(task)}**: most tokens per target call: "
                + ", ".join(_with_alpha(r) for r in by_calls[:2]))
        if len(by_speed) > 1 and _level(_speed(fastest), _speed(by_speed[1])):
            text += (f"; fastest, level: {_label(fastest['drafter'])} at {_x(_speed(fastest))}× and "
                     f"{_label(by_speed[1]['drafter'])} at {_x(_speed(by_speed[1]))}×")
        else:
            text += f"; fastest: {_label(fastest['drafter'])} at {_x(_speed(fastest))}×"
            if len(by_speed) > 1:
                text += f", then {_label(by_speed[1]['drafter'])} at {_x(_speed(by_speed[1]))}×"
        text += f" (all: {_span(_speed(r) for r in rows)}×)."
        if _r(_calls(fastest)) < _r(_calls(top)) and compare_speedups(_speed(fastest), _speed(top)) == "ahead of":
            text += (f" {_cap(_label(fastest['drafter']))} {_was(fastest['drafter'])} faster than "
                     f"{_label(top['drafter'])} on fewer tokens per call ({_x(_calls(fastest))} against "
                     f"{_x(_calls(top))}): drafting "
                     f"{_x(fastest['draft_ms_per_step'], 1)} ms a step against {_x(top['draft_ms_per_step'], 1)} ms, "
                     f"target calls of {_x(fastest['target_call_cost'])} one-token steps against "
                     f"{_x(top['target_call_cost'])}.")
        if _speed(fastest) < 1 or _level(_speed(fastest), 1.0):
            text += " No drafter was clearly faster than autoregressive decoding here."
        bullets.append(text)
    return "\n".join(bullets)


def _pair_up(result, kind, other, temperature):
    """Tasks at ``temperature`` where both drafters ran with an α, with their rows."""
    out = []
    for task, T in _cells(result):
        a, b = _row(result, task, T, kind), _row(result, task, T, other)
        if T == temperature and a is not None and b is not None and a["alpha"] is not None \
                and b["alpha"] is not None:
            out.append((task, a, b))
    return out


def _against(result, kind, other, what, temperature):
    """A bullet setting drafter ``kind`` against ``other`` at ``temperature`` (α, tokens per call, speed) and
    counting the cells, at every temperature of the run, where its α is higher. None when they never ran side by
    side there."""
    pairs = _pair_up(result, kind, other, temperature)
    if not pairs:
        return None
    name, them = _label(kind), _label(other)
    gain = {t: _r(a["alpha"]) - _r(b["alpha"]) for t, a, b in pairs}
    up = [t for t in gain if gain[t] > 0]
    down = [t for t in gain if gain[t] < 0]
    same = [t for t in gain if gain[t] == 0]
    clauses = []
    if up:
        clauses.append(f"higher on {in_words(_task(t) for t in up)} (by {_span(gain[t] for t in up)})")
    if down:
        clauses.append(f"lower on {in_words(_task(t) for t in down)} (by {_span(-gain[t] for t in down)})")
    if same:
        clauses.append(f"equal on {in_words(_task(t) for t in same)}")
    text = (f"- **{_cap(name)} against {them}** ({what}). At T = {temperature:g} {_its(kind)} α is "
            + "; ".join(clauses)
            + (f"; {_signed(mean(gain.values()))} on average over {len(gain)} kinds." if len(gain) > 1 else "."))
    every = [(a, b) for T in _temperatures(result) for _, a, b in _pair_up(result, kind, other, T)]
    if len(every) > len(pairs):
        higher = sum(_r(a["alpha"]) > _r(b["alpha"]) for a, b in every)
        lower = sum(_r(a["alpha"]) < _r(b["alpha"]) for a, b in every)
        text += (f" Over all {len(every)} cells (every temperature) {_its(kind)} α is higher in {higher} and lower in "
                 f"{lower}.")
    more = sum(_r(_calls(a)) > _r(_calls(b)) for _, a, b in pairs)
    text += (f" Tokens per target call: more on {more} of {len(pairs)} kind{'s' if len(pairs) != 1 else ''} ("
             + "; ".join(f"{_task(t)} {_x(_calls(a))} against {_x(_calls(b))}" for t, a, b in pairs) + ").")
    verdict = {}
    for t, a, b in pairs:
        verdict.setdefault(compare_speedups(_speed(a), _speed(b)), []).append(t)
    text += " Speed: " + "; ".join(
        f"{word} {them} on {in_words(_task(t) for t in tasks)}" for word, tasks in verdict.items()) + "."
    return text


def read_methods(result: dict, temperature: float | None = None) -> str:
    """Markdown bullets, at ``temperature`` (default: the run's lowest), that set methods against their nearest
    neighbours where the run has both: EAGLE-3 against EAGLE, the parallel draft against the draft model (with
    drafting time), the MTP heads against EAGLE (with their tokens-per-call ceiling); then early exit (c, the
    drafting cost of N drafts, α) and Medusa (efficiency rank and target-call cost) over the whole run."""
    check_result(result)
    if temperature is None:
        temperature = _temperatures(result)[0] if result["rows"] else 0.0
    bullets = []
    for kind, other, what in (("eagle3", "eagle", "fused low, middle and high layers against the last layer"),
                              ("parallel", "model", "N drafts from one forward against N forwards"),
                              ("mtp", "eagle", "a chain of MTP modules against an autoregressive feature draft")):
        text = _against(result, kind, other, what, temperature)
        if text is None:
            continue
        pairs = _pair_up(result, kind, other, temperature)
        if kind == "parallel":
            ratio = [a["draft_ms_per_step"] / b["draft_ms_per_step"] for _, a, b in pairs if b["draft_ms_per_step"]]
            text += (f" Drafting took {_span((a['draft_ms_per_step'] for _, a, _ in pairs), 1)} ms a step against "
                     f"{_span((b['draft_ms_per_step'] for _, _, b in pairs), 1)} ms"
                     + (f" ({_span(ratio)} of the draft model's)." if ratio else "."))
        if kind == "mtp":
            depth = max(len(a.get("per_position_acceptance") or ()) for _, a, _ in pairs)   # the chain's length
            made = _span(_calls(a) for _, a, _ in pairs)
            text += (f" With a chain of {depth}, a call yields at most {depth + 1} tokens; they made {made}."
                     if depth else f" They made {made} tokens per call.")
        bullets.append(text)
    early = [r for r in _drafter_rows(result) if r["drafter"] == "early-exit" and r["cost_ratio"] is not None]
    if early:
        n = early[0]["n_draft"]
        alphas = [r["alpha"] for r in early if r["alpha"] is not None]
        bullets.append(f"- **Early exit**: {_span(_speed(r) for r in early)}× in every cell; c "
                       f"{_span(r['cost_ratio'] for r in early)}, so N = {n} drafts cost "
                       f"{_span((n * r['cost_ratio'] for r in early), 1)} autoregressive steps of drafting alone"
                       + (f", and α at most {_x(max(alphas))}" if alphas else "")
                       + f"; efficiency {_span(r['efficiency'] for r in early)}.")
    medusa = [r for r in _drafter_rows(result) if r["drafter"] == "medusa"]
    if medusa:
        cells = [(r["task"], r["temperature"]) for r in medusa]
        lowest = sum(min(_drafter_rows(result, *c), key=lambda r: r["efficiency"])["drafter"] == "medusa"
                     for c in cells)
        cold = [r for r in medusa if r["temperature"] == temperature] or medusa
        text = (f"- **Medusa**: efficiency {_span(r['efficiency'] for r in medusa)}, the lowest of its cell in "
                f"{lowest} of {len(cells)} cell{'s' if len(cells) != 1 else ''}; its tree's target call cost "
                f"{_span(r['target_call_cost'] for r in cold)} one-token steps at T = {cold[0]['temperature']:g}")
        model = [r for r in _drafter_rows(result, temperature=cold[0]["temperature"]) if r["drafter"] == "model"]
        if model:
            text += f", the draft model's chain {_span(r['target_call_cost'] for r in model)}"
        bullets.append(text + ".")
    return "\n".join(bullets)


def read_temperature(result: dict) -> str:
    """A Markdown bullet on what sampling did to α between the run's lowest and highest temperature: each drafter's
    mean α over the kinds it ran at both, largest fall first, and the three largest single falls. Empty when the
    run has one temperature."""
    check_result(result)
    temps = _temperatures(result)
    if len(temps) < 2:
        return ""
    cold, hot = temps[0], temps[-1]
    pairs = {}
    for task, T in _cells(result):
        if T != cold:
            continue
        for row in _drafter_rows(result, task, cold):
            warm = _row(result, task, hot, row["drafter"])
            if warm is not None and row["alpha"] is not None and warm["alpha"] is not None:
                pairs.setdefault(row["drafter"], []).append((task, row["alpha"], warm["alpha"]))
    if not pairs:
        return ""
    means = {k: (mean(a for _, a, _ in v), mean(b for _, _, b in v)) for k, v in pairs.items()}
    order = sorted(means, key=lambda k: means[k][1] - means[k][0])
    counts = {k: len(v) for k, v in pairs.items()}
    kinds = max(counts.values())
    over = f"the {kinds} kinds" if kinds > 1 else "the kind"
    if len(set(counts.values())) > 1:  # a drafter with α at both temperatures on fewer kinds: say on how many
        over = f"the kinds each drafter has α at both temperatures on ({kinds} unless said)"
    text = (f"- **From T = {cold:g} to T = {hot:g}**, α averaged over {over}: "
            + ", ".join(f"{_label(k)} {_x(means[k][0])} → {_x(means[k][1])}"
                        + ("" if counts[k] == kinds else f" ({counts[k]} kind{'s' if counts[k] > 1 else ''})")
                        for k in order) + ".")
    single = sorted(((a - b, k, t, a, b) for k, v in pairs.items() for t, a, b in v), reverse=True)
    falls = [f"{_label(k)} on {_task(t)} ({_x(a)} → {_x(b)})" for d, k, t, a, b in single[:3] if _r(a) > _r(b)]
    if falls:
        text += " The largest single falls: " + in_words(falls) + "."
    return text


def read_factors(result: dict, task: str | None = None, temperature: float | None = None) -> str:
    """Where the predicted speedup went, in Markdown: for ``task`` at ``temperature`` (defaults: the run's first
    task, its lowest temperature), each drafter's largest efficiency factor (:data:`lab.arena.EFFICIENCY_FACTORS`),
    the spread of the small ones, and over the whole run the rows whose largest loss is not the target call. Raises
    ``ValueError`` when the cell is not in the run."""
    check_result(result)
    if not _cells(result):
        raise ValueError("result holds no rows: pass run_arena(...)'s return value")
    task = task if task is not None else _cells(result)[0][0]
    temperature = temperature if temperature is not None else _temperatures(result)[0]
    rows = _drafter_rows(result, task, temperature)
    if not rows:
        raise ValueError(f"task {task!r} at T = {temperature:g} is not in this arena run")
    by_factor = {}
    for r in sorted(rows, key=lambda r: min(r["efficiency_factors"].values())):
        by_factor.setdefault(_largest_loss(r), []).append(r)
    lossless = by_factor.pop(None, [])
    parts = [f"{_FACTOR_LABELS[factor]} for " + in_words(
        f"{_label(r['drafter'])} (× {_x(r['efficiency_factors'][factor])})" for r in group)
        for factor, group in by_factor.items()]
    text = (f"On {_task(task)} at T = {temperature:g}, the largest loss is " + "; ".join(parts) + "." if parts
            else f"On {_task(task)} at T = {temperature:g}, no drafter lost anything to a factor.")
    if lossless and parts:
        text += (f" {_cap(in_words(_label(r['drafter']) for r in lossless))} lost nothing: every factor at least "
                 "1.00.")
    for factor in ("verification", "loop", "acceptance"):
        if factor not in by_factor:
            text += f" × {_FACTOR_LABELS[factor]}: {_span(r['efficiency_factors'][factor] for r in rows)}."
    chains = [r for r in rows if r["drafter"] in ("model", "eagle", "eagle3") and r["n_draft"]]
    if chains:
        text += (" Over N + 1 = " + in_words(sorted({str(r["n_draft"] + 1) for r in chains})) + " tokens, the target "
                 "call cost " + in_words(f"{_x(r['target_call_cost'])} one-token steps for {_label(r['drafter'])}"
                                      if i == 0 else f"{_x(r['target_call_cost'])} for {_label(r['drafter'])}"
                                      for i, r in enumerate(chains)) + ".")
    every = [r for r in _drafter_rows(result) if _largest_loss(r) is not None]  # the rows that lost something
    elsewhere = [r for r in every if _largest_loss(r) != "target_call"]
    if elsewhere:
        kinds = {}
        for r in elsewhere:
            kinds.setdefault(_largest_loss(r), []).append(r)
        text += (f" Over the whole run, {len(elsewhere)} of {len(every)} rows "
                 f"{'loses' if len(elsewhere) == 1 else 'lose'} most to something other than the "
                 "target call: " + "; ".join(f"{_FACTOR_LABELS[f]} for " + in_words(_where(r) for r in g)
                                              if len(g) <= 3 else f"{_FACTOR_LABELS[f]} in {len(g)} ("
                                              + in_words(sorted({_label(r['drafter']) for r in g})) + ")"
                                              for f, g in kinds.items()) + ".")
    elif every:
        text += f" In every one of the run's {len(every)} rows that lost speed the target call is the largest loss."
    return text


def read_adaptive(adaptive: dict) -> str:
    """:func:`lab.arena.compare_adaptive`'s result read in Markdown: tokens per target call by N, the measured best
    N and the fixed N level with it (within :data:`LEVEL`), the formula's best among the measured N (lesson 06's
    predicted speedup from the N = 4 row's α and c) against them, and where the adaptive rule landed among the fixed
    N; headed by a warning when its settings say the machine was busy. Raises ``ValueError`` when it has no fixed-N
    rows."""
    check_result(adaptive, "adaptive", "compare_adaptive(...)")
    from lab.metrics import predicted_speedup

    fixed = sorted((r for r in adaptive["rows"] if r["drafter"] == "model"), key=lambda r: r["n_draft"])
    if not fixed:
        raise ValueError("adaptive holds no fixed-N draft-model rows: pass compare_adaptive(...)'s return value")
    auto = next((r for r in adaptive["rows"] if r["drafter"] == "adaptive"), None)
    best = max(fixed, key=_speed)
    near = [r["n_draft"] for r in fixed if r is not best and _level(_speed(r), _speed(best))]
    ref = next((r for r in fixed if r["n_draft"] == 4), fixed[len(fixed) // 2])
    text = ("Tokens per target call by N: " + ", ".join(f"{r['n_draft']}: {_x(_calls(r))}" for r in fixed)
            + f"; speedup {_span(_speed(r) for r in fixed)}×, fastest at N = {best['n_draft']} ({_x(_speed(best))}×"
            + (f"; N = {in_words(map(str, near))} level with it, within {LEVEL:.0%})" if near else ")") + ".")
    if ref["alpha"] is not None and ref["cost_ratio"] is not None:
        # the formula's best among the N that were measured: it cannot be checked at an N that never ran
        formula = max((r["n_draft"] for r in fixed),
                      key=lambda n: predicted_speedup(min(ref["alpha"], 1.0), n, ref["cost_ratio"]))
        agree = ("agreeing" if formula == best["n_draft"] else "level with the fastest" if formula in near
                 else "not the fastest or level with it")
        text += (f" The formula's best of these N for α = {_x(ref['alpha'])}, c = {_x(ref['cost_ratio'], 3)} (the "
                 f"N = {ref['n_draft']} row): {formula}, {agree}.")
    if auto is not None:
        speeds = [_speed(r) for r in fixed]
        slowest = min(fixed, key=_speed)
        if _level(_speed(auto), max(speeds)):
            where = f"level with the fastest fixed N (within {LEVEL:.0%})"
        elif _speed(auto) > max(speeds):
            where = "above every fixed N"
            # Two things can make it faster: more tokens per call, or cheaper steps (fewer drafts a step). Against
            # a fixed N it beats on neither, only the clock is left.
            mean_n = auto.get("mean_n_draft")
            if mean_n is not None and mean_n != mean_n:  # NaN: as unknown
                mean_n = None
            calls = _calls(auto)
            # compared as printed (two decimals for calls, one for the mean N), never as raw floats
            matches = [r for r in fixed if calls is not None and _calls(r) is not None and _r(calls) <= _r(_calls(r))]
            noise = [r for r in matches if mean_n is not None and round(mean_n, 1) >= r["n_draft"]]
            if noise:
                names = in_words(str(r["n_draft"]) for r in noise)
                where += (f", though with no more tokens per target call than N = {names} ({_x(calls)} against "
                          f"{in_words(_x(_calls(r)) for r in noise)}) and at least as many drafts a step (mean N "
                          f"{mean_n:.1f}): a gap neither explains is timing noise, which a longer run (more prompts "
                          "and tokens) would settle")
            elif matches:
                names = in_words(str(r["n_draft"]) for r in matches)
                if mean_n is None:  # its drafts a step were not recorded: the calls alone do not explain the gap
                    where += (f", though with no more tokens per target call than N = {names}: a longer run (more "
                              "prompts and tokens) would show whether the gap holds")
                else:
                    where += (f", with no more tokens per target call than N = {names} but fewer drafts a step "
                              f"(mean N {mean_n:.1f}): cheaper steps, which may explain part of the gap")
        elif _level(_speed(auto), min(speeds)):
            where = f"level with the slowest fixed N (N = {slowest['n_draft']}), {_x(max(speeds) - _speed(auto))}× " \
                    "below the fastest"
        elif _speed(auto) < min(speeds):
            where = "below every fixed N"
        else:
            where = f"between the fixed settings, {_x(max(speeds) - _speed(auto))}× below the fastest"
        text += f" The adaptive rule: {_x(_speed(auto))}×, {where}."
    return _busy_header(adaptive) + text


def read_arena(run: dict) -> str:
    """An arena run read in Markdown, section by section: the baseline (:func:`read_baselines`, with the draft model
    timed twice when the adaptive comparison is there), each kind of request at the run's lowest temperature
    (:func:`read_kinds`), the methods against their neighbours (:func:`read_methods`) and temperature
    (:func:`read_temperature`). Where the predicted speedup went (:func:`read_factors`) and the adaptive comparison
    (:func:`read_adaptive`) are read on their own: lesson 12 shows them in their own sections.

    ``run``: :func:`lab.arena.run_arena`'s result, or ``{"arena": ..., "adaptive": ...}`` as
    :func:`lab.arena.committed_arena` returns it. Raises ``ValueError`` for anything else."""
    if isinstance(run, dict) and "rows" in run and "settings" in run:
        result, adaptive = run, None
    elif isinstance(run, dict) and isinstance(run.get("arena"), dict):
        result, adaptive = run["arena"], run.get("adaptive")
    else:
        raise ValueError("run must be run_arena(...)'s result or committed_arena(...)'s dict")
    temps = _temperatures(result)
    cold = temps[0] if temps else 0.0
    sections = [("The baseline", read_baselines(result, adaptive)),
                (f"Which drafter, where (T = {cold:g})", read_kinds(result, cold)),
                ("Methods against their neighbours", read_methods(result, cold)),
                ("Temperature", read_temperature(result))]
    text = "\n\n".join(f"**{title}.**\n\n{body}" if body.startswith("-") else f"**{title}.** {body}"
                       for title, body in sections if body)
    return _busy_header(result) + text


def _busy_header(result: dict) -> str:
    """The warning a reading starts with when ``result``'s settings say the machine was busy (its comparisons of
    timings stand on a busy machine's numbers), else ""."""
    settings = result.get("settings") or {}
    if not settings.get("busy"):
        return ""
    return f"**Read with care: the machine was busy during this run.** {settings.get('load_note', '')}\n\n"


_RUN_KEYS = ("date", "dtype", "threads", "prompts", "max_new_tokens")


def _shape_rows(rows, kind):
    """``(baseline, chain, trees, medusa)``: the autoregressive row, the EAGLE-3 chain's row, its tree rows and
    Medusa's row of one kind of request in a ``tools/tree_shapes.py`` run (rows named as that tool names them), each
    checked for a method name, a speedup > 0 and a count of new tokens."""
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"the {kind!r} entry must hold 'rows', a list of dicts, got {type(rows).__name__}")
    for row in rows:
        method, speedup, tokens = row.get("method"), row.get("speedup"), row.get("new_tokens")
        if not isinstance(method, str) or not _positive(speedup) or not _positive(tokens):
            raise ValueError(f"every {kind!r} row needs a 'method' (str), a 'speedup' > 0 and 'new_tokens' > 0, got "
                             f"{row}")
    baseline = [r for r in rows if r["method"] == "autoregressive"]
    chain = [r for r in rows if r["method"].startswith("EAGLE-3, chain")]
    trees = [r for r in rows if r["method"].startswith("EAGLE-3, ") and not r["method"].startswith("EAGLE-3, chain")]
    medusa = [r for r in rows if r["method"].startswith("Medusa")]
    if len(baseline) != 1 or len(chain) != 1 or not trees or len(medusa) != 1:
        raise ValueError(f"the {kind!r} rows must hold one autoregressive row, one EAGLE-3 chain, EAGLE-3 trees and "
                         f"one Medusa row (methods named as tools/tree_shapes.py names them), got "
                         f"{[r['method'] for r in rows]}")
    return baseline[0], chain[0], trees, medusa[0]


def _positive(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and value > 0 and value != float("inf")


def read_tree_shapes(run: dict) -> str:
    """The committed timing of draft-tree shapes (:func:`lab.arena.committed_tree_shapes`, ``tools/tree_shapes.py``)
    read in Markdown, for lesson 12, whose arena drafts EAGLE-3 as a chain and Medusa as a tree: per kind of request
    a table of the EAGLE-3 draft's speedup as a chain, on its fastest tree (every shape tied for fastest named), and
    Medusa's (tokens per target call beside each); then what the fastest tree adds to the chain, where the chain and
    the tree stand against Medusa ("ahead", "level", "behind": :func:`lab.metrics.compare_speedups`), and how many
    answers equal autoregressive decoding's (a bfloat16 run's near-ties can round the other way). A row that wrote
    another number of tokens than autoregressive decoding (its answers parted and ran longer or shorter) timed other
    text: it is named, and a tree of that kind is not a candidate for the fastest. Raises ``ValueError`` for
    anything but that run's dict (its settings, a kind's rows: an autoregressive row, an EAGLE-3 chain, trees and a
    Medusa row, each with a method, a speedup > 0 and new tokens)."""
    kinds = run.get("kinds") if isinstance(run, dict) else None
    if not isinstance(kinds, dict) or not kinds or any(key not in run for key in _RUN_KEYS):
        raise ValueError("run must be lab.arena.committed_tree_shapes(...)'s dict (the JSON of tools/tree_shapes.py, "
                         f"with {', '.join(_RUN_KEYS)} and a non-empty 'kinds')")

    def cell(row):
        calls = row.get("tokens_per_target_call")
        return f"{_x(row['speedup'])}× ({_x(calls) if _positive(calls) else 'n/a'})"

    table, gains, chain_vs, tree_vs, other_text = [], [], {}, {}, []
    same = {"chain": [0, 0], "tree": [0, 0], "medusa": [0, 0]}  # answers equal to autoregressive decoding's, of
    chain_name = None
    for kind, entry in kinds.items():
        baseline, chain, trees, medusa = _shape_rows(entry.get("rows") if isinstance(entry, dict) else None, kind)
        chain_name = chain_name or chain["method"].removeprefix("EAGLE-3, ")
        for row in (chain, *trees, medusa):
            if row["new_tokens"] != baseline["new_tokens"]:
                other_text.append(f"{row['method']} on {_task(kind)} ({row['new_tokens']} tokens against "
                                  f"{baseline['new_tokens']})")
        fair = [r for r in trees if r["new_tokens"] == baseline["new_tokens"]] or trees
        top = max(_r(r["speedup"]) for r in fair)
        fastest = [r for r in fair if _r(r["speedup"]) == top]
        best = fastest[0]
        names = " and ".join(r["method"].removeprefix("EAGLE-3, ") for r in fastest)
        table.append(f"| {_task(kind)} | {cell(chain)} | {cell(best)}: {names} | {cell(medusa)} |")
        gains.append(f"{_signed(top - _r(chain['speedup']))}× on {_task(kind)}")
        chain_vs.setdefault(compare_speedups(chain["speedup"], medusa["speedup"]), []).append(_task(kind))
        tree_vs.setdefault(compare_speedups(best["speedup"], medusa["speedup"]), []).append(_task(kind))
        for key, row in (("chain", chain), ("tree", best), ("medusa", medusa)):
            if isinstance(row.get("identical_outputs"), int) and isinstance(run["prompts"], int):
                same[key][0] += row["identical_outputs"]
                same[key][1] += run["prompts"]

    def standing(found):
        return ", ".join(f"{where} it on {in_words(found[where])}" for where in ("ahead of", "level with", "behind")
                         if where in found)

    dtype = str(run["dtype"]).removeprefix("torch.")
    machine = f"on {run['processor']}, " if isinstance(run.get("processor"), str) and run["processor"] else ""
    lines = [f"Greedy, {run['prompts']} held-out requests per kind × {run['max_new_tokens']} new tokens, {dtype}, "
             f"{run['threads']} threads, {machine}{run['date']}. Speedup over autoregressive decoding (tokens per "
             "target call):", "",
             f"| requests | EAGLE-3, {chain_name} | EAGLE-3, fastest tree | Medusa's tree |", "|---|---|---|---|",
             *table, ""]
    text = (f"The fastest tree over the chain: {in_words(gains)}. Against Medusa's tree, EAGLE-3's chain is "
            f"{standing(chain_vs)}. EAGLE-3's fastest tree is {standing(tree_vs)}. The fastest of several shapes "
            "timed on the same requests is the best of several noisy timings, so it flatters the tree a little.")
    if other_text:
        one = len(other_text) == 1
        text += (f" Not the same work: {in_words(other_text)} wrote another number of tokens than autoregressive "
                 f"decoding ({'its answers' if one else 'their answers'} parted from it), so "
                 f"{'its speedup times' if one else 'their speedups time'} other text; such a tree is taken as the "
                 "fastest only where every tree of its kind is one.")
    if all(total for _, total in same.values()):
        text += (" Answers equal to autoregressive decoding's, over the kinds: the chain "
                 f"{same['chain'][0]} of {same['chain'][1]}, the fastest trees {same['tree'][0]} of "
                 f"{same['tree'][1]}, Medusa {same['medusa'][0]} of {same['medusa'][1]} (in {dtype} a near-tie can "
                 "round the other way when the target scores a block, so the methods were timed on partly "
                 "different text; in float32 every answer is equal).")
    return "\n".join(lines + [text])
