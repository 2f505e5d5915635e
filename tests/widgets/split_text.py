"""Helpers for tests of token text whose characters span several tokens (widgets, lab.detok, the CLI demo).

The bundled pair's tokenizer is byte-level BPE: "é" is two tokens, "—" three. Decoded one token at a time they
would show as U+FFFD; every view must instead show the decoded text, the character on the token completing it.
Not a test module: import from it (``from tests.widgets.split_text import ...``).
"""
from lab.trace import StepRecord
from widgets.token_text import PARTIAL_LABEL

PROMPT = "Café, señor — naïve\n"
CONTINUATION = "ROMEO: ¿Qué? 日本語 — 🎭 fin"
FFFD = "\ufffd"


class ByteTokenizer:
    """One token per UTF-8 byte; decoding replaces incomplete or invalid bytes with U+FFFD, as transformers does."""

    def decode(self, ids):
        return bytes(ids).decode("utf-8", errors="replace")


def unlabel(label):
    """A slot / node label back to the text it shows (labels make whitespace visible)."""
    return label.replace("\u2423", " ").replace("\u21b5", "\n").replace("\u21e5", "\t").replace(PARTIAL_LABEL, "")


def chain_steps(tokenizer, prompt_ids, generated, wrong):
    """Step records that emit ``generated``: steps accept 2, 0, 3, 1, ... drafts, and each draft ends in the
    rejected tokens ``wrong`` where the accepted text ends on a whole character (elsewhere nothing is rejected:
    ``wrong`` would not continue a split character); the last step's drafts are all accepted (a bonus token)."""
    records, position, sizes = [], 0, [2, 0, 3, 1]
    while position < len(generated):
        accept = min(sizes[len(records) % len(sizes)], len(generated) - position - 1)
        emitted = generated[position: position + accept + 1]
        whole = not tokenizer.decode(prompt_ids + generated[:position + accept]).endswith(FFFD)
        last = position + accept + 1 >= len(generated) or not whole
        drafted = emitted[:accept] if last else emitted[:accept] + wrong
        records.append(StepRecord(index=len(records), position=position, drafted=drafted, num_accepted=accept,
                                  emitted=emitted, last_kind="bonus" if last else "resampled",
                                  cache_before=len(prompt_ids) + position - 1, target_tokens=1 + len(drafted)))
        position += len(emitted)
    return records
