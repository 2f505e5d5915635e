"""The real pair's EAGLE-3 recipe (lab.training.chat_eagle3) on a tiny random Llama target and made-up chat data:
the cached layers are the target's, the per-step held-out agreement matches a hand count, a short run lowers the
loss and saves a draft that loads and keeps greedy parity, and a killed run resumes to the same weights (the CLI's
--out: tests/lab/cli/test_train.py)."""
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

import lab.training.chat_eagle as chat_eagle
import lab.training.chat_eagle3 as module
from lab.decode import generate
from lab.drafters.eagle3 import Eagle3Drafter, Eagle3DraftModel
from lab.models import layer_states
from tests.helpers import kill_after_first_checkpoint, tiny_llama

LAYERS = (1, 2, 4)  # default_layers(4)
SMALL = dict(width=32, heads=2, kv_heads=1, intermediate=48)
QUIET = dict(log=lambda *_: None)


@pytest.fixture(scope="module")
def pair():
    """A 4-layer random Llama (width 32, 64 ids) as a stand-in pair; id 2 ends an answer."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is fastest, and leaves the other core alone
    yield SimpleNamespace(name="tiny-chat", target=tiny_llama(7, layers=4).cpu(), eos_token_id=2)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def sequences():
    """Sixteen chat-data sequences: a prompt of 5-9 random ids, an answer of 6-11, kinds chat and code."""
    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(16):
        prompt, answer = 5 + i % 5, 6 + i % 6
        ids = torch.randint(3, 64, (prompt + answer,), generator=gen)
        out.append({"ids": ids, "answer_start": prompt, "kind": ("chat", "code")[i % 2],
                    "topk_ids": torch.zeros(answer, 8, dtype=torch.long)})
    return out


@pytest.fixture
def chat_data(sequences, tmp_path, monkeypatch):
    """The made-up sequences as the chat data, and the cache in tmp."""
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(chat_eagle, "load_chat_data", lambda folder: list(sequences))
    return sequences


def recipe(**changes):
    small = dict(draft_vocab=40, steps=30, batch=4, lr=1e-2, warmup=2, checkpoint_every=10)
    return replace(module.ChatEagle3Recipe(**SMALL), **{**small, **changes})


def test_layer_features_are_the_targets_and_cached_in_parts(pair, chat_data, tmp_path, monkeypatch):
    seqs = chat_data[:5]
    got = chat_eagle.chat_features(pair.target, seqs, max_len=8, layers=LAYERS, **QUIET)
    for s, f in zip(seqs, got):
        ids = s["ids"][-8:]
        with torch.no_grad():
            out = pair.target.model(input_ids=ids[None], output_hidden_states=True)
        assert f.dtype == torch.bfloat16 and f.shape == (len(ids), 3 * 32)
        torch.testing.assert_close(f.float(), layer_states(out.hidden_states, LAYERS)[0].bfloat16().float(),
                                   atol=2e-2, rtol=1e-2)
    (folder,) = (tmp_path / "cache" / "chat-data").glob("features-*-layers-1-2-4")
    assert [p.name for p in folder.iterdir()] == ["part-00000.safetensors"]
    monkeypatch.setattr(chat_eagle, "_target_states", lambda *a: pytest.fail("the cached part was recomputed"))
    again = chat_eagle.chat_features(pair.target, seqs, max_len=8, layers=LAYERS, **QUIET)
    assert all(torch.equal(a, b) for a, b in zip(got, again))
    with pytest.raises(ValueError, match="layers must be indices"):
        chat_eagle.chat_features(pair.target, seqs, layers=(1, 9), **QUIET)


def test_agreement_per_step_matches_a_hand_count(pair, sequences):
    """A draft whose head always says one token agrees where the target's argmax is that token: on answer rows,
    from row k - 1 on at step k, per kind."""
    feats = []
    for s in sequences:
        with torch.no_grad():
            out = pair.target.model(input_ids=s["ids"][None], output_hidden_states=True)
        feats.append(layer_states(out.hidden_states, LAYERS)[0].bfloat16())
    head = pair.target.get_output_embeddings()
    theirs = [head(f[1:, 2 * 32:].float()).argmax(-1) for f in feats]  # theirs[j]: the target's x_{j+2}
    token = int(torch.cat(theirs).mode().values)
    model = Eagle3DraftModel(pair.target, SMALL, draft_vocab=[token, (token + 1) % 64], hidden_layers=LAYERS)
    with torch.no_grad():
        model.head.weight.zero_()  # equal logits: argmax takes the first, `token`
    got = module.chat_eagle3_agreement(model, sequences, feats, max_len=384, pad_id=2, depth=3)
    for k in (1, 2, 3):
        want = {}
        for s, t in zip(sequences, theirs):
            rows = range(max(k - 1, s["answer_start"] - 2), len(s["ids"]) - 2)  # x_{j+2} in the answer
            counts = want.setdefault(s["kind"], [0, 0])
            counts[0] += sum(int(t[j]) == token for j in rows)
            counts[1] += len(rows)
        total = [sum(c[0] for c in want.values()), sum(c[1] for c in want.values())]
        assert 0 < total[0] < total[1]
        assert got[f"step_{k}"] == {**{kind: round(h / n, 4) for kind, (h, n) in sorted(want.items())},
                                    "all": round(total[0] / total[1], 4)}


def test_a_short_run_learns_saves_a_draft_that_drafts_exactly_and_a_killed_run_resumes(pair, chat_data, tmp_path,
                                                                                       monkeypatch):
    out = module.train_chat_eagle3(pair, recipe(), out_dir=tmp_path / "straight", **QUIET)
    info = json.loads((out / "training.json").read_text())
    assert info["recipe"]["hidden_layers"] == list(LAYERS) and info["recipe"]["depth"] == 3
    assert {k: info["data"][k] for k in ("sequences", "train_sequences", "held_out_sequences")} == {
        "sequences": 16, "train_sequences": 8, "held_out_sequences": 8}  # at least 8 held out, as chat_eagle does
    first, last = info["history"][0], info["history"][-1]
    assert first["step"] == 0 and last["step"] == 29 and len(first["per_pass"]) == 3
    assert last["loss"] < 0.9 * first["loss"], (first, last)
    assert set(info["held_out_agreement"]) == {"step_1", "step_2", "step_3"}
    assert set(info["held_out_agreement"]["step_1"]) == {"chat", "code", "all"}
    assert "skipped" in info["eagle_on_the_same_held_out"]  # the committed EAGLE draft is for another target
    assert 0 < info["draft_vocab_coverage"] <= 1 and info["trainable_parameters"] > 0
    assert {p.name for p in out.iterdir()} == {"config.json", "model.safetensors", "training.json"}
    checkpoint = tmp_path / "cache" / "chat-data" / "tiny-chat" / "eagle3-checkpoint"
    assert not checkpoint.exists()  # a finished run deletes it

    drafter = Eagle3Drafter.from_pretrained(pair, n_draft=3, directory=out)
    assert drafter.hidden_layers == LAYERS and drafter.model.config["draft_vocab_size"] == 40
    for prompt in ([5, 9, 13, 17], chat_data[0]["ids"][:7].tolist()):
        want = generate(pair.target, prompt, max_new_tokens=12).tokens
        assert generate(pair.target, prompt, drafter=drafter, max_new_tokens=12).tokens == want

    kill_after_first_checkpoint(monkeypatch, module, lambda: module.train_chat_eagle3(  # before step 10
        pair, recipe(), out_dir=tmp_path / "resumed", **QUIET))
    assert checkpoint.exists()
    said = []
    resumed = module.train_chat_eagle3(pair, recipe(), out_dir=tmp_path / "resumed", log=said.append)
    assert any("resuming at step 10" in line for line in said)
    a = Eagle3DraftModel.from_pretrained(pair.target, out).state_dict()
    b = Eagle3DraftModel.from_pretrained(pair.target, resumed).state_dict()
    for name in a:
        if not name.startswith("layer.embed_tokens"):  # unused, not saved: a fresh random table each load
            torch.testing.assert_close(a[name], b[name], msg=name)


def test_a_continued_run_starts_from_the_saved_draft_and_keeps_its_record(pair, chat_data, tmp_path):
    """recipe.init: the run starts from the saved weights (at learning rate 0 it saves them again), keeps their d2t
    even when the recipe would count another vocabulary, and stores the first run's training.json."""
    first = module.train_chat_eagle3(pair, recipe(), out_dir=tmp_path / "first", **QUIET)
    before = json.loads((first / "training.json").read_text())
    assert before["continued_from"] is None
    # at learning rate 0 a continued run is the saved draft again: same weights, same held-out agreement
    still = module.train_chat_eagle3(pair, recipe(init=str(first), steps=6, lr=0.0, draft_vocab=24),
                                     out_dir=tmp_path / "still", **QUIET)
    info = json.loads((still / "training.json").read_text())
    assert info["continued_from"] == before and info["recipe"]["init"] == str(first)
    assert info["held_out_agreement"] == before["held_out_agreement"]
    saved = Eagle3DraftModel.from_pretrained(pair.target, first).state_dict()
    kept = Eagle3DraftModel.from_pretrained(pair.target, still).state_dict()
    for name in saved:
        if not name.startswith("layer.embed_tokens"):  # unused, not saved: a fresh random table each load
            assert torch.equal(kept[name], saved[name]), name  # the d2t too: 40 ids, not the recipe's 24
    moved = module.train_chat_eagle3(pair, recipe(init=str(first), steps=6), out_dir=tmp_path / "moved", **QUIET)
    assert not torch.equal(Eagle3DraftModel.from_pretrained(pair.target, moved).fc.weight, saved["fc.weight"])
    with pytest.raises(ValueError, match="recipe.init: the draft in .* reads layers"):
        module.train_chat_eagle3(pair, recipe(init=str(first), hidden_layers=[1, 2, 3]), out_dir=tmp_path / "x",
                                 **QUIET)


@pytest.mark.parametrize("bad,message", [({"steps": 0}, "recipe.steps"), ({"depth": 0}, "recipe.depth"),
                                         ({"held_out_share": 1.0}, "recipe.held_out_share")])
def test_bad_settings_are_refused_before_any_work(pair, bad, message, monkeypatch):
    monkeypatch.setattr(module, "feature_data", lambda *a, **k: pytest.fail("work started before the checks"))
    with pytest.raises(ValueError, match=message):
        module.train_chat_eagle3(pair, replace(module.ChatEagle3Recipe(), **bad), **QUIET)


def test_the_default_recipe_is_the_eagle_drafts_data_and_the_paper_s_layers():
    from lab.drafters.eagle3 import default_layers
    from lab.training.chat_eagle import ChatEagleRecipe

    mine, eagle = module.ChatEagle3Recipe(), ChatEagleRecipe()
    for name in ("seed", "width", "draft_vocab", "batch", "max_len", "lr", "warmup", "held_out_share"):
        assert getattr(mine, name) == getattr(eagle, name), name
    assert mine.steps == 2 * eagle.steps  # at EAGLE's 1,000 steps the EAGLE-3 draft still trailed it (the card)
    assert mine.depth == 3 and mine.hidden_layers is None and default_layers(30) == (2, 15, 30)
    assert (mine.head, mine.intermediate) == ("target", 1024)  # the size budget: the target's head, a smaller MLP


@pytest.fixture(scope="module")
def shakespeare():
    """The Shakespeare pair (float32): it has committed EAGLE and EAGLE-3 drafts, so the card can time both fast."""
    from lab.models import load_pair
    from tests.helpers import DEVICE

    return load_pair("shakespeare", device=DEVICE)


def test_the_card_times_the_saved_draft_against_the_eagle_draft(shakespeare, tmp_path):
    """write_chat_eagle3_card measures the draft in its folder against the pair's EAGLE draft (greedy, interleaved),
    writes measurements.json, and its README's table and sentences are built from those numbers and training.json."""
    import shutil

    from lab.drafters.eagle3 import EAGLE3_DIRS

    for name in ("config.json", "model.safetensors"):
        shutil.copy(EAGLE3_DIRS["shakespeare"] / name, tmp_path / name)
    recipe = dict(json.loads(json.dumps(vars(module.ChatEagle3Recipe()))), hidden_layers=[2, 3, 6])
    training = {"recipe": recipe, "data": {"sequences": 40, "train_sequences": 38, "answer_tokens": 900,
                                           "held_out_sequences": 2},
                "trainable_parameters": 722560, "draft_vocab_coverage": 0.9, "minutes": 1.5, "threads": 1,
                "bf16_autocast": True,
                "held_out_agreement": {f"step_{k}": {"all": a} for k, a in zip((1, 2, 3), (0.512, 0.48, 0.45))},
                "eagle_on_the_same_held_out": {"agreement": {"all": 0.5}}}
    (tmp_path / "training.json").write_text(json.dumps(training))
    card = module.write_chat_eagle3_card(shakespeare, tmp_path, prompts=2, max_new_tokens=12, n_values=(2,))
    written = json.loads((tmp_path / "measurements.json").read_text())
    rows = {r["method"]: r for r in written["decoding"]["rows"]}
    assert list(rows) == ["autoregressive", "eagle N=2", "eagle3 N=2"]
    for name in ("eagle N=2", "eagle3 N=2"):
        row = rows[name]
        assert row["identical_outputs"] == 2 and 0 <= row["alpha"] <= 1 and row["cost_ratio"] > 0  # float32
        assert len(row["conditional_acceptance"]) == 2 and row["tokens_per_target_call"] >= 1
    assert written["weights_bytes"] == (tmp_path / "model.safetensors").stat().st_size
    text = card.read_text()
    assert f"| eagle3 N=2 | {rows['eagle3 N=2']['alpha']} |" in text
    assert f"N = 2: {rows['eagle3 N=2']['alpha'] - rows['eagle N=2']['alpha']:+.3f} (issue 23's goal" in text
    assert "step 1 / 2 / 3: 0.512 / 0.480 / 0.450" in text and "Step-1 difference: +0.012." in text
    assert "pass k weighing 0.8^k" in text and "`python -m lab train chat-eagle3 --threads 1`" in text
    assert "of 2: eagle N=2 2, eagle3 N=2 2." in text and "near-tie" not in text  # float32: no rounding caveat
    assert "coverage of the training answers: 90.0%." in text


def test_the_card_refuses_a_folder_without_a_draft(shakespeare, tmp_path):
    with pytest.raises(FileNotFoundError):
        module.measure_chat_eagle3(shakespeare, tmp_path, prompts=1, max_new_tokens=4)
    with pytest.raises(ValueError, match="prompts"):
        module.measure_chat_eagle3(shakespeare, tmp_path, prompts=0)


def test_the_card_names_both_runs_of_a_continued_draft():
    """The committed real-pair draft was continued: the card's training section gives the first run and the
    continuation, each with its own steps, learning rate, minutes and data, and names the --init folder."""
    from lab.drafters.eagle3 import EAGLE3_DIRS

    info = json.loads((EAGLE3_DIRS["smollm2-135m"] / "training.json").read_text())
    first, recipe = info["continued_from"], info["recipe"]
    text = "\n".join(module._training_lines(info, recipe))
    assert f"then `--init {recipe['init']}`" in text
    assert (f"- First run: {first['recipe']['steps']:,} steps of batch 8, AdamW lr {first['recipe']['lr']} with "
            f"{first['recipe']['warmup']} warm-up steps and cosine decay; {first['minutes']} minutes") in text
    assert (f"- Continued from that draft (`lab.training.chat_eagle.CONTINUATION`): {recipe['steps']:,} steps of batch "
            f"8, AdamW lr {recipe['lr']} with {recipe['warmup']} warm-up steps and cosine decay; {info['minutes']} "
            "minutes") in text
    assert f"{first['data']['train_sequences']:,} training sequences" in text
    assert f"{info['data']['train_sequences']:,} training sequences" in text
    single = "\n".join(module._training_lines(first, first["recipe"]))
    assert "--init" not in single and f"- {first['recipe']['steps']:,} steps of batch 8" in single
