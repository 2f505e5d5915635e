"""The exercise checkers of lesson 09 (Jacobi iteration; lab.exercises.lesson09): the reference passes, planted mistakes
are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import pytest

from lab.drafters.lookahead import converged_prefix, jacobi_update
from lab.exercises import harness
from lab.exercises import lesson09 as check
from lab.models import forward, new_cache
from tests.helpers import rejects


def run(capsys, checker, fn, *args):
    ok = checker(fn, *args)
    return ok, capsys.readouterr().out


def test_count_converged_hints(capsys):
    def vs_previous(iterations):
        out = [0]
        for old, new in zip(iterations, iterations[1:]):
            out.append(converged_prefix(new, old))
        return out

    def newly(iterations):
        final = iterations[-1]
        counts = [converged_prefix(w, final) for w in iterations]
        return [counts[0]] + [b - a for a, b in zip(counts, counts[1:])]

    def second_last(iterations):  # right for every trajectory that repeats its fixed point
        return [converged_prefix(w, iterations[-2]) for w in iterations]

    rejects(check.count_converged, vs_previous, capsys, "FIXED POINT")
    rejects(check.count_converged, second_last, capsys, "iterations[-1]")
    rejects(check.count_converged, newly, capsys, "running total")


def test_jacobi_step_window_only_hint(target, capsys):
    from lab.models import forward, new_cache

    def window_only(m, p, w):
        return forward(m, w, new_cache()).argmax(-1).tolist()

    capsys.readouterr()
    assert check.jacobi_step(window_only, target, [1, 2, 3, 4, 5]) is False
    assert "feed prefix + window" in capsys.readouterr().out


def test_count_converged_refuses_a_one_shot_iterator(capsys):
    from lab.drafters.lookahead import converged_prefix

    rejects(check.count_converged, lambda its: (converged_prefix(w, its[-1]) for w in its), capsys,
            "returned a generator", "counts[1:]")
    rejects(check.count_converged, lambda its: map(lambda w: converged_prefix(w, its[-1]), its), capsys,
            "returned a map")
    assert check.count_converged(lambda its: tuple(converged_prefix(w, its[-1]) for w in its))


def test_jacobi_step_checker(capsys, target):
    prefix = [1, 2, 3, 4, 5]
    ok, out = run(capsys, check.jacobi_step, jacobi_update, target, prefix)
    assert ok

    def shifted(model, p, w):
        return forward(model, p + w, new_cache())[len(p):len(p) + len(w)].argmax(-1).tolist()

    def sequential(model, p, w):
        out = []
        for _ in w:
            out.append(int(forward(model, p + out, new_cache())[-1].argmax()))
        return out

    ok, out = run(capsys, check.jacobi_step, shifted, target, prefix)
    assert not ok and "row j of the logits predicts position j + 1" in out and "tokens)" in out
    ok, out = run(capsys, check.jacobi_step, sequential, target, prefix)
    assert not ok and "autoregressive" in out


def test_jacobi_step_refuses_a_tensor_and_an_updated_window(capsys, target):
    """Both used to pass, then broke the lesson's next cell (it keeps each window and compares them with ==)."""
    prefix = [1, 2, 3, 4, 5]

    def as_tensor(model, p, w):
        return forward(model, p + w, new_cache())[len(p) - 1:len(p) - 1 + len(w)].argmax(-1)

    def in_place(model, p, w):
        w[:] = jacobi_update(model, p, w)
        return w

    def grows_prefix(model, p, w):
        ids = p
        ids += w
        return forward(model, ids, new_cache())[len(ids) - len(w) - 1:-1].argmax(-1).tolist()

    ok, out = run(capsys, check.jacobi_step, as_tensor, target, prefix)
    assert not ok and "returned a Tensor; return a new list" in out
    ok, out = run(capsys, check.jacobi_step, lambda m, p, w: tuple(jacobi_update(m, p, w)), target, prefix)
    assert not ok and "a tuple never equals a list" in out
    ok, out = run(capsys, check.jacobi_step, lambda m, p, w: None, target, prefix)  # _compare's own hint
    assert not ok and "forget a `return`" in out
    ok, out = run(capsys, check.jacobi_step, in_place, target, prefix)
    assert not ok and "changed its argument `w` in place" in out and "Build a new list" in out
    ok, out = run(capsys, check.jacobi_step, grows_prefix, target, prefix)
    assert not ok and "changed its argument `p` in place" in out and f"prefix_ids ({len(prefix)} tokens)" in out


def test_count_converged_checker(capsys):
    def reference(iterations):
        final, out = iterations[-1], []
        for window in iterations:
            k = 0
            while k < len(window) and window[k] == final[k]:
                k += 1
            out.append(k)
        return out

    assert run(capsys, check.count_converged, reference)[0]
    ok, out = run(capsys, check.count_converged,
                  lambda its: [sum(a == b for a, b in zip(w, its[-1])) for w in its])
    assert not ok and "leading run" in out


def test_jacobi_step_one_row_too_many_gets_its_own_hint(capsys, target):
    """logits[len(prefix) - 1:] keeps the row after the window's last token too: W + 1 guesses, which used to get
    only the generic hint."""
    def one_row_too_many(model, p, w):
        return forward(model, p + w, new_cache())[len(p) - 1:].argmax(-1).tolist()

    ok, out = run(capsys, check.jacobi_step, one_row_too_many, target, [1, 2, 3, 4, 5])
    assert not ok and "return exactly W guesses" in out and "logits[len(prefix) - 1:len(prefix) - 1 + W]" in out


def test_jacobi_step_names_floats_and_the_wrong_axis(capsys, target):
    """From a learner's run: guesses as floats passed and crashed the lesson's next forward; argmax(0) (one guess per
    vocabulary entry) printed a message of about 150,000 characters with the generic hint."""
    def as_floats(model, p, w):
        return [float(t) for t in jacobi_update(model, p, w)]

    ok, out = run(capsys, check.jacobi_step, as_floats, target, [1, 2, 3, 4, 5])
    assert not ok and "not floats" in out, out

    def wrong_axis(model, p, w):
        return forward(model, p + w, new_cache())[len(p) - 1:len(p) - 1 + len(w)].argmax(0).tolist()

    ok, out = run(capsys, check.jacobi_step, wrong_axis, target, [1, 2, 3, 4, 5])
    assert not ok and "LAST dimension" in out and len(out) < 2000, out  # long lists: test_harness


def test_jacobi_step_time_limit_covers_the_type_check(capsys, target, monkeypatch):
    """The return-type check ran the learner's function outside the time limit: a loop that never ends hung."""
    monkeypatch.setattr(harness, "CALL_TIME_LIMIT_S", 0.5)

    def stuck(model, p, w):
        while True:
            pass

    ok, out = run(capsys, check.jacobi_step, stuck, target, [1, 2, 3])
    assert not ok and "did not return within" in out


def test_jacobi_step_checker_on_the_real_pair(capsys, smollm2_pair):
    """The lesson runs the checker on SmolLM2-135M-Instruct (a 49,152-token vocabulary, chat-template prompts): the
    reference passes and the off-by-one row is still named."""
    from lab.prompts import arena_prompts, encode_prompts

    prefix = encode_prompts(smollm2_pair, arena_prompts(smollm2_pair, "code")[:1])[0][-24:]
    target = smollm2_pair.target
    ok, out = run(capsys, check.jacobi_step, jacobi_update, target, prefix)
    assert ok and "6 windows" in out

    def shifted(model, p, w):
        return forward(model, p + w, new_cache())[len(p):len(p) + len(w)].argmax(-1).tolist()

    ok, out = run(capsys, check.jacobi_step, shifted, target, prefix)
    assert not ok and "row j of the logits predicts position j + 1" in out


# -- Exercise 3: one block of a parallel (PARD) draft -------------------------------------------------------------

def test_parallel_block_reference_passes_and_a_stub_is_not_solved(capsys):
    ok, out = run(capsys, check.parallel_block, check.reference_parallel_block)
    assert ok is True and out.startswith("✓ parallel_block: 8 blocks right"), out

    def stub(ids, anchor, k, mask_id):
        raise NotImplementedError

    ok, out = run(capsys, check.parallel_block, stub)
    assert ok is False and "not solved yet" in out and "✗" not in out


def test_reference_parallel_block_values():
    ids = [7, 8, 9, 10, 11, 12]
    assert check.reference_parallel_block(ids, 2, 3, 99) == ([7, 8, 9, 99, 99], [10, 11, 12])
    assert check.reference_parallel_block(ids, 0, 1, 99) == ([7], [8])
    # at inference the anchor is the newest token: K - 1 masks, no targets yet
    assert check.reference_parallel_block(ids, 5, 4, 99) == ([7, 8, 9, 10, 11, 12, 99, 99, 99], [])


def test_parallel_block_planted_mistakes_get_their_own_hints(capsys):
    rejects(check.parallel_block, lambda x, a, k, m: (x[:a + 1] + [m] * (k - 1), x[a:a + k]), capsys,
            "one place early", "ids[anchor + 1]", "8 of 8 cases are wrong")
    rejects(check.parallel_block, lambda x, a, k, m: (x[:a + 1] + [m] * k, x[a + 1:a + 1 + k]), capsys,
            "K - 1 masks, not K")
    rejects(check.parallel_block, lambda x, a, k, m: (x[:a + k], x[a + 1:a + 1 + k]), capsys,
            "teacher forcing", "no row depends on an earlier draft")
    rejects(check.parallel_block, lambda x, a, k, m: (x[:a + 1] + [m] * (k - 1), x[a + 1:a + 2] * k), capsys,
            "not on the next token again")


def test_parallel_block_masks_shortened_with_the_targets_get_their_own_hint(capsys):
    """A learner who also shortens the masks near the end of ids (fewer targets there, so fewer masks) failed on the
    anchor at the last position with only the generic hint; the lesson now says the inputs always end with k - 1
    masks, and the checker says it too."""
    def short_masks(ids, anchor, k, mask_id):
        targets = list(ids[anchor + 1:anchor + 1 + k])
        return list(ids[:anchor + 1]) + [mask_id] * max(len(targets) - 1, 0), targets

    out = rejects(check.parallel_block, short_masks, capsys, "always end with k - 1 masks", "2 of 8 cases are wrong")
    assert ", 9, 4, 2048)" in out or ", 7, 4, 2048)" in out   # a case near the end of ids


def test_parallel_block_refuses_other_shapes_and_in_place_edits(capsys):
    rejects(check.parallel_block, lambda x, a, k, m: x[:a + 1] + [m] * (k - 1), capsys,
            "return a pair (inputs, targets)")
    rejects(check.parallel_block, lambda x, a, k, m: None, capsys, "forget a `return`")

    def grows(ids, anchor, k, mask_id):
        ids += [mask_id] * (k - 1)  # edits the caller's list
        return ids[:anchor + 1] + [mask_id] * (k - 1), ids[anchor + 1:anchor + 1 + k]

    rejects(check.parallel_block, grows, capsys, "changed its argument `ids` in place")
    # a one-shot iterator holds the right ids but the lesson takes len(inputs)
    import itertools

    rejects(check.parallel_block, lambda x, a, k, m: (itertools.chain(x[:a + 1], [m] * (k - 1)),
                                                      x[a + 1:a + 1 + k]), capsys, "a generator or iterator")
    # NumPy arrays have a len() and hold the right ids: a right answer
    import numpy as np

    assert check.parallel_block(lambda x, a, k, m: tuple(np.array(part, dtype=np.int64) for part in
                                                        check.reference_parallel_block(x, a, k, m)))
    # tuples and tensors hold the same ids: accepted
    import torch

    assert check.parallel_block(lambda x, a, k, m: tuple(torch.tensor(part) for part in
                                                        check.reference_parallel_block(x, a, k, m)))


def test_reference_parallel_block_is_what_the_training_layout_trains():
    """Every row of lab.training.parallel.parallel_layout (no drop) is one block of the reference: the row of copy j
    at position p is the (j + 1)-th row of the block anchored at p - j. It is fed that block's last input at that
    block's last position, sees exactly the block's inputs, and learns the block's (j + 1)-th target."""
    import torch

    from lab.training.parallel import parallel_layout

    mask, length, k = 2048, 9, 4
    ids = torch.randint(0, 2048, (length,), generator=torch.Generator().manual_seed(3)).tolist()
    layout = parallel_layout(length, k)
    copies, positions, allow = layout["copy"].tolist(), layout["position"].tolist(), layout["allow"]
    fed = [ids[p] if j == 0 else mask for j, p in zip(copies, positions)]
    assert set(copies) == set(range(k))
    for row, (j, p) in enumerate(zip(copies, positions)):
        inputs, targets = check.reference_parallel_block(ids, p - j, j + 1, mask)
        assert len(inputs) - 1 == p and inputs[-1] == fed[row]
        seen = sorted((positions[b], fed[b]) for b in allow[row].nonzero().flatten().tolist())
        assert seen == list(enumerate(inputs)), (row, j, p)
        if p + 1 < length:  # the teacher at position p is the target's distribution for token p + 1
            assert targets[j] == ids[p + 1]
        else:
            assert len(targets) == j


def test_reference_parallel_block_is_what_the_drafter_feeds(pair):
    """One forward over the reference's inputs gives, in its last K rows, the logits ParallelDrafter.block_logits
    computes with its KV cache and the masks rolled back; and the cache then holds the committed tokens only."""
    import torch

    from lab.drafters import ParallelDrafter
    from lab.prompts import encode_prompts, held_out_prompts

    drafter = ParallelDrafter.from_pretrained(pair, n_draft=4)
    ids = encode_prompts(pair, held_out_prompts()[:1])[0][:40]
    for anchor, k in ((5, 4), (20, 2), (39, 3), (0, 1)):
        inputs, _ = check.reference_parallel_block(ids, anchor, k, drafter.mask_token_id)
        drafter.reset(ids[:anchor + 1])
        cached = drafter.block_logits(k)
        fresh = forward(drafter.model, inputs, new_cache())[-k:, :drafter.vocab_size]
        assert torch.allclose(cached, fresh, atol=1e-4), (anchor, k)
        assert drafter.kv_length() == anchor + 1


def test_parallel_block_covers_the_anchor_at_the_end(capsys):
    """The lesson's first call puts the anchor on the last token (inference: no targets yet); an index loop that
    assumes K tokens after the anchor, or one that pads the targets with masks, must fail here, not in the lesson."""
    from lab.exercises import lesson09 as check09

    def indexed(ids, anchor, k, mask_id):
        return list(ids[:anchor + 1]) + [mask_id] * (k - 1), [ids[anchor + i] for i in range(1, k + 1)]

    def padded(ids, anchor, k, mask_id):
        return list(ids[:anchor + 1]) + [mask_id] * (k - 1), (list(ids[anchor + 1:anchor + 1 + k]) + [mask_id] * k)[:k]

    for fn, words in ((indexed, "raised IndexError"), (padded, "[2048, 2048, 2048, 2048]")):
        assert not check09.parallel_block(fn)
        out = capsys.readouterr().out
        assert words in out and "at most k of them" in out, out


def test_count_converged_and_jacobi_step_name_two_more_slips(capsys, target):
    """A count list one short (the fixed point left out) and guesses one row too early got the generic hint."""
    rejects(check.count_converged, lambda its: [converged_prefix(w, its[-1]) for w in its[:-1]], capsys,
            "one count per window, the last one too")

    def row_too_early(model, p, w):
        return forward(model, p + w, new_cache())[len(p) - 2:len(p) - 2 + len(w)].argmax(-1).tolist()

    ok, out = run(capsys, check.jacobi_step, row_too_early, target, [1, 2, 3, 4, 5])
    assert not ok and "one row too early" in out, out


def test_count_converged_takes_an_int_array_and_names_a_skipped_first_window(capsys):
    """A NumPy array of ints serves the lesson (it slices, zips, sums and prints the counts); a float array does
    not; a list without the first window's count gets its own hint."""
    import numpy as np

    assert check.count_converged(lambda its: np.array(check.reference_count_converged(its)))
    assert capsys.readouterr().out.startswith("✓")
    rejects(check.count_converged, lambda its: np.array(check.reference_count_converged(its), dtype=float), capsys,
            "returned an ndarray")
    rejects(check.count_converged, lambda its: check.reference_count_converged(its)[1:], capsys,
            "the first one too")


def test_jacobi_step_names_an_argmax_over_the_positions_after_a_softmax(capsys, target):
    """argmax(0) of the softmaxed rows returns one 'guess' per vocabulary entry for a window of 1."""
    def softmax_axis(model, p, w):
        rows = forward(model, p + w, new_cache()).softmax(-1)[len(p) - 1:len(p) - 1 + len(w)]
        return rows.argmax(0).tolist()

    ok, out = run(capsys, check.jacobi_step, softmax_axis, target, [1, 2, 3, 4, 5])
    assert not ok and "guesses for a window of 1: one per vocabulary entry" in out and "LAST dimension" in out


def test_jacobi_step_names_a_short_window_and_a_kept_dimension(capsys, target):
    """A learner's W - 1 guesses and argmax(-1, keepdim=True) ([[4590], ...]) met the generic hint."""
    def short(model, p, w):
        return forward(model, p + w, new_cache())[len(p) - 1:len(p) + len(w) - 2].argmax(-1).tolist()

    def kept(model, p, w):
        return forward(model, p + w, new_cache())[len(p) - 1:len(p) - 1 + len(w)].argmax(-1, keepdim=True).tolist()

    ok, out = run(capsys, check.jacobi_step, short, target, [1, 2, 3, 4, 5])
    assert not ok and "this returns W - 1" in out, out
    ok, out = run(capsys, check.jacobi_step, kept, target, [1, 2, 3, 4, 5])
    assert not ok and "a list of one-element lists" in out and "keepdim=True" in out, out


def test_type_hints_do_not_print_the_answer(capsys):
    """The type hints of count_converged and parallel_block printed the whole answer (a list comprehension over
    converged_prefix; the inputs' formula)."""
    ok, out = run(capsys, check.count_converged, lambda its: iter([0] * len(its)))
    assert not ok and "converged_prefix(" not in out and "plain ints" in out, out
    ok, out = run(capsys, check.parallel_block, lambda ids, a, k, m: {"inputs": ids})
    assert not ok and "[mask_id] * (k - 1)" not in out and "list(...) makes one" in out, out
    assert harness.a_type([]) == "a list" and harness.a_type(__import__("numpy").zeros(1)) == "an ndarray"
    assert harness.a_type(3) == "an int"


@pytest.mark.parametrize("shape,phrase", [
    (lambda block: dict(zip(("inputs", "targets"), block)), "a dict, which `inputs, targets = parallel_block(...)`"),
    (lambda block: list(zip(*block)), "one (input, target) pair per position"),
    (lambda block: block[0], "the inputs alone?"),
])
def test_parallel_block_names_an_answer_of_the_wrong_shape(capsys, shape, phrase):
    """A learner's report: a dict got "... not generators or iterators", which did not fit it."""
    out = rejects(check.parallel_block, lambda *a: shape(check.reference_parallel_block(*a)), capsys, phrase,
                  "return a pair (inputs, targets) of token-id lists, in that order")
    assert "not generators or iterators" not in out, out


def test_parallel_block_names_the_pair_in_the_wrong_order(capsys):
    out = rejects(check.parallel_block, lambda *a: check.reference_parallel_block(*a)[::-1], capsys,
                  "the other way round")
    assert "mask tokens (how many?" not in out, out
