"""lab.kv: cache length, rollback, keep_positions (a tree's accepted path) and the scratch buffer (lesson 07), on tiny
random models and the bundled pair.

Oracle 3 in every form: after a commit, a discard, a rollback or a compaction to a tree's path, the next logits
equal a fresh forward over the committed tokens.
"""


from __future__ import annotations

import numpy as np
import pytest
import torch

from lab import kv
from lab.kv import ScratchKVCache, cache_length, keep_positions, rollback
from lab.models import forward, new_cache
from lab.prompts import held_out_prompts
from tests.helpers import TOKENS, close, fresh, tree_forward

# --- the scratch buffer --------------------------------------------------------------------------------------

def test_scratch_write_leaves_committed_cache_untouched(target):
    kv = ScratchKVCache(target)
    close(kv.append(TOKENS[:10]), fresh(target, TOKENS[:10]))
    drafts = TOKENS[10:15]
    logits = kv.write(drafts)
    close(logits, fresh(target, TOKENS[:15])[10:])  # the drafts saw the prefix and each other, causally
    assert (kv.committed_length, kv.scratch_length) == (10, 5)
    assert cache_length(kv.cache) == 10  # scratch entries live outside the committed cache
    assert kv.slots() == [(t, "committed") for t in TOKENS[:10]] + [(t, "scratch") for t in drafts]


@pytest.mark.parametrize("accepted", [0, 1, 2, 5])
def test_commit_keeps_a_prefix_and_the_next_forward_matches_a_fresh_one(target, accepted):
    """The seed's Hard exercise: 10-token prefix, 5 drafts, rejection at draft position accepted + 1."""
    kv = ScratchKVCache(target)
    kv.append(TOKENS[:10])
    kv.write(TOKENS[10:15])
    kv.commit(accepted)
    committed = TOKENS[: 10 + accepted]
    assert kv.committed_tokens == committed and kv.scratch_length == 0
    assert kv.committed_length == 10 + accepted
    close(kv.append([40])[-1], fresh(target, committed + [40])[-1])


def test_scratch_written_in_two_parts_then_committed(target):
    kv = ScratchKVCache(target)
    kv.append(TOKENS[:6])
    kv.write(TOKENS[6:8])
    second = kv.write(TOKENS[8:11])  # attends to committed + the scratch written before
    close(second, fresh(target, TOKENS[:11])[8:])
    kv.commit(4)
    assert kv.committed_tokens == TOKENS[:10]
    close(kv.append([3])[-1], fresh(target, TOKENS[:10] + [3])[-1])


def test_discard_and_errors(target):
    kv = ScratchKVCache(target)
    with pytest.raises(ValueError, match="prefill"):
        kv.write([1])
    kv.append(TOKENS[:4])
    kv.write(TOKENS[4:7])
    with pytest.raises(ValueError, match="pending"):
        kv.append([1])
    with pytest.raises(ValueError, match="count"):
        kv.commit(4)
    with pytest.raises(ValueError, match="tokens"):
        kv.write([])
    kv.discard()
    assert kv.committed_tokens == TOKENS[:4] and kv.scratch_length == 0
    close(kv.append([9])[-1], fresh(target, TOKENS[:4] + [9])[-1])
    assert "committed=5" in repr(kv)


# --- rollback ------------------------------------------------------------------------------------------------

def test_rollback_to_every_length_matches_a_fresh_forward(target):
    cache = new_cache()
    forward(target, TOKENS[:15], cache)
    for length in (14, 11, 10, 3):
        rollback(cache, length)
        after = forward(target, [2], cache)[-1]
        close(after, fresh(target, TOKENS[:length] + [2])[-1])
        rollback(cache, length)
    with pytest.raises(ValueError, match="length"):
        rollback(cache, 4)


def test_rollback_then_forward_equals_fresh_forward(target):
    tokens = list(range(5, 20))  # 10 prefix tokens + 5 drafts
    cache = new_cache()
    forward(target, tokens[:10], cache)
    forward(target, tokens[10:15], cache)
    assert cache_length(cache) == 15
    rollback(cache, 12)  # rejected at draft position 3: prefix + 2 accepted drafts remain
    assert cache_length(cache) == 12
    after = forward(target, [40], cache)[-1]
    fresh = forward(target, tokens[:12] + [40], new_cache())[-1]
    torch.testing.assert_close(after, fresh, atol=1e-5, rtol=1e-5)


def test_rollback_errors():
    from transformers import DynamicCache
    cache = DynamicCache()
    with pytest.raises(ValueError, match="length"):
        rollback(cache, 3)


def test_rollback_on_the_real_target(pair):
    ids = pair.encode(held_out_prompts()[0])[-60:][:15]
    cache = new_cache()
    forward(pair.target, ids[:10], cache)
    forward(pair.target, ids[10:15], cache)
    rollback(cache, 12)
    after = forward(pair.target, [ids[12]], cache)[-1]
    fresh = forward(pair.target, ids[:13], new_cache())[-1]
    torch.testing.assert_close(after, fresh, atol=1e-4, rtol=1e-4)


# --- keep_positions: compacting the cache to a tree's accepted path -------------------------------------------

PREFIX = [5, 9, 2, 7, 11]


def test_compacted_cache_equals_a_fresh_forward(target):
    tokens, parents = [1, 2, 3, 4, 5, 6], [-1, -1, 1, 1, 3, 3]
    _, cache = tree_forward(target, PREFIX, tokens, parents)
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


def test_keep_positions_refuses_non_integer_offsets(target):
    cache = new_cache()
    forward(target, PREFIX, cache)
    with pytest.raises(ValueError, match="integer"):
        keep_positions(cache, 1, [0.9, 2.2])
    with pytest.raises(TypeError, match=r"keep must be increasing integer offsets \(a list or a 1-d integer tensor\), "
                                        "got NoneType"):
        keep_positions(cache, 1, None)
    assert cache_length(cache) == len(PREFIX)  # nothing was dropped by the refused calls


def test_keep_positions_takes_numpy_and_tensor_integers_not_bools(target):
    import numpy as np

    cache = new_cache()
    forward(target, PREFIX + [30, 31, 32], cache)
    keep_positions(cache, np.int64(len(PREFIX)), torch.tensor([0, 2]))
    assert cache_length(cache) == len(PREFIX) + 2
    with pytest.raises(ValueError, match="start"):
        keep_positions(cache, torch.tensor(True), [0])
    with pytest.raises(ValueError, match="integer"):
        keep_positions(cache, 1, [torch.tensor(True)])


# --- integer arguments: NumPy and 0-d tensor integers work, bools and floats do not ------------------------------

def test_rollback_and_commit_accept_numpy_and_tensor_integers(target):
    import numpy as np

    cache = new_cache()
    forward(target, TOKENS[:12], cache)
    rollback(cache, np.int64(9))
    assert type(cache_length(cache)) is int and cache_length(cache) == 9
    rollback(cache, torch.tensor(8))
    assert cache_length(cache) == 8
    close(forward(target, [2], cache)[-1], fresh(target, TOKENS[:8] + [2])[-1])
    for bad in (torch.tensor(True), True, 4.0, np.float64(4), torch.tensor(4.0), torch.tensor([4]), "4", None):
        with pytest.raises(ValueError, match="length must be an integer"):
            rollback(cache, bad)
    assert cache_length(cache) == 9  # the probe's entry; nothing was cut by the bad calls

    kv = ScratchKVCache(target)
    kv.append(TOKENS[:5])
    kv.write(TOKENS[5:9])
    for bad in (np.float32(1), torch.tensor(False), 1.0):
        with pytest.raises(ValueError, match="count must be an integer"):
            kv.commit(bad)
    kv.commit(np.int32(2))
    assert kv.committed_tokens == TOKENS[:7] and kv.scratch_length == 0
    kv.write(TOKENS[7:9])
    kv.commit(torch.tensor(1, dtype=torch.int16))
    assert kv.committed_tokens == TOKENS[:8]
    close(kv.append([3])[-1], fresh(target, TOKENS[:8] + [3])[-1])


# keep_positions refuses repeated and negative offsets (they would duplicate or pull in prefix slots).
@pytest.fixture()
def filled_cache(target):
    """A cache holding 6 positions of the tiny conftest target."""
    from lab.models import forward, new_cache

    cache = new_cache()
    forward(target, [1, 2, 3, 4, 5, 6], cache)
    return cache


@pytest.mark.parametrize("keep", [[1, 1], [0, 2, 2], [-1, 0], [-2, 1]])
def test_keep_positions_rejects_repeated_and_negative_offsets(filled_cache, keep):
    from lab.kv import cache_length, keep_positions

    with pytest.raises(ValueError, match="keep must be increasing offsets"):
        keep_positions(filled_cache, 2, keep)
    assert cache_length(filled_cache) == 6   # untouched


def test_helpers_built_on_forward_stop_at_the_context(short_target, short_draft):
    from lab.drafters.lookahead import jacobi_update

    scratch = kv.ScratchKVCache(short_target)
    scratch.append(list(range(30)))
    with pytest.raises(ValueError, match="context limit"):
        scratch.append([1, 2, 3])
    with pytest.raises(ValueError, match="context limit"):
        jacobi_update(short_target, [5] * 30, [1] * 8)
    with pytest.raises(ValueError, match="context limit"):
        kv.two_cache_greedy(short_target, short_draft, [1] * 28, 10, n_draft=4)
    with pytest.raises(TypeError, match=r"prompt_ids must be token ids, got text \('abc'\); encode text first"):
        kv.two_cache_greedy(short_target, short_draft, "abc", 3)


def test_emitted_tokens_checks_its_arguments():
    assert kv.emitted_tokens([1, 2, 3], 2, 9) == [1, 2, 9]
    assert kv.emitted_tokens((1, 2, 3), np.int64(3), np.int64(9)) == [1, 2, 3, 9]
    with pytest.raises(ValueError, match="num_accepted must be an integer >= 0, got -1"):
        kv.emitted_tokens([1, 2, 3], -1, 9)
    with pytest.raises(ValueError, match=r"num_accepted must be an integer in \[0, 3\].*got 5"):
        kv.emitted_tokens([1, 2, 3], 5, 9)
    with pytest.raises(ValueError, match="next_token must be an integer >= 0"):
        kv.emitted_tokens([1, 2, 3], 1, 2.0)
    with pytest.raises(TypeError, match="drafts must be a list of token ids or a LongTensor, got NoneType"):
        kv.emitted_tokens(None, 0, 3)
    with pytest.raises(TypeError, match="drafts must hold integer token ids, got float 1.5"):
        kv.emitted_tokens([1.5], 1, 3)


def test_scratch_cache_refuses_text_and_floats(target):
    scratch = kv.ScratchKVCache(target)
    with pytest.raises(TypeError, match=r"tokens must be token ids, got text \('ab'\)"):
        scratch.append("ab")
    with pytest.raises(TypeError, match="tokens must hold integer token ids, got float 1.5"):
        scratch.append([1, 1.5])
    with pytest.raises(TypeError, match="tokens must be a list of token ids or a LongTensor, got int"):
        scratch.append(5)
    assert scratch.append(np.array([1, 2, 3])).shape == (3, 64) and scratch.committed_tokens == [1, 2, 3]


def test_rollback_and_cache_length_name_a_non_cache():
    from lab.kv import cache_length, rollback

    for bad in (None, ((torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4)),)):   # nothing; a legacy tuple cache
        with pytest.raises(TypeError, match="cache must be a transformers cache"):
            rollback(bad, 0)
        with pytest.raises(TypeError, match="cache must be a transformers cache"):
            cache_length(bad)


def test_position_and_keep_length_helpers_refuse_impossible_counts():
    """The references of lesson 07's exercise name a bad argument instead of returning nonsense."""
    assert kv.next_position(9, 0) == 10 and kv.draft_keep_length(12, 1, 4) == 10
    with pytest.raises(ValueError, match="position must be an integer >= 0, got -1"):
        kv.next_position(-1, 2)
    with pytest.raises(ValueError, match="num_accepted must be an integer >= 0"):
        kv.next_position(3, -1)
    with pytest.raises(ValueError, match=r"num_accepted must be an integer in \[0, 4\], got 5"):
        kv.draft_keep_length(3, 5, 4)   # more accepted than drafted
    with pytest.raises(ValueError, match="held must be an integer >= 3, got 2"):
        kv.draft_keep_length(2, 0, 4)   # fewer entries than the drafts it was fed
    with pytest.raises(ValueError, match="n_draft must be an integer >= 1"):
        kv.draft_keep_length(3, 0, 0)


def test_two_cache_greedy_names_a_plugged_in_rule_that_breaks_the_loop(target, draft):
    """Lesson 07 invites plugging in one's own rules: a rule that emits nothing looped for minutes, and a float
    position or a None emit failed deep in Python without naming the rule."""
    ids = [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match=r"emit\(drafts, num_accepted, next_token\) must return a non-empty list"):
        kv.two_cache_greedy(target, draft, ids, 8, emit=lambda drafts, k, token: [])
    with pytest.raises(ValueError, match=r"emit\(drafts, num_accepted, next_token\) must return"):
        kv.two_cache_greedy(target, draft, ids, 8, emit=lambda drafts, k, token: None)
    with pytest.raises(ValueError, match=r"advance\(position, num_accepted\)"):
        kv.two_cache_greedy(target, draft, ids, 8, advance=lambda position, k: position + k + 1.0)
    with pytest.raises(ValueError, match=r"draft_keep\(held, num_accepted, n_draft\)"):
        kv.two_cache_greedy(target, draft, ids, 8, draft_keep=lambda held, k, n: held + 1)
    # the lesson's own wrong rules still run to the end (they show drifting text or lost acceptance, not errors)
    assert len(kv.two_cache_greedy(target, draft, ids, 8, advance=lambda position, k: position + 1)["tokens"]) == 8


def test_a_scratch_cache_needs_a_model(pair):
    """ScratchKVCache(None) was built and failed only at its first append, inside forward."""
    with pytest.raises(TypeError, match=r"ScratchKVCache's model must be a transformers model \(pair.target, "
                                        r"pair.draft\), got NoneType"):
        ScratchKVCache(None)
    with pytest.raises(TypeError, match="a pair's models are pair.target and pair.draft"):
        ScratchKVCache(pair)
