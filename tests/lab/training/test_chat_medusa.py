"""The real pair's Medusa heads in training (lab.training.chat_medusa): the labels are the answer tokens, and a short
run saves heads over a draft vocabulary that the drafter loads and that keep greedy parity."""
import json

import pytest
import torch

from tests.lab.training.fakes import answered_sequences, chat_sequence


def test_medusa_labels_are_the_answer_tokens():
    from lab.training.chat_medusa import medusa_batch

    hidden, ids, labels = medusa_batch([chat_sequence(6, 3), chat_sequence(4, 1)], [torch.ones(6, 2), torch.ones(4, 2)],
                                       max_len=384, pad_id=0)
    assert labels[0].tolist() == [-100, -100, -100, 13, 14, 15]
    assert labels[1].tolist() == [-100, 11, 12, 13, -100, -100]
    with pytest.raises(ValueError, match="features\\[1\\] has 3 rows"):
        medusa_batch([chat_sequence(6, 3), chat_sequence(4, 1)], [torch.ones(6, 2), torch.ones(3, 2)], 384, 0)


def test_a_short_medusa_run_saves_heads_the_drafter_loads(smollm2_pair, tmp_path, monkeypatch):
    import lab.training.chat_medusa as module
    from lab.decode import generate
    from lab.drafters.medusa import MedusaDrafter

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    pair = smollm2_pair
    sequences = answered_sequences(pair)
    import lab.training.chat_eagle as features_module  # where the feature drafts' data is read

    monkeypatch.setattr(features_module, "load_chat_data", lambda folder: list(sequences))
    recipe = module.ChatMedusaRecipe(draft_vocab=64, steps=3, batch=2)
    out = module.train_chat_medusa(pair, recipe, out_dir=tmp_path / "medusa", log=lambda m: None)
    info = json.loads((out / "training.json").read_text())
    assert len(info["held_out_accuracy"]["top1"]) == 3 and info["held_out_accuracy"]["positions"][0] > 0
    drafter = MedusaDrafter.from_pretrained(pair, directory=out)
    assert drafter.heads.output_size == 64
    prompt = pair.encode_chat("Name a fruit.")
    want = generate(pair.target, prompt, max_new_tokens=8).tokens
    assert generate(pair.target, prompt, drafter=drafter, max_new_tokens=8).tokens == want
