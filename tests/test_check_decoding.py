"""The lesson 07–09 checkers: the reference passes, every planted mistake fails with its own hint, a stub prints
"not solved yet", and nothing ever raises."""
import pytest

from lab import check_decoding as check
from lab.drafters.lookahead import jacobi_update
from lab.drafters.prompt_lookup import ngram_lookup
from lab.kv import draft_keep_length, emitted_tokens, next_position, rollback
from lab.models import forward, new_cache


def stub(*args):
    raise NotImplementedError


def run(capsys, checker, fn, *args):
    ok = checker(fn, *args)
    return ok, capsys.readouterr().out


def test_every_checker_reports_a_stub_as_not_solved(capsys, target):
    for checker, args in [(check.next_position, ()), (check.draft_keep_length, ()), (check.emitted_tokens, ()),
                          (check.ngram_lookup, ()), (check.count_converged, ()),
                          (check.jacobi_step, (target, [1, 2, 3])),
                          (check.rollback_after_rejection, (target, list(range(10)), [11, 12, 13, 14, 15]))]:
        ok, out = run(capsys, checker, stub, *args)
        assert not ok and "not solved yet" in out
    ok, out = run(capsys, check.next_position, 42)
    assert not ok and "pass your function itself" in out


def reference_rollback(model, prefix_ids, draft_ids, rejected_at):
    cache = new_cache()
    forward(model, prefix_ids, cache)
    forward(model, draft_ids, cache)
    return rollback(cache, len(prefix_ids) + rejected_at - 1)


def test_rollback_checker(capsys, target):
    args = (target, list(range(3, 13)), [20, 21, 22, 23, 24])
    ok, out = run(capsys, check.rollback_after_rejection, reference_rollback, *args)
    assert ok and out.startswith("✓")

    def keeps_rejected(model, prefix, drafts, rejected_at):
        return reference_rollback(model, prefix, drafts, rejected_at + 1) if rejected_at < 5 else \
            reference_rollback(model, prefix, drafts, rejected_at)

    ok, out = run(capsys, check.rollback_after_rejection, keeps_rejected, *args)
    assert not ok and "one entry too many" in out

    def rebuilt(model, prefix, drafts, rejected_at):  # right length, wrong content: drafts at the wrong positions
        cache = new_cache()
        forward(model, prefix[: rejected_at - 1] + drafts[: rejected_at - 1] + prefix[rejected_at - 1:], cache)
        return cache

    ok, out = run(capsys, check.rollback_after_rejection, rebuilt, *args)
    assert not ok and "next logits differ" in out

    def rebuilt_right(model, prefix, drafts, rejected_at):  # right tokens, right logits, but never rolled back
        cache = new_cache()
        forward(model, prefix + drafts[: rejected_at - 1], cache)
        return cache

    ok, out = run(capsys, check.rollback_after_rejection, rebuilt_right, *args)
    assert not ok and "never held the drafts" in out and "lab.kv.rollback" in out

    def appended_then_rebuilt(model, prefix, drafts, rejected_at):  # forwards the drafts, then starts over
        reference_rollback(model, prefix, drafts, len(drafts))
        return rebuilt_right(model, prefix, drafts, rejected_at)

    ok, out = run(capsys, check.rollback_after_rejection, appended_then_rebuilt, *args)
    assert not ok and "never held the drafts" in out and "built again" in out

    def copied(model, prefix, drafts, rejected_at):  # rolls back a deep copy: not "built again", and said so
        import copy

        cache = new_cache()
        forward(model, prefix + drafts, cache)
        return rollback(copy.deepcopy(cache), len(prefix) + rejected_at - 1)

    ok, out = run(capsys, check.rollback_after_rejection, copied, *args)
    assert not ok and "it is a copy of another cache" in out and "built again" not in out
    ok, out = run(capsys, check.rollback_after_rejection, check._ref_rollback_after_rejection, *args)
    assert ok
    assert not target._forward_hooks  # the checker removed its hook
    ok, out = run(capsys, check.rollback_after_rejection, lambda *a: None, *args)
    assert not ok and "return the cache" in out


@pytest.mark.parametrize("fault,phrase", [(lambda p, k: p + 1, "advance by num_accepted + 1"),
                                          (lambda p, k: p + k, "target's own token")])
def test_next_position_checker(capsys, fault, phrase):
    assert run(capsys, check.next_position, next_position)[0]
    ok, out = run(capsys, check.next_position, fault)
    assert not ok and phrase in out


def test_draft_keep_checker(capsys, target, noisy_draft):
    ok, out = run(capsys, check.draft_keep_length, draft_keep_length, target, noisy_draft, [1, 2, 3, 4, 5])
    assert ok and "matches a fresh forward" in out
    ok, out = run(capsys, check.draft_keep_length, lambda h, k, n: h - (n - k))
    assert not ok and "never fed its LAST draft" in out
    ok, out = run(capsys, check.draft_keep_length, lambda h, k, n: h - (n - 1 - k))
    assert not ok and "full acceptance" in out


def test_emitted_tokens_checker(capsys):
    assert run(capsys, check.emitted_tokens, emitted_tokens)[0]
    ok, out = run(capsys, check.emitted_tokens, lambda d, k, t: list(d) + [t])
    assert not ok and "rejected drafts must not reach the output" in out


@pytest.mark.parametrize("variant,phrase", [
    (dict(self_match=True), "match themselves"), (dict(oldest=True), "MOST RECENT"),
    (dict(no_fallback=True), "try n - 1"), (dict(no_cap=True), "at most n_draft"),
    (dict(non_overlap=True), "overlap"), (dict(include_gram=True), "FOLLOWED"),
    (dict(negative_slice=True), "longer than len(context) - 1"),
    # these two returned [] where a match was due and got the self-match hint
    (dict(smallest=2), "down to n = 1"), (dict(below_max=True), "start at n = max_ngram itself"),
])
def test_ngram_lookup_checker(capsys, variant, phrase):
    ok, out = run(capsys, check.ngram_lookup, ngram_lookup)
    assert ok and "edge cases" in out
    assert run(capsys, check.ngram_lookup, check._lookup_variant())[0]  # the planted family's base is right
    ok, out = run(capsys, check.ngram_lookup, check._lookup_variant(**variant))
    assert not ok and phrase in out, out


def test_ngram_lookup_checker_catches_a_digit_string_search(capsys):
    from lab.drafters.prompt_lookup import ngram_lookup as reference

    # The string search is right whenever every id is a single digit ...
    single = [c for c in check._lookup_cases() if all(t < 10 for t in c[0])]
    assert len(single) >= 20 and all(check._string_lookup(*c) == reference(*c) for c in single)
    # ... so only the multi-digit cases catch it, with a hint of its own.
    ok, out = run(capsys, check.ngram_lookup, check._string_lookup)
    assert not ok and "compare token ids, not their digits" in out

    def learner_string_solution(context, max_ngram, n_draft):  # as a learner might write it
        text = "".join(map(str, context))
        for n in range(min(max_ngram, len(context) - 1), 0, -1):
            suffix = "".join(map(str, context[-n:]))
            i = text.rfind(suffix, 0, len(text) - 1)
            if i >= 0:
                return context[i + n:i + n + n_draft]
        return []

    ok, out = run(capsys, check.ngram_lookup, learner_string_solution)
    assert not ok and "[12, 3, 9, 1, 23]" in out


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


def test_jacobi_step_time_limit_covers_the_type_check(capsys, target, monkeypatch):
    """The return-type check ran the learner's function outside the time limit: a loop that never ends hung."""
    import lab.check

    monkeypatch.setattr(lab.check, "CALL_TIME_LIMIT_S", 0.5)

    def stuck(model, p, w):
        while True:
            pass

    ok, out = run(capsys, check.jacobi_step, stuck, target, [1, 2, 3])
    assert not ok and "did not return within" in out
