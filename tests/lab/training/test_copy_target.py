"""lab.training.copy_target: its training rows, the induction probe, and a source checkpoint read as safetensors
only."""
from types import SimpleNamespace

import pytest
import torch

from lab.training import copy_target


def _rows(random_frac, passage_frac, ids, batch=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return copy_target.CopyBatches(ids, 256, random_frac, passage_frac, gen, vocab_size=2048).next(batch)


def test_plain_rows_are_corpus_windows():
    ids = torch.arange(20_000)
    rows = _rows(0.0, 0.0, ids)
    assert rows.shape == (8, 257) and rows.dtype == torch.int64
    assert bool((rows[:, 1:] - rows[:, :-1] == 1).all())  # consecutive ids: one unbroken window each


def test_random_rows_repeat_one_random_passage_at_varying_offsets():
    rows = _rows(1.0, 0.0, torch.zeros(20_000, dtype=torch.int16), batch=16)  # the gaps are all token 0
    periods, gaps = set(), set()
    for row in rows:
        tokens = row[row != 0]  # the random passage's copies, gaps removed (random ids are >= 1)
        period = next(n for n in range(8, 65) if bool((tokens[n:] == tokens[:-n]).all()))
        assert len(tokens) >= 2 * period  # at least two copies to learn from
        periods.add(period)
        # the zero runs between copies, inside the row (a gap of 0 tokens joins two copies: not seen here)
        runs, length = [], 0
        for token in row[1:-1].tolist():
            if token == 0:
                length += 1
            elif length:
                runs.append(length)
                length = 0
        gaps.update(runs[1:])  # the first run may be cut by the row's start
    assert len(periods) > 4  # the passage length varies
    assert len(gaps) > 4  # so does the distance back to the previous copy (a fixed gap would give one length)


def test_passage_rows_repeat_corpus_text():
    ids = torch.arange(20_000)
    for row in _rows(0.0, 1.0, ids, batch=4):
        # a corpus passage repeats: some id occurs more than once, which a plain window of arange never has
        assert len(torch.unique(row)) < len(row)


@pytest.mark.parametrize("fractions", [(-0.1, 0.0), (0.7, 0.5), (0.0, 1.5)])
def test_bad_fractions_are_refused(fractions):
    with pytest.raises(ValueError, match="random_frac and passage_frac"):
        copy_target.CopyBatches(torch.arange(1000), 256, *fractions, torch.Generator(), 2048)


class _Stub(torch.nn.Module):
    """A 'model' that predicts by a rule: copy the token ``offset - 1`` back (a perfect copier), or always 0."""

    def __init__(self, copy_offset=None, vocab=2048):
        super().__init__()
        self.config = SimpleNamespace(vocab_size=vocab)
        self.copy_offset = copy_offset

    def forward(self, ids):
        logits = torch.zeros(*ids.shape, self.config.vocab_size)
        if self.copy_offset is None:
            logits[..., 0] = 1.0
        else:
            source = torch.roll(ids, self.copy_offset - 1, dims=1)  # position t predicts ids[t - offset + 1]
            logits.scatter_(-1, source.unsqueeze(-1), 1.0)
        return SimpleNamespace(logits=logits)


def test_probe_scores_a_copier_one_and_a_constant_zero():
    val = torch.randint(1, 2048, (5_000,), generator=torch.Generator().manual_seed(1))
    copier = _Stub(copy_offset=40)  # the second copy starts 40 tokens after the first
    copier.train()
    assert copy_target.copy_probe_accuracy(copier, val, length=40) == 1.0
    assert copier.training  # the mode it was found in
    assert copy_target.copy_probe_accuracy(_Stub(copy_offset=39), val, length=40) < 0.05  # one off: no copying
    assert copy_target.copy_probe_accuracy(_Stub(), val, length=40) == 0.0


def test_a_pickled_source_checkpoint_is_never_read(tmp_path, monkeypatch):
    """train_copy_target reads its source with use_safetensors=True: a folder with only a pickled
    ``pytorch_model.bin`` (which transformers would otherwise load) is refused before any training."""
    from tests.helpers import tiny_llama

    source = tmp_path / "source"
    model = tiny_llama(0, layers=1, hidden=16).cpu()
    model.config.save_pretrained(source)
    torch.save(model.state_dict(), source / "pytorch_model.bin")
    ids = torch.randint(1, 64, (4_000,), generator=torch.Generator().manual_seed(0)).to(torch.int16)
    monkeypatch.setattr(copy_target, "corpus_ids", lambda pair_dir=None: (ids, ids[:1_000]))
    monkeypatch.setattr(copy_target, "measure_copy_target", lambda path: {})  # where a loaded source would go
    monkeypatch.setattr(copy_target, "train_model", lambda *args, **kwargs: [])
    recipe = copy_target.CopyRecipe(seq_len=16, copy_steps=1, mix_steps=1)
    with pytest.raises(OSError, match="model.safetensors"):
        copy_target.train_copy_target(tmp_path / "out", recipe, source=source)
