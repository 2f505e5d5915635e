"""The drafter registry: drafter names -> drafters (layer 4).

One place maps the names the command line (``--drafter``), the bench, the arena and the race widget use to the
drafter classes of :mod:`lab.drafters`, and says which drafters a pair can have: Medusa heads and EAGLE drafts
were trained for some pairs only (:data:`TRAINED_FOR`), an early exit needs Llama layers (GPT-2 has none), and the
draft-model drafter needs a draft model.

Importing this module is cheap (no torch): the drafter classes are imported when a drafter is built, so that
``python -m lab --help`` and the option checks stay fast.
"""
from __future__ import annotations

__all__ = ["DRAFTERS", "OWN_DRAFT", "TRAINED_FOR", "check_has_draft", "make_drafter", "own_draft_reason",
           "try_drafter", "drafter_problem", "pair_has", "untrained_reason"]

DRAFTERS = ("model", "ngram", "lookahead", "medusa", "eagle", "early-exit", "suffix", "mtp", "parallel", "eagle3")
"""Every drafter name :func:`make_drafter` builds (the ``--drafter`` choices)."""


def make_drafter(kind: str, pair, n_draft: int, confidence: float | None = None):
    """The drafter named ``kind`` (one of :data:`DRAFTERS`) for ``pair`` (a :class:`lab.models.ModelPair`), drafting
    ``n_draft`` tokens per step where the drafter takes an N (:data:`OWN_DRAFT`: Lookahead, Medusa, suffix decoding
    and the MTP heads set their own).

    ``confidence`` (a probability in (0, 1), ``"model"`` only; default None: off) is transformers' confidence stop
    (``assistant_confidence_threshold``, :class:`lab.drafters.DraftModelDrafter`): a step stops drafting after a
    token the draft gave a probability below it, so ``n_draft`` becomes the most a step drafts
    (:data:`lab.bench.HF_ASSISTED_POLICY` is transformers' default, N = 20 with 0.4). Any other ``kind`` given a
    ``confidence`` raises ``ValueError``; so does a value outside (0, 1).

    Raises ``ValueError`` for an unknown kind and for ``"model"`` with a pair that has no draft model
    (``pair.draft`` is None), ``TypeError`` for ``"model"`` with something that is not a pair; Medusa, EAGLE, MTP,
    the parallel draft (``"parallel"``, PARD: N tokens from one draft forward) and EAGLE-3 (``"eagle3"``) raise
    ``FileNotFoundError`` / ``ValueError`` when their weights are missing or were trained for another target, and
    the early exit ``ValueError`` for a target without Llama layers (see :func:`try_drafter`).

    ``"suffix"`` (suffix decoding, lesson 08; vLLM's defaults, its own match length sets its draft, so ``n_draft``
    is not used) is a fresh drafter with an empty cache each call: the prompts of one bench or arena run are
    independent requests, and a cache carried from one to the next would let a request speculate from another's
    answer, which no server that received them independently could. What a request's *own* conversation produced
    earlier is in its prompt: for a chat pair the drafter counts the assistant turns the prompt quotes
    (:func:`lab.prompts.assistant_turns`) into its cache at reset, as the engine that generated them (vLLM's global
    suffix cache) would hold them. To carry outputs across a conversation yourself, reuse one
    :class:`lab.drafters.SuffixDecodingDrafter` or share a :class:`lab.drafters.suffix.SuffixCache`."""
    from lab.drafters import DraftModelDrafter, LookaheadDrafter, PromptLookupDrafter

    if confidence is not None and kind != "model" and kind in DRAFTERS:  # an unknown kind gets its own error below
        raise ValueError(f"confidence applies to the draft model (kind 'model') only, got kind {kind!r}")
    if kind == "model":
        from lab.drafters.base import check_pair

        check_pair(pair, "make_drafter")
        if pair.draft is None:
            raise ValueError(f"the {pair.name!r} pair has no draft model yet; draft with ngram (prompt lookup), "
                             "lookahead or early-exit, which need none")
        return DraftModelDrafter(pair.draft, n_draft=n_draft, confidence=confidence)
    if kind == "ngram":  # prompt lookup (lesson 08): no draft model
        return PromptLookupDrafter(max_ngram=3, n_draft=n_draft)
    if kind == "lookahead":  # Lookahead decoding (lesson 09): the target drafts for itself; n_draft is not used
        return LookaheadDrafter()
    if kind == "medusa":  # Medusa heads + tree attention (lesson 10); the tree fixes the draft length
        from lab.drafters.medusa import MedusaDrafter

        return MedusaDrafter.from_pretrained(pair)
    if kind == "eagle":  # EAGLE feature-space draft (lesson 11), chain of n_draft
        from lab.drafters.eagle import EagleDrafter

        return EagleDrafter.from_pretrained(pair, n_draft=n_draft)
    if kind == "early-exit":  # the target's first half of layers + its own head (lesson 10)
        from lab.drafters.early_exit import EarlyExitDrafter

        return EarlyExitDrafter(pair.target, num_layers=max(1, pair.target.config.num_hidden_layers // 2),
                                n_draft=n_draft)
    if kind == "suffix":  # suffix decoding (lesson 08): suffix tries over this request and earlier outputs
        from lab.drafters.suffix import SuffixDecodingDrafter
        from lab.prompts import assistant_turns

        quoted = (lambda ids: assistant_turns(pair, ids)) if getattr(pair, "has_chat_template", False) else None
        return SuffixDecodingDrafter(prompt_outputs=quoted)
    if kind == "mtp":  # DeepSeek-V3-style multi-token-prediction heads: a chain of one token per module (D)
        from lab.drafters.mtp import MTPDrafter

        return MTPDrafter.from_pretrained(pair)
    if kind == "parallel":  # PARD: a draft adapted to propose n_draft tokens in one forward (mask tokens)
        from lab.drafters.parallel import ParallelDrafter

        return ParallelDrafter.from_pretrained(pair, n_draft=n_draft)
    if kind == "eagle3":  # EAGLE-3: fused low/middle/high target layers, a reduced draft vocabulary (d2t); a chain
        from lab.drafters.eagle3 import Eagle3Drafter

        return Eagle3Drafter.from_pretrained(pair, n_draft=n_draft)
    raise ValueError(f"unknown drafter {kind!r}; choose from {', '.join(DRAFTERS)}")


OWN_DRAFT = ("lookahead", "medusa", "suffix", "mtp")
"""Drafters whose own geometry (Lookahead's window, Medusa's tree, the MTP heads' depth) sets what they draft: N
does not apply."""


def own_draft_reason(kind: str) -> str | None:
    """What sets the draft of drafter ``kind`` when it is one of :data:`OWN_DRAFT` (so N does not apply), else
    None."""
    if kind not in OWN_DRAFT:
        return None
    return {"lookahead": "its window W and n-gram size set", "medusa": "its tree of candidates sets",
            "suffix": "the length of its longest match sets",
            "mtp": "its number of modules (one token each) sets"}[kind] + " what it drafts"


TRAINED_FOR = {"medusa": ("shakespeare", "smollm2-135m"), "eagle": ("shakespeare", "smollm2-135m"),
               "mtp": ("shakespeare", "smollm2-135m"),
               "parallel": ("shakespeare", "smollm2-135m"), "eagle3": ("shakespeare", "smollm2-135m")}
"""Drafters whose weights are trained for one target, and the pairs that have them committed
(``lab/assets/<pair>/medusa``, ``.../eagle``, ``.../mtp``, ``.../parallel``, ``.../eagle3``). Both offline pairs
have all five; a hub pair has none."""


def untrained_reason(kind: str, pair_name: str) -> str | None:
    """Why drafter ``kind`` is unavailable for the pair named ``pair_name`` because its weights were never trained
    for it (:data:`TRAINED_FOR`), or None (the kind needs no trained weights, or the pair has them). Cheap: builds
    nothing and reads no file, so a missing or damaged asset of a trained pair still raises where it is built."""
    trained = TRAINED_FOR.get(kind)
    if trained is None or pair_name in trained:
        return None
    return (f"no {kind} weights are trained for the {pair_name!r} pair (committed for "
            f"{', '.join(map(repr, trained))} only)")


def pair_has(kind: str, pair_name: str) -> bool:
    """Whether the pair named ``pair_name`` has drafter ``kind`` by :data:`TRAINED_FOR` (:func:`untrained_reason` is
    None): the rows a committed arena of that pair must hold."""
    return untrained_reason(kind, pair_name) is None


def check_has_draft(pair, what: str) -> None:
    """Raise ``ValueError`` naming ``what`` and the pair when ``pair`` has no draft model (``pair.draft`` is None, as
    for a target loaded alone): the draft model's runs need one."""
    if getattr(pair, "draft", None) is None:
        raise ValueError(f"{what} needs a draft model, and the {pair.name!r} pair has none (pair.draft is None); "
                         "use a pair with a draft, e.g. load_pair('shakespeare')")


def _committed(kind: str, pair) -> bool:
    """Whether ``pair`` must be able to build ``kind``: the bundled pair has every drafter, and a pair in
    :data:`TRAINED_FOR` for ``kind`` has its weights committed (both offline pairs: all five trained kinds)."""
    return pair.name == "shakespeare" or (kind in TRAINED_FOR and pair_has(kind, pair.name))


def try_drafter(kind: str, pair, n_draft: int = 4, confidence: float | None = None):
    """``(drafter, None)``, or ``(None, why)`` when :func:`make_drafter` cannot build ``kind`` for ``pair`` (its
    error message; ``confidence`` as there): a pair not in :data:`TRAINED_FOR` has no Medusa heads or EAGLE draft,
    and GPT-2 has no Llama layers for an early exit.
    For the bundled pair, which has every drafter, and for a trained kind whose weights are committed for ``pair``
    (:func:`pair_has`: ``"smollm2-135m"``'s Medusa heads, EAGLE, MTP, parallel and EAGLE-3 drafts), a missing or
    damaged asset raises its ``FileNotFoundError`` / ``ValueError``: it is an error to see, not a drafter to leave
    out."""
    try:
        return make_drafter(kind, pair, n_draft, confidence), None
    except (FileNotFoundError, ValueError) as error:
        if _committed(kind, pair):
            raise
        return None, str(error)


def drafter_problem(kind: str, pair, n_draft: int = 4) -> str | None:
    """Why ``kind`` cannot be built for ``pair`` (:func:`try_drafter`), or None when it can. Always None, without
    building anything, for the bundled pair and for a kind whose weights are committed for ``pair``
    (:func:`pair_has`): a missing or damaged asset of theirs raises where the drafter is built."""
    return None if _committed(kind, pair) else try_drafter(kind, pair, n_draft)[1]
