"""The training loop every recipe shares: precision, learning-rate schedule, optimizer, batches, validation loss.

Training always runs on the CPU. It uses bf16 autocast only where the CPU multiplies bf16 in hardware
(:func:`bf16_autocast`, the same rule as ``load_pair(dtype="auto")``); elsewhere bf16 is emulated and far slower
than float32.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

__all__ = ["bf16_autocast", "cpu_autocast", "precision_label", "lr_at", "make_optimizer", "take_batch", "Batches",
           "validation_loss", "train_model"]


def bf16_autocast() -> bool:
    """Whether training runs under bf16 autocast: where this CPU multiplies bf16 matrices in hardware, decided as
    :func:`lab.models.auto_dtype` decides it for the CPU (its bf16 flags: ``amx_bf16`` or ``avx512_bf16`` on x86,
    ``bf16`` on aarch64, and torch with oneDNN), so training and ``load_pair(dtype="auto")`` never disagree. Not
    oneDNN's own ``torch.ops.mkldnn._is_mkldnn_bf16_supported()``: that is also True on AVX-512 CPUs that only
    emulate bf16. Without native bf16 it is emulated: on this course's AVX2-only CPU a target training step took
    20x longer under autocast (57 s against 2.4 s in float32, 16 x 256 tokens, 2 threads), so there training stays
    in float32. Training always runs on the CPU, so a GPU changes nothing here."""
    from lab.models import auto_dtype

    return auto_dtype("cpu") == torch.bfloat16


def cpu_autocast(enabled: bool = True):
    """A CPU bf16 autocast context, on only when ``enabled`` and :func:`bf16_autocast` says bf16 is native."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled and bf16_autocast())


def precision_label(info: dict) -> str:
    """How a recorded run (``training.json`` as a dict) trained, for its model card: "bf16 autocast" or float32."""
    # Runs recorded before the check existed all trained under bf16 autocast.
    return "bf16 autocast" if info.get("bf16_autocast", True) else "float32 (no native bf16 on this CPU)"


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    """The learning rate at ``step`` of ``total``: linear warm-up to ``peak`` over ``warmup`` steps, then cosine
    decay to a tenth of ``peak``."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def take_batch(order: list[int], size: int, population: int, seed: int) -> tuple[list[int], list[int]]:
    """The next ``size`` indices of a shuffled pass over ``range(population)``: ``(batch, what remains)``. When
    ``order`` (the rest of the current pass) holds fewer than ``size``, a new pass shuffled with ``seed`` is
    appended first, so every index is seen once per pass and a resumed run continues the same order."""
    import random

    if len(order) < size:
        order = order + random.Random(seed).sample(range(population), population)
    return order[:size], order[size:]


def make_optimizer(model, lr):
    """AdamW (betas 0.9 / 0.95) with weight decay 0.1 on matrices and none on vectors (norms, biases)."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95))


class Batches:
    """Random training windows, some rebuilt as repeated passages (copy augmentation).

    ``Batches(ids, seq_len, copy_frac, gen)``: ``ids`` 1-D token ids; a share ``copy_frac`` of rows repeat one
    passage of 8-48 tokens after gaps of 0-32 corpus tokens; ``gen`` draws everything (reproducible)."""

    def __init__(self, ids: torch.Tensor, seq_len: int, copy_frac: float, gen: torch.Generator):
        self.ids, self.seq_len, self.copy_frac, self.gen = ids, seq_len, copy_frac, gen

    def window(self, n: int) -> torch.Tensor:
        """A random window of ``n`` consecutive corpus ids (``ids``' dtype, ``[n]``)."""
        start = int(torch.randint(0, len(self.ids) - n - 1, (1,), generator=self.gen))
        return self.ids[start:start + n]

    def _copy_sequence(self) -> torch.Tensor:
        n = self.seq_len + 1
        length = int(torch.randint(8, 49, (1,), generator=self.gen))
        passage = self.window(length)
        parts, total = [], 0
        while total < n:
            gap = self.window(int(torch.randint(0, 33, (1,), generator=self.gen)))
            parts += [gap, passage]
            total += len(gap) + length
        return torch.cat(parts)[:n]

    def next(self, batch: int) -> torch.Tensor:
        """``batch`` rows of ``seq_len + 1`` token ids, int64 ``[batch, seq_len + 1]`` (inputs and shifted labels)."""
        rows = []
        for _ in range(batch):
            copy = float(torch.rand((1,), generator=self.gen)) < self.copy_frac
            rows.append(self._copy_sequence() if copy else self.window(self.seq_len + 1))
        return torch.stack(rows).long()


@torch.no_grad()
def validation_loss(model, val_ids: torch.Tensor, seq_len: int, max_windows: int | None = None) -> float:
    """Mean next-token cross-entropy (nats/token) over non-overlapping windows of the held-out ids.

    ``val_ids``: 1-D token ids (int16 ``[tokens]`` from :func:`lab.training.corpus.corpus_ids`), read as windows of
    ``seq_len`` inputs plus their shifted labels; ``max_windows`` caps how many (None or 0: all). Leaves ``model``
    in the mode it found it."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    n_win = (len(val_ids) - 1) // seq_len
    if max_windows:
        n_win = min(n_win, max_windows)
    for i in range(0, n_win, 16):
        rows = [val_ids[j * seq_len: j * seq_len + seq_len + 1] for j in range(i, min(n_win, i + 16))]
        x = torch.stack(rows).long()
        logits = model(x[:, :-1]).logits.float()
        total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1), reduction="sum").item()
        count += x[:, 1:].numel()
    model.train(was_training)
    return total / count


def train_model(model, batches: Batches, steps: int, batch: int, lr: float, warmup: int, desc: str,
                teacher=None, log=None, evaluate=None, eval_every: int = 300, stop=None) -> list[dict]:
    """Train ``model`` for ``steps`` AdamW steps; with ``teacher``, on KL(teacher || model) instead of CE.

    ``evaluate(model)`` runs every ``eval_every`` steps and at the end; it returns a validation loss (float) or a
    dict of measures, recorded in the history entry of that step. ``stop(entry)`` True after an evaluation ends the
    run early. Returns the history: dicts with ``step``, ``loss`` and the evaluations."""
    opt = make_optimizer(model, lr)
    model.train()
    history = []
    bar = tqdm(range(steps), desc=desc, mininterval=5)
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, lr, warmup)
        x = batches.next(batch)
        with cpu_autocast():
            logits = model(x[:, :-1]).logits
        logits = logits.float()
        if teacher is None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
        else:
            with torch.no_grad(), cpu_autocast():
                t_logits = teacher(x[:, :-1]).logits
            t_logp = F.log_softmax(t_logits.float(), -1)
            # per predicted position: batchmean divides by the batch, logits has seq_len positions per row
            loss = F.kl_div(F.log_softmax(logits, -1), t_logp, log_target=True, reduction="batchmean") / logits.size(1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            history.append({"step": step, "loss": round(loss.item(), 4)})
            bar.set_postfix(loss=f"{loss.item():.3f}")
            if log:
                log(f"{desc} step {step}/{steps} loss {loss.item():.4f}")
        if evaluate is not None and (step % eval_every == 0 or step == steps - 1):
            result = evaluate(model)
            measures = result if isinstance(result, dict) else {"val_loss": round(result, 4)}
            entry = {"step": step, "loss": round(loss.item(), 4), **measures}
            history[-1 if history and history[-1]["step"] == step else len(history):] = [entry]
            if log:
                log(f"{desc} step {step} " + " ".join(f"{k} {v:.4f}" for k, v in measures.items()))
            if stop is not None and stop(entry):
                break
    return history
