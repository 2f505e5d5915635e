"""Multi-token-prediction heads for the real pair (``"smollm2-135m"``): D DeepSeek-V3-style modules on the frozen
target, trained on the target's own answers with teacher forcing.

``python -m lab train chat-mtp`` runs :func:`train_chat_mtp` on the data of ``python -m lab train chat-data``
(:mod:`lab.training.chat_data`) and the target features :func:`lab.training.chat_eagle.chat_features` caches (the
same cache as the EAGLE draft and the Medusa heads). The heads are :class:`lab.drafters.mtp.MTPHeads`: module k
reads the target's true h^0 (depth 1) or module k-1's output on it, and the true embedding of t_{i+k}, and its head
scores t_{i+k+1} with cross-entropy over the draft vocabulary (labels outside it and outside the answer: -100). The
loss is the mean of the D depths' losses, as DeepSeek-V3 averages its MTP losses (§2.2 "MTP Training Objective";
the main model's own loss is absent here because the target is frozen).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from lab.assets import SMOLLM2_DIR
from lab.training.chat_data import check_recipe, resume_chat_run
from lab.training.chat_eagle import feature_data
from lab.training.chat_medusa import medusa_batch
from lab.training.checkpoints import discard_training_state, save_training_state
from lab.training.loop import bf16_autocast, cpu_autocast, lr_at, make_optimizer, take_batch

__all__ = ["ChatMTPRecipe", "mtp_loss", "depth_predictions", "mtp_agreement", "train_chat_mtp"]


@dataclass
class ChatMTPRecipe:
    """Every setting of ``python -m lab train chat-mtp`` (recorded in the heads' ``training.json``)."""

    seed: int = 2026
    depth: int = 2            # D modules: drafts of up to 2 tokens
    intermediate: int = 512   # each block's MLP width (the target's is 1536): ~2.4 M parameters per module
    draft_vocab: int = 8192   # the most frequent answer tokens of the training sequences, as the EAGLE draft's
    steps: int = 250
    batch: int = 8
    max_len: int = 384        # the features' cut (chat_features), shared with the EAGLE draft's cache
    lr: float = 1e-3
    warmup: int = 30
    held_out_share: float = 0.05


def mtp_loss(heads, hidden: torch.Tensor, ids: torch.Tensor, labels: torch.Tensor) -> tuple:
    """Teacher-forced MTP loss: ``hidden`` the target's h^0 ``[B, T, d]``, ``ids`` ``[B, T]``, ``labels`` ``[B, T]``
    (the token to score at each position, -100 where none: prompt, padding). Depth k's row i predicts
    ``labels[:, i + k + 1]`` (mapped to the draft vocabulary, -100 outside it). Returns ``(mean over depths, [loss of
    depth 1, ..., depth D])``, float32 scalars; a depth without any scored row contributes 0."""
    with cpu_autocast(hidden.device.type == "cpu"):
        outs = heads(hidden, ids)
        losses = []
        for k, h in enumerate(outs, start=1):
            gold = heads.to_draft_ids(labels[:, k + 1:])
            logits = heads.head_logits(h[:, :gold.size(1)])
            if (gold != -100).any():
                losses.append(F.cross_entropy(logits.reshape(-1, logits.size(-1)), gold.reshape(-1),
                                              ignore_index=-100))
            else:
                losses.append(logits.sum() * 0.0)
    return torch.stack(losses).mean(), losses


@torch.no_grad()
def depth_predictions(heads, hidden: torch.Tensor, ids: torch.Tensor) -> list:
    """Teacher-forced greedy drafts of every depth on a batch, beside the target's own: for depth k = 1..D a pair
    ``(mine, theirs)`` of target-id tensors ``[B, T - k - 1]`` (int64): the module's argmax for t_{i+k+1} (fed the
    true h^0 and the true tokens up to t_{i+k}) and the target's argmax there (its LM head on h^0_{i+k}). Where
    they agree, a greedy chain accepts depth k given that the drafts before it were accepted. ``hidden`` ``[B, T,
    d]`` (the target's last-layer states, any float dtype), ``ids`` ``[B, T]``."""
    head = heads.target.get_output_embeddings()
    theirs = head(hidden.to(head.weight.dtype)).argmax(-1)   # [B, T]: the target's argmax for t_{j+1}
    pairs = []
    for k, h in enumerate(heads(hidden.to(heads.layers[0].proj.weight.dtype), ids), start=1):
        span = ids.size(1) - k - 1
        pairs.append((heads.to_target_ids(heads.head_logits(h[:, :span]).argmax(-1)), theirs[:, k:k + span]))
    return pairs


def mtp_agreement(heads, sequences: list[dict], features: list[torch.Tensor], max_len: int, pad_id: int) -> dict:
    """Teacher-forced greedy agreement per depth: the share of answer positions where depth k's argmax for t_{i+k+1}
    (fed the true h^0 and the true tokens up to t_{i+k}) equals the target's own argmax there (its LM head on
    h^0_{i+k}). With greedy verification that is depth k's acceptance given that the drafts before it were accepted:
    the per-position acceptance of a chain (:func:`depth_predictions`). Returns ``{"depth_1":
    {kind: share, ..., "all": share}, ...}``."""
    hits: dict[int, dict[str, list[int]]] = {k: {} for k in range(1, heads.depth + 1)}
    was_training = heads.training
    heads.eval()
    for i in range(0, len(sequences), 8):
        chunk = sequences[i:i + 8]
        hidden, ids, labels = medusa_batch(chunk, features[i:i + 8], max_len, pad_id)
        for k, (mine, theirs) in enumerate(depth_predictions(heads, hidden, ids), start=1):
            keep = labels[:, k + 1:] != -100
            for b, s in enumerate(chunk):
                counts = hits[k].setdefault(s["kind"], [0, 0])
                counts[0] += int((mine[b][keep[b]] == theirs[b][keep[b]]).sum())
                counts[1] += int(keep[b].sum())
    heads.train(was_training)
    result = {}
    for k, by_kind in hits.items():
        row = {kind: round(h / max(1, n), 4) for kind, (h, n) in sorted(by_kind.items())}
        row["all"] = round(sum(h for h, _ in by_kind.values()) / max(1, sum(n for _, n in by_kind.values())), 4)
        result[f"depth_{k}"] = row
    return result


def train_chat_mtp(pair, recipe: ChatMTPRecipe | None = None, out_dir: Path = SMOLLM2_DIR / "mtp", log=print,
                   data=None) -> Path:
    """Train MTP heads for ``pair``'s frozen target (the real pair, in the dtype the drafter will read its hidden
    states in) and save them to ``out_dir``: ``config.json``, ``model.safetensors`` (float16 modules, int64 draft
    vocabulary; the shared head is the target's and not saved) and ``training.json`` (recipe, data, history,
    held-out per-depth agreement per kind, minutes). Every 100 steps a checkpoint goes to ``<chat
    data>/mtp-checkpoint/``; a run made with the same recipe and data resumes from it, a finished run deletes it.

    ``data``: None reads the chat data (:func:`lab.training.chat_eagle.feature_data`; ``FileNotFoundError`` when it
    has not been built), or a ready ``(sequences, (held, held features), (train, train features), draft vocab)`` in
    that function's form (tests). Source: DeepSeek-V3 technical report, §2.2."""
    from lab.drafters.mtp import MTPHeads

    recipe = recipe or ChatMTPRecipe()
    check_recipe(recipe, ("depth", "intermediate", "draft_vocab", "steps", "batch", "max_len"))
    torch.manual_seed(recipe.seed)
    target = pair.target.requires_grad_(False)
    if data is None:
        data = feature_data(pair, recipe.seed, recipe.held_out_share, recipe.max_len, recipe.draft_vocab, log)
    sequences, (held, held_features), (train, train_features), vocab = data
    heads = MTPHeads(target, {"depth": recipe.depth, "intermediate": recipe.intermediate},
                     draft_vocab=vocab).float().train()
    pad = pair.eos_token_id
    opt = make_optimizer(heads, recipe.lr)
    params = [p for p in heads.parameters() if p.requires_grad]
    checkpoint, plan, history, order, first_step, minutes = resume_chat_run(pair, "mtp", recipe, sequences,
                                                                            heads, opt, log)
    answer_tokens = sum(len(s["topk_ids"]) for s in train)
    log(f"chat MTP: {len(train)} training sequences ({answer_tokens} answer tokens), {len(held)} held out, "
        f"{heads.parameter_count():,} parameters in {recipe.depth} modules")
    t0 = time.time() - minutes * 60
    for step in range(first_step, recipe.steps):
        picked, order = take_batch(order, recipe.batch, len(train), recipe.seed + step)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, recipe.steps, recipe.lr, recipe.warmup)
        hidden, ids, labels = medusa_batch([train[i] for i in picked], [train_features[i] for i in picked],
                                           recipe.max_len, pad)
        loss, per_depth = mtp_loss(heads, hidden, ids, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 25 == 0 or step == recipe.steps - 1:
            entry = {"step": step, "loss": round(loss.item(), 4),
                     "per_depth": [round(x.item(), 4) for x in per_depth]}
            if step % 100 == 0 or step == recipe.steps - 1:
                entry["agreement"] = mtp_agreement(heads, held, held_features, recipe.max_len, pad)
            history.append(entry)
            log(f"chat MTP step {step}/{recipe.steps} {entry} ({(time.time() - t0) / 60:.1f} min)")
        if step % 100 == 99:
            save_training_state(checkpoint, heads, opt, plan, step + 1, order, history, (time.time() - t0) / 60)
    heads.eval()
    out_dir = Path(out_dir)
    heads.save_pretrained(out_dir)
    saved = MTPHeads.from_pretrained(target, out_dir).float()  # measure what was committed: the float16 file
    answers = torch.cat([s["ids"][s["answer_start"]:] for s in train]) if train else torch.zeros(0, dtype=torch.long)
    info = {"recipe": asdict(recipe),
            "data": {"sequences": len(sequences), "train_sequences": len(train), "answer_tokens": answer_tokens,
                     "held_out_sequences": len(held)},
            "parameters": heads.parameter_count(),
            "draft_vocab_coverage": round(torch.isin(answers, vocab).float().mean().item(), 4) if len(answers) else 0.0,
            "held_out_agreement": mtp_agreement(saved, held, held_features, recipe.max_len, pad),
            "minutes": round((time.time() - t0) / 60, 1), "history": history, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "bf16_autocast": bf16_autocast()}
    (out_dir / "training.json").write_text(json.dumps(info, indent=1))
    discard_training_state(checkpoint)
    return out_dir
