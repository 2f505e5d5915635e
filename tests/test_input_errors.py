"""Bad input to lab's public functions gets a clear error naming the argument and the allowed range; integer
arguments accept any numbers.Integral; tiny temperatures give the exact low-temperature limit, not NaN.

Every case here failed (or silently returned a wrong number) before its check was added."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from lab import metrics, toy
from lab.decode import generate
from lab.drafters import DraftModelDrafter
from lab.sampling import accept_or_reject, categorical, check_int, probs_from_logits

NAN = float("nan")


# --- metrics: acceptance probability, KL, TV -------------------------------------------------------------------

@pytest.mark.parametrize("fn", [metrics.acceptance_probability, metrics.kl_divergence, metrics.total_variation],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("target, draft, words", [
    ([0.5, 0.5], [1.0], "same shape"),                 # broadcasting used to give 1.0
    ([2.0, 2.0], [3.0, 3.0], "target_probs must sum to 1"),  # unnormalised: acceptance used to be 4.0
    ([0.5, 0.5], [0.2, 0.2], "draft_probs must sum to 1"),
    ([NAN, 1.0], [0.5, 0.5], "target_probs contains NaN"),
    ([0.5, 0.5], [NAN, 1.0], "draft_probs contains NaN"),
    ([-0.5, 1.5], [0.5, 0.5], "target_probs has negative entries"),
    (1.0, 0.5, "vocabulary axis"),                     # total_variation(1.0, .5) used to return 0.25
    ([[0.5, 0.5]], [[0.5, 0.5]], "one distribution"),
])
def test_divergences_validate_both_distributions(fn, target, draft, words):
    with pytest.raises(ValueError, match=words):
        fn(target, draft)


def test_divergences_still_give_exact_values():
    t, d = [0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]
    assert metrics.acceptance_probability(t, d) == pytest.approx(0.5)
    assert metrics.total_variation(t, d) == pytest.approx(0.5)
    assert metrics.kl_divergence(t, d) == pytest.approx(math.log(2))
    # float32 tensors from a model sum to 1 only up to rounding: accepted
    t32 = torch.softmax(torch.randn(50, generator=torch.Generator().manual_seed(0)), -1)
    assert metrics.acceptance_probability(t32, t32) == pytest.approx(1.0, abs=1e-6)


def test_metric_messages():
    with pytest.raises(ValueError, match=r"alpha \(the per-token acceptance probability\)"):
        metrics.expected_tokens_per_call(1.5, 2)
    with pytest.raises(ValueError, match="finite number >= 0, got inf"):
        metrics.predicted_speedup(0.5, 2, math.inf)
    assert metrics.predicted_speedup(0.5, np.int64(2), 0.1) == pytest.approx(1.75 / 1.2)


# --- metrics: chi-square ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("counts, probs, words", [
    ([10, 10, 10], [0.5, 0.5, 0.5], "probs must sum to 1"),  # used to be rescaled silently
    ([-10, 30], [0.5, 0.5], "counts must be finite numbers >= 0"),
    ([10, NAN], [0.5, 0.5], "counts must be finite"),
    ([10, 10], [NAN, 0.5], "probs contains NaN"),              # used to give a NaN p-value
    ([0, 0], [0.5, 0.5], "counts are all zero"),               # used to raise ZeroDivisionError
    ([10, 10, 10], [0.5, 0.5], "3 categories but probs has 2"),  # used to raise a torch RuntimeError
    ([[10, 10]], [[0.5, 0.5]], "1-D"),
])
def test_chi_square_validates(counts, probs, words):
    with pytest.raises(ValueError, match=words):
        metrics.chi_square(counts, probs)


def test_chi_square_values_and_single_bin():
    assert metrics.chi_square([50, 50], [0.5, 0.5]).pvalue == pytest.approx(1.0)
    result = metrics.chi_square([30, 10], [0.5, 0.5])
    assert result.statistic == pytest.approx(10.0) and result.pvalue == pytest.approx(0.0015654, rel=1e-4)
    single = metrics.chi_square([3, 0], [1.0, 0.0])  # one possible token: nothing to test (scipy would give NaN)
    assert single.statistic == 0.0 and single.pvalue == 1.0
    # several possible tokens but too few samples to fill two bins: an error saying how many to draw, not p = 1
    with pytest.raises(ValueError, match="9 observations are too few to test.*draw at least 10 samples"):
        metrics.chi_square([0, 9], [0.5, 0.5])
    with pytest.raises(ValueError, match="draw at least 6 samples"):  # 6 * 0.9 >= 5: a bin of its own
        metrics.chi_square([3, 1, 0], [0.9, 0.05, 0.05])
    assert 0 < metrics.chi_square([6, 0, 0], [0.9, 0.05, 0.05]).pvalue < 1
    assert metrics.chi_square([0, 10], [0.5, 0.5]).pvalue == pytest.approx(0.0015654, rel=1e-4)
    assert metrics.chi_square(torch.tensor([40.0, 60.0]), torch.tensor([0.4, 0.6])).pvalue == pytest.approx(1.0)


# --- sampling: categorical, accept_or_reject, integers ---------------------------------------------------------

@pytest.mark.parametrize("probs, words", [([-0.5, 1.5], "negative"), ([NAN, 1.0], "NaN"), ([0.1, 0.1], "sum to 1"),
                                          ([], "empty"), ("ab", "sequence of probabilities"),
                                          (torch.ones(2, 2) / 2, "one distribution")])
def test_categorical_validates(probs, words):
    with pytest.raises((ValueError, TypeError), match=words):
        categorical(probs, random.Random(0))


def test_categorical_values():
    class FixedU(random.Random):
        def __init__(self, u):
            super().__init__(0)
            self.u = u

        def random(self):
            return self.u

    assert categorical([0.25, 0.5, 0.25], FixedU(0.2)) == 0
    assert categorical([0.25, 0.5, 0.25], FixedU(0.74)) == 1
    assert categorical(torch.tensor([0.25, 0.5, 0.25]), FixedU(0.9)) == 2
    assert categorical([0.0, 1.0, 0.0], FixedU(0.999)) == 1


@pytest.mark.parametrize("args, error, word", [
    (("a", 0.5, 0.1), TypeError, "target_prob"), ((None, 0.5, 0.1), TypeError, "target_prob"),
    ((0.5, None, 0.1), TypeError, "draft_prob"), ((0.5, 0.5, "0.1"), TypeError, "u must be a number"),
    ((True, 0.5, 0.1), TypeError, "target_prob"), ((torch.tensor([0.5, 0.5]), 0.5, 0.1), TypeError, "target_prob"),
])
def test_accept_or_reject_names_wrong_types(args, error, word):
    with pytest.raises(error, match=word):
        accept_or_reject(*args)


def test_accept_or_reject_accepts_numpy_and_tensor_numbers():
    assert accept_or_reject(np.float32(0.375), torch.tensor(0.75), np.float64(0.49)) is True
    assert accept_or_reject(torch.tensor(0.375), 0.75, 0.5) is False  # u == ratio: strict <


def test_integers_of_any_integral_type():
    assert check_int("n", np.int64(3), 1) == 3 and type(check_int("n", np.int64(3), 1)) is int
    for bad in (True, 2.0, "2", 0):
        with pytest.raises(ValueError, match="n must be an integer >= 1"):
            check_int("n", bad, 1)
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0]])
    assert torch.equal(probs_from_logits(logits, 1.0, top_k=np.int64(2)), probs_from_logits(logits, 1.0, top_k=2))
    with pytest.raises(ValueError, match="top_k"):
        probs_from_logits(logits, 1.0, top_k=True)
    out = toy.speculative_step([0], toy.fixed_model([0.5, 0.5]), toy.fixed_model([0.5, 0.5]), np.int64(2),
                               random.Random(0))
    assert len(out) == 4


# --- probs_from_logits: tiny temperatures, -inf rows -------------------------------------------------------------

@pytest.mark.parametrize("temperature", [1e-45, 1e-46, 1e-300, 5e-324, 1e-31])
def test_tiny_temperature_is_the_exact_limit(temperature):
    logits = torch.tensor([[1.0, 2.0, 3.0], [-5.0, -1.0, -3.0], [2.0, 2.0, -1.0]])
    probs = probs_from_logits(logits, temperature)
    assert not torch.isnan(probs).any()
    # the argmax gets everything; tied maxima share it, as softmax does for any T > 0
    assert probs.tolist() == [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0]]
    assert probs_from_logits(logits, temperature, top_k=1).tolist() == probs.tolist()


def test_huge_logits_at_small_temperature_do_not_overflow():
    logits = torch.tensor([3e38, 1e38, -3e38])
    assert probs_from_logits(logits, 0.5).tolist() == [1.0, 0.0, 0.0]


def test_ordinary_temperatures_keep_the_plain_formula():
    """The overflow guard must not change a single bit where no overflow is possible."""
    logits = torch.randn(4, 100, generator=torch.Generator().manual_seed(3)) * 5
    for temperature in (1.0, 0.7, 1.3, 1e-3):
        assert torch.equal(probs_from_logits(logits, temperature), torch.softmax(logits / temperature, -1))


@pytest.mark.parametrize("logits, words", [
    (torch.full((3,), -math.inf), "every logit in a row is -inf"),
    (torch.tensor([[0.0, 1.0], [-math.inf, -math.inf]]), "every logit in a row is -inf"),
    (torch.tensor([0.0, math.inf]), r"\+inf"),
    (torch.tensor([0.0, NAN]), "NaN"),
    (torch.tensor(1.0), "vocabulary axis"),
])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_logits_without_a_distribution_are_rejected(logits, words, temperature):
    with pytest.raises(ValueError, match=words):
        probs_from_logits(logits, temperature)


# --- toy models -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("target, draft, words", [
    ([0.5, 0.5], [NAN, 1.0], r"draft_model\(\[0\]\) contains NaN"),
    ([0.5, 0.5], [0.1, 0.1], r"draft_model\(\[0\]\) must sum to 1"),
    ([NAN, 1.0], [0.5, 0.5], r"target_model\(\[0\]\) contains NaN"),
    ([1.5, -0.5], [0.5, 0.5], r"target_model\(\[0\]\) has negative entries"),
])
def test_toy_step_validates_model_outputs(target, draft, words):
    with pytest.raises(ValueError, match=words):
        toy.speculative_step([0], lambda c: target, lambda c: draft, 2, random.Random(0))


def test_toy_step_rejects_text_prefix():
    m = toy.fixed_model([0.5, 0.5])
    with pytest.raises(TypeError, match="prefix"):
        toy.speculative_step("ab", m, m, 1, random.Random(0))


def test_toy_step_draws_are_unchanged_by_the_checks():
    """Validation consumes no random numbers: a seeded run gives the same tokens as the unchecked algorithm."""
    from lab.check import _step_variant

    target, draft = toy.bigram_model([[0.6, 0.4], [0.2, 0.8]]), toy.bigram_model([[0.3, 0.7], [0.5, 0.5]])
    a, b = random.Random(9), random.Random(9)
    for _ in range(200):
        assert toy.speculative_step([1], target, draft, 3, a) == _step_variant()([1], target, draft, 3, b)


# --- generate and DraftModelDrafter ---------------------------------------------------------------------------

def test_generate_argument_errors(target, draft):
    prompt = [1, 2, 3]
    cases = [
        (dict(prompt_ids="ROMEO:"), TypeError, r"prompt_ids.*pair\.encode\(text\)"),
        (dict(prompt_ids=[1.5, 2.0]), TypeError, r"prompt_ids must hold integer token ids.*pair\.encode"),
        (dict(prompt_ids=torch.tensor([1.0, 2.0])), TypeError, "prompt_ids must be integer token ids"),
        (dict(drafter=draft), TypeError, r"drafter.*DraftModelDrafter\(model, n_draft\)"),
        (dict(drafter="ngram"), TypeError, "drafter must be a drafter"),
        (dict(seed="a"), TypeError, "seed must be None or an integer"),
        (dict(seed=2 ** 64), ValueError, "seed must be in"),
        (dict(seed=1.5), TypeError, "seed"),
        (dict(eos_token_id="x"), TypeError, "eos_token_id"),
        (dict(eos_token_id=64), ValueError, r"eos_token_id must be a token id in \[0, 64\)"),
        (dict(on_step=3), TypeError, "on_step"),
        (dict(max_new_tokens=0), ValueError, "max_new_tokens must be an integer >= 1"),
    ]
    for kwargs, error, words in cases:
        args = dict(prompt_ids=prompt, max_new_tokens=4)
        args.update(kwargs)
        with pytest.raises(error, match=words):
            generate(target, args.pop("prompt_ids"), **args)
    with pytest.raises(TypeError, match="target must be a transformers causal LM"):
        generate("gpt2", prompt, max_new_tokens=4)


def test_generate_accepts_numpy_integers_and_tiny_temperature(target, draft):
    prompt = [1, 2, 3]
    greedy = generate(target, prompt, drafter=DraftModelDrafter(draft, 2), max_new_tokens=12).tokens
    tiny = generate(target, np.array(prompt), drafter=DraftModelDrafter(draft, np.int64(2)),
                    max_new_tokens=np.int64(12), temperature=1e-45, seed=np.int64(0), top_k=np.int64(5))
    assert tiny.tokens == greedy  # the T -> 0 limit is greedy decoding (no argmax ties in these models)
    a = generate(target, prompt, max_new_tokens=8, temperature=1.0, seed=np.int64(4)).tokens
    b = generate(target, prompt, max_new_tokens=8, temperature=1.0, seed=4).tokens
    assert a == b


def test_draft_model_drafter_arguments(draft):
    assert DraftModelDrafter(draft, n_draft=np.int64(2)).n_draft == 2
    assert DraftModelDrafter(draft, 2, adaptive=True, max_n_draft=np.int64(5)).max_n_draft == 5
    with pytest.raises(ValueError, match="n_draft must be an integer >= 1"):
        DraftModelDrafter(draft, n_draft=True)
    with pytest.raises(ValueError, match=r"max_n_draft must be an integer >= n_draft \(3\)"):
        DraftModelDrafter(draft, 3, adaptive=True, max_n_draft=2)
    with pytest.raises(TypeError, match="draft_model must be a transformers causal LM"):
        DraftModelDrafter(DraftModelDrafter(draft, 2), 2)


def test_optimal_n_draft_names_max_n():
    from lab.metrics import optimal_n_draft

    with pytest.raises(ValueError, match="max_n"):
        optimal_n_draft(0.5, 0.1, 0)
    assert optimal_n_draft(0.5, 0.1, np.int64(3)) in (1, 2, 3)


def test_numpy_integers_in_constructors():
    from lab.drafters.early_exit import EarlyExitDrafter
    from lab.drafters.medusa import MedusaHeads
    from lab.models import load_pair
    from widgets.token_stream import TokenStream

    pair = load_pair()
    assert EarlyExitDrafter(pair.target, num_layers=np.int64(2)).num_layers == 2
    heads = MedusaHeads(num_heads=np.int64(2), hidden_size=np.int64(8), vocab_size=np.int64(16))
    assert heads.num_heads == 2 and type(heads.num_heads) is int
    assert TokenStream(top_k=np.int64(3))._top_k == 3
    with pytest.raises(ValueError, match="num_layers"):
        EarlyExitDrafter(pair.target, num_layers=np.float64(2.0))


# --- found by an adversarial review (2026-12-01): each raised a bare AttributeError, ran on, or said the wrong thing --

def test_rollback_and_cache_length_name_a_non_cache():
    from lab.kv import cache_length, rollback

    for bad in (None, ((torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4)),)):   # nothing; a legacy tuple cache
        with pytest.raises(TypeError, match="cache must be a transformers cache"):
            rollback(bad, 0)
        with pytest.raises(TypeError, match="cache must be a transformers cache"):
            cache_length(bad)


def test_speculative_step_returns_plain_ints_for_a_tensor_prefix():
    model = toy.fixed_model([0.25, 0.75])
    out = toy.speculative_step(torch.tensor([1, 0]), model, model, 2, random.Random(0))
    assert out[:2] == [1, 0] and len(out) == 5 and all(type(t) is int for t in out)
    with pytest.raises(TypeError, match="prefix must hold integer token ids"):
        toy.speculative_step([0, 1.5], model, model, 2, random.Random(0))


def test_generate_names_record_probs_and_a_drafter_class(target, draft):
    with pytest.raises(TypeError, match="record_probs must be True or False, got str 'no'"):
        generate(target, [1, 2], max_new_tokens=2, record_probs="no")
    with pytest.raises(TypeError, match="got the class DraftModelDrafter itself; create one"):
        generate(target, [1, 2], drafter=DraftModelDrafter, max_new_tokens=2)


def test_generate_checks_the_draft_models_context_up_front(target):
    from tests.conftest import tiny_llama

    short = tiny_llama(5, layers=1, max_positions=16)
    calls = []
    drafter = DraftModelDrafter(short, 3)
    drafter.reset = lambda prompt: calls.append(prompt)     # nothing may run before the check
    with pytest.raises(ValueError, match="exceeds the draft model's context of 16 positions"):
        generate(target, [1, 2, 3, 4], drafter=drafter, max_new_tokens=13)
    assert calls == []
    assert len(generate(target, [1, 2, 3, 4], drafter=DraftModelDrafter(short, 3), max_new_tokens=12).tokens) == 12


def test_hidden_state_drafters_name_a_target_of_another_width(target):
    from lab.drafters.medusa import MedusaDrafter, MedusaHeads
    from tests.conftest import tiny_llama

    drafter = MedusaDrafter(target, MedusaHeads(target.config.hidden_size, target.config.vocab_size, 2),
                            tree=[(0,), (0, 0)])
    narrower = tiny_llama(6, hidden=16)
    with pytest.raises(ValueError, match="built for a target of hidden size 32, but this target's is 16"):
        generate(narrower, [1, 2, 3], drafter=drafter, max_new_tokens=4)


def test_probability_checks_refuse_complex_numbers():
    with pytest.raises(TypeError, match="target_prob must be a number"):
        accept_or_reject(torch.tensor(1 + 0j), 0.5, 0.1)


def test_logits_too_large_for_float32_are_named_as_such():
    for row in ([1e300, 0.0], [1e300, -math.inf], [-1e300, -1e300]):   # a masked -inf is no +inf
        with pytest.raises(ValueError, match="too large for float32"):
            probs_from_logits(torch.tensor(row, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"contain \+inf"):                    # a real +inf still says so
        probs_from_logits(torch.tensor([float("inf"), 0.0], dtype=torch.float64))


@pytest.mark.parametrize("fn", ["position_ids", "tree_attention_mask", "depths"])
def test_tree_helpers_name_parents_when_it_is_not_a_sequence(fn):
    from lab import trees

    args = (None,) if fn == "depths" else (None, 1)
    with pytest.raises(TypeError, match="parents must be a list, tuple or 1-D tensor"):
        getattr(trees, fn)(*args)


def test_pick_refuses_an_empty_target_name(capsys):
    from lab.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["pick", "--task", "code", "--target", ""])
    assert exit_info.value.code == 2
    assert "argument --target: must be a model name or path" in capsys.readouterr().err


def test_one_element_tensors_count_as_numbers():
    """An acceptance rate computed with torch (lesson 05) is a 0-d tensor: the formulas take it as its value, and
    the sampling settings take tensors too; a longer tensor or a bool tensor is still refused, naming the argument."""
    from lab import costs

    alpha = torch.minimum(torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.3, 0.3, 0.4])).sum()  # tensor(0.8)
    assert metrics.expected_tokens_per_call(alpha, torch.tensor(4)) == pytest.approx(
        metrics.expected_tokens_per_call(0.8, 4), rel=1e-6)
    assert metrics.predicted_speedup(alpha, 4, np.array(0.1)) == pytest.approx(metrics.predicted_speedup(0.8, 4, 0.1),
                                                                              rel=1e-6)
    assert metrics.optimal_n_draft(alpha, torch.tensor(0.05)) == metrics.optimal_n_draft(0.8, 0.05)
    gain = costs.speculative_throughput_gain
    assert gain(torch.tensor(2), 4, alpha, 0.1, torch.tensor(300.0)) == pytest.approx(gain(2, 4, 0.8, 0.1, 300.0),
                                                                                      rel=1e-6)
    logits = torch.tensor([1.0, 2.0, 3.0, 0.5])
    torch.testing.assert_close(probs_from_logits(logits, torch.tensor(0.5), torch.tensor(3), torch.tensor(0.75)),
                               probs_from_logits(logits, 0.5, 3, 0.75))
    for bad in (torch.tensor([0.8, 0.1]), torch.tensor(True)):
        with pytest.raises(ValueError, match=r"alpha .* must be a number in \[0, 1\]"):
            metrics.expected_tokens_per_call(bad, 4)
    with pytest.raises(ValueError, match="temperature must be a finite number"):
        probs_from_logits(logits, torch.tensor([0.5, 0.5]))


def test_number_messages_show_the_tensor_that_was_passed():
    """plain_number unwraps one-element tensors; a refused one must still be shown as the tensor it was."""
    with pytest.raises(ValueError, match=r"n_draft must be an integer >= 1, got tensor\(3\.\)"):
        metrics.expected_tokens_per_call(0.5, torch.tensor(3.0))
    with pytest.raises(ValueError, match=r"top_k must be None or an integer >= 1, got tensor\(5\.\)"):
        probs_from_logits(torch.zeros(8), 1.0, top_k=torch.tensor(5.0))
    assert metrics.optimal_n_draft(torch.tensor(0.8), torch.tensor(0.1), torch.tensor(8)) == \
        metrics.optimal_n_draft(0.8, 0.1, 8)
    assert metrics.optimal_n_draft(0.8, 0.1, np.array(8)) == metrics.optimal_n_draft(0.8, 0.1, 8)


def test_sampled_verifiers_take_half_precision_rows():
    from lab import verify

    logits = torch.zeros(2, 1000)
    logits[:, 3] = 8.0
    rows = torch.softmax(logits.bfloat16(), -1)  # sums 1.002 after bf16 rounding
    result = verify.verify_sampled(rows, [3], None, torch.Generator().manual_seed(0))
    assert result.num_accepted in (0, 1)
    with pytest.raises(ValueError, match="must sum to 1"):
        verify.verify_sampled(torch.full((2, 4), 0.5, dtype=torch.bfloat16), [1], None, torch.Generator())
