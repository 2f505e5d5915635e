"""The EAGLE-3 draft in training (lab.training.eagle3): its cross-entropy falls on a tiny run with training-time
test, the teacher-forced agreement is what the drafter drafts, the multi-layer feature cache holds the layers of
a plain forward, and a short run saves a draft the drafter loads."""
import copy
import dataclasses
import json

import pytest
import torch

from lab.assets import TARGET_KEY, target_weights_key
from lab.drafters.base import DraftRequest
from lab.drafters.eagle3 import Eagle3Drafter, Eagle3DraftModel
from lab.models import layer_states
from lab.training import eagle3
from tests.helpers import kill_after_first_checkpoint

LAYERS = (2, 3, 6)
SMALL = {"width": 40, "heads": 2, "kv_heads": 1, "intermediate": 64}
TEXT = "Now is the winter of our discontent made glorious summer by this sun of York; and all the clouds"


def real_features(target, sequences, seq_len=12, split="train", seed=0, layers=LAYERS, **kwargs):
    """Stands in for target_features: random windows (no corpus), the target's real hidden states of ``layers``."""
    gen = torch.Generator().manual_seed(sequences + (split == "val"))
    ids = torch.randint(0, 2048, (sequences, seq_len), generator=gen)
    with torch.no_grad():
        out = target.model(input_ids=ids, output_hidden_states=True)
    return {"ids": ids, "hidden": layer_states(out.hidden_states, layers).half()}


def window(pair):
    ids = torch.tensor(pair.encode(TEXT)[:20])
    with torch.no_grad():
        out = pair.target.model(input_ids=ids[None], output_hidden_states=True)
    return ids, layer_states(out.hidden_states, LAYERS)[0], out.hidden_states[-1][0]


def test_feature_layers_adds_the_last_layer_only_when_missing():
    assert eagle3.feature_layers((2, 3, 6), 6) == ((2, 3, 6), 2)
    assert eagle3.feature_layers((1, 3, 4), 6) == ((1, 3, 4, 6), 3)
    assert eagle3.feature_layers((-1, 2), 6) == ((-1, 2), 0)


def test_cross_entropy_falls_on_a_tiny_run_with_every_unrolled_step(pair):
    torch.manual_seed(0)
    ids, hidden, last = window(pair)
    model = Eagle3DraftModel(pair.target, SMALL, draft_vocab=torch.arange(0, 2048, 2), hidden_layers=LAYERS).train()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(25):
        loss, per_pass = eagle3.eagle3_loss(model, hidden[None], last[None], ids[None], depth=3)
        assert len(per_pass) == 3 and torch.isclose(loss, torch.stack(per_pass).mean())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append([x.item() for x in per_pass])
    assert all(end < 0.7 * start for start, end in zip(losses[0], losses[-1])), (losses[0], losses[-1])


def test_decay_weighs_each_pass_by_its_power(pair):
    """decay=0.8 is the official training code's weighting: (l0 + 0.8·l1 + 0.64·l2) / 2.44; bad values are refused."""
    torch.manual_seed(0)
    ids, hidden, last = window(pair)
    model = Eagle3DraftModel(pair.target, SMALL, draft_vocab=torch.arange(0, 2048, 2), hidden_layers=LAYERS)
    loss, per_pass = eagle3.eagle3_loss(model, hidden[None], last[None], ids[None], depth=3, decay=0.8)
    expected = (per_pass[0] + 0.8 * per_pass[1] + 0.64 * per_pass[2]) / 2.44
    assert torch.isclose(loss, expected) and not torch.isclose(loss, torch.stack(per_pass).mean())
    for bad in (0.0, 1.5, -0.2):
        with pytest.raises(ValueError, match="decay"):
            eagle3.eagle3_loss(model, hidden[None], last[None], ids[None], depth=3, decay=bad)


def test_step_one_agreement_is_what_the_drafter_drafts(pair):
    """Step 1's teacher-forced agreement (one batched forward) equals the share of prefixes after which the
    drafter's own first draft, through its KV cache and positions, is the target's argmax."""
    torch.manual_seed(3)
    ids, hidden, last = window(pair)
    model = Eagle3DraftModel(pair.target, SMALL, draft_vocab=torch.arange(1024), hidden_layers=LAYERS).eval()
    with torch.no_grad():
        theirs = pair.target.get_output_embeddings()(last[1:]).argmax(-1)  # theirs[j]: the target's x_{j+2}
        step1, step2 = eagle3.chain_agreement(model, model.fuse(hidden)[None], ids[None], theirs[None], depth=2)
    drafter = Eagle3Drafter(pair.target, model, n_draft=1)
    hits = 0
    for j in range(len(ids) - 1):  # draft x_{j+2} after x_0 .. x_{j+1}
        drafter.reset(ids[:j + 2].tolist(), hidden=hidden[:j + 1])
        (token,) = drafter.propose(DraftRequest(ids[:j + 2].tolist(), 1)).tokens
        hits += token == int(theirs[j])
    assert step1 == round(hits / (len(ids) - 1), 4)
    assert 0.0 <= step2 <= 1.0


def test_layer_feature_cache_holds_a_plain_forwards_layers(pair, tmp_path, monkeypatch):
    from lab.training import corpus, features

    fake = (torch.arange(3, 403, dtype=torch.int16) * 5) % 2000
    monkeypatch.setattr(corpus, "corpus_ids", lambda pair_dir=None: (fake, fake[:100]))
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    got = features.target_features(pair.target, 3, seq_len=10, split="val", layers=LAYERS)
    assert got["hidden"].shape == (3, 10, 3 * 384) and got["hidden"].dtype == torch.float16
    with torch.no_grad():
        out = pair.target(input_ids=got["ids"], output_hidden_states=True)
    torch.testing.assert_close(got["hidden"].float(), torch.cat([out.hidden_states[i] for i in LAYERS], -1),
                               atol=2e-2, rtol=1e-2)
    plain = features.target_features(pair.target, 3, seq_len=10, split="val")  # cached apart, last layer only
    assert plain["hidden"].shape == (3, 10, 384) and len(list(tmp_path.glob("*.pt"))) == 2


def test_a_short_run_saves_a_draft_the_drafter_loads_and_a_killed_run_resumes(pair, tmp_path, monkeypatch):
    import lab.models

    target = copy.deepcopy(pair.target).cpu()  # training freezes it in place: the session pair stays as it was
    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: dataclasses.replace(pair, target=target))
    monkeypatch.setattr(eagle3, "target_features", real_features)
    monkeypatch.setattr(eagle3, "cache_dir", lambda: tmp_path / "cache")
    kwargs = dict(steps=4, sequences=4, seq_len=12, batch=2, depth=3, draft_vocab_size=300, config=SMALL,
                  checkpoint_every=2)
    out = eagle3.train_eagle3(out_dir=tmp_path / "straight", log=lambda *_: None, **kwargs)
    config = json.loads((out / "config.json").read_text())
    assert config[TARGET_KEY] == target_weights_key(target) and config["hidden_layers"] == list(LAYERS)
    info = json.loads((out / "training.json").read_text())
    assert info["recipe"]["steps"] == 4 and info["recipe"]["depth"] == 3 and len(info["history"][0]["per_pass"]) == 3
    assert set(info["held_out_agreement"]) == {"step_1", "step_2", "step_3"}
    assert not (tmp_path / "cache" / "eagle3-checkpoint").exists()  # a finished run deletes its checkpoint
    drafter = Eagle3Drafter(target, Eagle3DraftModel.from_pretrained(target, out), n_draft=2)
    assert drafter.model.config["draft_vocab_size"] == 300 and drafter.hidden_layers == LAYERS

    kill_after_first_checkpoint(monkeypatch, eagle3, lambda: eagle3.train_eagle3(  # before step 2
        out_dir=tmp_path / "resumed", log=lambda *_: None, **kwargs))
    said = []
    resumed = eagle3.train_eagle3(out_dir=tmp_path / "resumed", log=said.append, **kwargs)
    assert any("resuming at step 2" in line for line in said)
    a = Eagle3DraftModel.from_pretrained(target, out).state_dict()
    b = Eagle3DraftModel.from_pretrained(target, resumed).state_dict()
    for name in a:
        if not name.startswith("layer.embed_tokens"):  # unused, not saved: a fresh random table each load
            torch.testing.assert_close(a[name], b[name], msg=name)


@pytest.mark.parametrize("bad,message", [({"steps": 0}, "steps"), ({"batch": 0}, "batch"), ({"depth": 0}, "depth"),
                                         ({"checkpoint_every": 0}, "checkpoint_every")])
def test_bad_arguments_are_refused_before_any_work(bad, message, monkeypatch):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *a, **k: pytest.fail("work started before the checks"))
    with pytest.raises(ValueError, match=message):
        eagle3.train_eagle3(**bad)


def test_the_loss_scores_against_the_full_heads_distribution_renormalised_on_the_draft_vocabulary(pair):
    """eagle3_loss reads only the draft vocabulary's rows of the target's LM head; its target distribution must be
    the full head's softmax restricted to those ids and renormalised, so depth 1's loss equals a hand computation."""
    torch.manual_seed(1)
    ids, hidden, last = window(pair)
    vocab = torch.arange(1, 2048, 3)
    model = Eagle3DraftModel(pair.target, SMALL, draft_vocab=vocab, hidden_layers=LAYERS).eval()
    with torch.no_grad():
        loss, _ = eagle3.eagle3_loss(model, hidden[None], last[None], ids[None], depth=1)
        full = pair.target.get_output_embeddings()(last[1:]).float()               # [T - 1, V]
        theirs = full[:, vocab].softmax(-1)
        drafted = model.head_logits(model(model.fuse(hidden[:-1])[None], ids[None, 1:]))[0].float()
        hand = -(theirs * drafted.log_softmax(-1)).sum(-1).mean()
    assert torch.isclose(loss, hand, rtol=1e-3), (loss, hand)
