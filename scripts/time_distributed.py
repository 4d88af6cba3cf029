"""Measured strong scaling of the distributed product and CG, one GPU per rank, next to the
model's prediction (sparsegpu.bench.scaling).

    mpirun -n 1 python3 scripts/time_distributed.py
    mpirun -n 2 -x NCCL_NVLS_ENABLE=0 python3 scripts/time_distributed.py

Rank 0 builds each matrix (:data:`DEFAULT_NAMES`, or those named on the command line, as
:func:`sparsegpu.datasets.matrix` reads them, e.g. ``poisson3d:160 stencil27:120 rmat:21``) and prints
one line per matrix: the median time of ``A @ x`` (the halo exchange included) and, for the
symmetric positive definite ones, of one CG iteration (a fixed count, no stopping test met),
the slowest rank's. Run it at 1 and at 2 ranks and divide.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's package

from sparsegpu import datasets
from sparsegpu._backend import resolve_backend
from sparsegpu.bench.scaling import predict
from sparsegpu.bench.timing import synchronize
from sparsegpu.distributed import (
    DistributedCSR,
    DistributedVector,
    cg,
    use_local_device,
    world,
)

#: The acceptance's matrices: strong scaling of SpMV on the first three, CG on the 16M-unknown
#: Poisson matrix, weak scaling by comparing poisson2d:2121 (4.5M rows) at one rank with
#: poisson2d:3000 (9M rows) at two.
DEFAULT_NAMES = ("poisson2d:3000", "stencil27:150", "rmat:22", "poisson2d:4000", "poisson2d:2121")
SYMMETRIC_POSITIVE_DEFINITE = ("poisson2d", "poisson3d", "stencil27")
REPEAT, CG_ITERATIONS = 30, 50


def matrix_from_name(name: str):
    """The matrix a name like ``poisson2d:3000`` or ``rmat:22:8`` stands for
    (:func:`sparsegpu.datasets.matrix`)."""
    try:
        return datasets.matrix(name)
    except (ValueError, OSError) as exc:
        raise SystemExit(f"unknown matrix {name!r}: {exc}") from None


def median_seconds(comm, call, backend: str) -> float:
    """Median over REPEAT calls of the slowest rank's time (each call synchronised)."""
    samples = []
    for _ in range(REPEAT + 2):
        comm.Barrier()
        start = time.perf_counter()
        call()
        synchronize(backend)
        samples.append(comm.allreduce(time.perf_counter() - start, op=max_op()))
    return statistics.median(samples[2:])


def max_op():
    from mpi4py import MPI

    return MPI.MAX


def main() -> int:
    comm = world()
    backend = resolve_backend(None)
    if backend == "gpu":
        use_local_device(comm)
    ranks, root = comm.Get_size(), comm.Get_rank() == 0
    names = sys.argv[1:] or list(DEFAULT_NAMES)
    for name in names:
        S = matrix_from_name(name) if root else None
        A = DistributedCSR.from_scipy(S, comm, backend=backend)
        x = DistributedVector.from_global(np.ones(A.shape[1]), A.col_partition, backend=backend)
        line = f"{name} ({A.shape[0]:,} rows, {A.nnz:,} nnz) ranks {ranks}: A @ x "
        product = median_seconds(comm, lambda: A @ x, backend)
        line += f"{product * 1e3:.3f} ms"
        if name.split(":")[0] in SYMMETRIC_POSITIVE_DEFINITE:
            solve = median_seconds(comm, lambda: cg(A, x, rtol=0.0, atol=0.0, maxiter=CG_ITERATIONS), backend)
            line += f", CG {solve / CG_ITERATIONS * 1e3:.3f} ms per iteration"
        if root:
            if ranks == 1:
                line += f"; model at 2 ranks {predict(S, 2, spmv_seconds=product)['speedup']:.2f}x"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
