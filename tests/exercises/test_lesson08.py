"""The exercise checkers of lesson 08 (prompt lookup; lab.exercises.lesson08): the reference passes, planted mistakes
are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import pytest

from lab.drafters.prompt_lookup import ngram_lookup
from lab.exercises import lesson08 as check


def run(capsys, checker, fn, *args):
    ok = checker(fn, *args)
    return ok, capsys.readouterr().out


@pytest.mark.parametrize("variant,phrase", [
    (dict(self_match=True), "match themselves"), (dict(oldest=True), "MOST RECENT"),
    (dict(no_fallback=True), "try n - 1"), (dict(no_cap=True), "at most n_draft"),
    (dict(non_overlap=True), "overlap"), (dict(include_gram=True), "FOLLOWED"),
    (dict(negative_slice=True), "longer than len(context) - 1"),
    # these two returned [] where a match was due and got the self-match hint
    (dict(smallest=2), "down to n = 1"), (dict(below_max=True), "start at n = max_ngram itself"),
])
def test_ngram_lookup_checker(capsys, variant, phrase):
    ok, out = run(capsys, check.ngram_lookup, ngram_lookup)
    assert ok and "edge cases" in out
    assert run(capsys, check.ngram_lookup, check._lookup_variant())[0]  # the planted family's base is right
    ok, out = run(capsys, check.ngram_lookup, check._lookup_variant(**variant))
    assert not ok and phrase in out, out


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
