"""Primitives side by side: ``sparsegpu.primitives`` against the array library's own (CuPy on
the GPU, NumPy on the CPU), each checked before it is timed, and (on the GPU) device-side format
conversion against the PCIe upload of the same arrays.

=====================  ======================================  ==================  ============
sparsegpu              baseline                                bytes model         check
=====================  ======================================  ==================  ============
inclusive_scan(x)      ``xp.cumsum(x, dtype=x.dtype)``         read + write        per entry
reduce(x)              ``xp.sum(x)``                           read                scalar
histogram(v, 256)      ``xp.bincount(v, minlength=256)``       read                exact counts
=====================  ======================================  ==================  ============

Cases (:data:`CASES`): scans of int32 and float64, the float64 scan three ways (the default,
bitwise reproducible path; ``deterministic=False``; the reduce-then-scan path), reductions of
int32 and float64, and 256-bin histograms of uniform random keys and of all-equal keys. The
``impl`` column names the variant. Percentages of the device copy come from the ``% copy``
column of the report (the copy is measured in the same run); :func:`summary_lines` adds the
ratio to the baseline and the issue's targets (>= 85% of copy, at least as fast as the
baseline).

Conversion (GPU only, :func:`bench_conversion`): CSR -> COO -> CSR with :mod:`sparsegpu.convert`
of a random matrix of :data:`CONVERSION_NNZ` entries (10 per row; int32 indices, float64
values; fewer entries when n is below 2^28) built on the device, and COO -> CSR of the same entries in random order, against the time to upload
their arrays at the pinned host-to-device bandwidth measured in the same run (targets: <= 10%
and <= 50% of that time).

Float results are compared with a float64 NumPy reference relative to the sum of magnitudes
(``cumsum(|x|)`` for scans, ``sum(|x|)`` for reductions), tolerance as for SpMV.

>>> rows = bench_primitives("cpu", n=1000, repeat=2, echo=False)
>>> [r["op"] for r in rows][:2]
['inclusive_scan', 'inclusive_scan']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import sparsegpu
from sparsegpu import convert, primitives
from sparsegpu._backend import array_module
from sparsegpu.bench.bytes_model import effective_gbps, histogram_bytes, reduce_bytes, scan_bytes
from sparsegpu.bench.spmv import tolerance
from sparsegpu.bench.timing import copy_ceiling, measure
from sparsegpu.transfer import pinned_empty

HISTOGRAM_BINS = 256
#: (op, dtype, input kind, sparsegpu variants). Variants: "" (the default) or a mode of
#: :func:`variant`.
CASES = (
    ("inclusive_scan", "int32", "uniform", ("",)),
    ("inclusive_scan", "float64", "uniform", ("", "deterministic=False", "reduce-then-scan")),
    ("reduce", "int32", "uniform", ("",)),
    ("reduce", "float64", "uniform", ("",)),
    ("histogram", "int32", "uniform", ("",)),
    ("histogram", "int32", "all equal", ("",)),
)
#: The primitives' targets: share of the device copy, and of the pinned upload for conversions.
COPY_TARGET = 0.85
CONVERSION_TARGETS = {"csr->coo->csr": 0.10, "unsorted coo->csr": 0.50}
CONVERSION_NNZ = 10**8
CONVERSION_ROWS = 10**7
PINNED_PROBE_BYTES = 512 << 20


def make_input(op: str, dtype: str, n: int, backend: str, seed: int = 0, kind: str = "uniform") -> Any:
    """Input for ``op`` on ``backend``: histogram values uniform in [0, 256) (or all equal to
    one random key), scan and reduce inputs uniform in [0, 4) (integers stay far from overflow
    at 2^28 elements)."""
    rng = np.random.default_rng(seed)
    if op == "histogram":
        if kind == "all equal":
            host = np.full(n, rng.integers(0, HISTOGRAM_BINS), dtype=dtype)
        else:
            host = rng.integers(0, HISTOGRAM_BINS, n, dtype=np.int64).astype(dtype)
    elif np.dtype(dtype).kind == "i":
        host = rng.integers(0, 4, n, dtype=np.int64).astype(dtype)
    else:
        host = rng.uniform(0, 4, n).astype(dtype)
    return array_module(backend).asarray(host)


@contextmanager
def variant(mode: str) -> Iterator[None]:
    """Runs sparsegpu's scans the way ``mode`` names: "" (the default), "deterministic=False"
    or "reduce-then-scan" (the older reproducible float scan)."""

    if mode == "deterministic=False":
        with sparsegpu.options(deterministic=False):
            yield
    elif mode == "reduce-then-scan":
        saved = primitives.scan.DETERMINISTIC_FLOAT_SCAN
        primitives.scan.DETERMINISTIC_FLOAT_SCAN = "reduce-then-scan"
        try:
            yield
        finally:
            primitives.scan.DETERMINISTIC_FLOAT_SCAN = saved
    else:
        yield


def implementations(op: str, backend: str, variants: tuple[str, ...] = ("",)) -> dict[str, Callable[[Any], Any]]:
    """``{"sparsegpu": fn, "sparsegpu (mode)": fn, ..., baseline: fn}`` for ``op``."""
    xp = array_module(backend)
    baseline = "cupy" if backend == "gpu" else "numpy"
    calls: dict[str, Callable[[Any], Any]] = {
        "inclusive_scan": lambda x: xp.cumsum(x, dtype=x.dtype),
        "reduce": lambda x: xp.sum(x),
        "histogram": lambda v: xp.bincount(v, minlength=HISTOGRAM_BINS),
    }
    ours = {
        "inclusive_scan": lambda x: primitives.inclusive_scan(x),
        "reduce": lambda x: primitives.reduce(x, op="sum"),
        "histogram": lambda v: primitives.histogram(v, HISTOGRAM_BINS, range=(0, HISTOGRAM_BINS)),
    }

    def in_variant(mode: str) -> Callable[[Any], Any]:
        def call(x: Any) -> Any:
            with variant(mode):
                return ours[op](x)

        return call

    out = {("sparsegpu" if not mode else f"sparsegpu ({mode})"): in_variant(mode) for mode in variants}
    out[baseline] = calls[op]
    return out


def model_bytes(op: str, n: int, dtype: str) -> int:
    """The bytes model of ``op`` (see :mod:`sparsegpu.bench.bytes_model`)."""
    return {"inclusive_scan": scan_bytes, "reduce": reduce_bytes, "histogram": histogram_bytes}[op](n, dtype)


def error(op: str, x: np.ndarray, result: Any) -> float:
    """Relative error of ``result`` against NumPy in float64 (0 or inf for histograms)."""
    got = np.asarray(result.get() if hasattr(result, "get") else result)
    if op == "histogram":
        expected = np.bincount(x, minlength=HISTOGRAM_BINS)
        return 0.0 if got.shape == expected.shape and np.array_equal(got, expected) else float("inf")
    wide = x.astype(np.float64)
    if op == "inclusive_scan":
        expected, scale = np.cumsum(wide), np.maximum(np.cumsum(np.abs(wide)), 1e-300)
    else:
        expected, scale = np.sum(wide), max(float(np.sum(np.abs(wide))), 1e-300)
    if np.shape(got) != np.shape(expected):
        return float("inf")
    err = np.abs(got.astype(np.float64) - expected) / scale
    return float(np.max(np.where(np.isnan(err), np.inf, err))) if np.size(err) else 0.0


def bench_primitives(backend: str, n: int, repeat: int = 20, seed: int = 0, *, conversion: bool = True,
                     echo: bool = True) -> list[dict[str, Any]]:
    """Every case of :data:`CASES` for each implementation: status, seconds, GB/s; on the GPU
    also :func:`bench_conversion` (with ``conversion``) and, with ``echo``, prints
    :func:`summary_lines` (ratios to the baseline, the device copy and the targets)."""
    rows = []
    for op, dtype, kind, variants in CASES:
        x = make_input(op, dtype, n, backend, seed, kind)
        host = x.get() if hasattr(x, "get") else x
        nbytes = model_bytes(op, n, dtype)
        label = op if kind == "uniform" else f"{op} ({kind})"
        for impl, call in implementations(op, backend, variants).items():
            row: dict[str, Any] = {"op": label, "dtype": dtype, "n": n, "impl": impl, "bytes": nbytes}
            try:
                err = error(op, host, call(x))
            except Exception as exc:  # report and go on
                rows.append({**row, "status": "error", "message": f"{type(exc).__name__}: {exc}"})
                continue
            if not err <= (0.0 if np.dtype(dtype).kind == "i" else tolerance(dtype)):
                rows.append({**row, "status": "wrong", "max_rel_err": err})
                continue
            timing = measure(lambda i: call(x), backend, repeat)
            rows.append({**row, "status": "ok", "max_rel_err": err, "seconds": timing.seconds,
                         "gbps": effective_gbps(nbytes, timing.seconds)})
        x = host = None  # free the inputs before the next case
    if backend != "gpu":
        return rows
    import cupy

    if conversion:
        cupy.get_default_memory_pool().free_all_blocks()
        # The 10^8 nonzeros at the target size; smaller runs scale the matrix down.
        nnz = min(CONVERSION_NNZ, max(4 * n, 10**6))
        rows += bench_conversion(nnz, max(nnz // 10, 1), repeat=min(repeat, 5), seed=seed)
        cupy.get_default_memory_pool().free_all_blocks()
    if echo:
        for line in summary_lines(rows, _copy_gbps(backend, repeat)):
            print(line)
    return rows


def _copy_gbps(backend: str, repeat: int) -> float | None:
    ceiling = copy_ceiling(backend, repeat=repeat)
    return ceiling["gbps"] if ceiling else None


# --------------------------------------------------------------------------- conversion


def pinned_h2d_gbps(nbytes: int = PINNED_PROBE_BYTES, repeat: int = 5) -> float:
    """Host-to-device bandwidth (GB/s) of one copy of ``nbytes`` from page-locked memory."""
    import cupy

    host = pinned_empty(nbytes, np.uint8)
    host[:] = 1
    device = cupy.empty(nbytes, np.uint8)
    seconds = measure(lambda i: device.set(host), "gpu", repeat, warmup=1).seconds
    return nbytes / seconds / 1e9


def random_csr_on_device(nnz: int, rows: int, seed: int = 0) -> tuple[Any, Any, Any, tuple[int, int]]:
    """A square random CSR (``rows`` x ``rows``, about ``nnz`` entries, int32 indices, float64
    values, canonical: columns strictly increasing in each row), built on the device: sorted
    distinct linear positions from a running sum of random gaps."""
    import cupy

    rng = cupy.random.RandomState(seed)
    cells = rows * rows
    mean_gap = cells / nnz
    # Gaps uniform in [1, 2 * mean_gap * 0.99]: strictly increasing positions that end below
    # rows^2 (the sum of nnz gaps concentrates at 0.99 * rows^2).
    gaps = rng.randint(1, max(int(2 * mean_gap * 0.99), 2), size=nnz, dtype=np.int64)
    position = cupy.cumsum(gaps) - 1
    del gaps
    position = position[position < cells]
    row = (position // rows).astype(np.int32)
    indices = (position % rows).astype(np.int32)
    del position
    indptr = cupy.searchsorted(row, cupy.arange(rows + 1, dtype=np.int32)).astype(np.int32)
    data = rng.standard_normal(indices.size, dtype=np.float64)
    return indptr, indices, data, (rows, rows)


def bench_conversion(nnz: int = CONVERSION_NNZ, rows: int = CONVERSION_ROWS, repeat: int = 5,
                     seed: int = 0) -> list[dict[str, Any]]:
    """CSR -> COO -> CSR and unsorted COO -> CSR on the device (:mod:`sparsegpu.convert`)
    against uploading the same arrays at the measured pinned bandwidth. Rows: the conversion
    (``ratio`` = its time / the upload's, ``target``) and the upload itself (impl
    "pinned upload"), op named after :data:`CONVERSION_TARGETS`."""
    import cupy

    h2d = pinned_h2d_gbps()
    indptr, indices, data, shape = random_csr_on_device(nnz, rows, seed)
    csr_bytes = indptr.nbytes + indices.nbytes + data.nbytes
    stored = int(indices.size)

    def roundtrip() -> tuple[Any, Any, Any]:
        r, c, d = convert.csr_to_coo(indptr, indices, data)
        return convert.coo_to_csr(r, c, d, shape, index_dtype=np.int32)

    order = cupy.random.RandomState(seed + 1).permutation(stored)
    coo_rows = convert.csr_to_coo(indptr, indices, data)[0][order]
    coo_cols, coo_data = indices[order], data[order]
    del order
    coo_bytes = coo_rows.nbytes + coo_cols.nbytes + coo_data.nbytes

    def unsorted() -> tuple[Any, Any, Any]:
        return convert.coo_to_csr(coo_rows, coo_cols, coo_data, shape, index_dtype=np.int32)

    out = []
    for op, call, nbytes in (("csr->coo->csr", roundtrip, csr_bytes), ("unsorted coo->csr", unsorted, coo_bytes)):
        upload_s = nbytes / (h2d * 1e9)
        base = {"op": op, "dtype": "float64", "n": stored, "bytes": nbytes}
        out.append({**base, "impl": "pinned upload", "status": "ok", "seconds": upload_s, "gbps": h2d})
        row = {**base, "impl": "sparsegpu", "target": CONVERSION_TARGETS[op]}
        try:
            p, i, d = call()
            same = (bool(cupy.array_equal(p, indptr)) and bool(cupy.array_equal(i, indices))
                    and bool(cupy.array_equal(d, data)))
            del p, i, d
        except Exception as exc:  # report and go on
            out.append({**row, "status": "error", "message": f"{type(exc).__name__}: {exc}"})
            continue
        if not same:
            out.append({**row, "status": "wrong"})
            continue
        seconds = measure(lambda i: call(), "gpu", repeat, warmup=1).seconds
        out.append({**row, "status": "ok", "seconds": seconds, "gbps": effective_gbps(nbytes, seconds),
                    "ratio": seconds / upload_s})
    return out


# --------------------------------------------------------------------------- summary


def summary_lines(rows: list[dict[str, Any]], copy_gbps: float | None) -> list[str]:
    """Per case: sparsegpu's GB/s, its share of the device copy and its speed relative to the
    baseline, against the targets; per conversion: its time over the upload's."""
    lines = ["", "Primitives against the targets (>= 85% of the device copy, at least the baseline's speed)"]
    if copy_gbps:
        lines.append(f"  device copy: {copy_gbps:.0f} GB/s")
    baselines = {(r["op"], r["dtype"]): r for r in rows if r["impl"] in ("cupy", "numpy") and r["status"] == "ok"}
    for r in rows:
        if r["op"] in CONVERSION_TARGETS or r["impl"] in ("cupy", "numpy"):
            continue
        if r["status"] != "ok":
            lines.append(f"  {r['op']:<26} {r['dtype']:<8} {r['impl']:<36} {r['status'].upper()}")
            continue
        share = r["gbps"] / copy_gbps if copy_gbps else float("nan")
        base = baselines.get((r["op"], r["dtype"]))
        speedup = base["seconds"] / r["seconds"] if base else float("nan")
        met = share >= COPY_TARGET and speedup >= 1.0
        lines.append(f"  {r['op']:<26} {r['dtype']:<8} {r['impl']:<36} {r['gbps']:8.0f} GB/s {100 * share:5.0f}% of copy"
                     f"  {speedup:5.2f}x baseline  {'meets' if met else 'MISSES'} target")
    conversions = [r for r in rows if r["op"] in CONVERSION_TARGETS and r["impl"] == "sparsegpu"]
    if conversions:
        lines.append("Device conversion against the pinned upload of the same arrays")
    for r in conversions:
        if r["status"] != "ok":
            lines.append(f"  {r['op']:<26} {r['status'].upper()} {r.get('message', '')}")
            continue
        upload = next(u for u in rows if u["op"] == r["op"] and u["impl"] == "pinned upload")
        lines.append(f"  {r['op']:<26} {r['n']:,} entries: {1e3 * r['seconds']:.2f} ms vs upload {1e3 * upload['seconds']:.2f} ms"
                     f" at {upload['gbps']:.1f} GB/s = {100 * r['ratio']:.1f}% (target <= {100 * r['target']:.0f}%):"
                     f" {'meets' if r['ratio'] <= r['target'] else 'MISSES'}")
    return lines
