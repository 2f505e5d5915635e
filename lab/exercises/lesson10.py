"""Exercise checkers for lesson 10 (Medusa's loss, token trees and tree attention, tokens per call).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import inspect

import torch

from lab.exercises.harness import (a_type, check_on_lesson_device, checker, compare, Fail, outcome_of, same_float,
                                   same_ints, same_tensor, want_token_list)
from lab.trees import depths, tree_attention_mask
from lab.trees import position_ids as _ref_position_ids
from lab.verify import verify_tree_greedy

__all__ = ["medusa_loss", "tree_positions", "tree_mask", "accepted_path", "tokens_per_call", "reference_medusa_loss",
           "reference_tokens_per_call"]


# (parents, prefix_len): a chain, the lesson's example, Medusa-like wide trees, a deep branch, one node.
_TREES = [
    ([-1, 0, 1, 2], 3),
    ([-1, -1, 1], 5),
    ([-1, -1, -1, 0, 0, 1, 3], 4),
    ([-1, 0, 0, 1, 2, 4, 4], 1),
    ([-1, -1, 0, 1, 2, 3, 4, 5], 10),
    ([-1], 7),
]


# ---------------------------------------------------------------------------------------------------------
# Lesson 10: tree geometry.

def reference_medusa_loss(logits, tokens, decay=0.8):
    """Medusa-1's loss (Cai et al. 2024, §2.1.1): sum over heads k = 1..K of decay^k × the mean cross-entropy of head
    k at position t against token t + 1 + k. ``logits`` float [B, T, K, V], ``tokens`` Long [B, T]."""
    import torch.nn.functional as F

    loss = logits.new_zeros(())
    for k in range(1, logits.size(2) + 1):
        span = tokens.size(1) - 1 - k                       # positions t that have a token at t + 1 + k
        loss = loss + decay ** k * F.cross_entropy(logits[:, :span, k - 1].reshape(-1, logits.size(-1)),
                                                   tokens[:, 1 + k:].reshape(-1))
    return loss


def _medusa_cases():
    gen = torch.Generator().manual_seed(10)
    cases = []
    for batch, length, heads, vocab, decay in ((2, 6, 3, 7, 0.8), (1, 5, 1, 4, 0.8), (3, 8, 2, 5, 0.5),
                                               (2, 7, 3, 6, 1.0)):
        logits = 2 * torch.randn(batch, length, heads, vocab, generator=gen)
        tokens = torch.randint(0, vocab, (batch, length), generator=gen)
        cases.append((logits, tokens, decay))
    # The lesson trains on labels with -100 where nothing is to be learnt (the prompt, tokens outside the heads'
    # draft vocabulary): F.cross_entropy skips them, and so must the loss.
    logits = 2 * torch.randn(2, 7, 3, 6, generator=gen)
    tokens = torch.randint(0, 6, (2, 7), generator=gen)
    tokens[0, :3] = -100
    tokens[1, 5] = -100
    cases.append((logits, tokens, 0.8))
    return cases


_MEDUSA_CASES = _medusa_cases()


def _medusa_variant(kind):
    """Planted mistakes in the Medusa-1 loss."""
    import torch.nn.functional as F

    def variant(logits, tokens, decay=0.8):
        loss = logits.new_zeros(())
        heads = logits.size(2)
        for k in range(1, heads + 1):
            # "offset": head k scored against token t + k; "zero_based": k counted from 0, offset and weight both short
            shift = k if kind in ("offset", "zero_based") else 1 + k
            span = tokens.size(1) - shift
            weight = {"exponent": decay ** (k - 1), "zero_based": decay ** (k - 1), "no_decay": 1.0,
                      "fixed_decay": 0.8 ** k}.get(kind, decay ** k)
            if kind == "shift_logits":  # the later logits against the earlier tokens: the pairing reversed
                ce = F.cross_entropy(logits[:, shift:, k - 1].reshape(-1, logits.size(-1)),
                                     tokens[:, :span].reshape(-1))
            elif kind == "ignored_in_mean":  # the -100 positions count in the mean's denominator
                ce = F.cross_entropy(logits[:, :span, k - 1].reshape(-1, logits.size(-1)),
                                     tokens[:, shift:].reshape(-1), reduction="none").mean()
            elif kind in ("softmax_first", "nll_raw"):  # probabilities into cross_entropy; raw logits into nll_loss
                scores = logits[:, :span, k - 1].reshape(-1, logits.size(-1))
                ce = (F.cross_entropy(scores.softmax(-1), tokens[:, shift:].reshape(-1)) if kind == "softmax_first"
                      else F.nll_loss(scores, tokens[:, shift:].reshape(-1)))
            else:
                ce = F.cross_entropy(logits[:, :span, k - 1].reshape(-1, logits.size(-1)),
                                     tokens[:, shift:].reshape(-1), reduction="sum" if kind == "sum" else "mean")
            loss = loss + weight * ce
        return loss / heads if kind == "average" else loss
    return variant


@checker
def medusa_loss(fn):
    """Check ``fn(logits, tokens, decay=0.8) -> loss`` (a 0-d tensor that carries the logits' gradient, since the
    lesson trains with it): Medusa-1's training loss,
    ``logits`` float ``[B, T, K, V]`` (head k's logits at position t in ``[:, t, k - 1]``), ``tokens`` Long
    ``[B, T]``; sum over k of decay^k × the mean cross-entropy of head k at t against token t + 1 + k (Cai et al.
    2024, §2.1.1; lesson 10)."""
    faults = [
        (_medusa_variant("zero_based"), "count the heads from 1, as the formula does: head k (logits[:, :, k - 1]) "
                                        "is weighted decay ** k and scored against token t + 1 + k. With k from "
                                        "range(K) the weight and the offset are both one short: use "
                                        "range(1, K + 1), or k + 1 wherever the formula says k."),
        (_medusa_variant("offset"), "head k predicts token t + 1 + k: the target's own head already predicts "
                                    "t + 1, so head 1 looks one token further than it."),
        (_medusa_variant("exponent"), "weight head k by decay ** k (k = 1 for the first head): Medusa-1's λ_k."),
        (_medusa_variant("no_decay"), "weight each head's cross-entropy by decay ** k: later heads are less sure, "
                                      "and their mistakes count less."),
        (_medusa_variant("fixed_decay"), "weight head k by decay ** k with the decay argument, not a fixed 0.8: the "
                                         "lesson and these cases pass other decays (0.5, 1.0)."),
        (_medusa_variant("shift_logits"), "pair each position's logits with a LATER token, 1 + k places ahead: "
                                          "cut the last positions of the logits and the first tokens. Shifting the "
                                          "logits the other way scores head k at t + 1 + k against the token at t, "
                                          "which lies behind it."),
        (_medusa_variant("softmax_first"), "F.cross_entropy takes the raw logits: it applies log-softmax itself, so "
                                           "a softmax before it squashes every loss towards log V. Pass the logits "
                                           "as they are."),
        (_medusa_variant("nll_raw"), "F.nll_loss expects log-probabilities: on raw logits it only negates the "
                                     "target's logit. Apply log_softmax first, or use F.cross_entropy on the "
                                     "logits, which does both."),
        (_medusa_variant("average"), "add the weighted cross-entropies up; do not divide by the number of heads."),
        (_medusa_variant("sum"), "take the MEAN cross-entropy over the positions (F.cross_entropy's default), not "
                                 "the sum."),
        (_medusa_variant("ignored_in_mean"), "a label of -100 means 'nothing to learn here': leave those positions "
                                             "out of the mean too, dividing by the labelled positions only (what "
                                             "F.cross_entropy's default ignore_index=-100 with reduction='mean' "
                                             "does), not by every position."),
    ]

    def same(a, b):
        return same_float(a, b, rel=1e-5, abs_=1e-6)

    # The lesson trains with the result (loss.backward()), so it must stay a tensor attached to the logits.
    logits, tokens, decay = _MEDUSA_CASES[0]
    outcome = outcome_of(fn, (logits.clone().requires_grad_(True), tokens, decay))
    if outcome[0] == "ok" and outcome[1] is not None:
        got = outcome[1]
        if not isinstance(got, torch.Tensor):
            raise Fail(f"medusa_loss returned {a_type(got)}; return the loss as a torch tensor.\n  Hint: "
                       "training calls loss.backward() on it, so keep it a tensor (no float(...) or .item()).")
        if got.grad_fn is None:
            raise Fail("medusa_loss returned a tensor with no gradient attached to the logits.\n  Hint: training "
                       "calls loss.backward() on it: compute it from the logits with torch operations, without "
                       ".item(), .detach() or torch.no_grad().")

    def show(args):
        return f"logits {list(args[0].shape)}, tokens {list(args[1].shape)}, decay={args[2]}"

    count = compare("medusa_loss", fn, _MEDUSA_CASES, reference_medusa_loss, faults, same,
                    "head k (the logits' head axis at k - 1) guesses the token 1 + k places after each position, "
                    "so pair each position with that later token and leave out the positions that have none; take "
                    "each head's mean cross-entropy over those positions (batch and time flattened into one axis; "
                    "a position labelled -100 counts nowhere, not even in the mean's denominator), weigh it by "
                    "decay to the power k, and add the heads up.",
                    show_args=show)
    # the lesson then trains with it on the target's features, on the GPU where there is one
    check_on_lesson_device("medusa_loss", fn, _MEDUSA_CASES[-1], show)
    return f"{count} losses right: head k against token t + 1 + k, weighted by decay^k"


def _flat_positions(parents, prefix_len):
    return [prefix_len + i for i in range(len(parents))]


@checker
def tree_positions(fn):
    """Check ``fn(parents, prefix_len) -> list[int]``: node positions ``prefix_len + depth - 1`` with depth 1 for
    the first level (``lab.trees.position_ids``). A tensor, tuple or iterator is refused: the lesson prepends the
    last token's position to the list."""
    faults = [
        (_flat_positions, "a node's position is where its token would sit in a plain sequence: prefix_len + its "
                          "DEPTH - 1, not its index in the flattened tree (siblings share a position)."),
        (lambda p, n: depths(p).tolist(), "add prefix_len: the positions continue after the committed tokens."),
        (lambda p, n: (depths(p) + n - 1).tolist(), "the last committed token sits at prefix_len - 1, so the "
                                                     "first level of nodes (depth 1) is at prefix_len."),
        (lambda p, n: (depths(p) + n + 1).tolist(), "the first level (depth 1, parent -1) sits right after the last "
                                                     "committed token: at prefix_len, not prefix_len + 1. Position "
                                                     "= prefix_len + depth - 1."),
    ]
    want_token_list("tree_positions", fn, _TREES[0], "[prefix_len + d - 1 for d in depths]",
                    "the lesson prepends the last committed token's position, [prefix_len - 1] + positions",
                    "int positions", tuples=False)
    count = compare("tree_positions", fn, _TREES, lambda p, n: _ref_position_ids(p, n).tolist(), faults,
                    same_ints, "position = prefix_len + depth - 1, with depth 1 for nodes whose parent is -1 and "
                               "the parent's depth + 1 otherwise.")
    return f"{count} trees positioned by depth; siblings share a position"


def _mask_variant(kind):
    def variant(parents, prefix_len):
        n = len(parents)
        if kind == "causal":
            mask = torch.ones(n, prefix_len + n, dtype=torch.bool)
            mask[:, prefix_len:] = torch.ones(n, n, dtype=torch.bool).tril()
            return mask
        mask = tree_attention_mask(parents, prefix_len).clone()
        if kind == "parent_only":
            for i, p in enumerate(parents):
                mask[i, prefix_len:] = False
                mask[i, prefix_len + i] = True
                if p >= 0:
                    mask[i, prefix_len + p] = True
        elif kind == "no_self":
            mask[torch.arange(n), prefix_len + torch.arange(n)] = False
        elif kind == "no_prefix":
            mask[:, :prefix_len] = False
        elif kind == "transposed":  # mask[ancestor, node] set instead of mask[node, ancestor]
            mask[:, prefix_len:] = mask[:, prefix_len:].T.clone()
        elif kind == "no_offset":  # node j's column taken as j, not prefix_len + j: the True entries land in the prefix
            tree = mask[:, prefix_len:].clone()
            mask[:, prefix_len:] = False
            mask[:, :n] |= tree
        elif kind == "self_off_by_one":  # node i's own entry at column prefix_len + i - 1
            mask[torch.arange(n), prefix_len + torch.arange(n)] = False
            mask[torch.arange(n), prefix_len + torch.arange(n) - 1] = True
        return mask
    return variant


def _mask_rows(mask) -> str:
    """A mask ``[n, prefix_len + n]`` as one row of 0/1 per node, a bar between the prefix and the tree columns
    (``111|1100``: three committed tokens, then nodes 0 and 1); raises on anything else (the message falls back to
    the plain value)."""
    rows, columns = mask.shape
    prefix_len = columns - rows
    if prefix_len < 0:
        raise ValueError("not a tree mask")
    bits = ["".join("1" if v else "0" for v in row) for row in (mask.detach().cpu() != 0).tolist()]
    return "\n".join(f"{row[:prefix_len]}|{row[prefix_len:]}" for row in bits)


_MASK_LEGEND = ("row i is tree node i, the one that attends; left of the bar, one column per committed token; right "
                "of it, one per tree node, from node 0; 1 = may attend")


@checker
def tree_mask(fn):
    """Check ``fn(parents, prefix_len) -> BoolTensor [n, prefix_len + n]``: the tree attention mask
    (``lab.trees.tree_attention_mask``)."""
    faults = [
        (_mask_variant("causal"), "that is the causal mask of the flattened tree: a node must not see its siblings "
                                  "or cousins, only its ancestors and itself."),
        (_mask_variant("parent_only"), "a node sees ALL its ancestors (its whole path from the top), not just its "
                                       "parent: whatever its parent may see, it may see too."),
        (_mask_variant("transposed"), "the tree part is transposed: row i is node i, the one that attends, and "
                                      "column prefix_len + j is what it may see, so True goes at [i, prefix_len + "
                                      "j] for each ancestor j of i (a node sees earlier nodes: the tree part is "
                                      "lower-triangular)."),
        (_mask_variant("no_self"), "a node attends to itself too (the diagonal is True)."),
        (_mask_variant("no_prefix"), "every node sees the whole committed prefix: the first prefix_len columns "
                                     "are all True."),
        (_mask_variant("no_offset"), "your True entries for the nodes (itself and its ancestors) land in the "
                                     "prefix's columns: node j's column is not column j, because the first "
                                     "prefix_len columns belong to the committed tokens and the tree's columns come "
                                     "after them, shifted by prefix_len."),
        (_mask_variant("self_off_by_one"), "each node's own entry is one column too far left (on the column before "
                                           "its own: node i - 1's, or the last committed token's for node 0). The "
                                           "tree columns count nodes from 0 right after the prefix, so node i's own "
                                           "column is i places past the prefix, as its ancestors' are."),
    ]
    def same(a, b):
        return isinstance(a, torch.Tensor) and a.dtype == torch.bool and same_tensor(a, b, atol=0)

    for parents, prefix_len in _TREES:  # the right pattern in another dtype gets its own hint
        outcome = outcome_of(fn, (parents, prefix_len))
        got = outcome[1] if outcome[0] == "ok" else None
        want = tree_attention_mask(parents, prefix_len)
        call = f"tree_mask({parents}, {prefix_len})"
        if outcome[0] == "ok" and got is not None and not isinstance(got, torch.Tensor):
            raise Fail(f"{call} returned {a_type(got)}; the mask must be a torch.bool tensor "
                       f"[n, prefix_len + n].\n  Hint: build it with torch.zeros(n, prefix_len + n, "
                       "dtype=torch.bool) and set the True entries, or wrap yours in torch.tensor(..., "
                       "dtype=torch.bool).")
        if not isinstance(got, torch.Tensor):
            continue
        if tuple(got.shape) != tuple(want.shape):
            raise Fail(f"{call} returned a tensor of shape {tuple(got.shape)}; expected {tuple(want.shape)} = "
                       f"[n, prefix_len + n] with n = {len(parents)} nodes and prefix_len = {prefix_len}."
                       "\n  Hint: one row per tree node, and one column per token it could attend to: the "
                       "prefix_len committed tokens first, then the n tree nodes.")
        if got.dtype == torch.bool:
            continue
        values = got.detach().to("cpu", torch.float64)
        if torch.equal(values != 0, want) and bool(((values == 0) | (values == 1)).all()):
            raise Fail(f"{call} returned the right pattern as {got.dtype} 0/1; the mask must be a torch.bool "
                       "tensor (True = may attend).\n  Hint: build it with dtype=torch.bool, or call .bool() on "
                       "it (lab.models.forward reads True as 'may attend').")
        if torch.equal(values == 0, want) and bool((values[~want] < -1e3).all()):
            raise Fail(f"{call} returned an additive mask ({got.dtype}: 0 where a node may attend, a large "
                       "negative number or -inf where it may not), the form attention kernels add to the scores."
                       "\n  Hint: this exercise wants the boolean form: a torch.bool tensor, True where node i may "
                       "attend.")
        raise Fail(f"{call} returned a {got.dtype} tensor; the mask must be a torch.bool tensor "
                   "[n, prefix_len + n] (True = may attend).")

    count = compare("tree_mask", fn, _TREES, tree_attention_mask, faults, same,
                    "return a bool tensor [n, prefix_len + n]; row i: True for the prefix, for node i's ancestors and "
                    "for node i itself; False elsewhere.", show_answer=_mask_rows, answer_legend=_MASK_LEGEND)
    return f"{count} masks right: each node sees the prefix, its ancestors and itself"


def _path_cases():
    tokens = [10, 11, 12, 13, 14, 15, 16]
    parents = [-1, -1, 0, 1, 1, 4, 4]
    rows = len(tokens) + 1
    cases = []
    for first, second, third in ((11, 14, 16), (10, 12, 99), (11, 13, 0), (99, 0, 0), (11, 14, 99), (11, 99, 0)):
        argmax = [0] * rows
        argmax[0] = first  # row 0: after the last committed token
        if first in tokens:
            argmax[1 + tokens.index(first)] = second
        if first in tokens and second in tokens:
            argmax[1 + tokens.index(second)] = third
        if first in tokens:  # a decoy in the row BEFORE the right one: a wrong child of the accepted node
            node = tokens.index(first)
            decoys = [tokens[c] for c, p in enumerate(parents) if p == node and tokens[c] != second]
            if decoys and node + 1 != 1 + tokens.index(second if second in tokens else first):
                argmax[node] = decoys[0]
        cases.append((argmax, tokens, parents))
    # The same token on two branches (the default Medusa tree has such pairs): only the accepted node's children
    # are candidates, so the walk under node 1 must take node 3, not node 2 (a child of node 0).
    twins, twin_parents = [10, 11, 20, 20], [-1, -1, 0, 1]
    cases.append(([11, 0, 20, 0, 7], twins, twin_parents))
    cases.append(([10, 20, 0, 0, 0], twins, twin_parents))
    cases.append(([11, 0, 0, 0, 0], [10, 11, 20, 0], [-1, -1, 0, 0]))  # a later token 0, on another branch
    # a chain of one token three times, rejected at the third: row 2 says 8 though row 0 says 5 (a walk that reads
    # row 0 at every level accepts all three)
    cases.append(([5, 5, 8, 1], [5, 5, 5], [-1, 0, 1]))
    cases.append(([5, 6, 7, 1], [5, 6, 7], [-1, 0, 1]))
    # deeper than Medusa's 3 heads: a walk capped at 3 levels stops short. Siblings carry different tokens, as in
    # every real tree (a walk that keeps a token -> child dict per node is right)
    cases.append(([5, 6, 7, 8, 9, 2], [5, 6, 7, 8, 9], [-1, 0, 1, 2, 3]))
    cases.append(([4, 6, 0, 7, 0, 8, 1], [4, 5, 6, 9, 7, 8], [-1, -1, 0, 0, 2, 4]))
    # row 2 (after node 1) holds node 1's own token: a walk that reads row node + 2 accepts node 1 after node 0,
    # though row 1 rejected it (a walk that stops after one level gives the right answer here)
    cases.append(([5, 9, 6, 0], [5, 6, 7], [-1, 0, 1]))
    cases.append(([3], [], []))
    return cases


def _path_variant(kind):
    def variant(argmax, tokens, parents):
        node, path = -1, []
        while True:
            kids = [i for i, p in enumerate(parents) if p == node]
            if kind == "any_branch":  # any later node with the token, whatever its parent
                kids = list(range(node + 1, len(tokens)))
            if kind == "first_child":
                kids = kids[:1]
            # "row_is_node" reads row 0 at the top; "row_of_node" reads target_argmax[node] as written, so at the top
            # (node -1) Python's row -1, the LAST row
            row = {"row_is_node": max(node, 0), "row_of_node": node, "row_zero": 0,
                   "row_skip": node + 2 if node >= 0 else 0}.get(kind, node + 1)
            if row >= len(argmax):  # row_skip reads past the last row: nothing there to match
                return path
            if kind == "child_row":  # each child compared with its OWN row, not its parent's
                match = next((c for c in kids if tokens[c] == argmax[c + 1]), None)
            elif kind == "aligned":  # target_argmax read as if aligned with tokens: child c against row c
                match = next((c for c in kids if tokens[c] == argmax[c]), None)
            elif kind == "first_index":  # tokens.index(choice): the first node with the token, on whatever branch
                choice = argmax[row]
                match = tokens.index(choice) if choice in tokens else None
                match = match if match is not None and parents[match] == node else None
            else:
                match = next((c for c in kids if tokens[c] == argmax[row]), None)
            if match is None:
                if kind == "with_root":
                    return [-1] + path
                if kind == "bonus":  # the target's next token appended, as if it were a node
                    return path + [argmax[path[-1] + 1 if path else 0]]
                return [tokens[i] for i in path] if kind == "token_ids" else path
            path.append(match)
            node = match
            if kind == "one_level" or kind == "three_levels" and len(path) == 3:
                return path
    return variant


@checker
def accepted_path(fn):
    """Check ``fn(target_argmax, tokens, parents) -> list[int]``: the accepted path of greedy tree verification
    (``lab.verify.verify_tree_greedy(...).path``)."""
    faults = [
        (_path_variant("first_child"), "look at EVERY child of the current node, not only the first one: the "
                                       "target's choice may be on any branch."),
        (_path_variant("row_is_node"), "the target's prediction after node i is in row i + 1 (row 0 belongs to the "
                                       "last committed token)."),
        (_path_variant("row_zero"), "compare a node's token with the target's argmax in its PARENT's row, "
                                    "target_argmax[parent + 1] (row 0 only for the top level, parent -1): row 0 is "
                                    "the target's choice for the first token only, and each level down needs the row "
                                    "of the node just accepted."),
        (_path_variant("row_skip"), "the target's prediction after node i is in row i + 1, not i + 2: row 0 "
                                    "belongs to the last committed token, so node 0's next token is in row 1."),
        (_path_variant("one_level"), "keep descending: after accepting a child, look for a matching child of THAT "
                                     "node."),
        (_path_variant("three_levels"), "keep descending until no child matches: a tree can be deeper than "
                                        "Medusa's 3 heads, so the walk has no fixed number of levels."),
        (_path_variant("first_index"), "tokens.index(choice) finds the FIRST node with that token, which can sit on "
                                       "another branch (the same token can hang under two parents): look for the "
                                       "choice among the current node's children only (parents[c] == node)."),
        (_path_variant("token_ids"), "return the accepted nodes' INDICES in tokens (positions in the flattened "
                                     "tree), not their token ids: the lesson reads the rows after them "
                                     "(target_argmax[path[-1] + 1]) and the same token can sit on two branches."),
        (_path_variant("any_branch"), "only the current node's CHILDREN are candidates (parents[c] == node): a "
                                      "node with the right token on another branch was proposed after a different "
                                      "prefix, so the target has not checked it."),
        (_path_variant("with_root"), "list the accepted drafted nodes only: the root (-1) is the last committed "
                                     "token, not a node of the tree, so the path starts at a child of the root (or "
                                     "is empty)."),
        (_path_variant("bonus"), "return the accepted nodes only: the token after them, target_argmax[path[-1] + 1], "
                                 "is the target's own (the bonus or corrected token), a token id rather than a node, "
                                 "and the lesson adds it after the path itself."),
        (_path_variant("child_row"), "compare a child's token with its PARENT's row (the target's choice for that "
                                     "slot, row parent + 1), not with the child's own row (which predicts the token "
                                     "after it)."),
        (_path_variant("aligned"), "target_argmax is not aligned with tokens: it has one row more, because row 0 is "
                                   "the target's choice after the committed text. The target's prediction after node "
                                   "i is in row i + 1, so a child is checked against the row of the node it hangs "
                                   "under, not against the row with its own index."),
        (_path_variant("row_of_node"), "at the top the current node is -1, and row -1 is Python's LAST row (the "
                                       "target's choice after the last node), not row 0: the target's prediction "
                                       "after node i is in row i + 1 (row 0 is after the committed text), one row "
                                       "past the node's own index."),
    ]
    want_token_list("accepted_path", fn, _path_cases()[0], "[1, 4, 6]",
                    "the lesson tests `if path` and indexes it", "node indices")
    count = compare("accepted_path", fn, _path_cases(),
                    lambda a, t, p: verify_tree_greedy(a, t, p).path, faults, same_ints,
                    "walk down from the top one level at a time. At each level, which nodes are candidates (only "
                    "the children of the node accepted last), which row of target_argmax holds the target's own "
                    "choice for that slot (row 0 is after the committed text), and when does the walk stop?")
    return f"{count} trees walked exactly as greedy verification does"


def reference_tokens_per_call(target, make_drafter, prompts, max_new_tokens, eos_token_id=None):
    """The answer to the tokens-per-call exercise: the tokens the decode steps wrote (every new token but the
    first, which the prefill gave) over the decode steps (``stats["target_calls"]``), pooled over ``prompts``
    (lists of ids), each run with a fresh ``make_drafter()``. The lesson uses it while the exercise is unsolved."""
    from lab.decode import generate

    runs = [generate(target, p, drafter=make_drafter(), max_new_tokens=max_new_tokens, eos_token_id=eos_token_id)
            for p in prompts]
    return sum(len(g.tokens) - 1 for g in runs) / sum(g.stats["target_calls"] for g in runs)


@checker
def tokens_per_call(fn, target, prompts):
    """Check ``fn(target, make_drafter, prompts, max_new_tokens, eos_token_id=None) -> float``: the decode steps'
    tokens (all but each run's first) over its target calls, pooled over all prompts (``lab.metrics``' "tokens per
    target call"), on ``target`` with drafters that accept a lot on some prompts and draft nothing on others, and
    with a run that stops early at EOS."""
    from lab.decode import generate
    from lab.drafters import Draft, DraftModelDrafter, PromptLookupDrafter

    prompts = [list(map(int, p)) for p in prompts]
    if len(prompts) < 2:
        raise Fail("pass at least two prompts (token id lists)")
    try:  # the cases pass eos_token_id as a fifth positional argument
        inspect.signature(fn).bind(None, None, None, None, None)
        takes_eos = True
    except TypeError:
        takes_eos = False
    except ValueError:  # no signature (a builtin or C callable): let the cases decide
        takes_eos = True
    if not takes_eos:
        raise Fail("your function has no eos_token_id parameter.\n  Hint: define it as tokens_per_call(target, "
                   "make_drafter, prompts, max_new_tokens, eos_token_id=None) and pass eos_token_id to generate: "
                   "a run that stops at EOS emits fewer than max_new_tokens tokens.")

    class SelfDraft(DraftModelDrafter):
        """The target drafting for itself (every draft accepted), but only for prompts with an even first token:
        prompts then differ a lot in tokens per call, as real ones do. Each proposal reports one draft call (as
        Medusa's heads do), so counting draft calls as target calls gives a number of its own."""

        def reset(self, prompt_ids):
            super().reset(prompt_ids)
            self.active = prompt_ids[0] % 2 == 0

        def propose(self, request):
            if not self.active:
                return Draft()
            draft = super().propose(request)
            draft.calls = min(draft.calls, 1)
            return draft

    even = [0] + prompts[0][-20:]
    odd = [1] + prompts[1][-20:]
    # EOS: the 4th token of the greedy continuation of `even`; that run stops early, the others may too.
    eos = generate(target, even, max_new_tokens=4).tokens[-1]
    cases = [(target, lambda: SelfDraft(target, 4), [even, odd], 12, None),
             (target, lambda: SelfDraft(target, 2), [odd, even, [2] + prompts[0][-8:]], 9, None),
             (target, lambda: PromptLookupDrafter(n_draft=3), [prompts[0][-16:]], 5, None),
             (target, lambda: SelfDraft(target, 3), [even, odd], 12, eos)]

    def runs_of(t, make, ps, m, eos_id):
        return [generate(t, p, drafter=make(), max_new_tokens=m, eos_token_id=eos_id) for p in ps]

    def mean_of_ratios(t, make, ps, m, eos_id=None):
        runs = runs_of(t, make, ps, m, eos_id)
        return sum(g.stats["tokens_per_target_call"] for g in runs) / len(runs)

    def with_prefill(t, make, ps, m, eos_id=None):
        runs = runs_of(t, make, ps, m, eos_id)
        return sum(len(g.tokens) for g in runs) / sum(g.stats["target_calls"] + 1 for g in runs)

    def with_first_token(t, make, ps, m, eos_id=None):
        runs = runs_of(t, make, ps, m, eos_id)
        return sum(len(g.tokens) for g in runs) / sum(g.stats["target_calls"] for g in runs)

    def with_draft_calls(t, make, ps, m, eos_id=None):
        runs = runs_of(t, make, ps, m, eos_id)
        return sum(len(g.tokens) for g in runs) / sum(g.stats["target_calls"] + g.stats["draft_calls"] for g in runs)

    def requested_tokens(t, make, ps, m, eos_id=None):
        runs = runs_of(t, make, ps, m, eos_id)
        return m * len(ps) / sum(g.stats["target_calls"] for g in runs)

    def acceptance(t, make, ps, m, eos_id=None):
        runs = runs_of(t, make, ps, m, eos_id)
        drafted = sum(g.stats["drafted_tokens"] for g in runs)
        return sum(g.stats["accepted_tokens"] for g in runs) / drafted if drafted else 0.0

    def floor_division(t, make, ps, m, eos_id=None):
        return int(reference_tokens_per_call(t, make, ps, m, eos_id))

    def ignores_eos(t, make, ps, m, eos_id=None):
        return reference_tokens_per_call(t, make, ps, m, None)

    def accepted_plus_one(t, make, ps, m, eos_id=None):  # every step's num_accepted + 1, the cut last one too
        runs = runs_of(t, make, ps, m, eos_id)
        return (sum(s.num_accepted + 1 for g in runs for s in g.decode_steps)
                / sum(g.stats["target_calls"] for g in runs))

    def last_prompt_only(t, make, ps, m, eos_id=None):  # totals assigned (=) in the loop instead of added (+=)
        return reference_tokens_per_call(t, make, ps[-1:], m, eos_id)

    def first_prompt_only(t, make, ps, m, eos_id=None):  # `return` inside the loop
        return reference_tokens_per_call(t, make, ps[:1], m, eos_id)

    def every_step_record(t, make, ps, m, eos_id=None):  # len(gen.steps) holds the prefill's record too
        runs = runs_of(t, make, ps, m, eos_id)
        return sum(len(g.tokens) - 1 for g in runs) / sum(len(g.steps) for g in runs)

    def rounded(t, make, ps, m, eos_id=None):
        return round(reference_tokens_per_call(t, make, ps, m, eos_id), 2)

    faults = [
        (floor_division, "divide with / (a float), not // (which rounds down to a whole number)."),
        (first_prompt_only, "the `return` sits inside the loop, so the function answers after the first prompt: "
                            "return once the loop has added every prompt's run."),
        (every_step_record, "the denominator counts one call too many per run, the prefill's: divide by "
                            "stats['target_calls'] as it is (no + 1; it counts the decode calls only) or by "
                            "len(gen.decode_steps) (gen.steps also holds the prefill's record)."),
        (rounded, "return the ratio as it is: round only where you print it (f\"{x:.2f}\"), since later cells "
                  "compare and compute with the value."),
        (with_draft_calls, "count target calls only (stats['target_calls']): the draft's forward passes are "
                           "counted separately (stats['draft_calls']). Tokens per target call measures how many "
                           "target passes speculation saves."),
        (requested_tokens, "count the tokens each run actually produced (len(gen.tokens)): a run that stops at "
                           "eos_token_id emits fewer than max_new_tokens."),
        (ignores_eos, "pass eos_token_id on to generate (generate(..., eos_token_id=eos_token_id)): the runs must "
                      "stop where the caller asks them to."),
        (mean_of_ratios, "pool before dividing: total new tokens over total target calls. A mean of per-prompt "
                         "ratios gives a short, lucky prompt as much weight as a long one."),
        (with_prefill, "count the decode loop's target calls only (stats['target_calls']) and their tokens (all but "
                       "the first): the prefill is the same for every method and is not a decoding step."),
        (with_first_token, "leave out each run's first token (len(gen.tokens) - 1): the prefill wrote it, and "
                           "stats['target_calls'] does not count the prefill."),
        (acceptance, "that is the acceptance rate (accepted / drafted); tokens per target call counts every emitted "
                     "token, including the one the target adds at each step."),
        (accepted_plus_one, "count the tokens the runs wrote, len(gen.tokens) - 1 per run, not num_accepted + 1 "
                            "per step: generate cuts the last step at max_new_tokens and after EOS, so that step "
                            "writes fewer tokens than it accepted (its num_accepted still counts every accepted "
                            "draft)."),
        (last_prompt_only, "add up over ALL prompts (tokens += ..., calls += ...): assigning the totals inside the "
                           "loop keeps only the last prompt's run."),
    ]
    count = compare("tokens_per_call", fn, cases, reference_tokens_per_call, faults, same_float,
                    "run generate once per prompt with a fresh drafter (passing max_new_tokens and "
                    "eos_token_id), then pool: the tokens all runs wrote after their prefill's first one, over the "
                    "target calls all runs made after their prefill (a ratio of totals, not a mean of ratios).",
                    show_args=lambda c: f"target, make_drafter, {len(c[2])} prompt{'s' * (len(c[2]) != 1)}, "
                                        f"max_new_tokens={c[3]}, "
                                        f"eos_token_id={c[4]}")
    return f"{count} measurements pooled over prompts exactly as the course measures tokens per target call"
