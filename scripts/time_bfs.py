"""Time the GPU breadth-first search against SciPy, each launch scheme of the device search.

    python3 scripts/time_bfs.py [--kron21] [--repeat N]

Graphs: luxembourg_osm (needs SPARSEGPU_MATRICES), road_like:1000, kron:18 (and kron:21 with
--kron21), the source as the graph benchmarks pick it. For each scheme of the device search
(single: the single-block kernel alternating with the persistent one; block0: the persistent
kernel alone, block 0 running the small levels; grid: the persistent kernel alone, every level
on the grid) it prints the median of the device call on device arrays (`device ms`: allocation,
launches, the host's reads of the finished word) and of the public call on a GPU matrix
(`call ms`: breadth_first_order with predecessors), and SciPy's median. Every scheme's levels
and predecessors are checked against the first's, and the levels against SciPy's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scipy.sparse import csgraph

from sparsegpu import csgraph as sg_csgraph
from sparsegpu.advisor import from_scipy
from sparsegpu.bench.graphs import build_graph
from sparsegpu.csgraph import _device_bfs

SCHEMES = {"single": {"SINGLE_BLOCK": True},
           "block0": {"SINGLE_BLOCK": False, "SMALL_FRONTIER": _device_bfs.SMALL_FRONTIER},
           "grid": {"SINGLE_BLOCK": False, "SMALL_FRONTIER": 0}}


def median_ms(call, repeat: int, sync) -> float:
    call()
    sync()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        sync()
        samples.append(time.perf_counter() - start)
    return 1e3 * statistics.median(samples)


def scipy_levels(S, source: int) -> np.ndarray:
    order, preds = csgraph.breadth_first_order(S, source, directed=True, return_predecessors=True)
    levels = np.full(S.shape[0], -1, dtype=np.int32)
    levels[order[0]] = 0
    for v in order[1:]:
        levels[v] = levels[preds[v]] + 1
    return levels


def time_graph(name: str, repeat: int) -> None:
    import cupy

    graph = build_graph(name)
    S, source = graph.S, graph.source
    S.sort_indices()
    indptr, indices = cupy.asarray(S.indptr), cupy.asarray(S.indices)
    extra = {}
    if not graph.symmetric:
        T = S.T.tocsr()
        T.sort_indices()
        extra = {"in_indptr": cupy.asarray(T.indptr.astype(S.indices.dtype)), "in_indices": cupy.asarray(T.indices)}
    A = from_scipy(S, "csr", backend="gpu")
    scipy_ms = median_ms(lambda: csgraph.breadth_first_order(S, source, directed=True, return_predecessors=True),
                         max(3, repeat // 4), lambda: None)
    expected = scipy_levels(S, source)
    print(f"{name}: {S.shape[0]} vertices, {S.nnz} edges, {int(expected.max()) + 1} levels, "
          f"SciPy {scipy_ms:.3f} ms")
    first = None
    for scheme, settings in SCHEMES.items():
        saved = {key: getattr(_device_bfs, key) for key in settings}
        for key, value in settings.items():
            setattr(_device_bfs, key, value)
        try:
            levels, preds = (x.get() for x in _device_bfs.bfs(indptr, indices, source, **extra))
            device_ms = median_ms(lambda: _device_bfs.bfs(indptr, indices, source, **extra), repeat,
                                  cupy.cuda.Device().synchronize)
            call_ms = median_ms(lambda: sg_csgraph.breadth_first_order(A, source, directed=True,
                                                                       return_predecessors=True),
                                repeat, cupy.cuda.Device().synchronize)
        finally:
            for key, value in saved.items():
                setattr(_device_bfs, key, value)
        first = first or (levels, preds)
        same = np.array_equal(levels, expected) and np.array_equal(levels, first[0]) and np.array_equal(preds, first[1])
        print(f"  {scheme:7s} device {device_ms:8.3f} ms  call {call_ms:8.3f} ms  "
              f"SciPy/call {scipy_ms / call_ms:6.2f}x  {'ok' if same else 'MISMATCH'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kron21", action="store_true", help="also kron:21")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    names = ["luxembourg_osm", "road_like:1000", "kron:18"] + (["kron:21"] if args.kron21 else [])
    for name in names:
        try:
            time_graph(name, args.repeat)
        except FileNotFoundError as exc:
            print(f"{name}: skipped ({exc})")


if __name__ == "__main__":
    main()
