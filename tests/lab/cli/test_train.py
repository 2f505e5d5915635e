"""``python -m lab train`` (lab.cli.train): --threads reaches the card's measurements too."""
from __future__ import annotations

import pytest

from lab import cli


def test_train_card_honours_threads(monkeypatch, tmp_path, capsys):
    """``train card`` times the pair's decoding (cost per token, c): --threads must apply to it, as it
    does to the training commands; no training runs here (write_card is replaced by a recorder)."""
    import torch

    from lab import training

    seen = []
    card = tmp_path / "README.md"
    card.write_text("card\n")

    def fake_write_card(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return card

    monkeypatch.setattr(training, "write_card", fake_write_card)
    monkeypatch.setattr(training, "PAIR_DIR", tmp_path)
    monkeypatch.setattr(training, "train_pair", lambda **k: pytest.fail("train card must not train"))
    before = torch.get_num_threads()
    want = 1 if before != 1 else 2
    try:
        assert cli.main(["train", "card", "--threads", str(want)]) == 0
    finally:
        torch.set_num_threads(before)
    assert seen == [want]
    assert capsys.readouterr().out == "card\n\n"
