"""Goodput against batch size × N: where batched speculation stops paying, measured (layer 5).

Goodput is committed tokens per second over the whole batch (Leviathan-style speedups are per sequence; a server
is paid in tokens over all its requests). At batch 1 a decoding step is memory-bound and verifying N drafts costs
little more than one token; as the batch grows the target's forward becomes compute-bound, each row's N + 1
verified positions cost real work, and rejected drafts are work thrown away. vLLM's maintainers measured this on
Qwen2.5-7B (A40): k = 4 gave +67 % at batch 1, and at batch 32 target-only decoding (868 tokens/s) beat every
speculative setting (735 at best); vLLM now varies N with the batch size (``num_speculative_tokens_per_batch_size``).
:func:`measure_goodput` times :func:`lab.batched.generate_batch` at every batch size × N, interleaved, with the
machine's load recorded (:class:`lab.load_meter.LoadMeter`), and derives the crossover batch size and the
per-batch-size N schedule in vLLM's format (:func:`lab.costs.draft_length_schedule` writes the modelled one).

Every batch size serves the same queue of requests with **continuous batching** (:func:`lab.batched.generate_batch`
with ``max_rows`` = B): B requests run at once, and a finished one's place goes to the next waiting request before
the next step, as an engine's scheduler does. Without it, a batch steps until its slowest row is done, rows that
accepted more drafts save no forwards, and the measured crossover comes early (the committed run of 2026-12-03
02:52, before continuous batching, showed that). The queue holds twice the largest batch size by default, so the
largest batches refill too; its end still drains with fewer than B rows, alike for every N.

The drafters draft one row at a time (:mod:`lab.batched`), so a draft model's cost here grows with the batch,
where an engine runs one batched draft forward per draft position: read a draft model's crossover as an early bound.
``settings["draft_share"]`` gives the share of wall time spent drafting per cell, so a reader can see how much.
"""
from __future__ import annotations

import time

import torch

from lab.load_meter import LoadMeter
from lab.models import synchronize
from lab.validation import MAX_LENGTH, check_int

__all__ = ["BATCH_SIZES", "N_VALUES", "measure_goodput", "best_n_per_batch", "crossover_batch",
           "batch_schedule", "format_goodput", "batch_prompts", "committed_goodput", "COMMITTED_GOODPUT_FILE"]

COMMITTED_GOODPUT_FILE = "goodput.json"
"""The file name of a pair's committed goodput run in ``lab/assets/<pair>/``."""

BATCH_SIZES = (1, 2, 4, 8, 16)
"""The batch sizes :func:`measure_goodput` times by default."""
N_VALUES = (0, 2, 4)
"""The draft lengths it times by default; 0 is autoregressive decoding (no drafter)."""


def batch_prompts(encoded: list, batch: int) -> list:
    """The ``batch`` prompts of one batch: the first ``batch`` of ``encoded`` (token-id lists), cycling through them
    again when there are fewer. Raises ``ValueError`` for an empty ``encoded`` or ``batch`` outside [1,
    :data:`lab.validation.MAX_LENGTH`]."""
    batch = check_int("batch", batch, 1, MAX_LENGTH)
    if not encoded:
        raise ValueError("encoded must hold at least one prompt's token ids")
    return [list(encoded[i % len(encoded)]) for i in range(batch)]


def measure_goodput(pair, encoded, *, batch_sizes=BATCH_SIZES, n_values=N_VALUES, drafter: str = "model",
                    max_new_tokens: int = 32, rounds: int = 1, temperature: float = 0.0, seed: int = 0,
                    requests: int | None = None) -> dict:
    """Goodput (committed tokens/s over the batch) of :func:`lab.batched.generate_batch` for every batch size B of
    ``batch_sizes`` × every N of ``n_values`` (0 = autoregressive; otherwise ``drafter``, a name of
    :data:`lab.registry.DRAFTERS`, built with N per row), on ``encoded`` (prompts' token ids), stopping rows at
    ``pair.eos_token_id``. Every batch size serves the same queue of ``requests`` requests (default: twice the
    largest batch size; :func:`batch_prompts` of ``encoded``) with continuous batching: at most B at once, a
    waiting request taking a finished one's place (``max_rows`` of :func:`lab.batched.generate_batch`), so that a
    change in goodput comes from the batch size and not from which prompts a batch happened to hold.

    Timing: every N once on a short warm-up (3 prompts, 2 rows at once); then ``rounds`` rounds, each visiting the
    batch sizes in turn and, within a batch size, every N in an order rotating from one batch size and round to the
    next, so that a change of load hits every method alike; all inside a :class:`lab.load_meter.LoadMeter`. Goodput
    is a cell's committed tokens ÷ its wall seconds summed over the rounds (the whole queue: every prefill included;
    drafters are built before the clock starts).

    Returns ``{"rows": [...], "best": {B: best N}, "crossover": int or None, "schedule": [[first, last, N], ...],
    "load": LoadMeter.summary(), "note": LoadMeter.note(), "settings": {...}}``. A row: ``batch``, ``n_draft``,
    ``new_tokens``, ``seconds``, ``goodput`` (tokens/s), ``vs_autoregressive`` (÷ N = 0's goodput at the same B;
    None without an N = 0), ``acceptance_rate``, ``tokens_per_target_call`` (tokens the decode steps committed per
    row per forward, the prefills' first tokens left out as in :func:`lab.batched.generate_batch`; None when no
    decode step ran),
    ``target_calls``, ``drafted_tokens``, ``draft_share`` (drafting's share of the wall time). ``crossover``:
    :func:`crossover_batch`; ``schedule``: :func:`batch_schedule` (None when no batch size was compared: no N > 0
    drafted anything). Raises ``ValueError`` naming the argument for empty or non-integer ``batch_sizes`` /
    ``n_values``, ``n_values`` without 0 (the baseline) or without an N > 0 (nothing to compare), an unknown
    ``drafter``, ``max_new_tokens`` or ``rounds`` < 1, no prompts in ``encoded``, fewer ``requests`` than the
    largest batch size (that batch would never fill) or more than :data:`lab.validation.MAX_LENGTH` (a batch size
    above half of it, by the default of twice the largest), or prompts that do not fit the target's context; the
    registry's errors for a drafter the pair cannot have."""
    from lab.batched import generate_batch
    from lab.models import processor_name
    from lab.prompts import context_problem
    from lab.registry import DRAFTERS, make_drafter

    for name, values in (("batch_sizes", batch_sizes), ("n_values", n_values)):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise ValueError(f"{name} must be a list of integers, got {type(values).__name__} {values!r}")
    batch_sizes = sorted({check_int("batch_sizes", b, 1, MAX_LENGTH // 2) for b in batch_sizes})  # 2 B requests
    n_values = sorted({check_int("n_values", n, 0) for n in n_values})
    if not batch_sizes or not n_values:
        raise ValueError("batch_sizes and n_values must each name at least one value")
    if n_values[0] != 0 or len(n_values) < 2:
        raise ValueError(f"n_values must hold 0 (autoregressive decoding, the baseline) and at least one N > 0 to "
                         f"compare with it, got {n_values}")
    if drafter not in DRAFTERS:
        raise ValueError(f"drafter must be one of {', '.join(DRAFTERS)}, got {drafter!r}")
    max_new_tokens, rounds = check_int("max_new_tokens", max_new_tokens, 1), check_int("rounds", rounds, 1)
    if not encoded:
        raise ValueError("encoded must hold at least one prompt's token ids")
    if requests is None:
        requests = 2 * batch_sizes[-1]
    elif check_int("requests", requests, 1, MAX_LENGTH) < batch_sizes[-1]:  # B rows would never run at once
        raise ValueError(f"requests must be an integer >= {batch_sizes[-1]} (the largest batch size), got {requests}")
    problem = context_problem(pair, encoded, max_new_tokens)
    if problem:
        raise ValueError(f"max_new_tokens: {problem}")

    def run(prompts, n, tokens, rows):
        drafters = None if n == 0 else [make_drafter(drafter, pair, n) for _ in prompts]
        synchronize(pair.device)
        start = time.perf_counter()
        out = generate_batch(pair.target, prompts, drafters=drafters, max_new_tokens=tokens, temperature=temperature,
                             seed=seed, eos_token_id=pair.eos_token_id, max_rows=rows)
        synchronize(pair.device)
        return out, time.perf_counter() - start

    for n in n_values:  # warm-up: first-call allocations, lazy imports
        run(batch_prompts(encoded, 3), n, 4, 2)
    queue = batch_prompts(encoded, requests)
    cells = {(b, n): {"tokens": 0, "decoded": 0, "seconds": 0.0, "calls": 0, "row_steps": 0, "drafted": 0,
                      "accepted": 0, "draft_ms": 0.0} for b in batch_sizes for n in n_values}
    turn = 0
    with LoadMeter() as meter:
        for _ in range(rounds):
            for b in batch_sizes:
                k = turn % len(n_values)
                for n in n_values[k:] + n_values[:k]:
                    cell = cells[(b, n)]
                    out, seconds = run(queue, n, max_new_tokens, b)
                    cell["tokens"] += out.stats["new_tokens"]
                    cell["decoded"] += out.stats["new_tokens"] - out.stats["batch"]  # first tokens: the prefills'
                    cell["seconds"] += seconds
                    cell["calls"] += out.stats["target_calls"]
                    cell["row_steps"] += out.stats["row_steps"]
                    cell["drafted"] += out.stats["drafted_tokens"]
                    cell["accepted"] += out.stats["accepted_tokens"]
                    cell["draft_ms"] += sum(s.draft_ms for row in out.rows for s in row.steps)
                turn += 1
    rows = []
    for (b, n), cell in cells.items():
        rows.append({"batch": b, "n_draft": n, "new_tokens": cell["tokens"], "seconds": round(cell["seconds"], 3),
                     "goodput": round(cell["tokens"] / cell["seconds"], 2),
                     "acceptance_rate": round(cell["accepted"] / cell["drafted"], 3) if cell["drafted"] else None,
                     "tokens_per_target_call": (round(cell["decoded"] / cell["row_steps"], 3) if cell["row_steps"]
                                                else None),
                     "target_calls": cell["calls"], "drafted_tokens": cell["drafted"],
                     "draft_share": round(cell["draft_ms"] / 1000 / cell["seconds"], 3)})
    base = {row["batch"]: row["goodput"] for row in rows if row["n_draft"] == 0}
    for row in rows:
        row["vs_autoregressive"] = round(row["goodput"] / base[row["batch"]], 3) if row["batch"] in base else None
    best = best_n_per_batch(rows)
    settings = {"pair": pair.name, "device": str(pair.device), "processor": processor_name(pair.device),
                "dtype": str(pair.dtype).replace("torch.", ""), "threads": torch.get_num_threads(),
                "drafter": drafter, "batch_sizes": batch_sizes, "n_values": n_values, "prompts": len(encoded),
                "requests": requests, "scheduling": "continuous batching",
                "max_new_tokens": max_new_tokens, "rounds": rounds, "temperature": temperature,
                "seed": seed}
    return {"rows": rows, "best": best, "crossover": crossover_batch(best),
            "schedule": batch_schedule(best) if best else None,
            "load": meter.summary(), "note": meter.note(), "settings": settings}


def best_n_per_batch(rows) -> dict:
    """``{batch: its best N}`` from :func:`measure_goodput`'s rows (dicts with ``batch``, ``n_draft``,
    ``goodput``): the N > 0 with the highest goodput when that goodput is ahead of N = 0's by the course's rule
    (:func:`lab.compare.compare_speedups`: more than :data:`lab.compare.LEVEL` apart), else N = 0 (no speculation
    when it buys nothing measurable). Only finite goodputs above 0 count, and only batch sizes with such an N = 0
    row and another beside it: a best N that was compared with nothing would read as speculation paying. An N > 0
    row that drafted nothing (``drafted_tokens`` 0: answers too short to draft, say) or accepted nothing
    (``acceptance_rate`` 0) is left out too: its steps emit one token a target call, as autoregressive decoding
    does, so only noise could pick it (an instructor's 8-token run chose N = 2 at 1.02× with no draft accepted).
    Raises ``TypeError`` naming ``rows`` when it is not a list of dicts holding ``batch`` and ``n_draft`` (the bad
    row shown)."""
    import math

    if not isinstance(rows, (list, tuple)):
        raise TypeError(f"rows must be measure_goodput(...)['rows'], a list of dicts, got {type(rows).__name__}")
    bad = next((r for r in rows if not (isinstance(r, dict) and {"batch", "n_draft"} <= r.keys())), None)
    if bad is not None:
        raise TypeError(f"rows must be measure_goodput(...)['rows']: dicts holding batch and n_draft, got "
                        f"{str(bad)[:60]}")

    from lab.compare import compare_speedups

    finite = [r for r in rows if isinstance(r.get("goodput"), (int, float)) and math.isfinite(r["goodput"])
              and r["goodput"] > 0
              and (r["n_draft"] == 0 or (r.get("drafted_tokens") != 0 and r.get("acceptance_rate") != 0))]
    baseline = {r["batch"]: r["goodput"] for r in finite if r["n_draft"] == 0}
    compared = set(baseline) & {r["batch"] for r in finite if r["n_draft"]}
    best = {b: (0, baseline[b]) for b in compared}
    for row in sorted((r for r in finite if r["batch"] in compared and r["n_draft"]),
                      key=lambda r: (r["batch"], r["n_draft"])):
        b = row["batch"]
        if compare_speedups(row["goodput"], baseline[b]) == "ahead of" and row["goodput"] > best[b][1]:
            best[b] = (row["n_draft"], row["goodput"])
    return {b: n for b, (n, _) in sorted(best.items())}


def _check_best(best) -> None:
    if not isinstance(best, dict):  # a list of sizes raised an IndexError in batch_schedule
        raise TypeError(f"best must be best_n_per_batch(...)'s dict {{batch: N}}, got {type(best).__name__}")


def crossover_batch(best: dict) -> int | None:
    """The smallest measured batch size whose best N is 0 (``best``: :func:`best_n_per_batch`, which holds only
    batch sizes where N = 0 was compared with an N > 0): where no N > 0 beats autoregressive decoding any more. None
    when speculation won at every batch size compared. Raises ``TypeError`` when ``best`` is not a dict."""
    _check_best(best)
    return next((b for b in sorted(best) if best[b] == 0), None)


def batch_schedule(best: dict, max_batch: int | None = None) -> list:
    """The measured best N per batch size as vLLM's ``num_speculative_tokens_per_batch_size``: ranges
    ``[[first_batch, last_batch, N], ...]`` (the format of :func:`lab.costs.draft_length_schedule`, N = 0 for no
    speculation). A measured batch size B covers the batch sizes from B up to the next one measured; the last
    covers up to ``max_batch`` (default: itself; past the last range vLLM keeps the last N). Neighbouring ranges
    with the same N merge. Raises ``ValueError`` for an empty ``best`` or a ``max_batch`` below the largest B,
    ``TypeError`` when ``best`` is not a dict."""
    _check_best(best)
    if not best:
        raise ValueError("best must map at least one batch size to its N")
    sizes = sorted(best)
    max_batch = sizes[-1] if max_batch is None else check_int("max_batch", max_batch, sizes[-1])
    ranges: list = []
    for i, b in enumerate(sizes):
        last = sizes[i + 1] - 1 if i + 1 < len(sizes) else max_batch
        if ranges and ranges[-1][2] == best[b]:
            ranges[-1][1] = last
        else:
            ranges.append([b, last, best[b]])
    return ranges


def format_goodput(result: dict) -> str:
    """:func:`measure_goodput`'s result as a settings line, a Markdown table (one row per batch size, goodput per
    N and × autoregressive), the crossover, the schedule as vLLM's setting and the load note. Raises ``TypeError``
    when ``result`` is not such a dict (one with ``settings`` and ``rows``)."""
    from lab.registry import OWN_DRAFT

    if not (isinstance(result, dict) and isinstance(result.get("settings"), dict) and "rows" in result):
        raise TypeError(f"result must be measure_goodput(...)'s dict, with settings and rows, got "
                        f"{type(result).__name__}")

    s = result["settings"]
    ns = s["n_values"]
    own = s["drafter"] in OWN_DRAFT  # it sets its own draft: its column is the drafter, not an N

    def column(n):
        return "N = 0 tokens/s" if n == 0 else (f"{s['drafter']} tokens/s" if own else f"N = {n} tokens/s")

    head = " | ".join(column(n) + ("" if n == 0 else " (× N = 0, acceptance rate)") for n in ns)
    lines = [f"goodput (committed tokens/s over the batch), pair {s['pair']} on {s['device']} ({s['processor']}, "
             f"{s['dtype']}, {s['threads']} thread{'s' * (s['threads'] != 1)}), drafter {s['drafter']} drafting per "
             "row, "
             + (f"the same {s['requests']} request{'s' * (s['requests'] != 1)}" if s.get("requests") else "")
             + (f" ({s['task']})" if s.get("task") else "")
             + (" at every batch size" if s.get("requests") else "")
             + (f" B, served with {s['scheduling']} (at most B at once)" if s.get("scheduling") else "")
             + f", {s['max_new_tokens']} new tokens per row, T = {s['temperature']:g}, {s['rounds']} "
             f"round{'s' * (s['rounds'] != 1)}, batch sizes and N interleaved", "",
             f"| batch | {head} | {'best' if own else 'best N'} |", "|---" * (len(ns) + 2) + "|"]
    cells = {(row["batch"], row["n_draft"]): row for row in result["rows"]}
    for b in s["batch_sizes"]:
        parts = []
        for n in ns:
            row = cells[(b, n)]
            text = f"{row['goodput']:.1f}"
            if n and row["vs_autoregressive"] is not None:
                rate = "-" if row["acceptance_rate"] is None else f"{row['acceptance_rate']:.2f}"
                text += f" ({row['vs_autoregressive']:.2f}×, {rate})"
            parts.append(text)
        best = result["best"].get(b, result["best"].get(str(b)))  # JSON keys are strings
        shown = "n/a" if best is None else (s["drafter"] if best else "N = 0") if own else best
        lines.append(f"| {b} | " + " | ".join(parts) + f" | {shown} |")
    if not result["best"]:  # no batch size where an N > 0 that drafted ran beside N = 0
        return "\n".join([*lines, "", "no best N, crossover or schedule: no N > 0 had a draft accepted beside a "
                           "timed N = 0 (answers too short to draft? raise --max-new-tokens)", "", result["note"]])
    crossover = result["crossover"]
    beaten = f"{s['drafter']} does not beat N = 0" if own else "no N > 0 beats N = 0"
    lines += ["", f"crossover batch size (smallest measured B where {beaten}): "
              + (str(crossover) if crossover is not None else f"none up to {s['batch_sizes'][-1]}"),
              (f"N schedule: none, {s['drafter']} sets its own draft" if own else
               "N schedule, as vLLM's --speculative-config setting: "
               + f'{{"num_speculative_tokens_per_batch_size": {result["schedule"]}}}'), "", result["note"]]
    return "\n".join(lines)


def committed_goodput(pair_name: str) -> dict | None:
    """The goodput run committed for the bundled pair ``pair_name`` (``lab/assets/<pair>/goodput.json``):
    ``{"command": str, "date": str, "goodput": measure_goodput(...)}``, the last as printed by ``python -m lab bench
    --batch --json`` (its ``best`` keys are strings there; its settings name the processor, dtype and threads, and
    its ``load`` how busy the machine was). None for a pair without one. Raises ``ValueError`` naming the file when
    it is not that JSON."""
    from lab.assets import committed_json

    return committed_json(pair_name, COMMITTED_GOODPUT_FILE, lambda run: isinstance(run, dict) and
                          isinstance(run.get("goodput"), dict) and "rows" in run["goodput"],
                          "{'command', 'date', 'goodput': the JSON of python -m lab bench --batch --json}")
