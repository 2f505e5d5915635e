"""Exercise checkers for lesson 09 (Jacobi iteration, Lookahead decoding, and parallel drafting).

Checkers that need a model take it as an argument (the lesson passes its pair's target: SmolLM2-135M-Instruct for
the real pair, the Shakespeare target for the toy pair). The parallel-drafting checker needs none: it checks which
tokens a PARD-style draft is fed for one block and which true tokens its rows are scored on.

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import random

import torch

from lab.drafters.lookahead import converged_prefix, jacobi_update
from lab.exercises.answers import int_list_pair, pair_shape_note
from lab.exercises.harness import (a_type, checker, compare, Fail, fresh_args, run_case, same_ints,
                                   show_brief, want_token_list)
from lab.models import forward, new_cache

__all__ = ["jacobi_step", "count_converged", "reference_count_converged", "parallel_block",
           "reference_parallel_block"]


@checker
def jacobi_step(fn, model, prefix_ids):
    """Check ``fn(model, prefix_ids, window) -> list``: one Jacobi update (``lab.drafters.lookahead.jacobi_update``)
    on random, partly right and fully right windows after ``prefix_ids``."""
    prefix = [int(t) for t in prefix_ids]
    vocab = model.get_output_embeddings().weight.shape[0]
    rng = random.Random(0)
    greedy = jacobi_update(model, prefix, [prefix[-1]] * 6)
    for _ in range(7):  # iterate to the fixed point: the greedy continuation of 6 tokens
        greedy = jacobi_update(model, prefix, greedy)
    windows = [[rng.randrange(vocab) for _ in range(w)] for w in (1, 3, 6)]
    windows += [greedy[:3] + [rng.randrange(vocab) for _ in range(3)], greedy, [rng.choice(prefix) for _ in range(5)]]
    cases = [(model, prefix, window) for window in windows]

    def shifted(m, p, w):
        logits = forward(m, p + w, new_cache())
        return logits[len(p):len(p) + len(w)].argmax(-1).tolist()

    def row_too_early(m, p, w):
        logits = forward(m, p + w, new_cache())
        return logits[len(p) - 2:len(p) - 2 + len(w)].argmax(-1).tolist()

    def window_only(m, p, w):
        return forward(m, w, new_cache()).argmax(-1).tolist()

    def one_row_too_many(m, p, w):
        logits = forward(m, p + w, new_cache())
        return logits[len(p) - 1:].argmax(-1).tolist()

    def one_row_too_few(m, p, w):
        logits = forward(m, list(p) + list(w), new_cache())
        return logits[len(p) - 1:len(p) + len(w) - 2].argmax(-1).tolist()

    def sequential(m, p, w):
        out = []
        for _ in w:
            out.append(int(forward(m, p + out, new_cache())[-1].argmax()))
        return out

    def wrong_axis(m, p, w):
        logits = forward(m, p + w, new_cache())
        return logits[len(p) - 1:len(p) - 1 + len(w)].argmax(0).tolist()

    faults = [
        (wrong_axis, "take the argmax over the vocabulary, the LAST dimension of the logits ([positions, vocab]): "
                     "argmax(-1) gives one guess per window position; argmax(0) gives one per vocabulary entry."),
        (shifted, "row j of the logits predicts position j + 1: the guess for window position i comes from the row "
                  "of the token BEFORE it, index len(prefix) - 1 + i."),
        (row_too_early, "one row too early: the guess for window position i comes from row len(prefix) - 1 + i "
                        "(the row of the token just before it); row len(prefix) - 2 + i guesses the token already "
                        "in front of it."),
        (window_only, "feed prefix + window: the guesses depend on the committed text."),
        (one_row_too_many, "return exactly W guesses, one per window position: rows len(prefix) - 1 … len(prefix) + "
                           "W - 2 (logits[len(prefix) - 1:len(prefix) - 1 + W]). The last row, after the window's "
                           "last token, guesses the position past the window."),
        (one_row_too_few, "return exactly W guesses, one per window position: this returns W - 1, so the window "
                          "shrinks every iteration. Slice W rows, from the row of the token before the window's "
                          "first position."),
        (sequential, "that is autoregressive decoding (one forward per token, each seeing the NEW guesses). Jacobi "
                     "updates every position at once from the OLD guesses: one forward over prefix + window."),
    ]
    # The lesson's loop keeps every window and compares windows with ==: only a list does that right. None and
    # exceptions are left to compare, which names the case (checker already time-limits fn).
    first = run_case(fn, fresh_args(cases[0]))
    if first[0] == "ok" and first[1] is not None and not isinstance(first[1], list):
        why = ("a tuple never equals a list, so the lesson's `window == greedy` would stay False"
               if isinstance(first[1], tuple) else f"a {type(first[1]).__name__} cannot be compared that way")
        raise Fail(f"jacobi_step returned {a_type(first[1])}; return a new list of int token ids (e.g. "
                   f"logits[...].argmax(-1).tolist()): the lesson's loop compares windows with ==, and {why}.")
    if first[0] == "ok" and isinstance(first[1], list) and len(first[1]) == vocab != len(cases[0][2]):
        raise Fail(f"jacobi_step returned {len(first[1]):,} guesses for a window of {len(cases[0][2])}: one per "
                   "vocabulary entry.\n  Hint: take the argmax over the LAST dimension, the vocabulary (argmax(-1) "
                   "of the [positions, vocab] rows, after a softmax too), to get one guess per window position.")
    if first[0] == "ok" and isinstance(first[1], list) and first[1] and all(
            isinstance(x, (list, tuple)) and len(x) == 1 for x in first[1]):
        raise Fail(f"jacobi_step returned {first[1][:4]!r}{'…' if len(first[1]) > 4 else ''}: a list of one-element "
                   "lists.\n  Hint: argmax(-1) without keepdim=True gives one id per window position; the window is "
                   "a flat list of ints.")
    want_token_list("jacobi_step", fn, cases[0], "logits[...].argmax(-1).tolist()",
                    "the lesson feeds the new window back to the model as token ids", tuples=False)
    same = same_ints
    count = compare("jacobi_step", fn, cases, jacobi_update, faults, same,
                    "run the model once on prefix + window; new window = argmax of rows len(prefix) - 1 … "
                    "len(prefix) + W - 2.",
                    show_args=lambda case: f"model, prefix_ids ({len(case[1])} tokens), window={case[2]!r}")
    return f"{count} windows updated exactly as one Jacobi iteration; the greedy continuation is a fixed point"


def reference_count_converged(iterations):
    """The answer to the exercise: for each window of ``iterations`` (lists of ids; the last is the fixed point)
    the length of its converged prefix, a list of ints."""
    final = iterations[-1]
    return [converged_prefix(window, final) for window in iterations]


@checker
def count_converged(fn):
    """Check ``fn(iterations) -> list[int]``: for each window in ``iterations`` (the last one is the fixed point),
    how many leading positions already hold their final token (the converged prefix)."""
    cases = [
        ([[0, 5, 7], [4, 5, 6], [4, 5, 7], [4, 5, 7]],),
        ([[1, 2, 3], [1, 2, 3]],),
        ([[9, 9, 9, 9], [4, 9, 9, 9], [4, 6, 9, 2], [4, 6, 8, 2], [4, 6, 8, 2]],),
        ([[3], [5], [5]],),
        ([[7, 1, 1, 1, 1], [2, 1, 3, 1, 1], [2, 3, 3, 1, 1], [2, 3, 3, 3, 1], [2, 3, 3, 3, 1]],),
        # the fixed point only once, at the end: the final window is iterations[-1], not iterations[-2]
        ([[0, 0, 0], [1, 0, 0], [1, 2, 0], [1, 2, 3]],),
    ]

    def anywhere(iterations):
        final = iterations[-1]
        return [sum(a == b for a, b in zip(w, final)) for w in iterations]

    def vs_previous(iterations):
        out = [0]
        for old, new in zip(iterations, iterations[1:]):
            out.append(converged_prefix(new, old))
        return out

    def newly(iterations):
        counts = reference_count_converged(iterations)
        return [counts[0]] + [b - a for a, b in zip(counts, counts[1:])]

    def second_last(iterations):
        final = iterations[-2] if len(iterations) > 1 else iterations[-1]
        return [converged_prefix(window, final) for window in iterations]

    def without_last(iterations):
        final = iterations[-1]
        return [converged_prefix(window, final) for window in iterations[:-1]]

    def without_first(iterations):
        return reference_count_converged(iterations)[1:]

    faults = [
        (without_first, "one count per window, the first one too: the initial guess (iterations[0]) is a window, "
                        "usually with few or no final tokens, and the gains are read from it onward."),
        (without_last, "one count per window, the last one too: the fixed point has converged in full, so its count "
                       "is its length (range(len(iterations)), not len(iterations) - 1)."),
        (second_last, "the fixed point is the LAST window, iterations[-1]: a trajectory need not repeat it."),
        (anywhere, "count only the leading run of final tokens: a later position can hold its final token by "
                   "luck and still change, because the guesses before it are not final yet."),
        (vs_previous, "compare each window with the FIXED POINT (the last window), not with the window before it."),
        (newly, "return the converged prefix of every window (a running total), not the increase."),
    ]
    want_token_list("count_converged", fn, tuple(cases[0]), "[3, 5, 8]: plain ints, .tolist() on a tensor",
                    "the lesson compares each count with the next (counts[1:]) and prints the list", "counts",
                    arrays=True)
    count = compare("count_converged", fn, [tuple(c) for c in cases], reference_count_converged, faults, same_ints,
                    "a window's converged prefix is its leading run of positions that already hold their final token "
                    "(the fixed point's token at that position).")
    return f"{count} trajectories counted right"


def reference_parallel_block(ids, anchor, k, mask_id):
    """The answer to the parallel-drafting exercise: one block of a parallel (PARD) draft anchored at ``ids[anchor]``,
    ``(inputs, targets)`` as lists of ints.

    ``inputs`` = ``ids[:anchor + 1] + [mask_id] * (k - 1)``: the text up to the anchor and K - 1 mask tokens, what
    one draft forward is fed to propose K tokens (at inference, with ``anchor`` the newest committed token).
    ``targets`` = ``ids[anchor + 1:anchor + 1 + k]``: the true tokens the last K rows of that forward must predict;
    the row of ``ids[anchor]`` drafts token 1 and mask row i drafts token i + 1, none of them fed an earlier draft
    (An et al. 2025, arXiv 2504.18583; :mod:`lab.drafters.parallel` feeds these inputs,
    :func:`lab.training.parallel.parallel_layout` trains these rows, all blocks of a window at once)."""
    anchor, k = int(anchor), int(k)
    inputs = [int(t) for t in ids[:anchor + 1]] + [int(mask_id)] * (k - 1)
    return inputs, [int(t) for t in ids[anchor + 1:anchor + 1 + k]]


@checker
def parallel_block(fn):
    """Check ``fn(ids, anchor, k, mask_id) -> (inputs, targets)``: what a parallel (PARD) draft is fed to propose the
    K = ``k`` tokens after ``ids[anchor]`` in one forward, and the true tokens its last K output rows are scored on
    (:func:`reference_parallel_block`). Planted mistakes: the targets one place early (the anchor's own token), K
    masks instead of K - 1, the true tokens fed where the masks go (an autoregressive draft's teacher forcing), and
    every row scored on the next token."""
    gen = torch.Generator().manual_seed(9)
    cases = []
    # the last two: the anchor at the end (no target yet, as at inference) and two tokens before it (targets cut)
    for length, anchor, k, mask_id in ((10, 3, 4, 2048), (8, 0, 3, 2048), (12, 6, 2, 50), (9, 4, 1, 2048),
                                       (12, 2, 5, 99), (10, 5, 4, 2048), (10, 9, 4, 2048), (10, 7, 4, 2048)):
        cases.append((torch.randint(0, 48, (length,), generator=gen).tolist(), anchor, k, mask_id))
    faults = [
        (lambda x, a, k, m: (x[:a + 1] + [m] * (k - 1), x[a:a + k]),
         "the targets start one place early: ids[anchor] is fed, not guessed. Its row predicts the token AFTER it, "
         "so token 1 of the block is ids[anchor + 1]."),
        (lambda x, a, k, m: (x[:a + 1] + [m] * k, x[a + 1:a + 1 + k]),
         "K - 1 masks, not K: the row of the last real token, ids[anchor], already drafts token 1, and mask i "
         "drafts token i + 1, so K - 1 masks give K rows of guesses (a K-th mask would guess token K + 1)."),
        (lambda x, a, k, m: (x[:a + k], x[a + 1:a + 1 + k]),
         "that feeds the true tokens 2..K where the masks go: an autoregressive draft's teacher forcing (in "
         "training, the true text fed in place of the draft's own earlier guesses). At "
         "inference those tokens are what the draft is proposing, it does not have them; the masks stand in for "
         "them and carry nothing, so no row depends on an earlier draft."),
        (lambda x, a, k, m: (x[:a + 1] + [m] * max(len(x[a + 1:a + 1 + k]) - 1, 0), x[a + 1:a + 1 + k]),
         "the inputs always end with k - 1 masks, also near the end of ids: only the targets (true tokens) run out "
         "there. The draft is fed the same block wherever the anchor is; at inference the anchor is the last token "
         "and there are no targets at all."),
        (lambda x, a, k, m: (x[:a + 1] + [m] * (k - 1), x[a + 1:a + 2] * k),
         "mask row i is scored on the token i + 1 places after the anchor, not on the next token again: the K "
         "targets are K different tokens of ids, the ones that follow the anchor."),
        (lambda x, a, k, m: reference_parallel_block(x, a, k, m)[::-1],
         "return the pair in the order (inputs, targets): what the draft is fed first, then the true tokens its rows "
         "are scored on; your answer has them the other way round."),
    ]

    def same(a, b):
        got, want = int_list_pair(a), int_list_pair(b)
        return got is not None and got == want

    first = run_case(fn, fresh_args(cases[0]))
    if first[0] == "ok" and first[1] is not None and int_list_pair(first[1]) is None:
        note = pair_shape_note(first[1], "inputs, targets = parallel_block(...)", "(input, target) pair per position",
                               "inputs")
        raise Fail(f"parallel_block returned {show_brief(first[1])}{note}.\n  Hint: return a pair "
                   "(inputs, targets) of token-id lists, in that order (list(...) makes one): the lesson unpacks it "
                   "as inputs, targets = parallel_block(...), takes len(inputs), feeds inputs to the draft and "
                   "compares its guesses with targets.")
    count = compare("parallel_block", fn, cases, reference_parallel_block, faults, same,
                    "inputs: the text up to and including ids[anchor], then mask tokens (how many? K rows must guess, "
                    "and ids[anchor]'s own row already guesses the first); targets: the true tokens after "
                    "ids[anchor], at most k of them (fewer, or none, near the end of ids).")
    return (f"{count} blocks right: one forward over the text and K - 1 masks, the last K rows scored on the K "
            "tokens after the anchor, none fed an earlier draft")
