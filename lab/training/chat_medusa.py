"""Medusa heads for the real pair (``"smollm2-135m"``): three Medusa-1 heads on the frozen target's features, each
over a reduced draft vocabulary, trained on the target's own answers (self-distillation).

``python -m lab train chat-medusa`` runs :func:`train_chat_medusa` on the data of ``python -m lab train chat-data``
and the target features :func:`lab.training.chat_eagle.chat_features` caches. Three output layers over the whole
49,152-token vocabulary would hold 85 M parameters, most of the size of the target's 30 layers (106 M). So the
heads score a reduced draft vocabulary (:mod:`lab.drafters.draft_vocab`), the 2,048 most frequent answer tokens,
and share one trainable output layer after their own residual blocks (``shared_head``; vLLM's Medusa checkpoints
may do the same, ``MedusaConfig.original_lm_head``): 2,176,704 parameters, 4.4 MB in float16, where three own
layers over 4,096 ids took 8,074,944 (16.2 MB). What that cost was measured with this recipe on the templated half
of the chat data (400 steps, one thread; held-out top-1 accuracy of heads 1 / 2 / 3): own layers over 4,096 ids
0.436 / 0.295 / 0.225; over 2,048 ids 0.428 / 0.293 / 0.224; one shared layer over 4,096 ids 0.422 / 0.275 / 0.203;
the target's frozen LM-head rows instead of a trained layer 0.359 / 0.224 / 0.168. The real pair's drafts share a
40 MB budget, and the EAGLE-3 and parallel drafts needed the room. Loss: :func:`lab.training.medusa.medusa_loss`
(Cai et al. 2024, §2.1.1, λ_k = 0.8^k) on the answer tokens.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from lab.assets import SMOLLM2_DIR
from lab.training.chat_data import check_recipe, resume_chat_run
from lab.training.chat_eagle import feature_data
from lab.training.checkpoints import discard_training_state, save_training_state
from lab.training.loop import bf16_autocast, lr_at, take_batch
from lab.training.medusa import medusa_loss

__all__ = ["ChatMedusaRecipe", "medusa_batch", "train_chat_medusa"]


@dataclass
class ChatMedusaRecipe:
    """Every setting of ``python -m lab train chat-medusa`` (recorded in the heads' ``training.json``)."""

    seed: int = 77
    num_heads: int = 3
    draft_vocab: int = 2048
    shared_head: bool = True  # one output layer after the three residual blocks (see the module docstring)
    steps: int = 400
    batch: int = 8
    max_len: int = 384     # the features' cut (chat_features), shared with the EAGLE draft's cache
    lr: float = 1e-3
    warmup: int = 30
    decay: float = 0.8
    held_out_share: float = 0.03


def medusa_batch(sequences: list[dict], features: list[torch.Tensor], max_len: int, pad_id: int):
    """Right-padded ``(hidden float32 [B, T, D], ids [B, T], labels [B, T])``: ``labels`` holds the answer tokens
    and -100 on prompt and padding positions, so head k at position t is scored when x_{t+1+k} is an answer
    token. ``features[i]`` is :func:`chat_features` of ``sequences[i]`` (cut to ``max_len``); ``ValueError`` when
    the lengths differ."""
    cut = []
    for s in sequences:
        ids = s["ids"]
        drop = max(0, len(ids) - max_len)
        cut.append((ids[drop:], max(0, s["answer_start"] - drop)))
    width = max(len(ids) for ids, _ in cut)
    hidden = torch.zeros(len(cut), width, features[0].size(-1))
    ids = torch.full((len(cut), width), pad_id, dtype=torch.long)
    labels = torch.full((len(cut), width), -100, dtype=torch.long)
    for b, ((x, start), f) in enumerate(zip(cut, features)):
        if len(f) != len(x):
            raise ValueError(f"features[{b}] has {len(f)} rows, its sequence cut to max_len = {max_len} has "
                             f"{len(x)} tokens")
        ids[b, :len(x)] = x
        labels[b, start:len(x)] = x[start:]
        hidden[b, :len(x)] = f.float()
    return hidden, ids, labels


@torch.no_grad()
def _accuracy(heads, sequences, features, max_len, pad_id) -> dict:
    """Teacher-forced top-1 and top-5 accuracy of each head on the answer tokens, in target ids."""
    hits1 = [0] * heads.num_heads
    hits5 = [0] * heads.num_heads
    counts = [0] * heads.num_heads
    for i in range(0, len(sequences), 8):
        hidden, _, labels = medusa_batch(sequences[i:i + 8], features[i:i + 8], max_len, pad_id)
        top5 = heads.to_target(heads(hidden.to(heads.lm_heads[0].weight.dtype)).topk(5, dim=-1).indices)
        for k in range(1, heads.num_heads + 1):
            span = labels.size(1) - 1 - k
            if span <= 0:
                continue
            gold = labels[:, 1 + k:]
            keep = gold != -100
            guess = top5[:, :span, k - 1]
            hits1[k - 1] += int(((guess[..., 0] == gold) & keep).sum())
            hits5[k - 1] += int(((guess == gold[..., None]).any(-1) & keep).sum())
            counts[k - 1] += int(keep.sum())
    return {"top1": [round(h / max(1, c), 4) for h, c in zip(hits1, counts)],
            "top5": [round(h / max(1, c), 4) for h, c in zip(hits5, counts)], "positions": counts}


def train_chat_medusa(pair, recipe: ChatMedusaRecipe | None = None, out_dir: Path = SMOLLM2_DIR / "medusa",
                      log=print) -> Path:
    """Train Medusa-1 heads for ``pair``'s frozen target (the real pair, in the dtype the drafter reads its
    features in) on the chat data and save them to ``out_dir`` (:meth:`lab.drafters.medusa.MedusaHeads.save`:
    float16 weights, the int64 draft vocabulary, the target's key) with ``training.json`` (recipe, data, history,
    held-out accuracy per head, minutes). Checkpoints every 100 steps in ``<chat data>/medusa-checkpoint/``; a run
    resumes from one made with the same recipe and data. Raises ``FileNotFoundError`` when the chat data has not
    been built. Source: Cai et al. 2024, "Medusa", §2.1.1 and §2.3.2 (self-distillation)."""
    from lab.drafters.medusa import MedusaHeads

    recipe = recipe or ChatMedusaRecipe()
    check_recipe(recipe, ("num_heads", "draft_vocab", "steps", "batch", "max_len"))
    torch.manual_seed(recipe.seed)
    target = pair.target.requires_grad_(False)
    sequences, (held, held_features), (train, train_features), vocab = feature_data(
        pair, recipe.seed, recipe.held_out_share, recipe.max_len, recipe.draft_vocab, log)
    heads = MedusaHeads.from_target(target, recipe.num_heads, draft_vocab=vocab,
                                    shared_head=recipe.shared_head).float().train()
    opt = torch.optim.AdamW(heads.parameters(), lr=recipe.lr, betas=(0.9, 0.95), weight_decay=0.0)
    pad = pair.eos_token_id
    # the heads start from the seed, so a resumed run measures the same start as the first did
    before = _accuracy(heads, held, held_features, recipe.max_len, pad)
    checkpoint, plan, history, order, first_step, minutes = resume_chat_run(pair, "medusa", recipe, sequences,
                                                                            heads, opt, log)
    params = sum(p.numel() for p in heads.parameters())
    log(f"chat Medusa: {len(train)} training sequences, {len(held)} held out, {params:,} parameters")
    t0 = time.time() - minutes * 60
    for step in range(first_step, recipe.steps):
        picked, order = take_batch(order, recipe.batch, len(train), recipe.seed + step)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, recipe.steps, recipe.lr, recipe.warmup)
        hidden, ids, labels = medusa_batch([train[i] for i in picked], [train_features[i] for i in picked],
                                           recipe.max_len, pad)
        loss = medusa_loss(heads, hidden, ids, recipe.decay, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(heads.parameters(), 1.0)
        opt.step()
        if step % 25 == 0 or step == recipe.steps - 1:
            entry = {"step": step, "loss": round(loss.item(), 4)}
            history.append(entry)
            log(f"chat Medusa step {step}/{recipe.steps} {entry} ({(time.time() - t0) / 60:.1f} min)")
        if step % 100 == 99:
            save_training_state(checkpoint, heads, opt, plan, step + 1, order, history, (time.time() - t0) / 60)
    heads.eval()
    out_dir = Path(out_dir)
    heads.save(out_dir, target=target)
    saved = MedusaHeads.load(out_dir, target=target)  # measure what was committed: the float16 file
    info = {"recipe": asdict(recipe), "data": {"sequences": len(sequences), "train_sequences": len(train),
            "held_out_sequences": len(held)}, "parameters": params,
            "held_out_accuracy_at_init": before,
            "held_out_accuracy": _accuracy(saved, held, held_features, recipe.max_len, pad),
            "minutes": round((time.time() - t0) / 60, 1), "history": history, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "bf16_autocast": bf16_autocast()}
    (out_dir / "training.json").write_text(json.dumps(info, indent=1))
    discard_training_state(checkpoint)
    return out_dir
