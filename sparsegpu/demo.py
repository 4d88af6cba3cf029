"""The main job in one command: ``python -m sparsegpu.demo [--matrix SPEC] [--backend cpu|gpu]``.

On one matrix: the advisor's report, conversion to every format with each one's SpMV checked
against SciPy and timed, and a preconditioned solve checked by its true residual. Runs on the
GPU when one is present, on the CPU backend otherwise. The matrix is ``bcsstk16`` from the
folder of real matrices (``$SPARSEGPU_MATRICES``) when it is there, else a generated 2-D
Poisson problem; the first line of the output names the matrix and why it was chosen.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.io
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets, linalg

#: The real matrix the demo uses when the folder of real matrices is found.
DEFAULT_MATRIX = "bcsstk16"
#: The generated family and preset used when no real matrices are found.
FALLBACK = ("poisson2d", "small")
MATRIX_SUFFIXES = (".mtx", ".mtx.gz")
#: Restart cycles the demo's GMRES may take.
GMRES_CYCLES = 200


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


def accepted() -> str:
    """One line saying what ``--matrix`` accepts."""
    return (f"accepted: a real matrix name (from ${datasets.MATRICES_ENV}), a Matrix Market file "
            f"(.mtx or .mtx.gz), or FAMILY[:SIZE] with FAMILY one of {', '.join(datasets.GENERATED)} "
            f"and SIZE one of {', '.join(datasets.SIZES)} (default small)")


def _matrix_folder() -> Path | None:
    """The folder of real matrices: the one datasets finds, else ``$SPARSEGPU_MATRICES`` as given."""
    found = datasets.matrix_dir()
    if found is not None:
        return found
    given = os.environ.get(datasets.MATRICES_ENV, "")
    return Path(given) if given and Path(given).is_dir() else None


def _real_matrix_path(name: str) -> Path | None:
    folder = _matrix_folder()
    if folder is None:
        return None
    for suffix in (".mtx.gz", ".mtx"):
        if (folder / f"{name}{suffix}").is_file():
            return folder / f"{name}{suffix}"
    return None


def _read_file(path: Path) -> sp.csr_array:
    try:
        return sp.csr_array(scipy.io.mmread(str(path), spmatrix=False))
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"cannot read {path} as Matrix Market: {exc}") from None


def _generated(spec: str) -> tuple[str, sp.csr_array]:
    name, _, size = spec.partition(":")
    size = size or "small"
    if size not in datasets.SIZES:
        raise ValueError(f"unknown size {size!r} in {spec!r}; {accepted()}")
    family = datasets.GENERATED[name]
    preset = ", ".join(f"{key}={value}" for key, value in family.presets[size].items())
    S = datasets.generate(name, size)
    return f"{name}:{size}, {family.description} ({preset})", S


def load(spec: str | None) -> tuple[str, sp.csr_array]:
    """The matrix ``--matrix`` names (the default when None) and a label saying what it is.

    Raises ValueError, with what ``--matrix`` accepts, for a spec that names nothing.

    >>> label, S = load("poisson2d:small")
    >>> label.split(",")[0], S.shape
    ('poisson2d:small', (1024, 1024))
    """
    if spec is None:
        path = _real_matrix_path(DEFAULT_MATRIX)
        if path is not None:
            return f"{DEFAULT_MATRIX} from {path.parent} (the default)", _read_file(path)
        family, size = FALLBACK
        n = datasets.GENERATED[family].presets[size]["n"]
        return (f"2-D Poisson {n}x{n} grid ({n * n:,} rows): no real matrices found; set "
                f"{datasets.MATRICES_ENV} to a folder of gzipped Matrix Market files",
                datasets.generate(family, size))
    if spec.partition(":")[0] in datasets.GENERATED:
        return _generated(spec)
    if spec.endswith(MATRIX_SUFFIXES) or os.sep in spec:
        path = Path(spec)
        if not path.is_file():
            raise ValueError(f"no file {spec!r}; {accepted()}")
        return f"{path.name} (file {path})", _read_file(path)
    path = _real_matrix_path(spec)
    if path is None:
        where = (f"no matrix {spec!r} in {_matrix_folder()}" if _matrix_folder() is not None
                 else f"{spec!r} is not a generated family, and no real matrices were found")
        raise ValueError(f"{where}; {accepted()}")
    return f"{spec} from {path.parent}", _read_file(path)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status (1 when the solve misses its tolerance)."""
    parser = argparse.ArgumentParser(prog="python -m sparsegpu.demo", description=__doc__.split("\n\n")[0],
                                     epilog=f"--matrix {accepted()}")
    parser.add_argument("--matrix", metavar="SPEC",
                        help="a real matrix name, a .mtx or .mtx.gz file, or FAMILY[:SIZE] (e.g. poisson2d:medium)")
    parser.add_argument("--backend", choices=["cpu", "gpu"], help="default: the GPU when present")
    args = parser.parse_args(argv)
    try:
        label, S = load(args.matrix)
    except ValueError as exc:
        parser.error(f"argument --matrix: {exc}")
    backend = args.backend or sparsegpu.backend()
    print(f"sparsegpu {sparsegpu.__version__} on the {backend.upper()} backend")
    print(f"matrix: {label}")
    print(f"        {S.shape[0]:,} x {S.shape[1]:,}, {S.nnz:,} stored entries\n")

    csr = sparsegpu.CSR.from_scipy(S, backend=backend)
    advice = sparsegpu.advise(csr)
    print(repr(advice), "\n")
    _compare_formats(S, csr, advice)
    if S.shape[0] != S.shape[1]:
        return 0
    return _solve(S, csr.asformat(advice.format, **advice.params))


def _compare_formats(S: sp.csr_array, csr: Any, advice: Any) -> None:
    """Every format's conversion time, SpMV time and error against SciPy, one line each."""
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
        err = float(np.max(np.abs(_host(A @ xd) - want) / np.maximum(scale, np.finfo(float).tiny)))
        spmv_s = median_seconds(lambda: A @ xd)
        mark = " <- advised" if fmt == advice.format else ""
        print(f"{fmt:8s}{convert_s * 1e3:12.3f}{spmv_s * 1e6:10.1f}{err:13.1e}{mark}")
    scipy_s = median_seconds(lambda: S @ x)
    print(f"{'scipy':8s}{'':12s}{scipy_s * 1e6:10.1f}\n")


def _solve(S: sp.csr_array, A: Any) -> int:
    """CG (symmetric, positive diagonal) or GMRES with Jacobi on ``A``, checked by the true
    residual on the host; 0 when it converged to 1e-7."""
    symmetric = abs(S - S.T).max() <= 1e-12 * abs(S).max() if S.nnz else True
    method = "cg" if symmetric and (S.diagonal() > 0).all() else "gmres"
    b = S @ np.ones(S.shape[1])
    # GMRES counts restart cycles of 20 steps: 200 cycles bound the demo's time on matrices
    # it cannot solve (singular graphs), with a nonzero exit status.
    maxiter = 20 * S.shape[0] if method == "cg" else min(S.shape[0], GMRES_CYCLES)
    start = time.perf_counter()
    result = linalg.solve(A, b, method=method, rtol=1e-8, M=linalg.jacobi(A) if (S.diagonal() != 0).all() else None,
                          maxiter=maxiter)
    elapsed = time.perf_counter() - start
    residual = np.linalg.norm(b - S @ result.x) / np.linalg.norm(b)
    print(f"solve A x = b with {method.upper()} + Jacobi on {A.format.upper()}: info {result.info}, "
          f"{result.iterations} iterations, {elapsed * 1e3:.1f} ms, true relative residual {residual:.1e}")
    return 0 if result.info == 0 and residual <= 1e-7 else 1


def _host(a: Any) -> np.ndarray:
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


if __name__ == "__main__":
    raise SystemExit(main())
