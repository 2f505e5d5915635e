"""lab.training.cards: the parts of the pair's model card that need no trained model."""

import json

from lab.assets import PAIR_DIR
from lab.training import cards


def test_held_out_passages_start_at_a_speech_and_end_at_a_line_break():
    works = [f"Title {i}\n\n" + "".join(f"SPEAKER {i}.{k}\nA line of verse number {k}.\n\n" for k in range(40))
             for i in range(16)]
    passages = cards.held_out_passages(works, count=8, chars=120)
    assert len(passages) == 8
    assert all(p.startswith("SPEAKER ") and p.endswith("\n") and len(p) <= 120 for p in passages)
    assert len({p.split(".")[0] for p in passages}) == 8  # works spread across the corpus, not one work eight times


def test_committed_card_meets_its_bars():
    m = json.loads((PAIR_DIR / "measurements.json").read_text())
    assert m["target"]["val_nats_per_char"] <= 1.50
    assert m["draft"]["val_nats_per_char"] - m["target"]["val_nats_per_char"] >= 0.10
    assert m["alpha_greedy"] >= 0.55
    assert m["cost_ratio_c"] <= 0.30
    card = (PAIR_DIR / "README.md").read_text()
    assert str(m["alpha_greedy"]) in card and str(m["cost_ratio_c"]) in card
