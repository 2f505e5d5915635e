"""lab.picker.reasons: the reasons' wording stays with what was measured."""
from lab.picker import recommend
from tests.lab.picker.helpers import all_recommendations


def test_reasons_do_not_claim_that_sampling_always_lowers_acceptance():
    """Whether α falls with T depends on the pair (lesson 13 shows both directions; the real pair's fell): the reasons
    say "usually", for large pairs, and point to a measurement."""
    for rec in all_recommendations():
        text = " ".join(rec.reasons + rec.revisit)
        assert "accepts less, so" not in text and "acceptance falls" not in text and "less likely to be" not in text
    sampled = recommend("chat", 0.5, True, False)
    n_reason = next(r for r in sampled.reasons if r.startswith("N = 4"))
    assert "bottom" in n_reason and "large, confident pairs usually" in n_reason and "lesson 13" in n_reason
    greedy = recommend("chat", 0.0, True, False)
    assert any(r.startswith("N = 5: the top") for r in greedy.reasons)
    lookup = recommend("code", 0.9, False, False)
    assert any("deterministic draft" in r and "lesson 12" in r for r in lookup.reasons)



def test_suffix_decoding_s_reasons_quote_the_measurement():
    from lab.picker.tables import ARENA_SUFFIX_PER_CALL

    rec = recommend("agent", 0.0, False, False)
    text = " ".join(rec.reasons)
    assert rec.reasons[0].startswith("Agent loops and multi-turn edits answer with what earlier requests answered")
    ours, lookup = ARENA_SUFFIX_PER_CALL["multi_turn"]
    assert f"multi-turn {ours:.2f} against {lookup:.2f}" in text
    assert "cache of earlier outputs takes memory" in text
    # wall time too (an instructor: the card recommended suffix decoding while its own "as served" range for
    # prompt lookup was higher), worded from the numbers, cell by cell
    from lab.picker.reasons import _versus
    from lab.picker.tables import ARENA_CONVERSATION_NGRAM_SPEEDUPS, ARENA_SUFFIX_SPEEDUPS

    ahead = 0
    for (task, t), suffix in ARENA_SUFFIX_SPEEDUPS.items():
        lookup = ARENA_CONVERSATION_NGRAM_SPEEDUPS[(task, t)]
        word = _versus(suffix, lookup)
        ahead += word == "ahead of"
        when = "greedy" if t == 0 else "T = 1"
        assert f"{task.replace('_', '-')} {when} {suffix:.2f}× against {lookup:.2f}× ({word.split()[0]})" in text
    if ahead < 4:
        assert f"On wall time suffix decoding was ahead in {ahead or 'none'} of the 4 cells" in text
        assert "which this short run does not measure: time both on your own traffic" in text
    assert "vLLM 0.34.0's GPU suffix speculator drafts one chain of up to N" in text
    assert any(r.startswith("N = 7: the top of the structured-JSON row's k range") for r in rec.reasons)
    sampled = recommend("agent", 0.9, False, False)
    assert any("deterministic draft" in r for r in sampled.reasons)


def test_comparisons_follow_the_numbers(monkeypatch):
    """A comparison between two measured speedups is worded from the numbers as printed, by the course's one rule
    (lab.metrics.compare_speedups: under 3 % of the larger apart is "level"), and a speedup above the tokens per
    target call it was made with by more than 3 % is called timing noise."""
    from lab.compare import beyond_tokens_per_call
    from lab.picker.reasons import _lookup_on_chat, _versus
    from lab.picker.tables import ARENA_CHAT_PER_CALL, ARENA_CHAT_SPEEDUPS

    assert [_versus(a, b) for a, b in ((1.61, 1.37), (0.90, 0.88), (1.00, 1.02), (1.00, 1.04), (1.06, 0.99),
                                       (1.0049, 1.0351), (1.37, 1.61))] == [
        "ahead of", "level with", "level with", "behind", "ahead of", "behind", "behind"]  # printed 1.00 vs 1.04: 3.8 %
    sentence = _lookup_on_chat()
    for t, when in ((0, "greedy"), (1, "at T = 1")):
        noisy = beyond_tokens_per_call(ARENA_CHAT_SPEEDUPS[("ngram", t)], ARENA_CHAT_PER_CALL[("ngram", t)])
        assert (f"Its {ARENA_CHAT_SPEEDUPS[('ngram', t)]:.2f}× {when} came with "
                f"{ARENA_CHAT_PER_CALL[('ngram', t)]:.2f} tokens per target call" in sentence) == noisy
    # a committed T = 1 speedup 5 % above its tokens per call is called timing noise; 2 % above is not
    for speedup, noisy in ((1.11, True), (1.08, False)):
        monkeypatch.setitem(ARENA_CHAT_SPEEDUPS, ("ngram", 1), speedup)
        monkeypatch.setitem(ARENA_CHAT_PER_CALL, ("ngram", 1), 1.06)
        assert (f"Its {speedup:.2f}× at T = 1 came with 1.06 tokens per target call" in _lookup_on_chat()) == noisy



def test_a_method_the_workload_has_is_never_dropped_without_a_word():
    """An instructor: `pick --task agent --target-has-mtp` (and --parallel-draft on code) recommended another method
    and never said why the flag did not count. Each such card now says why the method was not weighed; where it
    was weighed and lost, the existing "was a candidate too" line stands instead."""
    for task in ("agent", "copy_edit"):
        rec = recommend(task, 0.0, False, False, target_has_mtp=True)
        assert rec.method != "mtp"
        assert sum(r.startswith("The target's MTP modules were not weighed: on ") for r in rec.reasons) == 1, task
    for task in ("code", "structured", "copy_edit", "agent"):
        rec = recommend(task, 0.0, False, False, has_parallel_draft=True)
        assert rec.method != "parallel"
        assert sum(r.startswith("The parallel (PARD) draft was not weighed") for r in rec.reasons) == 1, task
    weighed = recommend("structured", 0.0, False, False, target_has_mtp=True)
    assert any("MTP modules were a candidate too" in r for r in weighed.reasons)
    assert not any("not weighed" in r for r in weighed.reasons)
    assert not any("not weighed" in r for r in recommend("agent", 0.0, False, False).reasons)  # no flag, no line


def test_prompt_lookup_on_code_and_structured_quotes_the_committed_run_beside_the_seed():
    """An instructor: `pick --task code --temperature 1` quoted only the seed's 1.5–2× while the committed arena had
    measured prompt lookup on code at about 1.0–1.2×; chat already quoted its own run."""
    from lab.picker.tables import ARENA_SEEDED_NGRAM

    for task in ("code", "structured"):
        rec = recommend(task, 0.0, False, False)
        assert rec.method == "ngram"
        (greedy, greedy_calls), (hot, hot_calls) = ARENA_SEEDED_NGRAM[(task, 0)], ARENA_SEEDED_NGRAM[(task, 1)]
        line = next(r for r in rec.reasons if r.startswith("That range is the seed's production-settings figure"))
        assert (f"prompt lookup made {greedy:.2f}× greedy and {hot:.2f}× at T = 1 on {task} requests "
                f"({greedy_calls:.2f} and {hot_calls:.2f} tokens per target call)") in line
    assert not any("production-settings figure" in r for r in recommend("chat", 0.0, False, False).reasons)


def test_a_method_the_workload_has_but_cannot_fit_says_why():
    """The reviewer: with too little memory, MTP modules and a parallel draft the workload has were dropped without a
    word; the obstacle is named now, once each."""
    for task in ("chat", "code", "agent", "copy_edit"):
        rec = recommend(task, 0.0, False, False, memory_headroom_gb=1.0, target_has_mtp=True, has_parallel_draft=True)
        assert rec.method not in ("mtp", "parallel")
        mtp = [r for r in rec.reasons if r.startswith("The target's MTP modules need about")]
        pard = [r for r in rec.reasons if r.startswith("A parallel (PARD) draft model needs about")]
        assert len(mtp) == len(pard) == 1 and "more than the 1 GB headroom" in mtp[0], (task, rec.reasons)
        assert not any("not weighed" in r for r in rec.reasons)
    rec = recommend("agent", 0.0, False, False, target_has_mtp=True, exclude=("mtp",))
    assert "The target's MTP modules are ruled out (exclude)." in rec.reasons


def test_suffix_decoding_ahead_in_every_cell_reads_so_without_the_caveat(monkeypatch):
    import lab.picker.reasons as reasons

    cells = [(task, t) for task in ("multi_turn", "agent") for t in (0, 1)]
    monkeypatch.setattr(reasons, "ARENA_SUFFIX_SPEEDUPS", {cell: 2.0 for cell in cells})
    monkeypatch.setattr(reasons, "ARENA_CONVERSATION_NGRAM_SPEEDUPS", {cell: 1.5 for cell in cells})
    text = reasons._suffix_on_wall_time()
    assert text.startswith("On wall time the same run has it ahead of prompt lookup in every cell: multi-turn greedy "
                           "2.00× against 1.50× (ahead)")
    assert "does not measure" not in text
    monkeypatch.setattr(reasons, "ARENA_SUFFIX_SPEEDUPS", {cell: 2.0 if cell[1] == 0 else 1.5 for cell in cells})
    assert reasons._suffix_on_wall_time().startswith("On wall time suffix decoding was ahead in 2 of the 4 cells")


def test_under_load_an_excluded_method_the_workload_has_is_named():
    """The reviewer: under load, MTP modules or a parallel draft the workload has were dropped without a word when
    excluded (the latency-bound cards already said so)."""
    rec = recommend("chat", 0.0, True, True, False, exclude=("mtp",), target_has_mtp=True)
    assert rec.method == "eagle"
    assert ("The target's own MTP modules, the picker's first choice under load, are not an option: the target's MTP "
            "modules are ruled out (exclude).") in rec.reasons
    rec = recommend("chat", 0.0, True, True, False, exclude=("parallel",), has_parallel_draft=True)
    assert "The parallel (PARD) draft is ruled out (exclude), and would not be used under load anyway." in rec.reasons
