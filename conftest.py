"""pytest configuration for the notebook runs (nbval) over solutions/ and lessons/.

Outputs that legitimately vary between runs or renderers are not compared: HTML (widget fallbacks, tables),
plotly figure JSON, widget views and stderr (warnings, progress bars). Cells that print timings or model text
carry ``# NBVAL_IGNORE_OUTPUT`` themselves.
"""
import os

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("PYTHONWARNINGS", "ignore")

SKIP = ("text/html", "application/vnd.plotly.v1+json", "application/vnd.jupyter.widget-view+json",
        "application/javascript", "stderr")


def pytest_collectstart(collector):
    if getattr(collector, "path", None) is not None and collector.path.suffix == ".ipynb":
        collector.skip_compare += SKIP
