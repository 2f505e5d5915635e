"""Execute solution notebooks in place (the committed outputs), then regenerate lessons/ and check that the
prose still quotes the new outputs (tests/notebooks/test_lesson_claims.py).

Widget state is not stored: plotly's FigureWidget state carries the whole plotly.js bundle (about 5 MB per
figure), and the text/HTML fallbacks are what nbval compares anyway.

Usage: ``python tools/run_notebooks.py [solutions/NN_name.ipynb ...]`` (default: every solution notebook).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def run(path: Path, timeout: int = 600) -> float:
    """Execute one notebook in its own folder; returns the wall time in seconds."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    paths = [Path(a).resolve() for a in argv] or sorted((ROOT / "solutions").glob("*.ipynb"))
    for path in paths:
        print(f"{path.name}: {run(path):.1f} s", flush=True)
    sys.path.insert(0, str(ROOT / "tools"))
    import make_lessons

    status = make_lessons.main([])
    # The prose quotes numbers from the committed run; say at once which sentences the new run has left behind.
    claims = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             str(ROOT / "tests" / "notebooks" / "test_lesson_claims.py")], cwd=ROOT)
    if claims.returncode:
        print("The lessons' prose no longer matches these outputs: update the sentences named above.")
    return status or claims.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
