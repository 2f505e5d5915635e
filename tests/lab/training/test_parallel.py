"""Training the parallel (PARD) draft (lab.training.parallel): the training layout shows every row what the drafter
shows it at inference, the loss falls on a tiny run whose saved draft the drafter loads, a killed run resumes to the
same weights, and bad recipes are refused before any work."""
import copy
import dataclasses
import json

import pytest
import torch

from lab.assets import TARGET_KEY, target_weights_key
from lab.drafters.parallel import ParallelDrafter, add_mask_token
from lab.models import forward, new_cache
from lab.prompts import held_out_prompts
from lab.training import parallel
from lab.training.parallel import ParallelRecipe, parallel_agreement, parallel_layout
from tests.helpers import tiny_llama


pytestmark = pytest.mark.usefixtures("one_thread")  # one CPU thread per module (tests/lab/conftest.py)


def test_layout_rows_see_what_the_drafter_feeds():
    """Every kept row of the layout (conditional drop on) gives the logits the drafter's block forward gives: the
    j-th mask after real token p - j, fed [t_0 .. t_{p-j}] + j masks."""
    model = add_mask_token(tiny_llama(1, layers=1), block_size=4)
    T = 16
    assert parallel_layout(T, 4)["copy"].bincount().tolist() == [16, 15, 14, 13]
    layout = parallel_layout(T, 4, keep=0.6, min_keep=0.2, generator=torch.Generator().manual_seed(0))
    copies, pos = layout["copy"], layout["position"]
    assert copies.bincount().tolist() == [16, 10, 6, 3]
    kept = set(zip(copies.tolist(), pos.tolist()))
    assert all((j - 1, p - 1) in kept for j, p in kept if j > 0)  # every kept mask has its whole block
    ids = torch.randint(0, 64, (1, T), generator=torch.Generator().manual_seed(1))
    inputs = torch.where(copies == 0, ids[:, pos], torch.full_like(ids[:, pos], 64))
    additive = torch.zeros(layout["allow"].shape).masked_fill_(~layout["allow"], torch.finfo(torch.float32).min)
    with torch.no_grad():
        out = model(input_ids=inputs, position_ids=pos[None], attention_mask=additive[None, None]).logits[0]
    for row, (j, p) in enumerate(zip(copies.tolist(), pos.tolist())):
        anchor = p - j
        feed = ids[0, :anchor + 1].tolist() + [64] * j
        torch.testing.assert_close(out[row], forward(model, feed, new_cache())[-1], atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="keep"):
        parallel_layout(T, 4, keep=1.5)
    with pytest.raises(ValueError, match="block_size"):
        parallel_layout(T, 0)


@pytest.fixture(scope="module")
def real_features(pair):
    """Stands in for target_features: held-out passages cut into 40-token windows and the Shakespeare target's own
    hidden states over them (a real teacher, nothing downloaded)."""
    ids = sum((pair.encode(text) for text in held_out_prompts()), [])
    windows = torch.tensor(ids[: len(ids) // 40 * 40]).view(-1, 40)[:8]
    with torch.no_grad():
        hidden = pair.target.model(input_ids=windows).last_hidden_state.half()

    def features(target, sequences, seq_len=256, split="train", **kwargs):
        part = slice(0, 6) if split == "train" else slice(6, 8)
        return {"ids": windows[part], "hidden": hidden[part]}

    return features


@pytest.fixture
def small_run(pair, real_features, tmp_path, monkeypatch):
    """``run(**kw)``: train_parallel on the real features with a tiny recipe, on a copy of the pair's target."""
    target = copy.deepcopy(pair.target)  # training freezes it in place: the session pair stays as it was
    mine = dataclasses.replace(pair, target=target)
    monkeypatch.setattr(parallel, "target_features", real_features)
    recipe = ParallelRecipe(block_size=3, steps=6, batch=3, seq_len=32, lr=3e-3, warmup=1, keep=1.0, sequences=6)

    def run(out="out", **kw):
        logs = []
        kw = {"recipe": recipe, "out_dir": tmp_path / out, "pair": mine, "checkpoint": tmp_path / "ck",
              "log": logs.append, **kw}
        return parallel.train_parallel(**kw), logs

    return run, mine


def test_the_loss_falls_and_the_drafter_loads_the_saved_draft(small_run):
    run, pair = small_run
    recipe = ParallelRecipe(block_size=3, steps=51, batch=3, seq_len=32, lr=3e-3, warmup=1, keep=0.8, sequences=6)
    out, _logs = run(recipe=recipe)
    info = json.loads((out / "training.json").read_text())
    first, last = info["history"][0], info["history"][-1]
    assert [e["step"] for e in info["history"]] == [0, 50]
    assert last["loss"] < 0.8 * first["loss"], (first, last)
    assert all(b < a for a, b in zip(first["per_position"][1:], last["per_position"][1:]))  # every mask offset
    config = json.loads((out / "config.json").read_text())
    assert config[TARGET_KEY] == target_weights_key(pair.target)
    assert (config["pard_mask_token_id"], config["pard_block_size"], config["vocab_size"]) == (2048, 3, 2049)
    drafter = ParallelDrafter.from_pretrained(pair, n_draft=3, directory=out)
    assert drafter.block_size == 3 and drafter.vocab_size == 2048
    val = parallel.target_features(pair.target, 2, split="val")
    assert info["held_out_agreement"] == {f"position_{i}": a for i, a in
                                          enumerate(parallel_agreement(drafter.model.float(), pair.target, val, 3), 1)}
    assert not (out.parent / "ck").exists()  # a finished run deletes its checkpoint


def test_agreement_at_position_one_is_the_drafters_first_draft(pair, real_features):
    """Position 1's held-out agreement (the batched layout) equals the share of prefixes after which the drafter's own
    first draft (its KV cache, then one block forward) is the target's argmax: the card's number is what drafting
    sees."""
    torch.manual_seed(0)
    model = add_mask_token(copy.deepcopy(pair.draft), block_size=2).eval()
    val = real_features(pair.target, 2, split="val")
    ids, hidden = val["ids"][:1], val["hidden"][:1]
    with torch.no_grad():
        theirs = pair.target.get_output_embeddings()(hidden.float())[0].argmax(-1)
    drafter = ParallelDrafter(model, 2)
    hits = []
    for p in range(ids.size(1)):
        drafter.reset(ids[0, :p + 1].tolist())
        hits.append(int(drafter.block_logits(1)[0].argmax()) == int(theirs[p]))
    got = parallel_agreement(model, pair.target, {"ids": ids, "hidden": hidden}, 2)
    assert got[0] == round(sum(hits) / len(hits), 4) and 0.0 <= got[1] <= 1.0


def test_a_killed_run_resumes_to_the_same_weights(small_run, monkeypatch):
    run, pair = small_run
    whole, _ = run(out="whole", checkpoint_every=2)
    real_save = parallel.save_training_state

    def save_then_die(*args, **kwargs):
        real_save(*args, **kwargs)
        raise KeyboardInterrupt("killed after the step-4 checkpoint")

    calls = []
    monkeypatch.setattr(parallel, "save_training_state",
                        lambda *a, **k: calls.append(a[4]) or (real_save(*a, **k) if len(calls) < 2 else
                                                               save_then_die(*a, **k)))
    with pytest.raises(KeyboardInterrupt):
        run(out="resumed", checkpoint_every=2)
    monkeypatch.setattr(parallel, "save_training_state", real_save)
    resumed, logs = run(out="resumed", checkpoint_every=2)
    assert any("resuming at step 4" in line for line in logs)
    a = ParallelDrafter.from_pretrained(pair, directory=whole).model.state_dict()
    b = ParallelDrafter.from_pretrained(pair, directory=resumed).model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    history = json.loads((resumed / "training.json").read_text())["history"]
    assert history == json.loads((whole / "training.json").read_text())["history"]


@pytest.mark.parametrize("bad,message", [({"steps": 0}, "recipe.steps"), ({"batch": 0}, "recipe.batch"),
                                         ({"block_size": 0}, "recipe.block_size"), ({"keep": 1.5}, "recipe.keep"),
                                         ({"first_weight": -0.1}, "recipe.first_weight")])
def test_bad_recipes_are_refused_before_any_work(bad, message, monkeypatch):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pytest.fail("loaded the pair"))
    with pytest.raises(ValueError, match=message):
        parallel.train_parallel(recipe=ParallelRecipe(**bad))
    with pytest.raises(ValueError, match="checkpoint_every"):
        parallel.train_parallel(checkpoint_every=0)


def test_held_out_texts_take_each_task_kind_in_turn(pair, smollm2_pair):
    """The card's and lesson 09's prompts: the Shakespeare pair's held-out passages; for the chat pair its held-out
    requests, one of each task kind in turn, then the second of each; held_out_requests encodes the same texts."""
    from lab.prompts import arena_prompts, encode_prompts, pair_tasks

    assert parallel.held_out_texts(pair, 3) == held_out_prompts()[:3]
    tasks = pair_tasks(smollm2_pair)
    texts = parallel.held_out_texts(smollm2_pair, len(tasks) + 1)
    assert texts == [arena_prompts(smollm2_pair, task)[0] for task in tasks] + [arena_prompts(smollm2_pair,
                                                                                              tasks[0])[1]]
    assert parallel.held_out_requests(smollm2_pair, 2) == encode_prompts(smollm2_pair, texts[:2])


def test_measurements_time_the_saved_draft_against_the_draft_model(pair, tmp_path):
    """write_parallel_measurements writes the card's measurements.json beside the weights: one draft step's ms for
    both drafters at each K, and a greedy decode whose outputs equal autoregressive decoding (float32); a pair loaded
    without its draft model is refused by name."""
    import shutil

    from lab.drafters.parallel import PARALLEL_DIRS

    folder = tmp_path / "parallel"
    shutil.copytree(PARALLEL_DIRS["shakespeare"], folder)
    (folder / "measurements.json").unlink()
    out = parallel.write_parallel_measurements(pair, folder, prompts=1, max_new_tokens=12, block_sizes=(2, 3))
    assert json.loads((folder / "measurements.json").read_text()) == out
    assert (out["dtype"], out["prompts"], out["max_new_tokens"]) == ("float32", 1, 12)
    assert set(out["draft_step_ms"]) == set(out["greedy_decoding"]) == {"2", "3"}
    for k in ("2", "3"):
        step = out["draft_step_ms"][k]
        assert step["parallel"] > 0 and step["autoregressive"] > 0
        # the ratio is of the unrounded medians, the ms are stored to 4 decimals: a last-digit tie may round apart
        assert abs(step["ratio"] - step["autoregressive"] / step["parallel"]) <= 0.005 + 1e-3
        for name in ("model", "parallel"):
            run = out["greedy_decoding"][k][name]
            assert run["same_as_autoregressive"] and 1 <= run["tokens_per_target_call"] <= int(k) + 1
            assert len(run["per_position_acceptance"]) == int(k)
    with pytest.raises(ValueError, match="without its draft model"):
        parallel.write_parallel_measurements(dataclasses.replace(pair, draft=None), folder)
