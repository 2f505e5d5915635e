"""lab.training.pair: train_pair moves its files into place only when it finishes, keeps what it does not write,
and reads a saved target from safetensors only. Tiny recipes, a made-up corpus and tmp folders only: nothing is
downloaded and ``lab/assets`` is only read."""
import dataclasses
import json
from pathlib import Path

import pytest
import torch

from lab.training import pair as recipe
from lab.training.tokenizer import EOS

TINY = recipe.PairRecipe(seed=5, vocab_size=300, seq_len=16, max_positions=32,
                         target=recipe.ModelShape(16, 1, 2, 32), draft=recipe.ModelShape(16, 1, 2, 32),
                         target_steps=2, target_batch=2, draft_steps=2, draft_batch=2, warmup=1)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def saved_pair(tmp_path, no_download):
    """A tiny pair trained into tmp/pair, plus files train_pair does not write (Medusa, EAGLE, a card)."""
    out = tmp_path / "pair"
    assert recipe.train_pair(out, TINY) == out
    for name in ("medusa", "eagle"):
        (out / name).mkdir()
        (out / name / "config.json").write_text(json.dumps({"made_by": name}))
    (out / "README.md").write_text("the card\n")
    return out


def test_train_pair_writes_the_pair_and_keeps_other_files(saved_pair, tmp_path):
    from transformers import AutoTokenizer, LlamaForCausalLM

    files = set(_snapshot(saved_pair))
    assert {"target/model.safetensors", "target/config.json", "draft/model.safetensors", "draft/config.json",
            "tokenizer.json", "training.json"} <= files
    assert LlamaForCausalLM.from_pretrained(saved_pair / "draft").config.hidden_size == 16
    assert AutoTokenizer.from_pretrained(saved_pair).eos_token == EOS
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []

    before = _snapshot(saved_pair)
    recipe.train_pair(saved_pair, dataclasses.replace(TINY, seed=6))  # a finished retrain replaces the pair only
    after = _snapshot(saved_pair)
    assert after["target/model.safetensors"] != before["target/model.safetensors"]
    assert after["draft/model.safetensors"] != before["draft/model.safetensors"]
    kept = ("medusa/config.json", "eagle/config.json", "README.md")
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}
    assert set(after) == set(before)  # nothing left over from the replaced folders

    before = after
    recipe.train_pair(saved_pair, dataclasses.replace(TINY, seed=7), draft_only=True)
    after = _snapshot(saved_pair)
    assert after["draft/model.safetensors"] != before["draft/model.safetensors"]
    assert {k: v for k, v in after.items() if not k.startswith("draft/") and k != "training.json"} == \
        {k: v for k, v in before.items() if not k.startswith("draft/") and k != "training.json"}


@pytest.mark.parametrize("draft_only, stage", [(False, "target"), (False, "draft"), (True, "draft")])
def test_an_interrupted_train_pair_leaves_the_saved_pair_as_it_was(saved_pair, tmp_path, monkeypatch, draft_only,
                                                                   stage):
    before = _snapshot(saved_pair)
    real_save = recipe.save_model

    def save_then_interrupt(model, tokenizer, path):
        real_save(model, tokenizer, path)
        if Path(path).name == stage:  # Ctrl-C just after this model's files were written
            raise KeyboardInterrupt

    monkeypatch.setattr(recipe, "save_model", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        recipe.train_pair(saved_pair, dataclasses.replace(TINY, seed=8), draft_only=draft_only)
    assert _snapshot(saved_pair) == before  # byte for byte
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []


def test_train_pair_draft_only_needs_a_saved_pair(tmp_path, no_download):
    with pytest.raises(FileNotFoundError, match="draft_only .* has no tokenizer.json, target, training.json"):
        recipe.train_pair(tmp_path / "empty", TINY, draft_only=True)
    assert no_download == []  # refused before fetching the corpus


def test_draft_only_never_reads_a_pickled_target(saved_pair):
    """With draft_only the saved target is read with use_safetensors=True: a target folder holding only a pickled
    ``pytorch_model.bin`` (which transformers would otherwise load) is refused, and the pair stays as it was."""
    from safetensors.torch import load_file

    target = saved_pair / "target"
    torch.save(load_file(target / "model.safetensors"), target / "pytorch_model.bin")
    (target / "model.safetensors").unlink()
    before = _snapshot(saved_pair)
    with pytest.raises(OSError, match="model.safetensors"):
        recipe.train_pair(saved_pair, TINY, draft_only=True)
    assert _snapshot(saved_pair) == before
