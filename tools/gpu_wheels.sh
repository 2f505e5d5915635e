#!/usr/bin/env bash
# Fetches into .whl/ (git-ignored) the wheels that tools/gpu_check.sh needs on a GPU machine that has torch,
# transformers, tokenizers, safetensors, numpy, scipy, tqdm and pytest but no notebook stack and no network (the
# lent H200 image: Python 3.12). Versions are those of this checkout's .venv, so the GPU runs what CI runs.
#   bash tools/gpu_wheels.sh              (here, with network; PYVER=3.11 fetches for another Python)
# Then, on the GPU machine, from the repository root (.whl travels with the working tree):
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
#     && PYTHONPATH=/tmp/site bash tools/gpu_check.sh
# Left out on purpose: debugpy and jedi (ipykernel and IPython run without them; together 10 MB).
set -euo pipefail
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
PYVER=${PYVER:-3.12}
NAMES="plotly narwhals anywidget psygnal ipywidgets widgetsnbextension jupyterlab_widgets comm nbval nbformat nbclient
fastjsonschema jsonschema jsonschema-specifications referencing rpds-py jupyter_client jupyter_core ipykernel ipython
ipython_pygments_lexers traitlets pyzmq tornado matplotlib-inline prompt_toolkit wcwidth pexpect ptyprocess stack_data
executing asttokens pure_eval platformdirs nest-asyncio2"
norm() { tr 'A-Z_.' 'a-z--'; }
wanted=$(for n in $NAMES; do echo "$n"; done | norm | sort)
# name==version as installed here, for each wanted name
pins=$("$PY" -m pip freeze 2>/dev/null | while IFS='=' read -r name _ version; do
    key=$(echo "$name" | norm)
    grep -qx "$key" <<<"$wanted" && echo "$name==$version"
done)
missing=$(comm -23 <(echo "$wanted") <(echo "$pins" | sed 's/==.*//' | norm | sort))
if [ -n "$missing" ]; then
    echo "not installed in $PY's environment (run make install first): $missing" >&2
    exit 1
fi
rm -rf .whl && mkdir .whl
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 \
    --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d .whl $pins
echo "$(ls .whl | wc -l) wheels, $(du -sh .whl | cut -f1) in .whl/"
