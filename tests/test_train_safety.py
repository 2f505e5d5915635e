"""Training never mixes files made for different tokenizers or targets: the corpus-ids cache is keyed on the
tokenizer, ``train_pair`` moves its files into place only when it finishes, and Medusa heads and EAGLE drafts refuse
a target other than the one they were trained for. Tiny recipes, a made-up corpus and tmp folders only: nothing is
downloaded and ``lab/assets`` is only read."""
import copy
import dataclasses
import json
import random
from pathlib import Path

import pytest
import torch

from lab import train


def _works(count: int = 3, lines: int = 200) -> list[tuple[str, str]]:
    """A made-up corpus in fetch_corpus's form: ``count`` works of ``lines`` lines of words."""
    rng = random.Random(0)
    words = "thou art the king and I am not so sweet a rose by any other name shall smell".split()
    return [(f"work{i}", "\n".join(" ".join(rng.choice(words) for _ in range(8)) for _ in range(lines)) + "\n")
            for i in range(count)]


WORKS = _works()


@pytest.fixture
def no_download(tmp_path, monkeypatch):
    """The made-up corpus instead of the real one, and a cache in tmp; returns the list fetch_corpus appends to."""
    calls = []
    (tmp_path / "cache").mkdir()
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(train, "fetch_corpus", lambda: calls.append(1) or WORKS)
    return calls


# --- 1. corpus_ids: one cache file per tokenizer ---------------------------------------------------------------------
def test_corpus_ids_cache_is_keyed_on_the_tokenizer(tmp_path, no_download):
    from transformers import AutoTokenizer

    texts, _ = train.split_corpus(WORKS)
    a, b = tmp_path / "a", tmp_path / "b"
    train.train_tokenizer(texts, 280).save_pretrained(a)
    train.train_tokenizer(texts, 400).save_pretrained(b)
    cache = tmp_path / "cache"
    torch.save({"train": torch.zeros(5, dtype=torch.int16), "val": torch.zeros(5, dtype=torch.int16)},
               cache / "corpus_ids.pt")  # the old, unkeyed cache file: never read

    first = train.corpus_ids(a)
    assert len(no_download) == 1
    second = train.corpus_ids(b)
    assert len(no_download) == 2  # b's tokenizer encoded the corpus itself
    assert not torch.equal(first[0], second[0]) and len(first[0]) != 5
    tok_b = AutoTokenizer.from_pretrained(b)
    want = [t for text in train.split_corpus(WORKS)[1] for t in tok_b(text)["input_ids"] + [tok_b.eos_token_id]]
    assert second[1].tolist() == want  # b's ids, not a's
    assert sorted(p.name for p in cache.glob("corpus_ids_*.pt")) == sorted(
        f"corpus_ids_{train.tokenizer_key(d)}.pt" for d in (a, b))
    assert train.tokenizer_key(a) != train.tokenizer_key(b)

    again = train.corpus_ids(a)  # the same tokenizer: read from the cache
    assert len(no_download) == 2 and torch.equal(again[0], first[0]) and torch.equal(again[1], first[1])
    # retraining the tokenizer in place (what `python -m lab train pair` does) moves a to another cache file
    train.train_tokenizer(texts, 400).save_pretrained(a)
    assert torch.equal(train.corpus_ids(a)[0], second[0])
    with pytest.raises(FileNotFoundError, match="pair_dir .* holds no tokenizer files"):
        train.corpus_ids(tmp_path / "empty")


# --- 2. train_pair: finished files move in at the end ------------------------------------------------------------
TINY = train.PairRecipe(seed=5, vocab_size=300, seq_len=16, max_positions=32, target=train.ModelShape(16, 1, 2, 32),
                        draft=train.ModelShape(16, 1, 2, 32), target_steps=2, target_batch=2, draft_steps=2,
                        draft_batch=2, warmup=1)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def saved_pair(tmp_path, no_download):
    """A tiny pair trained into tmp/pair, plus files train_pair does not write (Medusa, EAGLE, a card)."""
    out = tmp_path / "pair"
    assert train.train_pair(out, TINY) == out
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
    assert AutoTokenizer.from_pretrained(saved_pair).eos_token == train.EOS
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []

    before = _snapshot(saved_pair)
    train.train_pair(saved_pair, dataclasses.replace(TINY, seed=6))  # a finished retrain replaces the pair only
    after = _snapshot(saved_pair)
    assert after["target/model.safetensors"] != before["target/model.safetensors"]
    assert after["draft/model.safetensors"] != before["draft/model.safetensors"]
    kept = ("medusa/config.json", "eagle/config.json", "README.md")
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}
    assert set(after) == set(before)  # nothing left over from the replaced folders

    before = after
    train.train_pair(saved_pair, dataclasses.replace(TINY, seed=7), draft_only=True)
    after = _snapshot(saved_pair)
    assert after["draft/model.safetensors"] != before["draft/model.safetensors"]
    assert {k: v for k, v in after.items() if not k.startswith("draft/") and k != "training.json"} == \
        {k: v for k, v in before.items() if not k.startswith("draft/") and k != "training.json"}


@pytest.mark.parametrize("draft_only, stage", [(False, "target"), (False, "draft"), (True, "draft")])
def test_an_interrupted_train_pair_leaves_the_saved_pair_as_it_was(saved_pair, tmp_path, monkeypatch, draft_only,
                                                                   stage):
    before = _snapshot(saved_pair)
    real_save = train._save

    def save_then_interrupt(model, tokenizer, path):
        real_save(model, tokenizer, path)
        if Path(path).name == stage:  # Ctrl-C just after this model's files were written
            raise KeyboardInterrupt

    monkeypatch.setattr(train, "_save", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        train.train_pair(saved_pair, dataclasses.replace(TINY, seed=8), draft_only=draft_only)
    assert _snapshot(saved_pair) == before  # byte for byte
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []


def test_train_pair_draft_only_needs_a_saved_pair(tmp_path, no_download):
    with pytest.raises(FileNotFoundError, match="draft_only .* has no tokenizer.json, target, training.json"):
        train.train_pair(tmp_path / "empty", TINY, draft_only=True)
    assert no_download == []  # refused before fetching the corpus


# --- 3. Medusa heads and EAGLE drafts know their target ------------------------------------------------------------
@pytest.fixture(scope="module")
def pair():
    from lab.models import load_pair

    return load_pair("shakespeare", device="cpu")


@pytest.fixture(scope="module")
def other(pair):
    """The bundled pair with a re-trained target (here: one weight changed)."""
    target = copy.deepcopy(pair.target)
    with torch.no_grad():
        target.model.norm.weight[0] += 1.0
    return dataclasses.replace(pair, target=target)


def test_target_weights_key_names_the_weights_not_their_dtype(pair, other):
    key = train.target_weights_key(pair.target)
    assert len(key) == 12 and train.target_weights_key(other.target) != key
    for dtype in (torch.float16, torch.bfloat16):
        assert train.target_weights_key(copy.deepcopy(pair.target).to(dtype)) == key
    assert train.weights_key(pair.target) != train.weights_key(pair.target, dtype=torch.bfloat16)  # caches: as is
    # remembered per target, but not past an in-place change
    target = copy.deepcopy(pair.target)
    assert train.target_weights_key(target) == key
    with torch.no_grad():
        target.model.norm.weight[0] += 1.0
    assert train.target_weights_key(target) == train.target_weights_key(other.target)
    target.load_state_dict(pair.target.state_dict())
    assert train.target_weights_key(target) == key


def test_committed_medusa_and_eagle_record_the_bundled_target(pair):
    from lab.drafters import EagleDrafter, MedusaDrafter
    from lab.drafters.eagle import EAGLE_DIR
    from lab.drafters.medusa import MEDUSA_DIR

    key = train.target_weights_key(pair.target)
    for folder in (MEDUSA_DIR, EAGLE_DIR):
        assert json.loads((folder / "config.json").read_text())[train.TARGET_KEY] == key, folder
    assert MedusaDrafter.from_pretrained(pair).heads.num_heads == 3
    assert EagleDrafter.from_pretrained(pair).model.config["feature_size"] == 384


def test_medusa_refuses_heads_of_another_target(pair, other, tmp_path):
    from lab.drafters import MedusaDrafter
    from lab.drafters.medusa import MEDUSA_DIR, MedusaHeads

    message = r"medusa holds Medusa heads trained for another target; retrain with `python -m lab train medusa`"
    with pytest.raises(ValueError, match=message):
        MedusaDrafter.from_pretrained(other)
    with pytest.raises(ValueError, match="trained for another target"):
        MedusaHeads.load(MEDUSA_DIR, target=other.target)
    # heads saved for a target load for it and not for another
    MedusaHeads.from_target(other.target).save(tmp_path / "medusa", target=other.target)
    assert MedusaHeads.load(tmp_path / "medusa", target=other.target).num_heads == 3
    assert MedusaDrafter.from_pretrained(other, directory=tmp_path / "medusa").heads.num_heads == 3
    with pytest.raises(ValueError, match=str(tmp_path / "medusa")):
        MedusaDrafter.from_pretrained(pair, directory=tmp_path / "medusa")
    # a config without the record (saved without a target, or made before it existed) loads unchecked
    MedusaHeads.from_target(other.target).save(tmp_path / "plain")
    assert train.TARGET_KEY not in json.loads((tmp_path / "plain" / "config.json").read_text())
    assert MedusaDrafter.from_pretrained(pair, directory=tmp_path / "plain").heads.num_heads == 3


def test_eagle_refuses_a_draft_of_another_target(pair, other, tmp_path):
    from lab.drafters import EagleDrafter
    from lab.drafters.eagle import EAGLE_DIR, EagleDraftModel

    message = r"eagle holds an EAGLE draft trained for another target; retrain with `python -m lab train eagle`"
    with pytest.raises(ValueError, match=message):
        EagleDrafter.from_pretrained(other)
    with pytest.raises(ValueError, match="trained for another target"):
        EagleDraftModel.from_pretrained(other.target, EAGLE_DIR)
    small = {"width": 32, "heads": 2, "kv_heads": 2, "intermediate": 48}
    EagleDraftModel(other.target, small).save_pretrained(tmp_path / "eagle")
    config = json.loads((tmp_path / "eagle" / "config.json").read_text())
    assert config[train.TARGET_KEY] == train.target_weights_key(other.target)
    assert EagleDraftModel.from_pretrained(other.target, tmp_path / "eagle").config["width"] == 32
    with pytest.raises(ValueError, match=str(tmp_path / "eagle")):
        EagleDraftModel.from_pretrained(pair.target, tmp_path / "eagle")
    del config[train.TARGET_KEY]  # a config from before the record: loads unchecked
    (tmp_path / "eagle" / "config.json").write_text(json.dumps(config))
    assert EagleDraftModel.from_pretrained(pair.target, tmp_path / "eagle").config["width"] == 32


def _fake_features(target, sequences, *args, seq_len=12, **kwargs):
    """Stands in for target_features / target_generations: random windows in their format, nothing computed."""
    gen = torch.Generator().manual_seed(sequences)
    return {"ids": torch.randint(0, 2048, (sequences, 12), generator=gen),
            "hidden": torch.randn(sequences, 12, target.config.hidden_size, generator=gen).half()}


def test_train_medusa_and_train_eagle_record_the_target(pair, other, tmp_path, monkeypatch):
    import lab.models
    from lab.drafters.eagle import EagleDraftModel
    from lab.drafters.medusa import MedusaHeads

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pair)
    monkeypatch.setattr(train, "target_features", _fake_features)
    monkeypatch.setattr(train, "target_generations", _fake_features)
    monkeypatch.setattr(train, "write_eagle_card", lambda folder: Path(folder) / "README.md")  # no measuring
    key = train.target_weights_key(pair.target)

    train.train_medusa(steps=1, out_dir=tmp_path / "medusa", num_heads=2, sequences=4, prompt_len=4, seq_len=12,
                       batch=2, warmup=1, val_sequences=2)
    assert json.loads((tmp_path / "medusa" / "config.json").read_text())[train.TARGET_KEY] == key
    with pytest.raises(ValueError, match="trained for another target"):
        MedusaHeads.load(tmp_path / "medusa", target=other.target)

    train.train_eagle(steps=1, out_dir=tmp_path / "eagle", sequences=4, seq_len=12, batch=2, chain_steps=0,
                      config={"width": 32, "heads": 2, "kv_heads": 2, "intermediate": 48})
    assert json.loads((tmp_path / "eagle" / "config.json").read_text())[train.TARGET_KEY] == key
    with pytest.raises(ValueError, match="trained for another target"):
        EagleDraftModel.from_pretrained(other.target, tmp_path / "eagle")


# --- target_generations leaves every global generator as it found it ----------------------------------------------
def test_target_generations_leaves_the_callers_rng_alone(tmp_path, monkeypatch):
    """It seeds its samples with manual_seed, which reseeds the CPU and every CUDA generator: all must be restored
    (the CUDA half runs where there is a GPU)."""
    from lab.models import load_pair

    pair = load_pair("shakespeare", device="cuda" if torch.cuda.is_available() else "cpu")
    corpus = torch.arange(3, 403, dtype=torch.int16) * 5 % 2000      # a fake corpus: no download, no cache
    monkeypatch.setattr(train, "corpus_ids", lambda pair_dir=None: (corpus, corpus[:100]))
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    torch.manual_seed(1234)
    cpu_before = torch.get_rng_state()
    cuda_before = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    train.target_generations(pair.target, 65, prompt_len=4, seq_len=6, seed=3)   # the second batch samples
    assert torch.equal(torch.get_rng_state(), cpu_before)
    if torch.cuda.is_available():
        assert all(torch.equal(a, b) for a, b in zip(torch.cuda.get_rng_state_all(), cuda_before))
