"""The exercise checkers of lesson 07 (KV-cache rollback; lab.exercises.lesson07): the reference passes, planted
mistakes are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from lab.exercises import lesson07 as check
from lab.kv import draft_keep_length, emitted_tokens, next_position, rollback
from lab.models import forward, new_cache
from tests.helpers import rejects


def run(capsys, checker, fn, *args):
    ok = checker(fn, *args)
    return ok, capsys.readouterr().out


def reference_rollback(model, prefix_ids, draft_ids, rejected_at):
    cache = new_cache()
    forward(model, prefix_ids, cache)
    forward(model, draft_ids, cache)
    return rollback(cache, len(prefix_ids) + rejected_at - 1)


def test_emitted_tokens_without_the_bonus_after_a_full_acceptance(capsys):
    ok = check.emitted_tokens(lambda d, k, t: list(d[:k]) + ([t] if k < len(d) else []))
    out = capsys.readouterr().out
    assert not ok and "bonus token: emit it too" in out and "not kept" not in out


# each planted fault is caught with its own hint.
def test_next_position_one_too_far(capsys):
    rejects(check.next_position, lambda p, k: p + k + 2, capsys, "one too far")


def test_next_position_that_returns_every_committed_position(capsys):
    """The hint said "the value is right, but return a single number" from the one case whose list held one
    position, though 6 of 6 cases were wrong; taking [0] then gives the p + 1 bug."""
    out = rejects(check.next_position, lambda p, k: list(range(p + 1, p + k + 2)), capsys, "NEWEST committed token")
    assert "the value is right" not in out, out


@pytest.mark.parametrize("fn, words", [
    (lambda d, k, t: [t] + list(d[:k]), "accepted drafts come first"),
    (lambda d, k, t: list(d[:k]), "also emits the target's own token"),
    (lambda d, k, t: list(d[:k + 1]), "replaced by the target's token"),
    (lambda d, k, t: sorted(d[:k]) + [t], "in the order they were drafted"),
    (lambda d, k, t: list(dict.fromkeys(d[:k])) + [t], "repeats included"),
    (lambda d, k, t: d[:k].append(t), "list.append, .extend"),  # returns what list.append returned: None
])
def test_emitted_tokens_hints(fn, words, capsys):
    rejects(check.emitted_tokens, fn, capsys, words)


@pytest.mark.parametrize("fn, words", [
    (lambda h, k, n: h, "must leave the draft's cache"),
    (lambda h, k, n: h - (n - 1), "keep the accepted drafts"),
])
def test_draft_keep_length_hints(fn, words, capsys):
    rejects(check.draft_keep_length, fn, capsys, words)


def test_rollback_to_the_prefix_hint(target, capsys):
    from lab.kv import rollback
    from lab.models import forward, new_cache

    def to_prefix(model, prefix, drafts, rejected_at):
        cache = new_cache()
        forward(model, prefix, cache)
        forward(model, drafts, cache)
        return rollback(cache, len(prefix))

    capsys.readouterr()
    assert check.rollback_after_rejection(to_prefix, target, list(range(3, 13)),
                                          [20, 21, 22, 23, 24]) is False
    out = capsys.readouterr().out
    assert "rejected_at=2" in out and "you rolled back to the prefix" in out, out


def test_rollback_checker_reports_a_prefix_changed_in_place(capsys, target):
    """`prefix_ids += draft_ids` passed the checker (it handed over copies) and then broke the lesson's next cell,
    whose own prefix had grown."""
    from lab.kv import rollback
    from lab.models import forward, new_cache

    def grows_the_prefix(model, prefix_ids, draft_ids, rejected_at):
        cache = new_cache()
        prefix_ids += draft_ids
        forward(model, prefix_ids, cache)
        return rollback(cache, len(prefix_ids) - len(draft_ids) + rejected_at - 1)

    capsys.readouterr()
    assert not check.rollback_after_rejection(grows_the_prefix, target, list(range(3, 13)), [20, 21, 22])
    out = capsys.readouterr().out
    assert "changed prefix_ids in place" in out and "prefix_ids + draft_ids" in out


def test_positions_and_kept_lengths_must_be_whole_ints(capsys):
    rejects(check.next_position, lambda p, k: float(p + k + 1), capsys, "an int")
    rejects(check.draft_keep_length, lambda h, k, n: h - max(0.0, n - 1.0 - k), capsys, "an int")
    assert check.next_position(lambda p, k: np.int64(p + k + 1))
    assert check.next_position(lambda p, k: torch.tensor(p + k + 1))


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
    ok, out = run(capsys, check.rollback_after_rejection, check.reference_rollback_after_rejection, *args)
    assert ok
    assert not target._forward_hooks  # the checker removed its hook
    ok, out = run(capsys, check.rollback_after_rejection, lambda *a: None, *args)
    assert not ok and "return the cache" in out


@pytest.mark.parametrize("fault,phrase", [(lambda p, k: p + 1, "moves on by all the tokens the step committed"),
                                          (lambda p, k: p + k, "target's own token"),
                                          (lambda p, k: p + k + 2, "right after the accepted drafts")])
def test_next_position_checker(capsys, fault, phrase):
    assert run(capsys, check.next_position, next_position)[0]
    ok, out = run(capsys, check.next_position, fault)
    assert not ok and phrase in out
    assert "num_accepted + 1" not in out  # the specific hints explain in words, as the generic one does


def test_draft_keep_checker(capsys, target, noisy_draft):
    ok, out = run(capsys, check.draft_keep_length, draft_keep_length, target, noisy_draft, [1, 2, 3, 4, 5])
    assert ok and "matches a fresh forward" in out and "acceptance rate over 40 new tokens is" in out
    ok, out = run(capsys, check.draft_keep_length, lambda h, k, n: h - (n - k))
    assert not ok and "never fed its LAST draft" in out
    ok, out = run(capsys, check.draft_keep_length, lambda h, k, n: h - (n - 1 - k))
    assert not ok and "full acceptance" in out


def test_emitted_tokens_checker(capsys):
    assert run(capsys, check.emitted_tokens, emitted_tokens)[0]
    ok, out = run(capsys, check.emitted_tokens, lambda d, k, t: list(d) + [t])
    assert not ok and "rejected drafts must not reach the output" in out


@pytest.mark.parametrize("checker, wrong, words, formulas", [
    (check.next_position, lambda p, k: p + 2 * k + 1,
     ("target's own token", "from position 50, a step that accepted 1 draft commits 2 tokens, at 51 and 52",
      "at 51", "an int"),
     ("position + num_accepted + 1", "num_accepted + 1")),
    (check.draft_keep_length, lambda h, k, n: h - 1,
     ("all of them but the last", "drafts 3 and 4 go and 23 entries stay", "with 4 or 5 accepted all 25 stay",
      "an int"),
     ("held - max(0, n_draft - 1 - num_accepted)", "n_draft - 1 - num_accepted", "max(0")),
    (check.emitted_tokens, lambda d, k, t: [t],
     ("first num_accepted of them", "[8, 3, 5] with 1 accepted and next_token 6 give [8, 6]", "[8, 3, 5, 2]",
      "list of ints"),
     ("drafts[:num_accepted] + [next_token]", "drafts[:num_accepted]", "[next_token]")),
])
def test_generic_hints_explain_the_rule_without_the_answer(checker, wrong, words, formulas, capsys):
    """A wrong answer that matched no planted fault used to be told the one-line answer ("return position +
    num_accepted + 1", "return held - max(0, n_draft - 1 - num_accepted)", "return drafts[:num_accepted] +
    [next_token]"). The hint now explains the rule in words, with an example that is not one of the checked cases."""
    from lab.kv import draft_keep_length, emitted_tokens, next_position

    assert (next_position(50, 1), next_position(50, 0)) == (52, 51)  # the examples the hints give are right
    assert (draft_keep_length(25, 2, 5), draft_keep_length(25, 4, 5), draft_keep_length(25, 5, 5)) == (23, 25, 25)
    assert (emitted_tokens([8, 3, 5], 1, 6), emitted_tokens([8, 3, 5], 3, 2)) == ([8, 6], [8, 3, 5, 2])
    out = rejects(checker, wrong, capsys, *words)
    assert "Hint:" in out and not [formula for formula in formulas if formula in out], out


def test_emitted_tokens_wants_a_list_without_being_given_the_answer(capsys):
    out = rejects(check.emitted_tokens, lambda d, k, t: torch.tensor(list(d[:k]) + [t]), capsys, "returned a Tensor",
                  "e.g. [8, 6]")
    assert "drafts[:num_accepted]" not in out


@pytest.mark.parametrize("answer, words", [
    (lambda drafts, k, t: np.array(list(drafts[:k]) + [t]), ["returned an ndarray", "return a list of int token ids"]),
    (lambda drafts, k, t: [float(x) for x in list(drafts[:k]) + [t]], ["not floats"]),
])
def test_emitted_tokens_refuses_an_array_or_floats(answer, words, capsys):
    """np.array passed, and lesson 07's last cell then crashed (list + array adds element-wise); floats passed and
    the loop committed float ids."""
    rejects(check.emitted_tokens, answer, capsys, *words)


@pytest.mark.parametrize("checker, answer", [
    (check.next_position, lambda position, num_accepted: float(next_position(position, num_accepted))),
    (check.draft_keep_length, lambda held, accepted, n_draft: float(draft_keep_length(held, accepted, n_draft))),
])
def test_a_right_value_as_a_float_is_told_to_be_an_int(checker, answer, capsys):
    """10.0 for 10 got the whole rule explained, as if the rule were wrong."""
    out = rejects(checker, answer, capsys, "the value is right, but return an int, not a float")
    assert "E.g." not in out


def test_emitted_tokens_names_a_list_plus_an_int(capsys):
    """drafts[:k] + next_token raised TypeError on every case and got the generic hint (a learner's run)."""
    rejects(check.emitted_tokens, lambda drafts, k, token: drafts[:k] + token, capsys,
            "wrap the int in one", "raised TypeError")


def test_cache_checks_in_bfloat16_ask_for_float32_instead_of_blaming_the_rollback(capsys, target, draft):
    """With ``dtype="auto"`` on an Ampere GPU the pair computes in bfloat16, whose rounding alone exceeds the 1e-4
    the logits are compared at: the right rollback was told its logits differ. Both cache checks now say to load
    the pair in float32, before running anything."""
    import copy

    half = copy.deepcopy(target).to(torch.bfloat16)
    capsys.readouterr()
    assert not check.rollback_after_rejection(reference_rollback, half, list(range(3, 13)), [20, 21, 22, 23, 24])
    out = capsys.readouterr().out
    assert "model computes in bfloat16" in out and 'dtype="float32"' in out and "next logits differ" not in out
    assert not check.draft_keep_length(draft_keep_length, target, copy.deepcopy(draft).to(torch.bfloat16), [3, 4, 5])
    assert "draft_model computes in bfloat16" in capsys.readouterr().out
    assert check.draft_keep_length(draft_keep_length, target, draft, [3, 4, 5])  # float32: the loop runs


def test_emitted_tokens_one_draft_too_many_is_named(capsys):
    rejects(check.emitted_tokens, lambda d, k, t: list(d[:k + 1]) + [t], capsys, "one draft too many")

def test_rollback_crop_by_the_rejection_position_is_named(target, capsys):
    """cache.crop(-rejected_at) cuts rejected_at entries, not the rejected draft and those after it."""
    def crop_by_position(model, prefix, drafts, rejected_at):
        cache = new_cache()
        forward(model, prefix + drafts, cache)
        cache.crop(-rejected_at)
        return cache

    capsys.readouterr()
    assert check.rollback_after_rejection(crop_by_position, target, list(range(3, 13)), [20, 21, 22, 23, 24]) is False
    out = capsys.readouterr().out
    assert "rejected_at=1" in out and "crop(-k) removes the LAST k entries" in out and "last 5 are" in out, out
    assert "rollback(cache, length)" not in out


def test_a_positive_crop_is_named_with_what_crop_takes(target, capsys):
    """cache.crop(length to keep), as transformers 4.x read it, raised transformers' bare "Calling `crop` with a
    positive value ... is not supported" with no hint (a learner's run)."""
    def crop_to_length(model, prefix, drafts, rejected_at):
        cache = new_cache()
        forward(model, prefix, cache)
        forward(model, drafts, cache)
        cache.crop(len(prefix) + rejected_at - 1)
        return cache

    capsys.readouterr()
    assert check.rollback_after_rejection(crop_to_length, target, list(range(3, 13)), [20, 21, 22, 23, 24]) is False
    out = capsys.readouterr().out
    assert out.startswith("✗") and "rejected_at=1" in out and "positive value" in out, out
    assert "crop(-k) removes the LAST k entries" in out and "pass minus that count" in out, out
    hint = out.split("Hint:")[1]  # names what crop takes, neither the length to pass nor a call that does the step
    assert "len(prefix" not in hint and "rollback(cache, length)" not in hint, out
    ok, out = run(capsys, check.rollback_after_rejection, reference_rollback, target, list(range(3, 13)),
                  [20, 21, 22, 23, 24])
    assert ok, out


@pytest.mark.parametrize("checker, name, arity", [(check.next_position, "advance", 2),
                                                  (check.draft_keep_length, "draft_keep", 3),
                                                  (check.emitted_tokens, "emit", 3)])
def test_not_solved_yet_names_the_learners_function(checker, name, arity, capsys):
    """The lesson's exercises 2-4 are `advance`, `draft_keep` and `emit`; "next_position: not solved yet" named a
    function the learner never wrote (a learner's run)."""
    def stub(*args):
        raise NotImplementedError

    stub.__name__ = name
    ok, out = run(capsys, checker, stub)
    assert ok is False and "not solved yet" in out and f"your {name} still raises" in out, out
    wrong = {2: lambda a, b: -1, 3: lambda a, b, c: -1}[arity]
    wrong.__name__ = name
    out = rejects(checker, wrong, capsys, f"{name}(")
    assert checker.__name__ + "(" not in out, out
