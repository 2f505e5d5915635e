"""Token trees: geometry (lab.trees), one-forward verification on a transformers model, cache compaction to the
accepted path, greedy and exact sampled tree verification, typical acceptance, and the decode loop with trees."""
import math

import pytest
import torch

from lab import trees
from lab.decode import autoregressive, generate
from lab.drafters import Draft
from lab.kv import cache_length, keep_positions
from lab.metrics import chi_square
from lab.models import forward, new_cache
from lab.sampling import probs_from_logits
from lab.verify import verify_tree_greedy, verify_tree_sampled, verify_tree_typical

PREFIX = [5, 9, 2, 7, 11]


def test_issue_example_positions_and_mask():
    parents = [-1, -1, 1]  # A, B at depth 0 under the last committed token; C under B
    assert trees.position_ids(parents, 5).tolist() == [5, 5, 6]
    mask = trees.tree_attention_mask(parents, 5)
    assert mask.shape == (3, 8) and mask.dtype == torch.bool
    assert mask[:, :5].all()
    assert mask[0, 5:].tolist() == [True, False, False]
    assert mask[1, 5:].tolist() == [False, True, False]
    assert mask[2, 5:].tolist() == [False, True, True]  # C: prefix, B and itself, not its uncle A
    assert trees.paths(parents) == [[0], [1, 2]]
    assert trees.depths(parents).tolist() == [0, 0, 1]


def test_chain_is_the_degenerate_tree():
    parents = trees.chain_parents(4)
    assert parents == [-1, 0, 1, 2]
    assert torch.equal(trees.tree_attention_mask(parents, 0), torch.ones(4, 4, dtype=torch.bool).tril())
    assert trees.position_ids(parents, 3).tolist() == [3, 4, 5, 6]
    assert trees.paths(parents) == [[0, 1, 2, 3]]
    assert trees.paths([]) == [] and trees.depths([]).tolist() == []


@pytest.mark.parametrize("parents", [[0], [-1, 1], [-2], [-1, 3, 0]])
def test_parents_must_point_backwards(parents):
    with pytest.raises(ValueError, match="parents"):
        trees.tree_attention_mask(parents, 2)


def test_prefix_len_errors():
    with pytest.raises(ValueError, match="prefix_len"):
        trees.position_ids([-1], 0)
    with pytest.raises(ValueError, match="prefix_len"):
        trees.tree_attention_mask([-1], -1)


def _tree_forward(target, prefix, tokens, parents):
    """The target's logits at every node of a tree after ``prefix``, in one forward (the last prefix token is
    fed with the nodes, as the decode loop does)."""
    cache = new_cache()
    forward(target, prefix[:-1], cache)
    mask = trees.tree_attention_mask([-1] + [p + 1 for p in parents], 0)
    positions = [len(prefix) - 1] + trees.position_ids(parents, len(prefix)).tolist()
    logits = forward(target, [prefix[-1]] + tokens, cache, attention_mask=mask, position_ids=positions)
    return logits, cache


def test_one_forward_equals_a_plain_forward_per_path(target):
    tokens, parents = [20, 30, 40], [-1, -1, 1]  # A=20, B=30, C=40 under B
    logits, _ = _tree_forward(target, PREFIX, tokens, parents)
    plain_c = forward(target, PREFIX + [30, 40], new_cache())[-1]
    plain_a = forward(target, PREFIX + [20], new_cache())[-1]
    plain_root = forward(target, PREFIX, new_cache())[-1]
    torch.testing.assert_close(logits[3], plain_c, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logits[1], plain_a, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logits[0], plain_root, atol=1e-4, rtol=1e-4)


def test_bigger_tree_every_node_matches_its_path(target):
    tokens = [1, 2, 3, 4, 5, 6, 7]
    parents = [-1, -1, 0, 0, 1, 2, 4]
    logits, _ = _tree_forward(target, PREFIX, tokens, parents)
    for node in range(len(tokens)):
        path = trees.ancestors(parents, node) + [node]
        plain = forward(target, PREFIX + [tokens[i] for i in path], new_cache())[-1]
        torch.testing.assert_close(logits[1 + node], plain, atol=1e-4, rtol=1e-4)


def test_compacted_cache_equals_a_fresh_forward(target):
    tokens, parents = [1, 2, 3, 4, 5, 6], [-1, -1, 1, 1, 3, 3]
    _, cache = _tree_forward(target, PREFIX, tokens, parents)
    base = len(PREFIX) - 1
    path = [1, 3, 5]  # B's branch, skipping A and the first child of each level
    keep_positions(cache, base, [0] + [1 + i for i in path])
    assert cache_length(cache) == len(PREFIX) + len(path)
    committed = PREFIX + [tokens[i] for i in path]
    after = forward(target, [13], cache)[-1]
    fresh = forward(target, committed + [13], new_cache())[-1]
    torch.testing.assert_close(after, fresh, atol=1e-4, rtol=1e-4)


def test_keep_positions_errors_and_prefix_case(target):
    cache = new_cache()
    forward(target, PREFIX, cache)
    with pytest.raises(ValueError, match="keep"):
        keep_positions(cache, 2, [1, 0])
    with pytest.raises(ValueError, match="keep"):
        keep_positions(cache, 2, [0, 3])
    with pytest.raises(ValueError, match="start"):
        keep_positions(cache, 9, [])
    keep_positions(cache, 2, [0, 1])  # a prefix: plain crop
    assert cache_length(cache) == 4


def test_greedy_tree_takes_the_longest_matching_path():
    tokens, parents = [10, 11, 12, 13, 14], [-1, -1, 1, 1, 3]
    # target argmax per row: row 0 (after last) -> 11, row 2 (after node 1) -> 13, row 4 (after node 3) -> 14
    argmax = [11, 0, 13, 0, 14, 99]
    result = verify_tree_greedy(argmax, tokens, parents)
    assert result.path == [1, 3, 4] and result.num_accepted == 3
    assert result.next_token == 99 and result.kind == "bonus"
    argmax = [11, 0, 50, 0, 14, 99]
    result = verify_tree_greedy(argmax, tokens, parents)
    assert result.path == [1] and result.next_token == 50 and result.kind == "resampled"
    with pytest.raises(ValueError, match="rows"):
        verify_tree_greedy(argmax[:-1], tokens, parents)
    with pytest.raises(ValueError, match="parents"):
        verify_tree_greedy(argmax, tokens, parents[:-1])


TARGET = torch.tensor([0.1, 0.4, 0.3, 0.2, 0.0])
DRAFT = torch.tensor([0.5, 0.1, 0.1, 0.1, 0.2])


def _first_token_counts(make_tree, runs=20000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    counts = torch.zeros(5)
    for _ in range(runs):
        tokens, draft_probs = make_tree(gen)
        rows = torch.stack([TARGET] * (len(tokens) + 1))
        result = verify_tree_sampled(rows, tokens, [-1] * len(tokens), draft_probs, gen)
        counts[tokens[result.path[0]] if result.path else result.next_token] += 1
    return counts


def _iid(gen):
    tokens = torch.multinomial(DRAFT, 3, replacement=True, generator=gen).tolist()
    return tokens, torch.stack([DRAFT] * 3)


def _without_replacement(gen):
    q, tokens, rows = DRAFT.clone(), [], []
    for _ in range(3):
        rows.append(q.clone())
        tokens.append(int(torch.multinomial(q, 1, generator=gen)))
        q[tokens[-1]] = 0
        q = q / q.sum()
    return tokens, torch.stack(rows)


def _top_k(gen):
    return [0, 4, 1], None  # deterministic choices, including one the target gives zero probability


@pytest.mark.parametrize("make_tree", [_iid, _without_replacement, _top_k])
def test_sampled_siblings_are_exact(make_tree):
    counts = _first_token_counts(make_tree)
    assert counts[4] == 0  # a zero-probability token is never emitted
    assert chi_square(counts, TARGET).pvalue > 1e-3


def test_sampled_two_levels_joint_distribution_is_exact():
    """A depth-2 deterministic tree on a 2-token context model: the emitted pair follows target(a) * target(b|a)."""
    second = torch.tensor([[0.6, 0.4], [0.1, 0.9]])  # target(b | a)
    first = torch.tensor([0.3, 0.7])
    gen = torch.Generator().manual_seed(1)
    counts = torch.zeros(4)
    tokens, parents = [0, 1, 1], [-1, -1, 0]  # 0 and 1 at depth 0; 1 under 0
    rows = torch.stack([first, second[0], second[1], second[1]])  # row 1+i: after node i
    for _ in range(20000):
        result = verify_tree_sampled(rows, tokens, parents, None, gen)
        emitted = [tokens[i] for i in result.path] + [result.next_token]
        if len(emitted) == 1:  # only the first token was decided; draw the second from the target, as a step would
            emitted.append(int(torch.multinomial(second[emitted[0]], 1, generator=gen)))
        counts[2 * emitted[0] + emitted[1]] += 1
    expected = (first[:, None] * second).reshape(-1)
    assert chi_square(counts, expected).pvalue > 1e-3


def test_typical_acceptance_drifts_from_the_target():
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(5)
    rows = torch.stack([TARGET] * 2)
    for _ in range(5000):
        result = verify_tree_typical(rows, [1], [-1], gen)
        counts[1 if result.path else result.next_token] += 1
    assert counts[1] == 5000  # 0.4 is above the threshold: always accepted
    assert chi_square(counts, TARGET).pvalue < 1e-6


# --- the decode loop with token trees ------------------------------------------------------------------------

class TopKTreeDrafter:
    """A test drafter that drafts a tree from a model: ``width`` children per level under the first child of
    the level above, ``depth`` levels. Greedy: the model's top-``width``; sampling: drawn without replacement
    from its processed distribution (probs rows with earlier siblings removed), which must stay exact."""

    def __init__(self, model, width=2, depth=3):
        self.model, self.width, self.depth = model, width, depth

    def reset(self, prompt_ids):
        pass

    def propose(self, request):
        context = list(request.tokens)
        tokens, parents, rows = [], [], []
        spine = -1
        for _ in range(min(self.depth, request.max_tokens)):
            logits = forward(self.model, context, new_cache())[-1]
            q = probs_from_logits(logits, request.temperature or 1.0, request.top_k, request.top_p).cpu()
            if request.temperature == 0:
                picks = logits.topk(self.width).indices.tolist()
            else:
                picks = []
                for _ in range(self.width):
                    if q.sum() <= 0:
                        break
                    rows.append(q.clone())
                    picks.append(int(torch.multinomial(q, 1, generator=request.generator)))
                    q[picks[-1]] = 0
                    q = q / q.sum() if q.sum() > 0 else q
            first = len(tokens)
            for t in picks:
                tokens.append(t)
                parents.append(spine)
            spine = first
            context.append(picks[0])
        probs = torch.stack(rows) if rows else None
        return Draft(tokens, probs, calls=len(set(parents)), parents=parents)

    def update(self, num_accepted, next_token):
        pass


PROMPTS = [[3], [1, 2, 3, 4, 5], list(range(10, 40))]


@pytest.mark.parametrize("model", ["target", "noisy"])
def test_tree_decoding_greedy_parity(target, noisy_draft, model):
    drafter_model = target if model == "target" else noisy_draft
    for prompt in PROMPTS:
        ref = autoregressive(target, prompt, max_new_tokens=30).tokens
        gen = generate(target, prompt, drafter=TopKTreeDrafter(drafter_model), max_new_tokens=30)
        assert gen.tokens == ref
        for s in gen.steps:
            assert s.parents is not None and s.emitted[: s.num_accepted] == [s.drafted[i] for i in s.path]
        if model == "target":  # a perfect tree model: every step accepts the whole spine
            assert gen.stats["tokens_per_target_call"] > 3.0


def test_tree_decoding_eos_and_max_new_tokens(target):
    prompt = PROMPTS[1]
    ref = autoregressive(target, prompt, max_new_tokens=30).tokens
    for j in range(8):
        eos = ref[j]
        gen = generate(target, prompt, drafter=TopKTreeDrafter(target), max_new_tokens=30, eos_token_id=eos)
        assert gen.tokens == ref[: ref.index(eos) + 1]
    for m in range(1, 9):
        assert generate(target, prompt, drafter=TopKTreeDrafter(target), max_new_tokens=m).tokens == ref[:m]


def test_tree_decoding_first_sampled_token_follows_target(target, noisy_draft):
    prompt = PROMPTS[1]
    target_probs = probs_from_logits(forward(target, prompt, new_cache())[-1], 1.0).cpu()
    counts = torch.zeros(64)
    drafter = TopKTreeDrafter(noisy_draft, width=3, depth=2)
    for seed in range(1200):
        gen = generate(target, prompt, drafter=drafter, max_new_tokens=2, temperature=1.0, seed=seed)
        counts[gen.tokens[0]] += 1
    assert chi_square(counts, target_probs).pvalue > 1e-3


def test_typical_acceptance_is_opt_in_and_checked(target, noisy_draft):
    with pytest.raises(ValueError, match="acceptance"):
        generate(target, [1, 2], max_new_tokens=3, acceptance="fast")
    gen = generate(target, PROMPTS[1], drafter=TopKTreeDrafter(noisy_draft), max_new_tokens=20, temperature=1.0,
                   seed=0, acceptance="typical")
    assert len(gen.tokens) == 20


@pytest.mark.parametrize("greedy", [True, False])
def test_typical_acceptance_where_it_changes_nothing_warns(target, noisy_draft, greedy):
    drafter = TopKTreeDrafter(noisy_draft) if greedy else None
    temperature = 0.0 if greedy else 1.0
    with pytest.warns(UserWarning, match="greedy" if greedy else "autoregressive"):
        gen = generate(target, PROMPTS[1], drafter=drafter, max_new_tokens=6, temperature=temperature, seed=0,
                       acceptance="typical")
    exact = generate(target, PROMPTS[1], drafter=drafter, max_new_tokens=6, temperature=temperature, seed=0)
    assert gen.tokens == exact.tokens


def test_malformed_tree_is_rejected(target):
    class Bad:
        def reset(self, prompt_ids):
            pass

        def propose(self, request):
            return Draft([1, 2], None, parents=[-1])

        def update(self, num_accepted, next_token):
            pass

    with pytest.raises(ValueError, match="parents"):
        generate(target, [1, 2], drafter=Bad(), max_new_tokens=3)


def test_typical_takes_the_longest_passing_path_with_medusa_constants():
    from lab.verify import typical_threshold

    flat = torch.full((100,), 0.01)
    assert float(typical_threshold(flat)) == pytest.approx(0.3 * 0.01)  # delta * exp(-H) with H = ln 100
    sure = torch.tensor([0.999] + [0.001 / 99] * 99)
    assert float(typical_threshold(sure)) == pytest.approx(0.09)  # capped by epsilon
    rows = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    # nodes 0 and 1 both pass at the top; only node 1 has a passing child (node 2): the longer path wins
    result = verify_tree_typical(rows, [0, 1, 2], [-1, -1, 1], torch.Generator().manual_seed(0))
    assert result.path == [1, 2] and result.next_token == 2 and result.kind == "bonus"


def test_non_integer_parents_choices_and_offsets_are_rejected(target):
    with pytest.raises(ValueError, match="parents"):
        trees.depths([-1, 0.7])
    for bad in ([(0.5,)], [(True,)], ["01"], [(0, -1)], [()]):
        with pytest.raises(ValueError, match="choices"):
            trees.check_choices(bad)
    with pytest.raises(ValueError, match="rank"):
        trees.check_choices([(0,), (5000,)], max_rank=64)
    assert trees.check_choices([(1,), (0, 0), (0,)]) == [(0,), (1,), (0, 0)]
    assert trees.choices_parents([(0,), (1,), (0, 0)]) == [-1, -1, 0]
    cache = new_cache()
    forward(target, PREFIX, cache)
    with pytest.raises(ValueError, match="integer"):
        keep_positions(cache, 1, [0.9, 2.2])


def test_numpy_and_tensor_integers_work_bools_and_floats_do_not(target):
    import numpy as np

    assert trees.position_ids([-1, 0, -1], np.int64(3)).tolist() == [3, 4, 3]
    assert trees.position_ids([-1], torch.tensor(7)).tolist() == [7]
    assert trees.tree_attention_mask([-1, 0], np.int32(2)).shape == (2, 4)
    assert trees.ancestors([-1, 0, 1], np.int64(2)) == [0, 1]
    assert trees.children([-1, 0, 0], np.int64(0)) == [1, 2]
    assert trees.chain_parents(np.int64(3)) == [-1, 0, 1] and trees.chain_parents(0) == []
    assert trees.depths(np.array([-1, 0, 0])).tolist() == [0, 1, 1]
    for bad in (True, torch.tensor(True), 3.0, torch.tensor(3.0), np.float64(3)):
        with pytest.raises(ValueError, match="prefix_len"):
            trees.position_ids([-1], bad)
    with pytest.raises(ValueError, match="parents"):
        trees.depths([-1, torch.tensor(True)])
    for bad in (-3, -1, 2.0, True):
        with pytest.raises(ValueError, match="n must be an integer >= 0"):
            trees.chain_parents(bad)
    for bad in (1.0, 3, -1):
        with pytest.raises(ValueError, match="node"):
            trees.ancestors([-1, 0, 1], bad)
    with pytest.raises(ValueError, match="node"):
        trees.children([-1, 0], 5)

    cache = new_cache()
    forward(target, PREFIX + [30, 31, 32], cache)
    keep_positions(cache, np.int64(len(PREFIX)), torch.tensor([0, 2]))
    assert cache_length(cache) == len(PREFIX) + 2
    with pytest.raises(ValueError, match="start"):
        keep_positions(cache, torch.tensor(True), [0])
    with pytest.raises(ValueError, match="integer"):
        keep_positions(cache, 1, [torch.tensor(True)])


def test_sampled_verification_uses_the_draft_probabilities():
    # With draft == target every draft is accepted (u * draft < target for every u < 1). A verifier that ignored
    # draft_probs (every draft treated as one-hot) would still be exact but would reject most of these.
    p = torch.tensor([0.1, 0.4, 0.3, 0.2])
    for seed in range(200):
        gen = torch.Generator().manual_seed(seed)
        tokens = torch.multinomial(p, 3, replacement=True, generator=gen).tolist()
        r = verify_tree_sampled(torch.stack([p] * 4), tokens, [-1, 0, 1], torch.stack([p] * 3), gen)
        assert (r.num_accepted, r.kind) == (3, "bonus")


def test_sampled_rejection_is_reported_as_resampled():
    p = torch.tensor([0.5, 0.5, 0.0])  # the target never makes token 2
    r = verify_tree_sampled(torch.stack([p, p]), [2], [-1], None, torch.Generator().manual_seed(0))
    assert (r.num_accepted, r.kind) == (0, "resampled") and r.next_token in (0, 1)


def test_typical_default_constants_decide_a_borderline_node():
    # entropy H of this row gives the threshold 0.3 * exp(-H) = 0.0501, under the 0.09 cap (Medusa's defaults)
    row = torch.tensor([0.5, 0.04, 0.06] + [0.4 / 7] * 7)
    entropy = -(row * row.log()).sum()
    assert abs(0.3 * math.exp(-entropy.item()) - 0.0501) < 1e-4
    rows = torch.stack([row, row])
    gen = torch.Generator().manual_seed(0)
    assert verify_tree_typical(rows, [1], [-1], gen).path == []   # 0.04 is below the threshold
    assert verify_tree_typical(rows, [2], [-1], gen).path == [0]  # 0.06 is above it


def test_typical_first_of_equal_paths_wins_and_next_token_comes_from_its_row():
    gen = torch.Generator().manual_seed(0)
    rows = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    r = verify_tree_typical(rows, [0, 1], [-1, -1], gen)  # both siblings pass; the first listed wins
    assert (r.path, r.next_token, r.kind) == ([0], 2, "bonus")  # drawn from row 1, the one after node 0
    rows = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    r = verify_tree_typical(rows, [1], [-1], gen)
    assert (r.path, r.next_token, r.kind) == ([0], 0, "bonus")
