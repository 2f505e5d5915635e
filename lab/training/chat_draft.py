"""The draft model of the real pair (``"smollm2-135m"``): a 2-layer Llama of width 256 whose embedding is the
target's own embedding projected to that width, distilled from the target's answers.

``python -m lab train chat-draft`` runs :func:`train_chat_draft` on the data of ``python -m lab train chat-data``
(:mod:`lab.training.chat_data`). Sharing the target's embedding through a learnt projection ``P`` (576 x 256,
initialised from the embedding's top principal directions) keeps the committed draft small (the layers and ``P``:
about 4 MB) while its 49,152-token head stays a plain tied ``LlamaForCausalLM`` head at load time
(:func:`lab.models.load_projected_draft`), so transformers' ``generate(assistant_model=…)`` can use it too. The
loss is the cross-entropy against the target's next-token distribution on its top-k tokens (renormalised), on the
answer positions only: distillation, as in DistillSpec (Zhou et al. 2024, §3), on the target's own outputs.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from lab.assets import SMOLLM2_DIR
from lab.training.chat_data import chat_data_dir, check_recipe, load_chat_data, resume_chat_run, split_by_request
from lab.training.checkpoints import discard_training_state, save_training_state
from lab.training.loop import bf16_autocast, cpu_autocast, lr_at, make_optimizer, take_batch

__all__ = ["ChatDraftRecipe", "ProjectedDraft", "draft_config", "soft_cross_entropy", "answer_rows",
           "greedy_agreement", "held_out_agreement", "train_chat_draft"]


@dataclass
class ChatDraftRecipe:
    """Every setting of ``python -m lab train chat-draft`` (recorded in the draft's ``training.json``)."""

    seed: int = 1234
    hidden: int = 256
    layers: int = 2
    heads: int = 4
    intermediate: int = 768
    steps: int = 1000
    batch: int = 16
    max_len: int = 384  # tokens per training sequence (prompt and answer; longer ones keep their end)
    lr: float = 2e-3
    warmup: int = 50
    held_out_share: float = 0.03  # of the sequences, for the agreement measured while training


def draft_config(target_config, recipe: ChatDraftRecipe):
    """The draft's ``LlamaConfig``: the recipe's shape with the target's vocabulary, special ids, RoPE base, norm
    epsilon and context; tied embeddings."""
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=target_config.vocab_size, hidden_size=recipe.hidden,
                       intermediate_size=recipe.intermediate, num_hidden_layers=recipe.layers,
                       num_attention_heads=recipe.heads, num_key_value_heads=recipe.heads,
                       max_position_embeddings=target_config.max_position_embeddings,
                       rope_parameters=dict(target_config.rope_parameters),
                       rms_norm_eps=target_config.rms_norm_eps, tie_word_embeddings=True,
                       bos_token_id=target_config.bos_token_id, eos_token_id=target_config.eos_token_id,
                       pad_token_id=target_config.pad_token_id)


class ProjectedDraft(torch.nn.Module):
    """The draft while it trains: a ``LlamaModel`` body, the trainable projection ``P`` ``[D_target, D]`` and the
    frozen target embedding ``E`` ``[V, D_target]``; embedding and tied head are ``E @ P`` ``[V, D]``.

    ``forward(ids)``: int64 ``[B, T]`` -> logits ``[B, T, V]``, the same numbers the loaded
    ``LlamaForCausalLM`` gives (:func:`lab.models.load_projected_draft`); the head runs in the input dtype (bf16
    under autocast)."""

    def __init__(self, config, target_embedding: torch.Tensor):
        from transformers import LlamaModel

        super().__init__()
        self.body = LlamaModel(config)
        self.body.embed_tokens = None  # the embedding is E @ P, computed per step
        self.register_buffer("target_embedding", target_embedding.detach().float(), persistent=False)
        # the embedding's top principal directions, scaled so that the first logits have a standard deviation near 1
        _, _, v = torch.linalg.svd(self.target_embedding, full_matrices=False)
        projection = v[:config.hidden_size].T.contiguous()
        rms = (self.target_embedding @ projection).pow(2).mean().sqrt()
        self.projection = torch.nn.Parameter(projection / (rms * config.hidden_size ** 0.5))

    def embedding(self) -> torch.Tensor:
        """``E @ P``, float32 ``[V, D]``."""
        return self.target_embedding @ self.projection

    def forward(self, ids: torch.Tensor, rows: torch.Tensor | None = None,
                cols: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[B, T, V]``, or only at the positions ``(rows[i], cols[i])``: ``[len(rows), V]`` (the head over
        49,152 tokens is most of the cost, so training scores the answer positions only)."""
        table = self.embedding()
        hidden = self.body(inputs_embeds=F.embedding(ids, table)).last_hidden_state
        if rows is not None:
            hidden = hidden[rows, cols]
        return hidden @ table.to(hidden.dtype).T

    def state_to_save(self) -> dict:
        """The tensors the committed draft holds, named as in ``LlamaForCausalLM`` (``model.*``) plus
        ``embed_projection``; the embedding itself is rebuilt from the target at load time."""
        state = {f"model.{key}": value for key, value in self.body.state_dict().items()}
        state["embed_projection"] = self.projection.detach()
        return state


def soft_cross_entropy(logits: torch.Tensor, topk_ids: torch.Tensor, topk_logprobs: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the draft's ``logits`` ``[N, V]`` against the target's distribution restricted to its
    top-k tokens and renormalised (``topk_ids`` int64 ``[N, k]``, ``topk_logprobs`` float ``[N, k]``)."""
    weights = topk_logprobs.softmax(-1)
    return -(weights * logits.float().log_softmax(-1).gather(-1, topk_ids)).sum(-1).mean()


def answer_rows(sequence: dict, max_len: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """A sequence cut to its last ``max_len + 1`` tokens: (inputs, top-k ids, top-k log-probs, first scored input
    position). Input position i predicts token i + 1; answer token j sits at ``answer_start + j``. Shared with the
    parallel draft's batches (:func:`lab.training.chat_parallel.parallel_batch`)."""
    ids, start = sequence["ids"], sequence["answer_start"]
    cut = max(0, len(ids) - (max_len + 1))
    ids = ids[cut:]
    first_answer = max(0, start - cut)  # answer tokens before the cut were dropped with it
    skipped = first_answer - (start - cut)
    return ids[:-1], sequence["topk_ids"][skipped:], sequence["topk_logprobs"][skipped:], first_answer - 1


def _batch(sequences: list[dict], max_len: int, pad_id: int):
    """Right-padded inputs ``[B, T]`` and the scored positions' (row, column) with their top-k targets."""
    parts = [answer_rows(s, max_len) for s in sequences]
    width = max(len(p[0]) for p in parts)
    inputs = torch.full((len(parts), width), pad_id, dtype=torch.long)
    rows, cols, ids, logprobs = [], [], [], []
    for b, (x, top_ids, top_lp, first) in enumerate(parts):
        inputs[b, :len(x)] = x
        count = min(len(top_ids), len(x) - first)
        positions = torch.arange(first, first + count)
        keep = positions >= 0
        rows.append(torch.full((int(keep.sum()),), b))
        cols.append(positions[keep])
        ids.append(top_ids[:count][keep])
        logprobs.append(top_lp[:count][keep])
    return inputs, torch.cat(rows), torch.cat(cols), torch.cat(ids), torch.cat(logprobs)


@torch.no_grad()
def greedy_agreement(logits_fn, sequences: list[dict], max_len: int, pad_id: int) -> dict:
    """Teacher-forced greedy agreement on ``sequences``: the share of answer positions where the draft's argmax is
    the target's (its top-1), overall and per kind. With chain drafting and greedy verification this is the
    per-token acceptance rate α. ``logits_fn(inputs [B, T]) -> [B, T, V]``."""
    hits: dict[str, list[int]] = {}
    for i in range(0, len(sequences), 8):
        chunk = sequences[i:i + 8]
        inputs, rows, cols, top_ids, _ = _batch(chunk, max_len, pad_id)
        with cpu_autocast():
            guess = logits_fn(inputs)[rows, cols].argmax(-1)  # a few sequences at a time: [B, T, V] fits
        match = (guess == top_ids[:, 0]).tolist()
        for b, s in enumerate(chunk):
            kind_hits = hits.setdefault(s["kind"], [0, 0])
            mine = [m for r, m in zip(rows.tolist(), match) if r == b]
            kind_hits[0] += sum(mine)
            kind_hits[1] += len(mine)
    result = {kind: round(h / max(1, n), 4) for kind, (h, n) in sorted(hits.items())}
    result["all"] = round(sum(h for h, _ in hits.values()) / max(1, sum(n for _, n in hits.values())), 4)
    return result


@torch.no_grad()
def held_out_agreement(pair, requests: list[str], max_new_tokens: int = 64) -> float:
    """The share of answer tokens where ``pair.draft``'s argmax equals the token the target chose: the target answers
    each of ``requests`` (chat-encoded, greedy, :func:`lab.decode.generate`, at most ``max_new_tokens``), then the
    draft reads prompt and answer in one forward (teacher forcing). With greedy chain drafting this is the per-token
    acceptance α on those requests. The card quotes it for the course's held-out requests
    (:func:`lab.prompts.chat_prompts`), in float32. Raises ``ValueError`` for no requests or a pair without a draft
    model."""
    from lab.decode import generate

    if not requests:
        raise ValueError("requests must hold at least one request, got none")
    if pair.draft is None:
        raise ValueError(f"the {pair.name!r} pair has no draft model to measure")
    hits = total = 0
    for text in requests:
        ids = pair.encode_chat(text)
        answer = generate(pair.target, ids, max_new_tokens=max_new_tokens, eos_token_id=pair.eos_token_id).tokens
        full = torch.tensor([ids + answer], device=pair.device)
        guess = pair.draft(full).logits[0, len(ids) - 1:-1].argmax(-1).cpu()
        hits += int((guess == torch.tensor(answer)).sum())
        total += len(answer)
    return hits / total


def train_chat_draft(pair, recipe: ChatDraftRecipe | None = None, out_dir: Path = SMOLLM2_DIR / "draft",
                     log=print) -> Path:
    """Distil the draft of ``pair`` (the real pair, float32 target on the CPU) from the chat data in
    :func:`lab.training.chat_data.chat_data_dir` and save it to ``out_dir``: ``config.json``, ``model.safetensors``
    (float16: the layers, the final norm and ``embed_projection``) and ``training.json`` (recipe, data, history,
    minutes). Every 100 steps a checkpoint (weights, optimizer state, step) goes to
    ``<chat data>/draft-checkpoint/``; a run that finds one resumes from it, and a finished run deletes it. Raises
    ``FileNotFoundError`` when the chat data has not been built."""
    from safetensors.torch import save_file

    recipe = recipe or ChatDraftRecipe()
    check_recipe(recipe, ("hidden", "layers", "heads", "intermediate", "steps", "batch", "max_len"))
    torch.manual_seed(recipe.seed)
    sequences = load_chat_data(chat_data_dir(pair))
    held_out, training = split_by_request(sequences, recipe.seed, recipe.held_out_share)
    held, train = [sequences[i] for i in held_out], [sequences[i] for i in training]
    sequences = held + train
    config = draft_config(pair.target.config, recipe)
    draft = ProjectedDraft(config, pair.target.get_input_embeddings().weight)
    pad = pair.eos_token_id
    opt = make_optimizer(draft, recipe.lr)
    checkpoint, plan, history, order, first_step, minutes = resume_chat_run(pair, "draft", recipe, sequences,
                                                                            draft, opt, log)
    t0 = time.time() - minutes * 60
    answer_tokens = sum(len(s["topk_ids"]) for s in train)
    log(f"chat draft: {len(train)} training sequences ({answer_tokens} answer tokens), {len(held)} held out")
    for step in range(first_step, recipe.steps):
        picked, order = take_batch(order, recipe.batch, len(train), recipe.seed + step)
        chunk = [train[i] for i in picked]
        for group in opt.param_groups:
            group["lr"] = lr_at(step, recipe.steps, recipe.lr, recipe.warmup)
        inputs, rows, cols, top_ids, top_lp = _batch(chunk, recipe.max_len, pad)
        with cpu_autocast():
            logits = draft(inputs, rows, cols)
        loss = soft_cross_entropy(logits, top_ids, top_lp)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        if step % 25 == 0 or step == recipe.steps - 1:
            entry = {"step": step, "loss": round(loss.item(), 4)}
            if step % 150 == 0 or step == recipe.steps - 1:
                draft.eval()
                entry["agreement"] = greedy_agreement(draft, held, recipe.max_len, pad)
                draft.train()
            history.append(entry)
            log(f"chat draft step {step}/{recipe.steps} {entry} ({(time.time() - t0) / 60:.1f} min)")
        if step % 100 == 99:
            save_training_state(checkpoint, draft, opt, plan, step + 1, order, history, (time.time() - t0) / 60)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {key: value.detach().to(torch.float16).contiguous() for key, value in draft.state_to_save().items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out_dir)
    info = {"recipe": asdict(recipe), "data": {"sequences": len(sequences), "train_sequences": len(train),
            "answer_tokens": answer_tokens, "held_out_sequences": len(held)},
            "minutes": round((time.time() - t0) / 60, 1), "history": history, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "bf16_autocast": bf16_autocast()}
    (out_dir / "training.json").write_text(json.dumps(info, indent=1))
    discard_training_state(checkpoint)
    return out_dir
