"""The parallel draft of the real pair (``"smollm2-135m"``), PARD-style: the committed draft model adapted to a mask
token, so that one forward proposes a block of K tokens.

``python -m lab train chat-parallel`` runs :func:`train_chat_parallel` on the data of ``python -m lab train
chat-data``. As for the Shakespeare pair (:mod:`lab.training.parallel`; An et al. 2025, "PARD", arXiv 2504.18583,
and the authors' ``pard/pard_train.py``), a training sequence becomes K copies side by side (copy 0 the real tokens,
copy j >= 1 all masks, every copy with the sequence's position ids; :func:`lab.training.parallel.parallel_layout`),
with PARD's conditional drop thinning the mask copies. What differs here:

- **The start** is the committed draft model (:mod:`lab.training.chat_draft`: a 2-layer Llama of width 256 whose
  tied embedding is the target's embedding times a learnt projection ``P``) plus one trainable row for the mask
  token, initialised to the mean of its ``E @ P`` rows. Everything of the draft trains; the saved folder has the
  draft's layout (3.7 MB) and the mask row as ``extra_embedding_rows`` (:func:`lab.models.load_projected_draft`).
- **The teacher** is the chat data's top-k log-probabilities of the target on the answer tokens (as for the draft
  model): a row at position p, real or mask, learns the target's distribution of token p + 1 given the true text,
  and is scored only where token p + 1 is an answer token, with the draft model's loss
  (:func:`lab.training.chat_draft.soft_cross_entropy`: cross-entropy against the renormalised top-k).
- **The split** takes the draft model's seed and share. The agreement before training (position 1: the
  autoregressive draft's own) and after are measured on the same held-out sequences; the committed draft model was
  split by sequence, not by request (:func:`lab.training.chat_data.split_by_request`), so until it is retrained it
  trained on most of these held-out sequences, and the "before" agreement is flattered.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from lab.assets import SMOLLM2_DIR, TARGET_KEY, cache_dir, target_weights_key
from lab.drafters.parallel import BLOCK_KEY, MASK_KEY, TARGET_VOCAB_KEY
from lab.training.chat_data import (chat_data_dir, check_recipe, load_chat_data, resume_chat_run,
                                     split_by_request)
from lab.training.chat_draft import ProjectedDraft, answer_rows, soft_cross_entropy
from lab.training.checkpoints import discard_training_state, save_training_state
from lab.training.loop import bf16_autocast, cpu_autocast, lr_at, make_optimizer, take_batch
from lab.training.parallel import parallel_layout

__all__ = ["ChatParallelRecipe", "MaskedProjectedDraft", "parallel_batch", "chat_parallel_agreement",
           "default_out_dir", "train_chat_parallel"]


@dataclass
class ChatParallelRecipe:
    """Every setting of ``python -m lab train chat-parallel`` (recorded in the draft's ``training.json``). ``seed``
    and ``held_out_share`` are the draft model's (:class:`lab.training.chat_draft.ChatDraftRecipe`); ``keep``,
    ``min_keep`` and ``first_weight`` are the Shakespeare parallel draft's (:class:`lab.training.parallel.
    ParallelRecipe`); the learning rate is a fine-tune's, a quarter of the draft's."""

    seed: int = 1234
    block_size: int = 4
    steps: int = 400
    batch: int = 8
    max_len: int = 384
    lr: float = 5e-4
    warmup: int = 30
    keep: float = 0.7
    min_keep: float = 0.3
    first_weight: float | None = 0.5
    held_out_share: float = 0.03
    checkpoint_every: int = 100


def default_out_dir(pair) -> Path:
    """Where ``train chat-parallel`` writes by default: ``<cache>/drafts/<pair name>-parallel`` (``--out`` puts
    it elsewhere, e.g. ``lab/assets/smollm2-135m/parallel`` to replace the committed one)."""
    return cache_dir() / "drafts" / f"{pair.name}-parallel"


class MaskedProjectedDraft(ProjectedDraft):
    """:class:`lab.training.chat_draft.ProjectedDraft` with one more embedding row, the mask token (id V, the
    target's vocabulary size): the table is ``[E @ P; mask_row]`` ``[V + 1, D]``, tied as the head.

    ``forward(ids, rows, cols, position_ids, attention_mask)``: ids int64 ``[B, T]`` (V for a mask) -> logits over
    the target's vocabulary only, ``[len(rows), V]`` at the positions ``(rows[i], cols[i])`` (``[B, T, V]`` without
    ``rows``); ``attention_mask`` a float additive mask ``[B, 1, T, T]``."""

    def __init__(self, config, target_embedding: torch.Tensor):
        super().__init__(config, target_embedding)
        self.mask_row = torch.nn.Parameter(torch.zeros(config.hidden_size))

    @property
    def mask_token_id(self) -> int:
        return int(self.target_embedding.shape[0])

    def embedding(self) -> torch.Tensor:
        """``[E @ P; mask_row]``, float32 ``[V + 1, D]``."""
        return torch.cat([self.target_embedding @ self.projection, self.mask_row[None]])

    def forward(self, ids: torch.Tensor, rows: torch.Tensor | None = None, cols: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        table = self.embedding()
        hidden = self.body(inputs_embeds=F.embedding(ids, table), position_ids=position_ids,
                           attention_mask=attention_mask).last_hidden_state
        if rows is not None:
            hidden = hidden[rows, cols]
        return hidden @ table[:self.mask_token_id].to(hidden.dtype).T

    def state_to_save(self) -> dict:
        """:meth:`ProjectedDraft.state_to_save` plus ``extra_embedding_rows`` ``[1, D]``, the mask row."""
        state = super().state_to_save()
        state["extra_embedding_rows"] = self.mask_row.detach()[None]
        return state


def start_from_draft(pair, folder: Path = SMOLLM2_DIR / "draft") -> MaskedProjectedDraft:
    """A projected draft saved in ``folder`` (``config.json`` and ``model.safetensors``) as a float32
    :class:`MaskedProjectedDraft` of ``pair``'s target: by default the committed draft model
    (:func:`lab.training.chat_draft.train_chat_draft`), whose mask row starts as the mean of its ``E @ P`` rows; a
    parallel draft saved by :func:`train_chat_parallel` keeps its own mask row (``extra_embedding_rows``). Raises
    ``FileNotFoundError`` naming the folder when the files are missing."""
    from safetensors.torch import load_file
    from transformers import LlamaConfig

    folder = Path(folder)
    if not (folder / "config.json").is_file() or not (folder / "model.safetensors").is_file():
        raise FileNotFoundError(f"no draft model in {folder} to adapt; restore it from git or train it with "
                                "`python -m lab train chat-draft`")
    config = LlamaConfig.from_pretrained(folder, local_files_only=True)
    config.vocab_size = int(getattr(config, TARGET_VOCAB_KEY, config.vocab_size))  # a saved parallel draft: V + 1
    state = load_file(str(folder / "model.safetensors"))
    model = MaskedProjectedDraft(config, pair.target.get_input_embeddings().weight.float())
    mask_row = state.pop("extra_embedding_rows", None)
    with torch.no_grad():
        model.projection.copy_(state.pop("embed_projection").float())
        model.body.load_state_dict({k.removeprefix("model."): v.float() for k, v in state.items()}, strict=True)
        start = (model.target_embedding @ model.projection).mean(0) if mask_row is None else mask_row[0].float()
        model.mask_row.copy_(start)
    return model


def parallel_batch(sequences: list[dict], max_len: int, pad_id: int, layout_args: tuple, mask_id: int,
                   generator: torch.Generator | None = None) -> dict:
    """One training (or scoring) batch: the sequences right-padded (each cut as the draft model cuts it,
    :func:`lab.training.chat_draft.answer_rows`), laid out for blocks of K (``layout_args`` = ``(K, keep, min_keep)``,
    :func:`lab.training.parallel.parallel_layout` over the padded width, drawn with ``generator``).

    Returns ``{"ids" [B, R], "position_ids" [B, R], "attention_mask" float32 [B, 1, R, R] (additive), "rows",
    "cols" (the scored layout rows: where token p + 1 is an answer token), "copy" [N] (each scored row's copy:
    block position - 1), "topk_ids" [N, k], "topk_logprobs" [N, k]}``."""
    parts = [answer_rows(s, max_len) for s in sequences]
    width = max(len(p[0]) for p in parts)
    inputs = torch.full((len(parts), width), pad_id, dtype=torch.long)
    teach = torch.full((len(parts), width), -1, dtype=torch.long)  # index into the stacked top-k rows
    top_ids, top_lp, count = [], [], 0
    for b, (x, ids_k, lp_k, first) in enumerate(parts):
        inputs[b, :len(x)] = x
        n = min(len(ids_k), len(x) - first)
        positions = torch.arange(first, first + n)
        keep = positions >= 0
        teach[b, positions[keep]] = torch.arange(count, count + int(keep.sum()))
        top_ids.append(ids_k[:n][keep])
        top_lp.append(lp_k[:n][keep])
        count += int(keep.sum())
    block, keep_ratio, min_keep = layout_args
    layout = parallel_layout(width, block, keep_ratio, min_keep, generator)
    pos, copy_ids = layout["position"], layout["copy"]
    ids = torch.where(copy_ids == 0, inputs[:, pos], torch.full_like(inputs[:, pos], int(mask_id)))
    additive = torch.zeros(layout["allow"].shape, dtype=torch.float32)
    additive.masked_fill_(~layout["allow"], torch.finfo(torch.float32).min)
    index = teach[:, pos]  # [B, R]
    rows, cols = (index >= 0).nonzero(as_tuple=True)
    picked = index[rows, cols]
    return {"ids": ids, "position_ids": pos.expand_as(ids), "rows": rows, "cols": cols, "copy": copy_ids[cols],
            "attention_mask": additive[None, None].expand(len(parts), 1, -1, -1),
            "topk_ids": torch.cat(top_ids)[picked], "topk_logprobs": torch.cat(top_lp)[picked].float()}


def _logits(model, batch: dict) -> torch.Tensor:
    return model(batch["ids"], batch["rows"], batch["cols"], batch["position_ids"], batch["attention_mask"])


@torch.no_grad()
def chat_parallel_agreement(model, sequences: list[dict], max_len: int, pad_id: int, block_size: int) -> list:
    """Teacher-forced greedy agreement per block position on ``sequences`` (no drop): for position i (1..K), the
    share of scored rows of copy i - 1 whose argmax is the target's top-1 for that token. Position 1 is the
    ordinary next-token agreement (α of greedy chain drafting). Returns floats rounded to 4 places."""
    was_training = model.training
    model.eval()
    hits, counts = torch.zeros(block_size), torch.zeros(block_size)
    for i in range(0, len(sequences), 4):
        batch = parallel_batch(sequences[i:i + 4], max_len, pad_id, (block_size, 1.0, 0.0), model.mask_token_id)
        with cpu_autocast():
            guess = _logits(model, batch).argmax(-1)
        right = guess == batch["topk_ids"][:, 0]
        for j in range(block_size):
            rows = batch["copy"] == j
            hits[j] += right[rows].sum()
            counts[j] += rows.sum()
    model.train(was_training)
    return [round(float(h / max(1.0, float(c))), 4) for h, c in zip(hits, counts)]


def train_chat_parallel(pair, recipe: ChatParallelRecipe | None = None, out_dir: Path | None = None,
                        log=print) -> Path:
    """Adapt the committed draft model of ``pair`` (the real pair, float32 target) into a parallel draft on the chat
    data (see the module's docstring) and save it to ``out_dir`` (default :func:`default_out_dir`):
    ``config.json`` (the draft's, vocabulary V + 1, with :data:`lab.drafters.parallel.MASK_KEY`,
    ``TARGET_VOCAB_KEY``, ``BLOCK_KEY`` and the target's key), ``model.safetensors`` (float16: the draft's tensors,
    ``embed_projection`` and ``extra_embedding_rows``, the mask row) and ``training.json`` (recipe, data, held-out
    agreement per block position before and after, history, minutes). Every ``recipe.checkpoint_every`` steps a
    checkpoint goes to ``<chat data>/parallel-checkpoint/`` and a run with the same recipe and data resumes from it.
    Raises ``ValueError`` naming the setting for ``block_size``, ``steps``, ``batch``, ``max_len`` or
    ``checkpoint_every`` below 1, ratios outside [0, 1], and as :func:`lab.training.chat_data.check_recipe` for
    ``warmup``, ``lr`` and ``held_out_share``, and
    ``FileNotFoundError`` when the chat data or the draft model is missing. Source: An et al. 2025, "PARD", §3."""
    from safetensors.torch import save_file

    recipe = recipe or ChatParallelRecipe()
    check_recipe(recipe, ("block_size", "steps", "batch", "max_len", "checkpoint_every"))
    for name in ("keep", "min_keep", "first_weight"):
        value = getattr(recipe, name)
        if value is not None and not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"recipe.{name} must be in [0, 1], got {value!r}")
    torch.manual_seed(recipe.seed)
    sequences = load_chat_data(chat_data_dir(pair))
    held_out, training = split_by_request(sequences, recipe.seed, recipe.held_out_share)
    held, train = [sequences[i] for i in held_out], [sequences[i] for i in training]
    sequences = held + train
    model = start_from_draft(pair).train()
    pad, K = pair.eos_token_id, recipe.block_size
    before = chat_parallel_agreement(model, held, recipe.max_len, pad, K)
    log(f"chat parallel draft: {len(train)} training sequences, {len(held)} held out; agreement per block position "
        f"before training {before}")
    opt = make_optimizer(model, recipe.lr)
    checkpoint, plan, history, order, first_step, minutes = resume_chat_run(pair, "parallel", recipe, sequences,
                                                                            model, opt, log)
    t0, t_run = time.time() - minutes * 60, time.time()
    for step in range(first_step, recipe.steps):
        picked, order = take_batch(order, recipe.batch, len(train), recipe.seed + step)
        gen = torch.Generator().manual_seed(recipe.seed * 100_003 + step)  # per step: a resumed run draws the same
        batch = parallel_batch([train[i] for i in picked], recipe.max_len, pad, (K, recipe.keep, recipe.min_keep),
                               model.mask_token_id, gen)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, recipe.steps, recipe.lr, recipe.warmup)
        with cpu_autocast():
            logits = _logits(model, batch)
        copies = [j for j in range(K) if bool((batch["copy"] == j).any())]  # a copy can lack scored rows
        per_copy = torch.stack([soft_cross_entropy(logits[batch["copy"] == j], batch["topk_ids"][batch["copy"] == j],
                                                   batch["topk_logprobs"][batch["copy"] == j]) for j in copies])
        masks = [i for i, j in enumerate(copies) if j > 0]
        if recipe.first_weight is None or copies[0] != 0 or not masks:
            loss = per_copy.mean()
        else:
            loss = recipe.first_weight * per_copy[0] + (1 - recipe.first_weight) * per_copy[masks].mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 25 == 0 or step == recipe.steps - 1:
            entry = {"step": step, "loss": round(loss.item(), 4),
                     "per_position": {j + 1: round(x, 4) for j, x in zip(copies, per_copy.tolist())}}
            if step % 100 == 0 or step == recipe.steps - 1:
                entry["agreement"] = chat_parallel_agreement(model, held, recipe.max_len, pad, K)
            history.append(entry)
            pace = (time.time() - t_run) / (step + 1 - first_step)
            log(f"chat parallel draft step {step}/{recipe.steps} {entry} ({(time.time() - t0) / 60:.1f} min, "
                f"{pace:.1f} s/step)")
        if (step + 1) % recipe.checkpoint_every == 0 and step + 1 < recipe.steps:
            save_training_state(checkpoint, model, opt, plan, step + 1, order, history, (time.time() - t0) / 60)
    train_minutes = (time.time() - t0) / 60
    model.eval()
    out_dir = Path(out_dir) if out_dir is not None else default_out_dir(pair)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {key: value.detach().to(torch.float16).contiguous() for key, value in model.state_to_save().items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    config = model.body.config
    vocab = model.mask_token_id
    config.vocab_size = vocab + 1
    for key, value in ((MASK_KEY, vocab), (TARGET_VOCAB_KEY, vocab), (BLOCK_KEY, K),
                       (TARGET_KEY, target_weights_key(pair.target))):
        setattr(config, key, value)
    config.save_pretrained(out_dir)
    saved = start_from_draft(pair, out_dir).eval()  # measure the saved float16 file
    info = {"recipe": asdict(recipe),
            "start": "the committed draft model (lab/assets/smollm2-135m/draft) plus a mask row (the mean of its "
                     "E @ P rows)",
            "data": {"sequences": len(sequences), "train_sequences": len(train), "held_out_sequences": len(held)},
            "held_out_agreement": {f"position_{i}": a for i, a in enumerate(
                chat_parallel_agreement(saved, held, recipe.max_len, pad, K), start=1)},
            "held_out_agreement_before": {f"position_{i}": a for i, a in enumerate(before, start=1)},
            "minutes": round(train_minutes, 1), "history": history, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "bf16_autocast": bf16_autocast()}
    (out_dir / "training.json").write_text(json.dumps(info, indent=1))
    discard_training_state(checkpoint)
    return out_dir
