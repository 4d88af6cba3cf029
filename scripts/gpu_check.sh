#!/usr/bin/env bash
# The whole GPU check in one command, on a machine with a CUDA GPU and CuPy:
#   scripts/gpu_check.sh OUTDIR [STEP ...]      STEP: tests sanitizer bench targets transfer graphs
#                                               analytics products distributed asv
#                                               (default: all)
# tests: the test suite with the GPU tests (four pytest processes); sanitizer: compute-sanitizer memcheck and racecheck
# over a small run of every kernel family; bench: the comparison command over all real matrices
# and the generated families (medium); targets: the issues' performance targets (large
# matrices, primitives at 2^28, CG, call overhead); transfer: streamed uploads and out-of-core
# SpMV on a 2.48 GB matrix; graphs: the csgraph functions against SciPy, a hand-written CuPy
# baseline and GraphBLAS on the large graphs; analytics: PageRank, triangles, betweenness, k-core,
# Louvain and Jaccard against NetworkX, GraphBLAS, SciPy and CuPy, and the NetworkX backend against
# NetworkX; products: SpMM and SpGEMM against cupyx; distributed: the distributed tests under
# mpirun, one rank per GPU (two GPUs or more; skipped with one), then scripts/time_distributed.py at
# one and two ranks; asv: the asv suite, --quick.
# Logs go to OUTDIR; a summary table is printed last. Exit status 1 if any step failed.
set -u -o pipefail
out=$(realpath -m "${1:?usage: scripts/gpu_check.sh OUTDIR [STEP ...]}")
shift
steps=${*:-tests sanitizer bench targets transfer graphs analytics products distributed asv}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export SPARSEGPU_MATRICES="${SPARSEGPU_MATRICES:-$PWD/.shared/matrices}"
export SPARSEGPU_CACHE="${SPARSEGPU_CACHE:-/tmp/sparsegpu-cache}"
summary="$out/summary.txt"
: >"$summary"
step() {  # step NAME COMMAND...: run, log to OUTDIR/NAME.log, record pass/fail and seconds
    local name=$1; shift
    local start=$SECONDS
    "$@" >"$out/$name.log" 2>&1
    local rc=$?
    printf '%-10s %-5s %4ds  %s\n' "$name" "$([ $rc -eq 0 ] && echo pass || echo FAIL)" $((SECONDS - start)) \
        "$(grep -v '^\s*$' "$out/$name.log" | tail -n 1 | cut -c1-100)" >>"$summary"
}
wants() { [[ " $steps " == *" $1 "* ]]; }

# From a source tree: build the optional C helper (streaming-store packing) next to the package.
python3 setup.py -q build_ext --inplace >"$out/build_ext.log" 2>&1 || echo "build_ext failed: packing falls back to numpy.copyto" >>"$summary"
# The optional baselines (asv, python-graphblas, networkx) from wheels, where the checkout has them.
if [ -d .shared/wheels ]; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/extra-site .shared/wheels/*.whl >/dev/null 2>&1
    export PYTHONPATH="$PYTHONPATH:/tmp/extra-site"
fi
# NetworkX finds the backend through its entry points: the source tree's, without installing it.
info=/tmp/extra-site/sparsegpu_nx_entry_points-0.dist-info
mkdir -p "$info"
printf 'Metadata-Version: 2.1\nName: sparsegpu-nx-entry-points\nVersion: 0\n' >"$info/METADATA"
printf '[networkx.backends]\nsparsegpu = sparsegpu.nx:backend_interface\n\n[networkx.backend_info]\nsparsegpu = _sparsegpu_nx_info:get_info\n' >"$info/entry_points.txt"
[[ ":$PYTHONPATH:" == *":/tmp/extra-site:"* ]] || export PYTHONPATH="$PYTHONPATH:/tmp/extra-site"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/device.txt" 2>&1
# The suite in four pytest processes sharing the GPU (one process takes over ten minutes): the
# largest folders alone, everything else (doctests included) in the last group.
suite() {
    local groups=("tests/formats" "tests/csgraph tests/nx" "tests/primitives tests/linalg tests/convert")
    local rest=(sparsegpu) path pids=() status=0 i
    for path in tests/*; do
        [[ " ${groups[*]} " == *" $path "* || "$path" == tests/fuzz ]] && continue  # fuzz: via tests/test_fuzz*.py
        [[ ( -d "$path" && "$path" != tests/__pycache__ ) || "$path" == tests/test_*.py ]] && rest+=("$path")
    done
    groups+=("${rest[*]}")
    for i in "${!groups[@]}"; do
        # shellcheck disable=SC2086  # each group is a list of paths
        python3 -m pytest -q -rfE -p no:cacheprovider --maxfail=40 ${groups[$i]} >"$out/tests.$i.log" 2>&1 &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || status=1
        echo "group $i (${groups[$i]}): $(tail -n 1 "$out/tests.$i.log")"
    done
    return $status
}
wants tests && step tests suite
if wants sanitizer; then
    step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 python3 scripts/sanitizer_smoke.py
    # CuPy's own nonzero kernel reports shared-memory hazard warnings; only sparsegpu's kernels are checked.
    step racecheck compute-sanitizer --tool racecheck --kernel-name-exclude kns=cupy_ --error-exitcode 1 python3 scripts/sanitizer_smoke.py
fi
wants bench && step bench python3 -m sparsegpu.bench --size medium --out "$out/bench"
wants targets && step targets python3 -m sparsegpu.bench --matrices targets --primitives --cg --python-overhead --first-call --out "$out/targets"
wants transfer && step transfer python3 -m sparsegpu.bench --no-spmv --transfer --size large --out "$out/transfer"
wants graphs && step graphs python3 -m sparsegpu.bench --no-spmv --graphs --size large --out "$out/graphs"
wants analytics && step analytics python3 -m sparsegpu.bench --no-spmv --analytics --networkx-backend --size large \
    --out "$out/analytics"
wants products && step products python3 -m sparsegpu.bench --spmm --spgemm --size large --formats csr,ell,sell \
    --out "$out/products"
gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
if wants distributed && [ "$gpus" -ge 2 ]; then
    export NCCL_NVLS_ENABLE=0  # NVLink multicast off
    step distributed mpirun --allow-run-as-root -n "$gpus" -x NCCL_NVLS_ENABLE -x PYTHONPATH -x SPARSEGPU_MATRICES \
        python3 -m pytest -q -p no:cacheprovider tests/distributed
    # Measured scaling: the acceptance's matrices at one rank, then at two (docs/distributed.md).
    scaling() { for ranks in 1 2; do mpirun --allow-run-as-root -n $ranks -x NCCL_NVLS_ENABLE -x PYTHONPATH \
        python3 scripts/time_distributed.py || return 1; done; }
    step scaling scaling
fi
if wants asv; then
    export ASV_PYTHONPATH="$PYTHONPATH"
    asv_run() { cd asv_benchmarks && python3 -m asv machine --yes && python3 -m asv run -E existing:same --quick --show-stderr; }
    step asv asv_run
fi
echo "== $(cat "$out/device.txt")"
cat "$summary"
! grep -q FAIL "$summary"
