"""lab.validation: the argument checks every module shares (one copy each)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from lab import costs, metrics, toy
from lab.sampling import accept_or_reject, probs_from_logits
from lab.validation import check_int, check_sampling_args, check_token_ids


def test_check_token_ids_is_the_one_token_id_check():
    given = [3, 1, 2]
    out = check_token_ids("ids", given, 4)
    assert out == [3, 1, 2] and out is not given  # a fresh list: callers append to it
    assert check_token_ids("ids", torch.tensor([[5, 6]])) == [5, 6]  # [1, L] is one sequence
    assert check_token_ids("ids", np.array([7, 8])) == [7, 8] and type(check_token_ids("ids", (np.int64(2),))[0]) is int
    assert check_token_ids("ids", [], allow_empty=True) == []
    for bad, error, words in (("ab", TypeError, r"ids must be token ids, got text \('ab'\); see"),
                              ([1, 2.0], TypeError, "ids must hold integer token ids, got float 2.0; see"),
                              ([True], TypeError, "got bool True"),
                              (5, TypeError, "ids must be a list of token ids or a LongTensor, got int; see"),
                              (torch.tensor([1.0]), TypeError, "dtype torch.float32"),
                              (torch.zeros(2, 2, dtype=torch.long), ValueError, r"shape \(2, 2\)"),
                              ([], ValueError, "at least one token id"),
                              ([0, 4, -1], ValueError, r"ids must be token ids in \[0, 4\), got \[4, -1\]")):
        with pytest.raises(error, match=words):
            check_token_ids("ids", bad, 4, hint="; see")


def test_check_token_ids_refuses_a_negative_id_without_a_vocabulary():
    """Without ``vocab`` a negative id passed the check (the callers that feed a model were saved only by
    ``forward``'s own range check; the toy steps and the text helpers were not)."""
    with pytest.raises(ValueError, match=r"window must be token ids \(integers >= 0\), got -3"):
        check_token_ids("window", [4, -3])
    assert check_token_ids("window", [0, 70000]) == [0, 70000]  # no vocabulary: no upper bound to check


def test_check_token_ids_reads_a_numpy_row_like_a_tensor_row():
    """A NumPy [1, L] array is one sequence, as a tensor [1, L] is (it used to be read as one item, the row, and
    refused with the whole row in the message)."""
    for dtype in (np.int64, np.int32, np.uint16):
        out = check_token_ids("prompt_ids", np.array([[5, 6, 7]], dtype=dtype), 8)
        assert out == [5, 6, 7] and all(type(t) is int for t in out)
    assert check_token_ids("ids", np.array([[1, 2]], dtype=object)) == [1, 2]  # items judged one by one
    for bad, error, words in ((np.zeros((2, 3), dtype=np.int64), ValueError, r"\[L\] or \[1, L\], got shape \(2, 3\)"),
                              (np.array(4), ValueError, r"got shape \(\)"),
                              (np.array([[1.0, 2.0]]), TypeError, "NumPy array of dtype float64; see"),
                              (np.array([True]), TypeError, "dtype bool"),
                              (np.array([[0, 9]]), ValueError, r"in \[0, 8\), got \[9\]")):
        with pytest.raises(error, match=words):
            check_token_ids("ids", bad, 8, hint="; see")


# --- bool is not a number; NumPy numbers are -----------------------------------------------------------------------
@pytest.mark.parametrize("call, name", [
    (lambda: probs_from_logits(torch.randn(5), temperature=True), "temperature"),
    (lambda: probs_from_logits(torch.randn(5), top_p=True), "top_p"),
    (lambda: check_sampling_args(temperature=False), "temperature"),
    (lambda: metrics.expected_tokens_per_call(True, 3), "alpha"),
    (lambda: metrics.predicted_speedup(0.5, 3, True), "cost_ratio"),
    (lambda: metrics.optimal_n_draft(True, 0.1), "alpha"),
    (lambda: toy.mixture_model(toy.fixed_model([1.0]), toy.fixed_model([1.0]), True), "weight"),
    (lambda: costs.pass_time(True, 5), "tokens"),
    (lambda: costs.pass_time(10, True), "ridge_tokens"),
])
def test_bool_is_rejected_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b.*got (True|False)"):
        call()


def test_numpy_numbers_are_accepted():
    logits = torch.tensor([1.0, 2.0, 0.5])
    assert torch.equal(probs_from_logits(logits, temperature=np.float32(0.5), top_p=np.float64(0.9)),
                       probs_from_logits(logits, temperature=0.5, top_p=0.9))
    assert metrics.expected_tokens_per_call(np.float32(0.5), np.int64(3)) == pytest.approx(1.875)
    assert metrics.predicted_speedup(np.float64(0.5), 3, np.float32(0.25)) == pytest.approx(1.875 / 1.75)
    assert toy.mixture_model(toy.fixed_model([1.0, 0.0]), toy.fixed_model([0.0, 1.0]), np.float32(0.25))([]) == \
        pytest.approx([0.75, 0.25])
    assert costs.pass_time(np.float64(40), np.int64(20)) == 2.0


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


def test_numpy_integers_in_constructors(pair):
    from lab.drafters.early_exit import EarlyExitDrafter
    from lab.drafters.medusa import MedusaHeads
    from widgets.token_stream import TokenStream

    assert EarlyExitDrafter(pair.target, num_layers=np.int64(2)).num_layers == 2
    heads = MedusaHeads(num_heads=np.int64(2), hidden_size=np.int64(8), vocab_size=np.int64(16))
    assert heads.num_heads == 2 and type(heads.num_heads) is int
    assert TokenStream(top_k=np.int64(3))._top_k == 3
    with pytest.raises(ValueError, match="num_layers"):
        EarlyExitDrafter(pair.target, num_layers=np.float64(2.0))


def test_probability_checks_refuse_complex_numbers():
    with pytest.raises(TypeError, match="target_prob must be a number"):
        accept_or_reject(torch.tensor(1 + 0j), 0.5, 0.1)


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


def test_check_int_with_a_maximum_and_the_value_shown():
    assert check_int("n", np.int64(5), 1, 5) == 5
    for bad in (0, 6, 2.0, True):
        with pytest.raises(ValueError, match=r"n must be an integer in \[1, 5\]"):
            check_int("n", bad, 1, 5)
    with pytest.raises(ValueError, match=r"n_draft must be an integer >= 1, got tensor\(0\)"):
        check_int("n_draft", 0, 1, shown=torch.tensor(0))


def test_check_int_takes_one_element_integer_tensors_as_the_number_checks_take_float_ones():
    """``max_new_tokens=torch.tensor(3)`` was refused while ``temperature=torch.tensor(0.5)`` was taken."""
    assert check_int("n", torch.tensor(3), 1) == 3 and type(check_int("n", torch.tensor([3]), 1)) is int
    assert check_int("n", np.array(4), 1, 5) == 4
    for bad, shown in ((torch.tensor(3.0), r"tensor\(3\.\)"), (torch.tensor(True), r"tensor\(True\)"),
                       (torch.tensor([1, 2]), r"tensor\(\[1, 2\]\)"), (torch.tensor(0), r"tensor\(0\)")):
        with pytest.raises(ValueError, match=r"max_new_tokens must be an integer >= 1, got " + shown):
            check_int("max_new_tokens", bad, 1)


@pytest.mark.parametrize("ids, message", [
    ({5: "a", 7: "b"}, r"prompt_ids must be a sequence of token ids, got a mapping with keys \[5, 7\]"),
    ({"input_ids": [1, 2], "attention_mask": [1, 1]}, r"a tokenizer's output holds the ids in \['input_ids'\]"),
    ({3, 1, 2}, r"got a set \(no order, no repeats\)"),
    (frozenset({4}), r"got a frozenset"),
    (bytearray(b"abc"), r"prompt_ids must be token ids, got text")])
def test_containers_that_lose_order_or_are_not_ids_are_refused(ids, message):
    """A dict iterates its keys, a set loses order and repeats, a bytearray is text: each used to become a prompt."""
    with pytest.raises(TypeError, match=message):
        check_token_ids("prompt_ids", ids)


def test_a_tokenizers_own_output_points_to_its_input_ids(pair):
    with pytest.raises(TypeError, match=r"holds the ids in \['input_ids'\]"):
        check_token_ids("prompt_ids", pair.tokenizer("ROMEO."))
    assert check_token_ids("prompt_ids", pair.tokenizer("ROMEO.")["input_ids"]) == pair.encode("ROMEO.")


def test_a_temperature_too_large_for_a_float_is_named():
    """10**400 raised OverflowError from math.isnan, naming nothing; 2**64 is a finite float and samples."""
    with pytest.raises(ValueError, match=r"temperature must be a finite number >= 0 \(0 = greedy\), got 1000"):
        check_sampling_args(10 ** 400)
    assert check_sampling_args(2 ** 64) == (float(2 ** 64), None, None)


def test_numbers_too_large_for_a_float_are_named_with_their_range():
    """top_p=10**400 and accept_or_reject(10**400, ...) raised OverflowError from float(), naming nothing."""
    from lab.validation import check_number

    with pytest.raises(ValueError, match=r"^top_p must be None or a number in \(0, 1\], got 1000"):
        check_sampling_args(1.0, None, 10 ** 400)
    with pytest.raises(ValueError, match=r"^top_p must be None or a number in \(0, 1\], got -1000"):
        check_sampling_args(1.0, None, -10 ** 400)
    with pytest.raises(ValueError, match=r"^target_prob must be a number in \[0, 1\] that fits a float, got 1000.*… "
                                         r"\(401 characters\)$"):
        accept_or_reject(10 ** 400, 0.5, 0.1)
    with pytest.raises(ValueError, match=r"^u must be a number in \[0, 1\) that fits a float, got -1000"):
        accept_or_reject(0.5, 0.5, -10 ** 400)
    with pytest.raises(ValueError, match=r"^verify_ratio must be a number in \(0, inf\) that fits a float, got a "
                                         r"number too large to print"):
        check_number("verify_ratio", 10 ** 5000, "(0, inf)")  # past 4,300 digits repr() itself raises
    assert check_sampling_args(1.0, None, 1) == (1.0, None, 1.0)  # an int top_p that fits is still a float
    assert check_number("u", 2 ** 64, "[0, inf)") == float(2 ** 64)


@pytest.mark.parametrize("call, message", [
    (lambda: toy.fixed_model(torch.tensor([0.5 + 3j, 0.5 - 7j])), r"^probs must be real probabilities, got a tensor "
                                                                    r"of dtype torch\.complex64"),
    (lambda: toy.fixed_model(np.array([0.5 + 0j, 0.5])), r"^probs must be real probabilities, got NumPy ndarray of "
                                                          r"dtype complex128"),
    (lambda: toy.fixed_model([False, True]), r"^probs must be probabilities \(numbers\), got bool False"),
    (lambda: toy.fixed_model(np.array([False, True])), r"^probs must be real probabilities, got NumPy ndarray of "
                                                        r"dtype bool"),
    (lambda: toy.bigram_model(torch.eye(2, dtype=torch.bool)), r"^table must be real probabilities, got a tensor of "
                                                                r"dtype torch\.bool"),
    (lambda: toy.bigram_model([[1.0, 0.0], [np.True_, 0.0]]), r"^table must be real probabilities, got NumPy bool"),
    (lambda: toy.bigram_model([[1.0, 0.0], [torch.tensor(True), 0.0]]), r"^table must be real probabilities, got a "
                                                                          r"tensor of dtype torch\.bool"),
    (lambda: metrics.total_variation(torch.tensor([True, False]), torch.tensor([0.5, 0.5])),
     r"^target_probs must be real probabilities, got a tensor of dtype torch\.bool"),
])
def test_probabilities_refuse_complex_and_bool_input_instead_of_casting_it(call, message):
    """A complex tensor lost its imaginary part ([0.5+3j, 0.5-7j] became [0.5, 0.5]) and bools became 0/1."""
    with pytest.raises(TypeError, match=message):
        call()


def test_real_probabilities_of_every_kind_still_pass():
    from lab.validation import check_probs

    for probs in ([0.25, 0.75], [1, 0], (0.5, 0.5), np.array([0.25, 0.75]),
                  torch.tensor([0.25, 0.75], dtype=torch.half), [np.float32(0.25), torch.tensor(0.75)]):
        out = check_probs("probs", probs)
        assert out.dtype == torch.float32 and out.shape == (2,) and float(out.sum()) == 1.0
    torch.testing.assert_close(check_probs("probs", [np.float32(0.25), torch.tensor(0.75)]), torch.tensor([0.25, 0.75]))
    torch.testing.assert_close(check_probs("probs", [[0.5, 0.5], [1, 0]]), torch.tensor([[0.5, 0.5], [1.0, 0.0]]))


def test_the_hint_follows_every_type_error_of_check_token_ids():
    """The float/bool tensor TypeError left the hint off, though the docstring appends it to the type errors."""
    for bad in (torch.tensor([1.0]), torch.tensor([True]), torch.tensor([1 + 0j])):
        with pytest.raises(TypeError, match=r"must be integer token ids \(a LongTensor\), got dtype .*; encode text "
                                            r"first: pair\.encode\(text\)$"):
            check_token_ids("prompt_ids", bad, hint="; encode text first: pair.encode(text)")


def test_check_probs_refuses_a_tolerance_or_dtype_that_would_contradict_its_message():
    """A tester's negative atol said "must sum to 1, got a sum of 1"; an integer dtype "got a sum of 0"."""
    from lab.validation import check_probs

    for atol in (-1, float("nan"), True):
        with pytest.raises(ValueError, match="atol must be a finite number >= 0"):
            check_probs("p", [0.5, 0.5], atol=atol)
    with pytest.raises(ValueError, match="dtype must be a floating torch dtype"):
        check_probs("p", [0.5, 0.5], dtype=torch.int64)
    assert check_probs("p", [0.5, 0.5], dtype=torch.float64).dtype == torch.float64
