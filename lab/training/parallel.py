"""A parallel draft for the bundled Shakespeare pair, PARD-style (``python -m lab train parallel``).

PARD (An et al. 2025, arXiv 2504.18583) *adapts* an existing autoregressive draft: it starts from the committed
Shakespeare draft (:func:`lab.drafters.parallel.add_mask_token` gives it a mask token) and trains it so that, fed a
committed prefix ending in t_L followed by K - 1 masks, the output at the mask i places after t_L predicts
t_{L+i+1}. The layout follows the authors' collator (github.com/AMD-AGI/PARD, ``pard/pard_train.py``): a training
window of T tokens becomes K copies side by side, copy 0 the real tokens and copy j >= 1 all masks, every copy with
the window's position ids 0..T-1 (:func:`parallel_layout`):

- a real token at position p attends to the real tokens 0..p (ordinary causal attention: the next-token objective
  that keeps position 1 as good as the autoregressive draft's),
- the mask of copy j at position p stands for "the j-th mask after the real token at p - j": it attends to the real
  tokens 0..p - j and to the masks of copies 1..j at positions p - j + 1..p (one each, the earlier masks of the
  same block), exactly what it sees at inference, where the block is ``[t_{p-j}, mask, ..., mask]``.

Every kept row at position p learns the target's next-token distribution there (the distribution of token p + 1
given the true text up to p): a KL-to-the-target objective, as the committed draft was distilled
(:mod:`lab.training.pair`), computed from the cached target features (:func:`lab.training.features.target_features`:
the target's last hidden state on corpus windows, its LM head turns them into the teacher's logits). The loss is the
mean over copies of each copy's mean KL, so position 1 (copy 0) weighs as much as each mask offset.

PARD's conditional drop (COD) keeps training cheap: copy j keeps a random share ``keep ** j`` of its positions (at
least ``min_keep``), chosen among the positions whose copy j - 1 neighbour (position p - 1, the mask before it in
its block) was kept, so every kept mask still sees its whole block. With ``keep = 1`` nothing is dropped.
"""
from __future__ import annotations

import copy
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from lab.assets import PAIR_DIR, TARGET_KEY, cache_dir, target_weights_key
from lab.drafters.parallel import MASK_KEY, TARGET_VOCAB_KEY, add_mask_token
from lab.models import synchronize
from lab.training.checkpoints import (discard_training_state, load_checkpoint, resume_training_state, save_model,
                                      save_training_state)
from lab.training.features import target_features
from lab.training.loop import bf16_autocast, cpu_autocast, lr_at, make_optimizer, take_batch
from lab.validation import check_int

__all__ = ["PARALLEL_DIR", "ParallelRecipe", "parallel_layout", "parallel_loss", "parallel_agreement",
           "train_parallel", "held_out_texts", "held_out_requests", "draft_step_ms", "decode_comparison",
           "write_parallel_measurements"]

PARALLEL_DIR = PAIR_DIR / "parallel"
"""Where ``python -m lab train parallel`` writes the Shakespeare pair's parallel draft."""


@dataclass
class ParallelRecipe:
    """Every setting of ``python -m lab train parallel`` (recorded in ``training.json``): the block size K (1 real
    position + K - 1 masks), steps, batch (windows per step), window length, peak learning rate, warm-up, the
    conditional-drop keep ratio and its floor, the weight of the next-token rows in the loss (``first_weight``; None =
    PARD's plain mean over block positions), the number of cached training windows and the seed.

    ``first_weight`` = 0.5 is this course's choice: a 1-layer draft of width 128 has little capacity to share, and
    with the plain mean (a quarter of the weight on position 1 at K = 4) its held-out next-token agreement fell from
    0.55 to 0.52 by step 800 of a first run (0.54 at step 800 with the weight, 0.56 at the end; the card has both)."""

    block_size: int = 4
    steps: int = 2000
    batch: int = 8
    seq_len: int = 128
    lr: float = 1e-3
    warmup: int = 50
    keep: float = 0.7
    min_keep: float = 0.3
    first_weight: float | None = 0.5
    sequences: int = 1600
    seed: int = 2026


def parallel_layout(seq_len: int, block_size: int, keep: float = 1.0, min_keep: float = 0.0,
                    generator: torch.Generator | None = None) -> dict:
    """The training layout of one window of ``seq_len`` tokens for blocks of ``block_size`` = K (see the module's
    docstring), after PARD's conditional drop with ratio ``keep`` (copy j keeps ``max(keep ** j, min_keep)`` of
    its positions, drawn with ``generator``; ``keep = 1`` keeps every row).

    Returns a dict of tensors over the R kept rows, in copy order:

    - ``copy`` LongTensor ``[R]``: 0 for a real token, j >= 1 for the j-th mask of its block;
    - ``position`` LongTensor ``[R]``: the row's position id p (also the index of the window token a real row feeds,
      and of the teacher distribution every row learns: the target's for token p + 1);
    - ``allow`` BoolTensor ``[R, R]``: True where row a may attend to row b.

    Mask rows exist only at p >= j (a block needs a real token at p - j). Raises ``ValueError`` for ``seq_len`` or
    ``block_size`` < 1 or a ratio outside [0, 1]."""
    seq_len, block_size = check_int("seq_len", seq_len, 1), check_int("block_size", block_size, 1)
    for name, value in (("keep", keep), ("min_keep", min_keep)):
        if not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    copies, positions = [torch.zeros(seq_len, dtype=torch.long)], [torch.arange(seq_len)]
    previous = torch.arange(seq_len)  # positions kept in the copy before
    for j in range(1, block_size):
        candidates = previous[previous + 1 < seq_len] + 1  # the mask after a kept one, still inside the window
        share = max(float(keep) ** j, float(min_keep))
        count = min(len(candidates), int(round(seq_len * share)))
        if count < len(candidates):
            chosen = torch.randperm(len(candidates), generator=generator)[:count]
            candidates = candidates[chosen].sort().values
        if len(candidates) == 0:
            break
        copies.append(torch.full((len(candidates),), j, dtype=torch.long))
        positions.append(candidates)
        previous = candidates
    copy_ids, pos = torch.cat(copies), torch.cat(positions)
    real = copy_ids == 0
    anchor = pos - copy_ids  # the real token each row's block starts from (itself for a real row)
    # real key b visible to row a: b's position <= a's anchor
    sees_real = real[None, :] & (pos[None, :] <= anchor[:, None])
    # mask key b visible to mask row a: same block (same anchor) and b's copy <= a's copy
    same_block = (anchor[None, :] == anchor[:, None]) & ~real[None, :] & ~real[:, None]
    sees_mask = same_block & (copy_ids[None, :] <= copy_ids[:, None])
    return {"copy": copy_ids, "position": pos, "allow": sees_real | sees_mask}


def parallel_loss(model, ids: torch.Tensor, teacher_logp: torch.Tensor, layout: dict, mask_token_id: int,
                  vocab: int, first_weight: float | None = None) -> tuple:
    """The PARD objective on a batch: ``model`` (the draft with its mask token) over the ``layout``
    (:func:`parallel_layout`) of windows ``ids`` (LongTensor ``[B, T]``), each row scored by KL(teacher || draft)
    against ``teacher_logp`` (float32 ``[B, T, V]``: the target's log-probabilities for token p + 1 at every
    position p). ``vocab`` = V, the target's vocabulary (the draft's logits beyond it, the mask's, are dropped).

    Returns ``(loss, per_copy)``: the mean over copies of each copy's mean KL (with ``first_weight`` w: w × the real
    rows' mean KL + (1 − w) × the mean over the mask copies) as a scalar with a gradient, and the per-copy means
    (float32 ``[copies]``, detached; entry j is block position j + 1)."""
    pos, copy_ids = layout["position"], layout["copy"]
    inputs = torch.where(copy_ids == 0, ids[:, pos], torch.full_like(ids[:, pos], int(mask_token_id)))
    additive = torch.zeros(layout["allow"].shape, dtype=torch.float32)
    additive.masked_fill_(~layout["allow"], torch.finfo(torch.float32).min)
    with cpu_autocast():
        logits = model(input_ids=inputs, position_ids=pos.expand_as(inputs),
                       attention_mask=additive[None, None].expand(ids.size(0), 1, -1, -1)).logits
    logp = F.log_softmax(logits.float()[..., :vocab], -1)
    teacher = teacher_logp[:, pos]
    kl = (teacher.exp() * (teacher - logp)).sum(-1)  # [B, R]
    per_copy = torch.stack([kl[:, copy_ids == j].mean() for j in range(int(copy_ids.max()) + 1)])
    if first_weight is None or len(per_copy) == 1:
        return per_copy.mean(), per_copy.detach()
    return first_weight * per_copy[0] + (1 - first_weight) * per_copy[1:].mean(), per_copy.detach()


def _teacher_logp(target, hidden: torch.Tensor) -> torch.Tensor:
    """The target's log-probabilities from its cached last hidden states ``hidden`` ``[B, T, D]`` (any float dtype):
    float32 ``[B, T, V]``."""
    head = target.get_output_embeddings()
    with torch.no_grad():
        return F.log_softmax(head(hidden.to(head.weight.dtype)).float(), -1)


@torch.no_grad()
def parallel_agreement(model, target, features: dict, block_size: int, batch: int = 8) -> list:
    """Teacher-forced greedy agreement per block position on held-out windows: for position i (1..K), the share of
    rows where the draft's argmax for the token i places after a real token t_L (fed the true text up to t_L and
    i - 1 masks) equals the target's argmax for that token given the true text before it (its LM head on the
    cached hidden state at L + i - 1). Position 1 is the ordinary next-token agreement. ``features``:
    :func:`lab.training.features.target_features`' ``{"ids" [S, T], "hidden" [S, T, D]}``. Returns
    ``[agreement at position 1, ..., K]`` (floats in [0, 1], rounded to 4 places)."""
    was_training = model.training
    model.eval()
    ids_all = features["ids"]
    layout = parallel_layout(ids_all.size(1), block_size)
    pos, copy_ids = layout["position"], layout["copy"]
    additive = torch.zeros(layout["allow"].shape)
    additive.masked_fill_(~layout["allow"], torch.finfo(torch.float32).min)
    mask_id, vocab = int(getattr(model.config, MASK_KEY)), int(getattr(model.config, TARGET_VOCAB_KEY))
    hits = torch.zeros(block_size)
    counts = torch.zeros(block_size)
    for i in range(0, ids_all.size(0), batch):
        ids = ids_all[i:i + batch].long()
        theirs = _teacher_logp(target, features["hidden"][i:i + batch]).argmax(-1)[:, pos]  # [B, R]
        inputs = torch.where(copy_ids == 0, ids[:, pos], torch.full_like(ids[:, pos], mask_id))
        logits = model(input_ids=inputs, position_ids=pos.expand_as(inputs),
                       attention_mask=additive[None, None].expand(ids.size(0), 1, -1, -1)).logits
        mine = logits[..., :vocab].argmax(-1)
        for j in range(block_size):
            rows = copy_ids == j
            hits[j] += (mine[:, rows] == theirs[:, rows]).sum()
            counts[j] += mine[:, rows].numel()
    model.train(was_training)
    return [round(float(h / max(1.0, float(c))), 4) for h, c in zip(hits, counts)]


class _TiedState:
    """What :func:`lab.training.checkpoints.save_training_state` saves of a model with tied embeddings: its state
    without the output layer's alias of the input embedding (safetensors refuses tensors that share memory); loading
    ties it again."""

    def __init__(self, model):
        self.model = model

    def state_dict(self) -> dict:
        tied = self.model.get_output_embeddings().weight is self.model.get_input_embeddings().weight
        return {k: v for k, v in self.model.state_dict().items() if not (tied and k == "lm_head.weight")}

    def load_state_dict(self, state: dict, strict: bool = True):
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        extra = [k for k in missing if k != "lm_head.weight"]
        if strict and (extra or unexpected):
            raise RuntimeError(f"checkpoint does not match the draft: missing {extra}, unexpected {unexpected}")
        return missing, unexpected


def train_parallel(threads: int | None = None, recipe: ParallelRecipe | None = None, out_dir: Path = PARALLEL_DIR,
                   *, pair=None, checkpoint: Path | None = None, checkpoint_every: int = 100, val_sequences: int = 64,
                   log=print) -> Path:
    """Adapt the committed Shakespeare draft into a parallel draft (PARD; see the module's docstring) and save it to
    ``out_dir``: ``config.json`` + float16 ``model.safetensors`` (a plain ``LlamaForCausalLM`` with one extra
    embedding row, the mask token, and the config entries of :mod:`lab.drafters.parallel` and
    :data:`lab.assets.TARGET_KEY`) and ``training.json`` (recipe, history, minutes, held-out per-position agreement
    of the saved float16 file beside the autoregressive draft's next-token agreement).

    Data: ``recipe.sequences`` cached training windows of 256 target features (the EAGLE draft's cache,
    :func:`lab.training.features.target_features`; about 4 CPU-minutes the first time), each step ``recipe.batch``
    of them cut to a random ``recipe.seq_len``-token span; held-out: ``val_sequences`` validation windows. AdamW
    with warm-up and cosine decay, gradient clipping at 1, bf16 autocast where native. Every ``checkpoint_every``
    steps a checkpoint goes to ``checkpoint`` (default ``<cache>/parallel-checkpoint``); a run that finds one made
    with the same recipe resumes from it, and a finished run deletes it. ``pair``: the loaded Shakespeare pair
    (default: load it on the CPU). Returns ``out_dir``. Raises ``ValueError`` naming the field for a recipe with a
    block size, steps, batch, window or sequence count below 1 or keep ratios outside [0, 1], and for a
    ``recipe.seq_len`` longer than the cached windows (256 tokens)."""
    from lab.models import load_pair

    recipe = recipe or ParallelRecipe()
    for name in ("block_size", "steps", "batch", "seq_len", "sequences"):
        check_int(f"recipe.{name}", getattr(recipe, name), 1)
    for name in ("keep", "min_keep", "first_weight"):
        if getattr(recipe, name) is not None and not 0.0 <= float(getattr(recipe, name)) <= 1.0:
            raise ValueError(f"recipe.{name} must be in [0, 1], got {getattr(recipe, name)!r}")
    checkpoint_every = check_int("checkpoint_every", checkpoint_every, 1)
    if threads:
        torch.set_num_threads(threads)
    pair = pair or load_pair("shakespeare", device="cpu")
    target = pair.target.requires_grad_(False)
    t0 = time.time()
    data = target_features(target, recipe.sequences, 256, split="train")
    val = target_features(target, val_sequences, 256, split="val")
    window = data["ids"].size(1)
    if recipe.seq_len > window:
        raise ValueError(f"recipe.seq_len must be at most the cached windows' {window} tokens, got {recipe.seq_len}")
    feature_minutes = (time.time() - t0) / 60

    torch.manual_seed(recipe.seed)
    draft = add_mask_token(copy.deepcopy(pair.draft).float(), block_size=recipe.block_size).train()
    draft.requires_grad_(True)
    mask_id, vocab = getattr(draft.config, MASK_KEY), getattr(draft.config, TARGET_VOCAB_KEY)
    start = parallel_agreement(draft, target, val, recipe.block_size)
    log(f"parallel draft: held-out agreement per position before training {start}")
    opt = make_optimizer(draft, recipe.lr)
    checkpoint = Path(checkpoint) if checkpoint is not None else cache_dir() / "parallel-checkpoint"
    plan = {"recipe": asdict(recipe), "data": [recipe.sequences, window], "target": target_weights_key(target)}
    history, order, first, minutes = resume_training_state(checkpoint, _TiedState(draft), opt, plan, log)
    if first:
        log(f"parallel draft: resuming at step {first} from {checkpoint}")
    t0 = time.time() - minutes * 60
    for step in range(first, recipe.steps):
        picked, order = take_batch(order, recipe.batch, data["ids"].size(0), recipe.seed + step)
        gen = torch.Generator().manual_seed(recipe.seed * 100_003 + step)  # per step: a resumed run draws the same
        offset = int(torch.randint(0, window - recipe.seq_len + 1, (1,), generator=gen))
        span = slice(offset, offset + recipe.seq_len)
        ids = data["ids"][picked][:, span].long()
        teacher = _teacher_logp(target, data["hidden"][picked][:, span])
        layout = parallel_layout(recipe.seq_len, recipe.block_size, recipe.keep, recipe.min_keep, gen)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, recipe.steps, recipe.lr, recipe.warmup)
        loss, per_copy = parallel_loss(draft, ids, teacher, layout, mask_id, vocab, recipe.first_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == recipe.steps - 1:
            entry = {"step": step, "loss": round(loss.item(), 4), "per_position": [round(x, 4) for x in
                                                                                    per_copy.tolist()]}
            if step % 400 == 0 or step == recipe.steps - 1:
                entry["agreement"] = parallel_agreement(draft, target, val, recipe.block_size)
            history.append(entry)
            log(f"parallel draft step {step}/{recipe.steps} {entry} ({(time.time() - t0) / 60:.1f} min)")
        if step % checkpoint_every == checkpoint_every - 1 and step != recipe.steps - 1:
            save_training_state(checkpoint, _TiedState(draft), opt, plan, step + 1, order, history,
                                (time.time() - t0) / 60)
    train_minutes = (time.time() - t0) / 60
    draft.eval().requires_grad_(False)
    setattr(draft.config, TARGET_KEY, target_weights_key(target))
    out_dir = Path(out_dir)
    save_model(draft, None, out_dir)
    saved = load_checkpoint(out_dir)  # measure what was committed: the float16 file
    ar = parallel_agreement(add_mask_token(copy.deepcopy(pair.draft).float(), block_size=1), target, val, 1)
    info = {"recipe": asdict(recipe), "start": "the committed Shakespeare draft (lab/assets/shakespeare/draft) plus a "
            "mask-token row (the mean of its embedding rows)",
            "data": f"target_features (corpus training windows of {window}, seed 0); held out: {val_sequences} "
                    "validation windows",
            "parameters": sum(p.numel() for p in saved.parameters()),
            "held_out_agreement": {f"position_{i}": a for i, a in
                                   enumerate(parallel_agreement(saved, target, val, recipe.block_size), start=1)},
            "held_out_agreement_before": {f"position_{i}": a for i, a in enumerate(start, start=1)},
            "autoregressive_draft_next_token_agreement": ar[0],
            "feature_minutes": round(feature_minutes, 1), "train_minutes": round(train_minutes, 1),
            "history": history, "torch": torch.__version__, "threads": torch.get_num_threads(),
            "bf16_autocast": bf16_autocast()}
    (out_dir / "training.json").write_text(json.dumps(info, indent=1))
    discard_training_state(checkpoint)
    return out_dir


def held_out_texts(pair, count: int) -> list[str]:
    """``count`` held-out prompts of ``pair`` as text: for a chat pair its held-out requests of every task kind in
    turn (chat, code, structured, copy/edit, then the second of each, ...; :func:`lab.prompts.arena_prompts`), else
    the Shakespeare pair's held-out passages. What the parallel draft's card measured on, and what lesson 09 times.
    Raises ``IndexError`` when a kind has too few requests."""
    from lab.prompts import arena_prompts, held_out_prompts, pair_tasks

    if pair.has_chat_template:
        tasks = pair_tasks(pair)
        return [arena_prompts(pair, tasks[i % len(tasks)])[i // len(tasks)] for i in range(count)]
    return held_out_prompts()[:count]


def held_out_requests(pair, count: int) -> list[list[int]]:
    """:func:`held_out_texts` encoded (:func:`lab.prompts.encode_prompts`: a user turn for a chat pair)."""
    from lab.prompts import encode_prompts

    return encode_prompts(pair, held_out_texts(pair, count))


def draft_step_ms(pair, drafter_model, block_sizes=(2, 3, 4), context: int = 128, repeats: int = 40) -> dict:
    """The draft's cost per step in ms, parallel against autoregressive, at each K in ``block_sizes``: the median of
    ``repeats`` timed ``propose`` calls after a prefill of ``context`` held-out tokens (:func:`held_out_requests`
    joined), one parallel proposal (one
    forward over 1 + K - 1 positions, then the masks' rollback) against one of the committed autoregressive draft
    (:class:`lab.drafters.DraftModelDrafter`: K forwards of one token), alternating which runs first. Returns
    ``{"K": {"parallel": ms, "autoregressive": ms, "ratio": autoregressive / parallel}}``."""
    import statistics

    from lab.drafters import DraftModelDrafter, DraftRequest, ParallelDrafter

    ids = sum(held_out_requests(pair, 8), [])[:context]
    out = {}
    for k in block_sizes:
        drafters = {"parallel": ParallelDrafter(drafter_model, k), "autoregressive": DraftModelDrafter(pair.draft, k)}
        times = {name: [] for name in drafters}
        for r in range(repeats + 3):  # 3 warm-up rounds
            for name in (list(drafters) if r % 2 else list(drafters)[::-1]):
                drafters[name].reset(ids)
                synchronize(pair.target.device)  # on CUDA the reset's prefill is still queued
                t0 = time.perf_counter()
                drafters[name].propose(DraftRequest(ids, k))
                if r >= 3:
                    times[name].append((time.perf_counter() - t0) * 1000)
        med = {name: statistics.median(v) for name, v in times.items()}
        out[str(k)] = {**{n: round(v, 4) for n, v in med.items()},
                       "ratio": round(med["autoregressive"] / med["parallel"], 2)}
    return out


def decode_comparison(pair, parallel_factory, prompts: int = 5, max_new_tokens: int = 128,
                      block_sizes=(2, 3, 4)) -> dict:
    """Greedy decoding of ``prompts`` held-out prompts (:func:`held_out_requests`; ``max_new_tokens`` each, the pair's
    EOS ending an answer) with the committed autoregressive
    draft and with the parallel draft (``parallel_factory(K)`` builds one), interleaved with autoregressive decoding
    (:func:`lab.bench.run_interleaved`), at each K. Per method: tokens per target call, per-position acceptance
    (:func:`lab.metrics.summarize_steps`: the share of steps whose first i drafts were all accepted) and the
    conditional acceptance of position i given the earlier ones accepted (:func:`lab.metrics.conditional_acceptance`),
    draft ms per step, tokens/s and the speedup over autoregressive decoding, and whether every output equals the
    autoregressive one."""
    from lab.bench import run_interleaved
    from lab.drafters import DraftModelDrafter
    from lab.metrics import conditional_acceptance, summarize_steps

    encoded = held_out_requests(pair, prompts)
    out = {}
    for k in block_sizes:
        methods = {"autoregressive": None, "model": lambda k=k: DraftModelDrafter(pair.draft, k),
                   "parallel": lambda k=k: parallel_factory(k)}
        run_interleaved(pair, encoded[:1], methods, max_new_tokens=8)  # warm-up
        runs = run_interleaved(pair, encoded, methods, max_new_tokens=max_new_tokens)
        base = runs["autoregressive"]
        base_tps = sum(len(g.tokens) for g, _ in base) / sum(g.stats["wall_ms"] for g, _ in base) * 1000
        row = {}
        for name in ("model", "parallel"):
            gens = [g for g, _ in runs[name]]
            steps = [s for g in gens for s in g.steps]
            tokens = sum(len(g.tokens) for g in gens)
            wall = sum(g.stats["wall_ms"] for g in gens)
            stats = summarize_steps(steps, tokens, wall)
            reach = stats["per_position_acceptance"]
            row[name] = {"tokens_per_target_call": round(stats["tokens_per_target_call"], 3),
                         "per_position_acceptance": [round(x, 4) for x in reach],
                         "conditional_acceptance": [None if x is None else round(x, 4)
                                                    for x in conditional_acceptance(steps)],
                         "draft_ms_per_step": round(stats["draft_ms"] / len(steps), 4),
                         "tokens_per_second": round(tokens / wall * 1000, 1),
                         "speedup": round(tokens / wall * 1000 / base_tps, 3),
                         "same_as_autoregressive": all(g.tokens == b.tokens for g, (b, _) in zip(gens, base))}
        row["autoregressive_tokens_per_second"] = round(base_tps, 1)
        out[str(k)] = row
    return out


def write_parallel_measurements(pair, directory, prompts: int = 5, max_new_tokens: int = 128,
                                block_sizes=(2, 3, 4)) -> dict:
    """Measure the parallel draft saved in ``directory`` against ``pair``'s autoregressive draft model and write
    the card's ``measurements.json`` there (what lesson 09 prints): :func:`draft_step_ms` and
    :func:`decode_comparison` (``prompts`` held-out prompts x ``max_new_tokens``, greedy) at each K in
    ``block_sizes``, with the torch threads, dtype, device and date of the run. Returns what it wrote. Raises what
    :meth:`lab.drafters.ParallelDrafter.from_pretrained` raises for a missing or foreign draft, and ``ValueError``
    when ``pair`` has no draft model to compare with."""
    from lab.drafters import ParallelDrafter

    if pair.draft is None:
        raise ValueError(f"pair: the {pair.name!r} pair was loaded without its draft model (load_pair, not "
                         "load_target): the parallel draft is measured against it")
    directory = Path(directory)
    drafter = ParallelDrafter.from_pretrained(pair, directory=directory)
    param = next(pair.target.parameters())
    out = {"threads": torch.get_num_threads(), "dtype": str(param.dtype).removeprefix("torch."),
           "device": str(param.device), "date": time.strftime("%Y-%m-%d"),
           "prompts": prompts, "max_new_tokens": max_new_tokens,
           "draft_step_ms": draft_step_ms(pair, drafter.model, block_sizes),
           "greedy_decoding": decode_comparison(
               pair, lambda k: ParallelDrafter(drafter.model, k), prompts, max_new_tokens,
               block_sizes)}
    (directory / "measurements.json").write_text(json.dumps(out, indent=1))
    return out
