"""Exercise checkers for lesson 07 (KV-cache rollback).

Checkers that need a model take it as an argument (the lesson passes the bundled target), so they check
on the same model the learner is using.

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import contextlib

import torch

from lab.exercises.harness import checker, compare, Fail, same_ints, same_whole, want_token_list
from lab.kv import cache_length, rollback, two_cache_greedy
from lab.kv import draft_keep_length as _ref_draft_keep
from lab.kv import emitted_tokens as _ref_emitted
from lab.kv import next_position as _ref_next_position
from lab.models import forward, new_cache

__all__ = ["rollback_after_rejection", "next_position", "draft_keep_length", "emitted_tokens",
           "reference_rollback_after_rejection"]


def reference_rollback_after_rejection(model, prefix_ids, draft_ids, rejected_at):
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


def _refuse_half_precision(model, argument: str) -> None:
    """Raise :class:`Fail` when ``model`` computes in half precision: the checks compare its logits after a rollback
    with a fresh forward at 1e-4, which bfloat16 or float16 rounding exceeds whatever the cache holds (on a GPU of
    the Ampere generation or later ``dtype="auto"`` picks bfloat16). float32 and float64 pass."""
    dtype = next(model.parameters()).dtype
    if dtype in (torch.bfloat16, torch.float16):  # float64 rounds finer than float32: it passes
        raise Fail(f"{argument} computes in {str(dtype).removeprefix('torch.')}, whose rounding alone moves the logits "
                   "by more than this check's 1e-4 (a cache can be right and still fail it).\n  Hint: load the pair "
                   "in float32 for this lesson: load_pair(PAIR, dtype=\"float32\"); exactness is checked in float32, "
                   "speed is measured in the fast dtype.")


# transformers >= 5.18 (checked on 5.25, cache_utils.py, DynamicLayer.crop): "Calling `crop` with a positive value
# (`12`) is not supported. ..."; its static and sliding-window layers: "... can only be cropped by passing a negative
# int ...".
_CROP_HINT = ("the cache's crop(n) no longer takes the length to keep: in the transformers installed here n must be "
              "negative or 0, and crop(-k) removes the LAST k entries (a positive n was read as the length to keep "
              "only by older releases). Work out how many entries must go, and pass minus that count.")


def _positive_crop(error: BaseException) -> bool:
    """Whether ``error`` is transformers refusing ``cache.crop(n)`` with n > 0 (the length to keep, as 4.x read it)."""
    message = str(error)
    return "crop" in message and ("positive value" in message or "negative int" in message)


@checker
def rollback_after_rejection(fn, model, prefix_ids, draft_ids):
    """Check ``fn(model, prefix_ids, draft_ids, rejected_at) -> cache`` (seed lesson 000, Hard exercise).

    For every ``rejected_at`` in 1..len(draft_ids) (1-based draft position of the first rejection), the returned
    cache must hold exactly ``prefix_ids + draft_ids[:rejected_at - 1]``: its length is checked, the logits of
    one more forward on it must equal a fresh forward over those tokens (atol 1e-4), and it must be the cache the
    drafts were appended to, rolled back — a cache rebuilt from the accepted tokens gives the same logits but is
    not a rollback (a forward hook on ``model`` records how many positions each cache held).
    """
    _refuse_half_precision(model, "model")
    prefix, drafts = [int(t) for t in prefix_ids], [int(t) for t in draft_ids]
    probe = drafts[0]
    rebuilt = None  # (rejected_at, peak) of the first cache that never held the drafts
    for rejected_at in range(1, len(drafts) + 1):
        given_prefix, given_drafts = list(prefix), list(drafts)
        with _cache_peaks(model) as peaks:
            try:
                cache = fn(model, given_prefix, given_drafts, rejected_at)
            except (ValueError, RuntimeError) as error:
                if not _positive_crop(error):
                    raise
                raise Fail(f"rejected_at={rejected_at}: your function raised {type(error).__name__}: "
                           f"{' '.join(str(error).split())}\n  Hint: {_CROP_HINT}") from None
        for name, given, original in (("prefix_ids", given_prefix, prefix), ("draft_ids", given_drafts, drafts)):
            if given != original:  # the lesson's own lists would grow (or shrink) under the next cells
                raise Fail(f"rejected_at={rejected_at}: your function changed {name} in place (it now holds "
                           f"{len(given)} ids, not {len(original)}).\n  Hint: build a new list, e.g. prefix_ids + "
                           "draft_ids, instead of += or append on an argument: the caller still needs it as it was.")
        if cache is None or not hasattr(cache, "get_seq_length"):
            raise Fail(f"rejected_at={rejected_at}: return the cache itself (a transformers DynamicCache), got "
                       f"{type(cache).__name__}")
        want = len(prefix) + rejected_at - 1
        have = cache_length(cache)
        if have != want:
            hints = {
                len(prefix) + len(drafts) - rejected_at: (
                    f"crop(-k) removes the LAST k entries, and here the last {len(drafts) - rejected_at + 1} are "
                    f"the rejected draft and the drafts after it: rejected_at={rejected_at} is where the rejection "
                    "happened, not how many entries go."),
                len(prefix) + len(drafts): "nothing was rolled back: the rejected drafts are still in the cache.",
                want + 1: (f"one entry too many: draft position {rejected_at} rejected means only the drafts before "
                           "it were accepted, so the rejected draft leaves the cache too."),
                want - 1: "one entry too few: the drafts before the rejected one were accepted and must stay.",
                len(prefix): "you rolled back to the prefix: the accepted drafts before the rejection stay.",
            }
            raise Fail(f"rejected_at={rejected_at}: the cache holds {have} positions, expected {want} "
                       f"({len(prefix)} prefix + {rejected_at - 1} accepted drafts).\n  Hint: "
                       + hints.get(have, "count what must stay (the prefix and the accepted drafts) against what "
                                         "your cut keeps, for this rejected_at."))
        after = forward(model, [probe], cache)[-1]
        fresh = forward(model, prefix + drafts[: rejected_at - 1] + [probe], new_cache())[-1]
        if not torch.allclose(after, fresh, atol=1e-4, rtol=1e-4):
            raise Fail(f"rejected_at={rejected_at}: the length is right but the next logits differ from a fresh "
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
        raise Fail(f"rejected_at={rejected_at}: the cache holds the right tokens, but the cache you returned never "
                   f"held the drafts ({seen}), so nothing was rolled back.\n  Hint: return the cache the drafts "
                   "were appended to, with the rejected entries cut off its end (lab.kv.rollback(cache, length)). "
                   "A decoding loop that rebuilds or copies its cache pays a prefill or a full copy after every "
                   "rejection.")
    return (f"for every rejection position 1..{len(drafts)} the cache held exactly prefix + accepted drafts, and "
            "the next logits matched a fresh forward")


@checker
def next_position(fn):
    """Check ``fn(position, num_accepted) -> int``: the new last committed token's position."""
    cases = [(9, 0), (9, 2), (9, 4), (0, 1), (120, 3), (41, 7)]
    faults = [
        (lambda p, k: p + 1, "a step commits every draft the target accepted AND the target's own token, so the "
                             "position moves on by all the tokens the step committed, not by one (that is the bug: "
                             "positions fall behind after every step that accepted a draft)."),
        (lambda p, k: p + k, "do not forget the target's own token (resampled or bonus): it is committed too."),
        (lambda p, k: p + k + 2, "one too far: the new last token is the target's own token, which comes right "
                                 "after the accepted drafts; count the tokens the step committed, no more."),
        (lambda p, k: list(range(p + 1, p + k + 2)), "return one int, the position of the NEWEST committed token "
                                                     "(the last of the positions the step committed), not the list "
                                                     "of them: the next step reads its logits from there."),
    ]
    count = compare("next_position", fn, cases, _ref_next_position, faults, same_whole,
                    "position is where the last committed token sits. A step commits the drafts the target "
                    "accepted and then the target's own token (resampled or bonus), which becomes the new last "
                    "token: move on by the number of tokens the step committed. E.g. from position 50, a step that "
                    "accepted 1 draft commits 2 tokens, at 51 and 52, so the new last token sits at 52; one that "
                    "accepted none commits only the target's token, at 51. Return an int (positions index the "
                    "cache and range()).")
    return f"{count} cases right: positions advance by the number of committed tokens"


_CHECK_TOKENS = 40  # new tokens of the loop draft_keep_length runs with the learner's rule (the lesson's run has 48)


@checker
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
                                      "n_draft - num_accepted also drops the newest committed entry (the last "
                                      "accepted draft, or the token fed before the drafts when none was accepted)."),
        (lambda h, k, n: h - (n - 1 - k), "after a full acceptance (num_accepted = n_draft) nothing is removed: "
                                          "clamp the count of entries to drop at 0."),
        (lambda h, k, n: h, "the rejected drafts that were fed must leave the draft's cache."),
        (lambda h, k, n: h - (n - 1), "keep the accepted drafts: only the rejected ones go."),
    ]
    count = compare("draft_keep_length", fn, cases, _ref_draft_keep, faults, same_whole,
                    "held is the draft cache's length after proposing; it ends with the drafts the draft fed, "
                    "which are all of them but the last (nothing needed the last draft's logits). The fed "
                    "drafts the target accepted stay, the fed ones it rejected go; the last draft was never in the "
                    "cache, so it needs no removing, and nothing is ever removed below zero. E.g. held = 25 after "
                    "n_draft = 5: drafts 1-4 are in the cache; with 2 accepted, drafts 3 and 4 go and 23 entries "
                    "stay; with 4 or 5 accepted all 25 stay. Return an int (the cache is cut to that length).")
    if target is None:
        return f"{count} cases right"
    _refuse_half_precision(draft_model, "draft_model")
    prompt = [int(t) for t in prompt_ids]
    run = two_cache_greedy(target, draft_model, prompt, _CHECK_TOKENS, 4, draft_keep=fn)
    reference = two_cache_greedy(target, draft_model, prompt, _CHECK_TOKENS, 4)
    committed = prompt + run["emitted"]
    pending = run["draft_pending"]
    probe = forward(draft_model, pending, run["draft_cache"])[-1]
    fresh = forward(draft_model, committed, new_cache())[-1]
    if not torch.allclose(probe, fresh, atol=1e-4, rtol=1e-4):
        raise Fail("in the loop, the draft's cache did not hold the committed tokens.")
    rate, reference_rate = run["accepted"] / run["drafted"], reference["accepted"] / reference["drafted"]
    return (f"{count} cases right; in the loop the draft's cache matches a fresh forward and the acceptance rate "
            f"over {_CHECK_TOKENS} new tokens is {rate:.2f} (reference {reference_rate:.2f})")


@checker
def emitted_tokens(fn):
    """Check ``fn(drafts, num_accepted, next_token) -> list``: the tokens one step adds to the output."""
    cases = [([4, 5, 6, 7], 0, 9), ([4, 5, 6, 7], 2, 9), ([4, 5, 6, 7], 4, 9), ([1], 0, 2), ([1], 1, 2),
             ([3, 3, 3], 1, 3), ([9, 2, 9, 1], 3, 4)]  # the last: a repeated token, drafts not in sorted order
    faults = [
        (lambda d, k, t: list(d) + [t], "rejected drafts must not reach the output: keep drafts[:num_accepted] "
                                        "only (the target never agreed to the rest)."),
        (lambda d, k, t: list(d[:k]), "every step also emits the target's own token (resampled or bonus)."),
        (lambda d, k, t: list(d[:k]) + ([t] if k < len(d) else []),
         "after a full acceptance the target's token is the bonus token: emit it too (every step ends with "
         "next_token, resampled or bonus)."),
        (lambda d, k, t: list(d[:k + 1]), "the rejected draft is replaced by the target's token, not kept."),
        (lambda d, k, t: [t] + list(d[:k]), "order: the accepted drafts come first, the target's token last."),
        (lambda d, k, t: sorted(d[:k]) + [t], "keep the accepted drafts in the order they were drafted: they are "
                                               "the next tokens of the text, position by position (no sorting)."),
        (lambda d, k, t: list(dict.fromkeys(d[:k])) + [t],
         "keep every accepted draft, repeats included: a token can follow itself in a text (no set())."),
        (lambda d, k, t: list(d[:k]) + t,  # raises the learner's TypeError: list + int
         "next_token is one int, and + joins a list only with another list: wrap the int in one."),
        (lambda d, k, t: list(d[:k + 1]) + [t],
         "one draft too many: the first num_accepted drafts were accepted, and the next one (when there is one) "
         "is the rejected draft that the target's token replaces."),
    ]
    want_token_list("emitted_tokens", fn, cases[0], "[8, 6]")
    count = compare("emitted_tokens", fn, cases, _ref_emitted, faults, same_ints,
                    "a step outputs the drafts the target accepted, which are the first num_accepted of them in "
                    "the order drafted, and after them the target's own token (next_token: resampled after a "
                    "rejection, the bonus token after a full acceptance); the rejected draft and every draft after "
                    "it never reach the output. E.g. drafts [8, 3, 5] with 1 accepted and next_token 6 give "
                    "[8, 6]; with all 3 accepted and next_token 2 they give [8, 3, 5, 2]. Return a list of ints.")
    return f"{count} cases right"
