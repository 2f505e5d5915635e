"""The EAGLE-3 draft for the bundled Shakespeare target: fused low/middle/high features, a token loss only, and
training-time test (Li et al. 2025, arXiv 2503.01840, §3).

``python -m lab train eagle3`` runs :func:`train_eagle3`; the draft is :class:`lab.drafters.eagle3.Eagle3DraftModel`.
The unrolled chain is the one EAGLE's training already builds (:func:`lab.training.eagle.eagle_chain_predictions`):
pass k feeds pass k - 1's own outputs, with the attention drafting has.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from lab.assets import EAGLE_DIR, PAIR_DIR, cache_dir
from lab.training.checkpoints import discard_training_state, resume_training_state, save_training_state
from lab.training.eagle import eagle_chain_predictions
from lab.training.features import target_features
from lab.training.loop import bf16_autocast, cpu_autocast, lr_at, make_optimizer
from lab.validation import check_int

__all__ = ["EAGLE3_DIR", "feature_layers", "eagle3_loss", "chain_agreement", "train_eagle3", "measure_eagle3",
           "measure_decoding", "write_eagle3_card"]

EAGLE3_DIR = PAIR_DIR / "eagle3"


def feature_layers(layers, num_layers: int) -> tuple[tuple, int]:
    """The layers a feature cache must hold for a draft reading ``layers`` of a ``num_layers``-layer target, and
    where the last layer (after the final norm, whose LM head gives the target's distribution) sits among them:
    ``(layers + (num_layers,) unless it is already there, its index)``."""
    layers = tuple(int(i) for i in layers)
    last = [i for i, layer in enumerate(layers) if layer in (num_layers, -1)]
    if last:
        return layers, last[0]
    return layers + (num_layers,), len(layers)


def _split(hidden: torch.Tensor, count: int, last: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The draft's input (the first ``count`` layers, ``[..., count · D]``) and the last layer ``[..., D]`` of a
    feature cache row ``[..., m · D]`` (:func:`feature_layers`)."""
    return hidden[..., :count * width], hidden[..., last * width:(last + 1) * width]


def eagle3_loss(model, hidden: torch.Tensor, last: torch.Tensor, ids: torch.Tensor, depth: int = 3,
                weights: torch.Tensor | None = None, decay: float = 1.0) -> tuple[torch.Tensor, list]:
    """EAGLE-3's loss on a batch: cross-entropy only, against the target's next-token distribution over the draft
    vocabulary (Li et al. 2025, §3.1: the feature-regression term of EAGLE is dropped).

    ``hidden``: the target's fused layers ``[B, T, k·D]``; ``last``: its last layer ``[B, T, D]`` (the target's
    distribution of x_{j+2} is softmax of its LM head on ``last[:, j + 1]``, restricted to the draft vocabulary and
    renormalised); ``ids`` ``[B, T]``. Row j feeds (g_j, x_{j+1}) at position j + 1; ``depth`` passes unroll the
    chain on the draft's own outputs (training-time test, §3.2), every pass aiming at the same x_{j+2}.
    ``weights``: optional ``[B, T - 1]``. ``decay`` in (0, 1]: pass k (from 0) weighs ``decay**k`` and the loss is
    the weighted mean of the passes; 1.0 is a plain mean, 0.8 is what the official training code uses
    (SafeAILab/EAGLE, ``eagle/traineagle3/main.py``: ``ploss_weight = 0.8 ** i``), which favours the first drafting
    step. Returns ``(loss, [cross-entropy of each pass])`` (float tensors). Raises ``ValueError`` for ``depth`` < 1
    or ``decay`` outside (0, 1]."""
    depth = check_int("depth", depth, 1)
    if not 0 < decay <= 1:
        raise ValueError(f"decay must be in (0, 1], got {decay}")
    head = model.target.get_output_embeddings()
    with torch.no_grad():
        # only the draft vocabulary's rows of the LM head: the same logits, without scoring all V ids
        rows = head.weight[model.draft_vocab]
        bias = None if head.bias is None else head.bias[model.draft_vocab]
        theirs = torch.nn.functional.linear(last[:, 1:].to(rows.dtype), rows, bias).float().softmax(-1)
    with cpu_autocast():
        g = model.fuse(hidden[:, :-1])
        predicted = eagle_chain_predictions(model, g, ids[:, 1:], depth)
        logits = model.head_logits(predicted)
    n = theirs.size(1)
    w = torch.ones(theirs.shape[:2]) if weights is None else weights.float()
    per_pass = []
    for k in range(depth):
        ce = -(theirs * logits[:, k * n:(k + 1) * n].float().log_softmax(-1)).sum(-1)
        per_pass.append((ce * w).sum() / w.sum().clamp_min(1e-9))
    scale = torch.tensor([decay ** k for k in range(depth)])
    return (torch.stack(per_pass) * scale).sum() / scale.sum(), per_pass


@torch.no_grad()
def chain_agreement(model, inputs: torch.Tensor, ids: torch.Tensor, theirs: torch.Tensor, depth: int = 3) -> list:
    """Teacher-forced held-out agreement of a draft's greedy chain, per drafting step 1..``depth``: the share of
    rows where the draft's step-k argmax (over the target's whole vocabulary) equals the target's own argmax
    ``theirs`` ``[B, T - 1]`` (for x_{j+2}). Step k at row j reads the true inputs up to row j - k + 1 and its own
    outputs after them (:func:`lab.training.eagle.eagle_chain_predictions`), with the corpus tokens; rows j < k - 1
    have no full chain and are left out. ``inputs`` ``[B, T, ·]`` are what the model's forward reads (EAGLE:
    the last layer's features; EAGLE-3: ``model.fuse`` of its layers), ``ids`` ``[B, T]``. Works for
    :class:`lab.drafters.eagle.EagleDraftModel` and :class:`lab.drafters.eagle3.Eagle3DraftModel` alike, so both
    are measured on the same windows. Returns ``[α_1, .., α_depth]`` (floats)."""
    was_training = model.training
    model.eval()
    n = theirs.size(1)
    hits, counts = [0] * depth, [0] * depth
    for i in range(0, ids.size(0), 16):
        predicted = eagle_chain_predictions(model, inputs[i:i + 16, :-1], ids[i:i + 16, 1:], depth)
        for k in range(depth):
            mine = model.logits(predicted[:, k * n:(k + 1) * n]).argmax(-1)[:, k:]
            hits[k] += (mine == theirs[i:i + 16, k:]).sum().item()
            counts[k] += mine.numel()
    model.train(was_training)
    return [round(h / c, 4) for h, c in zip(hits, counts)]


def _target_argmax(target, last: torch.Tensor) -> torch.Tensor:
    """The target's argmax for x_{j+2} from its last layer ``[B, T, D]``: ``[B, T - 1]``."""
    head = target.get_output_embeddings()
    return head(last[:, 1:].to(head.weight.dtype)).argmax(-1)


def train_eagle3(threads: int | None = None, steps: int = 600, out_dir: Path = EAGLE3_DIR, *,
                 sequences: int = 1200, seq_len: int = 256, batch: int = 8, lr: float = 3e-3, warmup: int = 50,
                 depth: int = 3, draft_vocab_size: int = 1024, config: dict | None = None, hidden_layers=None,
                 seed: int = 2025, checkpoint_every: int = 100, log=print) -> Path:
    """Train an EAGLE-3 draft (:class:`lab.drafters.eagle3.Eagle3DraftModel`) on the frozen Shakespeare target and
    save it to ``out_dir`` (``config.json``, float16 ``model.safetensors`` with the int64 ``d2t``, ``training.json``
    with the recipe, history, draft-vocabulary coverage and held-out per-step agreement of the saved file).

    Data: :func:`lab.training.features.target_features` with the draft's layers (default
    :func:`lab.drafters.eagle3.default_layers`) and the last one, over ``sequences`` × ``seq_len`` training
    windows and 64 held-out windows (cached). Draft vocabulary: the ``draft_vocab_size`` most frequent ids of the
    training windows (:func:`lab.drafters.draft_vocab.frequent_tokens`). Loss: :func:`eagle3_loss`, every step
    unrolled ``depth`` passes (training-time test). AdamW with warm-up and cosine decay, gradient clipping at 1,
    bf16 autocast where native. Every ``checkpoint_every`` steps the run's state goes to
    ``<cache>/eagle3-checkpoint/``; a run with the same recipe resumes from it, a finished run deletes it. Raises
    ``ValueError`` naming the argument for ``steps``, ``batch``, ``depth``, ``draft_vocab_size`` or
    ``checkpoint_every`` out of range. Returns ``out_dir``. Source: Li et al. 2025, "EAGLE-3", §3."""
    from lab.drafters.draft_vocab import frequent_tokens
    from lab.drafters.eagle3 import Eagle3DraftModel, default_layers
    from lab.drafters.eagle import trainable_parameters
    from lab.models import load_pair

    steps, batch, depth = check_int("steps", steps, 1), check_int("batch", batch, 1), check_int("depth", depth, 1)
    checkpoint_every = check_int("checkpoint_every", checkpoint_every, 1)
    if threads:
        torch.set_num_threads(threads)
    pair = load_pair("shakespeare", device="cpu")
    target = pair.target.requires_grad_(False)
    N, D = int(target.config.num_hidden_layers), int(target.config.hidden_size)
    layers = tuple(default_layers(N) if hidden_layers is None else hidden_layers)
    stored, last = feature_layers(layers, N)
    t0 = time.time()
    data = target_features(target, sequences, seq_len, split="train", layers=stored)
    val = target_features(target, 64, seq_len, split="val", layers=stored)
    feature_minutes = (time.time() - t0) / 60
    vocab = frequent_tokens([data["ids"]], check_int("draft_vocab_size", draft_vocab_size, 1),
                            int(target.config.vocab_size), always=[pair.eos_token_id] if pair.eos_token_id else ())

    torch.manual_seed(seed)
    model = Eagle3DraftModel(target, config, draft_vocab=vocab, hidden_layers=layers).float().train()
    opt = make_optimizer(model, lr)
    params = [p for p in model.parameters() if p.requires_grad]
    checkpoint = cache_dir() / "eagle3-checkpoint"
    recipe = {"steps": steps, "batch": batch, "lr": lr, "warmup": warmup, "depth": depth, "sequences": sequences,
              "seq_len": seq_len, "draft_vocab_size": int(vocab.numel()), "config": dict(model.config),
              "seed": seed, "data": "target_features (corpus training windows, seed 0) of layers " + str(stored)}
    history, order, first, minutes = resume_training_state(checkpoint, model, opt, recipe, log)
    if first:
        log(f"EAGLE-3: resuming at step {first} from {checkpoint}")
    log(f"EAGLE-3: layers {layers}, draft vocabulary {vocab.numel()}, {trainable_parameters(model):,} trainable "
        f"parameters")
    val_in, val_last = _split(val["hidden"].float(), len(layers), last, D)
    val_theirs = _target_argmax(target, val_last)
    t0 = time.time() - minutes * 60
    for step in tqdm(range(first, steps), desc="EAGLE-3 draft", mininterval=5):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup)
        rows = torch.randint(0, data["ids"].size(0), (batch,), generator=torch.Generator().manual_seed(seed + step))
        hidden, hidden_last = _split(data["hidden"][rows].float(), len(layers), last, D)
        loss, per_pass = eagle3_loss(model, hidden, hidden_last, data["ids"][rows], depth)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            entry = {"step": step, "loss": round(loss.item(), 4), "per_pass": [round(x.item(), 4) for x in per_pass]}
            if step % 500 == 0 or step == steps - 1:
                entry["agreement"] = chain_agreement(model, model.fuse(val_in).detach(), val["ids"], val_theirs, depth)
            history.append(entry)
            log(f"EAGLE-3 step {step}/{steps} {entry} ({(time.time() - t0) / 60:.1f} min)")
        if (step + 1) % checkpoint_every == 0 and step + 1 < steps:
            save_training_state(checkpoint, model, opt, recipe, step + 1, order, history, (time.time() - t0) / 60)
    train_minutes = (time.time() - t0) / 60
    model.eval()
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    saved = Eagle3DraftModel.from_pretrained(target, out_dir).float()  # measure the committed float16 file
    with torch.no_grad():
        agreement = chain_agreement(saved, saved.fuse(val_in), val["ids"], val_theirs, depth)
    info = {"recipe": recipe, "hidden_layers": list(layers), "trainable_parameters": trainable_parameters(model),
            "draft_vocab_coverage": {
                "corpus_tokens": round(torch.isin(val["ids"], vocab).float().mean().item(), 4),
                "target_argmax": round(torch.isin(val_theirs, vocab).float().mean().item(), 4)},
            "held_out_agreement": {f"step_{k}": a for k, a in enumerate(agreement, start=1)},
            "tokens_seen": steps * batch * (seq_len - 1), "feature_minutes": round(feature_minutes, 1),
            "train_minutes": round(train_minutes, 1), "history": history, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "bf16_autocast": bf16_autocast()}
    (out_dir / "training.json").write_text(json.dumps(info, indent=1))
    discard_training_state(checkpoint)
    return out_dir


def measure_eagle3(eagle3_dir: Path = EAGLE3_DIR, depth: int = 3) -> dict:
    """Teacher-forced held-out agreement per drafting step 1..``depth`` of the EAGLE-3 draft in ``eagle3_dir`` and
    of the committed EAGLE draft (:data:`lab.assets.EAGLE_DIR`), on the same 64 held-out windows of 256 tokens and
    against the same target argmax. Returns ``{"eagle3": [...], "eagle": [...]}``."""
    from lab.drafters.eagle import EagleDraftModel
    from lab.drafters.eagle3 import Eagle3DraftModel
    from lab.models import load_pair

    pair = load_pair("shakespeare", device="cpu")
    target = pair.target
    e3 = Eagle3DraftModel.from_pretrained(target, eagle3_dir)
    N, D = int(target.config.num_hidden_layers), int(target.config.hidden_size)
    layers = tuple(e3.config["hidden_layers"])
    stored, last = feature_layers(layers, N)
    val = target_features(target, 64, 256, split="val", layers=stored)
    val_in, val_last = _split(val["hidden"].float(), len(layers), last, D)
    theirs = _target_argmax(target, val_last)
    eagle = EagleDraftModel.from_pretrained(target, EAGLE_DIR)
    with torch.no_grad():
        return {"eagle3": chain_agreement(e3, e3.fuse(val_in), val["ids"], theirs, depth),
                "eagle": chain_agreement(eagle, val_last, val["ids"], theirs, depth)}


def measure_decoding(eagle3_dir: Path = EAGLE3_DIR, n_values=(2, 3, 4), max_new_tokens: int = 128) -> dict:
    """Greedy decoding of the Shakespeare pair's 8 held-out prompts (float32) with the EAGLE-3 draft in
    ``eagle3_dir`` and the committed EAGLE draft, chains of N in ``n_values``, against autoregressive decoding,
    all interleaved prompt by prompt (:func:`lab.bench.time_methods`, whose rows carry tokens per target call, α,
    tokens/s and speedup). Adds the measured cost ratio c of each drafter
    (:func:`lab.metrics.cost_ratio_from_steps`: draft ms per draft forward over the autoregressive ms per target
    call, from the same runs). Returns ``{"rows": [...], "settings": {...}, "load": ..., "note": ...}``."""
    from lab.bench import time_methods
    from lab.drafters.eagle import EagleDrafter
    from lab.drafters.eagle3 import Eagle3Drafter
    from lab.metrics import cost_ratio_from_steps
    from lab.models import load_pair
    from lab.prompts import held_out_prompts

    pair = load_pair("shakespeare", device="cpu")
    methods = {"autoregressive": None}
    for n in n_values:
        methods[f"eagle N={n}"] = (lambda n=n: EagleDrafter.from_pretrained(pair, n_draft=n))
        methods[f"eagle3 N={n}"] = (lambda n=n: Eagle3Drafter.from_pretrained(pair, n_draft=n, directory=eagle3_dir))
    result = time_methods(pair, held_out_prompts(), methods, max_new_tokens=max_new_tokens)
    ar = result["generations"]["autoregressive"]
    ar_ms = sum(g.stats["wall_ms"] for g in ar) / sum(g.stats["target_calls"] for g in ar)
    for row in result["rows"]:
        if methods[row["method"]] is not None:
            steps = [s for g in result["generations"][row["method"]] for s in g.steps]
            row["cost_ratio"] = round(cost_ratio_from_steps(steps, ar_ms), 3)
    return {"rows": result["rows"], "settings": result["settings"], "load": result["load"], "note": result["note"]}


def write_eagle3_card(eagle3_dir: Path = EAGLE3_DIR) -> Path:
    """Measure the saved EAGLE-3 draft against the committed EAGLE draft (:func:`measure_eagle3`,
    :func:`measure_decoding`), write ``measurements.json`` and the model card ``README.md`` beside the weights and
    return the card's path."""
    eagle3_dir = Path(eagle3_dir)
    info = json.loads((eagle3_dir / "training.json").read_text())
    agreement = measure_eagle3(eagle3_dir)
    decoding = measure_decoding(eagle3_dir)
    size = (eagle3_dir / "model.safetensors").stat().st_size
    (eagle3_dir / "measurements.json").write_text(json.dumps({"teacher_forced_agreement": agreement,
                                                              "decoding": decoding,
                                                              "weights_bytes": size}, indent=1))
    recipe = info["recipe"]
    eagle = json.loads((Path(EAGLE_DIR) / "training.json").read_text())
    gain = agreement["eagle3"][0] - agreement["eagle"][0]
    rows = ["| method | α (accepted / examined) | tokens per target call | tokens/s | speedup | cost c |",
            "|---|---|---|---|---|---|"]
    for r in decoding["rows"]:
        rows.append(f"| {r['method']} | {r.get('alpha', '–')} | {r.get('tokens_per_target_call', '–')} | "
                    f"{r['tokens_per_second']} | {r['speedup']}× | {r.get('cost_ratio', '–')} |")
    steps = " / ".join(f"{a:.3f}" for a in agreement["eagle3"])
    eagle_steps = " / ".join(f"{a:.3f}" for a in agreement["eagle"])
    lines = [
        "# EAGLE-3 draft for the Shakespeare target", "",
        "An EAGLE-3 draft (Li et al. 2025, arXiv 2503.01840, §3) for the bundled 6-layer target: it reads the "
        "target's "
        f"hidden states of layers {tuple(info['hidden_layers'])} (low, middle, high; `lab.models.layer_states` "
        "indices) fused by one linear layer, runs one Llama decoder layer of width "
        f"{recipe['config']['width']} and predicts tokens through its own head over a reduced draft vocabulary of "
        f"{recipe['draft_vocab_size']} of the 2048 ids (`d2t`: target id = j + d2t[j]). "
        f"{info['trainable_parameters']:,} trainable parameters, {size / 1e6:.2f} MB (float16 safetensors).", "",
        "## Training (`python -m lab train eagle3 --threads 1`, `lab.training.eagle3.train_eagle3`)",
        f"- Data: {recipe['sequences']} corpus windows of {recipe['seq_len']} tokens (the training split) with "
        "the frozen target's hidden states of the three layers and the last one (cached); 64 held-out windows for "
        "agreement.",
        f"- Loss: cross-entropy only, against the target's next-token distribution restricted to the draft "
        f"vocabulary; every step unrolls the draft {recipe['depth']} passes on its own outputs (training-time "
        "test) and averages the passes.",
        f"- {recipe['steps']} steps of batch {recipe['batch']}, AdamW lr {recipe['lr']} with warm-up and cosine "
        f"decay; {info['tokens_seen']:,} tokens seen; {info['train_minutes']} minutes on "
        f"{info['threads']} CPU thread(s) (bf16 autocast: {info['bf16_autocast']}), plus "
        f"{info['feature_minutes']} minutes for the features, on a shared machine.",
        f"- Draft-vocabulary coverage on the held-out windows: {info['draft_vocab_coverage']['corpus_tokens']:.3f} "
        f"of corpus tokens, {info['draft_vocab_coverage']['target_argmax']:.3f} of the target's greedy choices.", "",
        "## Held-out teacher-forced agreement (greedy chain α per drafting step 1 / 2 / 3)",
        f"- EAGLE-3: {steps}", f"- the committed EAGLE draft (`../eagle`): {eagle_steps}",
        f"- Step-1 difference: {gain:+.3f} (issue 23's goal: at least +0.05).", "",
        "Step k at row j reads the target's features up to row j - k + 1 and its own outputs after them, with the "
        "corpus tokens (`lab.training.eagle3.chain_agreement`); both drafts are scored against the target's argmax "
        "on the same 64 windows.", "",
        "## Greedy decoding, 8 held-out prompts × up to 128 tokens, float32 (`lab.training.eagle3.measure_decoding`)",
        *rows, "",
        f"Threads: {decoding['settings']['threads']}. {decoding['note'].rstrip('. ')}. Cost c = draft ms per draft "
        "forward over "
        "the autoregressive ms per target call, from the same runs. Timings on a shared 2-core CPU: compare "
        "rows of this table, not with other cards.", "",
        "## Limits",
        f"Not trained as long as the EAGLE draft it is compared with: {info['tokens_seen']:,} tokens "
        f"({recipe['steps']} steps) against {eagle['tokens_seen']:,} ({eagle['steps']} steps), so the comparison "
        "is not at equal training. "
        "Trained briefly on CPU for one small target; the draft works only with that target (it reads its layers). "
        "The real pair's EAGLE-3 draft, trained on its chat data, has its own card: "
        "`lab/assets/smollm2-135m/eagle3/README.md`.", ""]
    (eagle3_dir / "README.md").write_text("\n".join(lines))
    return eagle3_dir / "README.md"
