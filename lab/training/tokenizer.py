"""The pair's tokenizer: byte-level BPE trained on the corpus, with one special token that ends every work."""
from __future__ import annotations

__all__ = ["EOS", "train_tokenizer"]

EOS = "<|endoftext|>"
"""The only special token: end of a work, and also BOS and padding."""


def train_tokenizer(texts: list[str], vocab_size: int):
    """Byte-level BPE (HF ``tokenizers``) of ``vocab_size`` ids, trained on ``texts`` and wrapped as a transformers
    fast tokenizer (:data:`EOS` as BOS, EOS and pad; no unknown token: every byte has an id)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOS, eos_token=EOS, unk_token=None,
                                   pad_token=EOS, model_max_length=512)
