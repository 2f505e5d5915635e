"""Where the bundled model files live and the fingerprints that tie trained parts to their target (layer 2).

The Shakespeare pair is committed under :data:`PAIR_DIR` (``target/``, ``draft/``, the tokenizer files, the card),
with its Medusa heads in :data:`MEDUSA_DIR` and its EAGLE draft in :data:`EAGLE_DIR`. Medusa heads and EAGLE drafts
read the target's features, so they only work with the target they were trained on: their ``config.json`` records
that target's :func:`target_weights_key` under :data:`TARGET_KEY`, and :func:`check_target_key` refuses another.
:func:`tokenizer_key` and :func:`weights_key` name caches (corpus ids, target features) so that files made for one
tokenizer or target are never read for another.

Imports nothing from ``lab``: loading (``lab.models``), drafters and training all build on it.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import torch

__all__ = ["PAIR_DIR", "MEDUSA_DIR", "EAGLE_DIR", "TOKENIZER_FILES", "TARGET_KEY", "tokenizer_key", "weights_key",
           "target_weights_key", "check_target_key"]

PAIR_DIR = Path(__file__).resolve().parent / "assets" / "shakespeare"
"""The bundled Shakespeare pair: ``target/``, ``draft/``, tokenizer files, ``training.json``, card, prompts."""
MEDUSA_DIR = PAIR_DIR / "medusa"
"""The bundled target's Medusa heads (``python -m lab train medusa``)."""
EAGLE_DIR = PAIR_DIR / "eagle"
"""The bundled target's EAGLE draft (``python -m lab train eagle``)."""

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt")

TARGET_KEY = "target_weights_key"  # the config.json entry naming the target Medusa heads / an EAGLE draft fit


def tokenizer_key(pair_dir: Path = PAIR_DIR) -> str:
    """A short fingerprint (12 hex digits) of the tokenizer saved in ``pair_dir``: sha1 of the bytes of its
    tokenizer files (:data:`TOKENIZER_FILES` that exist there). Retraining the tokenizer changes it. Raises
    ``FileNotFoundError`` when ``pair_dir`` holds none of them."""
    pair_dir = Path(pair_dir)
    files = [pair_dir / name for name in TOKENIZER_FILES if (pair_dir / name).is_file()]
    if not files:
        raise FileNotFoundError(f"pair_dir {pair_dir} holds no tokenizer files ({', '.join(TOKENIZER_FILES)}); pass "
                                "the folder of a saved pair, e.g. lab/assets/shakespeare")
    digest = hashlib.sha1()
    for path in files:
        digest.update(f"{path.name}:".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def weights_key(model, dtype: torch.dtype | None = None) -> str:
    """A short fingerprint (12 hex digits) of ``model``'s parameters, their dtypes and shapes: the cache key that
    keeps features or generations of one target from being read for another (a fine-tuned or re-trained one).

    ``dtype``: None hashes the tensors as they are (features depend on the dtype too); a floating dtype casts every
    floating tensor to it first. :func:`target_weights_key` uses bfloat16 so that one key names the same weights
    loaded in float32, float16 or bfloat16. About 30 ms (20 ms in bfloat16) for the bundled 11 M-parameter target
    on one CPU thread."""
    digest = hashlib.sha1()
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().cpu()
        if dtype is not None and tensor.is_floating_point():
            tensor = tensor.to(dtype)
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:12]


def target_weights_key(target) -> str:
    """The fingerprint Medusa heads and EAGLE drafts record (``config.json``, :data:`TARGET_KEY`) for the target
    they were trained on: :func:`weights_key` of ``target`` in bfloat16. The same for the target loaded in float32,
    float16 or bfloat16 (the bundled one is stored in float16; every cast of it rounds to the same bfloat16
    values), on any device; a re-trained or fine-tuned target gets another. About 20 ms for the bundled target."""
    return weights_key(target, dtype=torch.bfloat16)


def check_target_key(config: dict, target, directory, what: str, command: str) -> None:
    """Raise ``ValueError`` naming ``directory`` and ``command`` (how to retrain) when ``config``, its loaded
    ``config.json``, records a :data:`TARGET_KEY` other than ``target``'s (:func:`target_weights_key`): ``what``
    (e.g. "Medusa heads") was trained for another target. A config without the key passes unchecked."""
    saved = config.get(TARGET_KEY)
    if saved is None:
        return
    actual = target_weights_key(target)
    if saved != actual:
        raise ValueError(f"{directory} holds {what} trained for another target; retrain with `{command}`, or pass "
                         f"the target the weights were trained for (config.json records {TARGET_KEY} {saved!r}, this "
                         f"target's is {actual!r})")
