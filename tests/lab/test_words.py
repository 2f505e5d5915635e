"""lab.words: names joined into prose, the one helper the help texts, the arena's reading, the picker and the
lesson 14 checker share."""
from lab.words import in_words


def test_in_words_joins_with_commas_and_a_last_and():
    assert in_words(["model", "ngram", "eagle3"]) == "model, ngram and eagle3"
    assert in_words(("draft model", "EAGLE")) == "draft model and EAGLE"
    assert in_words(name for name in ["suffix"]) == "suffix"  # any iterable, read once
    assert in_words([]) == ""
