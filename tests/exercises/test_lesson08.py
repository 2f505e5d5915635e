"""The exercise checkers of lesson 08 (prompt lookup; lab.exercises.lesson08): the reference passes, planted mistakes
are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import pytest

from lab.drafters.prompt_lookup import ngram_lookup
from lab.exercises import lesson08 as check
from tests.helpers import rejects


def run(capsys, checker, fn, *args):
    ok = checker(fn, *args)
    return ok, capsys.readouterr().out


@pytest.mark.parametrize("variant,phrase", [
    (dict(self_match=True), "match themselves"), (dict(oldest=True), "MOST RECENT"),
    (dict(no_fallback=True), "try n - 1"), (dict(no_cap=True), "at most n_draft"),
    (dict(non_overlap=True), "overlap"), (dict(include_gram=True), "FOLLOWED"),
    (dict(negative_slice=True), "longer than len(context) - 1"),
    # these two returned [] where a match was due and got the self-match hint
    (dict(smallest=2), "down to n = 1"), (dict(below_max=True), "start at the max_ngram you are given"),
    (dict(full_only=True), "fewer than n_draft tokens still counts"),  # got the self-match hint
    (dict(shortest_first=True), "try the LONGEST n-gram first"),  # a learner's: got the generic recipe
    # a learner's report: the scan from len - n - 2, the slice from i + n + 1 and n_draft + 1 tokens got the recipe
    (dict(late_start=True), "skips the most recent earlier occurrence"),
    (dict(skip_next=True), "leaves that first token out"), (dict(one_extra=True), "one token too many"),
])
def test_ngram_lookup_checker(capsys, variant, phrase):
    ok, out = run(capsys, check.ngram_lookup, ngram_lookup)
    assert ok and "edge cases" in out
    assert run(capsys, check.ngram_lookup, check._lookup_variant())[0]  # the planted family's base is right
    ok, out = run(capsys, check.ngram_lookup, check._lookup_variant(**variant))
    assert not ok and phrase in out, out


def _lookup_from(sizes):
    """A learner's lookup, written apart from the planted family: the right scan over the n-gram sizes
    ``sizes(max_ngram)``."""
    def lookup(context, max_ngram, n_draft):
        tokens = list(context)
        for n in sizes(max_ngram):
            if n > len(tokens) - 1:
                continue
            for i in range(len(tokens) - n - 1, -1, -1):
                if tokens[i:i + n] == tokens[-n:]:
                    return tokens[i + n:i + n + n_draft]
        return []
    return lookup


@pytest.mark.parametrize("sizes", [lambda m: range(3, 0, -1), lambda m: range(m + 1, 0, -1)])
def test_ngram_lookup_checker_names_a_wrong_first_size(capsys, sizes):
    """A learner's two answers that ignored max_ngram or started above it got "prefer the MOST RECENT earlier
    occurrence", though their scans ran backwards."""
    assert run(capsys, check.ngram_lookup, _lookup_from(lambda m: range(m, 0, -1)))[0]  # the right sizes pass
    ok, out = run(capsys, check.ngram_lookup, _lookup_from(sizes))
    assert not ok and check._FIRST_SIZE_HINT in out and "MOST RECENT" not in out, out


def test_ngram_lookup_checker_wants_a_list_not_a_tuple(capsys):
    """A learner's tuple passed: the exercise asks for a list (as lab's ngram_lookup returns), which a drafter
    joins to the context with +."""
    ok, out = run(capsys, check.ngram_lookup, lambda *args: tuple(ngram_lookup(*args)))
    assert not ok and "returned a tuple; return a list of int token ids" in out, out


def test_ngram_lookup_checker_catches_a_digit_string_search(capsys):
    from lab.drafters.prompt_lookup import ngram_lookup as reference

    # The string search is right whenever every id is a single digit ...
    single = [c for c in check._lookup_cases() if all(t < 10 for t in c[0])]
    assert len(single) >= 20 and all(check._string_lookup(*c) == reference(*c) for c in single)
    # ... so only the multi-digit cases catch it, with a hint of its own.
    ok, out = run(capsys, check.ngram_lookup, check._string_lookup)
    assert not ok and "compare token ids, not their digits" in out

    def learner_string_solution(context, max_ngram, n_draft):  # as a learner might write it
        text = "".join(map(str, context))
        for n in range(min(max_ngram, len(context) - 1), 0, -1):
            suffix = "".join(map(str, context[-n:]))
            i = text.rfind(suffix, 0, len(text) - 1)
            if i >= 0:
                return context[i + n:i + n + n_draft]
        return []

    ok, out = run(capsys, check.ngram_lookup, learner_string_solution)
    assert not ok and "[12, 3, 9, 1, 23]" in out


@pytest.mark.parametrize("variant,phrase", [
    (dict(level_order=True), "best first, not level by level"), (dict(local_prob=True), "PATH probability"),
    (dict(parent_count=True), "follows the paper's rule"), (dict(no_min=True), "below min_prob"),
    (dict(strict_min=True), "compare with >=, not >"), (dict(no_cap=True), "budget nodes"),
    (dict(parent_tokens=True), "INDEX in tokens"), (dict(chain=True), "siblings stay candidates"),
    (dict(local_min=True), "not with its share among its siblings"),
    (dict(sibling_ties=True), "found (pushed) first overall"),  # got the depth-first hint
    (dict(raw_count=True), "not by the raw count"),  # a learner's report: passed every tree
    # a learner's report: these two got the generic recipe
    (dict(token_ties=True), "not by the token id"), (dict(no_sign=True), "SMALLEST key first"),
])
def test_grow_tree_checker(capsys, variant, phrase):
    ok, out = run(capsys, check.grow_tree, check._ref_grow_tree)
    assert ok and "15 trees right" in out
    assert run(capsys, check.grow_tree, check._grow_variant())[0]  # the planted family's base is right
    ok, out = run(capsys, check.grow_tree, check._grow_variant(**variant))
    assert not ok and phrase in out, out


def test_grow_tree_checker_names_a_depth_first_tree(capsys):
    """A tree grown depth first (the best child's whole subtree before the next sibling) got the "PATH probability"
    hint, which fit 3 of its 4 wrong trees (a learner's run)."""
    def depth_first(children, budget, min_prob):  # as a learner wrote it: recursion, children best first
        tokens, parents = [], []

        def walk(kids, parent, prob):
            total = sum(count for count, _ in kids.values())
            for token, (count, sub) in sorted(kids.items(), key=lambda kv: kv[1][0], reverse=True):
                if prob * count / total < min_prob or len(tokens) == budget:
                    continue
                tokens.append(token)
                parents.append(parent)
                walk(sub, len(tokens) - 1, prob * count / total)

        walk(children, -1, 1.0)
        return tokens, parents

    ok, out = run(capsys, check.grow_tree, depth_first)
    assert not ok and "not depth first" in out and "fits" not in out, out


@pytest.mark.parametrize("shift,phrase", [(1, "not its index + 1"), (0, "gets parent -1")])
def test_grow_tree_checker_names_parents_numbered_from_1_or_a_root_of_0(capsys, shift, phrase):
    ok, out = run(capsys, check.grow_tree, lambda *a: check._shift_parents(check._ref_grow_tree(*a), shift))
    assert not ok and phrase in out and "fits" not in out, out


def test_ngram_lookup_checker_has_an_empty_context(capsys):
    def crashes_when_empty(context, max_ngram, n_draft):
        last = context[-1]  # the learner peeks at the last token before sizing the n-grams
        return ngram_lookup(context, max_ngram, n_draft) if last is not None else []

    ok, out = run(capsys, check.ngram_lookup, crashes_when_empty)
    assert not ok and "([], 3, 4) raised IndexError" in out, out


def test_grow_tree_reference_values_and_a_stub(capsys):
    """The checker's reference on worked cases (the values the lesson's text walks through), the drafter's own
    tree on a real trie, and a stub that prints "not solved yet"."""
    from lab.drafters.suffix import SuffixTree

    cases = check._grow_cases()
    # 9 (2/3) first, then 4, 8 and 7 (1/3 each, in the order found), then the 1s under 8 and 4 (1/3 each)
    assert check._ref_grow_tree(*cases[1]) == ([9, 4, 8, 7, 1, 1], [-1, -1, 0, 0, 1, 2])
    assert check._ref_grow_tree(*cases[3]) == ([1, 2, 3], [-1, 0, 1])  # 0.9, 0.9, 0.9 before 5's 0.1
    assert check._ref_grow_tree(*cases[6]) == ([1, 2], [-1, -1])  # 1/2 each, exactly min_prob: kept
    assert check._ref_grow_tree(*cases[8]) == ([], [])
    tree = SuffixTree(max_depth=8)
    tree.add([1, 2, 3, 9, 8, 1, 2, 3, 9, 7, 1, 2, 3, 4])
    node, length = tree.match([1, 2, 3], longest=3)
    assert length == 3

    def as_counts(n):
        return {token: (child.count, as_counts(child)) for token, child in n.children.items()}

    assert check._ref_grow_tree(as_counts(node), 4, 0.1) == ([9, 4, 8, 7], [-1, -1, 0, 0])

    def stub(children, budget, min_prob):
        raise NotImplementedError

    ok, out = run(capsys, check.grow_tree, stub)
    assert not ok and "not solved yet" in out


def _best_first_grow(product, one=1.0, threshold=lambda min_prob: min_prob):
    """A correct grow_tree, best first by path probability: ``product(prob, count, total)`` gives a child's path
    probability from its parent's, ``one`` is the root's and ``threshold(min_prob)`` the least a node may have."""
    import heapq
    import itertools

    def grow_tree(children, budget, min_prob):
        heap, tokens, parents, found = [], [], [], itertools.count()
        limit = threshold(min_prob)

        def add(kids, parent, prob):
            total = sum(count for count, _ in kids.values())
            for token, (count, grandchildren) in kids.items():
                p = product(prob, count, total)
                if p >= limit:
                    heapq.heappush(heap, (-p, next(found), token, grandchildren, parent))

        add(children, -1, one)
        while heap and len(tokens) < budget:
            neg, _, token, grandchildren, parent = heapq.heappop(heap)
            tokens.append(token)
            parents.append(parent)
            if grandchildren:
                add(grandchildren, len(tokens) - 1, -neg)
        return tokens, parents
    return grow_tree


def _grow_in_order(order):
    """A correct grow_tree whose path probability multiplies in the given order, as the lesson's wording allows."""
    return _best_first_grow({"prob * count / total": lambda prob, count, total: prob * count / total,
                             "prob * (count / total)": lambda prob, count, total: prob * (count / total),
                             "(count / total) * prob": lambda prob, count, total: (count / total) * prob}[order])


@pytest.mark.parametrize("order", ["prob * count / total", "prob * (count / total)", "(count / total) * prob"])
def test_grow_tree_passes_whatever_the_order_of_the_multiplications(capsys, order):
    """The lesson's "its probability × their share", written as prob * (count / total), failed a case whose node sat
    at min_prob only up to rounding (9/10 x 1/9 is 0.09999999999999999 that way, 0.1 the reference's way): every
    order passes now."""
    ok, out = run(capsys, check.grow_tree, _grow_in_order(order))
    assert ok and "15 trees right" in out, out


def test_grow_tree_cases_do_not_depend_on_rounding():
    """Each case's expected tree is the one exact arithmetic gives (fractions, no rounding), so no right answer can
    fail on a float a hair either side of min_prob; and the case at min_prob below the first level is still there."""
    from fractions import Fraction

    # 0.1 as 1/10, not the binary float's 0.1000000000000000055…
    exact = _best_first_grow(lambda prob, count, total: prob * Fraction(count, total), Fraction(1),
                             lambda min_prob: Fraction(str(min_prob)))

    cases = check._grow_cases()
    for case in cases:
        assert check._ref_grow_tree(*case) == exact(*case), case
    # 2 and 3 under 1 at 3/4 x 1/2 = 0.375 = min_prob: kept; 5 (1/4) left out
    assert ({1: (3, {2: (1, {}), 3: (1, {})}), 5: (1, {})}, 8, 0.375) in cases
    assert check._ref_grow_tree({1: (3, {2: (1, {}), 3: (1, {})}), 5: (1, {})}, 8, 0.375) == ([1, 2, 3], [-1, 0, 0])


def test_learner_answers_from_a_new_learners_run(capsys):
    """A learner's run of lesson 08: answers of another kind were reported as the learner's crash (the checker's own
    comparison raised), None for "no match" was called a missing return, a Tensor answer was named after the lab's
    ngram_lookup instead of the learner's function, and listing every node breadth first then sorting by
    probability passed although its ties come out in another order."""
    import heapq
    import torch

    def pair_of_ints(children, budget, min_prob):
        return 0, 0

    ok, out = run(capsys, check.grow_tree, pair_of_ints)
    assert not ok and "raised" not in out and "returned (0, 0)" in out, out

    def find_draft(context, max_ngram, n_draft):
        found = ngram_lookup(context, max_ngram, n_draft)
        return found if found else None

    ok, out = run(capsys, check.ngram_lookup, find_draft)
    assert not ok and "returned None where the answer is an empty list: return []" in out, out
    assert "forget" not in out

    def find_draft(context, max_ngram, n_draft):  # noqa: F811 (the learner's name, a second try)
        return torch.tensor(ngram_lookup(context, max_ngram, n_draft))

    ok, out = run(capsys, check.ngram_lookup, find_draft)
    assert not ok and "find_draft returned a Tensor" in out and "ngram_lookup returned" not in out, out

    def breadth_first_then_sorted(children, budget, min_prob):
        nodes, level = [], [(children, -1, 1.0)]
        while level:
            below = []
            for kids, parent, prob in level:
                total = sum(count for count, _ in kids.values())
                for token, (count, sub) in kids.items():
                    p = prob * count / total
                    if p >= min_prob:
                        nodes.append((-p, len(nodes), token, parent))
                        below.append((sub, len(nodes) - 1, p))
            level = below
        kept = heapq.nsmallest(budget, nodes)
        index = {order: i for i, (_, order, _, _) in enumerate(kept)}
        return [t for _, _, t, _ in kept], [index.get(parent, -1) for _, _, _, parent in kept]

    ok, out = run(capsys, check.grow_tree, breadth_first_then_sorted)
    assert not ok and "[5, 3, 4, 30, 40]" in out and "[5, 3, 4, 50, 51]" in out, out


def test_grow_tree_names_a_heap_keyed_on_the_raw_count(capsys):
    """A learner's report: a heap keyed on the raw count passed every tree, since in each a node's children's counts
    added up to its own (so count order was path-probability order)."""
    grow = _grow_by_hand(lambda p, c, tok, n: (-c, n))  # -c, not -p
    out = rejects(check.grow_tree, grow, capsys, "not by the raw count", "({1: (4, {2: (1, {})}), 3: (2, {})}, 3, 0.2)")
    assert "heappush(" not in out, out


def test_grow_tree_case_where_continuations_end():
    """Where continuations end at a node, the reference orders by path probability (2 before 3), a raw-count order
    takes 3 first, and the parent's-count rule (Arctic Inference's) leaves 2 out at min_prob 0.2."""
    case = ({1: (4, {2: (1, {})}), 3: (2, {})}, 3, 0.2)
    assert case in check._grow_cases()
    assert check._ref_grow_tree(*case) == ([1, 2, 3], [-1, 0, -1])
    assert check._grow_variant(raw_count=True)(*case) == ([1, 3, 2], [-1, -1, 0])
    assert check._grow_variant(parent_count=True)(*case) == ([1, 3], [-1, -1])


def test_grow_tree_parent_count_hint_names_both_rules(capsys):
    """Dividing by the parent's own count is Arctic Inference's rule, not a blunder: the hint says the exercise
    follows the paper's siblings' total and why the two differ."""
    out = rejects(check.grow_tree, check._grow_variant(parent_count=True), capsys)
    assert "Arctic Inference" in out and "siblings' total" in out and "min_prob" in out, out
    assert "not by the parent's own count" not in out, out


def _lookup_by_hand(start_back=0, begin_after=0, extra=0):
    """A learner's lookup, written apart from the planted family: the scan starts ``start_back`` positions further
    back, the draft ``begin_after`` positions after the match's end, and it holds ``extra`` tokens more."""
    def find(context, max_ngram, n_draft):
        tokens = list(context)
        for n in range(max_ngram, 0, -1):
            if n > len(tokens) - 1:
                continue
            for i in range(len(tokens) - n - 1 - start_back, -1, -1):
                if tokens[i:i + n] == tokens[-n:]:
                    begin = i + n + begin_after
                    return tokens[begin:begin + n_draft + extra]
        return []
    return find


@pytest.mark.parametrize("slip,phrase", [
    (dict(start_back=1), "skips the most recent earlier occurrence"),
    (dict(begin_after=1), "leaves that first token out"),
    (dict(extra=1), "one token too many"),
])
def test_ngram_lookup_names_a_learners_off_by_one(capsys, slip, phrase):
    """A learner's report: a scan from len(context) - n - 2, a slice from i + n + 1 and n_draft + 1 tokens each got
    the generic recipe; the hints name the slip without giving the slice away."""
    assert run(capsys, check.ngram_lookup, _lookup_by_hand())[0]
    out = rejects(check.ngram_lookup, _lookup_by_hand(**slip), capsys, phrase)
    assert "context[i + n:i + n + n_draft]" not in out and "for n = max_ngram" not in out, out


def _grow_by_hand(key):
    """A learner's grow_tree whose heap entries are ``key(prob, count, token, counter)`` followed by the node."""
    import heapq
    import itertools

    def grow(children, budget, min_prob):
        tokens, parents, heap, counter = [], [], [], itertools.count()

        def push(kids, parent, prob):
            total = sum(c for c, _ in kids.values())
            for tok, (c, sub) in kids.items():
                p = prob * c / total
                if p >= min_prob:
                    heapq.heappush(heap, (*key(p, c, tok, next(counter)), tok, parent, p, sub))

        push(children, -1, 1.0)
        while heap and len(tokens) < budget:
            *_, tok, parent, p, sub = heapq.heappop(heap)
            tokens.append(tok)
            parents.append(parent)
            if sub:
                push(sub, len(tokens) - 1, p)
        return tokens, parents
    return grow


@pytest.mark.parametrize("key,phrase", [
    (lambda p, c, tok, n: (-p, tok, n), "not by the token id"),  # the obvious tie-breaker
    (lambda p, c, tok, n: (p, n), "SMALLEST key first"),  # the minus sign left out
])
def test_grow_tree_names_a_learners_heap_key(capsys, key, phrase):
    """A learner's report: ties broken on the token id and a key without its minus sign got the generic recipe."""
    assert run(capsys, check.grow_tree, _grow_by_hand(lambda p, c, tok, n: (-p, n)))[0]
    out = rejects(check.grow_tree, _grow_by_hand(key), capsys, phrase)
    assert "heappush(" not in out and "start a heap" not in out, out


@pytest.mark.parametrize("shape,phrase", [
    (lambda tree: dict(zip(("tokens", "parents"), tree)), "a dict"),
    (lambda tree: list(zip(*tree)), "one (token, parent) pair per node"),
    (lambda tree: tree[0], "the tokens alone?"),
])
def test_grow_tree_names_an_answer_of_the_wrong_shape(capsys, shape, phrase):
    """A learner's report: a dict, a list of (token, parent) pairs and the tokens alone got the algorithm's recipe."""
    out = rejects(check.grow_tree, lambda *a: shape(check._ref_grow_tree(*a)), capsys, phrase,
                  "return a pair (tokens, parents) of lists, in that order")
    assert "start a heap" not in out, out


def test_grow_tree_names_the_pair_in_the_wrong_order(capsys):
    """A learner's report: (parents, tokens) got the algorithm's recipe."""
    out = rejects(check.grow_tree, lambda *a: check._ref_grow_tree(*a)[::-1], capsys, "the other way round")
    assert "start a heap" not in out, out


def test_grow_tree_takes_a_two_row_array_or_tensor(capsys):
    """The lesson unpacks the answer (tree_tokens, tree_parents = grow_tree(...)), which a 2-row array or tensor
    allows: the shape check before the comparison read only tuples and lists and failed these right answers."""
    import numpy as np
    import torch

    for wrap in (np.array, torch.tensor):
        ok, out = run(capsys, check.grow_tree, lambda *a, wrap=wrap: wrap(check._ref_grow_tree(*a)))
        assert ok, out


def test_grow_tree_refuses_float_ids_and_names_a_row_per_node(capsys):
    """9.0 passed as a token id (the lesson then printed [9.0, 4.0, ...]); an [N, 2] array, one row per node, got no
    word on its shape."""
    import numpy as np

    rejects(check.grow_tree, lambda *a: ([float(t) for t in check._ref_grow_tree(*a)[0]], check._ref_grow_tree(*a)[1]),
            capsys, "floats (9.0 is no token id)")
    rejects(check.grow_tree, lambda *a: np.array(check._ref_grow_tree(*a)).T, capsys,
            "one row per position, shape [6, 2], not two rows (tokens first)")
