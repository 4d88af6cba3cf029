#!/usr/bin/env bash
# The whole GPU check in one command, for the lent GPU machine (see ../shared/gpu/README.md):
#   scripts/gpu_check.sh OUTDIR [pytest args...]
# 1. the test suite on the GPU (GPU tests included), 2. compute-sanitizer memcheck and
# racecheck over a small run of every kernel family, 3. the comparison benchmarks,
# 4. asv --quick. Logs go to OUTDIR; a short summary table is printed last.
set -u -o pipefail
out=$(realpath -m "${1:?usage: scripts/gpu_check.sh OUTDIR [pytest args...]}")
shift
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export SPARSEGPU_MATRICES="${SPARSEGPU_MATRICES:-$PWD/.shared/matrices}"
summary="$out/summary.txt"
: >"$summary"
step() {  # step NAME COMMAND...: run, log to OUTDIR/NAME.log, record pass/fail and seconds
    local name=$1; shift
    local start=$SECONDS
    "$@" >"$out/$name.log" 2>&1
    local rc=$?
    printf '%-12s %-5s %4ds  %s\n' "$name" "$([ $rc -eq 0 ] && echo pass || echo FAIL)" $((SECONDS - start)) \
        "$(tail -n 1 "$out/$name.log" | cut -c1-90)" >>"$summary"
    return 0
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/device.txt" 2>&1
step pytest python3 -m pytest -q -p no:cacheprovider -x --maxfail=20 "$@"
step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 python3 scripts/sanitizer_smoke.py
step racecheck compute-sanitizer --tool racecheck --error-exitcode 1 python3 scripts/sanitizer_smoke.py
if [ -f sparsegpu/bench/__main__.py ]; then
    step bench python3 -m sparsegpu.bench --matrices all --size medium --out "$out"
fi
if [ -d .shared/wheels ] && [ -f asv_benchmarks/asv.conf.json ]; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/asv-site .shared/wheels/*.whl >/dev/null 2>&1
    (cd asv_benchmarks && PYTHONPATH="/tmp/asv-site:$PYTHONPATH" step asv python3 -m asv run -E existing:same --quick --show-stderr)
fi
echo "== $(cat "$out/device.txt")"
cat "$summary"
! grep -q FAIL "$summary"
