"""Exercise checkers for lesson 08 (prompt lookup: the n-gram search; suffix decoding: the frequency-scored
speculation tree).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import random

from lab.drafters.prompt_lookup import ngram_lookup as _ref_ngram_lookup
from lab.drafters.suffix import speculation_tree
from lab.exercises.answers import int_list_pair, pair_shape_note
from lab.exercises.harness import (Fail, checker, compare, fresh_args, run_case, same_ints, show_brief,
                                   want_token_list)

__all__ = ["ngram_lookup", "grow_tree"]


def _lookup_cases():
    cases = [
        ([1, 2, 3, 9, 1, 2, 3], 3, 5), ([1, 2, 3, 9, 9, 1, 2, 3], 3, 2), ([4, 1, 2, 8, 1, 2, 6, 1, 2], 3, 5),
        ([1, 2, 7, 5, 2], 3, 5), ([7, 7, 7], 3, 5), ([1, 2, 1, 2], 3, 5), ([1, 2, 3, 4], 3, 5), ([5], 3, 5),
        ([5, 5], 3, 5), ([], 3, 4), ([1, 2, 3, 4, 0, 3, 8, 2, 3], 2, 3), ([1, 2, 3, 4, 0, 3, 8, 2, 3], 1, 3),
        ([3, 1, 2, 3, 9, 1, 2, 3], 1, 5), ([9, 8, 7, 6, 9, 8, 7], 4, 4), ([6, 6, 6, 6, 6, 6], 2, 3),
        # multi-digit ids: as digit strings [1, 23] and [12, 3] both read "123", but they are different tokens
        ([12, 3, 9, 1, 23], 2, 3), ([1, 23, 4, 12, 3], 2, 3), ([10, 5, 7, 10, 5], 2, 4), ([5, 11, 1, 5, 1, 1], 2, 3),
        ([2, 21, 7, 22, 1], 3, 2), ([40, 4, 0, 8, 4, 0], 2, 2),
    ]
    rng = random.Random(0)
    for _ in range(12):
        context = [rng.randrange(4) for _ in range(rng.randrange(2, 14))]
        cases.append((context, rng.randrange(1, 5), rng.randrange(1, 6)))
    for _ in range(6):  # ids whose digit strings run into each other
        context = [rng.choice((1, 2, 11, 12, 21, 22)) for _ in range(rng.randrange(3, 12))]
        cases.append((context, rng.randrange(1, 4), rng.randrange(1, 5)))
    return cases


def _string_lookup(context, max_ngram, n_draft):
    """A planted mistake: search the ids as one digit string. Right for single-digit ids only."""
    text = "".join(map(str, context))
    for n in range(min(max_ngram, len(context) - 1), 0, -1):
        suffix = "".join(map(str, context[-n:]))
        i = text.rfind(suffix, 0, len(text) - 1)  # an occurrence that ends before the context does
        if i >= 0:
            return list(context[i + n:i + n + n_draft])
    return []


def _lookup_variant(self_match=False, oldest=False, no_fallback=False, no_cap=False, non_overlap=False,
                    include_gram=False, negative_slice=False, smallest=1, below_max=False, skip_start=False,
                    full_only=False, shortest_first=False, above_max=False, fixed_top=None, late_start=False,
                    skip_next=False, one_extra=False):
    def lookup(context, max_ngram, n_draft):
        tokens, length = list(context), len(context)
        top = max_ngram - 1 if below_max else max_ngram + 1 if above_max else fixed_top or max_ngram
        sizes = [max_ngram] if no_fallback else range(top, smallest - 1, -1)
        if shortest_first:
            sizes = range(smallest, top + 1)
        for n in sizes:
            if n > length - 1:
                if negative_slice:
                    raise IndexError("list index out of range")
                continue
            suffix = tokens[-n:]
            n_eff = len(suffix)
            last_start = length - n_eff if self_match else length - n_eff - 1 - late_start
            if non_overlap:
                last_start = min(last_start, length - 2 * n_eff)
            starts = range(0, last_start + 1) if oldest else range(last_start, 0 if skip_start else -1, -1)
            for i in starts:
                if tokens[i:i + n_eff] == suffix and not (full_only and i + n_eff + n_draft > length):
                    begin = i if include_gram else i + n_eff + skip_next
                    return tokens[begin:] if no_cap else tokens[begin:begin + n_draft + one_extra]
        return []
    return lookup


_FIRST_SIZE_HINT = ("start at the max_ngram you are given, not max_ngram - 1 or + 1 nor a size of your own: use "
                    "range(max_ngram, 0, -1), the sizes max_ngram, max_ngram - 1, ..., 1 (with max_ngram = 1, single "
                    "tokens only).")


@checker
def ngram_lookup(fn):
    """Check ``fn(context, max_ngram, n_draft) -> list``: the continuation of the most recent earlier occurrence of
    the longest matching suffix n-gram (``lab.drafters.prompt_lookup.ngram_lookup``)."""
    faults = [
        (_lookup_variant(self_match=True), "the last n tokens always match themselves: search only starts i < "
                                           "len(context) - n (an occurrence that ends before the context does)."),
        (_lookup_variant(oldest=True), "prefer the MOST RECENT earlier occurrence: scan start positions from the "
                                       "end backwards."),
        (_lookup_variant(shortest_first=True), "try the LONGEST n-gram first (n = max_ngram, then max_ngram - 1, "
                                               "…): a single token matches almost anywhere, and the longer the "
                                               "match, the likelier its continuation is the one being repeated."),
        (_lookup_variant(no_fallback=True), "when the longest n-gram has no earlier occurrence, try n - 1, …, 1 "
                                            "before giving up."),
        (_lookup_variant(no_cap=True), "propose at most n_draft tokens."),
        (_lookup_variant(one_extra=True), "one token too many: the draft holds at most n_draft tokens (a slice's "
                                          "end index is left out of it)."),
        (_lookup_variant(late_start=True), "your scan starts one position too far back and skips the most recent "
                                           "earlier occurrence: one may start a single position before the last n "
                                           "tokens do (it then ends just before the context's last token, as the "
                                           "bigram [7, 7] at index 0 of [7, 7, 7] does)."),
        (_lookup_variant(skip_next=True), "the draft begins with the token right after the match: an occurrence "
                                          "starting at i covers positions i … i + n - 1, so what followed it starts "
                                          "at i + n, and your draft leaves that first token out."),
        (_lookup_variant(smallest=2), "try every size down to n = 1: a single matching token is a match too (a "
                                      "smallest n, like vLLM's prompt_lookup_min, is an engine setting, not part of "
                                      "this exercise)."),
        (_lookup_variant(below_max=True), _FIRST_SIZE_HINT),
        # these often give the same answers: one hint for the three
        (_lookup_variant(above_max=True), _FIRST_SIZE_HINT),
        (_lookup_variant(fixed_top=3), _FIRST_SIZE_HINT),
        (_lookup_variant(full_only=True), "a match followed by fewer than n_draft tokens still counts: propose "
                                          "the tokens that follow it, however few (a shorter draft), instead of "
                                          "passing over it to an older match or a shorter n-gram."),
        (_lookup_variant(non_overlap=True), "an earlier occurrence may overlap the suffix (in [7, 7, 7] the bigram "
                                            "[7, 7] also starts at index 0): allow every start i < len - n."),
        (_lookup_variant(include_gram=True), "propose what FOLLOWED the match, not the matched n-gram itself."),
        (_lookup_variant(skip_start=True), "scan down to and including start 0: a backwards range needs -1 as its "
                                           "stop, range(len(context) - n - 1, -1, -1); with 0 the occurrence at the "
                                           "very start of the context is never checked."),
        (_lookup_variant(negative_slice=True), "an n-gram longer than len(context) - 1 has no earlier occurrence: "
                                               "skip those sizes instead of indexing past the start."),
        (_string_lookup, "compare token ids, not their digits: joined into one string, [1, 23] and [12, 3] both "
                         "read \"123\", so a string search finds matches that are not there and counts positions "
                         "in characters. Compare lists of ids: context[i:i + n] == context[-n:]."),
    ]
    cases = _lookup_cases()
    want_token_list("ngram_lookup", fn, cases[0], "list(context[i + n:i + n + n_draft])",
                    why="the lesson prints it beside the context, and a drafter feeds it to the target as token ids",
                    tuples=False)
    count = compare("ngram_lookup", fn, cases, _ref_ngram_lookup, faults, same_ints,
                    "for n = max_ngram … 1: take the last n tokens, scan earlier start positions from the most "
                    "recent back, and return up to n_draft tokens after the first hit; [] if none.")
    return (f"{count} cases right, including the edge cases (self-match, overlap, short contexts, no match, "
            "multi-digit ids)")


# ---------------------------------------------------------------------------------------------------------
# Exercise 2: suffix decoding's speculation tree, grown best first by frequency.

def _as_nodes(children):
    """``{token: (count, grandchildren)}`` as trie nodes (``.children``, ``.count``) for the reference."""
    from types import SimpleNamespace

    return SimpleNamespace(count=0, children={token: SimpleNamespace(count=count, children=_as_nodes(sub).children)
                                              for token, (count, sub) in children.items()})


def _ref_grow_tree(children, budget, min_prob):
    tokens, parents, _ = speculation_tree(_as_nodes(children), budget, budget, min_prob)
    return tokens, parents


def _grow_cases():
    leaf = {}
    return [
        # one continuation seen 3 times: a chain
        ({5: (3, {6: (3, {7: (3, leaf)})})}, 5, 0.1),
        # 9 followed twice, 4 once; 9 then 8 or 7: best first by path probability 2/3, 1/3, 1/3, 1/3
        ({9: (2, {8: (1, {1: (1, leaf)}), 7: (1, leaf)}), 4: (1, {1: (1, leaf)})}, 6, 0.1),
        # budget cuts the tree
        ({9: (2, {8: (1, {1: (1, leaf)}), 7: (1, leaf)}), 4: (1, {1: (1, leaf)})}, 2, 0.1),
        # a deep likely path beats a shallow unlikely sibling: 0.9, 0.9, 0.9 before 0.1
        ({1: (9, {2: (9, {3: (9, leaf)})}), 5: (1, leaf)}, 3, 0.05),
        # exactly at min_prob below the first level: 2 and 3 under 1 are 3/4 x 1/2 = 0.375 (kept), 5 is 1/4 (left
        # out). Shares that are powers of two keep every product exact, whatever the order of the multiplications
        # (with 9/10 x 1/9 the float could round either side of 0.1, and a right answer would fail)
        ({1: (3, {2: (1, leaf), 3: (1, leaf)}), 5: (1, leaf)}, 8, 0.375),
        # min_prob: 5 (1/10) and 3 under 1 (9/10 x 1/9 = 1/10) fall below 0.5, 1 (0.9) and 2 (0.8) stay
        ({1: (9, {2: (8, leaf), 3: (1, leaf)}), 5: (1, leaf)}, 8, 0.5),
        # exactly at min_prob: kept (1/2 >= 0.5)
        ({1: (1, leaf), 2: (1, leaf)}, 4, 0.5),
        # the child share is over the siblings' total, not over the parent's count (a path may end at its parent)
        ({1: (4, {2: (1, leaf), 3: (1, leaf)})}, 4, 0.3),
        # nothing seen: no tree
        ({}, 4, 0.1),
        # ties in the order found: 7 before 3 (equal counts)
        ({7: (2, {1: (2, leaf)}), 3: (2, {1: (2, leaf)})}, 4, 0.1),
        # a wider tree: the second level's best nodes interleave with the first level's
        ({10: (6, {11: (5, {12: (5, leaf)}), 13: (1, leaf)}), 20: (3, {21: (3, leaf)}), 30: (1, leaf)}, 7, 0.05),
        ({10: (6, {11: (5, {12: (5, leaf)}), 13: (1, leaf)}), 20: (3, {21: (3, leaf)}), 30: (1, leaf)}, 4, 0.2),
        # min_prob on the path, not the share: 2 and 3 under 1 are each half of 1's children (0.5 >= 0.4) but
        # 3/4 x 1/2 = 0.375 on their path (< 0.4): only 1 stays
        ({1: (3, {2: (1, leaf), 3: (1, leaf)}), 5: (1, leaf)}, 8, 0.4),
        # ties across parents, in the order found: 5 (1/2) is taken first, so its children (1/4 each) are found
        # before those of 3 and 4 (1/4 each too), although 3 and 4 come first among the pattern's children
        ({3: (1, {30: (1, leaf)}), 4: (1, {40: (1, leaf)}), 5: (2, {50: (1, leaf), 51: (1, leaf)})}, 5, 0.1),
        # continuations end at a node: 1 was seen 4 times but followed (by 2) only once, so counts are not path
        # probabilities. 2 is 2/3 x 1/1 = 2/3 and comes before 3 (1/3), although its count is the lowest; by the
        # parent's count (Arctic Inference's rule) 2 would be 2/3 x 1/4 = 1/6, below min_prob
        ({1: (4, {2: (1, leaf)}), 3: (2, leaf)}, 3, 0.2),
    ]


def _grow_variant(level_order=False, local_prob=False, no_min=False, strict_min=False, no_cap=False,
                  parent_tokens=False, chain=False, parent_count=False, local_min=False, sibling_ties=False,
                  raw_count=False, token_ties=False, no_sign=False):
    """Planted mistakes in growing the tree (each flag one), around a correct heap-based expansion."""
    import heapq
    import itertools

    def grow(children, budget, min_prob):
        tokens, parents, heap, found = [], [], [], itertools.count()

        def push(kids, index, prob, depth, own_count):
            total = own_count if parent_count and own_count else sum(count for count, _ in kids.values())
            for sibling, (token, (count, sub)) in enumerate(kids.items()):
                p = count / total if local_prob else prob * count / total
                kept = count / total if local_min else p  # local_min: the share alone against min_prob
                if no_min or (kept > min_prob if strict_min else kept >= min_prob):
                    rank = -count if raw_count else p if no_sign else -p
                    order = (depth if level_order else 0, rank, token if token_ties else 0,
                             sibling if sibling_ties else 0, next(found))
                    heapq.heappush(heap, (order, token, sub, index, p, count, depth))

        push(children, -1, 1.0, 1, None)
        while heap and (no_cap or len(tokens) < budget):
            _, token, sub, index, p, count, depth = heapq.heappop(heap)
            tokens.append(token)
            parents.append(tokens[index] if parent_tokens and index >= 0 else index)
            if chain:
                heap.clear()  # the siblings are dropped: a chain down the best child
            if sub:
                push(sub, len(tokens) - 1, p, depth + 1, count)
        return tokens, parents
    return grow


def _shift_parents(tree, shift):
    """Planted mistakes in numbering: every parent index + ``shift`` (the root's -1 becoming ``shift - 1``) when
    ``shift`` is 1, only the root's -1 written as 0 when it is 0."""
    tokens, parents = tree
    if shift == 0:
        return tokens, [0 if p < 0 else p for p in parents]
    return tokens, [p + shift for p in parents]


def _grow_depth_first(children, budget, min_prob):
    """A planted mistake: the tree grown depth first (each node's children visited most probable first, down to the
    leaves, before its next sibling), with min_prob and the budget held as in the reference."""
    tokens, parents = [], []

    def visit(kids, index, prob):
        total = sum(count for count, _ in kids.values())
        for token, (count, sub) in sorted(kids.items(), key=lambda item: -item[1][0]):  # stable: ties as found
            p = prob * count / total
            if p >= min_prob and len(tokens) < budget:
                tokens.append(token)
                parents.append(index)
                visit(sub, len(tokens) - 1, p)

    visit(children, -1, 1.0)
    return tokens, parents


def _same_tree(a, b) -> bool:
    try:
        (tokens_a, parents_a), (tokens_b, parents_b) = a, b
    except (TypeError, ValueError):
        return False
    return same_ints(list(tokens_a), list(tokens_b)) and same_ints(list(parents_a), list(parents_b))


@checker
def grow_tree(fn):
    """Check ``fn(children, budget, min_prob) -> (tokens, parents)``: suffix decoding's speculation tree below a
    matched pattern (``children`` = ``{token: (count, its children)}``), grown best first by path probability
    (:func:`lab.drafters.suffix.speculation_tree`)."""
    faults = [
        (_grow_variant(level_order=True), "grow best first, not level by level: always take the most probable node "
                                          "left, whatever its depth (a heap keyed by -probability), so a likely "
                                          "deep node comes before an unlikely shallow one."),
        (_grow_depth_first, "grow best first over the whole tree, not depth first: after taking a node, its children "
                            "join its siblings and every other waiting node as candidates, and the most probable of "
                            "them all comes next (one heap of candidates), so a likely sibling is taken before an "
                            "unlikely grandchild."),
        (_grow_variant(local_prob=True), "a node's probability is its PATH probability: its parent's probability "
                                         "times its share of its siblings' counts, not its share alone."),
        (_grow_variant(parent_count=True), "this exercise follows the paper's rule (Oliaro et al. 2024, §3): a "
                                           "child's count over its siblings' total (its own included). You divided "
                                           "by the parent's own count, as the authors' library Arctic Inference "
                                           "does; that count also holds the occurrences that end at the parent, so "
                                           "the children's counts can add up to less, their probabilities come out "
                                           "lower, and min_prob leaves out more nodes than the exercise does."),
        (_grow_variant(raw_count=True), "order by path probability, not by the raw count: where some continuations "
                                        "end at a node, its children's counts add up to less than its own, so counts "
                                        "under different parents are not on one scale, and count order is not "
                                        "probability order."),
        (_grow_variant(no_sign=True), "heapq pops the SMALLEST key first: with the probability itself as the key the "
                                      "least probable candidate comes out first; negate it so the most probable "
                                      "does."),
        (_grow_variant(token_ties=True), "break ties by the order the candidates were found, with a counter that "
                                         "grows with every push (itertools.count()), not by the token id: a smaller "
                                         "id says nothing about which came first."),
        (_grow_variant(no_min=True), "leave out nodes whose path probability is below min_prob (they would "
                                     "rarely be accepted and cost a slot of the tree)."),
        (_grow_variant(strict_min=True), "a node exactly at min_prob is kept: compare with >=, not >."),
        (_grow_variant(local_min=True), "compare min_prob with a node's PATH probability (its parent's probability "
                                        "times its share), not with its share among its siblings: a likely child "
                                        "of an unlikely parent is still unlikely."),
        (_grow_variant(no_cap=True), "stop once the tree holds budget nodes."),
        (_grow_variant(parent_tokens=True), "parents[i] is the INDEX in tokens of node i's parent (-1 for a child "
                                            "of the matched pattern), not the parent's token id."),
        (lambda c, b, m: _shift_parents(_ref_grow_tree(c, b, m), 1),
         "parents count from 0, with -1 for a child of the matched pattern: node i's parent is its index in tokens "
         "(the first node is 0), not its index + 1."),
        (lambda c, b, m: _shift_parents(_ref_grow_tree(c, b, m), 0),
         "a child of the matched pattern gets parent -1; 0 is the index of the first node, so a 0 makes the node a "
         "child of that node."),
        (_grow_variant(sibling_ties=True), "a tie goes to the node found (pushed) first overall, not to the first "
                                           "among its siblings: key the heap on (-probability, a counter that grows "
                                           "with every push), not on the child's index under its parent, or a later "
                                           "parent's first child jumps ahead of an earlier parent's second one."),
        (lambda c, b, m: _ref_grow_tree(c, b, m)[::-1],
         "return the pair in the order (tokens, parents): the token ids first, then the parent indices; your answer "
         "has them the other way round."),
        (_grow_variant(chain=True), "it is a tree: when you take a node, its siblings stay candidates (keep them in "
                                    "the heap), so the tree can branch where the history did."),
    ]
    cases = _grow_cases()
    first = run_case(fn, fresh_args(cases[1]))  # six nodes: a list of (token, parent) pairs is no pair of lists
    if first[0] == "ok" and first[1] is not None and int_list_pair(first[1]) is None:
        note = pair_shape_note(first[1], "tree_tokens, tree_parents = grow_tree(...)", "(token, parent) pair per node",
                               "tokens")
        raise Fail(f"grow_tree returned {show_brief(first[1])}{note}.\n  Hint: return a pair "
                   "(tokens, parents) of lists, in that order: the token ids in the order you took them, then each "
                   "one's parent index. The lesson unpacks it: tree_tokens, tree_parents = grow_tree(...).")
    count = compare("grow_tree", fn, cases, _ref_grow_tree, faults, _same_tree,
                    "start a heap with the pattern's children (probability = count / the siblings' total); pop the "
                    "most probable, append its token and parent index, push its children with probability = "
                    "its probability x their share; skip those below min_prob; stop at budget nodes. Ties: first "
                    "found first.")
    return f"{count} trees right, including budget cuts, min_prob at its edge, ties and an empty match"
