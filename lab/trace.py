"""What one speculative step did: the record every view (widget, CLI, bench) consumes.

Algorithm code never plots; it calls ``on_step(record)`` once per target forward pass, as it happens.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Optional

import torch

from lab.validation import check_int, check_token_ids, check_unbounded_ids, is_integer

__all__ = ["StepRecord", "LAST_KINDS", "ACCEPTANCES", "OnStep", "Generation", "check_step_record", "step_records",
           "own_token_kind", "first_rejected_child"]


LAST_KINDS = ("resampled", "bonus")
"""What the target's token of a step was (:attr:`StepRecord.last_kind`)."""
ACCEPTANCES = ("exact", "typical")
"""The verification rules a step can record (:attr:`StepRecord.acceptance`)."""


@dataclass
class StepRecord:
    """One target call of the decode loop.

    - The first record of a generation is the **prefill** (``prefill`` True): the target's forward over the whole
      prompt, whose last position gives the first new token (drafted nothing, ``emitted`` that one token,
      ``last_kind`` ``"bonus"``, ``target_tokens`` the prompt's length, ``cache_before`` 0; the cache keeps every
      one of its entries). Its time is the generation's ``stats["prefill_ms"]`` (with the drafter's reset), not
      its own ``*_ms`` fields, which are 0: a sum over the records is decode time. Its ``prompt`` holds the
      prompt's token ids (a list of ints; None on every other record and on hand-built ones), so a viewer reused
      for another run can tell which prompt the run followed. Every later record is a decode step: ``[last
      token] + drafts`` through the target.

    - ``index``: 0-based step number; ``position``: new tokens committed before this step.
    - ``drafted``: the proposed token ids (empty for an autoregressive step or when the drafter had nothing).
    - ``num_accepted``: how many leading drafts the target accepted (for a tree: nodes on the accepted ``path``).
    - ``emitted``: accepted drafts + the one token the target adds, cut after EOS or at ``max_new_tokens``.
    - ``last_kind``: ``"resampled"`` when the target's token replaced a rejected draft (drawn from the residual
      distribution, or its argmax when greedy), ``"bonus"`` when every draft was accepted (including steps with
      no draft); ``truncated`` is True when EOS or ``max_new_tokens`` cut ``emitted`` short.
    - When a step is cut (``truncated``), ``num_accepted`` and ``last_kind`` still describe what verification
      decided, not what reached the output: ``num_accepted`` counts every accepted draft, also those after the
      EOS, and ``last_kind`` describes the target's token even though it was cut. So ``emitted`` is then a prefix
      of ``accepted drafts + [target's token]``, shorter than ``num_accepted + 1`` (``emitted[:num_accepted]``
      may hold fewer than ``num_accepted`` drafts), and the acceptance stats (:func:`lab.metrics.summarize_steps`)
      measure the drafter, independently of where EOS stopped the text; ``len(emitted)`` counts what was output.
      The target's KV cache keeps ``1 + num_accepted`` of the step's entries either way.
    - ``draft_ms``, ``verify_ms``: wall time of drafting and of the target forward + verification (ms);
      ``draft_calls``: draft forward passes spent this step; ``target_ms``: the target's forward alone, the part
      of ``verify_ms`` before verification starts (ms; on CUDA measured up to a synchronize).
    - ``target_probs`` ``[len(drafted)+1, V]`` and ``draft_probs`` ``[len(drafted), V]`` (float32, CPU), only when
      ``generate(record_probs=True)``: the distributions verification compared (for greedy runs, the untempered
      softmax, whose argmax verification used); ``draft_probs`` is None for a deterministic drafter.
    - ``target_tokens``: positions the target's forward processed this step (``1 + len(drafted)``, plus a
      Lookahead drafter's extra window tokens; 0 when unknown).
    - ``cache_before``: positions in the target's KV cache before this step's forward (None when unknown). The
      forward writes ``target_tokens`` entries; the rollback keeps ``1 + num_accepted`` of them.
    - ``draft_cache``: for a drafter with its own KV cache (``kv_length()``), its length before ``propose``, after
      ``propose`` and after ``update`` — ``(before, written, kept)`` as absolute lengths; None otherwise.
    - ``acceptance``: the verification rule that ran (:func:`lab.decode.generate`'s ``acceptance``, except that a
      "typical" request without a drafter or when greedy runs, and is recorded, as "exact"): ``"exact"`` (rejection
      sampling; a replaced draft is drawn from the residual distribution, or the argmax when greedy) or
      ``"typical"`` (Medusa's typical acceptance when sampling; a replaced draft is drawn from the target's own
      distribution, no residual).
    - ``parents``: for a token tree (Medusa, EAGLE trees; lesson 10) the parents array of ``drafted`` (see
      :mod:`lab.trees`), None for a chain; ``path``: the accepted draft indices in order (a chain's are
      ``0 .. num_accepted - 1`` and filled in when omitted; a tree record with accepted nodes must give its path,
      else ``ValueError``).

    A record is checked when built (a hand-built one too, as lessons and tests make them): ``ValueError`` or
    ``TypeError`` naming the field for an ``index``, ``position``, ``target_tokens`` or ``cache_before`` that is not
    an integer >= 0, ids that are not integers >= 0, ``num_accepted`` outside ``[0, len(drafted)]``, an
    ``acceptance`` other than "exact" / "typical", a ``last_kind`` other than "resampled" / "bonus" or one that
    contradicts the path ("bonus" exactly when the path's last node has no child), a bad ``parents`` array or one not
    of ``len(drafted)``, a ``path`` that is not a root-to-leaf path of ``num_accepted`` nodes, and an ``emitted``
    that is empty, longer than ``num_accepted + 1`` or not starting with the path's drafts.
    :func:`check_step_record` checks a record again (one changed after it was built).
    """

    index: int
    position: int
    drafted: list
    num_accepted: int
    emitted: list
    last_kind: str
    truncated: bool = False
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    draft_calls: int = 0
    target_probs: Optional[torch.Tensor] = field(default=None, repr=False)
    draft_probs: Optional[torch.Tensor] = field(default=None, repr=False)
    target_tokens: int = 0
    cache_before: Optional[int] = None
    draft_cache: Optional[tuple] = None
    parents: Optional[list] = None
    path: list = field(default_factory=list)
    target_ms: float = 0.0
    acceptance: str = "exact"
    prefill: bool = False
    prompt: Optional[list] = field(default=None, repr=False)

    def __post_init__(self):
        # every view trusts these fields; generate() builds them right, a hand-built record is checked here
        self.index = check_int("StepRecord index", self.index, 0)
        self.position = check_int("StepRecord position", self.position, 0)
        self.drafted = check_unbounded_ids("StepRecord drafted", self.drafted)
        self.emitted = check_token_ids("StepRecord emitted", self.emitted)  # a step emits at least one token
        self.num_accepted = check_int("StepRecord num_accepted (accepted drafts)", self.num_accepted, 0,
                                      len(self.drafted))
        if self.last_kind not in LAST_KINDS:
            raise ValueError(f"StepRecord last_kind must be one of {LAST_KINDS}, got {self.last_kind!r}")
        if self.acceptance not in ACCEPTANCES:
            raise ValueError(f"StepRecord acceptance must be one of {ACCEPTANCES}, got {self.acceptance!r}")
        self.target_tokens = check_int("StepRecord target_tokens", self.target_tokens, 0)
        if self.cache_before is not None:
            self.cache_before = check_int("StepRecord cache_before", self.cache_before, 0)
        if len(self.emitted) > self.num_accepted + 1:
            raise ValueError(f"StepRecord emitted holds {len(self.emitted)} tokens, but a step emits at most "
                             f"num_accepted + 1 = {self.num_accepted + 1} (the accepted drafts and the target's token)")
        if self.parents is not None:
            from lab.trees import check_parents

            self.parents = check_parents(self.parents)
            if len(self.parents) != len(self.drafted):
                raise ValueError(f"StepRecord parents has {len(self.parents)} entries for {len(self.drafted)} drafted "
                                 "tokens: one parent per draft node")
        self.path = _index_list(self.path)
        if not self.path and self.num_accepted:
            if self.parents is not None:  # a tree's accepted nodes need not be the first ones
                raise ValueError(f"a token-tree record (parents given) with num_accepted={self.num_accepted} needs "
                                 "its path: the indices of the accepted nodes, root to leaf")
            self.path = list(range(self.num_accepted))
        self._check_path()

    def _check_path(self) -> None:
        path = self.path
        if not all(is_integer(i) and 0 <= i < len(self.drafted) for i in path):
            raise ValueError(f"StepRecord path must hold indices into drafted, integers in [0, {len(self.drafted)}), "
                             f"got {path!r}")
        self.path = [int(i) for i in path]
        if len(self.path) != self.num_accepted:
            raise ValueError(f"StepRecord path lists {len(self.path)} accepted nodes but num_accepted is "
                             f"{self.num_accepted}")
        parents = list(range(-1, len(self.drafted) - 1)) if self.parents is None else self.parents
        above = -1
        for node in self.path:  # root to leaf: each node a child of the one before
            if parents[node] != above:
                raise ValueError(f"StepRecord path {self.path} is not a root-to-leaf path of the draft: node {node}'s "
                                 f"parent is {parents[node]}, not {above}")
            above = node
        end = self.path[-1] if self.path else -1
        expected = "resampled" if end in parents else "bonus"  # verification's rule (lab.verify)
        if self.last_kind != expected:
            why = ("a draft after the accepted ones was rejected" if expected == "resampled" else
                   "no draft was left to reject after the accepted ones")
            raise ValueError(f"StepRecord last_kind must be {expected!r} when {self.num_accepted} of "
                             f"{len(self.drafted)} drafts are accepted ({why}), got {self.last_kind!r}")
        accepted = [self.drafted[i] for i in self.path]
        if self.emitted[:self.num_accepted] != accepted[:len(self.emitted)]:
            raise ValueError(f"StepRecord emitted {self.emitted} must start with the accepted drafts {accepted} "
                             "(the drafted tokens on the path, in order)")

    @property
    def rejected(self) -> list:
        """Draft tokens the target did not accept (for a chain: the first one was rejected, the rest never
        checked; for a tree: every node off the accepted path)."""
        if self.parents is None:
            return self.drafted[self.num_accepted:]
        on_path = set(self.path)
        return [t for i, t in enumerate(self.drafted) if i not in on_path]

    @property
    def depth(self) -> int:
        """Longest draft continuation this step offered: ``len(drafted)`` for a chain, the tree's depth for a
        tree (the most tokens the step could accept)."""
        if self.parents is None:
            return len(self.drafted)
        from lab.trees import depths

        return int(depths(self.parents).max()) + 1 if self.parents else 0


def _index_list(path) -> list:
    """A record's ``path`` as a list (a tensor or NumPy array of indices too); ``TypeError`` for text, a mapping or
    set, or a non-iterable."""
    if isinstance(path, (str, bytes, dict, set, frozenset)) or not hasattr(path, "__iter__"):
        raise TypeError(f"StepRecord path must be a list of draft indices, got {type(path).__name__}")
    return path.tolist() if hasattr(path, "tolist") else list(path)


OnStep = Callable[[StepRecord], None]


@dataclass
class Generation:
    """Result of :func:`lab.decode.generate`: new token ids, one record per target call (the prefill's first, see
    :class:`StepRecord`), and summary stats."""

    tokens: list
    steps: list
    stats: dict

    @property
    def decode_steps(self) -> list:
        """The decode steps' records: ``steps`` without the prefill's. Per-step averages (time per step, tokens
        per target call) are taken over these, as :func:`lab.metrics.summarize_steps` does."""
        return [s for s in self.steps if not s.prefill]


def check_step_record(record, where: str) -> None:
    """Raise ``TypeError`` naming ``where`` unless ``record`` looks like a :class:`StepRecord` (it has ``drafted``,
    ``num_accepted`` and ``emitted``): what a widget passed as ``on_step=`` receives from :func:`lab.decode.generate`.
    Duck-typed, so a test's stand-in record passes too. A :class:`StepRecord` is checked again as when it was built
    (a field changed since, say): ``ValueError`` / ``TypeError`` naming ``where``, the step and the field."""
    if not all(hasattr(record, name) for name in ("drafted", "num_accepted", "emitted")):
        raise TypeError(f"{where} takes a step record (lab.trace.StepRecord, what generate(..., on_step=...) passes), "
                        f"got {type(record).__name__}")
    if isinstance(record, StepRecord):
        try:
            replace(record)  # a copy runs __post_init__'s checks: one set of rules for every record
        except (TypeError, ValueError) as error:
            raise type(error)(f"{where}: step {record.index}: {error}") from None


def step_records(records, where: str, fields=("drafted", "num_accepted", "emitted")) -> list:
    """``records`` as a list of step records: a finished :class:`Generation` gives its ``steps``, any other iterable
    (a generator works) its items. Raises ``TypeError`` naming ``where`` when ``records`` is not iterable or an item
    lacks one of ``fields`` (duck-typed: a stand-in with those attributes passes)."""
    if isinstance(records, Generation):
        return list(records.steps)
    try:
        records = list(records)
    except TypeError:
        raise TypeError(f"{where} takes step records (a Generation, or its .steps), got "
                        f"{type(records).__name__}") from None
    for index, record in enumerate(records):
        missing = [name for name in fields if not hasattr(record, name)]
        if missing:
            raise TypeError(f"{where}: item {index} is not a step record (lab.trace.StepRecord, what "
                            f"Generation.steps holds): {type(record).__name__} {record!r:.40} has no "
                            f"{', '.join(missing)}")
    return records


def own_token_kind(record) -> str:
    """How to show the target's own token of a step (the one after its accepted drafts): ``record.last_kind``
    ("bonus" after every draft was accepted, "resampled" after a rejection) when the step drafted something, else
    ``"target"``: the prefill, an autoregressive step or a lookup miss drafted nothing, so no bonus was earned, though
    ``last_kind`` says "bonus". Duck-typed: any record with ``drafted`` and ``last_kind``."""
    return record.last_kind if len(record.drafted) else "target"


def first_rejected_child(record) -> int | None:
    """For a token-tree step (``record.parents`` set) whose target replaced a draft (``last_kind`` "resampled"): the
    index in ``record.drafted`` of the first child of the accepted path's last node (-1, the committed text, when
    nothing was accepted), the draft a chain view strikes through; every child there was rejected before the target
    chose its own token. None for a chain, for a step whose path ended at a leaf (a bonus), or for a tree with no
    such child."""
    if record.parents is None or record.last_kind != "resampled":
        return None
    last = record.path[-1] if record.path else -1
    return next((i for i, parent in enumerate(record.parents) if parent == last), None)
