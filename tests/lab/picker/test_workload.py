"""lab.picker's inputs (lab.picker.workload): bad values raise a ValueError naming the argument and what it allows;
NumPy scalars count as numbers and numpy.bool_ as a bool, and the recommendation holds plain values."""
import json
import math

import numpy as np
import pytest

from lab import picker
from lab.picker import recommend

# --- inputs -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, words", [
    ({"task": "poetry"}, ["task", "chat", "copy_edit"]),
    ({"task": None}, ["task"]),
    ({"temperature": -0.1}, ["temperature", "from 0 (greedy) to 2"]),
    ({"temperature": 2.0001}, ["temperature", "from 0 (greedy) to 2", "OpenAI API"]),
    ({"temperature": 1e300}, ["temperature", "to 2"]),
    ({"temperature": math.nan}, ["temperature"]),
    ({"temperature": math.inf}, ["temperature"]),
    ({"temperature": "0.5"}, ["temperature"]),
    ({"has_small_same_family_model": 1}, ["has_small_same_family_model", "True or False"]),
    ({"can_finetune": "yes"}, ["can_finetune"]),
    ({"latency_bound": None}, ["latency_bound"]),
    ({"target_has_mtp": "yes"}, ["target_has_mtp", "True or False"]),
    ({"target_has_mtp": 1}, ["target_has_mtp"]),
    ({"memory_headroom_gb": -1}, ["memory_headroom_gb", ">= 0"]),
    ({"memory_headroom_gb": math.nan}, ["memory_headroom_gb"]),
    ({"exclude": ("warp",)}, ["exclude", "draft_model", "ngram"]),
    ({"exclude": ("none",)}, ["exclude"]),
    ({"exclude": {"eagle": True}}, ["exclude must be a list of methods, got a dict"]),  # its keys were read
])
def test_bad_inputs_raise_value_error_naming_argument_and_allowed_values(kwargs, words):
    args = {"task": "chat", "temperature": 0.0, "has_small_same_family_model": True, "can_finetune": False}
    args.update(kwargs)
    with pytest.raises(ValueError) as info:
        recommend(**args)
    for word in words:
        assert word in str(info.value)


def test_recommend_takes_numpy_bools_and_returns_plain_values():
    plain = picker.recommend("chat", 0.0, True, False, True, 0.5)
    numpy_args = picker.recommend("chat", np.float32(0.0), np.bool_(True), np.bool_(False), np.bool_(True),
                                  np.float64(0.5))
    assert numpy_args.to_dict() == plain.to_dict()
    flags = [numpy_args.workload[k] for k in ("has_small_same_family_model", "can_finetune", "latency_bound")]
    assert [type(f) for f in flags] == [bool, bool, bool]
    json.dumps(numpy_args.to_dict())  # numpy.bool_ would not serialise
    for name, position in (("has_small_same_family_model", 2), ("can_finetune", 3), ("latency_bound", 4)):
        for bad in (1, "yes", None, np.int64(1)):
            args = ["chat", 0.0, True, False, True]
            args[position] = bad
            with pytest.raises(ValueError, match=name):
                picker.recommend(*args)


def test_recommend_takes_zero_d_numpy_arrays_as_generate_does_and_no_negative_zero():
    """generate takes np.array(0.7) as a temperature (lab.validation.plain_number); the picker did not."""
    rec = recommend("chat", np.array(0.7), True, False, memory_headroom_gb=np.array(-0.0))
    assert rec.to_dict() == recommend("chat", 0.7, True, False, memory_headroom_gb=0.0).to_dict()
    assert math.copysign(1.0, rec.workload["memory_headroom_gb"]) == 1.0  # -0.0 printed "-0 GB"
    assert "memory headroom: 0 GB" in rec.summary()
    import torch

    assert recommend("chat", torch.tensor(0.5), True, False).to_dict() == recommend("chat", 0.5, True, False).to_dict()
    for bad in (np.array([0.7]), np.array(True), np.array("0.7"), torch.tensor(True), torch.tensor([0.7, 0.1])):
        with pytest.raises(ValueError, match="temperature"):
            recommend("chat", bad, True, False)


def test_a_temperature_below_vllms_sampling_eps_is_greedy_and_said_so():
    """vLLM treats T < 1e-5 as greedy (_SAMPLING_EPS); transformers would divide the logits by 1e-300 and overflow."""
    rec = recommend("chat", 1e-300, True, False)
    assert rec.temperature == 0.0 and rec.workload["temperature"] == 0.0 and rec.draft_temperature == 0.0
    assert rec.hf_kwargs() == {"do_sample": False, "assistant_model": "<same-family draft model>"}
    assert rec.reasons[0].startswith("T = 1e-300 is below 1e-5, which vLLM treats as greedy decoding (_SAMPLING_EPS")
    assert rec.reasons[1:] == recommend("chat", 0.0, True, False).reasons
    assert recommend("chat", 1e-5, True, False).temperature == 1e-5  # from 1e-5 on it samples
    assert recommend("chat", 2.0, True, False).method == "none"  # 2, the top of the OpenAI range, is accepted


def test_numbers_too_large_for_a_float_are_named_not_overflowed():
    with pytest.raises(ValueError, match="^temperature must be a finite number"):
        recommend("chat", 10 ** 400, True, False)
    with pytest.raises(ValueError, match="^memory_headroom_gb must be None") as caught:
        recommend("chat", 0.5, True, False, memory_headroom_gb=10 ** 400)
    # the number is cut, not printed with its 401 digits
    assert caught.value.args[0].endswith("got 1000000000000000000000000000000000000000… (401 characters)")
    with pytest.raises(ValueError, match=r"… \(401 characters\)$"):
        recommend("chat", 10 ** 400, True, False)
