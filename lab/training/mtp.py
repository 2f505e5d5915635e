"""Multi-token-prediction heads for the bundled Shakespeare target: D DeepSeek-V3-style modules on the frozen target,
trained with teacher forcing on corpus windows (``python -m lab train mtp``).

The real pair's heads train on its chat answers (:mod:`lab.training.chat_mtp`); these read the same target features
the Shakespeare EAGLE draft reads (:func:`lab.training.features.target_features`: the target's last hidden state,
after its final norm, at every token of random training windows) and score every position, since a corpus window
has no prompt. Loss: :func:`lab.training.chat_mtp.mtp_loss` (the mean over depths of the cross-entropy on
t_{i+k+1}; DeepSeek-V3 technical report, arXiv 2412.19437, §2.2). No reduced draft vocabulary: the target's 4,096
tokens make a small head already.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from lab.assets import PAIR_DIR
from lab.training.chat_mtp import depth_predictions, mtp_loss
from lab.training.features import target_features
from lab.training.loop import bf16_autocast, lr_at, make_optimizer
from lab.validation import check_int

__all__ = ["MTP_DIR", "mtp_window_agreement", "train_mtp"]

MTP_DIR = PAIR_DIR / "mtp"
"""Where ``python -m lab train mtp`` writes the Shakespeare target's MTP heads."""


@torch.no_grad()
def mtp_window_agreement(heads, features: dict, batch: int = 16) -> list:
    """Teacher-forced greedy agreement per depth on corpus windows
    (:func:`lab.training.chat_mtp.depth_predictions`): depth k's acceptance given that the drafts before it were
    accepted. ``features``:
    :func:`lab.training.features.target_features`' ``{"ids" [S, T], "hidden" [S, T, d]}``. Returns
    ``[share at depth 1, ..., depth D]`` (floats in [0, 1], rounded to 4 places)."""
    hits, counts = [0] * heads.depth, [0] * heads.depth
    was_training = heads.training
    heads.eval()
    for i in range(0, features["ids"].size(0), batch):
        ids, hidden = features["ids"][i:i + batch], features["hidden"][i:i + batch].float()
        for k, (mine, theirs) in enumerate(depth_predictions(heads, hidden, ids)):
            hits[k] += int((mine == theirs).sum())
            counts[k] += mine.numel()
    heads.train(was_training)
    return [round(h / max(1, n), 4) for h, n in zip(hits, counts)]


def train_mtp(threads: int | None = None, steps: int = 1500, out_dir: Path = MTP_DIR, *, depth: int = 2,
              intermediate: int = 256, kv_heads: int = 2, sequences: int = 1600, seq_len: int = 256, batch: int = 8,
              lr: float = 2e-3, warmup: int = 50, seed: int = 2026, log=print) -> Path:
    """Train D = ``depth`` MTP modules (:class:`lab.drafters.mtp.MTPHeads`: width 384 as the target, ``kv_heads``
    key/value heads, MLP ``intermediate``) on the frozen Shakespeare target and save them to ``out_dir``
    (``config.json``, float16 ``model.safetensors``, ``training.json`` with the recipe, history and held-out
    per-depth agreement on 64 validation windows, measured on the saved float16 file).

    Data: :func:`lab.training.features.target_features` of ``sequences`` × ``seq_len`` training windows (the EAGLE
    draft's cache: about 4 CPU-minutes the first time). AdamW with warm-up and cosine decay, gradient clipping at 1,
    bf16 autocast where the CPU has native bf16. About 5 CPU-minutes with the defaults on 2 threads. Raises
    ``ValueError`` for ``steps``, ``batch``, ``depth``, ``intermediate`` or ``kv_heads`` below 1. Returns
    ``out_dir``. Source: DeepSeek-V3 technical report, §2.2 (training objective, without the main model's loss:
    the target is frozen)."""
    from lab.drafters.mtp import MTPHeads
    from lab.models import load_pair

    steps, batch = check_int("steps", steps, 1), check_int("batch", batch, 1)
    depth, intermediate = check_int("depth", depth, 1), check_int("intermediate", intermediate, 1)
    kv_heads = check_int("kv_heads", kv_heads, 1)
    if threads:
        torch.set_num_threads(threads)
    out_dir = Path(out_dir)
    pair = load_pair("shakespeare", device="cpu")
    target = pair.target.requires_grad_(False)
    t0 = time.time()
    data = target_features(target, sequences, seq_len, split="train")
    val = target_features(target, 64, seq_len, split="val")
    feature_minutes = (time.time() - t0) / 60

    torch.manual_seed(seed)
    heads = MTPHeads(target, {"depth": depth, "intermediate": intermediate, "kv_heads": kv_heads}).float().train()
    opt = make_optimizer(heads, lr)
    params = [p for p in heads.parameters() if p.requires_grad]
    gen = torch.Generator().manual_seed(seed)
    history = []
    t0 = time.time()
    for step in tqdm(range(steps), desc="MTP heads", mininterval=5):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup)
        rows = torch.randint(0, data["ids"].size(0), (batch,), generator=gen)
        ids = data["ids"][rows]
        loss, per_depth = mtp_loss(heads, data["hidden"][rows].float(), ids, ids)  # every position is scored
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            entry = {"step": step, "loss": round(loss.item(), 4), "per_depth": [round(x.item(), 4) for x in per_depth]}
            if step % 500 == 0 or step == steps - 1:
                entry["agreement"] = mtp_window_agreement(heads, val)
            history.append(entry)
            log(f"MTP step {step}/{steps} {entry} ({(time.time() - t0) / 60:.1f} min)")
    train_minutes = (time.time() - t0) / 60
    heads.eval()
    heads.save_pretrained(out_dir)
    saved = MTPHeads.from_pretrained(target, out_dir).float()  # measure what was committed: the float16 file
    info = {"recipe": {"depth": depth, "intermediate": intermediate, "kv_heads": kv_heads, "steps": steps,
                       "batch": batch, "lr": lr, "warmup": warmup, "sequences": sequences, "seq_len": seq_len,
                       "seed": seed, "data": "target_features (corpus training windows, seed 0)"},
            "parameters": heads.parameter_count(), "tokens_seen": steps * batch * seq_len,
            "held_out_agreement": {f"depth_{k}": a for k, a in enumerate(mtp_window_agreement(saved, val), start=1)},
            "feature_minutes": round(feature_minutes, 1), "train_minutes": round(train_minutes, 1),
            "history": history, "torch": torch.__version__, "threads": torch.get_num_threads(),
            "bf16_autocast": bf16_autocast()}
    (out_dir / "training.json").write_text(json.dumps(info, indent=1))
    return out_dir
