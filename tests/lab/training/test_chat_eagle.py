"""The real pair's EAGLE draft in training (lab.training.chat_eagle): which rows are scored, the cached features,
the agreement it reports, and a short run that saves a draft the drafter loads."""
import json
from dataclasses import replace

import pytest
import torch

from lab.training.chat_eagle import ChatEagleRecipe, chat_eagle_agreement, chat_features, eagle_batch
from tests.lab.training.fakes import answered_sequences, chat_sequence


def test_rows_are_scored_when_the_token_they_would_draft_is_an_answer_token():
    sequences = [chat_sequence(6, 3), chat_sequence(4, 1)]
    features = [torch.full((6, 2), 1.0), torch.full((4, 2), 2.0)]
    hidden, ids, weights = eagle_batch(sequences, features, max_len=384, pad_id=0)
    assert hidden.shape == (2, 6, 2) and ids.shape == (2, 6) and weights.shape == (2, 5)
    # row j predicts f_{j+1} and drafts x_{j+2}: sequence 0 answers from position 3, so rows 1..3 (x_3..x_5)
    assert weights[0].tolist() == [0, 1, 1, 1, 0]
    assert weights[1].tolist() == [1, 1, 0, 0, 0]      # x_2, x_3; then padding
    assert ids[1].tolist() == [10, 11, 12, 13, 0, 0] and hidden[1, 4:].abs().sum() == 0


def test_long_sequences_keep_their_end():
    hidden, ids, weights = eagle_batch([chat_sequence(10, 7)], [torch.arange(5.0)[:, None]], max_len=5, pad_id=0)
    assert ids[0].tolist() == [15, 16, 17, 18, 19] and hidden[0, :, 0].tolist() == [0, 1, 2, 3, 4]
    assert weights[0].tolist() == [1, 1, 1, 0]          # the answer starts at 7 - 5 = 2 in the cut
    with pytest.raises(ValueError, match="features\\[0\\] has 10 rows"):
        eagle_batch([chat_sequence(10, 7)], [torch.zeros(10, 1)], max_len=5, pad_id=0)


def test_features_are_the_targets_and_cached(smollm2_pair, tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    sequences = [{"ids": torch.tensor(smollm2_pair.encode_chat(text)), "answer_start": 3}
                 for text in ("Hi!", "Name two rivers, please.")]
    first = chat_features(smollm2_pair.target, sequences, log=lambda m: None)
    with torch.no_grad():
        alone = smollm2_pair.target.model(input_ids=sequences[0]["ids"][None]).last_hidden_state[0]
    assert [f.shape[0] for f in first] == [len(s["ids"]) for s in sequences]
    # batched with right padding, the shorter sequence's rows are what it gives alone (float16 storage)
    torch.testing.assert_close(first[0].float(), alone.half().float(), atol=2e-2, rtol=1e-2)
    assert len(list((tmp_path / "chat-data").glob("features-*.safetensors"))) == 1
    again = chat_features(smollm2_pair.target, sequences, log=lambda m: None)
    assert all(torch.equal(a, b) for a, b in zip(first, again))


def test_agreement_counts_the_answer_rows_per_kind(pair):
    """A draft whose head always says the token the target most often predicts agrees exactly there."""
    from lab.drafters.eagle import EagleDraftModel

    ids = pair.encode("ROMEO: I will go to the house, and the house will go to the")
    with torch.no_grad():
        hidden = pair.target.model(input_ids=torch.tensor([ids])).last_hidden_state[0].half()  # as cached
        target_argmax = pair.target.get_output_embeddings()(hidden.float()).argmax(-1)
    scored = target_argmax[1:len(ids) - 1]  # rows j = 0 .. len - 3 draft x_{j+2}, which f_{j+1} predicts
    token = int(scored.mode().values)
    model = EagleDraftModel(pair.target, draft_vocab=[token, (token + 1) % 2048])
    with torch.no_grad():
        model.head_rows.zero_()
        model.head_bias = torch.tensor([1.0, 0.0])  # draft logits [1, 0]: always `token`
    sequences = [{"ids": torch.tensor(ids), "answer_start": 2, "kind": "chat"}]
    result = chat_eagle_agreement(model, sequences, [hidden], 384, 0)
    want = (scored == token).float().mean().item()
    assert 0 < want < 1 and result == {"chat": round(want, 4), "all": round(want, 4)}


def test_a_short_run_saves_a_draft_the_drafter_loads(smollm2_pair, tmp_path, monkeypatch):
    import lab.training.chat_eagle as module
    from lab.decode import generate
    from lab.drafters.eagle import EagleDrafter

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    pair = smollm2_pair
    sequences = answered_sequences(pair)
    monkeypatch.setattr(module, "load_chat_data", lambda folder: list(sequences))
    recipe = replace(ChatEagleRecipe(), width=64, heads=2, kv_heads=1, intermediate=96, draft_vocab=256, steps=4,
                     batch=2, chain_steps=2, held_out_share=0.0)
    out = module.train_chat_eagle(pair, recipe, out_dir=tmp_path / "eagle", log=lambda m: None)
    info = json.loads((out / "training.json").read_text())
    assert info["recipe"]["steps"] == 4 and len(info["history"]) >= 2 and 0 <= info["held_out_agreement"]["all"] <= 1
    assert not (tmp_path / "chat-data" / pair.name / "eagle-checkpoint").exists()
    drafter = EagleDrafter.from_pretrained(pair, n_draft=3, directory=out)
    assert drafter.model.config["draft_vocab_size"] == 256
    prompt = pair.encode_chat("Name a fruit.")
    want = generate(pair.target, prompt, max_new_tokens=8).tokens
    assert generate(pair.target, prompt, drafter=drafter, max_new_tokens=8).tokens == want
    # recipe.init continues a saved draft: at learning rate 0 it saves the same weights (and draft vocabulary) again
    again = module.train_chat_eagle(pair, replace(recipe, init=str(out), lr=0.0, draft_vocab=128),
                                    out_dir=tmp_path / "again", log=lambda m: None)
    assert json.loads((again / "training.json").read_text())["continued_from"] == info
    saved, kept = (EagleDrafter.from_pretrained(pair, directory=d).model.state_dict() for d in (out, again))
    for name in saved:
        if not name.startswith("layer.embed_tokens"):  # unused, not saved: a fresh random table each load
            assert torch.equal(kept[name], saved[name]), name


def test_a_killed_run_resumes_to_the_weights_of_an_unbroken_one(smollm2_pair, tmp_path, monkeypatch):
    """Killed after its checkpoint at step 6, a run picks up there (weights, optimizer, data order, and the noise
    each step draws) and saves what a run never killed saves."""
    import lab.training.chat_eagle as module
    from safetensors.torch import load_file

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    sequences = answered_sequences(smollm2_pair)
    monkeypatch.setattr(module, "load_chat_data", lambda folder: list(sequences))
    recipe = replace(ChatEagleRecipe(), width=32, heads=2, kv_heads=1, intermediate=48, draft_vocab=64, steps=8,
                     batch=2, chain_steps=2, warmup=2, held_out_share=0.0, checkpoint_every=3)
    quiet = lambda m: None  # noqa: E731
    unbroken = module.train_chat_eagle(smollm2_pair, recipe, out_dir=tmp_path / "unbroken", log=quiet)
    schedule = module.lr_at

    def killed_at_7(step, *args):
        if step == 7:
            raise KeyboardInterrupt
        return schedule(step, *args)

    monkeypatch.setattr(module, "lr_at", killed_at_7)
    with pytest.raises(KeyboardInterrupt):
        module.train_chat_eagle(smollm2_pair, recipe, out_dir=tmp_path / "resumed", log=quiet)
    monkeypatch.setattr(module, "lr_at", schedule)
    lines = []
    resumed = module.train_chat_eagle(smollm2_pair, recipe, out_dir=tmp_path / "resumed", log=lines.append)
    assert any("resuming at step 6" in line for line in lines)
    want, got = (load_file(str(folder / "model.safetensors")) for folder in (unbroken, resumed))
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name


def test_a_draft_to_continue_is_checked_before_the_feature_pass(smollm2_pair, tmp_path, monkeypatch):
    """--init with a draft made for another target fails at once, not after the target's features are computed
    (13 minutes for the chat data)."""
    import lab.training.chat_eagle as module
    from lab.drafters.eagle import EagleDraftModel
    from tests.lab.training.fakes import retrained

    other = retrained(smollm2_pair.target)
    EagleDraftModel(other, {"width": 32, "heads": 2, "kv_heads": 1, "intermediate": 48}).save_pretrained(
        tmp_path / "foreign")
    monkeypatch.setattr(module, "chat_features", lambda *a, **k: pytest.fail("the feature pass ran"))
    monkeypatch.setattr(module, "load_chat_data", lambda folder: pytest.fail("the data loaded"))
    with pytest.raises(ValueError, match="another target|trained for"):
        module.train_chat_eagle(smollm2_pair, replace(ChatEagleRecipe(), init=str(tmp_path / "foreign")),
                                log=lambda m: None)
