"""SpMV side by side: every sparsegpu format, the baseline (cupyx/cuSPARSE on the GPU, SciPy on
the CPU) and the copy ceiling, on one matrix, each result checked before it is timed.

Checking: the product with the first x is compared entry by entry with SciPy in float64 (or
complex128): ``|y_i - ref_i| <= tol * (|A| |x|)_i``, the scale a dot product's rounding error
is proportional to, so a dropped, doubled or misplaced entry shows even among millions of
correct rows. ``tol`` is 1e-4 for single and 1e-10 for double precision (see
:func:`tolerance`). A product that fails is reported ``wrong`` and never timed; a format that
declines the matrix at conversion (ValueError, TypeError or NotImplementedError, e.g. ELL's
fill guard) is reported ``refused`` with its message.

>>> import numpy as np
>>> from sparsegpu import datasets
>>> report = bench_matrix(datasets.poisson2d(8), ["csr"], np.float64, "cpu", repeat=2)
>>> report["outcomes"]["csr"]["status"], report["baseline"]
('ok', 'scipy')
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu.bench.bytes_model import effective_gbps, spmv_bytes
from sparsegpu.bench.timing import GpuBusy, measure, synchronize

#: Declining a matrix at conversion (a format's documented refusal), not a failure.
REFUSALS = (ValueError, TypeError, NotImplementedError)
#: How many x vectors a product rotates through at most, for matrices that fit in L2.
MAX_X_VECTORS = 8
#: The implementation name of ``from_scipy(S, format="auto")``: the advisor's choice, timed like a format.
ADVISED = "auto"
#: Calls queued behind one stretch of busy GPU work when timing a call's kernels alone.
QUEUED = 50


class Refused(Exception):
    """A format declined the matrix (its message says why)."""


def baseline_name(backend: str) -> str:
    """The library every format is compared with: ``"cupyx"`` (cuSPARSE) on the GPU,
    ``"scipy"`` on the CPU."""
    return "cupyx" if backend == "gpu" else "scipy"


def tolerance(dtype: Any) -> float:
    """Largest accepted ``|y_i - ref_i| / (|A||x|)_i``: 1e-4 for float32/complex64, 1e-10 for
    float64/complex128 (rounding of a sum of n terms grows like n * eps at worst; these leave
    room for rows of 10^5 entries while a dropped entry in a row of up to 10^4 still shows)."""
    return 1e-4 if np.dtype(dtype).itemsize // (2 if np.dtype(dtype).kind == "c" else 1) == 4 else 1e-10


def row_stats(S: sp.csr_array) -> dict[str, Any]:
    """Shape, nonzeros and row-length statistics of a scipy CSR matrix."""
    lengths = np.diff(S.indptr)
    rows, cols = S.shape
    return {
        "rows": rows, "cols": cols, "nnz": int(S.nnz),
        "rowlen_mean": float(lengths.mean()) if rows else 0.0,
        "rowlen_max": int(lengths.max()) if rows else 0,
        "rowlen_std": float(lengths.std()) if rows else 0.0,
        "empty_rows": int((lengths == 0).sum()),
    }


def as_value_type(S: Any, dtype: Any) -> sp.csr_array:
    """``S`` as a canonical csr_array with values in ``dtype`` (a complex matrix benchmarked in
    a real type keeps its real part)."""
    S = sp.csr_array(S)
    if np.iscomplexobj(S.data) and np.dtype(dtype).kind != "c":
        S = S.real
    S = S.astype(dtype)
    S.sum_duplicates()
    return S


def make_vectors(n: int, dtype: Any, count: int, seed: int = 0) -> list[np.ndarray]:
    """``count`` host vectors of length n with entries uniform in [-1, 1) (real and imaginary
    parts for complex types)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    out = []
    for _ in range(count):
        x = rng.uniform(-1, 1, n)
        if dt.kind == "c":
            x = x + 1j * rng.uniform(-1, 1, n)
        out.append(x.astype(dt))
    return out


def x_vector_count(min_bytes: int, x_bytes: int, l2: int) -> int:
    """x vectors to rotate through: 1 for a matrix larger than twice L2 (its own traffic
    evicts x), else enough that the vectors together exceed L2, at most
    :data:`MAX_X_VECTORS`."""
    if l2 == 0 or min_bytes > 2 * l2:
        return 1
    return max(2, min(MAX_X_VECTORS, math.ceil(l2 / max(x_bytes, 1))))


class Reference:
    """SciPy's product in float64 / complex128 and the per-row error scale ``|A| |x|``."""

    def __init__(self, S: sp.csr_array, x: np.ndarray) -> None:
        wide = np.complex128 if np.iscomplexobj(S.data) or np.iscomplexobj(x) else np.float64
        S64, x64 = S.astype(wide), x.astype(wide)
        self.y = S64 @ x64
        self.scale = abs(S64) @ np.abs(x64)

    def max_relative_error(self, y: Any) -> float:
        """``max_i |y_i - ref_i| / (|A||x|)_i`` (rows whose scale is 0 must be exactly 0);
        infinite when y holds NaN or has the wrong length."""
        y = y.get() if hasattr(y, "get") and not isinstance(y, np.ndarray) else np.asarray(y)
        if y.shape != self.y.shape:
            return math.inf
        if y.size == 0:
            return 0.0
        err = np.abs(y - self.y) / np.where(self.scale > 0, self.scale, 1.0)
        return float(np.max(np.where(np.isnan(err), np.inf, err)))


class Product:
    """One implementation of ``A @ x`` on prepared operands: ``run(i)`` computes with x number
    ``i`` (modulo how many there are) and returns y. ``out``: the buffer y is written into,
    when the implementation takes one (sparsegpu's ``spmv(x, y)``)."""

    def __init__(self, name: str, call: Callable[[Any], Any], xs: Sequence[Any], out: Any = None,
                 chosen: str | None = None) -> None:
        self.name, self._call, self._xs, self.out, self.chosen = name, call, list(xs), out, chosen

    def run(self, i: int = 0) -> Any:
        return self._call(self._xs[i % len(self._xs)])


def open_product(impl: str, csr: Any, S: sp.csr_array, xs: Sequence[Any], backend: str) -> tuple[Product, float]:
    """The product for ``impl`` (a sparsegpu format, ``"cupyx"`` or ``"scipy"``) and the
    seconds its conversion from the uploaded CSR takes (median of three after a warm-up
    conversion, which compiles the kernels). Raises :class:`Refused` when the format
    declines the matrix."""
    if impl == "scipy":
        return Product(impl, lambda x: S @ x, xs), 0.0
    if impl == "cupyx":
        import cupyx.scipy.sparse as csp

        matrix = csp.csr_matrix((csr.data, csr.indices, csr.indptr), shape=csr.shape)
        return Product(impl, lambda x: matrix @ x, xs), 0.0
    xp = sparsegpu._backend.array_module(backend)
    y = xp.empty(S.shape[0], dtype=csr.dtype)
    if impl == ADVISED:  # what a user's from_scipy(S, format="auto") gives, parameters included
        chosen = sparsegpu.from_scipy(S, format="auto", dtype=csr.dtype, backend=backend)
        return Product(impl, lambda x: chosen.spmv(x, y), xs, out=y, chosen=chosen.format), 0.0
    try:
        A = csr.asformat(impl)  # untimed: the first conversion compiles its kernels
    except REFUSALS as exc:
        raise Refused(f"{type(exc).__name__}: {exc}") from None
    times = []
    for _ in range(3):
        synchronize(backend)
        start = time.perf_counter()
        A = csr.asformat(impl)
        synchronize(backend)
        times.append(time.perf_counter() - start)
    seconds = sorted(times)[1]
    return Product(impl, lambda x: A.spmv(x, y), xs, out=y), seconds


@dataclass
class Outcome:
    """What happened to one implementation on one matrix. ``status``: ``ok``, ``refused``,
    ``wrong`` (never timed) or ``error``."""

    status: str
    seconds: float | None = None
    gbps: float | None = None
    max_rel_err: float | None = None
    convert_s: float | None = None
    message: str = ""
    chosen: str | None = None  # the advisor's format, for ADVISED


@dataclass
class Operands:
    """What every product of one matrix shares: the matrix in the benchmark's value type, its
    CSR on the backend, the x vectors (host and backend copies), the reference result and the
    bytes model."""

    S: sp.csr_array
    csr: Any
    host_xs: list[np.ndarray]
    xs: list[Any]
    reference: Reference
    nbytes: int


def operands(S: Any, dtype: Any, backend: str, l2: int = 0, seed: int = 0) -> Operands:
    """Upload ``S`` once (as sparsegpu CSR), draw the x vectors (several when the matrix fits
    in L2, see :func:`x_vector_count`) and compute the reference for the first."""
    S = as_value_type(S, dtype)
    index = np.int32 if S.indices.dtype == np.int32 else np.int64
    nbytes = spmv_bytes(S.shape[0], S.shape[1], S.nnz, dtype, index)
    count = x_vector_count(nbytes, S.shape[1] * np.dtype(dtype).itemsize, l2)
    host_xs = make_vectors(S.shape[1], dtype, count, seed)
    csr = sparsegpu.CSR.from_scipy(S, dtype=dtype, backend=backend)
    xs = [sparsegpu.formats._base.to_backend(x, backend) for x in host_xs]
    return Operands(S, csr, host_xs, xs, Reference(S, host_xs[0]), nbytes)


def open_on(impl: str, ops: Operands, backend: str) -> tuple[Product, float]:
    """:func:`open_product` on shared operands (SciPy gets the host vectors)."""
    return open_product(impl, ops.csr, ops.S, ops.host_xs if impl == "scipy" else ops.xs, backend)


def check(product: Product, reference: Reference, dtype: Any) -> Outcome:
    """Run ``product`` once (its output buffer poisoned with NaN first, so entries it never
    writes show) and compare with ``reference``: an untimed ``ok`` outcome holding the error,
    or a ``wrong`` or ``error`` one."""
    if product.out is not None:
        product.out.fill(np.nan)
    try:
        err = reference.max_relative_error(product.run(0))
    except Exception as exc:  # a crash in one product must not stop the comparison
        return Outcome("error", message=f"{type(exc).__name__}: {exc}")
    if not err <= tolerance(dtype):
        return Outcome("wrong", max_rel_err=err, message=f"max relative error {err:.3g} > {tolerance(dtype):.0e}")
    return Outcome("ok", max_rel_err=err)


def run_checked(product: Product, reference: Reference, dtype: Any, backend: str, repeat: int,
                nbytes: int) -> Outcome:
    """Check ``product`` against ``reference``; time it only if it is right."""
    outcome = check(product, reference, dtype)
    if outcome.status == "ok":
        timing = measure(product.run, backend, repeat)
        outcome.seconds, outcome.gbps = timing.seconds, effective_gbps(nbytes, timing.seconds)
    return outcome


def bench_matrix(S: Any, formats: Sequence[str], dtype: Any, backend: str, repeat: int = 20, l2: int = 0,
                 seed: int = 0, on_step: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every format in ``formats`` and the baseline on ``S``: row statistics, the bytes model,
    and an :class:`Outcome` per implementation (as dicts), plus the fastest correct format."""
    ops = operands(S, dtype, backend, l2, seed)
    stats = row_stats(ops.S)
    outcomes: dict[str, Outcome] = {}
    baseline = baseline_name(backend)
    for impl in [*formats, ADVISED, baseline]:
        if on_step is not None:
            on_step(impl)
        try:
            product, convert_s = open_on(impl, ops, backend)
        except Refused as exc:
            outcomes[impl] = Outcome("refused", message=str(exc))
            continue
        except Exception as exc:  # report and go on to the next format
            outcomes[impl] = Outcome("error", message=f"{type(exc).__name__}: {exc}")
            continue
        outcome = run_checked(product, ops.reference, dtype, backend, repeat, ops.nbytes)
        outcome.convert_s = convert_s if impl in formats else None
        outcome.chosen = product.chosen
        outcomes[impl] = outcome
        del product
    ok = {f: o for f, o in outcomes.items() if f in formats and o.status == "ok"}
    best = max(ok, key=lambda f: ok[f].gbps or 0.0) if ok else None
    result = {**stats, "dtype": np.dtype(dtype).name, "min_bytes": ops.nbytes,
              "fits_l2": bool(l2 and ops.nbytes <= l2), "x_vectors": len(ops.xs), "baseline": baseline,
              "best": best, "outcomes": {f: asdict(o) for f, o in outcomes.items()}}
    del ops
    if backend == "gpu":
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
    return result


#: The formats whose per-call cost :func:`python_overhead` reports: every one the advisor can pick.
OVERHEAD_FORMATS = ("csr", "ell", "sell", "hyb", "jds", "csc", "coo")


def python_overhead(backend: str, repeat: int = 200, rows: int = 1000,
                    formats: Sequence[str] = OVERHEAD_FORMATS) -> dict[str, Any]:
    """Host cost of one product call on a small matrix (``rows`` rows, 8 entries per row).

    GPU: ``call_us`` is the median of (call + device synchronise) on an idle GPU;
    ``kernel_us`` the GPU time of one call's kernels alone (events around calls queued while
    the GPU is kept busy, so the host's issuing is hidden); ``issue_us`` the host time to
    issue one call; ``overhead_us = call_us - kernel_us``. ``floor_us``: one tiny CuPy kernel +
    synchronise, the least a call can cost. The top-level figures are CSR's ``A.spmv(x, y)``;
    the same figures for cupyx's ``A @ x`` are under ``cupyx``, and for each of ``formats``,
    under ``formats[name]["matmul"]`` (``A @ x``) and ``formats[name]["spmv"]``
    (``A.spmv(x, y)``, y given), with ``status`` ``ok`` or the error a format gave. CPU:
    ``call_us`` only.
    """
    S = datasets.random_uniform(rows, 8, seed=0)
    A = sparsegpu.CSR.from_scipy(S, backend=backend)
    x = sparsegpu.formats._base.to_backend(make_vectors(rows, np.float64, 1)[0], backend)
    y = sparsegpu._backend.array_module(backend).empty(rows)
    if backend != "gpu":
        def costs(call: Callable[[], Any]) -> dict[str, float]:
            return {"call_us": measure(lambda i: call(), backend, repeat).seconds * 1e6}

        return {"rows": rows, **costs(lambda: A.spmv(x, y)), "formats": _format_costs(A, x, y, formats, costs)}
    import cupyx.scipy.sparse as csp

    def costs(call: Callable[[], Any]) -> dict[str, float]:
        measured = _call_costs(call, repeat)
        return {**measured, "overhead_us": measured["call_us"] - measured["kernel_us"]}

    matrix = csp.csr_matrix((A.data, A.indices, A.indptr), shape=A.shape)
    return {"rows": rows, **costs(lambda: A.spmv(x, y)), "floor_us": _call_costs(lambda: y.fill(0), repeat)["call_us"],
            "cupyx": costs(lambda: matrix @ x), "formats": _format_costs(A, x, y, formats, costs)}


def _format_costs(A: Any, x: Any, y: Any, formats: Sequence[str],
                  costs: Callable[[Callable[[], Any]], dict[str, float]]) -> dict[str, Any]:
    """``costs`` of ``B @ x`` and ``B.spmv(x, y)`` for ``A`` in each of ``formats``."""
    out: dict[str, Any] = {}
    for name in formats:
        try:
            B = A.asformat(name, **({"max_fill": None} if name == "ell" else {}))
            out[name] = {"status": "ok", "matmul": costs(lambda B=B: B @ x), "spmv": costs(lambda B=B: B.spmv(x, y))}
        except Exception as exc:  # report and go on to the next format
            out[name] = {"status": f"{type(exc).__name__}: {exc}"}
    return out


def _call_costs(call: Callable[[], Any], repeat: int) -> dict[str, float]:
    import statistics

    import cupy

    for _ in range(20):
        call()
    device = cupy.cuda.Device()
    device.synchronize()
    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        device.synchronize()
        walls.append(time.perf_counter() - start)
    busy = GpuBusy()
    # Kernel time: events around each call, queued behind busy work, so each pair brackets the
    # call's GPU work alone. Batches of QUEUED calls keep the launch queue far from full.
    events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(repeat)]
    for first in range(0, repeat, QUEUED):
        busy.hold(QUEUED * 100e-6 + 1e-3)
        for start_event, end_event in events[first:first + QUEUED]:
            start_event.record()
            call()
            end_event.record()
    device.synchronize()
    kernels = [cupy.cuda.get_elapsed_time(s, e) / 1e3 for s, e in events]
    # Issue time: the host's cost per call while the GPU is busy (nothing waits on the device).
    issues = []
    for _ in range(0, repeat, QUEUED):
        busy.hold(QUEUED * 100e-6 + 1e-3)
        start = time.perf_counter()
        for _ in range(QUEUED):
            call()
        issues.append((time.perf_counter() - start) / QUEUED)
    device.synchronize()
    return {"call_us": statistics.median(walls) * 1e6, "kernel_us": statistics.median(kernels) * 1e6,
            "issue_us": statistics.median(issues) * 1e6}
