"""The checkers of lessons 07-14 (lab.check_arena, check_costs, check_decoding, check_trees, check_picker): each
planted mistake gets its own hint, token ids must be whole integers, near misses are wrong."""
import pytest

from conftest import rejects
from lab import check as check_core
from lab import check_arena, check_costs, check_decoding, check_trees, costs, metrics
from lab.drafters.lookahead import converged_prefix


# --- check_costs ---------------------------------------------------------------------------------------------
# the batch-1 shortcut "gain = predicted_speedup" is wrong once B(N+1) passes the ridge (a tiny ridge here).
def test_throughput_gain_batch_one_past_the_ridge(capsys):
    def batch_one_shortcut(batch, n, alpha, c, fpb):
        if batch == 1:
            return metrics.predicted_speedup(alpha, n, c)
        return costs.speculative_throughput_gain(batch, n, alpha, c, fpb, bytes_per_param=2.0)

    rejects(check_costs.throughput_gain, batch_one_shortcut, capsys, "batch_one_shortcut(1, 4, 0.75, 0.1, 2)")


# --- check_arena ---------------------------------------------------------------------------------------------
# a mean of per-step ratios gets the "pool first" hint.
def test_cost_ratio_mean_of_ratios_hint(capsys):
    def mean_of_ratios(steps, ar):
        ratios = [s.draft_ms / s.draft_calls for s in steps if s.draft_calls]
        return sum(ratios) / len(ratios) / ar

    rejects(check_arena.cost_ratio, mean_of_ratios, capsys, "pool first")


# alpha**N instead of alpha**(N+1) gets the bonus-token hint.
def test_efficiency_exponent_hint(capsys):
    def short_exponent(m, b, a, n, c):
        tokens = n + 1 if a == 1 else (1 - a ** n) / (1 - a)
        return (m / b) / (tokens / (1 + n * c))

    rejects(check_arena.efficiency, short_exponent, capsys, "(the bonus token)")


# --- check_decoding ------------------------------------------------------------------------------------------
# each planted fault is caught with its own hint.
def test_next_position_one_too_far(capsys):
    rejects(check_decoding.next_position, lambda p, k: p + k + 2, capsys, "one too far")


@pytest.mark.parametrize("fn, words", [
    (lambda d, k, t: [t] + list(d[:k]), "accepted drafts come first"),
    (lambda d, k, t: list(d[:k]), "also emits the target's own token"),
    (lambda d, k, t: list(d[:k + 1]), "replaced by the target's token"),
])
def test_emitted_tokens_hints(fn, words, capsys):
    rejects(check_decoding.emitted_tokens, fn, capsys, words)


@pytest.mark.parametrize("fn, words", [
    (lambda h, k, n: h, "must leave the draft's cache"),
    (lambda h, k, n: h - (n - 1), "keep the accepted drafts"),
])
def test_draft_keep_length_hints(fn, words, capsys):
    rejects(check_decoding.draft_keep_length, fn, capsys, words)


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

    rejects(check_decoding.count_converged, vs_previous, capsys, "FIXED POINT")
    rejects(check_decoding.count_converged, second_last, capsys, "iterations[-1]")
    rejects(check_decoding.count_converged, newly, capsys, "running total")


def test_jacobi_step_window_only_hint(target, capsys):
    from lab.models import forward, new_cache

    def window_only(m, p, w):
        return forward(m, w, new_cache()).argmax(-1).tolist()

    capsys.readouterr()
    assert check_decoding.jacobi_step(window_only, target, [1, 2, 3, 4, 5]) is False
    assert "feed prefix + window" in capsys.readouterr().out


def test_rollback_to_the_prefix_hint(target, capsys):
    from lab.kv import rollback
    from lab.models import forward, new_cache

    def to_prefix(model, prefix, drafts, rejected_at):
        cache = new_cache()
        forward(model, prefix, cache)
        forward(model, drafts, cache)
        return rollback(cache, len(prefix))

    capsys.readouterr()
    assert check_decoding.rollback_after_rejection(to_prefix, target, list(range(3, 13)),
                                                   [20, 21, 22, 23, 24]) is False
    out = capsys.readouterr().out
    assert "rejected_at=2" in out and "you rolled back to the prefix" in out, out


# token ids are integers; bools and fractional numbers are not ids.
def test_token_lists_must_hold_whole_integers(capsys):
    from lab.kv import emitted_tokens

    assert not check_decoding._same_ints([True, False, True], [1, 0, 1])
    assert not check_decoding._same_ints([2.5, 3], [2, 3])
    assert check_decoding._same_ints([2.0, 3], [2, 3])  # a whole float is an id
    rejects(check_decoding.emitted_tokens, lambda d, k, t: [x + 0.25 for x in emitted_tokens(d, k, t)], capsys,
            "expected")


# --- check_picker ---------------------------------------------------------------------------------------------
def _picker_variant(**change):
    from lab import picker

    def fn(d, t, a, p):
        out = picker.stats_from_vllm_counters(d, t, a, p)
        for key, f in change.items():
            out[key] = f(out[key], d, t, a, p)
        return out
    return fn


# an acceptance rate 5 % off is wrong.
def test_vllm_counter_stats_five_percent_off_are_rejected(capsys):
    from lab import check_picker

    fn = _picker_variant(acceptance_rate=lambda v, *_: None if v is None else v * 1.05)
    capsys.readouterr()
    assert check_picker.stats_from_vllm_counters(fn) is False
    assert "acceptance_rate should be" in capsys.readouterr().out


# per_position_acceptance must have one entry per position; dropping the zero positions is wrong.
def test_vllm_counter_stats_per_position_list_must_keep_its_length(capsys):
    from lab import check_picker

    fn = _picker_variant(per_position_acceptance=lambda v, *_: [x for x in v if x])
    capsys.readouterr()
    assert check_picker.stats_from_vllm_counters(fn) is False
    out = capsys.readouterr().out
    assert "every draft is rejected" in out and "per_position_acceptance should be" in out, out


# --- check_trees -----------------------------------------------------------------------------------------------
def test_tree_mask_without_the_prefix_hint(capsys):
    rejects(check_trees.tree_mask, check_trees._mask_variant("no_prefix"), capsys, "whole committed prefix")
    rejects(check_trees.tree_mask, check_trees._mask_variant("no_self"), capsys, "attends to itself")


def test_tree_mask_must_be_a_tensor(capsys):
    from lab.trees import tree_attention_mask

    # the right pattern as nested lists of bools is not a mask lab.models.forward can use
    rejects(check_trees.tree_mask, lambda p, n: tree_attention_mask(p, n).tolist(), capsys, "bool tensor")


def test_tree_positions_without_prefix_len_hint(capsys):
    from lab.trees import depths

    rejects(check_trees.tree_positions, lambda p, n: depths(p).tolist(), capsys, "add prefix_len")


# a window of 3 tokens gives exactly one pair; a solution that squeezes its parts loses that dimension.
def test_eagle_training_pairs_single_pair_window(capsys):
    def squeezed(h, x):
        return h[:-2].squeeze(), x[1:-1].squeeze(), h[1:-1].squeeze(), x[2:].squeeze()

    out = rejects(check_trees.eagle_training_pairs, squeezed, capsys, "hidden [3, 2]")
    assert "features_in is" in out


# --- choosing the hint (lab.check._compare) ---------------------------------------------------------------------
# A planted fault that reproduces only a few of the learner's wrong answers must not lend them its hint: these
# answers are wrong in ways no planted fault explains, and used to get one that pointed the wrong way.
@pytest.mark.parametrize("checker, fn, misleading, generic", [
    (check_core.accept_probability, lambda t, d: min(t, d), "upside down", "two zero cases handled first"),
    (check_core.accept_probability, lambda t, d: max(1.0, t / d) if d > 0 else 1.0, "upside down",
     "two zero cases handled first"),
    (check_decoding.draft_keep_length, lambda held, k, n: k, "LAST draft", "held - max(0, n_draft - 1 - num_acc"),
])
def test_a_fault_that_explains_few_wrong_answers_gives_no_hint(checker, fn, misleading, generic, capsys):
    out = rejects(checker, fn, capsys, generic)
    assert misleading not in out, out


def test_a_hint_that_fits_most_wrong_answers_says_how_many(capsys):
    # always the longest draft: the tokens-per-call mistake on 4 of the 6 wrong cases (with alpha = 0 it is a tie)
    out = rejects(check_core.best_n_draft, lambda a, c, m: m, capsys, "SPEEDUP")
    assert "Hint (it fits 4 of the 6 wrong answers):" in out, out
    out = rejects(check_core.best_n_draft, lambda a, c, m: max(range(1, m + 1),
                                                          key=lambda n: metrics.expected_tokens_per_call(a, n)),
                  capsys, "SPEEDUP")
    assert "\n  Hint: maximise" in out, out


def test_messages_show_the_learners_own_function_name(capsys):
    def advance(position, num_accepted):
        return position + num_accepted

    out = rejects(check_decoding.next_position, advance, capsys, "advance(9, 0) returned 9; expected 10")
    assert out.startswith("✗ next_position: ") and "next_position(" not in out, out


def test_tree_mask_shape_and_type_get_their_own_hints(capsys):
    from lab.trees import tree_attention_mask

    rejects(check_trees.tree_mask, lambda p, n: tree_attention_mask(p, 0), capsys, "shape (4, 4); expected (4, 7)",
            "prefix_len committed tokens first")
    rejects(check_trees.tree_mask, lambda p, n: tree_attention_mask(p, n).tolist(), capsys, "returned a list",
            "torch.bool")
