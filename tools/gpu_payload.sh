#!/usr/bin/env bash
# Splits what tools/gpu_check.sh needs on a GPU machine into parts that a remote-run tool can carry one per call,
# when each call carries at most 64 MiB with the checkout: the checkout alone is about 70 MiB, most of it the
# committed weights (lab/assets/**/model.safetensors), and tools/gpu_wheels.sh's wheels are about 107 MiB.
#   bash tools/gpu_payload.sh prepare    run tools/gpu_wheels.sh first; then:
#     - takes the weights out of git's index (the files stay on disk; nothing is committed) and ignores them and
#       .gpu/ in .git/info/exclude, so that the checkout that travels is about 5 MiB;
#     - writes one tar of .whl/ and the weights, split into .gpu/1, .gpu/2, ... (each part fits a call beside the
#       checkout), and .gpu/<last>/final.sh.
#   Then, on a machine kept warm between calls (nothing it holds survives its release), one call per part:
#     carry [".gpu/1"]:  mkdir -p /root/stash && cp .gpu/1/chunk.* /root/stash/      (and so on for each part)
#     last part:         BUDGET=500 bash .gpu/<last>/final.sh      (reassembles, checks the SHA-256, installs the
#                        wheels to /tmp/site, runs tools/gpu_check.sh with its step logs in $OUT/steps.tgz)
#   bash tools/gpu_payload.sh restore    puts the weights back in the index and drops the exclude lines. Run it as
#     soon as the calls are done: until then `git status` shows the weights as deleted, and a commit would delete them.
set -euo pipefail
cd "$(dirname "$0")/.."
EXCLUDE=.git/info/exclude
MARK="# tools/gpu_payload.sh"

restore() {
    git reset -q -- lab/assets
    [ ! -f "$EXCLUDE" ] || sed -i "\|^$MARK begin\$|,\|^$MARK end\$|d" "$EXCLUDE"
    rm -rf .gpu
    echo "weights back in the index; git status:"
    git status --short | head -5
}

prepare() {
    [ -d .whl ] || { echo "no .whl/: run tools/gpu_wheels.sh first" >&2; exit 1; }
    if ! git diff --cached --quiet; then
        echo "the index has staged changes: commit or unstage them first" >&2
        exit 1
    fi
    mapfile -t weights < <(git ls-files 'lab/assets/**model.safetensors')
    mkdir -p .git/info
    printf '%s begin\n/.gpu/\n/lab/assets/**/model.safetensors\n%s end\n' "$MARK" "$MARK" >> "$EXCLUDE"
    git rm -q --cached "${weights[@]}"
    local tree
    tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s | awk '{s += $1} END {print s}')
    local part=$(( (63 << 20) - tree - (1 << 19) ))  # a part and the checkout fit in 64 MiB, with room to spare
    rm -rf .gpu && mkdir .gpu
    tar cf .gpu/payload.tar .whl "${weights[@]}"
    local sum
    sum=$(sha256sum .gpu/payload.tar | cut -d' ' -f1)
    (cd .gpu && split -b "$part" -d payload.tar chunk. && rm payload.tar)
    local n=0
    for chunk in .gpu/chunk.*; do n=$((n + 1)); mkdir -p ".gpu/$n"; mv "$chunk" ".gpu/$n/"; done
    cat > ".gpu/$n/final.sh" <<EOF
#!/usr/bin/env bash
# The last call: reassemble the parts carried before (in /root/stash), install the wheels, run tools/gpu_check.sh.
set -o pipefail
mkdir -p /root/stash && cp .gpu/$n/chunk.* /root/stash/ || exit 2
cat /root/stash/chunk.* > /root/payload.tar || exit 3
echo "$sum  /root/payload.tar" | sha256sum -c || exit 4
tar xf /root/payload.tar || exit 5
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \\
    || exit 6
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
mkdir -p /root/gpulogs
PY=python3 LOG_DIR=/root/gpulogs timeout "\${BUDGET:-500}" bash tools/gpu_check.sh > "\$OUT/gpu_check.log" 2>&1
rc=\$?
tar czf "\$OUT/steps.tgz" -C /root gpulogs
tail -c 9000 "\$OUT/gpu_check.log"
echo "gpu_check exit \$rc"
exit \$rc
EOF
    echo "checkout that travels: $((tree >> 20)) MiB; $n parts of at most $((part >> 20)) MiB in .gpu/1..$n"
    echo "weights are out of the index now: run 'bash tools/gpu_payload.sh restore' when the calls are done"
}

case "${1:-}" in
    prepare) prepare ;;
    restore) restore ;;
    *) echo "usage: bash tools/gpu_payload.sh prepare|restore" >&2; exit 2 ;;
esac
