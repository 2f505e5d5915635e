"""Requests the target writes itself: an instruction-tuned model given only the start of a user turn writes a
plausible user request (Magpie: Xu et al. 2024, "Alignment Data Synthesis from Scratch by Prompting Aligned LLMs
with Nothing", §2.1).

The templated training prompts (:mod:`lab.training.chat_prompts`) are narrow: a few dozen forms. The requests the
target samples here are as varied as what it was tuned on, so a draft distilled on its answers to them meets fewer
surprises on a learner's own questions. :func:`lab.training.chat_data.build_chat_data` takes them with
``source="self"``.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path

import torch

from lab.assets import save_whole
from lab.validation import check_int

__all__ = ["self_requests"]

_MARK = "\x00request\x00"  # stands for the user's text while the chat template is rendered


def _user_prefix(pair) -> list[int]:
    """The prompt ids of the chat template up to where the user's text would start (system turn included)."""
    text = pair.tokenizer.apply_chat_template([{"role": "user", "content": _MARK}], tokenize=False,
                                              add_generation_prompt=True)
    return pair.encode(text.split(_MARK)[0])


@torch.no_grad()
def self_requests(pair, count: int, seed: int = 0, batch: int = 64, max_new_tokens: int = 64, exclude=(),
                  log=print, checkpoint: Path | None = None) -> list[str]:
    """``count`` distinct user requests sampled from ``pair.target`` after the chat template's user prefix, at
    temperature 1 with top-p 0.95 (Magpie, Xu et al. 2024, §2.1).

    Kept: requests that end (the end-of-turn token) within ``max_new_tokens`` tokens, hold at least four words,
    are not already kept and are not in ``exclude`` (the held-out prompts). Sampling goes on in batches of
    ``batch`` until ``count`` are kept; ``seed`` fixes the samples (the global RNG is restored). Returns them in the
    order found.

    ``checkpoint``: a JSON file (None: no checkpoint). After every batch the requests kept so far and the random
    generator's state go there (written beside and renamed, so a kill never leaves half a file); a later call with
    the same settings resumes from it and returns what an uninterrupted run on the same machine would have, and a
    checkpoint made with other settings is ignored and overwritten. The caller deletes it when done.

    Raises ``ValueError`` for counts below 1, when ``pair`` has no chat template, or when 50 batches in a row keep
    nothing new (the model does not write requests)."""
    count, batch = check_int("count", count, 1), check_int("batch", batch, 1)
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 1)
    if not pair.has_chat_template:
        raise ValueError(f"pair: the {pair.name!r} pair has no chat template; self-written requests need a chat pair "
                         "such as 'smollm2-135m'")
    prefix = torch.tensor([_user_prefix(pair)] * batch, device=pair.device)
    end = pair.eos_token_id
    kept, seen, idle = [], set(exclude), 0
    settings = {"count": count, "seed": seed, "batch": batch, "max_new_tokens": max_new_tokens,
                "exclude": sorted(seen), "pair": pair.name, "device": str(pair.device)}
    with torch.random.fork_rng(devices=list(range(torch.cuda.device_count()))):
        torch.manual_seed(seed)
        saved = _read_checkpoint(checkpoint, settings)
        if saved is not None:
            kept, idle = saved["kept"], saved["idle"]
            seen.update(kept)
            _set_rng_state(saved["rng"], pair.device)
            log(f"self-written requests: resuming at {len(kept)}/{count} from {checkpoint}")
        while len(kept) < count:
            out = pair.target.generate(prefix, attention_mask=torch.ones_like(prefix), do_sample=True,
                                       temperature=1.0, top_p=0.95, top_k=None, max_new_tokens=max_new_tokens,
                                       eos_token_id=end, pad_token_id=end)
            before = len(kept)
            for row in out[:, prefix.size(1):].tolist():
                if end not in row:
                    continue  # cut off: not a whole request
                text = pair.tokenizer.decode(row[:row.index(end)], skip_special_tokens=True).strip()
                if len(text.split()) >= 4 and text not in seen:
                    seen.add(text)
                    kept.append(text)
            idle = 0 if len(kept) > before else idle + 1
            if checkpoint is not None:
                _write_checkpoint(Path(checkpoint), {"settings": settings, "kept": kept, "idle": idle,
                                                     "rng": _rng_state(pair.device)})
            if idle >= 50:
                raise ValueError(f"pair: {pair.name!r} wrote no new request in 50 batches; it does not continue a "
                                 "bare user turn")
            log(f"self-written requests: {min(len(kept), count)}/{count}")
    return kept[:count]


def _rng_state(device) -> dict:
    """The generator states sampling on ``device`` reads (the CPU's, and the device's own on CUDA), as text."""
    state = {"cpu": base64.b64encode(torch.random.get_rng_state().numpy().tobytes()).decode()}
    if torch.device(device).type == "cuda":
        state["cuda"] = base64.b64encode(torch.cuda.get_rng_state(device).numpy().tobytes()).decode()
    return state


def _set_rng_state(state: dict, device) -> None:
    def tensor(text):
        return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)

    torch.random.set_rng_state(tensor(state["cpu"]))
    if "cuda" in state:
        torch.cuda.set_rng_state(tensor(state["cuda"]), device)


def _read_checkpoint(path, settings: dict):
    """The checkpoint at ``path`` if it was made with ``settings``, else None."""
    if path is None or not Path(path).exists():
        return None
    saved = json.loads(Path(path).read_text(encoding="utf-8"))
    return saved if saved.get("settings") == settings else None


def _write_checkpoint(path: Path, state: dict) -> None:
    save_whole(path, lambda tmp: tmp.write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8"))
