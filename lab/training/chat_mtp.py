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

__all__ = ["ChatMTPRecipe", "mtp_loss", "depth_predictions", "mtp_agreement", "train_chat_mtp", "measure_chat_mtp",
           "write_chat_mtp_card", "chat_mtp_card"]


@dataclass
class ChatMTPRecipe:
    """Every setting of ``python -m lab train chat-mtp`` (recorded in the heads' ``training.json``)."""

    seed: int = 2026
    depth: int = 2            # D modules: drafts of up to 2 tokens
    intermediate: int = 512   # each block's MLP width (the target's is 1536): ~2.4 M parameters per module
    draft_vocab: int = 8192   # the most frequent answer tokens of the training sequences, as the EAGLE draft's
    steps: int = 1500
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


def measure_chat_mtp(pair, directory, prompts: int = 3, max_new_tokens: int = 48) -> dict:
    """Greedy decoding with the MTP heads saved in ``directory`` against ``pair``'s committed EAGLE draft and Medusa
    heads, each drafting a chain as deep as the heads (D = 2: two tokens; Medusa's chain takes each head's top
    token), and autoregressive decoding, interleaved prompt by prompt (:func:`lab.bench.time_methods`) on the first
    ``prompts`` held-out requests of each task kind (:func:`lab.prompts.pair_tasks`, :func:`lab.prompts
    .arena_prompts`), up to ``max_new_tokens`` each, in the pair's dtype and on its device. Each drafter row adds
    the cost ratio, the per-position acceptance (given the earlier drafts accepted, and of all steps that drafted
    that far) and ``identical_outputs`` (:func:`lab.training.card_measures.add_drafter_details`). Writes nothing;
    returns ``{"tasks": {task: {"rows", "load", "note"}}, "settings", "date"}``. Raises ``FileNotFoundError`` for a
    folder without heads, ``ValueError`` for heads of another target and for ``prompts`` below 1 or above a task's
    prompts, or ``max_new_tokens`` below 1. Sources: DeepSeek-V3 (arXiv 2412.19437) §2.2; Medusa (arXiv
    2401.10774) §2.1; EAGLE (arXiv 2401.15077) §4."""
    from lab.bench import time_methods
    from lab.training.card_measures import add_drafter_details
    from lab.drafters.eagle import EagleDrafter
    from lab.drafters.medusa import MedusaDrafter
    from lab.drafters.mtp import MTPDrafter
    from lab.prompts import arena_prompts, pair_tasks
    from lab.validation import check_int

    prompts, max_new_tokens = check_int("prompts", prompts, 1), check_int("max_new_tokens", max_new_tokens, 1)
    tasks = pair_tasks(pair)
    fewest = min(len(arena_prompts(pair, task)) for task in tasks)
    if prompts > fewest:
        raise ValueError(f"prompts must be at most {fewest} (the fewest held-out requests of a task), got {prompts}")
    directory = Path(directory)
    depth = MTPDrafter.from_pretrained(pair, directory=directory).heads.depth  # missing or foreign heads fail first
    methods = {"autoregressive": None,
               "MTP": lambda: MTPDrafter.from_pretrained(pair, n_draft=depth, directory=directory),
               "EAGLE": lambda: EagleDrafter.from_pretrained(pair, n_draft=depth),
               "Medusa": lambda: MedusaDrafter.from_pretrained(pair, tree=[(0,) * k for k in range(1, depth + 1)])}
    measured, settings = {}, None
    for task in tasks:
        result = add_drafter_details(time_methods(pair, arena_prompts(pair, task)[:prompts], methods,
                                                  max_new_tokens=max_new_tokens))
        measured[task] = {"rows": result["rows"], "load": result["load"], "note": result["note"]}
        settings = {**result["settings"], "prompts_per_task": prompts, "depth": depth}
    settings.pop("prompts")
    return {"tasks": measured, "settings": settings, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def _decoding_table(decoding: dict) -> list[str]:
    """The card's table: one row per task and drafter of :func:`measure_chat_mtp`'s result."""
    depth = decoding["settings"]["depth"]
    numbered = " / ".join(map(str, range(1, depth + 1)))
    table = [f"| task | method | acceptance rate | tokens per target call | acceptance at position {numbered} | "
             f"position {numbered} given the earlier accepted | speedup | cost c |",
             "|---|---|---|---|---|---|---|---|"]

    def shares(values):
        return " / ".join("–" if v is None else f"{v:.2f}" for v in values) or "–"

    for task, run in decoding["tasks"].items():
        for row in run["rows"][1:]:
            table.append(f"| {task} | {row['method']} | {_fixed(row['acceptance_rate'])} | "
                         f"{_fixed(row['tokens_per_target_call'])} | {shares(row['per_position_acceptance'])} | "
                         f"{shares(row['conditional_acceptance'])} | {row['speedup']:.2f}× | "
                         f"{_fixed(row['cost_ratio'], 3)} |")
    return table


def _fixed(value, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _reading(decoding: dict) -> list[str]:
    """Sentences built from the table's numbers: where MTP's first and deeper positions stand against the other
    two drafters, task by task."""
    lines = []
    depth = decoding["settings"]["depth"]
    for position, key, label in ((0, "per_position_acceptance", "first draft accepted"),
                                 (depth - 1, "conditional_acceptance", "last draft accepted given the earlier ones")
                                 )[:1 if depth == 1 else 2]:  # one module: no draft has earlier ones
        order = []
        for task, run in decoding["tasks"].items():
            rows = {r["method"]: r[key][position] if len(r[key]) > position else None for r in run["rows"][1:]}
            known = {m: v for m, v in rows.items() if v is not None}
            if "MTP" in known:  # compared as printed, to 2 decimals: equal there reads "level"
                mine = round(known["MTP"], 2)
                above = [m for m, v in known.items() if m != "MTP" and round(v, 2) > mine]
                level = [m for m, v in known.items() if m != "MTP" and round(v, 2) == mine]
                standing = ", ".join(([f"below {' and '.join(above)}"] if above else [])
                                     + ([f"level with {' and '.join(level)}"] if level else [])) or "highest"
                order.append(f"{task} {mine:.2f} ({standing})")
        if order:
            lines.append(f"- MTP's {label} (position {position + 1}): " + "; ".join(order) + ".")
    return lines


def write_chat_mtp_card(pair, directory, **measure) -> Path:
    """Measure the MTP heads saved in ``directory`` (:func:`measure_chat_mtp`, keyword arguments passed on), write
    ``measurements.json`` beside the ``training.json`` and ``config.json`` that :func:`train_chat_mtp` wrote, then
    the model card ``README.md`` (:func:`chat_mtp_card`), and return the card's path. Raises ``FileNotFoundError``
    when ``training.json`` is missing, and what :func:`measure_chat_mtp` raises."""
    directory = Path(directory)
    json.loads((directory / "training.json").read_text())  # a folder without a training record fails before timing
    decoding = measure_chat_mtp(pair, directory, **measure)
    size = (directory / "model.safetensors").stat().st_size
    (directory / "measurements.json").write_text(json.dumps({"decoding": decoding, "weights_bytes": size}, indent=1))
    (directory / "README.md").write_text(chat_mtp_card(directory, pair.name))
    return directory / "README.md"


def chat_mtp_card(directory, pair_name: str) -> str:
    """The model card of the MTP heads saved in ``directory`` for the pair ``pair_name``, as Markdown, built only from
    that folder's ``config.json``, ``training.json`` (:func:`train_chat_mtp`) and ``measurements.json``
    (:func:`write_chat_mtp_card`), so a committed card can be checked against its files. Raises
    ``FileNotFoundError`` when one is missing."""
    directory = Path(directory)
    info = json.loads((directory / "training.json").read_text())
    config = json.loads((directory / "config.json").read_text())
    measured = json.loads((directory / "measurements.json").read_text())
    decoding, size = measured["decoding"], measured["weights_bytes"]
    recipe, data, held = info["recipe"], info["data"], info["held_out_agreement"]
    settings = decoding["settings"]
    depth = recipe["depth"]
    kinds = [k for k in held["depth_1"] if k != "all"]
    agreement = [f"  - depth {k}: " + ", ".join(f"{kind} {held[f'depth_{k}'][kind]:.2f}" for kind in kinds)
                 + f"; all {held[f'depth_{k}']['all']:.2f}" for k in range(1, depth + 1)]
    runs = list(decoding["tasks"].values())
    others = [run["load"]["other_cores"] for run in runs if run["load"]["other_cores"] is not None]
    spread = f"{min(others):.2f}" + ("" if f"{min(others):.2f}" == f"{max(others):.2f}" else f"–{max(others):.2f}") \
        if others else ""
    loads = ((f"other processes kept {spread} of {runs[0]['load']['cores']} cores busy during the timings")
             if others else "not measured on this system") + (
        " (a busy machine: read the speedups as noise)" if any(run["load"]["busy"] for run in runs) else "")
    dtype = settings["dtype"]
    reduced = config["draft_vocab_size"] is not None  # heads over the whole vocabulary have no ids and no coverage
    lines = [
        f"# Multi-token-prediction heads of the {pair_name} pair (`mtp/`, "
        "`lab.drafters.MTPDrafter.from_pretrained(pair)`)", "",
        "DeepSeek-V3's multi-token prediction (DeepSeek-AI 2024, arXiv 2412.19437, §2.2), used as a draft the way vLLM "
        "(`speculative_config={\"method\": \"mtp\"}`) and SGLang use DeepSeek's MTP module: "
        f"D = {depth} sequential modules on the frozen target. Module k reads the previous depth's hidden state "
        "h^{k-1}_i (h^0: the target's last hidden state, after its final norm, as the EAGLE draft reads it) and the "
        "target's embedding of t_{i+k}, RMS-normalises each, projects the concatenation 2d -> d, runs one Llama "
        f"decoder block (width {config['width']}, {config['heads']} heads, {config['kv_heads']} key/value heads, MLP "
        f"{config['intermediate']}) with its own final RMSNorm, and the target's own LM head (shared, frozen, not "
        f"stored) scores t_{{i+k+1}} over "
        + ("the whole vocabulary" if config["draft_vocab_size"] is None else
           f"an {config['draft_vocab_size']:,}-token draft vocabulary (`lab.drafters.draft_vocab`: the most frequent "
           "answer tokens of the training split)") + ". A proposal is a chain "
        f"of up to {depth} tokens: one forward of each module in turn, each on its own KV cache of true rows.", "",
        "- **Files**: `model.safetensors` (the modules in float16"
        + (" and the draft-vocabulary ids" if reduced else "")
        + f"; {info['parameters']:,} parameters, {size / 1e6:.1f} MB), `config.json` (the architecture and the "
        "target's weights key, so the heads refuse another target), `training.json` (recipe, data, loss and "
        "agreement history, minutes), `measurements.json` (the decoding comparison below).",
        f"- **Training** (`python -m lab train chat-mtp --threads {info['threads']}`, "
        f"`lab.training.chat_mtp.train_chat_mtp`; {info['minutes']} minutes on {info['threads']} CPU thread(s), "
        f"bf16 autocast: {info['bf16_autocast']}, after the target's features were cached): {recipe['steps']:,} "
        f"AdamW steps of {recipe['batch']} sequences (peak learning rate {recipe['lr']}, {recipe['warmup']} warm-up "
        "steps, cosine decay), teacher forcing as in the report: the true h^0 and the true next-token embeddings in, "
        "loss = the mean over the depths of the cross-entropy on t_{i+k+1}, on answer tokens"
        + (" inside the draft vocabulary" if reduced else "") + ". The target is frozen, so the report's main-model "
        "loss is absent.",
        f"- **Data**: the chat data of `python -m lab train chat-data` (the pair card's \"Training data\"): "
        f"{data['sequences']:,} sequences of the target's own answers, split by request "
        "(`lab.training.chat_data.split_by_request`: no request on both sides) into "
        f"{data['train_sequences']:,} training sequences ({data['answer_tokens']:,} answer tokens) and "
        f"{data['held_out_sequences']} held out."
        + (f" Coverage of the training answers by the draft vocabulary: {info['draft_vocab_coverage']:.1%}."
           if reduced else ""),
        "- **Held-out teacher-forced greedy agreement** (the share of held-out answer positions where depth k's argmax "
        "equals the target's, fed the true prefix: depth k's acceptance given that the drafts before it were "
        "accepted):", *agreement, "",
        f"## Against the EAGLE draft and the Medusa heads at the same depth ({depth}-token chains)", "",
        f"`lab.training.chat_mtp.measure_chat_mtp` on {decoding['date']}: the {pair_name} pair in {dtype} on "
        f"{settings['device']}, {settings['threads']} thread(s), greedy, the first {settings['prompts_per_task']} "
        f"held-out requests of each kind × up to {settings['max_new_tokens']} new tokens, methods interleaved request "
        f"by request, each task its own run. MTP = `MTPDrafter` (n_draft {depth}); EAGLE = the committed "
        f"`EagleDrafter` (n_draft {depth}); Medusa = the committed `MedusaDrafter` with the chain tree of its first "
        f"{depth} heads, top-1 each. Acceptance rate = accepted ÷ drafted; acceptance at position k = the share of "
        "steps that drafted k tokens whose k-th was accepted; given the earlier accepted = the same among the steps "
        "that accepted every draft before it (`lab.metrics.conditional_acceptance`). Speedup against autoregressive "
        "decoding in the same run, prefill included; cost c = draft ms per draft forward over the autoregressive ms "
        "per decode step (prefill left out).", "",
        *_decoding_table(decoding), "",
        *_reading(decoding),
        f"- Requests answered exactly as autoregressive decoding answered them, of {settings['prompts_per_task']} per "
        "task: " + "; ".join(task + " " + ", ".join(f"{r['method']} {r['identical_outputs']}" for r in run["rows"][1:])
                             for task, run in decoding["tasks"].items()) + "."
        + ("" if dtype == "float32" else f" In {dtype} a near-tie can round the other way when the target scores a "
           "block of tokens instead of one, so an answer can part from the autoregressive one; greedy parity is "
           "checked in float32 (`tests/lab/drafters/test_mtp.py`)."),
        f"- Load: {loads}.",
        "- Small samples: a few hundred target calls per cell at most, so differences of a few points are noise. "
        "Compare rows of this table, not with other cards' timings; the arena (`../arena.json`, lesson 12) times "
        "every drafter at its own N.", "",
        "## What DeepSeek-V3's number means here",
        "DeepSeek-V3 reports that its one MTP module's draft (the second of the two tokens its model predicts) is "
        "accepted 85–90 % of the time (§5.4.3), with the module trained jointly with a 671 B model on its "
        "pre-training data. These modules are bolted onto a small frozen target and trained for minutes on "
        f"{data['answer_tokens']:,} answer tokens; compare their first-position acceptance above with that figure to "
        "see what joint training at scale buys.", ""]
    return "\n".join(lines)
