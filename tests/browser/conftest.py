"""Browser tests run only when asked for by path (``make browser`` runs ``pytest tests/browser``).

They start JupyterLab, Voila and Chromium and take about a minute, so ``pytest tests`` / ``make unit`` (whose
``testpaths`` include this folder) must not collect them a second time or get slower: files here are ignored unless
this folder, or a file in it, is named on the command line.
"""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _named_on_command_line(config) -> bool:
    for arg in config.args:
        path = (Path(config.invocation_params.dir) / arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    if collection_path.name != "conftest.py" and not _named_on_command_line(config):
        return True
    return None
