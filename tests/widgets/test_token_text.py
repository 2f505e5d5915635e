"""widgets.token_text: the text each token adds, as the viewers show it; here, the ids it takes."""
import pytest

from tests.widgets.split_text import ByteTokenizer
from widgets.token_text import token_labels, token_texts


def test_token_texts_and_labels_refuse_ids_that_are_not_integers():
    """token_texts(None, [1.5]) showed ⟨1⟩ and, with a tokenizer, token 1's text: a float id was truncated."""
    for tokenizer in (None, ByteTokenizer()):
        for show in (token_texts, token_labels):
            with pytest.raises(TypeError, match="ids must hold integer token ids, got float 1.5"):
                show(tokenizer, [0x61, 1.5])
    assert token_texts(None, [17]) == ["\u27e817\u27e9"] and token_labels(None, [17]) == ["17"]
    assert token_texts(ByteTokenizer(), [0x61, 0x62]) == ["a", "b"]
