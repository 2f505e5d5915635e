"""The EAGLE draft of the real pair (``"smollm2-135m"``): one decoder layer on the target's features, with a
reduced draft vocabulary, trained on the target's answers.

``python -m lab train chat-eagle`` runs :func:`train_chat_eagle` on the data of ``python -m lab train chat-data``
(:mod:`lab.training.chat_data`). The target's features over that data are computed once and cached
(:func:`chat_features`). The draft is :class:`lab.drafters.eagle.EagleDraftModel` at the target's width with the
8,192 most frequent answer tokens of the training sequences as its vocabulary (:mod:`lab.drafters.draft_vocab`: FR-Spec,
EAGLE-3's d2t): the target's LM head over 49,152 tokens would cost the draft more than its layer. Loss:
:func:`lab.training.eagle.eagle_loss` (feature regression + distillation on the draft vocabulary, EAGLE §4), on the
rows whose next token is an answer token; the last steps also train drafting steps 2..3 on the draft's own
features (EAGLE-3's training-time test).
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from lab.assets import SMOLLM2_DIR, cache_dir, weights_key
from lab.training.chat_data import chat_data_dir, check_recipe, load_chat_data, resume_chat_run, split_by_request
from lab.training.checkpoints import discard_training_state, save_training_state
from lab.training.eagle import eagle_loss
from lab.training.loop import bf16_autocast, lr_at, make_optimizer, take_batch

__all__ = ["ChatEagleRecipe", "chat_features", "eagle_batch", "chat_eagle_agreement", "feature_data",
           "train_chat_eagle", "draft_vocab_coverage", "CONTINUATION", "continued_from"]

CONTINUATION = {"steps": 500, "lr": 3e-4, "warmup": 25}
"""How ``python -m lab train chat-eagle --init DIR`` (and ``chat-eagle3``) continue a saved draft: 500 more steps on a
new cosine schedule from a peak of 3e-4 (under a third of a first run's 1e-3) after 25 warm-up steps, the rest of the
recipe unchanged. Measured on the real pair (rebuilt template chat data, 1,863 training sequences; 8 held-out
requests x 96 tokens, bfloat16, greedy): the EAGLE draft (1,000 steps before) went from α 0.450 / 0.457 / 0.486 to
0.475 / 0.470 / 0.491 at N = 2 / 3 / 4, the EAGLE-3 draft (2,000 steps before) from 0.494 / 0.499 / 0.530 to
0.498 / 0.519 / 0.543 (the EAGLE-3 card)."""


@dataclass
class ChatEagleRecipe:
    """Every setting of ``python -m lab train chat-eagle`` (recorded in the draft's ``training.json``)."""

    seed: int = 2025
    width: int = 576         # the target's width, as in EAGLE
    heads: int = 9
    kv_heads: int = 3
    intermediate: int = 1536
    draft_vocab: int = 8192  # the most frequent answer tokens of the training sequences
    steps: int = 1000
    batch: int = 8
    max_len: int = 384       # tokens per sequence (longer ones keep their end)
    lr: float = 1e-3
    warmup: int = 50
    cls_weight: float = 1.0
    noise: float = 0.1
    chain_steps: int = 200   # the last steps also score drafting steps 2..chain_depth
    chain_depth: int = 3
    held_out_share: float = 0.03
    checkpoint_every: int = 100  # steps between checkpoints (a killed run resumes from the last)
    init: str | None = None  # a saved EAGLE draft to continue training (its weights and draft vocabulary); None: fresh


def _cut(sequence: dict, max_len: int) -> tuple[torch.Tensor, int]:
    """A sequence's ids cut to their last ``max_len`` tokens and where its answer starts in them."""
    ids = sequence["ids"]
    cut = max(0, len(ids) - max_len)
    return ids[cut:], max(0, sequence["answer_start"] - cut)


def _cut_digest(cut: list[torch.Tensor]) -> str:
    """12 hex digits naming the token ids of the cut sequences, in order: the data part of a feature cache's key."""
    digest = hashlib.sha256()
    for ids in cut:
        digest.update(ids.numpy().astype("int32").tobytes() + b"|")
    return digest.hexdigest()[:12]


def _target_states(target, cut: list[torch.Tensor], group: list[int], layers) -> list[torch.Tensor]:
    """One right-padded forward of ``target`` over the sequences ``cut[i]`` for ``i`` in ``group``: per sequence its
    last hidden state in float16 ``[T_i, D]`` (``layers`` None) or the hidden states of ``layers`` concatenated in
    bfloat16 ``[T_i, k·D]`` (:func:`lab.models.layer_states`), on the CPU."""
    from lab.models import layer_states

    width = max(len(cut[i]) for i in group)
    ids = torch.zeros(len(group), width, dtype=torch.long)
    for row, i in enumerate(group):
        ids[row, :len(cut[i])] = cut[i]
    if layers is None:
        hidden = target.model(input_ids=ids.to(target.device)).last_hidden_state.to("cpu", torch.float16)
    else:
        out = target.model(input_ids=ids.to(target.device), output_hidden_states=True)
        hidden = layer_states(out.hidden_states, layers).to("cpu", torch.bfloat16)
    return [hidden[row, :len(cut[i])].clone() for row, i in enumerate(group)]


@torch.no_grad()
def chat_features(target, sequences: list[dict], max_len: int = 384, log=print, layers=None) -> list[torch.Tensor]:
    """The target's last hidden states (after its final norm) over each sequence cut to its last ``max_len``
    tokens: float16 ``[T_i, D]`` per sequence, in order. Computed in the target's dtype, 16 sequences per forward
    (right-padded; causal attention keeps padding out of real rows), and cached in ``<cache>/chat-data/`` per
    (target weights, sequences, ``max_len``).

    ``layers``: None gives the above (one file, the cache the EAGLE draft, the Medusa heads and the MTP heads
    share). A sequence of :func:`lab.models.layer_states` indices (0 = embeddings, i = decoder layer i, the last
    after the final norm; EAGLE-3's low, middle and high layers) gives those layers concatenated instead, bfloat16
    ``[T_i, k·D]`` per sequence (bfloat16: exact for a bfloat16 target, and half of float32 for data that runs to
    GB), cached in the folder ``features-<weights>-<sequences>-layers-<i>-<j>-<k>/`` in parts of 256 sequences, each
    written as soon as it is computed, so a killed run resumes at the first missing part. Raises ``ValueError``
    naming ``layers`` for an empty list or an index outside the target's hidden states."""
    from safetensors.torch import load_file, save_file

    cut = [_cut(s, max_len)[0] for s in sequences]
    key = f"features-{weights_key(target)}-{_cut_digest(cut)}"
    order = sorted(range(len(cut)), key=lambda i: len(cut[i]))  # similar lengths batch together
    out: list[torch.Tensor | None] = [None] * len(cut)
    if layers is not None:
        states = int(target.config.num_hidden_layers) + 1
        layers = tuple(int(i) for i in layers)
        if not layers or any(not -states <= i < states for i in layers):
            raise ValueError(f"layers must be indices into the target's {states} hidden states (0 = embeddings, -1 = "
                             f"the last layer after the final norm), got {layers}")
        return _layer_features(target, cut, order, layers, cache_dir() / "chat-data" / (
            key + "-layers-" + "-".join(map(str, layers))), log)
    path = cache_dir() / "chat-data" / f"{key}.safetensors"
    if path.exists():
        flat = load_file(str(path))
        return list(torch.split(flat["hidden"], flat["lengths"].tolist()))
    was_training = target.training
    target.eval()
    t0 = time.time()
    for start in range(0, len(order), 16):
        group = order[start:start + 16]
        for i, hidden in zip(group, _target_states(target, cut, group, None)):
            out[i] = hidden
        if start % 320 == 0:
            log(f"target features: {start + len(group)}/{len(cut)} sequences ({time.time() - t0:.0f} s)")
    target.train(was_training)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    save_file({"hidden": torch.cat(out), "lengths": torch.tensor([len(h) for h in out])}, str(partial))
    partial.replace(path)
    return out


def _layer_features(target, cut: list[torch.Tensor], order: list[int], layers: tuple, folder: Path,
                    log) -> list[torch.Tensor]:
    """:func:`chat_features` with ``layers``: parts of 256 sequences (in ``order``) read from ``folder`` or computed
    and written there (``part-<n>.safetensors``: ``hidden`` bfloat16 rows, ``lengths``, ``index`` into ``cut``)."""
    from safetensors.torch import load_file, save_file

    out: list[torch.Tensor | None] = [None] * len(cut)
    was_training = target.training
    target.eval()
    t0 = time.time()
    for part, start in enumerate(range(0, len(order), 256)):
        path = folder / f"part-{part:05d}.safetensors"
        if path.exists():
            flat = load_file(str(path))
            for i, hidden in zip(flat["index"].tolist(), torch.split(flat["hidden"], flat["lengths"].tolist())):
                out[i] = hidden
            continue
        members = order[start:start + 256]
        for g in range(0, len(members), 16):
            group = members[g:g + 16]
            for i, hidden in zip(group, _target_states(target, cut, group, layers)):
                out[i] = hidden
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        save_file({"hidden": torch.cat([out[i] for i in members]), "index": torch.tensor(members),
                   "lengths": torch.tensor([len(out[i]) for i in members])}, str(partial))
        partial.replace(path)
        log(f"target features of layers {list(layers)}: {start + len(members)}/{len(cut)} sequences "
            f"({time.time() - t0:.0f} s)")
    target.train(was_training)
    return out


def eagle_batch(sequences: list[dict], features: list[torch.Tensor], max_len: int, pad_id: int):
    """Right-padded ``(features float32 [B, T, D], ids [B, T], weights [B, T - 1])`` for :func:`eagle_loss`: row j
    of the draft reads (f_j, x_{j+1}) and predicts f_{j+1}, whose next token x_{j+2} is what it would draft, so a
    row weighs 1 when x_{j+2} is an answer token and 0 otherwise (prompt, padding). ``features[i]`` is
    :func:`chat_features` of ``sequences[i]`` (already cut to ``max_len``); ``ValueError`` when the lengths differ."""
    cut = [_cut(s, max_len) for s in sequences]
    width = max(len(ids) for ids, _ in cut)
    D = features[0].size(-1)
    hidden = torch.zeros(len(cut), width, D)
    ids = torch.full((len(cut), width), pad_id, dtype=torch.long)
    weights = torch.zeros(len(cut), width - 1)
    for b, ((x, start), f) in enumerate(zip(cut, features)):
        if len(f) != len(x):
            raise ValueError(f"features[{b}] has {len(f)} rows, its sequence cut to max_len = {max_len} has "
                             f"{len(x)} tokens")
        ids[b, :len(x)] = x
        hidden[b, :len(x)] = f.float()
        # rows j with j + 2 in [answer start, len(x) - 1]
        weights[b, max(0, start - 2):len(x) - 2] = 1.0
    return hidden, ids, weights


@torch.no_grad()
def chat_eagle_agreement(model, sequences: list[dict], features: list[torch.Tensor], max_len: int,
                         pad_id: int) -> dict:
    """Teacher-forced greedy agreement on answer rows: the share where the draft's argmax for x_{j+2} (fed the
    target's true features and tokens up to x_{j+1}) equals the target's own argmax (its LM head on f_{j+1}),
    overall and per kind: the per-token α of chain drafting with greedy verification."""
    head = model.target.get_output_embeddings()
    hits: dict[str, list[int]] = {}
    was_training = model.training
    model.eval()
    for i in range(0, len(sequences), 8):
        chunk = sequences[i:i + 8]
        hidden, ids, weights = eagle_batch(chunk, features[i:i + 8], max_len, pad_id)
        positions = torch.arange(1, ids.size(1)).expand(ids.size(0), -1)
        pred = model(hidden[:, :-1], ids[:, 1:], position_ids=positions)
        mine = model.head_logits(pred).argmax(-1)  # the draft vocabulary's index, mapped to a target id below
        if model.config["draft_vocab_size"] is not None:
            mine = model.draft_vocab[mine]
        theirs = head(hidden[:, 1:].to(head.weight.dtype)).argmax(-1)
        for b, s in enumerate(chunk):
            keep = weights[b] > 0
            counts = hits.setdefault(s["kind"], [0, 0])
            counts[0] += int((mine[b][keep] == theirs[b][keep]).sum())
            counts[1] += int(keep.sum())
    model.train(was_training)
    result = {kind: round(h / max(1, n), 4) for kind, (h, n) in sorted(hits.items())}
    result["all"] = round(sum(h for h, _ in hits.values()) / max(1, sum(n for _, n in hits.values())), 4)
    return result


def feature_data(pair, seed: int, held_out_share: float, max_len: int, draft_vocab: int, log=print, layers=None):
    """What the feature-reading drafts (EAGLE, Medusa) train on: ``(sequences, (held, held features), (train, train
    features), draft vocabulary)``. The chat data and :func:`chat_features` in load order (one cache for every
    draft), split with ``seed`` and ``held_out_share`` by request (:func:`lab.training.chat_data.split_by_request`:
    at least 8 sequences held out, no request on both sides; held out first, then training); the draft vocabulary
    the ``draft_vocab`` most frequent answer tokens of the training split (what gets drafted), the end-of-turn
    token first (:func:`lab.drafters.draft_vocab.frequent_tokens`). ``layers``: which target layers the features
    hold (:func:`chat_features`; None: the last one, what EAGLE, Medusa and MTP read); the split and the draft
    vocabulary do not depend on it, so drafts reading other layers are held out on the same sequences."""
    from lab.drafters.draft_vocab import frequent_tokens

    target = pair.target
    sequences = load_chat_data(chat_data_dir(pair))
    features = chat_features(target, sequences, max_len, log=log, layers=layers)
    held_out, training = split_by_request(sequences, seed, held_out_share)
    sequences, features = [sequences[i] for i in held_out + training], [features[i] for i in held_out + training]
    n_held = len(held_out)
    vocab = frequent_tokens((s["ids"][s["answer_start"]:] for s in sequences[n_held:]), draft_vocab,
                            target.config.vocab_size, always=[pair.eos_token_id])
    return sequences, (sequences[:n_held], features[:n_held]), (sequences[n_held:], features[n_held:]), vocab


def train_chat_eagle(pair, recipe: ChatEagleRecipe | None = None, out_dir: Path = SMOLLM2_DIR / "eagle",
                     log=print) -> Path:
    """Train the EAGLE draft of ``pair`` (the real pair's target, in the dtype the drafter will read its features
    in) on the chat data (:func:`lab.training.chat_data.chat_data_dir`) and save it to ``out_dir``:
    ``config.json``, ``model.safetensors`` (float16 weights and the int64 ``draft_vocab``) and ``training.json``
    (recipe, data, history, agreement, minutes). Every ``recipe.checkpoint_every`` steps a checkpoint goes to
    ``<chat data>/eagle-checkpoint/``; a run that finds one made with the same recipe and data resumes from it, and
    a finished run deletes it. Raises ``FileNotFoundError`` when the chat data has not been built. Source: Li et al.
    2024, "EAGLE", §4; Li et al. 2025, "EAGLE-3", §3 (reduced vocabulary, training-time test)."""
    from lab.drafters.eagle import EagleDraftModel, trainable_parameters

    recipe = recipe or ChatEagleRecipe()
    check_recipe(recipe, ("width", "heads", "kv_heads", "intermediate", "draft_vocab", "steps", "batch", "max_len",
                          "chain_depth", "checkpoint_every"))
    torch.manual_seed(recipe.seed)
    target = pair.target.requires_grad_(False)
    earlier = continued_from(recipe.init)  # read before out_dir, which may be the same folder, is written
    # a saved draft to continue is loaded (and checked against the target) before the long feature pass
    init = None if recipe.init is None else EagleDraftModel.from_pretrained(target, recipe.init).float().train()
    sequences, (held, held_features), (train, train_features), vocab = feature_data(
        pair, recipe.seed, recipe.held_out_share, recipe.max_len, recipe.draft_vocab, log)
    config = {"width": recipe.width, "heads": recipe.heads, "kv_heads": recipe.kv_heads,
              "intermediate": recipe.intermediate}
    if init is None:
        model = EagleDraftModel(target, config, draft_vocab=vocab).float().train()
    else:  # continue a saved draft: its layout and draft vocabulary, not the recipe's
        model, vocab = init, init.draft_vocab
    pad = pair.eos_token_id
    opt = make_optimizer(model, recipe.lr)
    params = [p for p in model.parameters() if p.requires_grad]
    checkpoint, plan, history, order, first_step, minutes = resume_chat_run(pair, "eagle", recipe, sequences,
                                                                            model, opt, log)
    answer_tokens = sum(len(s["topk_ids"]) for s in train)
    log(f"chat EAGLE: {len(train)} training sequences ({answer_tokens} answer tokens), {len(held)} held out, "
        f"{trainable_parameters(model):,} trainable parameters")
    t0 = time.time() - minutes * 60
    for step in range(first_step, recipe.steps):
        picked, order = take_batch(order, recipe.batch, len(train), recipe.seed + step)
        gen = torch.Generator().manual_seed(recipe.seed * 100_003 + step)  # per step: a resumed run draws the same
        for group in opt.param_groups:
            group["lr"] = lr_at(step, recipe.steps, recipe.lr, recipe.warmup)
        hidden, ids, weights = eagle_batch([train[i] for i in picked], [train_features[i] for i in picked],
                                           recipe.max_len, pad)
        depth = recipe.chain_depth if step >= recipe.steps - recipe.chain_steps else 1
        loss, regression, classification = eagle_loss(model, hidden, ids, recipe.cls_weight, recipe.noise, gen,
                                                      depth, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 25 == 0 or step == recipe.steps - 1:
            entry = {"step": step, "depth": depth, "loss": round(loss.item(), 4),
                     "smooth_l1": round(regression.item(), 4), "cross_entropy": round(classification.item(), 4)}
            if step % 200 == 0 or step == recipe.steps - 1:
                entry["agreement"] = chat_eagle_agreement(model, held, held_features, recipe.max_len, pad)
            history.append(entry)
            log(f"chat EAGLE step {step}/{recipe.steps} {entry} ({(time.time() - t0) / 60:.1f} min)")
        if (step + 1) % recipe.checkpoint_every == 0 and step + 1 < recipe.steps:
            save_training_state(checkpoint, model, opt, plan, step + 1, order, history, (time.time() - t0) / 60)
    model.eval()
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    info = {"recipe": asdict(recipe), "data": {"sequences": len(sequences), "train_sequences": len(train),
            "answer_tokens": answer_tokens, "held_out_sequences": len(held)},
            "trainable_parameters": trainable_parameters(model),
            "draft_vocab_coverage": draft_vocab_coverage(train, vocab),
            "held_out_agreement": chat_eagle_agreement(model, held, held_features, recipe.max_len, pad),
            "minutes": round((time.time() - t0) / 60, 1), "history": history, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "bf16_autocast": bf16_autocast(),
            "continued_from": earlier}
    (out_dir / "training.json").write_text(json.dumps(info, indent=1))
    discard_training_state(checkpoint)
    return out_dir


def continued_from(init) -> dict | None:
    """The ``training.json`` of the saved draft in ``init`` that a run continues (``recipe.init``), or None for a
    fresh run or a folder without one: kept in the new ``training.json`` so the card can tell both runs apart."""
    if init is None:
        return None
    path = Path(init) / "training.json"
    return json.loads(path.read_text()) if path.is_file() else None


def draft_vocab_coverage(sequences: list[dict], vocab: torch.Tensor) -> float:
    """The share of answer tokens of ``sequences`` (chat-data dicts) that the draft vocabulary ``vocab`` (target ids)
    holds, rounded to 4 digits; 0.0 when there is no answer token."""
    answers = torch.cat([s["ids"][s["answer_start"]:] for s in sequences])
    return round(torch.isin(answers, vocab).float().mean().item(), 4) if len(answers) else 0.0
