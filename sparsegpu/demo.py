"""The main job in one command: ``python -m sparsegpu.demo [--matrix NAME|PATH]``.

On a real matrix (bcsstk16 from shared/matrices by default; a generated 2-D Poisson problem
when those are not found): the advisor's report, conversion to every format with each one's
SpMV checked against SciPy and timed, and a preconditioned CG solve checked by its true
residual. Runs on the GPU when one is present, on the CPU backend otherwise.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.io
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets, linalg


def _synchronize() -> None:
    if sparsegpu.backend() == "gpu":
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def median_seconds(fn: Callable[[], Any], repeat: int = 20) -> float:
    """Median wall time of ``fn`` after one warm-up call, synchronising the device."""
    fn()
    times = []
    for _ in range(repeat):
        _synchronize()
        start = time.perf_counter()
        fn()
        _synchronize()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def load(spec: str | None) -> tuple[str, sp.csr_array]:
    if spec and Path(spec).is_file():
        return Path(spec).name, sp.csr_array(scipy.io.mmread(spec, spmatrix=False))
    if spec or datasets.matrix_dir() is not None:
        name = spec or "bcsstk16"
        return name, datasets.load_matrix(name)
    return "poisson2d(300)", datasets.generate("poisson2d", "small")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparsegpu.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--matrix", help="a real matrix's name (see shared/matrices) or a Matrix Market path")
    parser.add_argument("--backend", choices=["cpu", "gpu"], help="default: the GPU when present")
    args = parser.parse_args(argv)
    backend = args.backend or sparsegpu.backend()
    name, S = load(args.matrix)
    print(f"sparsegpu {sparsegpu.__version__} on the {backend.upper()} backend; matrix {name}: "
          f"{S.shape[0]}x{S.shape[1]}, {S.nnz} nonzeros\n")

    csr = sparsegpu.CSR.from_scipy(S, backend=backend)
    advice = sparsegpu.advise(csr)
    print(repr(advice), "\n")

    rng = np.random.default_rng(0)
    x = rng.standard_normal(S.shape[1]).astype(csr.dtype)
    want = S @ x
    scale = np.abs(S) @ np.abs(x)
    print(f"{'format':8s}{'convert ms':>12s}{'A@x us':>10s}{'max rel err':>13s}")
    for fmt in sorted(sparsegpu.SparseMatrix.formats):
        params = advice.estimates[fmt].params if fmt in advice.estimates else {}
        try:
            convert_s = median_seconds(lambda: csr.asformat(fmt, **params), repeat=3)
            A = csr.asformat(fmt, **params)
        except ValueError as exc:  # a format may refuse the matrix (ELL's fill guard)
            print(f"{fmt:8s}  refused: {exc}")
            continue
        xd = A._xp.asarray(x)
        err = float(np.max(np.abs(np.asarray(_host(A @ xd)) - want) / np.maximum(scale, np.finfo(float).tiny)))
        spmv_s = median_seconds(lambda: A @ xd)
        mark = " <- advised" if fmt == advice.format else ""
        print(f"{fmt:8s}{convert_s * 1e3:12.3f}{spmv_s * 1e6:10.1f}{err:13.1e}{mark}")
    scipy_s = median_seconds(lambda: S @ x)
    print(f"{'scipy':8s}{'':12s}{scipy_s * 1e6:10.1f}\n")

    square = S.shape[0] == S.shape[1]
    if square:
        symmetric = abs(S - S.T).max() <= 1e-12 * abs(S).max() if S.nnz else True
        method = "cg" if symmetric and (S.diagonal() > 0).all() else "gmres"
        A = csr.asformat(advice.format, **advice.params)
        b = S @ np.ones(S.shape[1])
        start = time.perf_counter()
        result = linalg.solve(A, b, method=method, rtol=1e-8, M=linalg.jacobi(A) if (S.diagonal() != 0).all() else None,
                              maxiter=20 * S.shape[0])
        elapsed = time.perf_counter() - start
        residual = np.linalg.norm(b - S @ result.x) / np.linalg.norm(b)
        print(f"solve A x = b with {method.upper()} + Jacobi on {advice.format.upper()}: info {result.info}, "
              f"{result.iterations} iterations, {elapsed * 1e3:.1f} ms, true relative residual {residual:.1e}")
        return 0 if result.info == 0 and residual <= 1e-7 else 1
    return 0


def _host(a: Any) -> np.ndarray:
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


if __name__ == "__main__":
    raise SystemExit(main())
