"""Exercise checker for lesson 08 (prompt lookup: the n-gram search).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import random

from lab.drafters.prompt_lookup import ngram_lookup as _ref_ngram_lookup
from lab.exercises.harness import checker, compare, same_ints, want_token_list

__all__ = ["ngram_lookup"]


def _lookup_cases():
    cases = [
        ([1, 2, 3, 9, 1, 2, 3], 3, 5), ([1, 2, 3, 9, 9, 1, 2, 3], 3, 2), ([4, 1, 2, 8, 1, 2, 6, 1, 2], 3, 5),
        ([1, 2, 7, 5, 2], 3, 5), ([7, 7, 7], 3, 5), ([1, 2, 1, 2], 3, 5), ([1, 2, 3, 4], 3, 5), ([5], 3, 5),
        ([5, 5], 3, 5), ([1, 2, 3, 4, 0, 3, 8, 2, 3], 2, 3), ([1, 2, 3, 4, 0, 3, 8, 2, 3], 1, 3),
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
                    include_gram=False, negative_slice=False, smallest=1, below_max=False, skip_start=False):
    def lookup(context, max_ngram, n_draft):
        tokens, length = list(context), len(context)
        top = max_ngram - 1 if below_max else max_ngram
        sizes = [max_ngram] if no_fallback else range(top, smallest - 1, -1)
        for n in sizes:
            if n > length - 1:
                if negative_slice:
                    raise IndexError("list index out of range")
                continue
            suffix = tokens[-n:]
            n_eff = len(suffix)
            last_start = length - n_eff if self_match else length - n_eff - 1
            if non_overlap:
                last_start = min(last_start, length - 2 * n_eff)
            starts = range(0, last_start + 1) if oldest else range(last_start, 0 if skip_start else -1, -1)
            for i in starts:
                if tokens[i:i + n_eff] == suffix:
                    begin = i if include_gram else i + n_eff
                    return tokens[begin:] if no_cap else tokens[begin:begin + n_draft]
        return []
    return lookup


@checker
def ngram_lookup(fn):
    """Check ``fn(context, max_ngram, n_draft) -> list``: the continuation of the most recent earlier occurrence of
    the longest matching suffix n-gram (``lab.drafters.prompt_lookup.ngram_lookup``)."""
    faults = [
        (_lookup_variant(self_match=True), "the last n tokens always match themselves: search only starts i < "
                                           "len(context) - n (an occurrence that ends before the context does)."),
        (_lookup_variant(oldest=True), "prefer the MOST RECENT earlier occurrence: scan start positions from the "
                                       "end backwards."),
        (_lookup_variant(no_fallback=True), "when the longest n-gram has no earlier occurrence, try n - 1, …, 1 "
                                            "before giving up."),
        (_lookup_variant(no_cap=True), "propose at most n_draft tokens."),
        (_lookup_variant(smallest=2), "try every size down to n = 1: a single matching token is a match too (a "
                                      "smallest n, like vLLM's prompt_lookup_min, is an engine setting, not part of "
                                      "this exercise)."),
        (_lookup_variant(below_max=True), "start at n = max_ngram itself: range(max_ngram, 0, -1) (the sizes "
                                          "max_ngram, ..., 1)."),
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
    want_token_list("ngram_lookup", fn, cases[0], "list(context[i + n:i + n + n_draft])")
    count = compare("ngram_lookup", fn, cases, _ref_ngram_lookup, faults, same_ints,
                    "for n = max_ngram … 1: take the last n tokens, scan earlier start positions from the most "
                    "recent back, and return up to n_draft tokens after the first hit; [] if none.")
    return (f"{count} cases right, including the edge cases (self-match, overlap, short contexts, no match, "
            "multi-digit ids)")
