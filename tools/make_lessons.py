"""Generate lessons/ from solutions/ (the master copies).

Every code cell region between a line ``### BEGIN SOLUTION`` and a line ``### END SOLUTION`` is replaced by a
stub at the same indentation (``# YOUR CODE HERE`` + ``raise NotImplementedError``); the checks in ``lab.exercises``
turn that into a "not solved yet" message, so a lesson still runs top to bottom. Every output is cleared: the
learner runs the lesson and sees results from their own machine and their own code. The solutions' first-line
``# NBVAL_IGNORE_OUTPUT`` markers are dropped too.

Usage: ``python tools/make_lessons.py`` (write) or ``python tools/make_lessons.py --check`` (exit 1 on drift);
``--with-exercises`` prints the lessons that hold an exercise stub, one path per line: ``make notebooks`` runs only
those under nbval a second time, since a lesson without one has the same code as its solution, which already ran.
With ``--pair NAME --out DIR`` it writes those lessons to DIR instead, their one ``PAIR = "smollm2-135m"`` line set to
NAME, and prints the new paths: ``make notebooks`` runs the lessons on the Shakespeare pair, which exercises the
stubs and their fallbacks and the lessons' promise that ``PAIR = "shakespeare"`` works, in about 2 minutes instead of
the 10 that running the real pair's code again would take (the solutions pass ran it).
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN = re.compile(r"^(\s*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*### END SOLUTION\s*$")
NBVAL_MARK = "# NBVAL_IGNORE_OUTPUT\n"
"""The first line of a solution cell whose output nbval must not compare (timings, live widgets); lessons have no
outputs to compare and run under ``--nbval-lax``, so it is left out of them: a learner would only wonder what it
means."""


def strip_solutions(source: str) -> tuple[str, bool]:
    """Return ``(lesson_source, had_solution)`` for one cell's source text; raise ValueError on an open region."""
    out, inside, found = [], False, False
    for line in source.splitlines(keepends=True):
        if not inside:
            m = BEGIN.match(line)
            if m:
                inside, found = True, True
                indent = m.group(1)
                out.append(f"{indent}# YOUR CODE HERE\n{indent}raise NotImplementedError\n")
            else:
                out.append(line)
        elif END.match(line):
            inside = False
    if inside:
        raise ValueError("### BEGIN SOLUTION without ### END SOLUTION")
    return "".join(out), found


def lesson_from_solution(nb: dict) -> dict:
    """The learner notebook for one solution notebook (pure function of its JSON)."""
    nb = copy.deepcopy(nb)
    nb["metadata"].pop("widgets", None)
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        cell["source"] = strip_solutions(src)[0]
        if cell["source"].startswith(NBVAL_MARK):  # for the solutions' nbval run only; lessons run --nbval-lax
            cell["source"] = cell["source"][len(NBVAL_MARK):]
        cell["outputs"] = []
        cell["execution_count"] = None
    return nb


def has_exercise(nb: dict) -> bool:
    """Whether any code cell of a solution notebook holds a ``### BEGIN SOLUTION`` region."""
    return any(strip_solutions("".join(c["source"]) if isinstance(c["source"], list) else c["source"])[1]
               for c in nb["cells"] if c["cell_type"] == "code")


PAIR_LINE = 'PAIR = "smollm2-135m"'


def with_pair(nb: dict, pair: str) -> dict:
    """``nb`` with its ``PAIR = "smollm2-135m"`` line (at most one, in a code cell) naming ``pair`` instead; a notebook
    without one (no model, or the picker) is returned unchanged. Raises ValueError when the line appears twice."""
    nb = copy.deepcopy(nb)
    cells = [c for c in nb["cells"] if c["cell_type"] == "code" and PAIR_LINE in "".join(c["source"])]
    if len(cells) > 1 or any("".join(c["source"]).count(PAIR_LINE) > 1 for c in cells):
        raise ValueError(f"more than one {PAIR_LINE!r} line: the pair must be named in one place")
    for cell in cells:
        cell["source"] = "".join(cell["source"]).replace(PAIR_LINE, f'PAIR = "{pair}"')
    return nb


def render(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if lessons/ differ from the generated ones")
    parser.add_argument("--with-exercises", action="store_true",
                        help="print the lessons/ paths whose solution holds an exercise, and write nothing")
    parser.add_argument("--pair", help="with --with-exercises and --out: write those lessons with PAIR set to this")
    parser.add_argument("--out", type=Path, help="with --pair: the folder to write them to (made if missing)")
    args = parser.parse_args(argv)
    if (args.pair is None) != (args.out is None) or (args.pair and not args.with_exercises):
        parser.error("--pair and --out go together, with --with-exercises")
    drift = []
    solutions = sorted((ROOT / "solutions").glob("*.ipynb"))
    if args.with_exercises:
        for path in solutions:
            nb = json.loads(path.read_text(encoding="utf-8"))
            if not has_exercise(nb):
                continue
            if args.pair:
                args.out.mkdir(parents=True, exist_ok=True)
                target = args.out / path.name
                target.write_text(render(with_pair(lesson_from_solution(nb), args.pair)), encoding="utf-8")
                print(target)
            else:
                print(f"lessons/{path.name}")
        return 0
    expected = {p.name for p in solutions}
    for path in solutions:
        text = render(lesson_from_solution(json.loads(path.read_text(encoding="utf-8"))))
        target = ROOT / "lessons" / path.name
        if args.check:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                drift.append(path.name)
        else:
            target.parent.mkdir(exist_ok=True)
            target.write_text(text, encoding="utf-8")
    extra = sorted(p.name for p in (ROOT / "lessons").glob("*.ipynb") if p.name not in expected)
    if args.check and (drift or extra):
        print(f"lessons/ drifted from solutions/: {drift + extra}; run `make lessons`", file=sys.stderr)
        return 1
    if not args.check:
        for name in extra:
            (ROOT / "lessons" / name).unlink()
        removed = f"; removed {len(extra)} without a solution ({', '.join(extra)})" if extra else ""
        print(f"lessons/: wrote {len(solutions)} lessons from solutions/{removed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
