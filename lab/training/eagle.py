"""The EAGLE draft for the bundled target (lesson 11): one decoder layer that predicts the target's next feature
(Li et al. 2024, §4), trained on the frozen target's features, with its measurements and model card.

``python -m lab train eagle`` runs :func:`train_eagle`; the draft itself is
:class:`lab.drafters.eagle.EagleDraftModel`.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from lab.assets import EAGLE_DIR
from lab.training.features import target_features
from lab.training.loop import bf16_autocast, cpu_autocast, lr_at, precision_label
from lab.validation import check_int

__all__ = ["eagle_chain_predictions", "eagle_loss", "eagle_agreement", "draft_agreement", "train_eagle",
           "measure_eagle", "write_eagle_card"]


def eagle_chain_predictions(model, inputs: torch.Tensor, tokens: torch.Tensor, depth: int = 1) -> torch.Tensor:
    """The EAGLE draft's predictions for ``depth`` drafting steps from every row at once, as in training.

    ``inputs``: features ``[B, n, D]`` (row j = f_j, maybe noised), ``tokens``: ``[B, n]`` (row j = x_{j+1}); row j
    sits at position j + 1. Pass 1 is the plain teacher-forced forward. Pass k > 1 is step k of a chain: row j
    feeds the previous pass's prediction at row j - 1 (gradients flow through it) with x_{j+1} and attends to the
    true rows up to j - k + 1 and to the same chain's earlier steps (rows j - k + 2 .. j - 1 of passes 2 .. k - 1),
    exactly what drafting sees (one KV cache, a 4-D mask) — the "training-time test" of EAGLE-3 (Li et al. 2025),
    a departure from EAGLE-1, which only adds noise. Returns ``[B, depth · n, D]``, pass after pass; every pass
    aims at the true next features. Rows j < k - 1 of pass k have no full chain behind them (their input is f_0).
    """
    from lab.models import new_cache

    n = inputs.size(1)
    positions = torch.arange(1, n + 1).expand(inputs.size(0), -1)
    cache = new_cache() if depth > 1 else None
    predicted = []
    for k in range(depth):
        mask, fed = None, inputs
        if k:
            fed = torch.cat([inputs[:, :1].to(predicted[-1].dtype), predicted[-1][:, :-1]], 1)
            blocks = [torch.ones(n, n, dtype=torch.bool).tril(-k)]  # true rows up to j - k
            blocks += [torch.ones(n - (k - c), dtype=torch.bool).diag(-(k - c)) for c in range(1, k + 1)]
            mask = torch.cat(blocks, 1)
        predicted.append(model(fed, tokens, cache, position_ids=positions, attention_mask=mask))
    return torch.cat(predicted, 1)


def eagle_loss(model, features: torch.Tensor, ids: torch.Tensor, cls_weight: float, noise: float,
               gen: torch.Generator, depth: int = 1,
               weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """EAGLE's training loss on a batch of target features ``[B, T, D]`` (float32) and their tokens ``[B, T]``.

    Row j feeds (f_j + noise, x_{j+1}) at position j + 1 and predicts f_{j+1}. Loss = SmoothL1(f̂_{j+1}, f_{j+1})
    + ``cls_weight`` · cross-entropy of head(f̂_{j+1}) against the target's own distribution head(f_{j+1})
    (distillation over the draft's head: all V tokens, or the draft vocabulary renormalised, as EAGLE-3 trains its
    reduced head). ``noise``: half-width of EAGLE's uniform feature noise, as a fraction of the features' RMS, so
    the draft learns to live with its own errors. ``depth`` > 1 scores drafting steps 2..depth too
    (:func:`eagle_chain_predictions`). ``weights``: optional float ``[B, T - 1]`` per row (0 leaves out padding or
    rows whose next token is not worth drafting). Returns ``(loss, regression, classification)``, averaged over
    all rows of all passes (weighted).
    """
    inputs, wanted = features[:, :-1], features[:, 1:]
    # the noise scale from real rows only: padding rows are zeros
    scale = (inputs if weights is None else inputs[weights > 0]).pow(2).mean().sqrt()
    inputs = inputs + (torch.rand(inputs.shape, generator=gen) * 2 - 1) * noise * scale
    with torch.no_grad():
        target_probs = model.head_logits(wanted).softmax(-1)
    with cpu_autocast():
        predicted = eagle_chain_predictions(model, inputs, ids[:, 1:], depth)
        logits = model.head_logits(predicted)
    if weights is None:
        weights = torch.ones(wanted.shape[:2])
    w = weights.float().repeat(1, depth)
    total = w.sum().clamp_min(1e-9)
    regression = (F.smooth_l1_loss(predicted.float(), wanted.repeat(1, depth, 1), reduction="none").mean(-1)
                  * w).sum() / total
    classification = (-(target_probs.repeat(1, depth, 1) * logits.float().log_softmax(-1)).sum(-1) * w).sum() / total
    return regression + cls_weight * classification, regression, classification


@torch.no_grad()
def eagle_agreement(model, features: dict) -> float:
    """Held-out next-token top-1 agreement: the share of positions where argmax LM-head(f̂_{j+1}) (the draft fed
    the target's true features up to f_j and the tokens up to x_{j+1}) equals the target's own argmax for x_{j+2}.
    ``features``: :func:`lab.training.features.target_features` of the "val" split."""
    hidden, ids = features["hidden"].float(), features["ids"]
    was_training = model.training
    model.eval()
    hits = count = 0
    for i in range(0, ids.size(0), 16):
        h, x = hidden[i:i + 16], ids[i:i + 16]
        pred = model(h[:, :-1], x[:, 1:], position_ids=torch.arange(1, x.size(1)).expand(x.size(0), -1))
        head = model.target.get_output_embeddings()  # the target's own choice, over its whole vocabulary
        theirs = head(h[:, 1:].to(head.weight.dtype)).argmax(-1)
        hits += (model.logits(pred).argmax(-1) == theirs).sum().item()
        count += pred.shape[0] * pred.shape[1]
    model.train(was_training)
    return hits / count


@torch.no_grad()
def draft_agreement(draft, target, features: dict) -> float:
    """The same agreement for a vanilla draft LM: its argmax for x_{j+2} after x_0..x_{j+1} vs the target's (its
    LM head on the target's features) over the same held-out windows, so both drafts are compared alike."""
    hidden, ids = features["hidden"].float(), features["ids"]
    head = target.get_output_embeddings()
    hits = count = 0
    for i in range(0, ids.size(0), 16):
        h, x = hidden[i:i + 16], ids[i:i + 16]
        mine = draft(x).logits[:, 1:].argmax(-1)
        theirs = head(h[:, 1:].to(head.weight.dtype)).argmax(-1)
        hits += (mine == theirs).sum().item()
        count += mine.numel()
    return hits / count


def train_eagle(threads: int | None = None, steps: int = 3700, out_dir: Path = EAGLE_DIR, *,
                sequences: int = 1600, seq_len: int = 256, batch: int = 8, lr: float = 3e-3,
                cls_weight: float = 1.0, noise: float = 0.1, chain_steps: int = 700, chain_depth: int = 3,
                config: dict | None = None, seed: int = 2024) -> Path:
    """Train the EAGLE draft (:class:`lab.drafters.eagle.EagleDraftModel`) on the frozen bundled target.

    Data: :func:`lab.training.features.target_features` of ``sequences`` × ``seq_len`` training windows (cached; ~1
    CPU-minute per 100k tokens the first time). Loss: :func:`eagle_loss` (SmoothL1 on features + ``cls_weight`` ×
    distillation cross-entropy; EAGLE's paper weights the classification term 0.1 — 1.0 gave this small draft higher
    greedy acceptance, see ``eagle/README.md``), uniform feature noise ±``noise``·RMS, AdamW with warm-up and a
    cosine schedule, bf16 autocast where the CPU has native bf16 (:func:`lab.training.loop.bf16_autocast`), fixed
    ``seed``. The last ``chain_steps`` of the ``steps`` also train drafting steps 2..``chain_depth`` on the draft's
    own predictions (:func:`eagle_chain_predictions`; EAGLE-3's training-time test, a departure from EAGLE-1 that
    raised the chain's acceptance here). Writes ``model.safetensors`` + ``config.json`` (float16; the config records
    the target's :func:`lab.assets.target_weights_key`) and ``training.json`` to ``out_dir``, then measures and
    writes the model card (:func:`write_eagle_card`). Returns the card's path. About 13 CPU-minutes with the
    defaults on one thread where the CPU has native bf16 (plus about 4 for the features, once). Raises
    ``ValueError`` for ``steps`` or ``batch`` < 1, ``chain_steps`` outside ``[0, steps]`` or ``chain_depth`` < 1.
    Source: Li et al. 2024, "EAGLE", §4 (training).
    """
    from lab.drafters.eagle import EagleDraftModel, trainable_parameters
    from lab.models import load_pair

    steps, batch = check_int("steps", steps, 1), check_int("batch", batch, 1)
    if not 0 <= chain_steps <= steps:
        raise ValueError(f"chain_steps must be in [0, steps = {steps}], got {chain_steps}")
    chain_depth = check_int("chain_depth", chain_depth, 1)
    if threads:
        torch.set_num_threads(threads)
    out_dir = Path(out_dir)
    pair = load_pair("shakespeare", device="cpu")
    target = pair.target.requires_grad_(False)  # frozen: only the draft learns
    t0 = time.time()
    data = target_features(target, sequences, seq_len, split="train")
    val = target_features(target, 64, seq_len, split="val")
    feature_minutes = (time.time() - t0) / 60

    torch.manual_seed(seed)
    model = EagleDraftModel(target, config).train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.01},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(seed)
    history = []
    t0 = time.time()
    bar = tqdm(range(steps), desc="EAGLE draft", mininterval=5)
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, lr, warmup=50)
        rows = torch.randint(0, data["ids"].size(0), (batch,), generator=gen)
        depth = chain_depth if step >= steps - chain_steps else 1
        loss, reg, cls = eagle_loss(model, data["hidden"][rows].float(), data["ids"][rows], cls_weight, noise, gen,
                                     depth)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            history.append({"step": step, "depth": depth, "loss": round(loss.item(), 4),
                            "smooth_l1": round(reg.item(), 4), "cross_entropy": round(cls.item(), 4)})
            bar.set_postfix(l1=f"{reg.item():.3f}", ce=f"{cls.item():.3f}")
    train_minutes = (time.time() - t0) / 60
    model.eval()
    model.save_pretrained(out_dir)
    info = {"steps": steps, "batch": batch, "seq_len": seq_len, "sequences": sequences, "lr": lr,
            "cls_weight": cls_weight, "noise": noise, "chain_steps": chain_steps, "chain_depth": chain_depth,
            "seed": seed, "config": model.config,
            "trainable_parameters": trainable_parameters(model),
            "feature_minutes": round(feature_minutes, 1), "train_minutes": round(train_minutes, 1),
            "tokens_seen": steps * batch * (seq_len - 1), "history": history,
            "val_top1_agreement": round(eagle_agreement(model, val), 4),
            "torch": torch.__version__, "threads": torch.get_num_threads(), "bf16_autocast": bf16_autocast()}
    (out_dir / "training.json").write_text(json.dumps(info, indent=1))
    return write_eagle_card(out_dir)


def measure_eagle(eagle_dir: Path = EAGLE_DIR, new_tokens: int = 128) -> dict:
    """Greedy acceptance of the EAGLE draft (chain N = 1 and 4, the default tree) and of the vanilla draft
    (N = 1 and 4), all through :func:`lab.decode.generate` over the 8 held-out prompts × ``new_tokens``; plus
    the held-out top-1 agreement of both drafts on the same windows. Returns a dict."""
    from lab.decode import generate
    from lab.drafters import DraftModelDrafter
    from lab.drafters.eagle import DEFAULT_TREE, EagleDrafter, EagleDraftModel, trainable_parameters
    from lab.models import load_pair
    from lab.prompts import held_out_prompts

    pair = load_pair("shakespeare", device="cpu")
    model = EagleDraftModel.from_pretrained(pair.target, eagle_dir)
    val = target_features(pair.target, 64, 256, split="val")
    prompts = [pair.encode(p) for p in held_out_prompts()]
    runs = {"eagle_N1": lambda: EagleDrafter(pair.target, model, 1),
            "eagle_N4": lambda: EagleDrafter(pair.target, model, 4),
            "eagle_tree": lambda: EagleDrafter(pair.target, model, tree=DEFAULT_TREE),
            "draft_N1": lambda: DraftModelDrafter(pair.draft, 1),
            "draft_N4": lambda: DraftModelDrafter(pair.draft, 4)}
    out = {"eagle_trainable_parameters": trainable_parameters(model),
           "draft_parameters": sum(p.numel() for p in pair.draft.parameters()),
           "eagle_val_top1_agreement": round(eagle_agreement(model, val), 4),
           "draft_val_top1_agreement": round(draft_agreement(pair.draft, pair.target, val), 4),
           "new_tokens": new_tokens, "prompts": len(prompts), "tree": [list(p) for p in DEFAULT_TREE]}
    for name, make in runs.items():
        acc, tpc = [], []
        for ids in prompts:
            g = generate(pair.target, ids, drafter=make(), max_new_tokens=new_tokens)
            acc.append(g.stats["acceptance_rate"])
            tpc.append(g.stats["tokens_per_target_call"])
        # the mean over prompts, as lab/assets/shakespeare/measurements.json does for the pair
        out[name] = {"acceptance_rate": round(sum(acc) / len(acc), 4),
                     "tokens_per_target_call": round(sum(tpc) / len(tpc), 3)}
    return out


def write_eagle_card(eagle_dir: Path = EAGLE_DIR) -> Path:
    """Measure the saved EAGLE draft (:func:`measure_eagle`) and write ``measurements.json`` and the model card
    ``README.md`` next to its weights. Returns the card's path."""
    eagle_dir = Path(eagle_dir)
    info = json.loads((eagle_dir / "training.json").read_text())
    m = measure_eagle(eagle_dir)
    (eagle_dir / "measurements.json").write_text(json.dumps(m, indent=1))
    c = info["config"]
    gain = m["eagle_N4"]["acceptance_rate"] - m["draft_N4"]["acceptance_rate"]
    bars = [(f"trainable parameters below the vanilla draft's ({m['draft_parameters']:,})",
             m["eagle_trainable_parameters"] < m["draft_parameters"]),
            ("greedy acceptance rate at N = 4 at least 0.10 above the vanilla draft's", gain >= 0.10)]
    chain_note = [
        f"The last {info['chain_steps']} steps also score drafting steps 2..{info['chain_depth']}: the draft is fed "
        "its own predicted features in the same forward, with the attention it has while drafting "
        "(`lab.training.eagle.eagle_chain_predictions`; the \"training-time test\" of EAGLE-3, Li et al. 2025 — a "
        "departure from EAGLE-1). Trials on the same seed and measurement: 3000 plain steps (no chained steps) reached "
        "an acceptance rate at N = 4 of 0.464 (2.83 tokens per target call); 2000 plain + 700 chained steps 0.474 "
        "(2.86): the chained steps trade a little first-token accuracy for much better later tokens, whose inputs are "
        "the draft's own, noisier features. The committed run is 3000 plain + 700 chained steps.",
        "",
    ] if info.get("chain_steps") else []
    row = "| {} | {} | {} |"
    lines = [
        "# EAGLE draft for the bundled Shakespeare target", "",
        "An EAGLE-style draft (Li et al. 2024, \"EAGLE: Speculative Sampling Requires Rethinking Feature "
        "Uncertainty\", §3–4) for `lab/assets/shakespeare/target`, made by `python -m lab train eagle` and loaded "
        "with `lab.drafters.EagleDrafter.from_pretrained(load_pair())`. Files: `model.safetensors` (float16, the "
        "trainable parts only) and `config.json`.", "",
        "## Structure",
        f"It reads the target's last-layer feature f_j (after the final norm, D = {c['feature_size']}) and the "
        "target's own embedding of the next token x_{j+1} (shared, frozen), and predicts f_{j+1}: "
        f"`Linear(2D → {c['width']})` fusion → one Llama decoder layer of width {c['width']} ({c['heads']} heads, "
        f"{c['kv_heads']} key/value heads, SwiGLU MLP {c['intermediate']}, RoPE, its own KV cache) → RMS norm → "
        f"`Linear({c['width']} → D)`. The logits for x_{{j+2}} are the target's LM head (shared, frozen) applied "
        "to the predicted feature; drafting continues on its own predicted features.", "",
        f"Departure from EAGLE: the layer works at a bottleneck width {c['width']} instead of the target's "
        f"{c['feature_size']}, so the draft has fewer trainable parameters than the vanilla draft model.", "",
        f"- trainable parameters: **{m['eagle_trainable_parameters']:,}** (vanilla 1 × 128 draft: "
        f"{m['draft_parameters']:,})", "",
        "## Training",
        f"Frozen target; {info['sequences']} training windows × {info['seq_len']} tokens of target features "
        f"({info['feature_minutes']} min to compute or load from the cache; computing takes about 1 CPU-min per "
        f"100k tokens); {info['steps']} AdamW steps × {info['batch']} "
        f"windows ({info['tokens_seen']:,} positions seen), peak lr {info['lr']}, warm-up and cosine decay, "
        f"{precision_label(info)}, seed {info['seed']}, {info['threads']} thread(s): {info['train_minutes']} min "
        "wall-clock. Loss: "
        f"SmoothL1(f̂, f) + {info['cls_weight']} × cross-entropy of LM-head(f̂) against the target's distribution "
        f"LM-head(f) (distillation); uniform noise ±{info['noise']} × RMS on the input features (EAGLE's robustness "
        "to its own errors). EAGLE's paper weights the classification term 0.1; short trials here gave higher "
        "greedy acceptance with 1.0.", "",
        *chain_note,
        "## Measured (CPU, float32, greedy, 8 held-out prompts × "
        f"{m['new_tokens']} new tokens, `lab.decode.generate`)",
        f"Held-out next-token top-1 agreement with the target (teacher-forced, same windows): EAGLE "
        f"**{m['eagle_val_top1_agreement']}**, vanilla draft {m['draft_val_top1_agreement']}.", "",
        "| drafter | acceptance rate | tokens per target call |", "|---|---|---|",
        row.format("vanilla draft, N = 1 (per-token α)", m["draft_N1"]["acceptance_rate"],
                   m["draft_N1"]["tokens_per_target_call"]),
        row.format("EAGLE chain, N = 1 (per-token α)", m["eagle_N1"]["acceptance_rate"],
                   m["eagle_N1"]["tokens_per_target_call"]),
        row.format("vanilla draft, N = 4", m["draft_N4"]["acceptance_rate"], m["draft_N4"]["tokens_per_target_call"]),
        row.format("EAGLE chain, N = 4", m["eagle_N4"]["acceptance_rate"], m["eagle_N4"]["tokens_per_target_call"]),
        row.format(f"EAGLE tree, {len(m['tree'])} nodes {m['tree']} (accepted / tree nodes)",
                   m["eagle_tree"]["acceptance_rate"], m["eagle_tree"]["tokens_per_target_call"]), "",
        "Acceptance rate = accepted drafts / drafted tokens (`Generation.stats`), averaged over the prompts like "
        "the pair's `measurements.json`; a tree drafts more tokens than it can accept, so compare trees by tokens "
        "per target call.", "",
        "## Bars (issue 5)", *[f"- [{'x' if ok else ' '}] {text}" for text, ok in bars], "",
        "## Limits",
        "Trained briefly on CPU for one small target; the draft only works with that target (it reads its "
        "features). The numbers were measured once, on one CPU thread (see `training.json`); timings are not "
        "compared here.", ""]
    (eagle_dir / "README.md").write_text("\n".join(lines))
    return eagle_dir / "README.md"
