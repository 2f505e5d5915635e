"""The picker's wording: a :class:`lab.picker.decision.Decision` as the sentences of a recommendation — its
reasons (why, one sentence each, in the order the rules reached them), the source of its speedup range, and the
engine notes (where vLLM or transformers cannot express the choice exactly).

Nothing here decides: every branch reads a field of the decision or of the workload.
"""
from __future__ import annotations

from lab.compare import beyond_tokens_per_call, compare_speedups
from lab.picker.decision import Decision
from lab.picker.engines import ENGINE_LABELS, served_methods
from lab.picker.feasibility import obstacle_text
from lab.picker.load import LOAD_ALPHA, LOAD_COST_CUT, LOAD_COST_RATIO, LOAD_RIDGE, load_break_even, saturated_gain, \
    unloaded_gain
from lab.picker.memory import MEDUSA_HEADS, MEMORY_NEEDED_GB
from lab.picker.substitutes import no_substitute_note
from lab.picker.tables import (ARENA_ALPHA, ARENA_CHAT_PER_CALL, ARENA_CHAT_SPEEDUPS, ARENA_CONVERSATION_NGRAM_SPEEDUPS,
                               ARENA_RUN, ARENA_SEEDED_NGRAM, ARENA_SUFFIX_PER_CALL, ARENA_SUFFIX_SPEEDUPS,
                               COPY_DEFAULTS,
                               LOOKAHEAD_SETTINGS,
                               METHOD_LABELS, MTP_ACCEPTANCE, MTP_REPORT, MTP_SPEEDUP, PARALLEL_MEASURED,
                               PARALLEL_MEASURED_REAL,
                               PARD_VLLM_TABLE, SAMPLING_EPS, SAMPLING_WARN_TEMPERATURE, SEED_000, SEED_002,
                               STRATEGY_BY_METHOD, WORKLOAD_BY_TASK, method_phrase, workload_row)
from lab.words import in_words

__all__ = ["reasons_for", "source_for", "basis_source", "notes_for", "obstacle_text", "memory_reasons",
           "served_memory_reasons", "engine_notes", "greedy_reason"]

_PROSE = ("chat", "long_text")  # the tasks where prompt lookup and Lookahead are rated by lesson 12's chat runs


def _versus(ours: float, theirs: float) -> str:
    """``"ahead of"``, ``"level with"`` or ``"behind"``: one measured speedup against another as printed (two
    decimals), by the course's one rule (:func:`lab.compare.compare_speedups`: level within 3 % of the larger, the
    spread of one drafter timed twice in lesson 12's runs)."""
    return compare_speedups(round(ours, 2), round(theirs, 2))


def _suffix_on_wall_time() -> str:
    """Suffix decoding against prompt lookup on wall time in the committed run's four conversation cells, worded
    from the numbers by :func:`_versus`; while it is not ahead in every cell, the sentence says that the case for
    it rests on the paper's long agent traces, which the run does not measure."""
    cells = [(task, t, ARENA_SUFFIX_SPEEDUPS[(task, t)], ARENA_CONVERSATION_NGRAM_SPEEDUPS[(task, t)])
             for task in ("multi_turn", "agent") for t in (0, 1)]
    words = [_versus(ours, lookup) for _, _, ours, lookup in cells]
    listed = "; ".join(f"{task.replace('_', '-')} {'greedy' if t == 0 else 'T = 1'} {ours:.2f}× against "
                       f"{lookup:.2f}× ({word.split()[0]})"
                       for (task, t, ours, lookup), word in zip(cells, words))
    ahead = words.count("ahead of")
    if ahead == len(cells):
        return f"On wall time the same run has it ahead of prompt lookup in every cell: {listed}."
    return (f"On wall time suffix decoding was ahead in {ahead or 'none'} of the {len(cells)} cells (× "
            f"autoregressive, prefill included, against prompt lookup: {listed}). The case for suffix decoding "
            "rests on long agent traces whose earlier outputs recur whole (Oliaro et al. 2024), which this short "
            "run does not measure: time both on your own traffic; where an engine lacks suffix "
            "decoding, prompt lookup is the fallback.")


def _lookup_on_chat() -> str:
    """The sentence that rates prompt lookup on prose by lesson 12's chat cells, with a warning for each temperature
    whose speedup is beyond the tokens per target call it was made with (:func:`lab.compare.beyond_tokens_per_call`:
    impossible but for timing noise, since every target call costs at least one autoregressive step)."""
    sentence = ("The seed tables rate prompt lookup only for code and JSON, so its range here is lesson 12's "
                "measurement on this course's real pair on a CPU; an open question holds little for the answer to "
                "copy, so measure it on your traffic.")
    noisy = [t for t in (0, 1)
             if beyond_tokens_per_call(ARENA_CHAT_SPEEDUPS[("ngram", t)], ARENA_CHAT_PER_CALL[("ngram", t)])]
    for t in noisy:
        when = "greedy" if t == 0 else f"at T = {t}"
        sentence += (f" Its {ARENA_CHAT_SPEEDUPS[('ngram', t)]:.2f}× {when} came with "
                     f"{ARENA_CHAT_PER_CALL[('ngram', t)]:.2f} tokens per target call, and a speedup cannot exceed "
                     "the tokens per call when every call costs at least one autoregressive step: that number is "
                     "timing noise (lesson 12 shows how to spot it), so plan for the lower end.")
    return sentence


def _alpha_change(task: str, kind: str, first: bool = True) -> str:
    """What the committed arena measured for drafter ``kind``'s α on ``task`` from T = 0 to T = 1, as a clause."""
    before, after = ARENA_ALPHA[(task, 0, kind)], ARENA_ALPHA[(task, 1, kind)]
    verb = "falling" if after < before else ("holding" if after == before else "rising")
    name = {"ngram": "prompt lookup's", "medusa": "Medusa's"}[kind]
    return (("lesson 12 measured " if first else "") + f"{name} α on {task.replace('_', '/')} {verb} from "
            f"{before:.2f} to {after:.2f} at T = 1")


def _sampled_drafts_on_chat() -> str:
    """A clause on the committed arena's chat cells for the two sampled drafts (the draft model, EAGLE), T = 0
    against T = 1, worded by what happened to their α."""
    held = [kind for kind in ("model", "eagle") if ARENA_ALPHA[("chat", 1, kind)] >= ARENA_ALPHA[("chat", 0, kind)]]
    names = {"model": "the draft model's", "eagle": "EAGLE's"}
    detail = ", ".join(f"{names[k]} {ARENA_ALPHA[('chat', 0, k)]:.2f} → {ARENA_ALPHA[('chat', 1, k)]:.2f}"
                       for k in ("model", "eagle"))
    if len(held) == 2:
        return (f", though a sampled draft can hold much of it (lesson 12: on chat requests neither the draft "
                f"model's α nor EAGLE's fell at T = 1, {detail})")
    if held:
        return f", though a sampled draft can hold some of it (lesson 12, chat requests at T = 1: {detail})"
    return f" (lesson 12, chat requests at T = 1: {detail})"


def reasons_for(decision: Decision, workload: dict) -> list:
    """The reasons for ``decision`` on ``workload`` (the dict :func:`lab.picker.recommend` builds), one sentence
    each, as a new list of str."""
    if decision.rule == "temperature":
        return [f"Sampling at T = {workload['temperature']:g} flattens the target's distribution beyond its own "
                "(T = 1), and seed lesson 000 lists high-temperature sampling among the cases not to speculate. What "
                "it does to α depends on the pair: large, confident pairs usually lose α when sampling, as the real "
                "pair's draft model did in lesson 13's committed run (α 0.53 at T = 0, 0.42 at T = 2), while a pair "
                "unsure on most "
                "positions can even gain. Measure α "
                "at your temperature before turning speculation on (lesson 13)."]
    if decision.rule == "load":
        return _under_load(decision, workload)
    return _latency_bound(decision, workload)


def source_for(decision: Decision, workload: dict) -> str:
    """Where ``decision``'s speedup range comes from, as one phrase (``Recommendation.source``)."""
    if decision.rule == "temperature":
        return f"{SEED_000}, \"When NOT to spec-decode\""
    if decision.rule == "load":
        if decision.method == "mtp":
            return (f"{MTP_REPORT} (one MTP module drafting one token: {MTP_SPEEDUP:g}× tokens per second; applied "
                    "under load by this course); 1× where lesson 13's batch-size schedule turns drafting off "
                    f"({round(saturated_gain(), 2):g}× there without it, by that model's EAGLE-like numbers)")
        if decision.method == "none":
            return (f"{SEED_000}, \"When NOT to spec-decode\"; {SEED_002}, EAGLE-3 at k = 1 (applied under load by "
                    "this course)")
        return (f"{SEED_002}, EAGLE-3 at k = 1 (a 20–54 % cost cut against a baseline the seed does not name; "
                "applied under load by this course); lesson 13's model for the top of the range, "
                f"{round(unloaded_gain(), 2):g}× on one sequence, and 1× where its batch-size schedule turns drafting "
                f"off ({round(saturated_gain(), 2):g}× there without it)")
    if decision.method == "none":
        return "no feasible method"
    return basis_source(decision.method, workload["task"], decision.basis)


def notes_for(decision: Decision, workload: dict) -> list:
    """The rules' own engine notes for ``decision`` (none for ``"none"``), as a new list of str: how vLLM and
    transformers take the method (:func:`engine_notes`) and, under load, the batch-size schedule."""
    if decision.method == "none":
        return []
    notes = engine_notes(decision.method, workload)
    if decision.rule == "load":
        notes.append("vLLM varies N with the batch size through `num_speculative_tokens_per_batch_size`, "
                     "(first batch size, last batch size, N) triples with N = 0 for no drafts; the config above "
                     "carries lesson 13's schedule for N = 1 (lab.costs.draft_length_schedule). Recompute it "
                     "with your α, c and accelerator.")
    return notes


def greedy_reason(given: float) -> str:
    """Why a temperature ``given`` below :data:`lab.picker.tables.SAMPLING_EPS` (but above 0) is taken as greedy."""
    eps = f"{SAMPLING_EPS:.0e}".replace("e-0", "e-")  # 1e-5, as vLLM writes it
    return (f"T = {given:g} is below {eps}, which vLLM treats as greedy decoding (_SAMPLING_EPS in "
            "vllm/sampling_params.py; transformers would divide the logits by it and overflow), so the picker takes "
            "it as T = 0 and every setting below is greedy.")


def memory_reasons(method: str, memory: float | None) -> list:
    """What ``method`` needs in memory against the headroom ``memory`` (GB, None = not given): a list of at most
    one sentence (none for ``"none"``)."""
    need = MEMORY_NEEDED_GB.get(method, 0.0)
    if need == 0:
        if method in ("ngram", "lookahead"):
            return ["It needs no extra parameters and no extra memory."]
        if method == "suffix":
            return ["It needs no extra parameters; its cache of earlier outputs takes memory in proportion to what "
                    "it keeps (vLLM 0.34: up to suffix_decoding_corpus_tokens, 2^20 tokens by default)."]
        return []
    lead = ("The MTP modules come with the target's checkpoint but sit on the accelerator, with a KV cache of their "
            "own, only while MTP drafts (one module: the size of an EAGLE-1/2 head). " if method == "mtp" else "")
    if memory is None:
        return [f"{lead}Memory headroom not given: this assumes the extra ~{need:g} GB fits (computed for a Llama 3 "
                "8B target in bfloat16); give it (memory_headroom_gb, or --memory-gb on the command line) to check."]
    return [f"{lead}It needs ~{need:g} GB beyond the target, within the {memory:g} GB headroom."]


def served_memory_reasons(method: str, workload: dict) -> list:
    """:func:`memory_reasons` for what is served: for ``method`` alone when every engine runs it; else one sentence
    per method served (the recommended one in this course's loop and the engines that have it, then each engine's
    substitute), each naming where it runs, so that the memory quoted is that of the settings printed."""
    served = served_methods(method, workload)
    if set(served.values()) == {method}:
        return memory_reasons(method, workload["memory_headroom_gb"])
    groups = {method: []}
    for engine, runs in served.items():
        groups.setdefault(runs, []).append(ENGINE_LABELS[engine])
    groups[method].append("this course's loop")
    out = []
    for runs, where in groups.items():
        names = in_words(where)
        if names.startswith("this"):  # the course's loop alone opens the sentence
            names = "T" + names[1:]
        if runs == "none":
            out.append(f"{names} (no speculation: every substitute is ruled out): no extra memory.")
            continue
        for sentence in memory_reasons(runs, workload["memory_headroom_gb"]):
            out.append(f"{names} ({METHOD_LABELS[runs]}): {sentence[0].lower()}{sentence[1:]}")
    return out


def engine_notes(method: str, workload: dict) -> list:
    """The rules' notes on how vLLM and transformers take ``method`` on ``workload`` (the other engines' notes, and
    vLLM's on Medusa and PARD drafts, are their own: ``Recommendation.engine_notes``), with the substitutes
    :func:`lab.picker.engines.served_methods` finds for ``workload``."""
    notes = []
    served = served_methods(method, workload)
    if method == "lookahead":
        lead = ("vLLM has no Lookahead proposer (seed lesson 000 names TensorRT-LLM's LookaheadDecoder, whose config "
                "is gone from TensorRT-LLM's LLM API, lesson 14)")
        if served["vllm"] == "ngram":
            notes.append(f"{lead}: the vLLM config is the n-gram method, its nearest draft-free relative; transformers "
                         "likewise gets prompt lookup. This course runs real Lookahead with LookaheadDrafter.")
        else:
            notes.append(f"{lead}, nor has transformers, and their nearest, prompt lookup, is ruled out here, so their "
                         "settings serve the target alone. This course runs real Lookahead with LookaheadDrafter.")
    if method == "eagle":
        # the engines name the two head kinds apart; the settings assume the EAGLE-3 heads published today
        notes.append("The settings load an EAGLE-3 head (vLLM \"eagle3\", SGLang EAGLE3, TensorRT-LLM Eagle3, "
                     "llama.cpp draft-eagle3). For an EAGLE-1/2 head use vLLM's \"eagle\", SGLang's EAGLE and "
                     "TensorRT-LLM's decoding_type Eagle; llama.cpp has no EAGLE-1/2 type (its --spec-type offers "
                     "draft-eagle3 only, common/speculative.cpp). Match your checkpoint.")
    if method == "mtp":
        notes.append("vLLM's method \"mtp\" reads the modules from the target's own checkpoint, so its config names "
                     "no model (the model-specific names such as \"deepseek_mtp\" are deprecated aliases). Asked for "
                     "more tokens than the checkpoint has modules, vLLM runs a module again for each further step "
                     "(num_mtp_modules, use_multi_module_mtp in vllm/config/speculative.py): DeepSeek-V3's single "
                     "module was trained for the next token but one only, so expect acceptance to fall beyond N = 1.")
    if method in ("eagle", "medusa"):
        name = "EAGLE" if method == "eagle" else "Medusa"
        if served["transformers"] == "none":
            notes.append(no_substitute_note("transformers", method, workload))
        else:
            nearest = "an assistant (draft) model" if served["transformers"] == "draft_model" else "prompt lookup"
            notes.append(f"transformers' generate has no {name} drafter; the transformers settings use {nearest}, "
                         "the nearest it ships.")
    if method == "draft_model":
        notes.append("transformers samples the assistant with the target's own logits processors, so the draft "
                     "temperature follows the target's; in vLLM, draft_sample_method = \"probabilistic\" is what "
                     "makes the draft sample rather than take its argmax.")
    return notes


# --- rule 2: throughput-bound ---------------------------------------------------------------------------------------
def _under_load(decision: Decision, workload: dict) -> list:
    reasons = ["At high batch sizes the accelerator is busy computing rather than waiting on memory, so "
               "verifying N extra positions per sequence is no longer free, and every rejected draft is "
               "compute taken from other requests. vLLM's guide aims speculation at medium-to-low request "
               "rates and memory-bound workloads for this reason."]
    memory = workload["memory_headroom_gb"]
    if decision.method == "mtp":
        low, high = MTP_ACCEPTANCE
        reasons.append(f"The target's own MTP modules at N = 1 are the first exception: {MTP_REPORT} drafts one token "
                       f"with its single module and reports it accepted {low * 100:.0f}–{high * 100:.0f} % of the "
                       f"time, for {MTP_SPEEDUP:g}× the tokens per second. Nothing has to be trained or downloaded, "
                       "and one drafted token wastes the least compute when it is rejected. The picker takes it "
                       "before an EAGLE head at N = 1 (seed lesson 002: 20–54 % lower cost), the other exception, "
                       "whose numbers come from another study and which needs a head trained for the target.")
        reasons.append(_schedule_reason(f"the report's {MTP_SPEEDUP:g}×") + " MTP's α of 0.85–0.9 is above "
                       "that model's 0.8, which moves the batch where drafting stops later: recompute the schedule "
                       "with your own α.")
        return reasons + _parallel_under_load(workload) + served_memory_reasons("mtp", workload)
    if decision.method == "none":
        why = obstacle_text("eagle", decision.obstacles["eagle"], memory)
        reasons.append("The one exception this course makes under load, an EAGLE head at N = 1 (seed lesson 002: "
                       f"EAGLE-3 at k = 1 cut cost by 20–54 %), is not available: {why}.")
        if decision.obstacles.get("mtp") not in (None, "no_mtp"):
            reasons.append("Nor are the target's own MTP modules, the picker's first choice under load: "
                           f"{obstacle_text('mtp', decision.obstacles['mtp'], memory)}.")
        if workload["task"] == "copy_edit":
            reasons.append("Outputs that mostly copy the input are the case to measure anyway: n-gram drafts cost "
                           "nothing and are accepted in long runs.")
        return reasons + _parallel_under_load(workload)
    reasons.append("A trained EAGLE head with N = 1 is the exception: seed lesson 002 reports that EAGLE-3 at "
                   f"k = 1, the best k, cut cost by {LOAD_COST_CUT[0]:.0%}–{LOAD_COST_CUT[1]:.0%}, while a "
                   "wrong k can raise it by 175 %. The seed does not say at what load; applying the result "
                   "here is this course's inference (lesson 13: as the batch grows, the shortest draft keeps "
                   "its gain longest). The seed does not say what the cut is measured against: as throughput over "
                   "plain decoding, 54 % would be 2.17×, more than N = 1 can give, since a target call then yields at "
                   "most 2 tokens. The range below therefore tops out at lesson 13's model of N = 1 on one sequence, "
                   f"(1 + α) / (1 + c) = {round(unloaded_gain(), 2):g}×.")
    reasons.append(_schedule_reason(f"{round(unloaded_gain(), 2):g}×"))
    if workload["target_has_mtp"] and decision.obstacles.get("mtp") not in (None, "no_mtp"):
        reasons.append("The target's own MTP modules, the picker's first choice under load, are not an option: "
                       f"{obstacle_text('mtp', decision.obstacles['mtp'], memory)}.")
    return reasons + _parallel_under_load(workload) + served_memory_reasons("eagle", workload)


def _parallel_under_load(workload: dict) -> list:
    """Why a parallel (PARD) draft the workload has is not used under load: at most one sentence."""
    if not workload.get("has_parallel_draft"):
        return []
    if "parallel" in workload["exclude"]:
        return ["The parallel (PARD) draft is ruled out (exclude), and would not be used under load anyway."]
    return ["The parallel (PARD) draft is not used under load: its one advantage is drafting N tokens in one forward "
            "instead of N, and at the N = 1 that keeps rejected drafts cheap there is only one forward either way."]


def _schedule_reason(top: str) -> str:
    """Why the config under load carries lesson 13's batch-size schedule, and what that does to the range, whose top
    is ``top`` (e.g. "1.76×")."""
    return (f"That gain does not hold at every load: lesson 13's roofline model (α {LOAD_ALPHA:g}, "
            f"c {LOAD_COST_RATIO:g}, an H100's ridge of {LOAD_RIDGE:g} FLOPs per byte) puts N = 1 "
            f"below autoregressive decoding from a batch of {load_break_even()} sequences, settling "
            f"at {round(saturated_gain(), 2):.2f}× when the accelerator is saturated. The config below therefore "
            "carries that model's batch-size schedule, which stops drafting from that batch on: with "
            "it the model never falls below 1×, so the range runs from 1× (a saturated server, "
            f"drafting off) to {top}.")


# --- rules 3 and 4: latency-bound -------------------------------------------------------------------------------
def _latency_bound(decision: Decision, workload: dict) -> list:
    task, temperature, memory = workload["task"], workload["temperature"], workload["memory_headroom_gb"]
    row, default = workload_row(task), decision.default
    if task == "copy_edit":
        reasons = ["The output mostly repeats the input, so looking up what followed the last tokens earlier in "
                   "the context drafts whole copied spans at no cost (lesson 08); the seed tables have no "
                   "copy/edit row, so the structured-JSON n-gram row stands in for it."]
    elif task == "agent":
        reasons = ["Agent loops and multi-turn edits answer with what earlier requests answered (the same tool call "
                   "with a new argument, the same function with one line changed), so suffix decoding, which drafts "
                   "from a cache of earlier outputs as well as the prompt with a tree that grows with the match "
                   "(Oliaro et al. 2024: up to 5.3× on agentic SQL), is the default; the seed tables have no such "
                   "row, so its range is this course's measurement and the structured-JSON row's k range sets N."]
    else:
        row_name = row.workload[:1].lower() + row.workload[1:]  # "structured JSON", not "structured json"
        reasons = [f"Seed lesson 002 recommends {method_phrase(row.method)} for {row_name} "
                   f"(k {row.n_range[0]}–{row.n_range[1]}, {row.speedup[0]:g}–{row.speedup[1]:g}×)."]
    if default in decision.obstacles:
        reasons.append(f"It is not an option here: {obstacle_text(default, decision.obstacles[default], memory)}.")
    if decision.method == "none":
        reasons.append("No drafting method is feasible with these constraints.")
        return reasons

    method, (low, high) = decision.method, decision.speedup
    if method == "mtp" and method != default:
        reasons.append(_mtp_reason(decision, default))
    elif method == "parallel":
        reasons += _parallel_reasons(decision, default)
    elif method != default:
        if default in decision.candidates:
            (default_low, default_high), _ = decision.candidates[default]
            reasons.append(f"{method_phrase(method, True)} is feasible and seed lesson 000 gives it {low:g}–{high:g}×, "
                           f"above the {default_low:g}–{default_high:g}× of {method_phrase(default)}.")
        else:
            reasons.append(f"The best feasible alternative is {method_phrase(method)} ({low:g}–{high:g}×; source: "
                           f"{source_for(decision, workload)}).")
    if method == "ngram" and task in _PROSE:
        if decision.lookup_over_lookahead:
            ng0, ng1, la0, la1 = (ARENA_CHAT_SPEEDUPS[(kind, t)] for kind in ("ngram", "lookahead") for t in (0, 1))
            reasons.append(
                "Of the two draft-free methods the picker takes prompt lookup over Lookahead: lesson 12's committed "
                f"run on chat requests measured it {_versus(ng0, la0)} Lookahead greedy ({ng0:.2f}× against "
                f"{la0:.2f}×) and {_versus(ng1, la1)} it at T = 1 ({ng1:.2f}× against {la1:.2f}×); it is far "
                "simpler, and vLLM, which has no Lookahead, serves prompt lookup in its place.")
        reasons.append(_lookup_on_chat())
    if method == "ngram" and task in ("code", "structured"):
        cells = [ARENA_SEEDED_NGRAM[(task, t)] for t in (0, 1)]
        reasons.append(f"That range is the seed's production-settings figure; on this course's real pair on a CPU "
                       f"({ARENA_RUN}) prompt lookup made {cells[0][0]:.2f}× greedy and {cells[1][0]:.2f}× at T = 1 on "
                       f"{task} requests ({cells[0][1]:.2f} and {cells[1][1]:.2f} tokens per target call): how much "
                       "an answer copies from its context sets the gain, so measure it on your own traffic before "
                       "counting on the seed's range.")
    if method == "suffix":
        per_call = "; ".join(f"{kind.replace('_', '-')} {ours:.2f} against {lookup:.2f}"
                             for kind, (ours, lookup) in ARENA_SUFFIX_PER_CALL.items())
        reasons.append(f"Measured on the real pair's own conversations ({ARENA_RUN}), greedy tokens per target call "
                       f"of suffix decoding against prompt lookup's (N = 4): {per_call}. Prompt lookup proposes a "
                       "fixed N from the prompt alone; suffix decoding's draft grows with the match (lesson 08).")
        reasons.append(_suffix_on_wall_time())
    if method == "eagle" and "medusa" in decision.candidates:
        reasons.append("EAGLE beats Medusa when both can be trained: its draft reads the target's features, and "
                       "seed lesson 000 puts its α (per-token acceptance) at 0.85+, against about 0.6 for a vanilla "
                       "draft and "
                       "slightly less than a good vanilla draft for Medusa; pass exclude=('eagle',) if your engine "
                       "lacks EAGLE for this target.")
    if method in ("eagle", "medusa") and "draft_model" not in decision.obstacles:
        reasons.append("The small same-family model remains the no-training option (vanilla draft).")
    if method != "parallel" and "parallel" in decision.candidates:
        (par_low, par_high), _ = decision.candidates["parallel"]
        reasons.append(f"A parallel (PARD) draft was a candidate too ({par_low:g}–{par_high:g}× on MT-Bench in the "
                       f"PARD authors' vLLM runs); {method_phrase(method)} ranks above it here.")
    if method != "mtp" and "mtp" in decision.candidates:
        (mtp_low, _), _ = decision.candidates["mtp"]
        reasons.append(f"The target's own MTP modules were a candidate too ({mtp_low:g}× at N = 1, {MTP_REPORT}); "
                       f"{method_phrase(method)} ranks above them here.")
    reasons += _unweighed(decision, workload)
    if method == "lookahead" and task in _PROSE:
        la0, ng0 = ARENA_CHAT_SPEEDUPS[("lookahead", 0)], ARENA_CHAT_SPEEDUPS[("ngram", 0)]
        la_calls, ng_calls = ARENA_CHAT_PER_CALL[("lookahead", 0)], ARENA_CHAT_PER_CALL[("ngram", 0)]
        why = ""
        if _versus(la0, ng0) == "behind" and la_calls >= ng_calls:
            why = (f", though greedy it made at least as many tokens per target call ({la_calls:.2f} against "
                   f"{ng_calls:.2f}): its target calls, which also carry the Jacobi window and the n-gram candidates, "
                   "are not free on a CPU")
        reasons.append("Measure it against prompt lookup before you commit: on the real pair lesson 12's committed "
                       f"run measured Lookahead at {la0:.2f}× on greedy chat and "
                       f"{ARENA_CHAT_SPEEDUPS[('lookahead', 1)]:.2f}× at T = 1, against prompt lookup's "
                       f"{ng0:.2f}× and {ARENA_CHAT_SPEEDUPS[('ngram', 1)]:.2f}×{why}. The 1.3–1.6× range is the "
                       "seed's, for accelerators where verifying a few more positions costs almost nothing; "
                       + ("vLLM, which has no Lookahead, serves the config below as prompt lookup."
                          if served_methods(method, workload)["vllm"] == "ngram" else
                          "no serving engine has Lookahead, and prompt lookup, which they serve in its place, is "
                          "ruled out here, so only this course's loop runs it."))
    reasons.append(_n_reason(method, decision.n_draft, row, temperature))
    if temperature > SAMPLING_WARN_TEMPERATURE:
        deterministic = method in ("ngram", "lookahead", "medusa", "suffix")
        reasons.append(f"At T = {temperature:g} (above seed lesson 002's {SAMPLING_WARN_TEMPERATURE:g}) plan for the "
                       "lower end of the range and measure α at this temperature"
                       + (": a deterministic draft is accepted with exactly the target's probability of the drafted "
                          "token, which sampling spreads over other tokens (" + _alpha_change("copy_edit", "ngram")
                          + ", " + _alpha_change("copy_edit", "medusa", first=False) + ")."
                          if deterministic else
                          ": large, confident pairs usually lose α when sampling" + _sampled_drafts_on_chat()
                          + "."))
    reasons += served_memory_reasons(method, workload)
    if method in ("draft_model", "parallel", "eagle", "mtp") and temperature > 0:
        vllm_samples = served_methods(method, workload)["vllm"] in ("draft_model", "eagle", "mtp")
        reasons.append(f"The draft samples at T = {temperature:g} too, so both distributions are sharpened or "
                       "flattened alike and the draft stays close to the distribution it is verified against (their "
                       "overlap is the acceptance probability, lesson 05)"
                       + ("; vLLM needs draft_sample_method = \"probabilistic\" for that, which the config below "
                          "sets." if vllm_samples else "."))
    return reasons


def _unweighed(decision: Decision, workload: dict) -> list:
    """Why a method the workload says it has (``target_has_mtp``, ``has_parallel_draft``) is not the choice when no
    other reason names it, so that a flag given is never dropped without a word (an instructor's ``pick --task agent
    --target-has-mtp``): an obstacle (memory, exclude); else, heads, the target's MTP modules among them, are not
    weighed where answers copy earlier text, and a parallel draft only where a draft model is (the default, or a
    fallback when the default is not feasible). A method weighed and outranked has its own line ("a candidate
    too")."""
    method, default, reasons = decision.method, decision.default, []
    copying = workload["task"] in COPY_DEFAULTS
    for flag, kind, name in (("target_has_mtp", "mtp", "The target's MTP modules were"),
                             ("has_parallel_draft", "parallel", "The parallel (PARD) draft was")):
        if not workload[flag] or method == kind or kind in decision.candidates:
            continue
        obstacle = decision.obstacles.get(kind)
        if obstacle is not None:
            why = obstacle_text(kind, obstacle, workload["memory_headroom_gb"])  # names the method itself
            reasons.append(why[0].upper() + why[1:] + ".")
        elif kind == "mtp" and copying:
            reasons.append(f"{name} not weighed: on {workload['task'].replace('_', '/')} requests the answer copies "
                           "earlier text, which a copying method drafts exactly and a head that predicts from the "
                           "target's features has to guess.")
        elif kind == "parallel":
            reasons.append(f"{name} not weighed: the picker weighs it where it would weigh a draft model of the same "
                           f"size, and here {method_phrase(default)}, the default for this workload, is feasible, so "
                           "no draft model is needed.")
    return reasons


def _parallel_card(table: dict) -> tuple:
    """A parallel-draft table's speedups of the parallel draft and of its autoregressive draft (lists over N), and
    their draft ms per step at N = 4."""
    return ([p for p, _ in table["speedup"].values()], [a for _, a in table["speedup"].values()],
            table["draft_ms_per_step"][4])


def _parallel_reasons(decision: Decision, default: str) -> list:
    """Why a parallel (PARD) draft is the pick (latency-bound), and this course's measurements that bound it, on the
    Shakespeare pair and on the real pair: three sentences."""
    low, high = decision.speedup
    chat = {target: row["mt_bench"] for target, row in PARD_VLLM_TABLE.items()}
    eagle = [e for _, e in chat.values()]
    first = (f"A parallel (PARD) draft of the target's family exists: fed the last token and N − 1 mask tokens, it "
             f"proposes all N drafts in one forward instead of N sequential ones (An et al. 2025), and its authors "
             f"measure {low:g}–{high:g}× on MT-Bench chat in vLLM with 0.5–1.5 B drafts for 8–70 B targets "
             f"(EAGLE-3 {min(eagle):g}–{max(eagle):g}× in the same runs)")
    if default in decision.candidates and default != "parallel":
        (default_low, default_high), _ = decision.candidates[default]
        first += f", above the {default_low:g}–{default_high:g}× of {method_phrase(default)}."
    else:
        first += "."
    ours, ar, (cheap_par, cheap_ar) = _parallel_card(PARALLEL_MEASURED)
    second = (f"It pays when the draft's own forwards are a large part of each step (a draft that is not tiny next to "
              f"the target, N of 3 or more, latency-bound serving); its acceptance drops faster with position than "
              f"an autoregressive draft's, because position i cannot see the drafts before it. On this course's "
              f"Shakespeare pair, a draft so small that a forward is mostly fixed cost, one forward cut drafting from "
              f"{cheap_ar:.2f} to {cheap_par:.2f} ms per step at N = 4, yet the parallel draft reached "
              f"{min(ours):.2f}–{max(ours):.2f}× at N = 2–4 against its autoregressive draft's "
              f"{min(ar):.2f}–{max(ar):.2f}× (agreement "
              + " / ".join(f"{a:.2f}" for a in PARALLEL_MEASURED["agreement"])
              + " at positions 1–4).")
    real_par, real_ar, (real_par_ms, real_ar_ms) = _parallel_card(PARALLEL_MEASURED_REAL)
    third = (f"On its real pair, whose draft spends most of a forward in a 49,152-token output layer, one forward cut "
             f"drafting from {real_ar_ms:.1f} to {real_par_ms:.1f} ms per step at N = 4, and the parallel draft "
             f"reached {min(real_par):.2f}–{max(real_par):.2f}× against {min(real_ar):.2f}–{max(real_ar):.2f}×: "
             "measure both drafts on your pair before you switch.")
    return [first, second, third]


def _mtp_reason(decision: Decision, default: str) -> str:
    """Why the target's MTP modules replace the workload's ``default`` (latency-bound)."""
    low, high = MTP_ACCEPTANCE
    text = (f"The target's checkpoint ships MTP modules, which draft from its own hidden states with nothing trained "
            f"or downloaded; {MTP_REPORT} accepts the token its module drafts {low * 100:.0f}–{high * 100:.0f} % of "
            f"the time and measures {MTP_SPEEDUP:g}× the tokens per second")
    if default in decision.candidates:
        (default_low, default_high), _ = decision.candidates[default]
        if MTP_SPEEDUP > default_high:
            return text + f", above the {default_low:g}–{default_high:g}× of {method_phrase(default)}."
        # one published number inside the other's range (code: 1.8× in 1.5–2×): it ranks by the range's middle
        return text + (f", inside the {default_low:g}–{default_high:g}× of {method_phrase(default)} and above that "
                       f"range's middle ({(default_low + default_high) / 2:g}×), the picker's ranking key: the two "
                       "overlap, so measure both on your traffic.")
    return text + "."


def _n_reason(method: str, n_draft: int, row, temperature: float) -> str:
    """Why N is what it is (rule 4)."""
    if method == "mtp":
        return (f"N = {n_draft}: one token from one module, the setting DeepSeek-V3 reports (its checkpoint ships "
                "num_nextn_predict_layers = 1). vLLM accepts a larger N and runs the module again for each further "
                "token, which it was not trained for, so the later drafts are accepted less often; raise N only after "
                "per-position acceptance on your traffic says the second and later drafts still pay.")
    if method == "parallel":
        which = "top" if temperature == 0 else "bottom"
        return (f"N = {n_draft}: the {which} of the workload's k range {row.n_range[0]}–{row.n_range[1]}, as for a "
                "draft model; a PARD draft is trained for a block size (this course's: pard_block_size 4 in its "
                "config.json) and positions beyond it are rarely accepted, while the one-forward saving grows with "
                "N, so the PARD authors tune draft_k per model and task: check the per-position acceptance.")
    if method == "lookahead":
        return (f"Lookahead verifies n-grams of {LOOKAHEAD_SETTINGS['ngram']} tokens that start at the last committed "
                f"token, so N = {n_draft}, with a Jacobi window of {LOOKAHEAD_SETTINGS['window']} (lesson 09's "
                "defaults).")
    if method == "suffix":
        return (f"N = {n_draft}: the {'top' if temperature == 0 else 'bottom'} of the structured-JSON row's k range "
                f"{row.n_range[0]}–{row.n_range[1]}, the nearest n-gram workload. This course's drafter sizes a "
                "tree by the match instead (at most the matched length, lesson 08); vLLM 0.34.0's GPU suffix "
                "speculator drafts one chain of up to N tokens, continuing the longest suffix match in the request "
                "and in earlier responses (vllm/v1/worker/gpu/spec_decode/suffix/speculator.py; "
                "lab.drafters.SuffixMatchDrafter drafts by that rule, and lesson 08 and the real pair's card compare "
                "the two).")
    if method == "medusa":
        return (f"N = {n_draft}: Medusa drafts one token per head, so N is the number of heads "
                f"({MEDUSA_HEADS} assumed here, as in seed lesson 002's diagram and in the memory figure); "
                "an engine that loads Medusa heads drafts exactly one token per head, so set N to your "
                "checkpoint's head count (none of the engines pinned here loads them any more: see the engine "
                "notes).")
    which = "top" if temperature == 0 else "bottom"
    return (f"N = {n_draft}: the {which} of the workload's k range {row.n_range[0]}–{row.n_range[1]} "
            + ("(greedy decoding, where a good pair's drafts are accepted most often, so longer drafts "
               "pay)." if temperature == 0 else
               "(sampling: large, confident pairs usually accept less than when greedy, so the shorter "
               "end is the safer start; measure α at your temperature, lesson 13, and see lesson 06 for "
               "the best N at that α)."))


def basis_source(method: str, task: str, basis: str) -> str:
    """The source phrase of a latency-bound range: ``basis`` as in :class:`lab.picker.decision.Decision`."""
    if basis == "workload_row":
        row = workload_row(task)
        note = "" if task in WORKLOAD_BY_TASK else (f" (nearest row: the seed has no "
                                                    f"{'copy/edit' if task == 'copy_edit' else task} row)")
        return f"{SEED_002}, production-settings table, row \"{row.workload}\"{note}"
    if basis == "arena":
        return "lesson 12's committed arena: prompt lookup on chat requests at T = 1 and T = 0, real pair on a CPU"
    if basis == "arena_conversations":
        return (f"{ARENA_RUN}: prompt lookup on multi-turn and agent-loop requests at T = 0 and T = 1, the requests "
                "suffix decoding's range comes from")
    row = STRATEGY_BY_METHOD[method]
    return f"{row.source}, row \"{row.strategy}\""
