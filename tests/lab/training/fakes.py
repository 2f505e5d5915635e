"""Stand-ins for the training tests: a made-up corpus, fake target features, a re-trained target."""
import copy
import random

import torch


def _works(count: int = 3, lines: int = 200) -> list[tuple[str, str]]:
    """A made-up corpus in fetch_corpus's form: ``count`` works of ``lines`` lines of words."""
    rng = random.Random(0)
    words = "thou art the king and I am not so sweet a rose by any other name shall smell".split()
    return [(f"work{i}", "\n".join(" ".join(rng.choice(words) for _ in range(8)) for _ in range(lines)) + "\n")
            for i in range(count)]


WORKS = _works()


def fake_features(target, sequences, *args, seq_len=12, **kwargs):
    """Stands in for target_features / target_generations: random windows in their format, nothing computed."""
    gen = torch.Generator().manual_seed(sequences)
    return {"ids": torch.randint(0, 2048, (sequences, 12), generator=gen),
            "hidden": torch.randn(sequences, 12, target.config.hidden_size, generator=gen).half()}


def retrained(target):
    """A CPU copy of ``target`` with one weight changed: what a re-trained or fine-tuned target looks like to the
    fingerprints (the caller's target is left as it was)."""
    other = copy.deepcopy(target).cpu()
    with torch.no_grad():
        other.model.norm.weight[0] += 1.0
    return other


RAN = []
"""Calls of the planted payload (it must never run)."""


def _payload_ran():
    RAN.append(1)
    return torch.zeros(3, dtype=torch.int16)


class Planted:
    """What a planted cache file holds: unpickling it calls :func:`_payload_ran` (it could call anything)."""

    def __reduce__(self):
        return _payload_ran, ()


def chat_sequence(length: int, answer_start: int, kind: str = "chat") -> dict:
    """A chat-data sequence (:func:`lab.training.chat_data.load_chat_data`'s form) with ids 10, 11, ... and its
    answer from ``answer_start`` on."""
    import torch

    return {"ids": torch.arange(10, 10 + length), "answer_start": answer_start, "kind": kind,
            "topk_ids": torch.zeros(length - answer_start, 8, dtype=torch.long)}


_ANSWERED: dict = {}  # id(target) -> (target, sequences): the answers are computed once per target per session


def answered_sequences(pair) -> list[dict]:
    """Ten short chat requests answered greedily by ``pair``'s target (at most 6 tokens), as chat-data sequences
    (a fresh list of fresh dicts each call; the answers are generated once per target)."""
    import torch

    from lab.decode import generate

    held = _ANSWERED.get(id(pair.target))
    if held is not None and held[0] is pair.target:
        return [dict(sequence) for sequence in held[1]]
    sequences = []
    for text in ["Say hello.", "Name a fruit.", "Count to three.", "Say yes.", "Name a colour.", "Say no.",
                 "Name a dog.", "Say hi.", "Name a city.", "Say bye."]:
        prompt = pair.encode_chat(text)
        answer = generate(pair.target, prompt, max_new_tokens=6, eos_token_id=pair.eos_token_id).tokens
        sequences.append({"ids": torch.tensor(prompt + answer), "answer_start": len(prompt), "kind": "chat",
                          "topk_ids": torch.zeros(len(answer), 8, dtype=torch.long)})
    _ANSWERED[id(pair.target)] = (pair.target, sequences)
    return [dict(sequence) for sequence in sequences]
