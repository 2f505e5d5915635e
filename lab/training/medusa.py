"""Medusa heads for the bundled target (lesson 10; Cai et al. 2024, Medusa-1: heads trained on a frozen target).

``python -m lab train medusa`` runs :func:`train_medusa`; the heads themselves are
:class:`lab.drafters.medusa.MedusaHeads`.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from lab.assets import MEDUSA_DIR
from lab.training.features import target_features, target_generations
from lab.training.loop import bf16_autocast, cpu_autocast, lr_at, precision_label
from lab.validation import check_int

__all__ = ["medusa_loss", "train_medusa"]


def medusa_loss(heads, hidden: torch.Tensor, ids: torch.Tensor, decay: float,
                labels: torch.Tensor | None = None) -> torch.Tensor:
    """Medusa-1's joint loss sum_k decay^k CE(head_k(h_t), x_{t+1+k}) over a batch of windows.

    ``hidden`` float ``[B, T, D]``, ``ids`` Long ``[B, T]`` (``hidden[b, t]`` is the feature at ``ids[b, t]``).
    ``labels``: optional Long ``[B, T]``, the tokens to score (``ids`` by default), -100 where a position is not
    scored (prompt, padding). Heads with a draft vocabulary score its indices; a token outside it is not scored."""
    labels = ids if labels is None else labels
    targets = heads.from_target_ids(labels)
    with cpu_autocast(hidden.device.type == "cpu"):
        logits = heads(hidden)                                   # [B, T, K, V]
    logits = logits.float()
    loss = logits.sum() * 0.0  # zero, with a graph: a batch with nothing scored still back-propagates
    for k in range(1, heads.num_heads + 1):
        span = ids.size(1) - 1 - k                               # positions with a token at t + 1 + k
        wanted = targets[:, 1 + k:].reshape(-1)
        if span <= 0 or not (wanted != -100).any():
            continue
        loss = loss + decay ** k * F.cross_entropy(logits[:, :span, k - 1].reshape(-1, logits.size(-1)), wanted,
                                                   ignore_index=-100)
    return loss


def train_medusa(threads: int | None = None, steps: int = 600, out_dir: Path = MEDUSA_DIR, *,
                 num_heads: int = 3, sequences: int = 1600, prompt_len: int = 32, seq_len: int = 128, batch: int = 16,
                 lr: float = 1e-3, warmup: int = 30, decay: float = 0.8, val_sequences: int = 64,
                 seed: int = 1234) -> Path:
    """Train Medusa-1 heads on the committed (frozen) target and write them with a model card to ``out_dir``.

    Data (self-distillation, Cai et al. 2024, §2.3.2): :func:`lab.training.features.target_generations`,
    ``sequences`` windows of ``seq_len`` tokens, each ``prompt_len`` corpus tokens and then the target's own
    continuation (half greedy, half sampled at T = 1), so the heads learn what the target writes, which is what
    acceptance rewards (about 3 minutes on one thread the first time, cached). Loss: sum over heads
    k = 1..``num_heads`` of ``decay``^k times the cross-entropy of head k at position t against the window's token
    t + 1 + k (Cai et al. 2024, §2.1.1, λ_k = 0.8^k), over every position, the prompt's included. AdamW (no weight
    decay: the output layers start as the target's LM head and should stay near it), linear warm-up and cosine
    decay, ``batch`` windows per step, bf16 autocast where the CPU has native bf16
    (:func:`lab.training.loop.bf16_autocast`), seed fixed. Held-out accuracy per head comes from
    :func:`lab.drafters.medusa.head_accuracy` on ``val_sequences`` windows of the target's own text (prompts from
    the validation split; all greedy for 64 windows or fewer) and, for comparison with corpus-trained heads, on as
    many corpus validation windows (:func:`lab.training.features.target_features`).

    Writes ``model.safetensors`` + ``config.json`` (:meth:`MedusaHeads.save`, with the target's
    :func:`lab.assets.target_weights_key`), ``training.json`` and ``README.md``; returns the README path. Raises
    ``ValueError`` for ``steps`` or ``batch`` < 1 (and as :class:`MedusaHeads` does for ``num_heads`` < 1).
    """
    from lab.drafters.medusa import MedusaHeads, head_accuracy
    from lab.models import load_pair

    steps, batch = check_int("steps", steps, 1), check_int("batch", batch, 1)
    if threads:
        torch.set_num_threads(threads)
    out_dir = Path(out_dir)
    torch.manual_seed(seed)
    pair = load_pair("shakespeare", device="cpu")
    target = pair.target.requires_grad_(False)
    t0 = time.time()
    train = target_generations(target, sequences, prompt_len, seq_len, split="train")
    val = target_generations(target, val_sequences, prompt_len, seq_len, split="val")
    val_corpus = target_features(target, val_sequences, seq_len, split="val")
    feature_minutes = (time.time() - t0) / 60

    heads = MedusaHeads.from_target(target, num_heads)
    before, before_corpus = head_accuracy(target, heads, val), head_accuracy(target, heads, val_corpus)
    opt = torch.optim.AdamW(heads.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    val_hidden, val_ids = val["hidden"].float(), val["ids"]

    def val_loss():
        heads.eval()
        with torch.no_grad():
            out = sum(medusa_loss(heads, val_hidden[i:i + 16], val_ids[i:i + 16], decay).item()
                      * len(val_ids[i:i + 16]) for i in range(0, len(val_ids), 16)) / len(val_ids)
        heads.train()
        return round(out, 4)

    history = []
    t0 = time.time()
    heads.train()
    bar = tqdm(range(steps), desc="medusa heads", mininterval=5)
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, lr, warmup)
        rows = torch.randint(0, len(train["ids"]), (batch,), generator=gen)
        loss = medusa_loss(heads, train["hidden"][rows].float(), train["ids"][rows], decay)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(heads.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            record = {"step": step, "loss": round(loss.item(), 4)}
            if step % 200 == 0 or step == steps - 1:
                record["val_loss"] = val_loss()
            history.append(record)
            bar.set_postfix(loss=f"{loss.item():.3f}")
    train_minutes = (time.time() - t0) / 60
    heads.eval()
    heads.save(out_dir, target=target)  # records the target's key: loading refuses another target

    # Measure what was committed: the float16 file, loaded back the way MedusaDrafter.from_pretrained loads it.
    saved = MedusaHeads.load(out_dir, target=target)
    after, after_corpus = head_accuracy(target, saved, val), head_accuracy(target, saved, val_corpus)
    params = sum(p.numel() for p in heads.parameters())
    info = {"recipe": {"num_heads": num_heads, "data": "self-distillation (target_generations, seed 0)",
                       "sequences": sequences, "prompt_len": prompt_len, "seq_len": seq_len, "steps": steps,
                       "batch": batch, "lr": lr, "warmup": warmup, "decay": decay, "val_sequences": val_sequences,
                       "seed": seed},
            "trainable_params": params, "feature_minutes": round(feature_minutes, 2),
            "train_minutes": round(train_minutes, 2), "threads": torch.get_num_threads(),
            "bf16_autocast": bf16_autocast(), "torch": torch.__version__, "accuracy_at_init": before, "accuracy": after,
            "corpus_accuracy_at_init": before_corpus, "corpus_accuracy": after_corpus, "history": history}
    (out_dir / "training.json").write_text(json.dumps(info, indent=1))

    rows = [f"| head {k + 1} | token t + {k + 2} | {after['top1'][k]:.3f} | {after['top5'][k]:.3f} | "
            f"{before['top1'][k]:.3f} | {after_corpus['top1'][k]:.3f} | {after_corpus['top5'][k]:.3f} |"
            for k in range(num_heads)]
    lines = [
        "# Medusa heads for the bundled Shakespeare target", "",
        f"{num_heads} Medusa-1 heads (Cai et al. 2024, §2.1.1) for `lab/assets/shakespeare/target`, made by "
        "`python -m lab train medusa` and loaded with `lab.drafters.MedusaDrafter.from_pretrained(load_pair())`. "
        "Each head reads the target's last hidden state h_t (after its final norm, the input of its LM head): "
        "head k = `Linear(384, 2048, bias=False)(h + SiLU(Linear(384, 384)(h)))` and predicts the token at "
        "t + 1 + k, where the target's own head predicts t + 1. Stored as float16 safetensors "
        "(`model.safetensors`) plus `config.json`.", "",
        "## Training",
        f"- the target stays frozen (Medusa-1); {params:,} trainable parameters ({params / 1e6:.2f} M)",
        f"- data (self-distillation, Cai et al. 2024 §2.3.2): {sequences} windows of {seq_len} tokens, each "
        f"{prompt_len} random corpus tokens from the training split followed by the target's own continuation "
        f"(greedy in half the batches, sampled at T = 1 in the others), and the target's hidden states on them "
        f"({sequences * seq_len:,} tokens; {feature_minutes:.1f} min to generate or load, cached in "
        "`~/.cache/speclab`)",
        "- init: residual Linear at zero (each block the identity), output layers copied from the target's LM head, "
        "so at step 0 every head predicts the target's next token",
        f"- loss: sum over k of {decay}^k · cross-entropy(head k(h_t), x_(t+1+k)); AdamW lr {lr}, {warmup} warm-up "
        f"steps then cosine decay, {steps} steps × {batch} windows, {precision_label(info)}, seed {seed}",
        f"- {train_minutes:.1f} minutes on {torch.get_num_threads()} CPU thread(s), torch {torch.__version__}; "
        f"final training loss {history[-1]['loss']}, held-out loss {history[-1].get('val_loss')}", "",
        f"## Accuracy on held-out windows ({val_sequences} windows of {seq_len} tokens, teacher-forced)",
        f"Against the target's own text (prompts from the validation split, continued by the target; "
        f"{'all greedy' if val_sequences <= 64 else 'greedy and sampled batches'}), which is what acceptance needs, "
        f"and against the corpus's validation windows. Every position with a next token counts, the "
        f"{prompt_len - 1} corpus positions at the start of each own-text window included.",
        "| | predicts | top-1, own text | top-5, own text | top-1 at init, own text | top-1, corpus | "
        "top-5, corpus |", "|---|---|---|---|---|---|---|",
        f"| target's LM head | token t + 1 | {after['target_top1']:.3f} | {after['target_top5']:.3f} | | "
        f"{after_corpus['target_top1']:.3f} | {after_corpus['target_top5']:.3f} |",
        *rows, "",
        "Top-5 matters because the drafter's tree (`lab.drafters.medusa.DEFAULT_TREE`, 14 nodes, depth 3) tries "
        "several of each head's best tokens at once and the target keeps the longest path it agrees with.", "",
        "## Limits",
        "Heads of a toy model trained for minutes. On the target's own text they agree with it far more than "
        "on the corpus. Heads trained on the corpus instead (this recipe's earlier version) were slightly more "
        "accurate against the corpus, but on the arena's prompts (3 per task, 64 new tokens, the same tree) they "
        "gave 1.79-2.13 tokens per target call at T = 0 where these give 2.91-3.25; at T = 1 these give fewer "
        "(1.30-1.37 against 1.37-1.56).", "",
    ]
    (out_dir / "README.md").write_text("\n".join(lines))
    return out_dir / "README.md"


# ---------------------------------------------------------------------------------------------------------------
