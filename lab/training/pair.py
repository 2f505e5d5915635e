"""The recipe of the bundled Shakespeare pair: tokenizer, Llama target, and a small draft distilled from it.

``python -m lab train pair`` runs :func:`train_pair` (then the card, :func:`lab.training.cards.write_card`);
``python -m lab train draft`` re-distils only the draft. The draft learns the KL divergence to the target's
next-token distribution (distillation), which raises acceptance far more than training it on the corpus alone.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from lab.assets import PAIR_DIR, cache_dir
from lab.training.checkpoints import load_checkpoint, save_model
from lab.training.corpus import CORPUS_SPEC, encode_texts, fetch_corpus, split_corpus
from lab.training.loop import Batches, bf16_autocast, train_model, validation_loss
from lab.training.tokenizer import train_tokenizer

__all__ = ["ModelShape", "PairRecipe", "train_pair"]


@dataclass
class ModelShape:
    """The size of one Llama model: hidden width, decoder layers, attention heads, MLP width."""

    hidden: int
    layers: int
    heads: int
    intermediate: int

    def config(self, vocab_size: int, eos_id: int, max_positions: int):
        """A transformers ``LlamaConfig`` of this shape (tied embeddings, RoPE, EOS doubling as BOS and pad)."""
        from transformers import LlamaConfig

        return LlamaConfig(vocab_size=vocab_size, hidden_size=self.hidden, intermediate_size=self.intermediate,
                           num_hidden_layers=self.layers, num_attention_heads=self.heads,
                           num_key_value_heads=self.heads, max_position_embeddings=max_positions,
                           rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=eos_id,
                           eos_token_id=eos_id, pad_token_id=eos_id)


@dataclass
class PairRecipe:
    """Every setting of ``python -m lab train pair`` (recorded in ``training.json``): sizes, steps, batch, peak
    learning rates, the copy-augmented share of sequences and the seed."""

    seed: int = 1234
    vocab_size: int = 2048
    seq_len: int = 256
    max_positions: int = 512
    target: ModelShape = field(default_factory=lambda: ModelShape(384, 6, 6, 1024))
    draft: ModelShape = field(default_factory=lambda: ModelShape(128, 1, 4, 384))
    target_steps: int = 2400
    target_batch: int = 16
    target_lr: float = 1.5e-3
    draft_steps: int = 800
    draft_batch: int = 16
    draft_lr: float = 3e-3
    copy_frac: float = 0.15  # share of training sequences that repeat a passage
    warmup: int = 100


def train_pair(out_dir: Path = PAIR_DIR, recipe: PairRecipe | None = None, threads: int | None = None,
               draft_only: bool = False) -> Path:
    """Train tokenizer, target and distilled draft; save them to ``out_dir`` (then
    :func:`lab.training.cards.write_card`).

    ``draft_only`` keeps the saved tokenizer and target and re-distils only the draft (800 steps: about 6 minutes on
    a 2-core CPU with native bf16, 12 in float32 on an AVX2 one). Returns ``out_dir``. The default recipe takes
    about an hour on a 2-core CPU with native bf16 and about 1.8 hours on an AVX2 one
    (:func:`lab.training.loop.bf16_autocast`).

    Training writes into ``<out_dir>.partial`` beside ``out_dir``; only a finished run moves its files into
    ``out_dir`` (``target/``, ``draft/``, the tokenizer files and ``training.json``; with ``draft_only``, ``draft/``
    and ``training.json``), so an interrupted or failed run leaves ``out_dir`` as it was. Everything else there
    stays: the card (rewrite it with :func:`lab.training.cards.write_card`) and ``medusa/`` / ``eagle/``, which after
    a new target no longer load (they record the target they were trained for: retrain them). Raises
    ``FileNotFoundError`` with ``draft_only`` when ``out_dir`` has no saved tokenizer, target or ``training.json``
    (before any work), ``OSError`` when its saved target has no safetensors file, and ``RuntimeError`` as
    :func:`lab.training.corpus.fetch_corpus` does when the corpus must be downloaded and cannot be.
    """
    recipe = recipe or PairRecipe()
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(recipe.seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir.parent / "train_pair.log"

    def log(msg):
        with open(log_path, "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {msg}\n")

    if draft_only:
        missing = [name for name in ("tokenizer.json", "target", "training.json") if not (out_dir / name).exists()]
        if missing:
            raise FileNotFoundError(f"draft_only re-distils the draft of the pair saved in out_dir, but {out_dir} "
                                    f"has no {', '.join(missing)}; train the whole pair first (draft_only=False, "
                                    "`python -m lab train pair`)")
    staging = out_dir.resolve().with_name(out_dir.resolve().name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)  # what a killed run left
    staging.mkdir()
    try:
        val_ids = _train_pair_into(staging, out_dir, recipe, draft_only, log)
        _move_into(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    cache_dir().mkdir(parents=True, exist_ok=True)
    torch.save(val_ids, cache_dir() / "val_ids.pt")
    stale = [name for name in ("medusa", "eagle") if not draft_only and (out_dir / name).is_dir()]
    if stale:
        log(f"{' and '.join(stale)} in {out_dir} were trained for the previous target and no longer load: "
            f"retrain them ({'; '.join(f'python -m lab train {name}' for name in stale)})")
    log("done training; run `python -m lab train card` to measure and write the model card")
    return out_dir


def _move_into(staging: Path, out_dir: Path) -> None:
    """Move every entry of ``staging`` into ``out_dir`` (same file system), replacing those of the same name; a
    replaced folder goes whole (renamed aside first, then deleted). ``training.json`` moves last."""
    entries = sorted(staging.iterdir(), key=lambda p: p.name == "training.json")
    replaced = staging / ".replaced"
    replaced.mkdir()
    for new in entries:
        dest = out_dir / new.name
        if dest.is_dir() or (dest.exists() and new.is_dir()):  # rename cannot replace a folder with files in it
            os.replace(dest, replaced / new.name)
        os.replace(new, dest)


def _train_pair_into(staging: Path, out_dir: Path, recipe: PairRecipe, draft_only: bool, log) -> torch.Tensor:
    """:func:`train_pair`'s training: writes the new files into ``staging`` (with ``draft_only``, reads the saved
    tokenizer, target and ``training.json`` from ``out_dir``). Returns the held-out token ids."""
    from transformers import LlamaForCausalLM

    works = fetch_corpus()
    train_txt, val_txt = split_corpus(works)
    log(f"corpus: {len(works)} works, {sum(map(len, train_txt))} train chars, {sum(map(len, val_txt))} val chars")
    if draft_only:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(out_dir)
    else:
        tokenizer = train_tokenizer(train_txt, recipe.vocab_size)
    eos_id = tokenizer.eos_token_id
    train_ids, val_ids = encode_texts(tokenizer, train_txt), encode_texts(tokenizer, val_txt)
    val_chars = sum(len(t) for t in val_txt)
    log(f"tokens: train {len(train_ids)}, val {len(val_ids)}; {val_chars / len(val_ids):.3f} chars/token on val")
    gen = torch.Generator().manual_seed(recipe.seed)
    batches = Batches(train_ids, recipe.seq_len, recipe.copy_frac, gen)

    def evaluate(model):
        return validation_loss(model, val_ids, recipe.seq_len, max_windows=48)

    if draft_only:
        previous = json.loads((out_dir / "training.json").read_text())
        target = load_checkpoint(out_dir / "target").eval()
        t_hist, target_minutes = previous["target_history"], previous["target_minutes"]
        for _ in range(recipe.target_steps * recipe.target_batch):  # replay the target stage's data draws
            batches.next(1)
    else:
        t0 = time.time()
        target = LlamaForCausalLM(recipe.target.config(recipe.vocab_size, eos_id, recipe.max_positions))
        t_hist = train_model(target, batches, recipe.target_steps, recipe.target_batch, recipe.target_lr,
                             recipe.warmup, "target", log=log, evaluate=evaluate)
        target_minutes = (time.time() - t0) / 60
        target.eval()
        save_model(target, tokenizer, staging / "target")
        tokenizer.save_pretrained(staging)
        log(f"target staged after {target_minutes:.1f} min")

    t0 = time.time()
    torch.manual_seed(recipe.seed + 1)
    draft = LlamaForCausalLM(recipe.draft.config(recipe.vocab_size, eos_id, recipe.max_positions))
    d_hist = train_model(draft, batches, recipe.draft_steps, recipe.draft_batch, recipe.draft_lr, recipe.warmup,
                         "draft (distilled)", teacher=target, log=log, evaluate=evaluate)
    draft_minutes = (time.time() - t0) / 60
    draft.eval()
    save_model(draft, tokenizer, staging / "draft")
    log(f"draft staged after {draft_minutes:.1f} min")

    info = {"recipe": asdict(recipe), "corpus": {"spec": CORPUS_SPEC, "works": len(works),
            "train_tokens": len(train_ids), "val_tokens": len(val_ids), "val_chars": val_chars},
            "target_minutes": round(target_minutes, 1), "draft_minutes": round(draft_minutes, 1),
            "target_history": t_hist, "draft_history": d_hist, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "bf16_autocast": bf16_autocast()}
    (staging / "training.json").write_text(json.dumps(info, indent=1))
    return val_ids
