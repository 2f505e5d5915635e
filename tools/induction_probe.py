"""Does a fresh Llama learn induction (copying) from a training mix? The groundwork for a copy-capable target.

The committed target cannot copy: shown a random 40-token sequence twice, it predicts none of the second copy (probe
accuracy 0.002, chance level), so prompt lookup gains little on copy tasks (lesson 08). This script trains a fresh model
on the pair's corpus mixed with repeated passages (``lab.training.CopyBatches``) and prints, every 100 steps, the
training loss, the probe accuracy (``lab.training.copy_probe_accuracy``: argmax on the second copy of 16 random 40-token
sequences after 40 tokens of held-out text) and the held-out loss (nats/token over 16 windows). ``--init
lab/assets/shakespeare/target`` starts from the committed target instead (``python -m lab train copy-target`` is the
recipe built on that).

A row of the mix is one of: random tokens repeated after natural-text gaps (``--random``), a corpus passage
repeated the same way (``--passages``), or a plain corpus window (the rest). Passages are 8-64 tokens, gaps 0-48,
so the repeat offset varies: a fixed offset teaches "copy from k tokens back", not induction.

Measured on the course's 2-core CPU, one thread, 16 x 256 tokens per step (about 1 s per step for 2 x 256):
- 2 layers x 256, ``--random 1.0``: no induction up to step 1100, then probe 0.010 (1200), 0.135 (1300),
  0.538 (1400), 0.896 (1700), 0.928 (2000; held-out loss 3.83): the plateau and phase change induction heads
  are known for, after about 5 M tokens.
- 2 layers x 256, ``--random 0.25 --passages 0.25``: still 0.002 at step 1500.
- the committed target (``--init``), ``--random 1.0 --lr 5e-4 --warmup 50``: 0.002 to step 300, 0.064 at 400.
These runs used the probe of session 9 (the second copy's last 39 tokens, other held-out prefixes); the probe now
scores all 40, the first of which no copying can predict, so its numbers come out about 2.5 % lower.

Usage: ``python tools/induction_probe.py [--hidden 256 --layers 2 --heads 4 --intermediate 768 --steps 2000
--lr 1e-3 --random 1.0 --passages 0.0 --threads 1]``. Needs the cached corpus ids (``lab.training.corpus_ids``).
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in (("hidden", 256), ("layers", 2), ("heads", 4), ("intermediate", 768), ("steps", 2000),
                          ("threads", 1), ("seed", 0)):
        parser.add_argument(f"--{name}", type=int, default=default)
    for name, default in (("lr", 1e-3), ("random", 1.0), ("passages", 0.0)):
        parser.add_argument(f"--{name}", type=float, default=default)
    parser.add_argument("--init", default=None, help="start from this model folder (e.g. the committed target) "
                        "instead of a fresh model; the shape arguments are then ignored")
    parser.add_argument("--warmup", type=int, default=100)
    args = parser.parse_args()

    from transformers import LlamaForCausalLM

    from lab.training import (CopyBatches, ModelShape, copy_probe_accuracy, corpus_ids, lr_at, make_optimizer,
                              validation_loss)

    torch.set_num_threads(args.threads)
    train, val = corpus_ids()
    vocab, seq, batch = 2048, 256, 16
    gen = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    shape = ModelShape(args.hidden, args.layers, args.heads, args.intermediate)
    if args.init:
        model = LlamaForCausalLM.from_pretrained(args.init, dtype=torch.float32)
    else:
        model = LlamaForCausalLM(shape.config(vocab, 0, 512))

    batches = CopyBatches(train, seq, args.random, args.passages, gen, vocab)

    @torch.no_grad()
    def evaluate():
        accuracy = copy_probe_accuracy(model, val)
        loss = validation_loss(model, val, seq, max_windows=16)  # leaves the model in train mode
        return accuracy, loss

    opt = make_optimizer(model, args.lr)
    start = time.time()
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        x = batches.next(batch)
        loss = F.cross_entropy(model(x[:, :-1]).logits.reshape(-1, vocab), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == args.steps - 1:
            accuracy, held_loss = evaluate()
            print(f"step {step} loss {loss.item():.3f} probe {accuracy:.3f} val {held_loss:.3f} "
                  f"{time.time() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
