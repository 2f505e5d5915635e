"""``python -m lab pick`` (lab.cli.pick): end to end in a subprocess (the summary, the JSON, the guide), bad
choices, and the errors argparse cannot see (--markdown, values that reach recommend), each one line naming the
flag."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lab import cli
from lab.cli import pick
from lab.picker import recommend
from tests.lab.cli.helpers import error_line, run_bad

ROOT = Path(__file__).resolve().parents[3]


def run_cli(*args, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "lab", "pick", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or ROOT, timeout=120)


def test_cli_prints_the_recommendation_and_writes_the_guide(tmp_path):
    guide = tmp_path / "guide.md"
    result = run_cli("--task", "code", "--temperature", "0.2", "--no-small-model", "--markdown", str(guide))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Method: n-gram prompt lookup (ngram)" in out and "Draft tokens per step N: 3" in out
    assert "1.5–2×" in out and "seed lesson 002" in out
    line = next(text for text in out.splitlines() if text.strip().startswith("vllm serve"))
    argv = shlex.split(line)
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    assert "prompt_lookup_num_tokens=3" in out
    text = guide.read_text(encoding="utf-8")
    assert text == recommend("code", 0.2, False, False).to_markdown()
    assert str(guide) in out


def test_cli_options_and_errors(tmp_path):
    result = run_cli("--task", "chat", "--temperature", "0.7", "--small-model", "--can-finetune", "--json",
                     "--target", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["method"] == "eagle" and data["n_draft"] == 4 and data["vllm_config"]["method"] == "eagle3"
    assert "--tensor-parallel-size 4" in data["vllm_command"]
    result = run_cli("--task", "chat", "--small-model", "--can-finetune", "--exclude", "eagle", "--json")
    assert json.loads(result.stdout)["method"] == "medusa"
    result = run_cli("--task", "chat", "--throughput", "--small-model", "--json")
    assert json.loads(result.stdout)["method"] == "none"
    result = run_cli("--task", "chat", "--no-small-model", "--target-has-mtp", "--throughput", "--json")
    data = json.loads(result.stdout)
    assert data["method"] == "mtp" and data["n_draft"] == 1 and data["workload"]["target_has_mtp"] is True
    assert data["vllm_config"] == {"method": "mtp", "num_speculative_tokens": 1,
                                   "num_speculative_tokens_per_batch_size": [[1, 262, 1], [263, 512, 0]]}
    assert data["sglang_args"][:2] == ["--speculative-algorithm", "NEXTN"]
    assert "--spec-type draft-mtp" in data["llamacpp_command"] and "decoding_type: MTP" in data["trtllm_yaml"]
    result = run_cli("--task", "chat", "--memory-gb", "-1")
    assert result.returncode == 2 and "argument --memory-gb" in result.stderr
    assert "memory_headroom_gb" not in result.stderr
    result = run_cli("--task", "poetry")
    assert result.returncode == 2 and "invalid choice" in result.stderr
    result = run_cli("--task", "chat", "--temperature", "-1")
    assert result.returncode == 2


def test_bad_choices_list_the_allowed_values(capsys):
    line = error_line(run_bad(["pick", "--task", "poetry"], capsys))
    assert "argument --task: invalid choice: 'poetry'" in line and "'copy_edit'" in line
    line = error_line(run_bad(["pick", "--task", "chat", "--exclude", "warp"], capsys))
    assert "argument --exclude: invalid choice: 'warp'" in line and "'eagle'" in line


def test_markdown_into_a_missing_folder_is_a_clear_error(tmp_path, capsys):
    target = tmp_path / "nosuch" / "g.md"
    assert cli.main(["pick", "--task", "chat", "--markdown", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # stopped before printing the recommendation
    assert captured.err == (f"python -m lab pick: --markdown: cannot write {target}: the folder {target.parent} "
                            "does not exist\n")
    assert not target.parent.exists()


def test_markdown_with_an_empty_name_is_a_clear_error(capsys):
    assert cli.main(["pick", "--task", "chat", "--markdown", ""]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ("python -m lab pick: --markdown: give a file name, e.g. guide.md "
                                                   "(got an empty one)\n")


def test_markdown_onto_a_folder_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["pick", "--task", "chat", "--markdown", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m lab pick: --markdown: {tmp_path} is a folder") and err.count("\n") == 1


def test_markdown_write_failure_is_one_line_and_exit_status_1(tmp_path, monkeypatch, capsys):
    def full_disk(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    target = tmp_path / "g.md"
    assert cli.main(["pick", "--task", "code", "--markdown", str(target)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # the guide is written before the recommendation is printed
    assert captured.err == f"python -m lab pick: --markdown: cannot write {target}: No space left on device\n"


def test_pick_names_flags_in_errors_from_recommend(capsys):
    """Values that reach recommend() (bypassing argparse's checks) still come back under the flag's name."""
    args = argparse.Namespace(task="chat", temperature=0.0, small_model=True, can_finetune=False, throughput=False,
                              memory_gb=-3.0, exclude=None, target="m", tensor_parallel_size=1, markdown=None,
                              json=False)
    assert pick.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m lab pick: --memory-gb must be") and "memory_headroom_gb" not in err
    args.memory_gb, args.tensor_parallel_size = None, 0
    assert pick.run(args) == 2
    assert capsys.readouterr().err.startswith("python -m lab pick: --tensor-parallel-size must be an integer from 1 "
                                              "to 1024")


@pytest.mark.parametrize("name", ["", " padded", "a\n```\n<script>alert(1)</script>\n```\nb", "tab\there"])
def test_pick_refuses_a_target_name_that_is_empty_padded_or_not_one_line(name, capsys):
    """A newline would close the guide's code fence and let the rest through as Markdown (or raw HTML)."""
    from lab.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["pick", "--task", "code", "--target", name])
    assert exit_info.value.code == 2
    assert "argument --target: must be a model name or path on one line" in capsys.readouterr().err


def test_every_renderer_refuses_a_target_name_on_two_lines():
    from lab.picker import recommend

    rec = recommend(task="code", temperature=0.0, has_small_same_family_model=True, can_finetune=False)
    for render in (rec.vllm_command, rec.sglang_command, rec.llamacpp_command, rec.hf_snippet, rec.to_markdown,
                   rec.summary):
        with pytest.raises(ValueError, match="target must be a model name or path on one line"):
            render("a\nb")
    assert "vllm serve org/model" in rec.vllm_command("org/model")


def test_target_has_mtp_flag(capsys):
    """--target-has-mtp is recommend's target_has_mtp: code for a team with nothing but such a target gets the
    target's MTP modules at N = 1 (1.8× against the code row's 1.5–2×); without the flag, prompt lookup."""
    assert cli.main(["pick", "--task", "code", "--no-small-model", "--target-has-mtp"]) == 0
    out = capsys.readouterr().out
    assert "Method: the target's MTP modules (mtp)" in out and "Draft tokens per step N: 1" in out
    assert "Expected speedup: 1.8× — source: DeepSeek-V3 technical report" in out
    assert "--speculative-algorithm NEXTN --speculative-num-steps 1" in out and "use_mtp=True" in out
    assert "target ships MTP modules: yes" in out
    assert cli.main(["pick", "--task", "code", "--no-small-model"]) == 0
    assert "Method: n-gram prompt lookup (ngram)" in capsys.readouterr().out
    parser = cli.build_parser()
    assert parser.parse_args(["pick", "--task", "chat"]).target_has_mtp is False
    assert parser.parse_args(["pick", "--task", "chat", "--target-has-mtp"]).target_has_mtp is True


def test_the_default_pick_does_not_import_torch():
    """`python -m lab pick --task chat` words lesson 12's measurements with lab.compare, not lab.metrics (which
    imports torch, seconds on a small machine); lab.metrics still re-exports the same function and LEVEL."""
    code = ("import io, sys, contextlib\nimport lab.picker\nassert 'torch' not in sys.modules, 'import lab.picker'\n"
            "from lab.cli import main\nwith contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    status = main(['pick', '--task', 'chat'])\n"
            "print(status, 'torch' in sys.modules, 'level with' in out.getvalue() or 'ahead of' in out.getvalue())\n")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert done.stdout.split() == ["0", "False", "True"], (done.stdout, done.stderr)
    import lab.compare
    import lab.metrics

    assert lab.metrics.compare_speedups is lab.compare.compare_speedups and lab.metrics.LEVEL == lab.compare.LEVEL


def test_out_of_range_values_are_refused_naming_the_flag():
    for args, message in ((["--tensor-parallel-size", "99999999999999999999"],
                           "--tensor-parallel-size must be an integer from 1 to 1024 (GPUs), got 99999999999999999999"),
                          (["--throughput", "--can-finetune", "--max-running-requests", "100000"],
                           "--max-running-requests must be an integer from 1 to 65536 (requests), got 100000"),
                          # SGLang serves nothing here (no EAGLE head under load): the value is checked all the same
                          (["--throughput", "--small-model", "--max-running-requests", "100000"],
                           "--max-running-requests must be an integer from 1 to 65536 (requests), got 100000")):
        result = run_cli("--task", "chat", *args)
        assert result.returncode == 2 and result.stdout == "", (args, result.stdout)
        assert result.stderr.startswith(f"python -m lab pick: {message}") and result.stderr.count("\n") == 1


def test_every_bad_temperature_gets_one_message_naming_the_range(capsys):
    """An instructor got three messages for one flag: above 2 no "error:" and the parsed 3.0, below 0 no upper
    limit, a word ">= 0" only. Now argparse refuses each with the OpenAI API's range and what was typed."""
    for typed in ("3", "2.5", "1e300", "-0.1", "abc", "nan"):
        for command in (["pick", "--task", "chat"], ["demo"]):  # demo took 1e9 until it shared pick's range
            line = error_line(run_bad([*command, "--temperature", typed], capsys))
            assert line == (f"python -m lab {command[0]}: error: argument --temperature: must be a number from 0 "
                            f"(greedy) to 2 (the OpenAI API's range), got '{typed}'"), line


def test_a_target_that_would_read_as_a_flag_is_refused(capsys):
    """`--target=-tp` rendered `vllm serve -tp`: the engine's parser reads it as an option."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["pick", "--task", "code", "--target=-tp"])
    assert exit_info.value.code == 2
    assert "argument --target: must be a model name or path on one line, not starting with '-'" in \
        capsys.readouterr().err
    rec = recommend("code", 0.0, False, False)
    for render in (rec.vllm_command, rec.sglang_command, rec.llamacpp_command, rec.summary):
        with pytest.raises(ValueError, match="not starting with '-'"):
            render("-tp")
    assert shlex.split(rec.vllm_command("./-tp"))[2] == "./-tp"


def test_max_running_requests_reaches_the_sglang_command(capsys):
    assert cli.main(["pick", "--task", "chat", "--can-finetune", "--throughput", "--max-running-requests", "96",
                     "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    argv = shlex.split(data["sglang_command"])
    assert argv[argv.index("--max-running-requests") + 1] == "96" and data["sglang_args"][-2:] == [
        "--max-running-requests", "96"]
    assert cli.main(["pick", "--task", "chat", "--can-finetune", "--throughput"]) == 0
    line = next(text for text in capsys.readouterr().out.splitlines() if "sglang.launch_server" in text)
    assert line.endswith("--max-running-requests 262")


def test_the_summary_says_what_a_seed_lesson_is():
    """A learner looked for "seed lesson 002" among lessons 00-14: the summary says where those come from."""
    from lab.picker import recommend

    text = recommend("chat", 0.0, True, False).summary()
    assert "seed lesson" in text.split("Revisit when:")[0]
    assert text.splitlines()[-1].startswith('("Seed lesson 000" and "seed lesson 002" are the two practitioner')
    guide = recommend("chat", 0.0, True, False).to_markdown()  # the decision guide too
    assert guide.splitlines()[-1].startswith('("Seed lesson 000" and "seed lesson 002" are the two practitioner')
    from tests.lab.picker.helpers import all_recommendations

    cited = 0
    for rec in all_recommendations():  # the note closes a guide exactly when the guide cites a seed lesson
        lines = rec.to_markdown().splitlines()
        noted = lines[-1].startswith('("Seed lesson 000"')
        assert noted == any("seed lesson" in line.lower() for line in (lines[:-1] if noted else lines)), rec.workload
        cited += noted
    assert 0 < cited < len(all_recommendations()), cited
