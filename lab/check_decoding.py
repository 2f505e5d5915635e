"""Exercise checkers for lessons 07–09 (KV-cache rollback, prompt lookup, Jacobi / Lookahead decoding).

Same contract as :mod:`lab.check`: each checker runs the learner's function on reference cases (answers from the
``lab`` reference code), prints ``✓`` with a summary or ``✗`` with a hint chosen by comparing the learner's answers
with planted wrong versions (the mistakes people actually make), returns a bool, prints "not solved yet" for a
stub that raises ``NotImplementedError``, and never raises. Checkers that need a model take it as an argument
(the lesson passes the bundled target), so they check on the same model the learner is using.
"""
from __future__ import annotations

import collections.abc
import contextlib
import random

import torch

from lab.check import (  # one checker harness for all lessons
    _checker,
    _compare,
    _Fail,
    _fresh,
    _run,
    _same_whole,
)
from lab.drafters.lookahead import converged_prefix, jacobi_update
from lab.drafters.prompt_lookup import ngram_lookup as _ref_ngram_lookup
from lab.kv import cache_length, rollback, two_cache_greedy
from lab.kv import draft_keep_length as _ref_draft_keep
from lab.kv import emitted_tokens as _ref_emitted
from lab.kv import next_position as _ref_next_position
from lab.models import forward, new_cache

__all__ = ["rollback_after_rejection", "next_position", "draft_keep_length", "emitted_tokens", "ngram_lookup",
           "jacobi_step", "count_converged"]


def _as_ints(value):
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    try:
        items = list(value)
    except TypeError:
        return None
    out = []
    for item in items:
        if isinstance(item, bool):
            return None
        try:
            if int(item) != item:
                return None
        except (TypeError, ValueError):
            return None
        out.append(int(item))
    return out


def _same_ints(a, b) -> bool:
    a, b = _as_ints(a), _as_ints(b)
    return a is not None and a == b


def _want_token_list(name: str, fn, case, example: str, why: str = "the lesson adds it to a list of ids and prints it",
                     what: str = "int token ids", tuples: bool = True) -> None:
    """Refuse, with a hint, an answer on ``case`` that holds the right kind of ints in the wrong container: a tensor
    (the lesson would collect 0-d tensors), a one-shot iterator (a generator or map, used up once read) and, with
    ``tuples=False``, a tuple. ``why`` says what the lesson does with the list. None and errors are left to
    :func:`lab.check._compare`, which names the case."""
    outcome = _run(fn, _fresh(case))
    value = outcome[1] if outcome[0] == "ok" else None
    if isinstance(value, (torch.Tensor, collections.abc.Iterator)) or (not tuples and isinstance(value, tuple)):
        raise _Fail(f"{name} returned a {type(value).__name__}; return a list of {what} (e.g. {example}): {why}.")


# ---------------------------------------------------------------------------------------------------------
# Lesson 07: KV-cache rollback.

def _ref_rollback_after_rejection(model, prefix_ids, draft_ids, rejected_at):
    """The reference answer: prefill ``prefix_ids``, append ``draft_ids`` on the same cache, then cut the cache
    back to the prefix and the ``rejected_at - 1`` accepted drafts (:func:`lab.kv.rollback`). Returns the cache."""
    cache = new_cache()
    forward(model, list(prefix_ids), cache)
    forward(model, list(draft_ids), cache)
    return rollback(cache, len(prefix_ids) + rejected_at - 1)


@contextlib.contextmanager
def _cache_peaks(model):
    """While active, record for every cache object a forward of ``model`` ran on the most positions it held:
    ``{id(cache): (cache, peak)}`` (the cache is kept so its id stays unique)."""
    peaks: dict = {}

    def hook(module, args, kwargs, output):
        for value in list(args) + list(kwargs.values()):
            if hasattr(value, "get_seq_length") and hasattr(value, "crop"):
                before = peaks.get(id(value), (value, 0))[1]
                peaks[id(value)] = (value, max(before, cache_length(value)))

    handle = model.register_forward_hook(hook, with_kwargs=True)
    try:
        yield peaks
    finally:
        handle.remove()


@_checker
def rollback_after_rejection(fn, model, prefix_ids, draft_ids):
    """Check ``fn(model, prefix_ids, draft_ids, rejected_at) -> cache`` (seed lesson 000, Hard exercise).

    For every ``rejected_at`` in 1..len(draft_ids) (1-based draft position of the first rejection), the returned
    cache must hold exactly ``prefix_ids + draft_ids[:rejected_at - 1]``: its length is checked, the logits of
    one more forward on it must equal a fresh forward over those tokens (atol 1e-4), and it must be the cache the
    drafts were appended to, rolled back — a cache rebuilt from the accepted tokens gives the same logits but is
    not a rollback (a forward hook on ``model`` records how many positions each cache held).
    """
    prefix, drafts = [int(t) for t in prefix_ids], [int(t) for t in draft_ids]
    probe = drafts[0]
    rebuilt = None  # (rejected_at, peak) of the first cache that never held the drafts
    for rejected_at in range(1, len(drafts) + 1):
        given_prefix, given_drafts = list(prefix), list(drafts)
        with _cache_peaks(model) as peaks:
            cache = fn(model, given_prefix, given_drafts, rejected_at)
        for name, given, original in (("prefix_ids", given_prefix, prefix), ("draft_ids", given_drafts, drafts)):
            if given != original:  # the lesson's own lists would grow (or shrink) under the next cells
                raise _Fail(f"rejected_at={rejected_at}: your function changed {name} in place (it now holds "
                            f"{len(given)} ids, not {len(original)}).\n  Hint: build a new list, e.g. prefix_ids + "
                            "draft_ids, instead of += or append on an argument: the caller still needs it as it was.")
        if cache is None or not hasattr(cache, "get_seq_length"):
            raise _Fail(f"rejected_at={rejected_at}: return the cache itself (a transformers DynamicCache), got "
                        f"{type(cache).__name__}")
        want = len(prefix) + rejected_at - 1
        have = cache_length(cache)
        if have != want:
            hints = {
                len(prefix) + len(drafts): "nothing was rolled back: the rejected drafts are still in the cache.",
                want + 1: ("one entry too many: draft position 3 rejected means drafts 1 and 2 were accepted, so "
                           "the cache keeps len(prefix) + rejected_at - 1 entries — the rejected draft goes too."),
                want - 1: "one entry too few: the drafts before the rejected one were accepted and must stay.",
                len(prefix): "you rolled back to the prefix: the accepted drafts before the rejection stay.",
            }
            raise _Fail(f"rejected_at={rejected_at}: the cache holds {have} positions, expected {want} "
                        f"({len(prefix)} prefix + {rejected_at - 1} accepted drafts).\n  Hint: "
                        + hints.get(have, "keep the first len(prefix) + rejected_at - 1 positions: "
                                          "lab.kv.rollback(cache, length)."))
        after = forward(model, [probe], cache)[-1]
        fresh = forward(model, prefix + drafts[: rejected_at - 1] + [probe], new_cache())[-1]
        if not torch.allclose(after, fresh, atol=1e-4, rtol=1e-4):
            raise _Fail(f"rejected_at={rejected_at}: the length is right but the next logits differ from a fresh "
                        f"forward by {float((after - fresh).abs().max()):.3g}.\n  Hint: the cache must hold the "
                        "prefix and the accepted drafts at their own positions: prefill the prefix, forward the "
                        "drafts on the same cache, then cut the end off (never rebuild or reorder entries).")
        peak = peaks.get(id(cache), (cache, 0))[1]
        if peak < len(prefix) + len(drafts) and rebuilt is None:
            rebuilt = (rejected_at, peak)
    if rebuilt is not None:  # reported after the content checks, whose hints come first
        rejected_at, peak = rebuilt
        seen = ("no forward of the model ran on it: it is a copy of another cache" if peak == 0 else
                f"a forward saw it hold at most {peak} of {len(prefix) + len(drafts)} positions: it was built "
                "again from the accepted tokens")
        raise _Fail(f"rejected_at={rejected_at}: the cache holds the right tokens, but the cache you returned never "
                    f"held the drafts ({seen}), so nothing was rolled back.\n  Hint: return the cache the drafts "
                    "were appended to, with the rejected entries cut off its end (lab.kv.rollback(cache, length)). "
                    "A decoding loop that rebuilds or copies its cache pays a prefill or a full copy after every "
                    "rejection.")
    return (f"for every rejection position 1..{len(drafts)} the cache held exactly prefix + accepted drafts, and "
            "the next logits matched a fresh forward")


@_checker
def next_position(fn):
    """Check ``fn(position, num_accepted) -> int``: the new last committed token's position."""
    cases = [(9, 0), (9, 2), (9, 4), (0, 1), (120, 3), (41, 7)]
    faults = [
        (lambda p, k: p + 1, "a step commits num_accepted drafts AND the target's own token: advance by "
                             "num_accepted + 1, not by 1 (that is the bug: positions fall behind after every step "
                             "that accepted a draft)."),
        (lambda p, k: p + k, "do not forget the target's own token (resampled or bonus): it is committed too."),
        (lambda p, k: p + k + 2, "one too far: the new last token is the target's token, num_accepted + 1 "
                                 "positions after the old last token."),
    ]
    count = _compare("next_position", fn, cases, _ref_next_position, faults, _same_whole,
                     "return position + num_accepted + 1 (an int: positions index the cache and range()).")
    return f"{count} cases right: positions advance by the number of committed tokens"


@_checker
def draft_keep_length(fn, target=None, draft_model=None, prompt_ids=None):
    """Check ``fn(held, num_accepted, n_draft) -> int``: draft-cache entries kept after verification.

    With ``target``, ``draft_model`` and ``prompt_ids`` it also runs :func:`lab.kv.two_cache_greedy` with the
    learner's rule and checks the draft's next logits against a fresh forward over the committed tokens.
    """
    cases = [(13, 0, 4), (13, 1, 4), (13, 2, 4), (13, 3, 4), (13, 4, 4), (30, 0, 1), (30, 1, 1), (8, 5, 8),
             (20, 0, 6), (20, 6, 6)]
    faults = [
        (lambda h, k, n: h - (n - k), "the draft never fed its LAST draft (its logits were not needed), so only "
                                      "n_draft - 1 - num_accepted rejected drafts are in its cache: removing "
                                      "n_draft - num_accepted also drops the last accepted token."),
        (lambda h, k, n: h - (n - 1 - k), "after a full acceptance (num_accepted = n_draft) nothing is removed: "
                                          "clamp the count of entries to drop at 0."),
        (lambda h, k, n: h, "the rejected drafts that were fed must leave the draft's cache."),
        (lambda h, k, n: h - (n - 1), "keep the accepted drafts: only the rejected ones go."),
    ]
    count = _compare("draft_keep_length", fn, cases, _ref_draft_keep, faults, _same_whole,
                     "return held - max(0, n_draft - 1 - num_accepted), an int (the cache is cut to that length).")
    if target is None:
        return f"{count} cases right"
    prompt = [int(t) for t in prompt_ids]
    run = two_cache_greedy(target, draft_model, prompt, 40, 4, draft_keep=fn)
    reference = two_cache_greedy(target, draft_model, prompt, 40, 4)
    committed = prompt + run["emitted"]
    pending = run["draft_pending"]
    probe = forward(draft_model, pending, run["draft_cache"])[-1]
    fresh = forward(draft_model, committed, new_cache())[-1]
    if not torch.allclose(probe, fresh, atol=1e-4, rtol=1e-4):
        raise _Fail("in the loop, the draft's cache did not hold the committed tokens.")
    rate = run["accepted"] / run["drafted"]
    return (f"{count} cases right; in the loop the draft's cache matches a fresh forward and the acceptance rate is "
            f"{rate:.2f} (reference {reference['accepted'] / reference['drafted']:.2f})")


@_checker
def emitted_tokens(fn):
    """Check ``fn(drafts, num_accepted, next_token) -> list``: the tokens one step adds to the output."""
    cases = [([4, 5, 6, 7], 0, 9), ([4, 5, 6, 7], 2, 9), ([4, 5, 6, 7], 4, 9), ([1], 0, 2), ([1], 1, 2),
             ([3, 3, 3], 1, 3)]
    faults = [
        (lambda d, k, t: list(d) + [t], "rejected drafts must not reach the output: keep drafts[:num_accepted] "
                                        "only (the target never agreed to the rest)."),
        (lambda d, k, t: list(d[:k]), "every step also emits the target's own token (resampled or bonus)."),
        (lambda d, k, t: list(d[:k]) + ([t] if k < len(d) else []),
         "after a full acceptance the target's token is the bonus token: emit it too (every step ends with "
         "next_token, resampled or bonus)."),
        (lambda d, k, t: list(d[:k + 1]), "the rejected draft is replaced by the target's token, not kept."),
        (lambda d, k, t: [t] + list(d[:k]), "order: the accepted drafts come first, the target's token last."),
    ]
    _want_token_list("emitted_tokens", fn, cases[0], "list(drafts[:num_accepted]) + [next_token]")
    count = _compare("emitted_tokens", fn, cases, _ref_emitted, faults, _same_ints,
                     "return drafts[:num_accepted] + [next_token].")
    return f"{count} cases right"


# ---------------------------------------------------------------------------------------------------------
# Lesson 08: prompt lookup.

def _lookup_cases():
    cases = [
        ([1, 2, 3, 9, 1, 2, 3], 3, 5), ([1, 2, 3, 9, 9, 1, 2, 3], 3, 2), ([4, 1, 2, 8, 1, 2, 6, 1, 2], 3, 5),
        ([1, 2, 7, 5, 2], 3, 5), ([7, 7, 7], 3, 5), ([1, 2, 1, 2], 3, 5), ([1, 2, 3, 4], 3, 5), ([5], 3, 5),
        ([5, 5], 3, 5), ([1, 2, 3, 4, 0, 3, 8, 2, 3], 2, 3), ([1, 2, 3, 4, 0, 3, 8, 2, 3], 1, 3),
        ([3, 1, 2, 3, 9, 1, 2, 3], 1, 5), ([9, 8, 7, 6, 9, 8, 7], 4, 4), ([6, 6, 6, 6, 6, 6], 2, 3),
        # multi-digit ids: as digit strings [1, 23] and [12, 3] both read "123", but they are different tokens
        ([12, 3, 9, 1, 23], 2, 3), ([1, 23, 4, 12, 3], 2, 3), ([10, 5, 7, 10, 5], 2, 4), ([5, 11, 1, 5, 1, 1], 2, 3),
        ([2, 21, 7, 22, 1], 3, 2), ([40, 4, 0, 8, 4, 0], 2, 2),
    ]
    rng = random.Random(0)
    for _ in range(12):
        context = [rng.randrange(4) for _ in range(rng.randrange(2, 14))]
        cases.append((context, rng.randrange(1, 5), rng.randrange(1, 6)))
    for _ in range(6):  # ids whose digit strings run into each other
        context = [rng.choice((1, 2, 11, 12, 21, 22)) for _ in range(rng.randrange(3, 12))]
        cases.append((context, rng.randrange(1, 4), rng.randrange(1, 5)))
    return cases


def _string_lookup(context, max_ngram, n_draft):
    """A planted mistake: search the ids as one digit string. Right for single-digit ids only."""
    text = "".join(map(str, context))
    for n in range(min(max_ngram, len(context) - 1), 0, -1):
        suffix = "".join(map(str, context[-n:]))
        i = text.rfind(suffix, 0, len(text) - 1)  # an occurrence that ends before the context does
        if i >= 0:
            return list(context[i + n:i + n + n_draft])
    return []


def _lookup_variant(self_match=False, oldest=False, no_fallback=False, no_cap=False, non_overlap=False,
                    include_gram=False, negative_slice=False, smallest=1, below_max=False, skip_start=False):
    def lookup(context, max_ngram, n_draft):
        tokens, length = list(context), len(context)
        top = max_ngram - 1 if below_max else max_ngram
        sizes = [max_ngram] if no_fallback else range(top, smallest - 1, -1)
        for n in sizes:
            if n > length - 1:
                if negative_slice:
                    raise IndexError("list index out of range")
                continue
            suffix = tokens[-n:]
            n_eff = len(suffix)
            last_start = length - n_eff if self_match else length - n_eff - 1
            if non_overlap:
                last_start = min(last_start, length - 2 * n_eff)
            starts = range(0, last_start + 1) if oldest else range(last_start, 0 if skip_start else -1, -1)
            for i in starts:
                if tokens[i:i + n_eff] == suffix:
                    begin = i if include_gram else i + n_eff
                    return tokens[begin:] if no_cap else tokens[begin:begin + n_draft]
        return []
    return lookup


@_checker
def ngram_lookup(fn):
    """Check ``fn(context, max_ngram, n_draft) -> list``: the continuation of the most recent earlier occurrence of
    the longest matching suffix n-gram (``lab.drafters.prompt_lookup.ngram_lookup``)."""
    faults = [
        (_lookup_variant(self_match=True), "the last n tokens always match themselves: search only starts i < "
                                           "len(context) - n (an occurrence that ends before the context does)."),
        (_lookup_variant(oldest=True), "prefer the MOST RECENT earlier occurrence: scan start positions from the "
                                       "end backwards."),
        (_lookup_variant(no_fallback=True), "when the longest n-gram has no earlier occurrence, try n - 1, …, 1 "
                                            "before giving up."),
        (_lookup_variant(no_cap=True), "propose at most n_draft tokens."),
        (_lookup_variant(smallest=2), "try every size down to n = 1: a single matching token is a match too (a "
                                      "smallest n, like vLLM's prompt_lookup_min, is an engine setting, not part of "
                                      "this exercise)."),
        (_lookup_variant(below_max=True), "start at n = max_ngram itself: range(max_ngram, 0, -1) (the sizes "
                                          "max_ngram, ..., 1)."),
        (_lookup_variant(non_overlap=True), "an earlier occurrence may overlap the suffix (in [7, 7, 7] the bigram "
                                            "[7, 7] also starts at index 0): allow every start i < len - n."),
        (_lookup_variant(include_gram=True), "propose what FOLLOWED the match, not the matched n-gram itself."),
        (_lookup_variant(skip_start=True), "scan down to and including start 0: a backwards range needs -1 as its "
                                           "stop, range(len(context) - n - 1, -1, -1); with 0 the occurrence at the "
                                           "very start of the context is never checked."),
        (_lookup_variant(negative_slice=True), "an n-gram longer than len(context) - 1 has no earlier occurrence: "
                                               "skip those sizes instead of indexing past the start."),
        (_string_lookup, "compare token ids, not their digits: joined into one string, [1, 23] and [12, 3] both "
                         "read \"123\", so a string search finds matches that are not there and counts positions "
                         "in characters. Compare lists of ids: context[i:i + n] == context[-n:]."),
    ]
    cases = _lookup_cases()
    _want_token_list("ngram_lookup", fn, cases[0], "list(context[i + n:i + n + n_draft])")
    count = _compare("ngram_lookup", fn, cases, _ref_ngram_lookup, faults, _same_ints,
                     "for n = max_ngram … 1: take the last n tokens, scan earlier start positions from the most "
                     "recent back, and return up to n_draft tokens after the first hit; [] if none.")
    return (f"{count} cases right, including the edge cases (self-match, overlap, short contexts, no match, "
            "multi-digit ids)")


# ---------------------------------------------------------------------------------------------------------
# Lesson 09: Jacobi iteration.

@_checker
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

    def window_only(m, p, w):
        return forward(m, w, new_cache()).argmax(-1).tolist()

    def sequential(m, p, w):
        out = []
        for _ in w:
            out.append(int(forward(m, p + out, new_cache())[-1].argmax()))
        return out

    faults = [
        (shifted, "row j of the logits predicts position j + 1: the guess for window position i comes from the row "
                  "of the token BEFORE it, index len(prefix) - 1 + i."),
        (window_only, "feed prefix + window: the guesses depend on the committed text."),
        (sequential, "that is autoregressive decoding (one forward per token, each seeing the NEW guesses). Jacobi "
                     "updates every position at once from the OLD guesses: one forward over prefix + window."),
    ]
    # The lesson's loop keeps every window and compares windows with ==: only a list does that right. None and
    # exceptions are left to _compare, which names the case (_checker already time-limits fn).
    first = _run(fn, _fresh(cases[0]))
    if first[0] == "ok" and first[1] is not None and not isinstance(first[1], list):
        why = ("a tuple never equals a list, so the lesson's `window == greedy` would stay False"
               if isinstance(first[1], tuple) else f"a {type(first[1]).__name__} cannot be compared that way")
        raise _Fail(f"jacobi_step returned a {type(first[1]).__name__}; return a new list of int token ids (e.g. "
                    f"logits[...].argmax(-1).tolist()): the lesson's loop compares windows with ==, and {why}.")
    same = _same_ints
    count = _compare("jacobi_step", fn, cases, jacobi_update, faults, same,
                     "run the model once on prefix + window; new window = argmax of rows len(prefix) - 1 … "
                     "len(prefix) + W - 2.",
                     show_args=lambda case: f"model, prefix_ids ({len(case[1])} tokens), window={case[2]!r}")
    return f"{count} windows updated exactly as one Jacobi iteration; the greedy continuation is a fixed point"


def _ref_count_converged(iterations):
    final = iterations[-1]
    return [converged_prefix(window, final) for window in iterations]


@_checker
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
        counts = _ref_count_converged(iterations)
        return [counts[0]] + [b - a for a, b in zip(counts, counts[1:])]

    def second_last(iterations):
        final = iterations[-2] if len(iterations) > 1 else iterations[-1]
        return [converged_prefix(window, final) for window in iterations]

    faults = [
        (second_last, "the fixed point is the LAST window, iterations[-1]: a trajectory need not repeat it."),
        (anywhere, "count only the leading run of final tokens: a later position can hold its final token by "
                   "luck and still change, because the guesses before it are not final yet."),
        (vs_previous, "compare each window with the FIXED POINT (the last window), not with the window before it."),
        (newly, "return the converged prefix of every window (a running total), not the increase."),
    ]
    _want_token_list("count_converged", fn, tuple(cases[0]), "[converged_prefix(w, final) for w in iterations]",
                     "the lesson compares each count with the next (counts[1:])", "counts")
    count = _compare("count_converged", fn, [tuple(c) for c in cases], _ref_count_converged, faults, _same_ints,
                     "for each window, count positions from the left while window[i] == iterations[-1][i].")
    return f"{count} trajectories counted right"
