"""widgets.picker.StrategyPicker: the seed tables drive lab.picker, the widget's state is recommend's, its inputs are
checked before anything changes, and user text is escaped."""
import html
import json
import math

import numpy as np
import pytest

from lab import picker
from lab.picker import recommend
from widgets.picker import STRATEGY_SCENARIOS, StrategyPicker


def test_widget_tables_drive_the_picker():
    ui = StrategyPicker()
    assert ui.recommendation.method == "draft_model" and ui.highlighted_workload == "chat"
    for method in STRATEGY_SCENARIOS:
        ui.strategy_buttons[method].click()
        assert ui.recommendation.method == method and ui.highlighted_strategy == method
    for row in picker.WORKLOAD_TABLE:
        ui.set(has_small_same_family_model=True, can_finetune=False, exclude=(), target_has_mtp=False,
               has_parallel_draft=False)
        ui.workload_buttons[row.task].click()
        assert ui.workload["task"] == row.task and ui.recommendation.method == row.method
        assert ui.recommendation.expected_speedup == row.speedup
    ui.workload_buttons["copy_edit"].click()
    assert ui.recommendation.method == "ngram" and ui.highlighted_strategy is None


def test_widget_state_matches_recommend_and_renders_engine_settings():
    ui = StrategyPicker(task="code", temperature=0.2, has_small_same_family_model=False)
    expected = recommend("code", 0.2, False, False)
    assert ui.recommendation.to_dict() == expected.to_dict()
    assert ui.vllm_config == expected.vllm_config() and json.loads(ui.vllm_json) == expected.vllm_config()
    assert ui.hf_kwargs == expected.hf_kwargs() and ui.hf_assistant_config == {}
    assert "prompt_lookup_max" in ui.html and "prompt_lookup_num_tokens" in ui.html
    ui.set(temperature=1.2)
    assert ui.recommendation.method == "none" and ui.vllm_json == "" and "--speculative-config" not in ui.vllm_command
    ui.strategy_buttons["eagle"].click()  # a strategy row brings the temperature back into range
    assert ui.workload["temperature"] == picker.SAMPLING_WARN_TEMPERATURE and ui.recommendation.method == "eagle"
    ui.set(tensor_parallel_size=4, latency_bound=False)
    assert ui.recommendation.n_draft == 1 and "--tensor-parallel-size 4" in ui.vllm_command
    ui.set(memory_headroom_gb=0.5)
    assert ui.recommendation.method == "none"
    with pytest.raises(ValueError, match="unknown workload inputs"):
        ui.set(batch=8)
    with pytest.raises(ValueError):
        ui.select_workload("poetry")
    with pytest.raises(ValueError):
        StrategyPicker(temperature=-1)


def test_the_card_says_what_the_engines_serve():
    """The Lookahead row rules prompt lookup out, so no engine has anything to serve: the card said "expected
    1.3–1.6×" over an empty vLLM JSON; the Medusa row's engines serve another method, whose notes the card showed
    only in part. Both now say where the figure holds and what is served."""
    ui = StrategyPicker()
    ui.strategy_buttons["lookahead"].click()
    rec = ui.recommendation
    assert rec.vllm_config() == {} and "<pre>{}</pre>" not in ui.html
    assert "this course&#x27;s loop only" in ui.html and "As served:" in ui.html
    ui.strategy_buttons["medusa"].click()
    rec = ui.recommendation
    assert rec.served_text() and "As served:" in ui.html
    shown = [*rec.notes, *rec.vllm_notes(), *rec.hf_notes()]  # the engines the card shows settings for
    assert all(html.escape(note) in ui.html for note in shown)
    assert any("vLLM 0.34.0 has no Medusa proposer" in note for note in shown)
    assert "SGLang" not in ui.html.split("<b>vLLM</b>")[1]  # no note about flags the card does not show


def test_widget_escapes_user_text():
    ui = StrategyPicker(target="<script>alert(1)</script>", tensor_parallel_size=2)
    assert "<script>" not in ui.html and "&lt;script&gt;" in ui.html


def test_picker_set_checks_everything_first_and_takes_what_the_constructor_takes():
    picker = StrategyPicker()
    card, workload = picker.html, picker.workload
    # one range for every bad temperature, recommend's and the slider's: the OpenAI API's 0 to 2
    for bad in (2.5, float("nan"), -0.5, 10 ** 400, np.float64(2.1), np.array(2.1), "hot", None):
        with pytest.raises(ValueError, match=r"temperature must be a finite number from 0 \(greedy\) to 2 \(the "):
            picker.set(temperature=bad)
    assert picker.workload == workload and picker.html == card  # nothing moved
    with pytest.raises(ValueError, match=r"to 2 \(the OpenAI API's range, which the engines' servers take\), got "
                                         r"'hot'"):
        StrategyPicker(temperature="hot")
    with pytest.raises(ValueError, match="task must be one of chat, code"):
        picker.set(task="foo")
    with pytest.raises(ValueError, match="exclude may only name"):
        picker.set(exclude=("foo",))
    with pytest.raises(ValueError, match="tensor_parallel_size must be one of"):
        picker.set(tensor_parallel_size=3)
    with pytest.raises(ValueError, match="tensor_parallel_size must be one of .* got 2.0"):
        picker.set(tensor_parallel_size=2.0)  # 2.0 == 2, but a GPU count is whole
    with pytest.raises(ValueError, match=r"method must be one of .*; got \['eagle'\]"):
        picker.select_strategy(["eagle"])  # was "unhashable type: 'list'"
    assert picker.workload == workload
    picker.set(temperature=np.float64(2.0))  # the slider's end, as `python -m lab pick --temperature 2` takes it
    assert picker.temperature_slider.max == 2.0 and picker.workload["temperature"] == 2.0
    picker.set(temperature=0.0)
    picker.set(task="code", memory_headroom_gb=3.0)  # 3.0 is not one of the dropdown's choices
    fresh = StrategyPicker(task="code", memory_headroom_gb=3.0)
    assert picker.workload == fresh.workload and picker.workload["memory_headroom_gb"] == 3.0
    assert picker.recommendation.method == fresh.recommendation.method and picker.html == fresh.html
    assert picker.highlighted_workload == "code"


def test_strategy_picker_takes_numpy_scalars():
    widget = StrategyPicker(temperature=np.float32(0.5), has_small_same_family_model=np.bool_(False),
                            can_finetune=np.bool_(True), latency_bound=np.bool_(True),
                            tensor_parallel_size=np.int64(2))
    assert widget.small_model_box.value is False and widget.finetune_box.value is True
    assert widget.tensor_parallel_size == 2 and math.isclose(widget.temperature_slider.value, 0.5)
    assert widget.workload["has_small_same_family_model"] is False
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        StrategyPicker(tensor_parallel_size=True)  # True == 1, but it is not a GPU count


def test_widget_mtp_checkbox_and_row():
    """The checkbox is recommend's target_has_mtp; the MTP strategy row turns it on, the other rows turn it off."""
    ui = StrategyPicker(task="chat", has_small_same_family_model=False, target_has_mtp=True)
    assert ui.mtp_box.value is True and ui.workload["target_has_mtp"] is True
    assert ui.recommendation.to_dict() == recommend("chat", 0.0, False, False, target_has_mtp=True).to_dict()
    assert ui.recommendation.method == "mtp" and ui.highlighted_strategy == "mtp"
    assert ui.vllm_config == {"method": "mtp", "num_speculative_tokens": 1} and "use_mtp=True" in ui.html
    ui.mtp_box.value = False  # as a click on the checkbox
    assert ui.recommendation.method == "ngram"
    ui.strategy_buttons["mtp"].click()
    assert ui.mtp_box.value is True and ui.recommendation.method == "mtp"
    ui.strategy_buttons["lookahead"].click()
    assert ui.mtp_box.value is False and ui.recommendation.method == "lookahead"
    assert ui.strategy_buttons["mtp"].description.endswith("· 1.8×")
    ui.set(target_has_mtp=True, latency_bound=False)
    assert ui.recommendation.method == "mtp" and ui.recommendation.n_draft == 1
    with pytest.raises(ValueError, match="target_has_mtp must be True or False"):
        ui.set(target_has_mtp="yes")
    assert ui.mtp_box.value is True  # nothing moved
    with pytest.raises(ValueError, match="target_has_mtp"):
        StrategyPicker(target_has_mtp=1)
    assert StrategyPicker(target_has_mtp=np.bool_(True)).mtp_box.value is True


def test_widget_parallel_checkbox_and_row():
    """The checkbox is recommend's has_parallel_draft; the parallel row turns it on, the other rows turn it off."""
    ui = StrategyPicker(task="chat", has_parallel_draft=True)
    assert ui.parallel_box.value is True and ui.workload["has_parallel_draft"] is True
    assert ui.recommendation.to_dict() == recommend("chat", 0.0, True, False, has_parallel_draft=True).to_dict()
    assert ui.recommendation.method == "parallel" and ui.highlighted_strategy == "parallel"
    assert ui.vllm_config["method"] == "draft_model"  # vLLM 0.34.0 has no PARD drafter
    ui.parallel_box.value = False  # as a click on the checkbox
    assert ui.recommendation.method == "draft_model"
    ui.strategy_buttons["parallel"].click()
    assert ui.parallel_box.value is True and ui.recommendation.method == "parallel"
    ui.strategy_buttons["eagle"].click()
    assert ui.parallel_box.value is False and ui.recommendation.method == "eagle"
    assert ui.strategy_buttons["parallel"].description.endswith("· 2.52–2.72×")
    with pytest.raises(ValueError, match="has_parallel_draft must be True or False"):
        ui.set(has_parallel_draft="yes")
    assert ui.parallel_box.value is False  # nothing moved
    assert StrategyPicker(has_parallel_draft=np.bool_(True)).parallel_box.value is True


def test_the_picker_refuses_a_target_name_on_two_lines():
    from widgets import StrategyPicker

    with pytest.raises(ValueError, match="target must be a model name or path on one line"):
        StrategyPicker(target="a\n```\n<script>x</script>")
