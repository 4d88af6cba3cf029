"""SpGEMM side by side: sparsegpu's ``spgemm`` against the baseline (cupyx/cuSPARSE on the GPU,
SciPy on the CPU) for ``A @ A`` and ``A.T @ A``: time per product, peak pool memory, and the
baseline's answer checked against ours.

Timing: each product is run once untimed (kernels compiled, pools warmed), then timed as the
median of ``repeat`` samples (CUDA events on the GPU). ``A.T`` is built once, as a CSR, before
either side is timed, so both multiply the same two CSR operands.

Peak memory: the CuPy pool's bytes held after one product, beyond what it held before, with
the pool emptied of cached blocks first (the pool only grows while a call runs, so this is the
call's high-water mark, rounded up to the pool's block sizes). 0 on the CPU backend.

Check: the baseline's result is compared with ours (pattern and values, float64 relative
tolerance 1e-10, float32 1e-4, scaled by the largest entry); a difference is reported as
``"baseline wrong: ..."`` (cupyx returns an empty matrix on R-MAT scale 18) and a
failure as ``"baseline failed: ..."``. A product ours cannot compute (a MemoryError for an
output past the device's memory, among others) is reported in ``status`` as ``"ours failed:
..."``, and the run goes on with the next product.

>>> from sparsegpu import datasets
>>> rows = run_spgemm({"poisson2d_8": datasets.poisson2d(8)}, products=("AA",), backend="cpu", repeat=2)
>>> rows[0]["matrix"], rows[0]["product"], rows[0]["baseline"], rows[0]["baseline_status"]
('poisson2d_8', 'AA', 'scipy', 'ok')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu.bench.timing import measure, synchronize
from sparsegpu.formats._spgemm import spgemm

PRODUCTS = ("AA", "ATA")


def suite(rmat_scales: Sequence[int] = (18, 20), poisson2d_n: int = 1000, stencil_n: int = 60,
          real: bool = True) -> dict[str, sp.csr_array]:
    """The matrices of the SpGEMM comparison: the real ones (where found), R-MAT at
    ``rmat_scales``, the 2-D Poisson and 27-point 3-D stencils, and cupy/cupy#10033's
    50000 x 5000 float32 matrix of density 0.05 (its ``X.T @ X`` is the ATA product)."""
    matrices: dict[str, sp.csr_array] = {}
    if real:
        for name in datasets.real_matrix_names():
            matrices[name] = datasets.load_matrix(name)
    for scale in rmat_scales:
        matrices[f"rmat{scale}"] = datasets.rmat(scale)
    matrices[f"poisson2d_{poisson2d_n}"] = datasets.poisson2d(poisson2d_n)
    matrices[f"stencil27_{stencil_n}"] = datasets.stencil27(stencil_n)
    matrices["cupy10033_50000x5000"] = cupy_issue_matrix()
    return matrices


def cupy_issue_matrix(rows: int = 50_000, cols: int = 5_000, density: float = 0.05, seed: int = 42) -> sp.csr_array:
    """A uniform random float32 matrix like cupy/cupy#10033's ``X`` (its ``X.T @ X`` came back
    all zero from cupyx at this size)."""
    rng = np.random.default_rng(seed)
    X = sp.random_array((rows, cols), density=density, format="csr", dtype=np.float32, rng=rng)
    return sp.csr_array(X)


def peak_pool_bytes(call: Callable[[], Any], backend: str) -> int:
    """Bytes the CuPy pool grew by while ``call()`` ran (its high-water mark; 0 on the CPU)."""
    if backend != "gpu":
        call()
        return 0
    import cupy

    pool = cupy.get_default_memory_pool()
    synchronize("gpu")
    pool.free_all_blocks()
    before = pool.total_bytes()
    result = call()
    synchronize("gpu")
    peak = pool.total_bytes() - before
    del result
    return int(peak)


def _operands(S: sp.csr_array, product: str) -> tuple[sp.csr_array, sp.csr_array]:
    if product == "AA":
        if S.shape[0] != S.shape[1]:
            raise ValueError(f"A @ A needs a square matrix, got {S.shape}")
        return S, S
    if product == "ATA":
        return sp.csr_array(S.T), S
    raise ValueError(f"product must be one of {PRODUCTS}, got {product!r}")


def _baseline(left: sp.csr_array, right: sp.csr_array, backend: str) -> Callable[[], Any]:
    if backend == "cpu":
        return lambda: left @ right
    import cupyx.scipy.sparse as cusp

    L, R = cusp.csr_matrix(left), cusp.csr_matrix(right)
    return lambda: L @ R


def _host_csr(C: Any) -> sp.csr_array:
    if isinstance(C, sparsegpu.SparseMatrix):
        return C.to_scipy()
    host = C.get() if hasattr(C, "get") else C
    out = sp.csr_array(host)
    out.sort_indices()
    return out


def compare(ours: sp.csr_array, theirs: sp.csr_array) -> str:
    """``"ok"`` when ``theirs`` has our pattern and values (within the dtype's tolerance), else
    what differs.

    >>> A = sp.csr_array(np.eye(3))
    >>> compare(A, A), compare(A, sp.csr_array((3, 3)))
    ('ok', 'baseline wrong: 0 entries, expected 3')
    """
    if theirs.shape != ours.shape:
        return f"baseline wrong: shape {theirs.shape}, expected {ours.shape}"
    theirs = sp.csr_array(theirs)
    theirs.eliminate_zeros()
    if theirs.nnz != ours.nnz:
        return f"baseline wrong: {theirs.nnz} entries, expected {ours.nnz}"
    theirs.sort_indices()
    if not (np.array_equal(theirs.indptr, ours.indptr) and np.array_equal(theirs.indices, ours.indices)):
        return "baseline wrong: a different pattern"
    tol = 1e-4 if ours.dtype in (np.float32, np.complex64) else 1e-10
    scale = float(np.abs(ours.data).max(initial=0.0)) or 1.0
    error = float(np.abs(theirs.data.astype(ours.dtype) - ours.data).max(initial=0.0)) / scale
    return "ok" if error <= tol else f"baseline wrong: relative error {error:.3g}"


def bench_product(name: str, S: sp.csr_array, product: str, backend: str = "gpu", repeat: int = 5) -> dict[str, Any]:
    """One matrix and product: times, peak pool bytes and the baseline's status."""
    left, right = _operands(S, product)
    A = sparsegpu.from_scipy(left, backend=backend)
    B = A if product == "AA" else sparsegpu.from_scipy(right, backend=backend)

    def ours_call() -> Any:
        return spgemm(A, B)

    row: dict[str, Any] = {"matrix": name, "product": product, "rows": S.shape[0], "cols": S.shape[1],
                           "nnz": S.nnz, "baseline": "cupyx" if backend == "gpu" else "scipy"}
    try:
        ours_peak = peak_pool_bytes(ours_call, backend)
        ours = ours_call()
        ours_host = ours.to_scipy()
        row.update({"out_nnz": ours.nnz, "ours_peak_bytes": ours_peak,
                    "ours_ms": measure(lambda i: ours_call(), backend, repeat=repeat, warmup=0).seconds * 1e3})
    except Exception as exc:  # the device's memory among them: reported, and the run goes on
        ours = None
        row.update({"status": f"ours failed: {type(exc).__name__}: {exc}", "baseline_status": "not run"})
        return row
    del ours
    row["status"] = "ok"
    row.update(_bench_baseline(left, right, ours_host, backend, repeat))
    if row.get("baseline_ms"):
        row["speedup"] = row["baseline_ms"] / row["ours_ms"]
    return row


def _bench_baseline(left: sp.csr_array, right: sp.csr_array, ours: sp.csr_array, backend: str,
                    repeat: int) -> dict[str, Any]:
    try:
        call = _baseline(left, right, backend)
        peak = peak_pool_bytes(call, backend)
        status = compare(ours, _host_csr(call()))
        seconds = measure(lambda i: call(), backend, repeat=repeat, warmup=0).seconds
    except Exception as exc:  # cuSPARSE's resource errors among them: reported, not raised
        return {"baseline_status": f"baseline failed: {type(exc).__name__}: {exc}"}
    return {"baseline_status": status, "baseline_ms": seconds * 1e3, "baseline_peak_bytes": peak}


def run_spgemm(matrices: Mapping[str, sp.csr_array], products: Sequence[str] = PRODUCTS, backend: str = "gpu",
               repeat: int = 5, on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """:func:`bench_product` for every matrix and product (``"AA"`` skipped for a non-square
    matrix): one row each, in order; ``on_row(row)`` hears each row as it finishes."""
    rows = []
    for name, S in matrices.items():
        S = sp.csr_array(S)
        for product in products:
            if product == "AA" and S.shape[0] != S.shape[1]:
                continue
            rows.append(bench_product(name, S, product, backend, repeat))
            if on_row is not None:
                on_row(rows[-1])
    return rows


def format_rows(rows: Sequence[Mapping[str, Any]]) -> str:
    """A plain-text table of :func:`run_spgemm`'s rows.

    >>> print(format_rows([{"matrix": "m", "product": "AA", "out_nnz": 3, "ours_ms": 1.0, "ours_peak_bytes": 2**20,
    ...                     "baseline_ms": 2.0, "baseline_peak_bytes": 2**21, "speedup": 2.0, "baseline_status": "ok"},
    ...                    {"matrix": "big", "product": "AA", "status": "ours failed: MemoryError: ...",
    ...                     "baseline_status": "not run"}]))
    matrix  product  out_nnz  ours ms  base ms  speedup  ours MiB  base MiB  baseline
    m       AA       3        1.000    2.000    2.00     1.0       2.0       ok
    big     AA       -        -        -        -        -         -         ours failed: MemoryError: ...
    """
    header = ["matrix", "product", "out_nnz", "ours ms", "base ms", "speedup", "ours MiB", "base MiB", "baseline"]
    table = [header]
    for r in rows:
        failed = "ours_ms" not in r
        table.append([str(r["matrix"]), str(r["product"]), "-" if failed else str(r["out_nnz"]),
                      "-" if failed else f"{r['ours_ms']:.3f}",
                      f"{r['baseline_ms']:.3f}" if "baseline_ms" in r else "-",
                      f"{r['speedup']:.2f}" if "speedup" in r else "-",
                      "-" if failed else f"{r['ours_peak_bytes'] / 2**20:.1f}",
                      f"{r['baseline_peak_bytes'] / 2**20:.1f}" if "baseline_peak_bytes" in r else "-",
                      str(r["status"]) if failed else str(r["baseline_status"])])
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table)
