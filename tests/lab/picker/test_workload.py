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
    ({"temperature": -0.1}, ["temperature", ">= 0"]),
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
