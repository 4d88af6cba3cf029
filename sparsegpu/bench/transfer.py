"""The streaming benchmark (``python -m sparsegpu.bench --no-spmv --transfer``): host -> device
bandwidth, streamed CSR upload from pinned and pageable arrays against cupyx, and out-of-core
SpMV against the time its bytes take at the pinned rate.

Every figure is end to end: from host arrays to a ready device matrix (validated, canonical),
timed on the host after a device synchronise; the median of ``repeat`` runs after a warm-up (the default
upload and ``from_scipy`` called in turn, so that both see the same state).
GB/s counts the matrix's host bytes (values + indices + row pointers) once. The validation
cost is the same upload timed with ``check=True`` (the default: the checks run on the device as
chunks arrive) and ``check=False``, in turn. Without a GPU nothing is transferred: the table
gives the CPU path's host times and says so.

>>> result = bench_transfer("cpu", rows=2000, per_row=4, repeat=1)
>>> [row["what"] for row in result["rows"]][:2]
['upload_csr, pageable, pack=threads', 'sparsegpu.from_scipy(S), pageable (streamed when large)']
>>> import io
>>> text = io.StringIO()
>>> print_transfer(result, file=text)
>>> "no GPU: nothing was transferred" in text.getvalue(), "nan" in text.getvalue()
(True, False)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

import sparsegpu
from sparsegpu import transfer
from sparsegpu.bench.timing import synchronize

#: Rows of the benchmark matrix by ``--size``: 20M rows x 10 per row, float64/int32, is
#: 2.48 GB; the small size keeps the CPU run quick.
ROWS = {"small": 200_000, "medium": 20_000_000, "large": 20_000_000}
PER_ROW = 10


def build_matrix(rows: int, per_row: int = PER_ROW, cols: int | None = None, seed: int = 0) -> sp.csr_array:
    """A canonical CSR, ``per_row`` entries in every row, float64 values, int32 indices,
    generated vectorised: row i's k-th column is drawn from the k-th of ``per_row`` equal
    column bands, so columns come out sorted and distinct without a sort (20M x 10 in a few
    seconds).

    >>> S = build_matrix(5, 3, seed=1)
    >>> S.shape, S.nnz, bool(S.has_canonical_format)
    ((5, 5), 15, True)
    """
    cols = rows if cols is None else cols
    band = cols // per_row
    if band < 1:
        raise ValueError(f"{cols} columns cannot hold {per_row} distinct columns per row")
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, band, size=(rows, per_row), dtype=np.int32)
    indices += np.arange(per_row, dtype=np.int32) * np.int32(band)
    data = rng.random(rows * per_row)
    indptr = np.arange(0, rows * per_row + 1, per_row, dtype=np.int32)
    S = sp.csr_array((data, indices.reshape(-1), indptr), shape=(rows, cols), copy=False)
    S.has_canonical_format = True  # true by construction; spares scipy a pass over 200M entries
    return S


def unsorted_copy(S: sp.csr_array) -> sp.csr_array:
    """The same matrix with every row's columns reversed (not canonical, no duplicates)."""
    per_row = int(S.indptr[1] - S.indptr[0]) if S.shape[0] else 0
    indices = np.ascontiguousarray(S.indices.reshape(-1, per_row)[:, ::-1]).reshape(-1)
    data = np.ascontiguousarray(S.data.reshape(-1, per_row)[:, ::-1]).reshape(-1)
    U = sp.csr_array((data, indices, S.indptr), shape=S.shape, copy=False)
    U.has_sorted_indices = False
    return U


def _median_seconds(fn: Callable[[], Any], backend: str, repeat: int, warmup: int = 1) -> tuple[float, Any]:
    """Median host seconds of ``fn()`` (device synchronised around each call) and the last
    result."""
    return _interleaved_medians({"fn": fn}, backend, repeat, warmup)["fn"]


def _interleaved_medians(fns: dict[str, Callable[[], Any]], backend: str, repeat: int,
                         warmup: int = 1) -> dict[str, tuple[float, Any]]:
    """Median host seconds and last result of each function, called in turn round after round
    (after ``warmup`` untimed rounds), so that all of them see the same state of the host, the
    device and their memory pools. A function's previous result is dropped before it runs
    again, so at most one of its results is alive at a time."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    results: dict[str, Any] = {}
    for round_ in range(warmup + max(1, repeat)):
        for name, fn in fns.items():
            results[name] = None
            synchronize(backend)
            start = time.perf_counter()
            results[name] = fn()
            synchronize(backend)
            if round_ >= warmup:
                samples[name].append(time.perf_counter() - start)
    return {name: (statistics.median(samples[name]), results[name]) for name in fns}


def h2d_bandwidth(backend: str, nbytes: int = 1 << 30, repeat: int = 5) -> dict[str, float]:
    """Host -> device GB/s of a ``nbytes`` copy from pinned and from pageable memory (CuPy
    copies); None on the CPU backend, where nothing is transferred."""
    if backend != "gpu":
        return {"pinned": None, "pageable": None}
    import cupy

    device = cupy.empty(nbytes, np.uint8)
    pinned = transfer.pinned_empty(nbytes, np.uint8)
    pinned[...] = 1
    pageable = np.ones(nbytes, np.uint8)
    stream = cupy.cuda.get_current_stream()
    pinned_s, _ = _median_seconds(lambda: device.set(pinned, stream=stream), backend, repeat)
    pageable_s, _ = _median_seconds(lambda: device.set(pageable), backend, repeat)
    device = pinned = pageable = None  # release before emptying the pool
    cupy.get_default_memory_pool().free_all_blocks()
    return {"pinned": nbytes / pinned_s / 1e9, "pageable": nbytes / pageable_s / 1e9}


def _same_csr(A: Any, B: Any) -> bool:
    """Same arrays (on the device when both are there)."""
    xp = A._xp
    return all(bool(xp.array_equal(xp.asarray(a), xp.asarray(b)))
               for a, b in ((A.indptr, B.indptr), (A.indices, B.indices), (A.data, B.data)))


def bench_transfer(backend: str, rows: int = ROWS["medium"], per_row: int = PER_ROW, repeat: int = 3,
                   seed: int = 0, on_step: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every timing of the streaming benchmark, as a dict for ``bench.json``: ``rows`` (one
    per measurement: what, seconds, GB/s, share of the pinned H2D rate, ratio to cupyx),
    ``h2d`` (the measured rates), ``reports`` (per-stage timelines) and ``status`` (``ok``, or
    ``wrong`` when a result differs from the reference)."""
    step = on_step or (lambda text: None)
    step("building the matrix")
    build_start = time.perf_counter()
    S = build_matrix(rows, per_row, seed=seed)
    U = unsorted_copy(S)
    build_s = time.perf_counter() - build_start
    nbytes = int(S.data.nbytes + S.indices.nbytes + S.indptr.nbytes)
    step("host -> device bandwidth")
    h2d = h2d_bandwidth(backend)
    results: list[dict[str, Any]] = []
    reports: dict[str, str] = {}
    wrong: list[str] = []
    reference = transfer.upload_csr(S, backend=backend)

    def record(what: str, seconds: float, *, cupyx_s: float | None = None, report: Any = None) -> None:
        gbps = nbytes / seconds / 1e9 if backend == "gpu" else None
        results.append({"what": what, "seconds": seconds, "gbps": gbps,
                        "of_pinned": gbps / h2d["pinned"] if gbps is not None else None,
                        "vs_cupyx": (cupyx_s / seconds) if cupyx_s else None})
        if report is not None:
            reports[what] = repr(report)

    def timed_upload(what: str, matrix: Any, check: Any, **kwargs: Any) -> float:
        step(what)
        seconds, (A, report) = _median_seconds(
            lambda: transfer.upload_csr(matrix, backend=backend, report=True, **kwargs), backend, repeat)
        if not _same_csr(A, check):
            wrong.append(what)
        record(what, seconds, report=report)
        return seconds

    cupyx_s = cupyx_unsorted_s = None
    if backend == "gpu":
        import cupyx.scipy.sparse

        step("cupyx csr_matrix, canonical")
        cupyx_s, _ = _median_seconds(lambda: cupyx.scipy.sparse.csr_matrix(S), backend, repeat)
        step("cupyx csr_matrix, unsorted")
        cupyx_unsorted_s, _ = _median_seconds(lambda: cupyx.scipy.sparse.csr_matrix(U), backend, 1, warmup=0)
    # The default path and from_scipy (the same streamed path) in turn, in the same state.
    step("upload_csr and sparsegpu.from_scipy, pageable")
    both = _interleaved_medians({"upload": lambda: transfer.upload_csr(S, backend=backend, report=True),
                                 "from_scipy": lambda: sparsegpu.from_scipy(S, backend=backend)}, backend, repeat)
    (upload_s, (A, report)), (from_scipy_s, B) = both["upload"], both["from_scipy"]
    for what, matrix in (("upload_csr, pageable, pack=threads", A), ("sparsegpu.from_scipy", B)):
        if not _same_csr(matrix, reference):
            wrong.append(what)
    record("upload_csr, pageable, pack=threads", upload_s, report=report)
    record("sparsegpu.from_scipy(S), pageable (streamed when large)", from_scipy_s)
    A = B = None
    step("validation cost: upload_csr with check=True and check=False")
    validation = _bench_validation(S, reference, backend, repeat, wrong)
    timed_upload("upload_csr, pageable, pack=register", S, reference, pack="register")
    cores = os.cpu_count() or 1
    if cores > transfer.default_pack_threads():
        timed_upload(f"upload_csr, pageable, pack=threads, {cores} threads", S, reference, pack_threads=cores)
    timed_upload("upload_csr, pageable, unsorted (canonicalised on the device)", U, reference)
    if cupyx_s is not None:
        record("cupyx.scipy.sparse.csr_matrix(S), canonical", cupyx_s)
        record("cupyx.scipy.sparse.csr_matrix(U), unsorted", cupyx_unsorted_s)
        for row in results:
            if row["what"].startswith(("upload_csr, pageable, pack", "sparsegpu.from_scipy")):  # canonical input
                row["vs_cupyx"] = cupyx_s / row["seconds"]
            elif "unsorted (canon" in row["what"]:
                row["vs_cupyx"] = cupyx_unsorted_s / row["seconds"]
    U = None  # its 2.4 GB go back before the matrix is pinned
    step("out-of-core SpMV from ordinary arrays (page-locked in place at construction)")
    ordinary = _bench_out_of_core(S, reference, backend, repeat, nbytes, h2d["pinned"])
    if ordinary.pop("wrong"):
        wrong.append("out-of-core SpMV, ordinary arrays")
    reports["out-of-core SpMV, ordinary arrays"] = ordinary.pop("report")
    for a in (S.data, S.indices, S.indptr):  # the construction's page locks go, for the pinned runs below
        transfer.unpin(a)
    step("pinning the matrix")
    arrays = [transfer.pin(a) for a in (S.data, S.indices, S.indptr)]
    P = sp.csr_array(tuple(arrays), shape=S.shape, copy=False)
    P.has_canonical_format = True
    try:
        timed_upload("upload_csr, pinned arrays", P, reference)
        step("out-of-core SpMV")
        out_of_core = _bench_out_of_core(P, reference, backend, repeat, nbytes, h2d["pinned"])
        if out_of_core.pop("wrong"):
            wrong.append("out-of-core SpMV")
        reports["out-of-core SpMV"] = out_of_core.pop("report")
    finally:
        for a in arrays:
            transfer.unpin(a)
    return {"backend": backend,
            "matrix": {"rows": rows, "per_row": per_row, "nnz": int(S.nnz), "bytes": nbytes, "build_s": build_s},
            "h2d": h2d, "rows": results, "validation": validation, "out_of_core": out_of_core,
            "out_of_core_ordinary": ordinary, "reports": reports,
            "status": "wrong" if wrong else "ok", "wrong": wrong}


def _bench_validation(S: sp.csr_array, reference: Any, backend: str, repeat: int, wrong: list[str]) -> dict[str, Any]:
    """The same upload with the structure checks (``check=True``) and without, timed in turn:
    their ratio is what validation costs (the target is at most 1.05 on the 2.48 GB matrix)."""
    both = _interleaved_medians({"checked": lambda: transfer.upload_csr(S, backend=backend, check=True),
                                 "unchecked": lambda: transfer.upload_csr(S, backend=backend, check=False)},
                                backend, repeat)
    for name, (_, matrix) in both.items():
        if not _same_csr(matrix, reference):
            wrong.append(f"upload_csr, check={name == 'checked'}")
    checked_s, unchecked_s = both["checked"][0], both["unchecked"][0]
    return {"checked_s": checked_s, "unchecked_s": unchecked_s, "ratio": checked_s / unchecked_s}


def _bench_out_of_core(P: sp.csr_array, reference: Any, backend: str, repeat: int, nbytes: int,
                       pinned_gbps: float | None) -> dict[str, Any]:
    """Out-of-core SpMV of ``P`` under a budget of half its bytes, x resident: construction,
    first product and the median of the later ones."""
    budget = nbytes // 2
    start = time.perf_counter()
    A = transfer.OutOfCoreCSR(P, device_budget_bytes=budget, backend=backend)
    construct_s = time.perf_counter() - start
    x = np.random.default_rng(1).random(P.shape[1])
    if backend == "gpu":
        import cupy

        x = cupy.asarray(x)
    expected = reference @ x
    start = time.perf_counter()
    A.spmv(x)
    synchronize(backend)
    first_s = time.perf_counter() - start
    seconds, y = _median_seconds(lambda: A.spmv(x), backend, repeat)
    A.spmv(x, report=True)  # the timeline, from a run of its own (its events are not in the timing)
    copy_s = nbytes / (pinned_gbps * 1e9) if pinned_gbps else None  # None on the CPU backend
    xp = reference._xp
    return {"budget_bytes": budget, "blocks": len(A.blocks), "seconds": seconds, "pinned_copy_s": copy_s,
            "construct_s": construct_s, "first_s": first_s,
            "ratio": seconds / copy_s if copy_s else None, "wrong": not bool(xp.array_equal(y, expected)),
            "report": repr(A.last_report)}


def print_transfer(result: dict[str, Any], file: Any = None) -> None:
    """The benchmark's table and per-stage timelines, as text. Without a GPU (CPU backend) it
    says nothing was transferred and gives host times only."""
    out = file or sys.stdout
    matrix, h2d = result["matrix"], result["h2d"]
    on_gpu = result.get("backend", "gpu") == "gpu"
    rates = (f"H2D pinned {h2d['pinned']:.1f} GB/s, pageable {h2d['pageable']:.1f} GB/s" if on_gpu
             else "no GPU: nothing was transferred (host times of the CPU path)")
    print(f"\nStreamed transfers: CSR {matrix['rows']} rows x {matrix['per_row']} per row, "
          f"{matrix['bytes'] / 1e9:.2f} GB (built in {matrix['build_s']:.1f} s); {rates}", file=out)
    print(f"{'what':<62} {'ms':>9} {'GB/s':>7} {'% pinned':>9} {'x cupyx':>8}", file=out)
    for row in result["rows"]:
        ratio = f"{row['vs_cupyx']:.2f}" if row["vs_cupyx"] else "-"
        gbps = f"{row['gbps']:7.1f}" if row["gbps"] is not None else f"{'-':>7}"
        share = f"{row['of_pinned'] * 100:8.0f}%" if row["of_pinned"] is not None else f"{'-':>9}"
        print(f"{row['what']:<62} {row['seconds'] * 1e3:9.1f} {gbps} {share} {ratio:>8}", file=out)
    check = result["validation"]
    target = "(target <= 1.05)" if on_gpu else "(host checks of the CPU path)"
    print(f"validation: upload_csr check=True {check['checked_s'] * 1e3:.1f} ms, check=False "
          f"{check['unchecked_s'] * 1e3:.1f} ms: ratio {check['ratio']:.3f} {target}", file=out)
    for label, key in (("pinned arrays", "out_of_core"), ("ordinary arrays", "out_of_core_ordinary")):
        ooc = result.get(key)
        if ooc is None:
            continue
        against = (f"vs pinned copy of its bytes {ooc['pinned_copy_s'] * 1e3:.1f} ms: ratio {ooc['ratio']:.3f} "
                   "(target <= 1.15)" if ooc["ratio"] is not None else "(no GPU: no copy to compare with)")
        print(f"out-of-core SpMV from {label}, budget {ooc['budget_bytes'] / 1e9:.2f} GB ({ooc['blocks']} blocks): "
              f"construction {ooc['construct_s'] * 1e3:.1f} ms, first product {ooc['first_s'] * 1e3:.1f} ms, "
              f"later {ooc['seconds'] * 1e3:.1f} ms {against}", file=out)
    print("per-stage timelines:", file=out)
    for what, text in result["reports"].items():
        print(f"  {what}: {text}", file=out)
    if result["wrong"]:
        print(f"WRONG: {', '.join(result['wrong'])}", file=out)


def failures(result: dict[str, Any] | None) -> list[str]:
    """``transfer/<what>`` for each wrong result."""
    return [f"transfer/{what}" for what in (result or {}).get("wrong", [])]
