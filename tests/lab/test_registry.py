"""lab.registry: drafter names -> drafters, and which drafters a pair can have (the bundled pair has all of them; a
hub pair has no Medusa heads or EAGLE draft, and GPT-2 no Llama layers for an early exit)."""
from __future__ import annotations

import pytest

from lab.registry import (
    DRAFTERS,
    OWN_DRAFT,
    TRAINED_FOR,
    drafter_problem,
    make_drafter,
    own_draft_reason,
    try_drafter,
)
from tests.lab.cli.helpers import gpt2_stand_in


def test_every_name_builds_a_drafter_for_the_bundled_pair(pair):
    for kind in DRAFTERS:
        drafter = make_drafter(kind, pair, 3)
        assert callable(drafter.propose) and callable(drafter.reset), kind
        assert try_drafter(kind, pair, 3)[1] is None  # built, not only named
    assert make_drafter("model", pair, 3).n_draft == 3 and make_drafter("ngram", pair, 2).n_draft == 2
    assert make_drafter("parallel", pair, 3).n_draft == 3  # one forward drafts all N
    mtp = make_drafter("mtp", pair, 3)  # the committed heads' D modules set the draft, whatever N
    assert mtp.n_draft == mtp.heads.depth == 2
    suffix = make_drafter("suffix", pair, 3)  # vLLM's defaults whatever N; a plain-text pair quotes no answers
    assert (suffix.max_depth, suffix.max_spec_factor, suffix.min_token_prob) == (24, 1.0, 0.1)
    assert suffix.prompt_outputs is None and len(suffix.cache) == 0
    with pytest.raises(ValueError, match="unknown drafter 'oracle'; choose from model, ngram"):
        make_drafter("oracle", pair, 3)


def test_own_draft_reason_names_what_sets_the_draft():
    assert set(OWN_DRAFT) <= set(DRAFTERS) and set(TRAINED_FOR) <= set(DRAFTERS)
    assert own_draft_reason("lookahead") == "its window W and n-gram size set what it drafts"
    assert own_draft_reason("medusa") == "its tree of candidates sets what it drafts"
    assert own_draft_reason("suffix") == "the length of its longest match sets what it drafts"
    assert own_draft_reason("mtp") == "its number of modules (one token each) sets what it drafts"
    assert DRAFTERS[:9] == ("model", "ngram", "lookahead", "medusa", "eagle", "early-exit", "suffix", "mtp",
                            "parallel")
    assert own_draft_reason("parallel") is None  # N tokens from one forward: N applies
    assert all(own_draft_reason(kind) is None for kind in DRAFTERS if kind not in OWN_DRAFT)


def test_a_hub_pair_lacks_the_trained_drafters_and_the_early_exit(pair):
    hub = gpt2_stand_in(pair)
    for kind in ("model", "ngram", "lookahead", "suffix"):
        drafter, why = try_drafter(kind, hub)
        assert drafter is not None and why is None, kind
    for kind in ("medusa", "eagle", "mtp", "parallel", "early-exit"):
        drafter, why = try_drafter(kind, hub)
        assert drafter is None and why, kind
        assert drafter_problem(kind, hub) == why
    assert "Llama-style" in drafter_problem("early-exit", hub)


def test_the_real_pair_has_every_drafter(smollm2_pair):
    """"smollm2-135m": its draft model, prompt lookup, Lookahead, the early exit, suffix decoding, its Medusa heads,
    its EAGLE draft, its MTP heads, its parallel draft and its EAGLE-3 draft build and run, greedy output equal to
    autoregressive decoding (the float32 oracles are in test_real_pair_oracles.py). A pair that trained nothing (a hub
    pair) has none of the trained drafters, with the reason."""
    from lab.decode import generate
    from lab.registry import pair_has, untrained_reason

    pair = smollm2_pair
    prompt = pair.encode_chat("Write a haiku about the sea.")
    plain = generate(pair.target, prompt, max_new_tokens=8)
    assert all(pair_has(kind, pair.name) for kind in DRAFTERS)
    assert untrained_reason("eagle3", "gpt2") == ("no eagle3 weights are trained for the 'gpt2' pair (committed for "
                                                  "'shakespeare', 'smollm2-135m' only)")
    assert not any(pair_has(kind, "gpt2") for kind in TRAINED_FOR)
    for kind in DRAFTERS:
        drafter, why = try_drafter(kind, pair, 2)
        assert why is None and drafter_problem(kind, pair) is None, kind
        assert generate(pair.target, prompt, drafter=drafter, max_new_tokens=8).tokens == plain.tokens, kind


def test_the_draft_model_runs_refuse_a_pair_without_a_draft_naming_it(pair):
    """bench, the arena's "model" row and compare_adaptive need a draft model: a pair without one (a target loaded
    alone) is a ValueError naming the pair before any run, from Python as from the command line."""
    import dataclasses

    from lab.arena import compare_adaptive, run_arena
    from lab.bench import run_bench

    no_draft = dataclasses.replace(pair, name="no-draft", draft=None)
    for call in (lambda: run_bench(no_draft, ["To be"], max_new_tokens=2),
                 lambda: compare_adaptive(no_draft, max_new_tokens=2, prompts=1, progress=False),
                 lambda: run_arena(no_draft, tasks=("prose",), max_new_tokens=2, prompts_per_task=1, progress=False)):
        with pytest.raises(ValueError, match=r"needs a draft model, and the 'no-draft' pair has none"):
            call()
    from lab.registry import check_has_draft

    with pytest.raises(TypeError, match=r"the draft model needs a model pair \(lab.models.load_pair\(...\)\), got "
                                        "NoneType"):
        check_has_draft(None, "the draft model")
    run = run_arena(no_draft, tasks=("prose",), temperatures=(0.0,), max_new_tokens=2, prompts_per_task=1,
                    drafters=("ngram",), progress=False)  # the drafters that need no draft model still run
    assert {row["drafter"] for row in run["rows"]} >= {"ngram"}


def test_suffix_drafters_are_fresh_per_call_and_read_the_answers_a_request_quotes(smollm2_pair):
    """make_drafter("suffix") documents its cache: empty for every call (independent requests share nothing), but
    for a chat pair the conversation's earlier answers that the prompt quotes join it at reset, once each, and a
    drafter reused across the conversation keeps what it generated."""
    from lab.decode import generate

    pair = smollm2_pair
    first = [{"role": "user", "content": "Write one sentence about cats."}]
    drafter = make_drafter("suffix", pair, 4)
    answer = generate(pair.target, pair.encode_chat(first), drafter=drafter, max_new_tokens=12,
                      eos_token_id=pair.eos_token_id).tokens
    second = first + [{"role": "assistant", "content": pair.decode(answer[:-1] if answer[-1] == 2 else answer)},
                      {"role": "user", "content": "Repeat it."}]
    drafter.reset(pair.encode_chat(second))  # the first answer: generated here, and quoted by the prompt
    assert len(drafter.cache) >= 1 and answer in drafter.cache
    fresh = make_drafter("suffix", pair, 4)
    assert len(fresh.cache) == 0
    fresh.reset(pair.encode_chat(second))
    fresh.reset(pair.encode_chat(second))  # quoted again: counted once
    assert len(fresh.cache) == 1


def test_make_drafter_confidence_is_the_draft_models_stop(smollm2_pair):
    from lab.drafters import DraftModelDrafter

    drafter = make_drafter("model", smollm2_pair, 20, confidence=0.4)
    assert isinstance(drafter, DraftModelDrafter) and (drafter.n_draft, drafter.confidence) == (20, 0.4)
    assert make_drafter("model", smollm2_pair, 4).confidence is None
    with pytest.raises(ValueError, match="confidence applies to the draft model \\(kind 'model'\\) only, got kind "
                                         "'eagle'"):
        make_drafter("eagle", smollm2_pair, 4, confidence=0.4)
    with pytest.raises(ValueError, match=r"confidence must be None or a probability in \(0, 1\), got 1.5"):
        make_drafter("model", smollm2_pair, 4, confidence=1.5)
    assert try_drafter("ngram", smollm2_pair, 4, confidence=0.4)[1] == ("confidence applies to the draft model "
                                                                         "(kind 'model') only, got kind 'ngram'")
    with pytest.raises(ValueError, match="unknown drafter 'nope'; choose from model, ngram"):
        make_drafter("nope", smollm2_pair, 4, confidence=0.4)  # the kind is what is wrong


def test_make_drafter_names_a_missing_pair():
    with pytest.raises(TypeError, match="make_drafter expected a ModelPair .* got NoneType"):
        make_drafter("model", None, 4)
    with pytest.raises(TypeError, match="got str 'shakespeare'"):
        make_drafter("model", "shakespeare", 4)


def test_a_missing_committed_asset_of_the_real_pair_raises_instead_of_leaving_the_row_out(pair, tmp_path,
                                                                                         monkeypatch):
    """TRAINED_FOR commits Medusa heads for both offline pairs, but only the Shakespeare pair's missing asset raised:
    smollm2-135m's was one stderr line in arena and bench and a row left out. (The Shakespeare pair's models stand
    in for the real pair's: only its name and the Medusa folder matter here.)"""
    import dataclasses

    from lab.drafters import medusa

    real = dataclasses.replace(pair, name="smollm2-135m")
    monkeypatch.setitem(medusa.MEDUSA_DIRS, "smollm2-135m", tmp_path)  # an empty folder: the committed heads gone
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        try_drafter("medusa", real, 3)
    assert drafter_problem("medusa", real) is None  # nothing built: the error shows where the drafter is built
    assert try_drafter("ngram", real, 3)[1] is None
    no_draft = dataclasses.replace(real, draft=None)  # a kind the pair need not have still gives its reason
    assert try_drafter("model", no_draft, 3) == (
        None, "the 'smollm2-135m' pair has no draft model yet; draft with ngram (prompt lookup), lookahead or "
              "early-exit, which need none")
    hub = dataclasses.replace(pair, name="gpt2")  # nothing committed for a hub pair: skipped with the reason
    assert drafter_problem("medusa", hub) == ("no Medusa heads for the 'gpt2' pair: committed ones exist for "
                                              "'shakespeare', 'smollm2-135m'; pass directory= for heads of your own")


def test_every_table_of_drafters_is_derived_from_the_registry_records(pair):
    """One DrafterSpec per drafter: the bench's rows, the arena's labels, formula drafters and geometry, the race's
    fresh warm-up drafter and the tuples OWN_DRAFT / TRAINED_FOR all come from its fields (a contributor who added a
    drafter had to edit eight tables by hand). The README's --drafter list is prose and is checked here."""
    import re
    from pathlib import Path

    import lab.bench as bench
    from lab.arena import DRAFTER_LABELS, FORMULA_DRAFTERS, _arena_settings
    from lab.registry import DRAFTER_SPECS, drafter_spec

    assert tuple(DRAFTER_SPECS) == DRAFTERS and all(spec.name == name for name, spec in DRAFTER_SPECS.items())
    assert OWN_DRAFT == ("lookahead", "medusa", "suffix", "mtp")
    assert TRAINED_FOR == {kind: ("shakespeare", "smollm2-135m")
                           for kind in ("medusa", "eagle", "mtp", "parallel", "eagle3")}
    assert FORMULA_DRAFTERS == ("model", "eagle", "early-exit", "eagle3")
    assert [name for name, spec in DRAFTER_SPECS.items() if spec.keeps_outputs] == ["suffix"]
    assert tuple(bench.DRAFTER_METHODS) == DRAFTERS
    assert bench.DRAFTER_METHODS["model"] == ("lab speculative", "HF assisted") + bench.SAME_POLICY
    assert bench.DRAFTER_METHODS["eagle3"] == ("lab EAGLE-3", bench.EAGLE3_TREE)
    rows = [row for name in DRAFTERS for row in bench.DRAFTER_METHODS[name]]
    assert len(rows) == len(set(rows))  # a row times one drafter
    assert DRAFTER_LABELS["mtp"] == "MTP heads" and set(DRAFTERS) <= set(DRAFTER_LABELS)
    assert DRAFTER_LABELS["parallel"] == "parallel draft (PARD)"  # the committed arena's rows carry these labels
    assert drafter_spec("eagle").label == "EAGLE"
    with pytest.raises(ValueError, match="unknown drafter 'bigram'; choose from model, ngram, lookahead"):
        drafter_spec("bigram")
    settings = _arena_settings(pair, ("prose",), (0.0,), 4, 1, 3, 0, 1, ("parallel", "early-exit", "ngram"),
                               _QuietMeter())
    assert settings["geometry"] == ("prompt lookup n-grams <= 3, N = 3; early exit 3 of 6 layers; parallel draft: "
                                    "N = 3 tokens from one draft forward (mask tokens)")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    listed = re.search(r"\*\*`python -m lab demo`\*\*: `--drafter ([a-z0-9|-]+)`", readme).group(1).split("|")
    assert tuple(listed) == DRAFTERS, "README's `python -m lab demo`: `--drafter ...` list: add the new name"


class _QuietMeter:
    def summary(self):
        return {"load_average": [0.0, 0.0], "other_cores": 0.0}

    busy = False

    def note(self):
        return ""


def test_an_unknown_drafter_is_not_one_with_no_weights_to_miss():
    """A tester's `pair_has('nope', 'shakespeare')` was True and `untrained_reason('nope', 'nope')` None."""
    from lab.registry import pair_has, untrained_reason

    for call in (lambda: pair_has("nope", "shakespeare"), lambda: untrained_reason("nope", "smollm2-135m")):
        with pytest.raises(ValueError, match="unknown drafter 'nope'; choose from model, ngram"):
            call()
    assert pair_has("ngram", "gpt2") and not pair_has("eagle", "gpt2")
