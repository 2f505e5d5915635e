"""Exercise checkers for lesson 11 (EAGLE's training pairs; EAGLE-2's reranking of a dynamic tree; what each MTP
module reads and predicts; EAGLE-3's d2t map).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import numpy as np
import torch

from lab.drafters.dynamic_tree import rerank
from lab.exercises.harness import (IN_PLACE_HINT, as_ints, check_on_lesson_device, checker, compare, Fail,
                                   fresh_args, outcome_of, run_case, same_tensor, show_value, unchanged)

__all__ = ["eagle_training_pairs", "reference_eagle_training_pairs", "mtp_depth_pairs", "reference_mtp_depth_pairs",
           "d2t_from_counts", "reference_d2t_from_counts", "keep_best_nodes", "reference_keep_best_nodes"]


def reference_eagle_training_pairs(hidden, ids):
    """The answer to the exercise: EAGLE's ``(features_in, tokens_in, feature_targets, token_targets)`` for
    ``hidden [L, D]`` and ``ids [L]``: ``hidden[:-2], ids[1:-1], hidden[1:-1], ids[2:]`` (L - 2 pairs). The lesson
    uses it while the exercise is unsolved."""
    return hidden[:-2], ids[1:-1], hidden[1:-1], ids[2:]


_PAIR_PARTS = (  # what each part holds, in the lesson's notation: the slice is the learner's to write
    ("features_in", "hidden", "f_j, the feature at each input position j = 0 … L-3 (the last two features have no "
                              "x_{j+2} to predict)"),
    ("tokens_in", "ids", "x_{j+1}, the token AFTER each input feature, for j = 0 … L-3"),
    ("feature_targets", "hidden", "f_{j+1}, the NEXT feature, for j = 0 … L-3"),
    ("token_targets", "ids", "x_{j+2}, the token the LM head of f_{j+1} predicts, for j = 0 … L-3"),
)


def _as_stacked(value):
    """A tensor from a tensor or a NumPy array, or from a list / tuple of tensors or numbers (a loop's output); None
    if none of these."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray) and value.dtype != object:  # the lesson's next cells take NumPy arrays too
        return torch.as_tensor(value)
    if isinstance(value, (list, tuple)):
        try:
            return torch.stack([torch.as_tensor(v) for v in value]) if value else torch.empty(0)
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


def _slice_name(value, source, name) -> str | None:
    """``"name[a:b]"`` if ``value`` equals a contiguous slice of ``source`` (None otherwise)."""
    length = source.shape[0]
    for a in range(length + 1):
        for b in range(a, length + 1):
            if same_tensor(value, source[a:b], atol=1e-6):
                start = "" if a == 0 else str(a)
                stop = "" if b == length else str(b - length)
                return f"{name}[{start}:{stop}]"
    return None


@checker
def eagle_training_pairs(fn):
    """Check ``fn(hidden [L, D], ids [L]) -> (features_in, tokens_in, feature_targets, token_targets)``: EAGLE's
    inputs (f_j, x_{j+1}) and targets (f_{j+1}, x_{j+2}) for j = 0 … L - 3. Slices or loops are both fine (a list
    of rows is stacked); a failure names the parts that are wrong and, when a part is another slice of its
    source, which slice it is, and says what the part should hold in the lesson's notation (not its slice)."""
    gen = torch.Generator().manual_seed(0)
    cases = []
    for length, dim in ((6, 4), (3, 2), (9, 5)):
        cases.append((torch.randn(length, dim, generator=gen), torch.randint(0, 50, (length,), generator=gen)))
    faults = [
        (lambda h, x: (h[:-2], x[:-2], h[1:-1], x[1:-1]),
         "pair the feature f_j with the NEXT token x_{j+1}: the feature cannot know which token was sampled after "
         "it, the token tells the draft (EAGLE's one-step-ahead input)."),
        (lambda h, x: (h[:-1], x[1:], h[1:], x[1:]),
         "the token target is x_{j+2}, the token AFTER the predicted feature f_{j+1} (the LM head of f_{j+1} "
         "predicts x_{j+2}); that leaves L - 2 pairs."),
        (lambda h, x: (h[:-2], x[1:-1], h[:-2], x[2:]),
         "the feature target is the NEXT feature f_{j+1}, not the input f_j."),
    ]

    def same(a, b):
        return (isinstance(a, (tuple, list)) and len(a) == 4
                and all(same_tensor(_as_stacked(u), v, atol=1e-6) for u, v in zip(a, b)))

    for hidden, ids in cases:  # name the wrong parts instead of printing four tensors
        copies = fresh_args((hidden, ids))
        outcome = run_case(fn, copies)
        edited = [name for name, before, after in zip(("hidden", "ids"), (hidden, ids), copies)
                  if not unchanged(before, after)]
        if edited:  # the slices it returned are of the edited tensor: the parts would be blamed instead
            raise Fail(f"eagle_training_pairs(hidden [{hidden.shape[0]}, {hidden.shape[1]}], ids={ids.tolist()}) "
                       f"changed {edited[0]} in place.\n  Hint: {IN_PLACE_HINT}")
        if outcome[0] != "ok":
            continue  # compare below reports the exception
        got, want = outcome[1], reference_eagle_training_pairs(hidden, ids)
        call = f"eagle_training_pairs(hidden [{hidden.shape[0]}, {hidden.shape[1]}], ids={ids.tolist()})"
        if got is None:
            raise Fail(f"{call} returned None.\n  Hint: did you forget a `return` statement?")
        if not isinstance(got, (tuple, list)) or len(got) != 4:
            raise Fail(f"{call} returned {type(got).__name__}"
                       + (f" of {len(got)} items" if isinstance(got, (tuple, list)) else "")
                       + "; return four things: (features_in, tokens_in, feature_targets, token_targets).")
        wrong = [k for k in range(4) if not same_tensor(_as_stacked(got[k]), want[k], atol=1e-6)]
        if not wrong:
            continue
        lines = []
        for k in wrong:
            part, source_name, meaning = _PAIR_PARTS[k]
            value = _as_stacked(got[k])
            source = hidden if source_name == "hidden" else ids
            found = None if value is None else _slice_name(value, source, source_name)
            if found is None and value is not None:
                other = ids if source_name == "hidden" else hidden
                found = _slice_name(value, other, "ids" if source_name == "hidden" else "hidden")
            what = found or (f"a {type(got[k]).__name__}" if value is None else f"a tensor of shape "
                                                                               f"{tuple(value.shape)}")
            lines.append(f"{part} is {what}; expected {meaning}")
        fault_hint = next((hint for fault, hint in faults
                           if all(same_tensor(_as_stacked(u), v, atol=1e-6)
                                  for u, v in zip(got, fault(hidden, ids)))), None)
        message = f"{call}: {len(wrong)} of the four parts {'is' if len(wrong) == 1 else 'are'} wrong.\n  " + \
            "\n  ".join(lines)
        if fault_hint:
            message += f"\n  Hint: {fault_hint}"
        raise Fail(message)

    def show(c):
        return f"hidden [{c[0].shape[0]}, {c[0].shape[1]}], ids={c[1].tolist()}"

    count = compare("eagle_training_pairs", fn, cases, reference_eagle_training_pairs, faults, same,
                    "for j = 0 … L-3: inputs (hidden[j], ids[j+1]), targets (hidden[j+1], ids[j+2]) — slices or a "
                    "loop, either works.",
                    show_args=show)
    check_on_lesson_device("eagle_training_pairs", fn, cases[0], show)  # the lesson pairs the target's features
    return f"{count} windows paired as EAGLE trains: feature + next token in, next feature and the token after out"


def reference_mtp_depth_pairs(ids, depth):
    """The answer to exercise 3: for MTP module ``depth`` = k on a window ``ids [T]``, ``(tokens_in, token_targets)``
    = ``(ids[k:-1], ids[k + 1:])``: row i reads t_{i+k} (with h^{k-1}_i) and its head predicts t_{i+k+1}, for the
    T - k - 1 rows that have a target (DeepSeek-V3 technical report, §2.2; ``lab.drafters.mtp.MTPHeads.forward``
    builds the same rows)."""
    return ids[depth:-1], ids[depth + 1:]


@checker
def mtp_depth_pairs(fn):
    """Check ``fn(ids [T], depth) -> (tokens_in, token_targets)``: what MTP module k = ``depth`` reads and predicts at
    each row of a teacher-forced window. Planted mistakes: depth ignored (every module reads t_{i+1}), the token
    read one place early, the target equal to the token read, a read fixed at t_{i+1} while the target moves k
    ahead, and both slices one place early or late. Two parts of unequal lengths are named as such."""
    gen = torch.Generator().manual_seed(11)
    cases = [(torch.randint(0, 50, (length,), generator=gen), depth)
             for length, depth in ((6, 1), (6, 2), (9, 3), (4, 2), (5, 3), (8, 2))]
    faults = [
        (lambda x, k: (x[1:-1], x[2:]),
         "the depth matters: module k at row i reads t_{i+k}, k tokens after the row's own, and predicts "
         "t_{i+k+1}; only module 1 reads t_{i+1}."),
        (lambda x, k: (x[k - 1:-2], x[k + 1:]),
         "module k reads the token just before the one it predicts, t_{i+k}, not t_{i+k-1}: the token read and its "
         "target are neighbours, so the two slices start one place apart, not two."),
        (lambda x, k: (x[k:-1], x[k:-1]),
         "the target is the NEXT token after the one read: row i reads t_{i+k} and predicts t_{i+k+1}."),
        (lambda x, k: (x[1:len(x) - k], x[k + 1:]),
         "row i reads t_{i+1} but is scored on t_{i+k+1}, so the tokens in between go unseen: module k reads "
         "t_{i+k}, the true token right before its target, as the chain of modules feeds each one the previous "
         "depth's token."),
        (lambda x, k: (x[k - 1:-1], x[k:]),
         "both parts start one place early: that is module k - 1's pairing (for depth 1, the main model's own "
         "next-token pairs). Module k at row i reads t_{i+k}, k tokens after the row's own, and predicts t_{i+k+1}."),
        (lambda x, k: (x[k + 1:-1], x[k + 2:]),
         "both parts start one place late, so the first pair is lost: module k at row i reads t_{i+k}, k tokens "
         "after the row's own token t_i (module 1 reads t_{i+1}), not t_{i+k+1}."),
    ]

    def same(a, b):
        return isinstance(a, (tuple, list)) and len(a) == 2 and all(
            same_tensor(torch.as_tensor(u) if not isinstance(u, torch.Tensor) else u, v, atol=0)
            for u, v in zip(a, b))

    def show_mtp(c):
        return f"ids={c[0].tolist()}, depth={c[1]}"

    def length(part):
        try:
            return len(part)
        except TypeError:  # a 0-d tensor, a number: compare reports the answer
            return None

    for case in cases:  # two parts of different lengths: say so before any slice is blamed
        outcome = outcome_of(fn, case)
        if outcome[0] != "ok" or not isinstance(outcome[1], (tuple, list)) or len(outcome[1]) != 2:
            continue
        read, targets = (length(part) for part in outcome[1])
        if read is not None and targets is not None and read != targets:
            raise Fail(f"mtp_depth_pairs({show_mtp(case)}) returned {show_value(tuple(outcome[1]))}: {read} tokens "
                       f"read but {targets} targets.\n  Hint: the two slices of ids must have the same length, one "
                       "entry per row (the token the row reads and the token it predicts): the last token of the "
                       "window has no target after it, so no row reads it.")

    count = compare("mtp_depth_pairs", fn, cases, reference_mtp_depth_pairs, faults, same,
                    "module k = depth at row i reads the token k places after the row's own one and is scored on "
                    "the token right after that: which positions of ids pair up, and how long can both slices be "
                    "(every row needs a target)?",
                    show_args=show_mtp)
    check_on_lesson_device("mtp_depth_pairs", fn, cases[1], show_mtp)
    return f"{count} windows: module k reads t(i+k) and predicts t(i+k+1), as MTPHeads.forward trains it"


def reference_d2t_from_counts(counts, size):
    """The answer to exercise 4: EAGLE-3's ``d2t`` map for a draft vocabulary of the ``size`` most frequent tokens.

    ``counts``: LongTensor ``[V]``, how often each target id occurs in the draft's training data. Picks the ``size``
    ids with the highest counts (ties: the smaller id first), sorts them ascending and returns LongTensor ``[size]``
    with ``d2t[i] = id_i - i``, so that draft id i is target id ``i + d2t[i]``. That is the layout of the official
    checkpoints: the EAGLE repository's EAGLE-3 training data code (``eagle/traineagle3/cnets.py``) counts tokens,
    keeps ``most_common(N)``, sorts them and stores the offsets; SpecForge does the same, and vLLM's and SGLang's
    EAGLE-3 models add ``d2t`` to the draft's argmax to get the target id. (``Counter.most_common`` breaks ties by
    first occurrence; the exercise takes the smaller id, so that every answer is unique.)"""
    counts = torch.as_tensor(counts)
    order = torch.sort(-counts, stable=True).indices  # stable: equal counts keep id order
    chosen = order[:size].sort().values
    return chosen - torch.arange(size)


def _top_ids(counts, size, smaller_first=True):
    """The ``size`` most frequent ids of ``counts``, ascending; ties at the cut go to the smaller id (or the larger)."""
    if smaller_first:
        return torch.sort(-counts, stable=True).indices[:size].sort().values
    flipped = torch.sort(-counts.flip(0), stable=True).indices[:size]
    return (counts.numel() - 1 - flipped).sort().values


@checker
def d2t_from_counts(fn):
    """Check ``fn(counts [V], size) -> d2t [size]`` (exercise 4): the ``size`` most frequent target ids (ties: the
    smaller id), sorted ascending, stored as offsets ``d2t[i] = id_i - i``. Planted mistakes: the ids themselves,
    the offsets with the sign flipped, the draft id added instead of subtracted, the ids in frequency order, the
    least frequent ids, and ties broken towards the larger id."""
    gen = torch.Generator().manual_seed(3)
    cases = [(torch.tensor([5, 0, 9, 2, 9, 1, 0, 7]), 3),     # 9 and 9 tie inside the cut, 7 is third
             (torch.tensor([4, 4, 1, 4, 0, 2]), 2),           # three 4s tie across the cut: the two smaller ids
             (torch.tensor([0, 3, 0, 3, 8, 0, 3, 1, 0]), 4),   # 8, then three 3s, nothing left for the rest
             (torch.tensor([2, 7, 1]), 3),                     # the whole vocabulary: d2t is all zeros
             (torch.tensor([1, 0, 0, 6]), 1),
             (torch.randint(0, 40, (50,), generator=gen), 12),
             (torch.randint(0, 5, (30,), generator=gen), 9),   # many ties
             (torch.tensor([0, 3, 0, 0, 5, 0]), 4),             # more places than ids that occur: zeros fill them
             (torch.tensor([0, 0, 2, 0, 0, 0, 0, 1]), 5)]
    faults = [
        (lambda c, n: _top_ids(c, n),
         "store offsets, not ids: an engine turns draft id i back into target id i + d2t[i], so d2t[i] holds how "
         "far the i-th chosen id lies from i."),
        (lambda c, n: torch.arange(n) - _top_ids(c, n),
         "the sign is flipped: the target id is draft id + d2t, so d2t[i] = id_i - i (never negative once the ids "
         "are sorted)."),
        (lambda c, n: _top_ids(c, n) + torch.arange(n),
         "d2t[i] = id_i - i: subtract the draft id i from the target id, do not add it (the engine adds d2t[i] to "
         "the draft id to get the target id back)."),
        (lambda c, n: torch.sort(-c, stable=True).indices[:n] - torch.arange(n),
         "sort the chosen ids ascending before taking offsets, as the official checkpoints do; frequency order maps "
         "draft ids to the same set of tokens, but it is not their layout (sorted, d2t never decreases)."),
        (lambda c, n: torch.sort(c, stable=True).indices[:n].sort().values - torch.arange(n),
         "keep the MOST frequent tokens: the draft can only propose tokens inside its vocabulary, so it should be "
         "the ones the target writes most often (sort the counts descending)."),
        (lambda c, n: _top_ids(c, n, smaller_first=False) - torch.arange(n),
         "when counts tie at the cut, take the smaller id first: is your sort stable? (torch.topk and an unstable "
         "sort promise no order among equal counts.)"),
    ]

    def as_ids(value):  # a tensor, list or NumPy array of ints
        try:
            return value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            return None

    def same(a, b):
        got = as_ids(a)
        return got is not None and same_tensor(got, b, atol=0)

    for counts, size in cases:  # a tie broken the other way (torch.topk, an unstable sort): say so at once
        outcome = outcome_of(fn, (counts.clone(), size))
        got = as_ids(outcome[1]) if outcome[0] == "ok" else None
        if got is None or got.shape != (size,) or same(got, reference_d2t_from_counts(counts, size)):
            continue
        if any(same(got, fault(counts, size)) for fault, _hint in faults):
            continue  # a planted mistake (the sign of the offsets, say): compare's hint names it
        chosen = torch.arange(size) + got.long()
        want = torch.arange(size) + reference_d2t_from_counts(counts, size)
        if set(chosen.tolist()) == set(want.tolist()):
            continue  # the right ids in another order: compare's hints below say which
        if ((chosen >= 0) & (chosen < counts.numel())).all() and chosen.unique().numel() == size and torch.equal(
                counts[chosen].sort().values, counts[want].sort().values):
            raise Fail(f"d2t_from_counts(counts={counts.tolist()}, size={size}) picks target ids {chosen.tolist()}, "
                       f"expected {want.tolist()}: the same counts, other ids.\n  Hint: when counts tie at the cut, "
                       "take the smaller id first: is your sort stable? (torch.topk and an unstable sort promise no "
                       "order among equal counts.)")

    count = compare("d2t_from_counts", fn, cases, reference_d2t_from_counts, faults, same,
                    "which ids make the draft vocabulary (the size most frequent; ties to the smaller id, and ids "
                    "that never occur tie at 0 and fill the remaining places), in which order are they stored, and "
                    "what does d2t[i] hold for draft id i (the step from i to its target id)?",
                    show_args=lambda c: f"counts={c[0].tolist()}, size={c[1]}")
    answers = [outcome_of(fn, (counts.clone(), size)) for counts, size in cases]
    floats = [got for got in (as_ids(a[1]) if a[0] == "ok" else None for a in answers)
              if got is not None and (got.is_floating_point() or got.is_complex())]
    if floats:
        got = floats[0]
        raise Fail(f"the values are right, but d2t_from_counts returned {got.dtype} offsets.\n  Hint: return integer "
                   "offsets (a torch.long tensor, as the official EAGLE-3 checkpoints store d2t): an engine adds "
                   "d2t[i] to the draft's integer token id, and a float id cannot index an embedding.")
    return (f"{count} vocabularies mapped: draft id i is target id i + d2t[i], the layout of the official EAGLE-3 "
            "checkpoints")


def reference_keep_best_nodes(values, parents, count):
    """The answer to the reranking exercise (EAGLE-2, Li et al. 2024, §4.2; SGLang's ``organize_draft_results``):
    of the drafted nodes, values ``[C]`` (each the product of the draft's probabilities along its path) and
    ``parents`` (C ints, -1 for a child of the root, else an earlier node), keep the ``count`` of highest value
    (ties: the earlier node) and return ``(kept, new_parents)``: the kept node indices in drafting order, and the
    tree's parents array over them (a kept node's parent as its position in ``kept``, -1 at the root). A child's
    value never exceeds its parent's, so every kept node's parent is kept
    (:func:`lab.drafters.dynamic_tree.rerank`)."""
    kept = rerank(torch.as_tensor(values, dtype=torch.float64), list(parents), count)
    return kept, _renumbered(kept, parents)


def _grown_tree(gen, levels: int, topk: int) -> tuple:
    """Values and parents of a tree grown as EAGLE-2 expands one: ``topk`` children of the root, then ``topk``
    children of each of the ``topk`` best nodes of the level before, values = products of random probabilities."""
    values, parents = [], []
    frontier = [(-1, 1.0)]
    for _ in range(levels):
        level = []
        for parent, value in frontier:
            probs = torch.rand(topk, generator=gen)
            probs = (probs / probs.sum() * 0.9).sort(descending=True).values
            for p in probs.tolist():
                parents.append(parent)
                values.append(value * p)
                level.append((len(values) - 1, value * p))
        frontier = sorted(level, key=lambda node: -node[1])[:topk]
    return torch.tensor(values), parents


def _renumbered(kept, parents):
    """Each kept node's parent as its position in ``kept`` (-1 at the root, and for a parent not kept: the planted
    mistakes may drop one)."""
    row = {node: i for i, node in enumerate(kept)}
    return [row.get(parents[node], -1) if parents[node] >= 0 else -1 for node in kept]


@checker
def keep_best_nodes(fn):
    """Check ``fn(values [C], parents, count) -> (kept, new_parents)`` (the reranking exercise): the ``count`` nodes
    of highest value (ties: the earlier node), in drafting order, with their parents renumbered as positions in
    ``kept``. Planted mistakes: kept in value order, parents left as the old indices, ties to the later node, the
    lowest values, the first ``count`` nodes drafted whatever their value, the two lists swapped, one node too few or
    too many, the root written as 0, and positions counted from 1."""
    gen = torch.Generator().manual_seed(11)
    cases = [(torch.tensor([0.6, 0.3, 0.36, 0.12, 0.09, 0.2]), [-1, -1, 0, 0, 1, 2], 4),
             (torch.tensor([0.5, 0.5, 0.25, 0.25]), [-1, 0, 1, 0], 3),   # a child the draft is sure of; a tie
             (torch.tensor([0.4, 0.4]), [-1, 0], 1),                     # the tie: the parent, never its child alone
             (torch.tensor([0.7, 0.2, 0.35, 0.3]), [-1, -1, 0, 2], 4),   # every node
             (torch.tensor([0.1, 0.8, 0.6, 0.05]), [-1, -1, 1, 1], 1),
             (torch.tensor([0.1, 0.8, 0.6, 0.05]), [-1, -1, 1, 1], 3),
             (torch.tensor([0.6, 0.1, 0.4, 0.3, 0.05]), [-1, -1, 0, 2, 1], 3)]  # node 1 dropped: 3's parent is row 1
    for levels, topk, count in ((3, 2, 6), (4, 3, 9), (5, 4, 7)):
        cases.append((*_grown_tree(gen, levels, topk), count))
    # 40 children of the root that tie (SGLang's default tree drafts about 68 nodes): an unstable sort keeps ties
    # in order up to 16 elements on CPU, not from 32 on
    cases.append((torch.full((40,), 0.02), [-1] * 40, 10))

    def by_value(v, p, n, later_first=False):
        order = sorted(range(len(v)), key=lambda i: (-float(v[i]), -i if later_first else i))
        return order[:n]

    faults = [
        (lambda v, p, n: (by_value(v, p, n), _renumbered(by_value(v, p, n), p)),
         "return the kept nodes in drafting order (sorted by index), not by value: a parents array lists each node "
         "after its parent, and the drafting order guarantees that."),
        (lambda v, p, n: (sorted(by_value(v, p, n)), [p[i] for i in sorted(by_value(v, p, n))]),
         "renumber the parents: the verifier sees only the kept nodes, so a kept node's parent is its parent's "
         "position in kept (-1 for a child of the root), not its index among all drafted nodes."),
        (lambda v, p, n: (sorted(by_value(v, p, n, True)), _renumbered(sorted(by_value(v, p, n, True)), p)),
         "when values tie, keep the earlier node: is your sort stable? (torch.topk promises no order among equal "
         "values.) A child the draft is sure of ties with its parent, and keeping the later one could leave a "
         "child without its parent."),
        (lambda v, p, n: (sorted(by_value([-float(x) for x in v], p, n)),
                          _renumbered(sorted(by_value([-float(x) for x in v], p, n)), p)),
         "keep the nodes of HIGHEST value: the value estimates the chance that the target accepts the whole path."),
        (lambda v, p, n: (list(range(n)), _renumbered(list(range(n)), p)),
         "rank the nodes by value over the whole tree: the first count nodes drafted fill the first levels, "
         "however unlikely they are, which is a static tree's choice."),
        (lambda v, p, n: tuple(reversed(reference_keep_best_nodes(v, p, n))),
         "return (kept, new_parents) in that order: the kept node indices first, their parents array second."),
        # sliced, not the reference at count -/+ 1, which refuses 0 and counts past the tree as the learner's
        # slice does not
        (lambda v, p, n: (sorted(by_value(v, p, n - 1)), _renumbered(sorted(by_value(v, p, n - 1)), p)),
         "keep exactly count nodes: kept has count entries, one fewer here."),
        (lambda v, p, n: (sorted(by_value(v, p, n + 1)), _renumbered(sorted(by_value(v, p, n + 1)), p)),
         "keep exactly count nodes: kept has count entries, one more here."),
        (lambda v, p, n: (reference_keep_best_nodes(v, p, n)[0],
                          [max(q, 0) for q in reference_keep_best_nodes(v, p, n)[1]]),
         "a child of the root gets parent -1; 0 is the position of the first kept node, so a 0 makes the node "
         "a child of that node."),
        (lambda v, p, n: (reference_keep_best_nodes(v, p, n)[0],
                          [q + 1 for q in reference_keep_best_nodes(v, p, n)[1]]),
         "positions in kept count from 0 and the root is -1: the first kept node is position 0, as in the "
         "parents arrays of lab.trees (the root is not a row of kept)."),
        (lambda v, p, n: (reference_keep_best_nodes(v, p, n)[0],
                          [q + 1 if q >= 0 else q for q in reference_keep_best_nodes(v, p, n)[1]]),
         "positions in kept count from 0: the first kept node is position 0, so its children get parent 0."),
    ]

    def as_answer(value):  # (kept, new_parents) as two lists of ints, or None
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            return None
        kept, new_parents = as_ints(value[0]), as_ints(value[1])
        return None if kept is None or new_parents is None else (kept, new_parents)

    def same(a, b):
        return as_answer(a) is not None and as_answer(a) == as_answer(b)

    def show_tree(c):
        return f"values={[round(float(v), 4) for v in c[0]]}, parents={c[1]}, count={c[2]}"

    for case in cases:  # a return value of another shape is named as such (None is left to compare's hint)
        outcome = outcome_of(fn, fresh_args(case))
        if outcome[0] == "ok" and outcome[1] is not None and as_answer(outcome[1]) is None:
            raise Fail(f"keep_best_nodes(values=..., parents={case[1]}, count={case[2]}) returned "
                       f"{type(outcome[1]).__name__} {outcome[1]!r}: return two lists of whole numbers, (kept, "
                       "new_parents): the kept nodes' indices (not their values or a mask) and their parents' "
                       "positions in kept.")
        if outcome[0] == "raise" and outcome[1] == "KeyError":  # renumbering looked up what it did not store
            if outcome[2] == "-1":
                why = ("-1 is the root's mark, not a kept node: a child of the root gets -1 without a lookup "
                       "(look up only parents >= 0).")
            else:
                why = ("either that parent was not kept (with the highest values kept and ties going to the earlier "
                       "node, every kept node's parent is kept: a child's value never exceeds its parent's), or the "
                       "table's keys are not the plain ints you look up (0-d tensors from iterating a tensor: "
                       ".tolist() first).")
            raise Fail(f"keep_best_nodes({show_tree(case)}) raised KeyError: {outcome[2]}.\n  Hint: a lookup of a "
                       f"kept node's parent failed: {why}")
        got = as_answer(outcome[1]) if outcome[0] == "ok" and outcome[1] is not None else None
        want = reference_keep_best_nodes(*case)
        later = sorted(by_value(case[0], case[1], case[2], later_first=True))  # a planted fault: its own hint

        def values_of(nodes, values=case[0]):
            return sorted(float(values[i]) for i in nodes if 0 <= i < len(values))

        if (got is not None and got[0] != later and len(set(got[0])) == len(got[0]) == case[2]
                and set(got[0]) != set(want[0]) and values_of(got[0]) == values_of(want[0])):
            raise Fail(f"keep_best_nodes({show_tree(case)}) kept nodes {got[0]}, expected {want[0]}: the same "
                       "values, other nodes.\n  Hint: ties must keep the earlier node first: is your sort stable? "
                       "torch.topk and an unstable argsort keep equal values in drafting order only on small "
                       "inputs.")

    count = compare("keep_best_nodes", fn, cases, reference_keep_best_nodes, faults, same,
                    "which count nodes does the verifier get (the highest values; a tie goes to the earlier node), "
                    "in which order does a parents array list them, and how is a kept node's parent named once only "
                    "the kept nodes are left (-1 still marks the root)?",
                    show_args=show_tree)
    check_on_lesson_device("keep_best_nodes", fn, cases[0], show_tree)  # the lesson reranks the target's tree
    return (f"{count} trees reranked: the kept nodes form a tree the target can verify in one forward, as SGLang's "
            "organize_draft_results builds it, with ties to the earlier node")
