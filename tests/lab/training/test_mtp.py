"""The Shakespeare target's MTP heads in training (lab.training.mtp): the per-depth agreement on corpus windows is
what the drafter itself drafts, a short run saves heads the drafter loads (recording the target), and bad arguments
are refused before any work."""
import dataclasses
import json

import pytest
import torch

from lab.assets import TARGET_KEY, target_weights_key
from lab.drafters.base import DraftRequest
from lab.drafters.mtp import MTPDrafter, MTPHeads
from lab.training import mtp
from lab.training.chat_mtp import depth_predictions
from tests.lab.training.fakes import fake_features

SMALL = {"depth": 2, "intermediate": 32, "kv_heads": 2}


def test_window_agreement_equals_the_drafters_own_drafts(pair):
    """Depth 1's agreement (one batched teacher-forced forward over the window) equals the share of prefixes after
    which the drafter's own first draft, through its caches and positions, is the target's argmax: the card's
    number is what drafting sees. Depth 2 in the drafter reads its own depth-1 draft: where the window's next token
    is that draft, teacher forcing feeds depth 2 the same input, and its prediction is the drafter's second
    draft."""
    torch.manual_seed(5)
    heads = MTPHeads(pair.target, SMALL).eval()
    ids = torch.tensor(pair.encode("Now is the winter of our discontent made glorious summer by this sun")[:14])
    with torch.no_grad():
        hidden = pair.target.model(input_ids=ids[None]).last_hidden_state[0]
        argmax = pair.target.get_output_embeddings()(hidden).argmax(-1)  # argmax[j]: the target's t_{j+1}
    depth1, depth2 = mtp.mtp_window_agreement(heads, {"ids": ids[None], "hidden": hidden[None]})
    drafter = MTPDrafter(pair.target, heads, n_draft=1)
    hits = 0
    for j in range(1, len(ids) - 1):  # draft t_{j+1} after t_0 .. t_j: module 1 on row j - 1's state and t_j
        drafter.reset(ids[:j + 1].tolist(), hidden=hidden[:j])
        (token,) = drafter.propose(DraftRequest(ids[:j + 1].tolist(), 1)).tokens
        hits += token == int(argmax[j])
    assert depth1 == round(hits / (len(ids) - 2), 4)
    assert 0.0 <= depth2 <= 1.0
    two = MTPDrafter(pair.target, heads, n_draft=2)
    for j in (3, 6, 9):
        two.reset(ids[:j + 1].tolist(), hidden=hidden[:j])
        first, second = two.propose(DraftRequest(ids[:j + 1].tolist(), 2)).tokens
        window = torch.cat([ids[:j + 1], torch.tensor([first, 0])])  # t_{j+1} = the drafter's own first draft
        with torch.no_grad():
            states = pair.target.model(input_ids=window[None]).last_hidden_state
            (_, _), (mine, _) = depth_predictions(heads, states, window[None])
        assert int(mine[0, j - 1]) == second, j  # depth 2 at i = j - 1 predicts t_{j+2}


def test_a_short_run_saves_heads_the_drafter_loads(pair, tmp_path, monkeypatch):
    import copy

    import lab.models

    target = copy.deepcopy(pair.target).cpu()  # training freezes it in place: the session pair stays as it was
    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: dataclasses.replace(pair, target=target))
    monkeypatch.setattr(mtp, "target_features", fake_features)
    out = mtp.train_mtp(steps=3, out_dir=tmp_path / "mtp", sequences=4, seq_len=12, batch=2, intermediate=16,
                        log=lambda *_: None)
    config = json.loads((out / "config.json").read_text())
    assert config[TARGET_KEY] == target_weights_key(target) and config["depth"] == 2 and config["kv_heads"] == 2
    info = json.loads((out / "training.json").read_text())
    assert info["recipe"]["steps"] == 3 and [e["step"] for e in info["history"]] == [0, 2]
    heads = MTPHeads.from_pretrained(target, out)
    assert info["held_out_agreement"] == {  # measured on the saved float16 file, as the card says
        f"depth_{k}": a for k, a in enumerate(mtp.mtp_window_agreement(heads.float(),
                                                                       fake_features(target, 64)), start=1)}
    drafter = MTPDrafter(target, heads)
    assert drafter.n_draft == 2


@pytest.mark.parametrize("bad,message", [({"steps": 0}, "steps"), ({"batch": 0}, "batch"), ({"depth": 0}, "depth"),
                                         ({"intermediate": 0}, "intermediate"), ({"kv_heads": 0}, "kv_heads")])
def test_bad_arguments_are_refused_before_any_work(bad, message, monkeypatch):
    import lab.models

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pytest.fail("loaded the pair"))
    with pytest.raises(ValueError, match=message):
        mtp.train_mtp(**bad)
