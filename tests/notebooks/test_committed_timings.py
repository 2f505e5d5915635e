"""The committed runs' timings were taken on a quiet machine: no committed output of a solution notebook, and no model
card, carries :data:`lab.load_meter.BUSY_WARNING`, the sentence a timing's load note ends with when other processes
kept more of the cores busy than :func:`lab.load_meter.busy_threshold` allows. Learners read those numbers as what
the method does; a busy machine's numbers say what the machine was doing. Re-run the notebook
(``tools/run_notebooks.py``) or the card's measurement on a quiet machine."""
import json
from pathlib import Path

import pytest

from lab.load_meter import BUSY_WARNING, LoadMeter, thread_advice

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "solutions").glob("*.ipynb"))
CARDS = sorted((ROOT / "lab" / "assets").rglob("README.md"))


def _folded(text):
    return " ".join(text.split())


def busy_cells(notebook: dict) -> list:
    """Indices of the code cells whose outputs (streams, text/plain, text/markdown, text/html) hold the warning."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        for out in cell.get("outputs", []):
            texts = ["".join(out.get("text", ""))]
            texts += ["".join(value) for value in out.get("data", {}).values() if isinstance(value, (str, list))]
            if any(BUSY_WARNING in _folded(t) for t in texts):
                found.append(index)
                break
    return found


def _busy_note():
    meter = LoadMeter()
    meter.seconds, meter.other_cores, meter.load_average, meter.busy = 10.0, 1.6, (5.1, 6.0), True
    return meter.note()


def test_a_busy_note_is_found_in_a_stream_and_in_a_markdown_table():
    note = _busy_note()
    assert note.endswith(BUSY_WARNING + thread_advice())
    notebook = {"cells": [
        {"cell_type": "markdown", "source": "prose may name the " + BUSY_WARNING},   # prose is not an output
        {"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout", "text": ["18.2 tokens/s\n"]}]},
        {"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout",
                                           "text": [note[:60], note[60:] + "\n"]}]},
        {"cell_type": "code", "outputs": [{"output_type": "display_data",
                                           "data": {"text/markdown": "| a | b |\n\n" + note.replace("; ", ";\n")}}]},
    ]}
    assert busy_cells(notebook) == [2, 3]
    quiet = LoadMeter()
    quiet.seconds, quiet.other_cores, quiet.load_average, quiet.busy = 10.0, 0.01, (1.0, 1.1), False
    assert BUSY_WARNING not in quiet.note()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_committed_output_was_timed_on_a_busy_machine(path):
    cells = busy_cells(json.loads(path.read_text()))
    assert not cells, f"{path.name}: cells {cells} were timed on a busy machine; re-run it on a quiet one"


@pytest.mark.parametrize("path", CARDS, ids=lambda p: str(p.parent.relative_to(ROOT / "lab" / "assets")))
def test_no_model_card_quotes_a_busy_machines_timing(path):
    assert BUSY_WARNING not in _folded(path.read_text()), (
        f"{path.relative_to(ROOT)} quotes timings taken on a busy machine; re-measure on a quiet one")
