"""Measure the CSR kernel at every threads-per-row setting against cuSPARSE (through cupyx)
and the device copy ceiling, on large generated matrices; the figures behind
``sparsegpu.formats._compressed.threads_per_row``. Run on the GPU machine:

    python3 scripts/calibrate_csr.py [OUT.json]
"""

from __future__ import annotations

import json
import sys
import time

import cupy
import cupyx.scipy.sparse as cusp
import numpy as np
import scipy.sparse as sp

import sparsegpu
from sparsegpu.formats._compressed import THREADS_PER_ROW


def poisson2d(k: int) -> sp.csr_array:
    one = sp.diags_array([-np.ones(k - 1), 4 * np.ones(k), -np.ones(k - 1)], offsets=[-1, 0, 1])
    eye = sp.eye_array(k)
    off = sp.diags_array([-np.ones(k - 1), -np.ones(k - 1)], offsets=[-1, 1])
    return sp.csr_array(sp.kron(eye, one) + sp.kron(off, eye))


def stencil27(k: int) -> sp.csr_array:
    band = sp.diags_array([np.ones(k - 1), np.ones(k), np.ones(k - 1)], offsets=[-1, 0, 1])
    return sp.csr_array(sp.kron(sp.kron(band, band), band))


def rmat(scale: int, edges_per_vertex: int, seed: int = 1) -> sp.csr_array:
    rng = np.random.default_rng(seed)
    n, m = 2**scale, 2**scale * edges_per_vertex
    a, b, c = 0.57, 0.19, 0.19
    rows = np.zeros(m, np.int64)
    cols = np.zeros(m, np.int64)
    for _ in range(scale):
        r = rng.random(m, dtype=np.float32)
        rows = 2 * rows + (r >= a + b)
        cols = 2 * cols + (((r >= a) & (r < a + b)) | (r >= a + b + c))
    S = sp.csr_array((rng.standard_normal(m), (rows, cols)), shape=(n, n))
    S.sum_duplicates()
    return S


def random_rows(n: int, per_row: int, seed: int = 2) -> sp.csr_array:
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, n, n * per_row).astype(np.int32)
    S = sp.csr_array((rng.standard_normal(n * per_row), indices, np.arange(0, n * per_row + 1, per_row)), shape=(n, n))
    S.sum_duplicates()
    return S


def median_ms(fn, repeat: int = 40) -> float:
    for _ in range(5):
        fn()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeat):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return float(np.median(times))


def spmv_bytes(S) -> int:
    m, n = S.shape
    return 12 * S.nnz + 4 * (m + 1) + 8 * n + 8 * m


def main() -> None:
    results = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    src = cupy.random.random(2**28)
    dst = cupy.empty_like(src)
    copy_ms = median_ms(lambda: dst.__setitem__(slice(None), src), 20)
    copy_gbs = 2 * src.nbytes / copy_ms / 1e6
    del src, dst
    results["copy_GBps"] = copy_gbs
    print(f"device copy: {copy_gbs:.0f} GB/s", flush=True)
    cases = {"poisson2d_3000": lambda: poisson2d(3000), "stencil27_150": lambda: stencil27(150),
             "random16_4M": lambda: random_rows(2**22, 16), "rmat21": lambda: rmat(21, 16)}
    results["matrices"] = {}
    for name, make in cases.items():
        t0 = time.time()
        S = make()
        lengths = np.diff(S.indptr)
        x = cupy.random.standard_normal(S.shape[1])
        ref = cusp.csr_matrix(S)
        want = ref @ x
        t_cupyx = median_ms(lambda: ref @ x)
        A = sparsegpu.CSR.from_scipy(S, backend="gpu")
        y = cupy.empty(S.shape[0])
        row = {"rows": S.shape[0], "nnz": S.nnz, "max_row": int(lengths.max()), "mean_row": float(lengths.mean()),
               "cupyx_GBps": spmv_bytes(S) / t_cupyx / 1e6, "auto": None, "tpr": {}}
        for tpr in (None, *THREADS_PER_ROW):
            A.threads_per_row = tpr
            A.spmv(x, y)
            err = float(cupy.max(cupy.abs(y - want)) / cupy.max(cupy.abs(want)))
            t = median_ms(lambda: A.spmv(x, y))
            gbs = spmv_bytes(S) / t / 1e6
            key = "auto" if tpr is None else str(tpr)
            if tpr is None:
                row["auto"] = {"GBps": gbs, "tpr": A._cache["plan"].tpr, "err": err, "n_long": A._cache["plan"].n_long}
            else:
                row["tpr"][key] = {"GBps": gbs, "err": err}
        results["matrices"][name] = row
        print(f"{name}: built in {time.time() - t0:.1f}s  nnz={S.nnz}  cupyx {row['cupyx_GBps']:.0f} GB/s  "
              f"auto(tpr={row['auto']['tpr']}, long={row['auto']['n_long']}) {row['auto']['GBps']:.0f} GB/s "
              f"({row['auto']['GBps'] / copy_gbs:.0%} of copy, {row['auto']['GBps'] / row['cupyx_GBps']:.2f}x cupyx) err {row['auto']['err']:.1e}  "
              + " ".join(f"t{k}={v['GBps']:.0f}" for k, v in row["tpr"].items()), flush=True)
        del A, ref, S
        cupy.get_default_memory_pool().free_all_blocks()
    # Python overhead of one call on a small matrix: wall time of a synchronised call minus kernel time.
    S = random_rows(1000, 8)
    A = sparsegpu.CSR.from_scipy(S, backend="gpu")
    x, y = cupy.random.standard_normal(1000), cupy.empty(1000)
    kernel_ms = median_ms(lambda: A.spmv(x, y), 200)
    walls = []
    for _ in range(2000):
        cupy.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        A.spmv(x, y)
        walls.append(time.perf_counter() - t)
    launch_us = float(np.median(walls)) * 1e6
    results["overhead"] = {"host_call_us": launch_us, "event_ms": kernel_ms}
    print(f"1000-row spmv: host time per call (async launch) {launch_us:.1f} us; event-timed call {kernel_ms * 1000:.1f} us")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
