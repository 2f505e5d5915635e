"""lab.picker.command: report() is what `python -m lab pick` does after parsing its flags (the end-to-end runs are
in tests/lab/cli)."""
import argparse
import json

from lab.picker import recommend, report


def pick_args(**change):
    """The namespace lab.cli's parser builds for `python -m lab pick --task chat --small-model`, with ``change``."""
    args = dict(task="chat", temperature=0.0, small_model=True, can_finetune=False, throughput=False, memory_gb=None,
                exclude=None, target="<target-model>", tensor_parallel_size=1, markdown=None, json=False)
    return argparse.Namespace(**{**args, **change})


def test_report_prints_the_summary_json_and_guide(tmp_path, capsys):
    assert report(pick_args(target="m", tensor_parallel_size=2)) == 0
    assert capsys.readouterr().out == recommend("chat", 0.0, True, False).summary("m", 2) + "\n"
    guide = tmp_path / "guide.md"
    assert report(pick_args(json=True, exclude=["draft_model"], markdown=str(guide))) == 0
    data = json.loads(capsys.readouterr().out)
    rec = recommend("chat", 0.0, True, False, exclude=("draft_model",))
    assert data == json.loads(json.dumps({**rec.to_dict(), "vllm_command": rec.vllm_command(),
                                          "sglang_command": rec.sglang_command(), "trtllm_yaml": rec.trtllm_yaml(),
                                          "llamacpp_command": rec.llamacpp_command()}))
    assert guide.read_text(encoding="utf-8") == rec.to_markdown()


def test_report_names_the_attributes_an_args_object_lacks():
    """report(None) raised an AttributeError naming no attribute."""
    import pytest

    with pytest.raises(TypeError, match="args must carry the flags of python -m lab pick .* NoneType lacks task, "
                                        "temperature"):
        report(None)
    partial = pick_args()
    del partial.exclude
    with pytest.raises(TypeError, match="Namespace lacks exclude$"):
        report(partial)


def test_report_names_the_flag_and_prints_nothing_on_stdout(capsys):
    assert report(pick_args(temperature=-1.0)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("python -m lab pick: --temperature must be a finite number from 0 (greedy) to 2")
