"""Oracles of batched speculative decoding (lab.batched): every row of a batch equals the one-sequence loop
(lab.decode.generate) token for token in float32 greedy decoding, for every drafter, with rows of different prompt
lengths and different acceptance running ragged; every row's first sampled token follows the target's
distribution; EOS inside one row's block ends that row only; exact max_new_tokens; bad input named."""
import pytest
import torch

from lab.batched import generate_batch, row_seeds
from lab.decode import generate
from lab.drafters import DraftModelDrafter, PromptLookupDrafter, SuffixDecodingDrafter
from lab.kv import cache_length
from lab.metrics import chi_square
from lab.registry import DRAFTERS, make_drafter
from tests.helpers import next_token_probs, tiny_llama

SHAKESPEARE = ["ROMEO:\nWhat light through yonder window breaks", "To be",
               "KING HENRY:\nNow are we well resolved; and by God's help and yours"]
MAX_NEW = 14


def ragged(batch) -> bool:
    """Whether some step saw rows accept different numbers of drafts (so their committed lengths parted)."""
    steps = [row.steps for row in batch.rows]
    return any(len({s[i].num_accepted for s in steps if i < len(s)}) > 1 for i in range(max(map(len, steps))))


@pytest.fixture(scope="module")
def sticky_target():
    """A tiny Llama whose greedy text soon repeats (attention and MLP scaled down, as in the lookup drafters'
    fixtures), so prompt lookup hits while a wrong mask or position still changes its argmax."""
    model = tiny_llama(5)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(0.05)
            layer.mlp.down_proj.weight.mul_(0.05)
    return model


@pytest.fixture(scope="module")
def shakespeare_ids(pair):
    return [pair.encode(text) for text in SHAKESPEARE]


@pytest.mark.parametrize("kind", DRAFTERS)
def test_greedy_rows_equal_the_one_sequence_loop_for_every_drafter(pair, shakespeare_ids, kind):
    """Oracle 1 per row, for every drafter of the registry on the Shakespeare pair: prompts of 3 lengths, N of 2,
    3 and 4 (where the drafter takes one), so rows accept differently and run ragged."""
    drafters = [make_drafter(kind, pair, 2 + r) for r in range(3)]
    batch = generate_batch(pair.target, shakespeare_ids, drafters=drafters, max_new_tokens=MAX_NEW)
    for r, ids in enumerate(shakespeare_ids):
        ref = generate(pair.target, ids, drafter=make_drafter(kind, pair, 2 + r), max_new_tokens=MAX_NEW)
        assert batch.rows[r].tokens == ref.tokens, (kind, r)
        assert [s.num_accepted for s in batch.rows[r].steps] == [s.num_accepted for s in ref.steps], (kind, r)
    assert ragged(batch), kind
    # the batch's forwards after the prefill: as many as its longest row's decode steps
    assert batch.stats["target_calls"] == max(len(row.steps) - 1 for row in batch.rows)
    assert batch.stats["new_tokens"] == 3 * MAX_NEW


def test_suffix_decoding_trees_and_a_mixed_batch(pair, shakespeare_ids):
    """SuffixDecodingDrafter's token trees, and one batch mixing a tree drafter, a chain drafter, Medusa (hidden
    states), Lookahead (extra tokens) and an autoregressive row: every row equals its own one-sequence run."""
    prompt = shakespeare_ids[0] + shakespeare_ids[0][:6]  # the request repeats itself: suffix and lookup match
    prompts = [prompt, shakespeare_ids[1], shakespeare_ids[2], prompt, shakespeare_ids[0]]
    kinds = ["suffix", "model", "medusa", "lookahead", None]

    def build(kind):
        if kind == "suffix":
            return SuffixDecodingDrafter()
        return None if kind is None else make_drafter(kind, pair, 3)

    batch = generate_batch(pair.target, prompts, drafters=[build(k) for k in kinds], max_new_tokens=MAX_NEW)
    for r, (ids, kind) in enumerate(zip(prompts, kinds)):
        assert batch.rows[r].tokens == generate(pair.target, ids, drafter=build(kind), max_new_tokens=MAX_NEW).tokens
    assert any(s.parents is not None for s in batch.rows[0].steps)  # the suffix row verified a tree
    assert batch.rows[4].stats["drafted_tokens"] == 0
    assert batch.stats["padded_slots"] > 0  # blocks of different widths shared forwards


def test_batch_of_one_is_the_one_sequence_loop(target, noisy_draft):
    prompt = [3, 9, 27, 1, 40]
    one = generate_batch(target, [prompt], drafters=[DraftModelDrafter(noisy_draft, 3)], max_new_tokens=20)
    ref = generate(target, prompt, drafter=DraftModelDrafter(noisy_draft, 3), max_new_tokens=20)
    row = one.rows[0]
    assert row.tokens == ref.tokens
    assert [(s.drafted, s.num_accepted, s.emitted, s.last_kind) for s in row.steps] == \
           [(s.drafted, s.num_accepted, s.emitted, s.last_kind) for s in ref.steps]
    for key in ("new_tokens", "target_calls", "drafted_tokens", "accepted_tokens", "per_position_acceptance"):
        assert row.stats[key] == ref.stats[key], key
    assert row.steps[0].prefill and ref.steps[0].prefill
    assert one.stats["padded_slots"] == 0 and one.stats["target_calls"] == len(ref.steps) - 1


def test_ragged_rows_on_tiny_models_with_prompts_of_length_one(target, draft, noisy_draft, sticky_target):
    """Prompts of length 1 (nothing to prefill) beside long ones, a perfect drafter (the target itself, every block
    accepted), a poor one and a noisy one, on the random target and on the sticky one (whose lookups hit)."""
    prompts = [[5], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [7, 7], [30, 31, 32, 33]]
    for model in (target, sticky_target):
        makers = [lambda: DraftModelDrafter(model, 4), lambda: DraftModelDrafter(draft, 2),
                  lambda: DraftModelDrafter(noisy_draft, 5), lambda: PromptLookupDrafter(max_ngram=2, n_draft=3)]
        batch = generate_batch(model, prompts, drafters=[m() for m in makers], max_new_tokens=30)
        for r, ids in enumerate(prompts):
            assert batch.rows[r].tokens == generate(model, ids, drafter=makers[r](), max_new_tokens=30).tokens, r
        assert ragged(batch)
        assert batch.rows[0].stats["acceptance_rate"] == 1.0  # the perfect drafter


def test_eos_inside_one_rows_block_ends_that_row_only(target):
    """The perfect drafter emits blocks of 5 after the prefill's one token (tokens 1, 2-6, 7-11, ...); EOS = one
    of row 0's 7th to 10th tokens, inside its second decode block, never produced by row 1: row 0 stops there (the
    block cut after EOS), row 1 runs on to max_new_tokens, both as generate does."""
    prompts = [[2, 4, 6, 8], [11, 3]]
    refs = [generate(target, p, max_new_tokens=20).tokens for p in prompts]
    eos = next(t for t in refs[0][6:10] if t not in refs[1] and t not in refs[0][:6])
    cut = refs[0].index(eos) + 1
    batch = generate_batch(target, prompts, drafters=[DraftModelDrafter(target, 4), DraftModelDrafter(target, 4)],
                           max_new_tokens=20, eos_token_id=eos)
    assert batch.rows[0].tokens == refs[0][:cut] and 6 < cut < 11
    assert batch.rows[0].steps[-1].truncated  # EOS landed inside the block, not at its end
    assert batch.rows[1].tokens == refs[1]
    # row 0: its prefill and two decode steps; the batch's forwards after the prefill are row 1's decode steps
    assert len(batch.rows[0].steps) == 3 < len(batch.rows[1].steps) == batch.stats["target_calls"] + 1
    # the finished row left the batch: later forwards fed one row only
    assert batch.stats["fed_slots"] == 2 * 5 * 2 + sum(s.target_tokens for s in batch.rows[1].steps[3:])


@pytest.mark.parametrize("max_new", [1, 2, 7, 13])
def test_exact_max_new_tokens(target, max_new):
    prompts = [[1, 2, 3], [9], [4, 4, 4, 4, 4, 4]]
    batch = generate_batch(target, prompts, drafters=[DraftModelDrafter(target, 4) for _ in prompts],
                           max_new_tokens=max_new)
    for r, p in enumerate(prompts):
        assert batch.rows[r].tokens == generate(target, p, max_new_tokens=max_new).tokens
        assert len(batch.rows[r].tokens) == max_new


def test_sampled_rows_equal_generate_with_the_row_seed(target, noisy_draft):
    """Row r draws with its own generator seeded seed + r, in generate's order: the same tokens as
    generate(seed=seed + r), at T = 0.9 with top-k, for a sampling drafter and a deterministic one."""
    prompts = [[1, 2, 3, 9, 1, 2, 3], [40, 41], [7]]
    makers = [lambda: DraftModelDrafter(noisy_draft, 3), lambda: PromptLookupDrafter(max_ngram=2, n_draft=3), None]
    kw = dict(max_new_tokens=25, temperature=0.9, top_k=20)
    batch = generate_batch(target, prompts, drafters=[m() if m else None for m in makers], seed=11, **kw)
    assert row_seeds(11, 3) == [11, 12, 13]
    for r, p in enumerate(prompts):
        ref = generate(target, p, drafter=makers[r]() if makers[r] else None, seed=11 + r, **kw)
        assert batch.rows[r].tokens == ref.tokens, r
    # a seed computed with torch works as in generate (it was a TypeError here only)
    again = generate_batch(target, prompts, drafters=[m() if m else None for m in makers], seed=torch.tensor(11), **kw)
    assert again.tokens == batch.tokens


@pytest.mark.parametrize("kw", [dict(temperature=1.0), dict(temperature=0.7, top_p=0.9)])
def test_each_rows_first_speculated_token_follows_the_target(target, noisy_draft, kw):
    """Oracle 2 per row: over 400 seeds, each row's second token, the first one a decode step verifies (drafted
    and verified, or resampled; the first came from the prefill), is distributed as the target's processed
    distribution after the row's prompt and first token (chi-square against the mixture over the samples' first
    tokens), for a sampling draft, a deterministic one (one-hot) and no drafter, in one batch. Row 1's prompt makes
    its first token nearly certain, so its draft is verified after one known context and a wrong residual cannot
    average out (resampling from the target instead gave p = 4e-5 and 4e-4 at 300 seeds)."""
    # row 0's prompt holds most of the vocabulary, so its lookup finds the first token (a 1-gram) in most samples
    prompts = [list(range(3, 48)) + [3, 4], [48, 35, 56, 27, 40, 52], [50, 3, 17, 22]]
    counts, prefixes, drafted = torch.zeros(len(prompts), 64), [[] for _ in prompts], 0
    for s in range(400):
        drafters = [PromptLookupDrafter(max_ngram=3, n_draft=3), DraftModelDrafter(noisy_draft, 2), None]
        batch = generate_batch(target, prompts, drafters=drafters, max_new_tokens=3, seed=10 * s, **kw)
        for r, prompt in enumerate(prompts):
            tokens = batch.rows[r].tokens
            counts[r, tokens[1]] += 1
            prefixes[r].append(prompt + tokens[:1])
        drafted += bool(batch.rows[0].steps[1].drafted)
    assert drafted > 200  # the lookup row did draft in most samples
    for r in range(len(prompts)):
        expected = next_token_probs(target, prefixes[r], **kw).float()
        assert (counts[r][expected == 0] == 0).all(), r
        assert chi_square(counts[r], expected).pvalue > 1e-3, r


def forward_batch_sizes(model) -> tuple:
    """``(sizes, handle)``: every later forward of ``model`` appends its batch size to ``sizes``."""
    sizes: list = []
    handle = model.register_forward_hook(lambda _m, _a, kwargs, _o: sizes.append(kwargs["input_ids"].shape[0]),
                                         with_kwargs=True)
    return sizes, handle


def scheduled_calls(step_counts: list, max_rows: int) -> int:
    """The verification forwards a continuous batch of ``max_rows`` slots needs for requests taking
    ``step_counts`` decode steps each, admitted in order as soon as a slot is free (a request of 0 steps ended in
    its prefill and frees its slot at once)."""
    waiting, running, calls = list(step_counts), [], 0
    while running or waiting:
        while waiting and len(running) < max_rows:
            steps = waiting.pop(0)
            if steps:
                running.append(steps)
        if not running:
            break
        calls += 1
        running = [k - 1 for k in running if k > 1]
    return calls


@pytest.mark.parametrize("max_rows", [1, 2, 3])
def test_continuous_batching_keeps_every_row_and_refills_finished_ones(target, draft, noisy_draft, sticky_target,
                                                                       max_rows, monkeypatch):
    """With max_rows below the number of prompts, waiting prompts join as rows finish: newcomers whose prompts
    are longer than the shared cache (max_rows = 2), shorter than it (3) and of length one, drafters that finish
    early (EOS of row 0 ends it after a few steps) beside ones that run to the end. Every row equals its
    one-sequence run token for token and step for step; no forward holds more than max_rows rows, and a finished
    row's slot is refilled at once: the forwards are exactly those of an in-order scheduler with max_rows slots."""
    import lab.batched

    prompts = [[2, 4, 6, 8], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17], list(range(20, 60)),
               [30, 31, 32, 33], [5], [9, 1, 9, 1, 9, 1]]
    makers = [lambda: DraftModelDrafter(sticky_target, 4), lambda: DraftModelDrafter(draft, 2),
              lambda: DraftModelDrafter(noisy_draft, 5), lambda: PromptLookupDrafter(max_ngram=2, n_draft=3), None,
              lambda: DraftModelDrafter(sticky_target, 3)]
    eos = generate(sticky_target, prompts[0], max_new_tokens=8).tokens[5]
    refs = [generate(sticky_target, p, drafter=m() if m else None, max_new_tokens=25, eos_token_id=eos)
            for p, m in zip(prompts, makers)]
    assert len(refs[0].tokens) <= 6 and max(len(r.tokens) for r in refs) == 25  # rows finish at different steps
    joins = []  # (shared cache slots, newcomers' slots) at each join beside running rows
    append_rows = lab.batched._append_rows
    monkeypatch.setattr(lab.batched, "_append_rows", lambda cache, joined, count: (
        joins.append((cache_length(cache), cache_length(joined))), append_rows(cache, joined, count))[1])
    sizes, handle = forward_batch_sizes(sticky_target)
    try:
        batch = generate_batch(sticky_target, prompts, drafters=[m() if m else None for m in makers],
                               max_new_tokens=25, eos_token_id=eos, max_rows=max_rows)
    finally:
        handle.remove()
    for r, ref in enumerate(refs):
        assert batch.rows[r].tokens == ref.tokens, r
        assert [s.num_accepted for s in batch.rows[r].steps] == [s.num_accepted for s in ref.steps], r
    assert max(sizes) == max_rows and batch.stats["max_rows"] == max_rows
    assert batch.stats["target_calls"] == scheduled_calls([len(r.steps) - 1 for r in refs], max_rows)
    assert batch.stats["new_tokens"] == sum(len(r.tokens) for r in refs)
    kinds = {"longer" if new > old else "empty" if new == 0 else "shorter" for old, new in joins}
    assert kinds == {1: set(), 2: {"longer"}, 3: {"shorter"}}[max_rows], joins


def test_continuous_batching_with_hidden_state_drafters(pair, shakespeare_ids):
    """Newcomers whose drafters read the target's hidden states (Medusa, EAGLE) get their own prompt's hidden
    states from the admission prefill: every row equals its one-sequence run at max_rows = 2."""
    prompts = shakespeare_ids + [shakespeare_ids[1] + shakespeare_ids[0][:5]]
    kinds = ["eagle", "medusa", "eagle", "model"]
    batch = generate_batch(pair.target, prompts, drafters=[make_drafter(k, pair, 3) for k in kinds],
                           max_new_tokens=MAX_NEW, max_rows=2)
    for r, (ids, kind) in enumerate(zip(prompts, kinds)):
        assert batch.rows[r].tokens == generate(pair.target, ids, drafter=make_drafter(kind, pair, 3),
                                                max_new_tokens=MAX_NEW).tokens, (r, kind)


def test_continuous_batching_samples_as_generate_does(target, noisy_draft):
    """Row r keeps the generator seeded seed + r whenever it joins: sampled rows at max_rows = 2 equal
    generate(seed=seed + r)."""
    prompts = [[1, 2, 3, 9, 1, 2, 3], [40, 41], [7], [3, 3, 8]]
    kw = dict(max_new_tokens=12, temperature=0.9, top_k=20)
    batch = generate_batch(target, prompts, drafters=[DraftModelDrafter(noisy_draft, 3) for _ in prompts], seed=5,
                           max_rows=2, **kw)
    for r, p in enumerate(prompts):
        assert batch.rows[r].tokens == generate(target, p, drafter=DraftModelDrafter(noisy_draft, 3), seed=5 + r,
                                                **kw).tokens, r


def test_bad_input_is_named(target, draft):
    with pytest.raises(ValueError, match="max_rows must be an integer >= 1, got 0"):
        generate_batch(target, [[1], [2]], max_new_tokens=3, max_rows=0)
    with pytest.raises(ValueError, match="prompts must be a non-empty list"):
        generate_batch(target, [], max_new_tokens=3)
    with pytest.raises(ValueError, match=r"drafters must hold one drafter .* 2 prompts, got 1"):
        generate_batch(target, [[1], [2]], drafters=[DraftModelDrafter(draft, 2)], max_new_tokens=3)
    shared = DraftModelDrafter(draft, 2)
    with pytest.raises(ValueError, match=r"drafters\[0\] and drafters\[1\] are the same DraftModelDrafter"):
        generate_batch(target, [[1], [2]], drafters=[shared, shared], max_new_tokens=3)
    # an argument all rows share is named without a row (row 0 was blamed for it)
    for kwargs, message in (({"max_new_tokens": 0}, "max_new_tokens must be an integer >= 1"),
                            ({"temperature": -1}, "temperature must be"), ({"top_k": 0}, "top_k must be"),
                            ({"top_p": 2}, "top_p must be"), ({"eos_token_id": 99}, "eos_token_id must be"),
                            ({"acceptance": "x"}, "acceptance must be")):
        with pytest.raises(ValueError, match="^" + message):
            generate_batch(target, [[1], [2]], **{"max_new_tokens": 2, **kwargs})
    with pytest.raises((TypeError, ValueError), match="^target must be"):
        generate_batch("a model name", [[1], [2]], max_new_tokens=2)
    with pytest.raises(ValueError, match=r"^row 0 \(prompts\[0\]\): prompt \(600 tokens\) \+ max_new_tokens"):
        generate_batch(target, [[1] * 600, [2]], max_new_tokens=2)  # the row's prompt is to blame
    with pytest.raises(ValueError, match=r"row 1 \(prompts\[1\]\): .*token ids in \[0, 64\)"):
        generate_batch(target, [[1], [99]], max_new_tokens=2)
    with pytest.raises(TypeError, match=r"row 0 \(prompts\[0\]\): .*encode text first"):
        generate_batch(target, ["some text"], max_new_tokens=2)
    with pytest.raises(ValueError, match="batch must be an integer >= 1"):
        row_seeds(0, 0)
    # the seed the user passed is named, with the range its rows need, not a row's seed + r
    assert row_seeds(2 ** 64 - 2, 2) == [2 ** 64 - 2, 2 ** 64 - 1]
    with pytest.raises(ValueError, match=r"seed must be in \[-2\*\*63, 2\*\*64 - 2\] with 2 rows .*got "
                                         "18446744073709551615$"):
        generate_batch(target, [[1], [2]], max_new_tokens=2, seed=2 ** 64 - 1)
    with pytest.raises(ValueError, match="got -9223372036854775809$"):
        row_seeds(-2 ** 63 - 1, 1)
    with pytest.raises(ValueError, match="drafters must be None or a list with one drafter .*got dict"):
        generate_batch(target, [[1]], drafters={0: None}, max_new_tokens=2)


def test_greedy_parity_on_the_real_pair(smollm2_pair):
    """The real pair in float32: a chat request and a code request of different lengths, the draft model at N = 3
    and prompt lookup, batched, each row equal to its one-sequence run."""
    from lab.prompts import chat_prompts, encode_prompts

    pair = smollm2_pair
    prompts = encode_prompts(pair, chat_prompts("chat")[:1] + chat_prompts("code")[:1])
    assert len(prompts[0]) != len(prompts[1])
    makers = [lambda: DraftModelDrafter(pair.draft, 3), lambda: PromptLookupDrafter(n_draft=4)]
    batch = generate_batch(pair.target, prompts, drafters=[m() for m in makers], max_new_tokens=10,
                           eos_token_id=pair.eos_token_id)
    for r, ids in enumerate(prompts):
        ref = generate(pair.target, ids, drafter=makers[r](), max_new_tokens=10, eos_token_id=pair.eos_token_id)
        assert batch.rows[r].tokens == ref.tokens, r


def test_each_rows_prefill_record_names_its_prompt(target, noisy_draft):
    """The viewers tell a run on another prompt of the same length by these ids."""
    prompts = [[1, 2, 3], [4, 5, 6], [7]]
    batch = generate_batch(target, prompts, drafters=[DraftModelDrafter(noisy_draft, 2), None, None],
                           max_new_tokens=4)
    for prompt, row in zip(prompts, batch.rows):
        assert row.steps[0].prefill and row.steps[0].prompt == prompt
        assert all(record.prompt is None for record in row.steps[1:])
    one = generate(target, [4, 5, 6], max_new_tokens=4)
    assert one.steps[0].prompt == [4, 5, 6] and all(record.prompt is None for record in one.steps[1:])
