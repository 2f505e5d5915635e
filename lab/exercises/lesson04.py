"""Exercise checkers for lesson 04 (one speculative step, exactness, and drafts that misreport their
probabilities: greedy and top-k drafts).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import random
import re
from numbers import Integral

import torch

from lab import sampling as _sampling
from lab.exercises.harness import (checker, compare, counts_pvalue, Fail, IN_PLACE_HINT, outcome_of, P_THRESHOLD,
                                   same_float, same_tensor, show_value, unchanged)
from lab.exercises.harness import float32_tensor as _t

__all__ = ["speculative_step", "chi_square_pvalue", "greedy_draft", "topk_draft", "emitted_distribution",
           "step_variant", "reference_chi_square_pvalue"]


def emitted_distribution(target_probs, proposal_probs, reported_probs) -> torch.Tensor:
    """Exact distribution ``[V]`` (float64) of the first token a speculative step emits.

    ``proposal_probs`` [V] is the distribution the draft actually samples from; ``reported_probs`` [V] the one
    it hands to verification. The step accepts token x with probability min(1, target(x)/reported(x)) and
    otherwise resamples from the residual of target and reported. Equal to ``target_probs`` whenever
    reported == proposal (Leviathan et al. 2023, Appendix A.1). Raises ``ValueError`` for mismatched shapes.
    """
    target = torch.as_tensor(target_probs, dtype=torch.float64)
    proposal = torch.as_tensor(proposal_probs, dtype=torch.float64)
    reported = torch.as_tensor(reported_probs, dtype=torch.float64)
    if not target.shape == proposal.shape == reported.shape or target.dim() != 1:
        raise ValueError("target_probs, proposal_probs and reported_probs must all have shape [V]")
    positive = (target - reported).clamp_min(0)
    residual = positive / positive.sum() if positive.sum() > 0 else target
    out = torch.zeros_like(target)
    for x in range(len(target)):
        if proposal[x] <= 0:
            continue
        if target[x] <= 0:
            accept = 0.0
        elif reported[x] <= 0:
            accept = 1.0
        else:
            accept = min(1.0, float(target[x] / reported[x]))
        out[x] += proposal[x] * accept
        out += proposal[x] * (1 - accept) * residual
    return out


def _spec_candidates(target, draft):
    """Distributions of the first emitted token under common mistakes, keyed by hint."""
    t = torch.tensor(target, dtype=torch.float64)
    d = torch.tensor(draft, dtype=torch.float64)
    overlap = torch.minimum(t, d)
    reject = 1 - overlap.sum()
    positive = (t - d).clamp_min(0)
    backwards = (d - t).clamp_min(0)
    inverted_accept = torch.where(t > 0, torch.clamp(d / t.clamp_min(1e-30), max=1.0), torch.ones_like(t))
    inverted = d * inverted_accept + (1 - (d * inverted_accept).sum()) * positive / positive.sum()
    return [
        (overlap + reject * t, "after a rejection you resampled from the target; resample from the residual "
                               "max(0, target - draft) normalised."),
        (overlap + reject * d, "after a rejection you resampled from the draft; resample from the residual."),
        (overlap + reject * backwards / backwards.sum(), "the residual is max(0, target - draft), not draft - target."),
        (d, "every draft token was accepted: compare u with min(1, target/draft) of the drafted token."),
        (inverted, "the acceptance ratio is upside down: use target_prob / draft_prob."),
    ]


def step_variant(context: str = "full", shared_u: bool = False, bonus_context: str = "full"):
    """A toy speculative step with one planted mistake, for diagnosing the statistical checks (and for tests).

    ``context="prefix"``: every draft is verified against ``target_model(prefix)``; ``shared_u=True``: one
    uniform draw decides every draft of the step; ``bonus_context`` "prefix" or "before_last": the bonus token
    is drawn from the target after the prefix, or after every draft but the last. Defaults: the correct step.
    """
    def step(prefix, target_model, draft_model, n_draft, rng):
        out = list(prefix)
        drafts, dists = [], []
        for _ in range(n_draft):
            dist = list(draft_model(out + drafts))
            drafts.append(_sampling.categorical(dist, rng))
            dists.append(dist)
        u = _sampling.uniform(rng) if shared_u else None
        for i, token in enumerate(drafts):
            target = list(target_model(out if context == "full" else list(prefix)))
            draw = u if shared_u else _sampling.uniform(rng)
            if _sampling.accept_or_reject(target[token], dists[i][token], draw):
                out.append(token)
                continue
            residual = _sampling.residual_distribution(torch.tensor(target), torch.tensor(dists[i]))
            out.append(_sampling.categorical(residual.tolist(), rng))
            return out
        bonus = {"full": out, "prefix": list(prefix), "before_last": out[:-1]}[bonus_context]
        out.append(_sampling.categorical(list(target_model(bonus)), rng))
        return out

    return step


# The bigram pair of the two-token joint check, and the context-dependent pair of the bonus check.
_JOINT_TARGET = [[0.6, 0.3, 0.1], [0.1, 0.2, 0.7], [0.3, 0.4, 0.3]]
_JOINT_DRAFT = [[0.2, 0.4, 0.4], [0.3, 0.3, 0.4], [0.1, 0.8, 0.1]]
_BONUS_TABLE = [[0.2, 0.4, 0.4], [0.7, 0.1, 0.2], [0.1, 0.2, 0.7]]
# _SECOND_ORDER[token before last][last token]: a model that reads two tokens (after [1, 2] it prefers 0; after
# a context of [2] alone, as a last-token-only step would show it, it prefers 2).
_SECOND_ORDER = [[[0.2, 0.4, 0.4], [0.3, 0.3, 0.4], [0.1, 0.1, 0.8]],
                 [[0.5, 0.3, 0.2], [0.2, 0.6, 0.2], [0.8, 0.1, 0.1]],
                 [[0.3, 0.3, 0.4], [0.4, 0.2, 0.4], [0.2, 0.7, 0.1]]]


def _joint_counts(step, runs: int, rng) -> list[int]:
    """Counts [9] of the first two generated tokens (a, b) at index 3a + b, chaining N = 3 steps on the joint pair."""
    from lab.toy import bigram_model

    target, draft = bigram_model(_JOINT_TARGET), bigram_model(_JOINT_DRAFT)
    pairs = [0] * 9
    for _ in range(runs):
        seq = [0]
        while len(seq) < 3:
            seq = step(seq, target, draft, 3, rng)
        pairs[3 * seq[1] + seq[2]] += 1
    return pairs


_JOINT_FAULTS = [
    (dict(shared_u=True),
     "draw a fresh u for every drafted token: with one u for the whole step, a later draft is accepted whenever an "
     "earlier one with a lower acceptance probability was, so the acceptances are no longer independent."),
    (dict(context="prefix"),
     "draft position i must be checked against target_model(prefix + drafts[:i]) (the context including the "
     "drafts accepted before it), not against target_model(prefix)."),
]


def _joint_candidates(runs: int, seed: int):
    """Estimated joint distributions [9] of the planted joint-check faults (with a half-count floor), with hints."""
    out = []
    for k, (kwargs, hint) in enumerate(_JOINT_FAULTS):
        counts = _joint_counts(step_variant(**kwargs), runs, random.Random(seed + 101 + k))
        total = sum(counts) + 0.5 * len(counts)
        out.append(([(c + 0.5) / total for c in counts], hint))
    return out


def _diagnose(counts, candidates, fallback):
    """The hint of the candidate distribution that fits ``counts`` best (chi-square p-value); candidates that are the
    same distribution (the last draft untested, a backwards residual and every draft accepted all give the draft's
    at N = 1) fit alike up to rounding, and the first listed wins: callers list the likeliest first."""
    fits = [round(counts_pvalue(counts, c[0]), 9) for c in candidates]
    best = fits.index(max(fits))
    return candidates[best][1] if fits[best] > P_THRESHOLD else fallback


# lab.sampling.probability_list's refusal of a list that does not sum to 1, as categorical(probs, rng) raises it.
_SUM_REFUSED = re.compile(r"must sum to 1, got a sum of ([-+0-9.eE]+)")
_UNNORMALISED_HINT = ("a list that sums to less than 1 after a rejection is the residual max(0, target − draft) "
                      "before normalising: it holds only the mass the target has beyond the draft. Normalise the "
                      "residual by its sum before sampling from it (sampling.residual_distribution does both).")


def _short_of_one(error: BaseException) -> str | None:
    """The message of ``error`` without its closing advice, when it is the sampling helper refusing probabilities
    that sum to less than 1 but more than 0 (the unnormalised residual); None for any other error. The helper's
    "pass probabilities, not logits or counts" does not fit that mistake, so it is left out."""
    message = " ".join(str(error).split())
    found = _SUM_REFUSED.search(message)
    try:
        total = float(found.group(1)) if found else None
    except ValueError:
        return None
    if total is None or not 0 < total < 1:
        return None
    return message.split("; pass probabilities")[0]


def _new_tokens(step, prefix_len: int):
    """How many tokens ``step()`` added to a prefix of ``prefix_len``; None when it raised (a rejection with
    identical models divides by the all-zero residual, say)."""
    try:
        return len(step()) - prefix_len
    except Exception:  # noqa: BLE001 — evidence of a rejection, reported as one
        return None


@checker
def speculative_step(fn, samples: int = 3000, seed: int = 0, bonus_samples: int = 600):
    """Check ``fn(prefix, target_model, draft_model, n_draft, rng) -> list[int]`` (the contract of
    :func:`lab.toy.speculative_step`) on toy models, by structure and by statistics.

    1. Identical target and draft, N = 1, 3 and 5: every draft is accepted, so exactly ``n_draft + 1`` tokens
       (bonus) follow.
    2. A draft that only proposes a token the target never emits: exactly one token follows, from the target;
       on a 1,000-token vocabulary too, where a residual with a constant added to it would leak half its mass.
    3. Identical bigram target and draft, N = 1 and 2, ``bonus_samples`` steps each: every (last draft, bonus)
       pair follows the target's row for the last draft (a bonus drawn after the prefix, or after all drafts
       but the last, fails here; so do drafts all sampled from ``draft_model(prefix)``). Then a draft unlike the
       target, N = 1, ``2 * bonus_samples`` steps: the bonus tokens follow the target, not the draft; and
       identical models that read the last two tokens: the first new token follows the target's row for them.
    4. The first emitted token, over ``samples`` steps, matches the target distribution (chi-square).
    5. Chaining steps on bigram models: the first two generated tokens match the target's joint distribution;
       a failure is diagnosed against planted faults (one u for every draft, verification after the prefix).
    6. Two runs of 40 steps from ``random.Random(7)`` give the same tokens (every draw comes from ``rng``).
    ``rng`` is a ``random.Random`` seeded with ``seed``. Source: seed lesson 000, step 3. Returns True/False.
    """
    from lab.toy import bigram_model, fixed_model

    rng = random.Random(seed)
    target_probs = [0.5, 0.25, 0.15, 0.1]
    draft_probs = [0.1, 0.2, 0.3, 0.4]
    target, draft = fixed_model(target_probs), fixed_model(draft_probs)

    draft_calls = 0  # draft_model calls in the latest step

    def call(prefix, tm, dm, n):
        nonlocal draft_calls
        given = list(prefix)
        handed = []  # (model name, the list fn got, a copy of it): an edited one is named, not blamed on the maths

        def watched(model, name):
            def wrapped(context):
                probs = list(model(context))
                handed.append((name, probs, list(probs)))
                return probs
            return wrapped

        try:
            out = fn(given, watched(tm, "target_model"), watched(dm, "draft_model"), n, rng)
        except ValueError as error:
            short = _short_of_one(error)
            if short is None:
                raise
            raise Fail(f"your function raised ValueError: {short}\n  Hint: {_UNNORMALISED_HINT}") from None
        draft_calls = sum(name == "draft_model" for name, _, _ in handed)
        if given != list(prefix):
            raise Fail("your function changed the prefix list it was given; build a new list instead "
                       "(e.g. out = list(prefix)).")
        edited = next((name for name, probs, copy in handed if probs != copy), None)
        if edited:
            raise Fail(f"your function changed a list that {edited} returned (e.g. `t[i] = ...` or `t[i] /= s` to "
                       "build the residual): a real model may hand back the same list the next time, so the edit "
                       "would change its later answers. Copy it first (t = list(target_model(...))) or build a "
                       "new list.")
        if not isinstance(out, list) or not all(isinstance(x, Integral) and not isinstance(x, bool) for x in out):
            raise Fail(f"return a list of int token ids (prefix + new tokens); got {show_value(out, exact=True)}"
                       + (" (floats)." if isinstance(out, list) and any(isinstance(x, float) for x in out) else "."))
        if out[:len(prefix)] != list(prefix):
            raise Fail(f"the result must start with the prefix {prefix}; got {out}. Return prefix + new tokens.")
        vocab = len(tm(list(prefix)))
        outside = [x for x in out[len(prefix):] if not 0 <= x < vocab]
        if outside:
            raise Fail(f"token ids must lie in [0, {vocab}) (the models' {vocab} probabilities are indexed by id); "
                       f"you returned {out}, with {outside[0]} among the new tokens.")
        return out

    prefix = [3, 1]
    # N = 3 first: there a rejection (fewer than n tokens), a lost bonus (n) and a short draft loop (n, from n - 1
    # drafts) all look different; N = 5 too: the lesson runs N = 4, so a loop capped at the checks' N must not pass
    for n in (3, 1, 5):
        for _ in range(20):
            try:
                out = call(prefix, target, target, n)
            except ZeroDivisionError as error:
                # identical models never reject, so the residual (all zeros here) should never be normalised
                raise Fail(f"with draft == target (N = {n}) your function raised ZeroDivisionError ({error}): it "
                           "rejected a draft and normalised the residual max(0, target - draft), which is all zeros "
                           "when the two models agree.\n  Hint: identical models give target[x] / draft[x] = 1 for "
                           "every draft, so none can be rejected: accept when u < target[x] / draft[x] (check the "
                           "ratio and the comparison's direction).") from None
            new = len(out) - len(prefix)
            if new < n and draft_calls >= n:  # all drafted, too few kept: identical models rejected a draft
                raise Fail(f"with draft == target every draft is accepted, so n_draft + 1 = {n + 1} tokens must "
                           f"follow; you returned {new}: {out}, so a draft was rejected.\n  Hint: identical models "
                           "give target[x] / draft[x] = 1 for every draft, so none can be rejected: accept when "
                           "u < target[x] / draft[x] (check the ratio and the comparison's direction).")
            if new == n and draft_calls < n:
                raise Fail(f"with draft == target every draft is accepted, so n_draft + 1 = {n + 1} tokens must "
                           f"follow; you returned {new}, and the draft model was asked for {draft_calls} "
                           f"token(s).\n  Hint: draft n_draft = {n} tokens (range(n_draft), not range(n_draft - "
                           "1)), each from draft_model(prefix + drafts so far).")
            if new == n:
                # n tokens on every call: all n drafts accepted and the bonus forgotten. A count that varies means
                # drafts are sometimes rejected (only the last, or the count would have fallen below n), which
                # identical models never do: then the comparison's direction is worth checking too.
                counts = {_new_tokens(lambda: call(prefix, target, target, n), len(prefix)) for _ in range(10)}
                rejected = ("" if counts == {n} else
                            " (and with identical models min(1, target/draft) = 1, so a draft is accepted when u < "
                            "that ratio, which always holds: check the comparison's direction if a draft was "
                            "rejected)")
                raise Fail(f"with draft == target every draft is accepted, so n_draft + 1 = {n + 1} tokens must "
                           f"follow; you returned {new}. After accepting all drafts, sample the bonus token from "
                           f"the target's distribution at the next position{rejected}.")
            if new != n + 1:
                raise Fail(f"with draft == target every draft is accepted, so {n + 1} tokens must follow the "
                           f"prefix; you returned {new}: {out}.")

    cut_target = fixed_model([0.5, 0.5, 0.0, 0.0])
    only_three = fixed_model([0.0, 0.0, 0.0, 1.0])
    for _ in range(50):
        out = call(prefix, cut_target, only_three, 3)
        new = out[len(prefix):]
        if new == [3]:  # the draft was rejected (the step stopped), and the token that replaced it was 3 again
            raise Fail(f"token 3 has target probability 0, so the first draft (3) must be rejected and the step "
                       f"must stop with one resampled token; you returned {out}: the token after the rejection was "
                       "3 again.\n  Hint: a token the target gives probability 0 must not come back from the "
                       "resample either. Resample from the residual max(0, target - draft), normalised (here "
                       "[0.5, 0.5, 0, 0]), not from the draft's distribution or draft - target.")
        if 3 in new:
            raise Fail(f"token 3 has target probability 0 but you emitted it ({out}): it must be rejected "
                       "(accept with probability min(1, target/draft) = 0), and the token that replaces it must not "
                       "be 3 either.")
        if len(new) != 1:
            raise Fail(f"the first draft is always rejected here, so exactly one token (resampled) must follow; "
                       f"you returned {len(new)}: {out}. Stop at the first rejection.")

    # 1,000 tokens, of which the target keeps two and the draft proposes only the last: the residual is exactly
    # [0.5, 0.5, 0, ...]. A residual smoothed with a small constant (max(0, target - draft) + 1e-3) leaks about
    # half its mass onto the 998 tokens the target never emits here, where on 4 tokens it leaked 0.2 %.
    wide = 1000
    wide_target = fixed_model([0.5, 0.5] + [0.0] * (wide - 2))
    wide_draft = fixed_model([0.0] * (wide - 1) + [1.0])
    for _ in range(50):
        out = call(prefix, wide_target, wide_draft, 3)
        new = out[len(prefix):]
        if len(new) != 1:
            raise Fail(f"with {wide} tokens, a draft that proposes only token {wide - 1} and a target that gives it "
                       f"probability 0, the first draft is always rejected, so exactly one token must follow; "
                       f"you returned {len(new)}: {out}. Stop at the first rejection.")
        if new[0] not in (0, 1):
            raise Fail(f"with {wide} tokens, a target [0.5, 0.5, 0, ..., 0] and a draft that proposes only token "
                       f"{wide - 1}, your resampled token was {new[0]}, which the target gives probability 0.\n  "
                       "Hint: the residual must be exactly 0 wherever target <= draft: max(0, target - draft), "
                       "divided by its sum, with nothing added to it. A small constant added to every entry (to "
                       "avoid dividing by zero, say) gives each of the 998 tokens the target never emits a share, "
                       "and here they add up to about half the mass.")
    identical = bigram_model(_BONUS_TABLE)  # draft == target, so every draft is accepted and a bonus follows
    for n in (1, 2):
        after = [[0] * 3 for _ in range(3)]  # after[last draft][bonus token]
        for _ in range(bonus_samples):
            contexts = []  # the contexts the draft model was asked about in this step

            def drafting(context):
                contexts.append(list(context))
                return identical(context)

            out = call([0], identical, drafting, n)
            if len(out) != n + 2:
                if n > 1 and all(len(c) == 1 for c in contexts):
                    hint = ("every draft token was sampled from draft_model(prefix); the draft proposes one token "
                            "after another: draft i comes from draft_model(prefix + drafts[:i]), the context it is "
                            "then checked in.")
                else:
                    hint = ("draft position i must be checked with target_model(prefix + drafts[:i]), the context "
                            "the draft sampled it in, over the draft probability from the distribution it was "
                            "sampled from, draft_model(prefix + drafts[:i]); with identical models the ratio is "
                            "then 1.")
                raise Fail(f"with draft == target (bigram models, N = {n}) every draft must be accepted, so {n + 1} "
                           f"tokens must follow the prefix [0]; you returned {out}.\n  Hint: {hint}")
            after[out[-2]][out[-1]] += 1
        for last in range(3):
            if sum(after[last]) and counts_pvalue(after[last], _BONUS_TABLE[last]) < P_THRESHOLD:
                freq = [round(c / sum(after[last]), 3) for c in after[last]]
                raise Fail(f"with draft == target (bigram models, N = {n}), after a last draft of {last} your bonus "
                           f"tokens had frequencies {freq}, but the target's row for {last} is "
                           f"{_BONUS_TABLE[last]}.\n  Hint: the bonus token comes from the target's distribution "
                           "after the LAST draft, target_model(prefix + all drafts); not target_model(prefix), and "
                           "not the context before the last draft.")

    # Identical models that read the last TWO tokens, N = 2: a step that shows the models only the last token
    # (context[-1:]) is exact for every bigram pair above, and wrong here.
    def second_order(context):
        context = list(context)
        before = context[-2] if len(context) > 1 else 0
        return _SECOND_ORDER[before][context[-1] if context else 0]

    starts = [0] * 3
    for _ in range(bonus_samples):
        out = call([1, 2], second_order, second_order, 2)
        starts[out[2]] += 1
    if counts_pvalue(starts, _SECOND_ORDER[1][2]) < P_THRESHOLD:
        freq = [round(c / sum(starts), 3) for c in starts]
        raise Fail(f"with draft == target models that read the last two tokens (N = 2, prefix [1, 2]), your first "
                   f"new tokens had frequencies {freq}, but the target's distribution after [1, 2] is "
                   f"{_SECOND_ORDER[1][2]}.\n  Hint: give both models the whole context (prefix + the drafts so "
                   "far), not only its last token: a real language model reads all of it.")

    # Draft != target, N = 1: the bonus follows whenever the draft is accepted (55 % of steps here), and it comes
    # from the target, not from the draft model that proposed the accepted token.
    bonus_counts, first_counts = [0] * 4, [0] * 4
    for _ in range(bonus_samples * 2):
        out = call(prefix, target, draft, 1)
        first_counts[out[len(prefix)]] += 1
        if len(out) == len(prefix) + 2:
            bonus_counts[out[-1]] += 1
    # N = 1: the one draft is also the last; a loop that never tests the last draft passes every N > 1 check below
    if counts_pvalue(first_counts, target_probs) < P_THRESHOLD:
        freq = [round(c / sum(first_counts), 3) for c in first_counts]
        untested = ("your first new token follows the draft's distribution: the last draft was emitted without "
                    "the acceptance test. Test every draft, the last one included, with probability min(1, "
                    "target/draft), and add the bonus only after all of them were accepted.")
        # the planted faults compete with "untested" (an upside-down ratio also lands near the draft here)
        hint = _diagnose(first_counts, [(draft_probs, untested)] + _spec_candidates(target_probs, draft_probs),
                         "check the acceptance test and the residual; the first new token must follow the target.")
        raise Fail(f"with N = 1 and draft {draft_probs} != target {target_probs}, your first new tokens had "
                   f"frequencies {freq} over {sum(first_counts)} steps, not the target's (chi-square p < "
                   f"{P_THRESHOLD}).\n  Hint: {hint}")
    if sum(bonus_counts) and counts_pvalue(bonus_counts, target_probs) < P_THRESHOLD:
        freq = [round(c / sum(bonus_counts), 3) for c in bonus_counts]
        source = ("the draft's distribution, " if counts_pvalue(bonus_counts, draft_probs) > P_THRESHOLD else "")
        raise Fail(f"with N = 1 and draft {draft_probs} != target {target_probs}, your bonus tokens (after an "
                   f"accepted draft) had frequencies {freq}: {source}not the target's.\n  Hint: the bonus token "
                   "is the target's own next token: sample it from target_model(prefix + all drafts), the "
                   "distribution the verification call computed at the position after the last draft.")

    counts = [0] * 4
    for _ in range(samples):
        out = call(prefix, target, draft, 2)
        counts[out[len(prefix)]] += 1
    if counts_pvalue(counts, target_probs) < P_THRESHOLD:
        hint = _diagnose(counts, _spec_candidates(target_probs, draft_probs),
                         "check the acceptance test and the residual; the first new token must follow the target.")
        freq = [round(c / samples, 3) for c in counts]
        raise Fail(f"over {samples} steps the first new token had frequencies {freq}, target {target_probs} "
                   f"(chi-square p < {P_THRESHOLD}).\n  Hint: {hint}")

    pairs = _joint_counts(lambda seq, tm, dm, n, _rng: call(seq, tm, dm, n), samples, rng)
    joint = [_JOINT_TARGET[0][a] * _JOINT_TARGET[a][b] for a in range(3) for b in range(3)]
    if counts_pvalue(pairs, joint) < P_THRESHOLD:
        hint = _diagnose(pairs, _joint_candidates(4 * samples, seed),
                         "draft position i must be checked against target_model(prefix + drafts[:i]) (the context "
                         "including the accepted drafts), each with its own u, and the bonus token comes from "
                         "target_model(prefix + all drafts).")
        raise Fail("with bigram models the first two generated tokens do not follow the target's joint "
                   f"distribution (chi-square p < {P_THRESHOLD}).\n  Hint: {hint}")

    def repeat(seed_):  # 40 steps from one freshly seeded rng
        own = random.Random(seed_)
        return [fn(list(prefix), target, draft, 3, own) for _ in range(40)]

    if repeat(7) != repeat(7):
        raise Fail("right in distribution, but two runs with the same seed gave different tokens: your step draws "
                   "some of its randomness elsewhere (random.random(), torch.rand, ...) instead of from rng.\n  "
                   "Hint: take every draw from the rng it is given, categorical(probs, rng) and uniform(rng), so "
                   "that the lesson's seeded counts and p-values come out the same on every run.")
    return (f"bonus token and its context, stop at first rejection, first-token distribution over {samples} steps "
            "and the two-token joint on bigram models all match the target.")


def reference_chi_square_pvalue(tokens, target_probs):
    """The answer to the chi-square exercise: the p-value (float) of Pearson's test of the counts of ``tokens``
    (list of ids) against the expected counts ``target_probs [V] * len(tokens)``, computed in float64."""
    from scipy.stats import chisquare

    probs = torch.as_tensor(target_probs, dtype=torch.float64)
    counts = torch.bincount(torch.as_tensor(tokens, dtype=torch.long), minlength=len(probs)).double()
    return float(chisquare(counts.tolist(), (probs * len(tokens)).tolist()).pvalue)


def _chi_square_cases():
    gen = torch.Generator().manual_seed(7)
    target = [0.4, 0.3, 0.2, 0.1]
    same = torch.multinomial(torch.tensor(target), 2000, replacement=True, generator=gen).tolist()
    shifted = torch.multinomial(torch.tensor([0.35, 0.3, 0.2, 0.15]), 2000, replacement=True, generator=gen).tolist()
    missing_last = torch.multinomial(torch.tensor([0.45, 0.35, 0.2, 0.0]), 400, replacement=True,
                                     generator=gen).tolist()
    small = torch.multinomial(torch.tensor([0.5, 0.5]), 300, replacement=True, generator=gen).tolist()
    return [(same, target), (shifted, target), (missing_last, [0.4, 0.3, 0.2, 0.1]), (small, [0.5, 0.5])]


def _rounding_mismatch(message: str) -> bool:
    """Is this scipy's "observed and expected sums must agree" error, with a difference small enough to be float32
    rounding (rather than, say, probabilities passed where counts belong)?"""
    if "sum of the observed frequencies" not in message or "differences are:" not in message:
        return False
    numbers = re.findall(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", message.split("differences are:")[-1])
    return bool(numbers) and max(abs(float(x)) for x in numbers) < 1e-4


@checker
def chi_square_pvalue(fn):
    """Check ``fn(tokens: list[int], target_probs [V]) -> float``, the p-value of Pearson's chi-square test of
    the token counts against the target distribution (``scipy.stats.chisquare`` with expected counts).

    Seed lesson 000's Easy exercise. Returns True/False.
    """
    from scipy.stats import chi2, chisquare

    def counts_of(tokens, v):
        return torch.bincount(torch.as_tensor(tokens), minlength=v).tolist()

    faults = [
        (lambda tokens, probs: float(chisquare(counts_of(tokens, len(probs)), list(probs)).pvalue),
         "scipy wants expected COUNTS, which sum to the number of tokens: each probability times len(tokens), "
         "[p * len(tokens) for p in target_probs]."),
        (lambda tokens, probs: float(chisquare(counts_of(tokens, len(probs)), list(probs) * len(tokens)).pvalue),
         "target_probs is a list, and a list times an integer repeats the list (V * len(tokens) entries): multiply "
         "each probability instead, [p * len(tokens) for p in target_probs]."),
        (lambda tokens, probs: float(chisquare(torch.bincount(torch.as_tensor(tokens)).tolist(),
                                               [p * len(tokens) for p in probs]).pvalue),
         "count every token id, including ones that never occur: torch.bincount(..., minlength=V)."),
        (lambda tokens, probs: float(chisquare(counts_of(tokens, len(probs)),
                                               [p * len(tokens) for p in probs]).statistic),
         "return the p-value (result.pvalue), not the statistic."),
        (lambda tokens, probs: float(chisquare([c / len(tokens) for c in counts_of(tokens, len(probs))],
                                               list(probs)).pvalue),
         "compare counts with expected counts, not frequencies with probabilities: dividing both by n shrinks the "
         "statistic n-fold and hides real differences."),
        (lambda tokens, probs: float(chisquare(counts_of(tokens, len(probs))).pvalue),
         "without f_exp scipy tests against a UNIFORM distribution; pass the target's expected counts."),
        (lambda tokens, probs: chisquare(counts_of(tokens, len(probs)), [p * len(tokens) for p in probs]),
         "you returned scipy's whole result (statistic, pvalue); return just the p-value: float(result.pvalue)."),
        (lambda tokens, probs: 1 - float(chisquare(counts_of(tokens, len(probs)),
                                                   [p * len(tokens) for p in probs]).pvalue),
         "that is 1 - p (the chi-square CDF at the statistic): the p-value is the chance of a statistic at least "
         "this large under the target, chisquare(...).pvalue (or chi2.sf(statistic, V - 1)), small when the counts "
         "do not fit."),
        (lambda tokens, probs: float(chisquare([p * len(tokens) for p in probs], counts_of(tokens, len(probs))).pvalue),
         "observed first, expected second: chisquare(f_obs, f_exp) divides by the EXPECTED counts, so swapping them "
         "changes the statistic."),
        (lambda tokens, probs: float(chi2.sf(chisquare(counts_of(tokens, len(probs)),
                                                       [p * len(tokens) for p in probs]).statistic, len(probs))),
         "V categories whose counts must add up to the number of tokens leave V - 1 free: chi2.sf(statistic, V - 1), "
         "or chisquare(...).pvalue, which uses V - 1."),
        (lambda tokens, probs: float(chisquare(counts_of(tokens, len(probs)), [p * len(tokens) for p in probs],
                                               ddof=1).pvalue),
         "leave ddof at 0: the target distribution is given, not fitted to these counts, so the test has V - 1 "
         "degrees of freedom."),
    ]
    def show(args):
        return f"<{len(args[0])} tokens>, {show_value(list(args[1]))}"

    cases = _chi_square_cases()
    for args in cases:
        out = outcome_of(fn, args)
        if out[0] == "raise" and _rounding_mismatch(out[2]):
            raise Fail(f"chi_square_pvalue({show(args)}) raised {out[1]}: {' '.join(out[2].split())}\n  Hint: scipy "
                       "insists that the expected counts add up to the observed total to about 1e-8, and float32 "
                       "rounding (torch's default dtype) misses that. Build the expected counts in float64: "
                       "torch.tensor(target_probs, dtype=torch.float64) * len(tokens), or a list of Python floats.")

    def close(a, b):  # p-values in the far tail magnify float32 rounding in the counts; real mistakes are far off
        if isinstance(a, tuple) and isinstance(b, tuple):  # scipy's whole result, (statistic, pvalue)
            return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
        return same_float(a, b, rel=1e-4, abs_=0.0)

    n = compare("chi_square_pvalue", fn, cases, reference_chi_square_pvalue, faults, close,
                "check the two lists you compare, entry by entry, on the case above: the observed count of every "
                "token id from 0 to V - 1, and the count the target expects of each (they add up to the same "
                "total); the test has V - 1 degrees of freedom.", show_args=show)
    return f"correct p-values on all {n} cases."


# The last case is a tie: a greedy draft proposes one of the tied tokens, and reports that one one-hot.
_GREEDY_CASES = [_t([0.8, 0.2]), _t([0.1, 0.6, 0.3]), _t([0.25, 0.15, 0.5, 0.1]), _t([0.05, 0.05, 0.1, 0.2, 0.6]),
                 _t([0.4, 0.2, 0.4])]
_GREEDY_TARGETS = [_t([0.6, 0.4]), _t([0.3, 0.3, 0.4]), _t([0.4, 0.3, 0.2, 0.1]), _t([0.2, 0.2, 0.2, 0.2, 0.2]),
                   _t([0.3, 0.3, 0.4])]


def _proposal_call(name, fn, draft, *args):
    """``fn(copy of draft, *args)`` unpacked; ``Fail`` if the function changed the draft distribution in place."""
    given = draft.clone()
    out = fn(given, *args)
    if not unchanged(draft, given):
        raise Fail(f"{name}({show_value(draft)}) changed its argument draft_probs in place.\n  Hint: {IN_PLACE_HINT}")
    return _unpack_proposal(name, out)


def _unpack_proposal(name, out):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):  # the lesson only unpacks it: a list pair will do
        raise Fail(f"{name} must return a pair (token, reported_probs); got {show_value(out)}.")
    token, reported = out
    if isinstance(token, torch.Tensor):
        if token.numel() != 1:
            raise Fail(f"the token must be one id, got {show_value(token)}.")
        token = token.item()
    if isinstance(token, bool) or not isinstance(token, Integral):
        why = (" max() gives the largest probability, argmax() its index." if isinstance(token, float) else "")
        raise Fail(f"{name} proposed {show_value(token)} ({type(token).__name__}) as its token; the token must be an "
                   f"integer token id, the index into draft_probs (e.g. int(draft_probs.argmax())).{why}")
    try:
        if isinstance(reported, torch.Tensor):  # a right answer computed on the GPU: to the CPU first (MPS has
            reported = reported.detach().cpu()  # no float64)
        reported = torch.as_tensor(reported, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise Fail(f"reported_probs must be a tensor or list of V probabilities; got {show_value(reported)}.")
    return int(token), reported


GREEDY_REPEATS = 20
"""Extra calls of the learner's greedy draft per case: a draft that samples proposes the same token on all of them
with probability at most 0.8 ** 20 ≈ 0.01 on the most peaked case, and far less over all five."""


@checker
def greedy_draft(fn):
    """Check ``fn(draft_probs [V]) -> (token, reported_probs [V])`` for a greedy draft.

    A greedy draft proposes its argmax deterministically, so the distribution it must report is one-hot on that
    token; reporting its softmax makes verification biased (target [0.6, 0.4], draft [0.8, 0.2] then emits
    [0.75, 0.25]). Returns True/False.
    """
    for draft, target in zip(_GREEDY_CASES, _GREEDY_TARGETS):
        token, reported = _proposal_call("greedy_draft", fn, draft)
        if not 0 <= token < len(draft) or draft[token] != draft.max():  # on a tie, any of the tied maxima
            raise Fail(f"greedy_draft({show_value(draft)}) proposed token {token}; a greedy draft proposes the argmax, "
                       f"{int(draft.argmax())}.")
        for _ in range(GREEDY_REPEATS):  # a sampling draft picks the argmax often enough to pass one call
            again, _ = _proposal_call("greedy_draft", fn, draft)
            if again != token:
                raise Fail(f"greedy_draft({show_value(draft)}) proposed token {token} on one call and {again} on "
                           f"another.\n  Hint: a greedy draft is deterministic: take the argmax "
                           f"(int(draft_probs.argmax())), do not sample (torch.multinomial).")
        best = token
        if reported.shape != draft.shape:
            raise Fail(f"reported_probs must have shape {tuple(draft.shape)}, got {tuple(reported.shape)}.")
        proposal = torch.nn.functional.one_hot(torch.tensor(best), len(draft)).double()
        emitted = emitted_distribution(target, proposal, reported)
        if not same_tensor(reported, proposal):
            extra = ""
            if reported.min() >= 0 and abs(float(reported.sum()) - 1) < 1e-4:
                extra = (f" With target {show_value(target)} verification would then emit {show_value(emitted)} "
                         "instead of the target.")
            raise Fail(f"greedy_draft({show_value(draft)}) reported {show_value(reported)}.{extra}\n  Hint: the draft "
                       f"samples nothing: it always proposes token {best}, so the distribution it drew from is "
                       f"one-hot on {best}; report that (torch.nn.functional.one_hot).")
        if not same_tensor(emitted, target):  # cannot happen for a one-hot report; kept as a guard
            raise Fail(f"verification would emit {show_value(emitted)} instead of the target {show_value(target)}.")
    return f"proposes the argmax and reports it one-hot on all {len(_GREEDY_CASES)} cases; verification stays exact."


def _topk_renorm(probs, k):
    kth = torch.topk(probs, k).values[-1]
    kept = torch.where(probs >= kth, probs, torch.zeros_like(probs))
    return kept / kept.sum()


_TOPK_CASES = [(_t([0.5, 0.3, 0.15, 0.05]), 2, _t([0.4, 0.3, 0.2, 0.1])),
               (_t([0.1, 0.45, 0.05, 0.25, 0.15]), 3, _t([0.2, 0.2, 0.2, 0.2, 0.2])),
               (_t([0.7, 0.2, 0.1]), 1, _t([0.5, 0.3, 0.2]))]


@checker
def topk_draft(fn, samples: int = 2000, seed: int = 0):
    """Check ``fn(draft_probs [V], k, generator) -> (token, reported_probs [V])`` for a top-k sampling draft.

    The draft must report the distribution it really sampled from: its top-k tokens renormalised. Reporting the
    unprocessed probabilities breaks exactness (lesson 04 computes by how much). Returns True/False.
    """
    gen = torch.Generator().manual_seed(seed)
    for draft, k, target in _TOPK_CASES:
        processed = _topk_renorm(draft.double(), k)
        token, reported = _proposal_call("topk_draft", fn, draft, k, gen)
        if reported.shape != draft.shape:
            raise Fail(f"reported_probs must have shape {tuple(draft.shape)}, got {tuple(reported.shape)}.")
        if not same_tensor(reported, processed):
            emitted = emitted_distribution(target, processed, reported) if reported.min() >= 0 else None
            masked = torch.where(processed > 0, draft.double(), torch.zeros_like(processed))
            if same_tensor(reported, draft):
                hint = ("you sampled from the top-k distribution but reported the unprocessed one: report the "
                        "renormalised top-k probabilities you actually sampled from.")
            elif same_tensor(reported, masked):
                hint = "renormalise the kept probabilities so they sum to 1."
            elif any(same_tensor(reported, _topk_renorm(draft.double(), j)) for j in (k - 1, k + 1) if j >= 1):
                hint = f"keep exactly k = {k} tokens (check for an off-by-one in the cut)."
            else:
                hint = f"keep the k = {k} largest probabilities, zero the rest, divide by their sum."
            more = "" if emitted is None else (f" With target {show_value(target)} verification would emit "
                                                f"{show_value(emitted)}.")
            raise Fail(f"topk_draft({show_value(draft)}, k={k}) reported {show_value(reported)}, expected "
                       f"{show_value(processed)}.{more}\n  Hint: {hint}")
        counts = [0] * len(draft)
        counts[token] += 1
        for _ in range(samples - 1):
            token, _ = _unpack_proposal("topk_draft", fn(draft.clone(), k, gen))
            counts[token] += 1
        outside = [i for i, c in enumerate(counts) if c and processed[i] == 0]
        if outside:
            if all(i < k for i, c in enumerate(counts) if c):  # a position among the top k, not a token id
                hint = ("every token you proposed is below k: a position in torch.topk's result, not a token id? "
                        "topk returns the values and their indices; map the sampled position through the indices "
                        "(indices[j]) to the vocabulary's id.")
            else:
                hint = "sample from the processed (top-k, renormalised) distribution."
            raise Fail(f"with k={k} you proposed token(s) {outside}, which are outside the top {k}.\n  Hint: {hint}")
        if counts_pvalue(counts, processed) < P_THRESHOLD:
            raise Fail(f"the proposed tokens' frequencies {[round(c / samples, 3) for c in counts]} do not match "
                       f"the reported distribution {show_value(processed)}.\n  Hint: sample with the generator from "
                       "the same probabilities you report.")

    def repeat(seed_):  # 20 proposals per case from one freshly seeded generator
        own = torch.Generator().manual_seed(seed_)
        return [_unpack_proposal("topk_draft", fn(draft.clone(), k, own))[0]
                for draft, k, _ in _TOPK_CASES for _ in range(20)]

    if repeat(7) != repeat(7):
        raise Fail("right in distribution, but two runs with the same seeded generator proposed different tokens: "
                   "your draft draws its randomness elsewhere (torch's global random state, random.random(), ...) "
                   "instead of from generator.\n  Hint: take every draw from the generator it is given (torch's "
                   "sampling functions accept it as generator=...): that is what the argument is for, so that two runs "
                   "with the same seed propose the same tokens.")
    return f"samples from and reports the renormalised top-k distribution on all {len(_TOPK_CASES)} cases."
