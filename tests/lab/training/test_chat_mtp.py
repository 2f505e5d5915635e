"""MTP heads in training (lab.training.chat_mtp): which token each depth is scored on, that training lowers the loss,
and that a short run saves heads the drafter loads and that keep greedy parity (on the Shakespeare pair, with the
target's own greedy continuations as the "answers")."""
import json

import pytest
import torch

from lab.decode import generate
from lab.drafters.mtp import MTPDrafter, MTPHeads
from lab.training.chat_medusa import medusa_batch
from lab.training.chat_mtp import ChatMTPRecipe, mtp_agreement, mtp_loss, train_chat_mtp

SMALL = {"depth": 2, "intermediate": 32}


@pytest.fixture(scope="module")
def data(pair):
    """Six sequences: a held-out prompt's first 8 tokens, then the target's greedy continuation (the answer), with the
    target's true hidden states."""
    from lab.prompts import held_out_prompts

    sequences, features = [], []
    for i, text in enumerate(held_out_prompts()[:6]):
        prompt = pair.encode(text)[:8]
        answer = generate(pair.target, prompt, max_new_tokens=12).tokens
        ids = torch.tensor(prompt + answer)
        sequences.append({"ids": ids, "answer_start": len(prompt), "kind": ("chat", "code")[i % 2],
                          "topk_ids": torch.zeros(len(answer), 8, dtype=torch.long)})
        with torch.no_grad():
            features.append(pair.target.model(input_ids=ids[None]).last_hidden_state[0])
    vocab = torch.arange(pair.target.config.vocab_size)[:1024]
    return sequences, (sequences[:2], features[:2]), (sequences[2:], features[2:]), vocab


def test_depth_k_is_scored_on_the_token_k_plus_1_ahead(pair):
    """mtp_loss against cross-entropy written out by hand: depth k's row i is scored on t_{i+k+1}, only inside the
    answer and only for tokens of the draft vocabulary (ids 100..299 here, so the answer's 9 is not scored)."""
    torch.manual_seed(0)
    heads = MTPHeads(pair.target, SMALL, draft_vocab=torch.arange(100, 300))
    hidden = torch.randn(1, 7, pair.target.config.hidden_size)
    ids = torch.tensor([[5, 6, 7, 150, 160, 170, 9]])
    labels = torch.tensor([[-100, -100, -100, 150, 160, 170, 9]])
    loss, per_depth = mtp_loss(heads, hidden, ids, labels)
    outs = heads(hidden, ids)
    # depth 1 row i predicts ids[i + 2]: rows 1, 2, 3 (labels 150, 160, 170; 9 is outside the draft vocabulary)
    expected = []
    for k, h in enumerate(outs, start=1):
        gold = labels[0, k + 1:]
        logits = heads.head_logits(h[0, :gold.numel()]).float()
        keep = (gold >= 100) & (gold < 300)
        expected.append(torch.nn.functional.cross_entropy(logits[keep], gold[keep] - 100))
    for mine, theirs in zip(per_depth, expected):
        torch.testing.assert_close(mine.float(), theirs, atol=0.05, rtol=0.02)  # bf16 autocast where native
    torch.testing.assert_close(loss.float(), torch.stack(expected).mean(), atol=0.05, rtol=0.02)


def test_training_lowers_the_loss_and_saves_heads_the_drafter_loads(pair, data, tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    _, (held, held_features), (train, train_features), vocab = data
    heads = MTPHeads(pair.target, SMALL, draft_vocab=vocab)
    torch.manual_seed(0)
    hidden, ids, labels = medusa_batch(train, train_features, 384, 0)
    before = mtp_loss(heads, hidden, ids, labels)[0].item()
    recipe = ChatMTPRecipe(intermediate=32, draft_vocab=1024, steps=40, batch=4, lr=3e-3, warmup=2)
    logs = []
    out = train_chat_mtp(pair, recipe, out_dir=tmp_path / "mtp", log=logs.append, data=data)
    info = json.loads((out / "training.json").read_text())
    assert info["history"][0]["step"] == 0 and info["history"][-1]["step"] == 39
    assert info["history"][-1]["loss"] < 0.8 * info["history"][0]["loss"]  # it learns the four training answers
    assert before > 0
    assert set(info["held_out_agreement"]) == {"depth_1", "depth_2"}
    assert set(info["held_out_agreement"]["depth_1"]) == {"chat", "code", "all"}
    assert {p.name for p in out.iterdir()} == {"config.json", "model.safetensors", "training.json"}
    assert not (tmp_path / "chat-data" / pair.name / "mtp-checkpoint").exists()  # removed after a finished run
    drafter = MTPDrafter.from_pretrained(pair, directory=out)
    assert drafter.heads.config["draft_vocab_size"] == 1024 and drafter.n_draft == 2
    # trained on the target's continuations: the trained heads get drafts accepted, and parity holds
    prompt, answer = train[0]["ids"][:8].tolist(), train[0]["ids"][8:].tolist()
    gen = generate(pair.target, prompt, drafter=drafter, max_new_tokens=12)
    assert gen.tokens == answer
    assert gen.stats["acceptance_rate"] > 0


def test_depth_1_agreement_equals_the_drafters_first_token_at_every_answer_position(pair, data):
    """The teacher-forced agreement (one batched forward) against the drafter's own first draft, prefix by prefix
    (its caches and positions): the same hits, so the card's agreement is what drafting will see."""
    from lab.drafters.base import DraftRequest

    _, (held, held_features), _, vocab = data
    torch.manual_seed(3)
    heads = MTPHeads(pair.target, SMALL, draft_vocab=vocab).eval()
    drafter = MTPDrafter(pair.target, heads, n_draft=1)
    lm_head = pair.target.get_output_embeddings()
    for sequence, hidden in zip(held, held_features):
        ids = sequence["ids"].tolist()
        hits = 0
        for j in range(sequence["answer_start"], len(ids)):  # draft t_j after the prefix t_0 .. t_{j-1}
            drafter.reset(ids[:j], hidden=hidden[:j - 1])
            (token,) = drafter.propose(DraftRequest(ids[:j], 1)).tokens
            hits += token == int(lm_head(hidden[j - 1]).argmax())
        result = mtp_agreement(heads, [sequence], [hidden], 384, 0)
        assert result["depth_1"]["all"] == round(hits / (len(ids) - sequence["answer_start"]), 4)


def test_the_card_times_the_saved_heads_against_eagle_and_medusa_and_writes_their_numbers(pair, tmp_path):
    """write_chat_mtp_card measures the heads in its folder against the pair's EAGLE draft and Medusa heads at the
    same depth, task by task (greedy, interleaved), writes measurements.json, and its README's table and sentences
    are built from those numbers, config.json and training.json."""
    import shutil

    from lab.drafters.mtp import MTP_DIRS
    from lab.training.chat_mtp import write_chat_mtp_card

    for name in ("config.json", "model.safetensors"):
        shutil.copy(MTP_DIRS["shakespeare"] / name, tmp_path / name)
    held = {"depth_1": {"chat": 0.41, "code": 0.5, "all": 0.456}, "depth_2": {"chat": 0.3, "code": 0.4, "all": 0.35}}
    training = {"recipe": {**vars(ChatMTPRecipe()), "steps": 600}, "parameters": 123456, "minutes": 12.5,
                "threads": 2, "bf16_autocast": True, "draft_vocab_coverage": 0.981, "held_out_agreement": held,
                "data": {"sequences": 40, "train_sequences": 38, "answer_tokens": 900, "held_out_sequences": 2}}
    (tmp_path / "training.json").write_text(json.dumps(training))
    card = write_chat_mtp_card(pair, tmp_path, prompts=1, max_new_tokens=12)
    written = json.loads((tmp_path / "measurements.json").read_text())
    decoding = written["decoding"]
    assert list(decoding["tasks"]) == ["prose", "copy_edit", "structured", "copy"]
    assert decoding["settings"]["depth"] == 2 and decoding["settings"]["prompts_per_task"] == 1
    text = card.read_text()
    for task, run in decoding["tasks"].items():
        rows = {r["method"]: r for r in run["rows"]}
        assert list(rows) == ["autoregressive", "MTP", "EAGLE", "Medusa"]
        for name in ("MTP", "EAGLE", "Medusa"):
            row = rows[name]
            assert row["identical_outputs"] == 1 and row["cost_ratio"] > 0  # float32: exact
            assert len(row["per_position_acceptance"]) == 2 and len(row["conditional_acceptance"]) == 2
            rate = "–" if row["acceptance_rate"] is None else f"{row['acceptance_rate']:.2f}"
            assert f"| {task} | {name} | {rate} | {row['tokens_per_target_call']:.2f} |" in text
    assert written["weights_bytes"] == (tmp_path / "model.safetensors").stat().st_size
    assert "600 AdamW steps of 8 sequences" in text and "`python -m lab train chat-mtp --threads 2`" in text
    assert "depth 1: chat 0.41, code 0.50; all 0.46" in text and "123,456 parameters" in text
    # these heads score the whole vocabulary: no draft-vocabulary ids, no coverage (the committed card has both)
    assert "over the whole vocabulary" in text and "draft vocabulary" not in text and "draft-vocabulary" not in text
    assert "38 training sequences (900 answer tokens) and 2 held out" in text
    assert "MTP's first draft accepted (position 1): prose" in text and "near-tie" not in text  # float32
    others = [run["load"]["other_cores"] for run in decoding["tasks"].values()]
    assert f"other processes kept {min(others):.2f}–{max(others):.2f} of" in text


def test_the_card_refuses_a_folder_without_heads_and_bad_counts(pair, tmp_path):
    from lab.training.chat_mtp import measure_chat_mtp

    with pytest.raises(FileNotFoundError):
        measure_chat_mtp(pair, tmp_path, prompts=1, max_new_tokens=4)
    with pytest.raises(ValueError, match="prompts must be an integer"):
        measure_chat_mtp(pair, tmp_path, prompts=0)
    with pytest.raises(ValueError, match="prompts must be at most"):
        measure_chat_mtp(pair, tmp_path, prompts=10_000)


def test_the_committed_card_is_its_files_rendered():
    """The real pair's MTP card says what its training record and measurements hold: rendering it again from the
    committed files gives the committed text, and its table's MTP rows are measurements.json's."""
    from lab.drafters.mtp import MTP_DIRS
    from lab.training.chat_mtp import chat_mtp_card

    folder = MTP_DIRS["smollm2-135m"]
    text = (folder / "README.md").read_text()
    assert text == chat_mtp_card(folder, "smollm2-135m")
    measured = json.loads((folder / "measurements.json").read_text())
    assert measured["weights_bytes"] == (folder / "model.safetensors").stat().st_size
    for task, run in measured["decoding"]["tasks"].items():
        row = next(r for r in run["rows"] if r["method"] == "MTP")
        assert f"| {task} | MTP | {row['acceptance_rate']:.2f} | {row['tokens_per_target_call']:.2f} |" in text
    info = json.loads((folder / "training.json").read_text())
    assert f"{info['recipe']['steps']:,} AdamW steps" in text and info["recipe"] == vars(ChatMTPRecipe())
    assert "over an 8,192-token draft vocabulary" in text and "Coverage of the training answers by the draft " \
           f"vocabulary: {info['draft_vocab_coverage']:.1%}." in text


def test_the_card_says_level_where_the_printed_shares_are_equal():
    from lab.training.chat_mtp import _reading

    rows = [{"method": "autoregressive"}] + [
        {"method": m, "per_position_acceptance": [p1, 0.1], "conditional_acceptance": [p1, c2]}
        for m, p1, c2 in (("MTP", 0.301, 0.5), ("EAGLE", 0.299, 0.6), ("Medusa", 0.2, 0.5))]
    lines = _reading({"settings": {"depth": 2}, "tasks": {"chat": {"rows": rows}}})
    assert lines == ["- MTP's first draft accepted (position 1): chat 0.30 (level with EAGLE).",
                     "- MTP's last draft accepted given the earlier ones (position 2): chat 0.50 (below EAGLE, level "
                     "with Medusa)."]
    one = _reading({"settings": {"depth": 1}, "tasks": {"chat": {"rows": rows}}})  # one module: no earlier drafts
    assert one == lines[:1]
