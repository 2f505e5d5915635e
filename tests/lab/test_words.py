"""lab.words: names joined into prose, the one helper the help texts, the arena's reading, the picker and the
lesson 14 checker share."""
import pytest

from lab.words import in_words


def test_in_words_joins_with_commas_and_a_last_and():
    assert in_words(["model", "ngram", "eagle3"]) == "model, ngram and eagle3"
    assert in_words(("draft model", "EAGLE")) == "draft model and EAGLE"
    assert in_words(name for name in ["suffix"]) == "suffix"  # any iterable, read once
    assert in_words([]) == ""


def test_in_words_refuses_a_string_and_items_that_are_not_words():
    """A str is an iterable of characters: in_words("abc") read "a, b and c"."""
    import pytest

    with pytest.raises(TypeError, match="words must be an iterable of words .* got the str 'abc'"):
        in_words("abc")
    with pytest.raises(TypeError, match="words must hold str items, got int 1"):
        in_words(["a", 1])


def test_in_words_names_a_non_iterable():
    import pytest

    with pytest.raises(TypeError, match="words must be an iterable of words .* got NoneType"):
        in_words(None)


def test_plural_counts_one_and_many():
    import pytest

    from lab.words import plural

    assert plural(1, "draft") == "1 draft" and plural(0, "draft") == "0 drafts" and plural(3, "draft") == "3 drafts"
    assert plural(1, "entry", "entries") == "1 entry" and plural(2, "entry", "entries") == "2 entries"
    with pytest.raises(TypeError, match="count must be an integer, got bool True"):
        plural(True, "draft")
    with pytest.raises(TypeError, match="word and words must be str"):
        plural(2, None)


def test_acceptance_phrase_names_what_the_rate_divides():
    """One wording for the demo and the race: drafts for a chain, tree nodes (one path kept) for a tree."""
    from lab.words import acceptance_phrase

    assert acceptance_phrase(0.25, 3, 12, False) == "acceptance rate 0.25 (3 of 12 drafts accepted)"
    assert acceptance_phrase(0.125, 18, 144, True) == ("acceptance rate 0.12 (18 of 144 tree nodes accepted; a step "
                                                       "keeps one path of its tree at most)")
    assert acceptance_phrase(None, 0, 0, True) == "acceptance rate n/a (nothing drafted)"
    assert acceptance_phrase(0.5, None, 4, False) == "acceptance rate 0.50"
    assert acceptance_phrase(1.0, 1, 1, False) == "acceptance rate 1.00 (1 of 1 draft accepted)"
    with pytest.raises(TypeError, match="rate must be None or a number"):
        acceptance_phrase("0.5", 1, 2, False)
