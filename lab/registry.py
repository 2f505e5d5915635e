"""The drafter registry: one record per drafting method (layer 4).

Each drafting method the course builds has one :class:`DrafterSpec` here: the name the command line
(``--drafter``), the bench, the arena and the race widget use, the label tables print, how it is built, what sets
its draft length, which pairs have its trained weights, and what the arena says about its geometry. The tuples and
tables other modules read (:data:`DRAFTERS`, :data:`OWN_DRAFT`, :data:`TRAINED_FOR`, ``lab.arena.DRAFTER_LABELS``,
``lab.arena.FORMULA_DRAFTERS``, ``lab.bench.DRAFTER_METHODS``) are derived from these records, so a new drafter is
one record (README, "Adding a drafting method").

Importing this module is cheap (no torch): the drafter classes are imported when a drafter is built, so that
``python -m lab --help`` and the option checks stay fast.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from lab.words import in_words

__all__ = ["DrafterSpec", "DRAFTER_SPECS", "drafter_spec", "drafters_in_words", "TRAINED_PAIRS",
           "DRAFTERS", "OWN_DRAFT", "TRAINED_FOR", "check_has_draft",
           "make_drafter", "own_draft_reason", "try_drafter", "drafter_problem", "pair_has", "untrained_reason"]

_OFFLINE_PAIRS = ("shakespeare", "smollm2-135m")  # the pairs whose trained weights are committed under lab/assets


@dataclass(frozen=True)
class DrafterSpec:
    """What the course knows about one drafting method, in one place.

    - ``name``: the ``--drafter`` name (lowercase, no spaces), the key of :data:`DRAFTER_SPECS`.
    - ``label``: the method's name in tables (arena, bench, race).
    - ``build(pair, n_draft)``: a fresh drafter for a :class:`lab.models.ModelPair` drafting ``n_draft`` tokens a
      step (ignored when ``own_draft`` is set); raises as :func:`make_drafter` documents.
    - ``bench_row``: the ``python -m lab bench`` row that times ``build`` (``lab.bench.DRAFTER_METHODS`` adds
      transformers' counterparts where they exist).
    - ``own_draft``: what sets the draft when N does not apply (a phrase completed by "what it drafts"), or None.
    - ``trained_for``: the pairs whose weights for it are committed (``lab/assets/<pair>/...``); empty when it needs
      no trained weights.
    - ``one_forward_per_token``: one draft forward per drafted token, in a chain, so Leviathan's α, N, c model
      predicts its speedup (the arena's "alpha, N, c" prediction).
    - ``keeps_outputs``: it carries what earlier generations produced into the next (a cache of outputs), so a
      warm-up must use a fresh one.
    - ``geometry(pair, n_draft)``: the arena's one-line description of its shape, or None when N says it all.
    - ``plain_bench``: a plain ``python -m lab bench`` (no ``--drafter``) times it. Only the methods whose rows the
      bench's tables, goals and committed runs always had; any other is timed when ``--drafter`` names it. (The
      draft model's row is one of the bench's base rows, timed whatever this says; its record keeps True.)
    """
    name: str
    label: str
    build: Callable
    bench_row: str
    own_draft: str | None = None
    trained_for: tuple = ()
    one_forward_per_token: bool = False
    keeps_outputs: bool = False
    geometry: Callable | None = None
    plain_bench: bool = False


def _draft_model(pair, n_draft, confidence=None):
    from lab.drafters import DraftModelDrafter
    from lab.drafters.base import check_pair

    check_pair(pair, "make_drafter")
    if pair.draft is None:
        raise ValueError(f"the {pair.name!r} pair has no draft model yet; draft with ngram (prompt lookup), "
                         "lookahead or early-exit, which need none")
    return DraftModelDrafter(pair.draft, n_draft=n_draft, confidence=confidence)


def _prompt_lookup(pair, n_draft):
    from lab.drafters import PromptLookupDrafter

    return PromptLookupDrafter(max_ngram=3, n_draft=n_draft)


def _lookahead(pair, n_draft):  # the target drafts for itself
    from lab.drafters import LookaheadDrafter

    return LookaheadDrafter()


def _lookahead_geometry(pair, n_draft):
    from lab.drafters import LookaheadDrafter

    la = LookaheadDrafter()
    return f"lookahead W = {la.window}, n-gram {la.ngram}, pool {la.pool_size}"


def _medusa(pair, n_draft):  # the tree fixes the draft
    from lab.drafters.medusa import MedusaDrafter

    return MedusaDrafter.from_pretrained(pair)


def _medusa_geometry(pair, n_draft):
    from lab.drafters.medusa import DEFAULT_TREE

    return f"Medusa {len(DEFAULT_TREE)}-node tree"


def _eagle(pair, n_draft):
    from lab.drafters.eagle import EagleDrafter

    return EagleDrafter.from_pretrained(pair, n_draft=n_draft)


def _exit_layers(pair) -> int:
    return max(1, pair.target.config.num_hidden_layers // 2)


def _early_exit(pair, n_draft):
    from lab.drafters.early_exit import EarlyExitDrafter

    return EarlyExitDrafter(pair.target, num_layers=_exit_layers(pair), n_draft=n_draft)


def _suffix(pair, n_draft):
    from lab.drafters.suffix import SuffixDecodingDrafter
    from lab.prompts import assistant_turns

    quoted = (lambda ids: assistant_turns(pair, ids)) if getattr(pair, "has_chat_template", False) else None
    return SuffixDecodingDrafter(prompt_outputs=quoted)


def _suffix_geometry(pair, n_draft):
    from lab.drafters import SuffixDecodingDrafter

    sd = SuffixDecodingDrafter()
    return (f"suffix decoding depth {sd.max_depth}, spec factor {sd.max_spec_factor:g}, min prob "
            f"{sd.min_token_prob:g}, cache of the conversation's earlier answers")


def _mtp(pair, n_draft):
    from lab.drafters.mtp import MTPDrafter

    return MTPDrafter.from_pretrained(pair)


def _mtp_geometry(pair, n_draft):
    return f"MTP heads: a chain of {_mtp(pair, n_draft).heads.depth}, one per module"


def _parallel(pair, n_draft):
    from lab.drafters.parallel import ParallelDrafter

    return ParallelDrafter.from_pretrained(pair, n_draft=n_draft)


def _eagle3(pair, n_draft):
    from lab.drafters.eagle3 import Eagle3Drafter

    return Eagle3Drafter.from_pretrained(pair, n_draft=n_draft)


DRAFTER_SPECS = {spec.name: spec for spec in (
    # the pair's own draft model (lessons 04-06); the only drafter that takes a confidence stop
    DrafterSpec("model", "draft model", _draft_model, "lab speculative", one_forward_per_token=True,
                plain_bench=True),
    # prompt lookup (lesson 08): n-grams of the context, no draft model
    DrafterSpec("ngram", "prompt lookup", _prompt_lookup, "lab prompt lookup",
                geometry=lambda pair, n: f"prompt lookup n-grams <= 3, N = {n}", plain_bench=True),
    # Lookahead decoding (lesson 09): Jacobi iteration of the target's own n-grams
    DrafterSpec("lookahead", "lookahead", _lookahead, "lab lookahead", own_draft="its window W and n-gram size set",
                geometry=_lookahead_geometry, plain_bench=True),
    # Medusa heads + tree attention (lesson 10)
    DrafterSpec("medusa", "Medusa", _medusa, "lab Medusa", own_draft="its tree of candidates sets",
                trained_for=_OFFLINE_PAIRS, geometry=_medusa_geometry, plain_bench=True),
    # EAGLE feature-space draft (lesson 11), a chain of N
    DrafterSpec("eagle", "EAGLE", _eagle, "lab EAGLE", trained_for=_OFFLINE_PAIRS, one_forward_per_token=True,
                plain_bench=True),
    # the target's first half of layers + its own head (lesson 10)
    DrafterSpec("early-exit", "early exit", _early_exit, "lab early exit", one_forward_per_token=True,
                geometry=lambda pair, n: (f"early exit {_exit_layers(pair)} of "
                                          f"{pair.target.config.num_hidden_layers} layers"), plain_bench=True),
    # suffix decoding (lesson 08): suffix tries over this request and earlier outputs; see make_drafter
    DrafterSpec("suffix", "suffix decoding", _suffix, "lab suffix decoding",
                own_draft="the length of its longest match sets", keeps_outputs=True, geometry=_suffix_geometry),
    # DeepSeek-V3-style multi-token-prediction heads (lesson 11): a chain of one token per module
    DrafterSpec("mtp", "MTP heads", _mtp, "lab MTP", own_draft="its number of modules (one token each) sets",
                trained_for=_OFFLINE_PAIRS, geometry=_mtp_geometry),
    # PARD (lesson 09): a draft adapted to propose N tokens in one forward (mask tokens)
    DrafterSpec("parallel", "parallel draft (PARD)", _parallel, "lab parallel", trained_for=_OFFLINE_PAIRS,
                geometry=lambda pair, n: f"parallel draft: N = {n} tokens from one draft forward (mask tokens)"),
    # EAGLE-3 (lesson 11): fused low/middle/high target layers, a reduced draft vocabulary (d2t); a chain
    DrafterSpec("eagle3", "EAGLE-3", _eagle3, "lab EAGLE-3", trained_for=_OFFLINE_PAIRS, one_forward_per_token=True),
)}
"""Every drafting method, name -> :class:`DrafterSpec`, in the order tables list them."""

DRAFTERS = tuple(DRAFTER_SPECS)
"""Every drafter name :func:`make_drafter` builds (the ``--drafter`` choices)."""

OWN_DRAFT = tuple(name for name, spec in DRAFTER_SPECS.items() if spec.own_draft)
"""Drafters whose own geometry (Lookahead's window, Medusa's tree, the MTP heads' depth, suffix decoding's match)
sets what they draft: N does not apply."""

TRAINED_FOR = {name: spec.trained_for for name, spec in DRAFTER_SPECS.items() if spec.trained_for}
"""Drafters whose weights are trained for one target, and the pairs that have them committed
(``lab/assets/<pair>/medusa``, ``.../eagle``, ``.../mtp``, ``.../parallel``, ``.../eagle3``). Both offline pairs
have all five; a hub pair has none."""

TRAINED_PAIRS = tuple(dict.fromkeys(pair for pairs in TRAINED_FOR.values() for pair in pairs))
"""The pairs that have trained drafter weights committed (the union of :data:`TRAINED_FOR`)."""


def drafter_spec(kind: str) -> DrafterSpec:
    """The :class:`DrafterSpec` of drafter ``kind``; ``ValueError`` listing :data:`DRAFTERS` for an unknown one."""
    try:
        return DRAFTER_SPECS[kind]
    except (KeyError, TypeError):  # TypeError: an unhashable kind
        raise ValueError(f"unknown drafter {kind!r}; choose from {', '.join(DRAFTERS)}") from None


def drafters_in_words(labels: bool = False, take_n: bool | None = None) -> str:
    """The drafters of :data:`DRAFTERS` as a phrase for help texts ("model, ngram and ..."), from the records so
    that a new drafter joins every help text: their names, or with ``labels`` "model (draft model), ...";
    ``take_n`` True keeps those that take an N, False those that set their own draft (:data:`OWN_DRAFT`)."""
    chosen = [name for name in DRAFTERS if take_n is None or (name not in OWN_DRAFT) == take_n]

    def word(name):
        label = DRAFTER_SPECS[name].label.replace(" (", ", ").rstrip(")")  # "parallel draft, PARD": no nested ()
        return f"{name} ({label})" if labels and label.lower() != name.replace("-", " ") else name

    return in_words(word(name) for name in chosen)


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
    spec = drafter_spec(kind)
    if confidence is not None:
        if kind != "model":
            raise ValueError(f"confidence applies to the draft model (kind 'model') only, got kind {kind!r}")
        return spec.build(pair, n_draft, confidence=confidence)
    return spec.build(pair, n_draft)


def own_draft_reason(kind: str) -> str | None:
    """What sets the draft of drafter ``kind`` when it is one of :data:`OWN_DRAFT` (so N does not apply), else
    None."""
    spec = DRAFTER_SPECS.get(kind) if isinstance(kind, str) else None
    return f"{spec.own_draft} what it drafts" if spec is not None and spec.own_draft else None


def untrained_reason(kind: str, pair_name: str) -> str | None:
    """Why drafter ``kind`` is unavailable for the pair named ``pair_name`` because its weights were never trained
    for it (:data:`TRAINED_FOR`), or None (the kind needs no trained weights, or the pair has them). Cheap: builds
    nothing and reads no file, so a missing or damaged asset of a trained pair still raises where it is built.
    Raises ``ValueError`` listing :data:`DRAFTERS` for an unknown ``kind`` (:func:`drafter_spec`)."""
    drafter_spec(kind)  # an unknown drafter is a mistake, not one "with no weights to miss"
    trained = TRAINED_FOR.get(kind)
    if trained is None or pair_name in trained:
        return None
    return (f"no {kind} weights are trained for the {pair_name!r} pair (committed for "
            f"{', '.join(map(repr, trained))} only)")


def pair_has(kind: str, pair_name: str) -> bool:
    """Whether the pair named ``pair_name`` has drafter ``kind`` by :data:`TRAINED_FOR` (:func:`untrained_reason` is
    None): the rows a committed arena of that pair must hold. Raises ``ValueError`` for an unknown ``kind``."""
    return untrained_reason(kind, pair_name) is None


def check_has_draft(pair, what: str) -> None:
    """Raise ``ValueError`` naming ``what`` and the pair when ``pair`` has no draft model (``pair.draft`` is None, as
    for a target loaded alone): the draft model's runs need one. Raises ``TypeError`` when ``pair`` is not a
    :class:`lab.models.ModelPair` (it has no ``draft``, e.g. None)."""
    if not hasattr(pair, "draft") or not hasattr(pair, "name"):
        raise TypeError(f"{what} needs a model pair (lab.models.load_pair(...)), got {type(pair).__name__}")
    if pair.draft is None:
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
