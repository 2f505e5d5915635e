"""A reduced draft vocabulary (lab.drafters.draft_vocab; FR-Spec, EAGLE-3's d2t): which ids it keeps, and an EAGLE
draft over it stays exact — greedy parity, the target's distribution under sampling, files that keep the table."""
import json

import pytest
import torch

from lab.decode import generate
from lab.drafters import EagleDrafter
from lab.drafters.draft_vocab import check_draft_vocab, frequent_tokens
from lab.drafters.eagle import DEFAULT_TREE, EagleDraftModel
from lab.metrics import chi_square
from lab.prompts import held_out_prompts
from lab.sampling import probs_from_logits
from tests.helpers import next_token_probs


def test_frequent_tokens_most_frequent_first_ties_by_id_and_always_first():
    ids = [torch.tensor([5, 5, 5, 2, 2, 7, 7, 1]), [9]]
    assert frequent_tokens(ids, 4, 10).tolist() == [5, 2, 7, 1]        # 2 and 7 tie: the smaller id first
    assert frequent_tokens(ids, 4, 10, always=[3]).tolist() == [3, 5, 2, 7]
    assert frequent_tokens(ids, 7, 10).tolist() == [5, 2, 7, 1, 9, 0, 3]  # never seen: in id order
    assert frequent_tokens(ids, 4, 10, always=[7, 3, 3]).tolist() == [7, 3, 5, 2]  # in the given order, once


@pytest.mark.parametrize("always, message", [([-1], r"always must be token ids in \[0, 10\)"),
                                             ([10], r"always must be token ids in \[0, 10\)"),
                                             ([7, 3, 5], r"always holds 3 distinct ids, more than size \(2\)")])
def test_frequent_tokens_checks_the_always_ids(always, message):
    """-1 silently became id 9, 10 an IndexError, and a third id was dropped without a word."""
    with pytest.raises(ValueError, match=message):
        frequent_tokens([[1, 2]], 2, 10, always=always)


def test_an_eagle_tree_rank_must_be_below_the_reduced_vocabulary(pair, reduced):
    """Ranks index the draft's scored vocabulary: rank 600 of a 512-token draft vocabulary would pick a -inf logit,
    an id the draft gave probability 0."""
    from lab.drafters import EagleDrafter

    assert EagleDrafter(pair.target, reduced, tree=[(0,), (511,)]).n_draft == 1
    with pytest.raises(ValueError, match="ranks must be < 512"):
        EagleDrafter(pair.target, reduced, tree=[(0,), (600,)])


@pytest.mark.parametrize("call, message", [
    (lambda: frequent_tokens([[1]], 0, 10), "size"),
    (lambda: frequent_tokens([[1]], 11, 10), "size must be at most vocab_size"),
    (lambda: frequent_tokens([[10]], 2, 10), r"token_ids must lie in \[0, 10\)"),
    (lambda: check_draft_vocab([1, 1], 10), "must not repeat"),
    (lambda: check_draft_vocab([0, 10], 10), r"draft_vocab must hold 1..10 ids in \[0, 10\)"),
    (lambda: check_draft_vocab([], 10), "draft_vocab must hold"),
    (lambda: check_draft_vocab([0.5], 10), "integer token ids"),
])
def test_bad_vocabularies_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.fixture(scope="module")
def reduced(pair):
    """The bundled EAGLE draft's weights over the 512 most frequent tokens of the held-out prompts (of 2,048)."""
    full = EagleDraftModel.from_pretrained(pair.target)
    vocab = frequent_tokens([pair.encode(text) for text in held_out_prompts()], 512, pair.target.config.vocab_size)
    model = EagleDraftModel(pair.target, {k: full.config[k] for k in EagleDraftModel.DEFAULTS}, draft_vocab=vocab)
    model.load_state_dict(full.state_dict(), strict=False)  # the same layers; the table stays this model's own
    return model.eval()


def test_logits_are_the_targets_rows_and_minus_infinity_elsewhere(pair, reduced):
    features = torch.randn(3, pair.target.config.hidden_size, device=pair.device)
    with torch.no_grad():
        full = pair.target.get_output_embeddings()(features)
        mine = reduced.logits(features)
        head = reduced.head_logits(features)
    vocab = reduced.draft_vocab
    assert head.shape == (3, 512) and mine.shape == full.shape
    torch.testing.assert_close(head, full[:, vocab])
    torch.testing.assert_close(mine[:, vocab], full[:, vocab])
    outside = torch.ones(full.size(-1), dtype=torch.bool, device=full.device)
    outside[vocab] = False
    assert torch.isneginf(mine[:, outside]).all()
    assert (probs_from_logits(mine, 1.0)[:, outside] == 0).all()


@pytest.mark.parametrize("mode", [{"n_draft": 4}, {"tree": DEFAULT_TREE}], ids=["chain", "tree"])
def test_greedy_equals_autoregressive_with_a_reduced_vocabulary(pair, reduced, mode):
    accepted = 0
    for text in held_out_prompts()[:2]:
        prompt = pair.encode(text)
        want = generate(pair.target, prompt, max_new_tokens=20).tokens
        gen = generate(pair.target, prompt, drafter=EagleDrafter(pair.target, reduced, **mode), max_new_tokens=20)
        assert gen.tokens == want
        drafted = [t for s in gen.steps for t in s.drafted]
        assert set(drafted) <= set(reduced.draft_vocab.tolist())  # it never drafts outside its vocabulary
        accepted += sum(s.num_accepted for s in gen.steps)
    assert accepted > 0


def test_sampling_with_a_reduced_vocabulary_keeps_the_targets_distribution(pair, reduced):
    """Tokens outside the draft vocabulary have draft probability 0: rejection sampling reaches them only through
    the residual distribution, and the first speculated token (the second: the first comes from the prefill) still
    follows the target's distribution after the prompt and the first token."""
    ids = pair.encode(held_out_prompts()[0])[:16]
    drafter = EagleDrafter(pair.target, reduced, n_draft=2)
    counts, prefixes = torch.zeros(pair.target.config.vocab_size), []
    for seed in range(600):
        gen = generate(pair.target, ids, drafter=drafter, max_new_tokens=3, temperature=1.0, seed=seed)
        assert gen.steps[0].prefill and gen.steps[1].drafted
        counts[gen.tokens[1]] += 1
        prefixes.append(ids + gen.tokens[:1])
    assert chi_square(counts, next_token_probs(pair.target, prefixes)).pvalue > 1e-3


def test_the_table_is_saved_and_read_back(pair, reduced, tmp_path):
    reduced.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["draft_vocab_size"] == 512
    loaded = EagleDraftModel.from_pretrained(pair.target, tmp_path)
    assert loaded.draft_vocab.dtype == torch.long and torch.equal(loaded.draft_vocab, reduced.draft_vocab)
    features = torch.randn(2, pair.target.config.hidden_size, device=pair.device)
    with torch.no_grad():
        torch.testing.assert_close(loaded.head_logits(features), reduced.head_logits(features))
    config["draft_vocab_size"] = None  # a config that forgot the table
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="disagree on the draft vocabulary"):
        EagleDraftModel.from_pretrained(pair.target, tmp_path)


# --- Medusa heads over a draft vocabulary ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reduced_heads(pair):
    """The bundled Medusa heads' blocks with output layers over the 512 most frequent held-out tokens (their rows of
    the committed output layers)."""
    from lab.drafters.medusa import MEDUSA_DIR, MedusaHeads

    full = MedusaHeads.load(MEDUSA_DIR)
    vocab = frequent_tokens([pair.encode(text) for text in held_out_prompts()], 512, pair.target.config.vocab_size)
    heads = MedusaHeads(full.hidden_size, full.vocab_size, full.num_heads, draft_vocab=vocab)
    state = {k: (v[vocab] if k.startswith("lm_heads") else v) for k, v in full.state_dict().items()}
    heads.load_state_dict({**state, "draft_vocab": vocab})
    return heads.eval(), full


def test_medusa_heads_over_a_draft_vocabulary_score_its_rows(pair, reduced_heads):
    heads, full = reduced_heads
    features = torch.randn(2, full.hidden_size)
    with torch.no_grad():
        mine, theirs = heads(features), full(features)
    assert mine.shape == (2, full.num_heads, 512)
    torch.testing.assert_close(mine, theirs[..., heads.draft_vocab])
    indices = torch.tensor([[0, 511], [3, 7]])
    assert torch.equal(heads.to_target(indices), heads.draft_vocab[indices])
    outside = next(t for t in range(full.vocab_size) if t not in set(heads.draft_vocab.tolist()))
    ids = torch.tensor([int(heads.draft_vocab[5]), outside, -100])
    assert heads.from_target_ids(ids).tolist() == [5, -100, -100]


def test_medusa_from_target_copies_the_targets_rows(pair):
    from lab.drafters.medusa import MedusaHeads

    vocab = torch.tensor([7, 3, 100])
    heads = MedusaHeads.from_target(pair.target, 2, draft_vocab=vocab)
    for head in heads.lm_heads:
        torch.testing.assert_close(head.weight, pair.target.get_output_embeddings().weight[vocab])


def test_medusa_with_a_draft_vocabulary_keeps_greedy_parity_and_its_files(pair, reduced_heads, tmp_path):
    from lab.drafters.medusa import MedusaDrafter, MedusaHeads

    heads, _ = reduced_heads
    accepted = 0
    for text in held_out_prompts()[:2]:
        prompt = pair.encode(text)
        want = generate(pair.target, prompt, max_new_tokens=20).tokens
        gen = generate(pair.target, prompt, drafter=MedusaDrafter(pair.target, heads), max_new_tokens=20)
        assert gen.tokens == want
        assert {t for s in gen.steps for t in s.drafted} <= set(heads.draft_vocab.tolist())
        accepted += sum(s.num_accepted for s in gen.steps)
    assert accepted > 0
    heads.save(tmp_path, target=pair.target)
    loaded = MedusaHeads.load(tmp_path, target=pair.target)
    # loaded onto the target's device
    assert torch.equal(loaded.draft_vocab.cpu(), heads.draft_vocab) and loaded.output_size == 512
    assert json.loads((tmp_path / "config.json").read_text())["draft_vocab_size"] == 512


def test_medusa_loss_skips_unscored_and_outside_tokens(pair, reduced_heads):
    from lab.training.loop import cpu_autocast
    from lab.training.medusa import medusa_loss

    heads, _ = reduced_heads
    ids = pair.encode(held_out_prompts()[0])[:12]
    with torch.no_grad():
        hidden = pair.target.model(input_ids=torch.tensor([ids], device=pair.device)).last_hidden_state.cpu()
    ids = torch.tensor([ids])  # the heads here are on the CPU
    labels = ids.clone()
    labels[0, :6] = -100  # the "prompt"
    with torch.no_grad():
        scored = medusa_loss(heads, hidden, ids, 0.8, labels)
        with cpu_autocast():  # as the loss computes its logits
            logits = heads(hidden).float()
    want = 0.0
    targets = heads.from_target_ids(labels)
    for k in range(1, heads.num_heads + 1):
        gold = targets[0, 1 + k:]
        keep = gold != -100
        rows = logits[0, :ids.size(1) - 1 - k, k - 1][keep]
        want += 0.8 ** k * torch.nn.functional.cross_entropy(rows, gold[keep]).item()
    assert abs(scored.item() - want) < 1e-3
