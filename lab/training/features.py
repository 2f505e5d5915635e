"""Target features: what Medusa heads and the EAGLE draft learn from (lessons 10-11).

Both read the frozen target's last hidden state (after its final norm, the input of its LM head).
:func:`target_features` runs the target over corpus windows; :func:`target_generations` over text it wrote itself
(self-distillation). Both are cached in :func:`lab.assets.cache_dir` per target
(:func:`lab.assets.weights_key`) and read back with ``torch.load(weights_only=True)``.
"""
from __future__ import annotations

from pathlib import Path

import torch
from tqdm.auto import tqdm

from lab.assets import PAIR_DIR, cache_dir, save_whole, weights_key
from lab.models import layer_states
from lab.training.corpus import random_windows
from lab.validation import check_int

__all__ = ["check_windows", "target_features", "target_generations"]


def check_windows(target, split: str, seq_len: int) -> None:
    """Raise ``ValueError`` for a split other than "train" / "val" or a window longer than the target's context."""
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    limit = getattr(target.config, "max_position_embeddings", None)
    if limit is not None and seq_len > limit:
        raise ValueError(f"seq_len must be at most the target's context ({limit}), got {seq_len}")


@torch.no_grad()
def target_features(target, sequences: int, seq_len: int = 128, split: str = "train", seed: int = 0,
                    pair_dir: Path = PAIR_DIR, layers: tuple | None = None) -> dict:
    """Run the frozen ``target`` over ``sequences`` random corpus windows of ``seq_len`` tokens and return
    ``{"ids": LongTensor [sequences, seq_len], "hidden": float16 [sequences, seq_len, D]}``: ``hidden[b, t]`` is the
    target's last-layer hidden state after its final norm (the input of its LM head) at token ``ids[b, t]``.

    ``split`` is "train" or "val" (held out, for accuracy). Cached in :func:`lab.assets.cache_dir` per
    (split, sequences, seq_len, seed, :func:`lab.assets.weights_key` of the target). About 1 CPU-minute per 100k
    tokens. ``layers`` (:func:`lab.models.layer_states` indices, e.g. EAGLE-3's low, middle and high layers)
    returns those layers' hidden states concatenated instead, ``hidden`` ``[sequences, seq_len, len(layers) · D]``
    (cached apart). Raises ``ValueError`` for an unknown split or a window longer than the target's context, and
    ``pickle.UnpicklingError`` for a cache file that holds more than tensors.
    """
    check_windows(target, split, seq_len)
    which = "" if layers is None else "_layers" + "-".join(str(int(i)) for i in layers)
    path = cache_dir() / f"features_{split}_{sequences}x{seq_len}_seed{seed}{which}_{weights_key(target)}.pt"
    if path.exists():
        return torch.load(path, weights_only=True)
    windows = random_windows(split, sequences, seq_len, seed, pair_dir)
    was_training = target.training
    target.eval()
    hidden = []
    for i in tqdm(range(0, sequences, 16), desc=f"target features ({split})", mininterval=5):
        if layers is None:
            out = target.model(input_ids=windows[i:i + 16].to(target.device))
            hidden.append(out.last_hidden_state.to("cpu", torch.float16))
        else:
            out = target.model(input_ids=windows[i:i + 16].to(target.device), output_hidden_states=True)
            hidden.append(layer_states(out.hidden_states, layers).to("cpu", torch.float16))
    target.train(was_training)
    result = {"ids": windows, "hidden": torch.cat(hidden)}
    save_whole(path, lambda tmp: torch.save(result, tmp))  # a killed run leaves no truncated cache
    return result


@torch.no_grad()
def target_generations(target, sequences: int, prompt_len: int = 32, seq_len: int = 128, split: str = "train",
                       seed: int = 0, pair_dir: Path = PAIR_DIR) -> dict:
    """The target's own text for self-distillation (Cai et al. 2024, §2.3.2): ``sequences`` windows of ``seq_len``
    tokens, each ``prompt_len`` random corpus tokens followed by what the frozen ``target`` generates after them,
    greedy in the even batches of 64 and sampled at T = 1 (no top-k / top-p) in the odd ones, with transformers'
    ``generate`` (EOS suppressed so every window is full).

    Returns ``{"ids": LongTensor [sequences, seq_len], "hidden": float16 [sequences, seq_len, D]}`` like
    :func:`target_features`: ``hidden[b, t]`` is the target's last hidden state (after its final norm) at
    ``ids[b, t]``. ``split`` picks the corpus part the prompts come from ("train" or "val"); with 64 windows or
    fewer all of them are greedy. ``seed`` picks the prompts and the samples; the global torch RNGs (CPU and
    every CUDA device) are left as they were. Cached in :func:`lab.assets.cache_dir` per (split,
    sequences, prompt_len, seq_len, seed, :func:`lab.assets.weights_key` of the target); about 3 CPU-minutes for
    1600 windows on one thread. Raises ``ValueError`` for ``sequences`` < 1, an unknown split, ``prompt_len``
    outside [1, seq_len), or a window longer than the target's context, and ``pickle.UnpicklingError`` for a cache
    file that holds more than tensors.
    """
    from transformers import GenerationConfig

    sequences = check_int("sequences", sequences, 1)
    check_windows(target, split, seq_len)
    if not 1 <= prompt_len < seq_len:
        raise ValueError(f"prompt_len must be in [1, seq_len) = [1, {seq_len}), got {prompt_len}")
    path = cache_dir() / (f"generations_{split}_{sequences}x{prompt_len}+{seq_len - prompt_len}_seed{seed}_"
                          f"{weights_key(target)}.pt")
    if path.exists():
        return torch.load(path, weights_only=True)
    prompts = random_windows(split, sequences, prompt_len, seed, pair_dir).to(target.device)
    new = seq_len - prompt_len
    greedy = GenerationConfig(do_sample=False, max_new_tokens=new, min_new_tokens=new, pad_token_id=0)
    sampled = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=new,
                               min_new_tokens=new, pad_token_id=0)
    was_training = target.training
    target.eval()
    windows, hidden = [], []
    # Seed the samples without touching the caller's RNG: manual_seed reseeds every CUDA device too, so fork
    # them all (an empty list where there is no CUDA).
    with torch.random.fork_rng(devices=list(range(torch.cuda.device_count()))):
        torch.manual_seed(seed)
        for i in tqdm(range(0, sequences, 64), desc=f"target generations ({split})", mininterval=5):
            batch = prompts[i:i + 64]
            config = sampled if (i // 64) % 2 else greedy
            out = target.generate(batch, attention_mask=torch.ones_like(batch), generation_config=config)
            windows.append(out[:, :seq_len].cpu())
    windows = torch.cat(windows)
    for i in range(0, sequences, 16):
        out = target.model(input_ids=windows[i:i + 16].to(target.device))
        hidden.append(out.last_hidden_state.to("cpu", torch.float16))
    target.train(was_training)
    result = {"ids": windows, "hidden": torch.cat(hidden)}
    save_whole(path, lambda tmp: torch.save(result, tmp))  # a killed run leaves no truncated cache
    return result
