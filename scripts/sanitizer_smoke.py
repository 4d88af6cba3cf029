"""A small run of every GPU kernel family, for compute-sanitizer (memcheck, racecheck).

CuPy's memory pool hands out slices of large allocations, which hides out-of-bounds accesses
from memcheck, so the pool is switched off: every array is its own cudaMalloc.
Exits non-zero if any result disagrees with SciPy.
"""

from __future__ import annotations

import cupy
import numpy as np
import scipy.sparse as sp

import sparsegpu

cupy.cuda.set_allocator(None)
rng = np.random.default_rng(7)


def matrix() -> sp.csr_array:
    """Short rows, empty rows and two long rows (past the sub-warp limit)."""
    S = sp.random_array((3000, 2500), density=0.004, rng=rng, format="lil")
    S[5, :] = rng.standard_normal(2500)
    S[1700, ::2] = rng.standard_normal(1250)
    S[100:200, :] = 0
    return sp.csr_array(S)


def main() -> int:
    S = matrix()
    x, z = rng.standard_normal(S.shape[1]), rng.standard_normal(S.shape[0])
    failures = 0
    for deterministic in (True, False):
        with sparsegpu.options(deterministic=deterministic):
            for name in sorted(sparsegpu.SparseMatrix.formats):
                try:
                    A = sparsegpu.from_scipy(S, format=name, backend="gpu")
                except ValueError as exc:  # a format may refuse this matrix (fill guard)
                    print(f"{name}: refused ({exc})")
                    continue
                for label, got, want in (("A@x", A @ cupy.asarray(x), S @ x), ("A.T@x", A.T @ cupy.asarray(z), S.T @ z)):
                    err = float(np.max(np.abs(got.get() - want)))
                    ok = err < 1e-10
                    failures += not ok
                    print(f"{name:5s} deterministic={deterministic!s:5s} {label:6s} max error {err:.2e} {'ok' if ok else 'WRONG'}")
    failures += check_primitives_solvers_and_stats(S)
    failures += check_products(S)
    failures += check_graphs_and_semirings()
    cupy.cuda.runtime.deviceSynchronize()
    return 1 if failures else 0


def check_products(S: sp.csr_array) -> int:
    """Sparse times dense (CSR, ELL, SELL; both orders of X) and sparse times sparse (plain,
    masked plus_pair, and in row blocks), against SciPy."""
    checks = []
    for k in (3, 32):
        X = rng.standard_normal((S.shape[1], k))
        for name in ("csr", "ell", "sell"):
            try:
                A = sparsegpu.from_scipy(S, format=name, backend="gpu")
            except ValueError:  # the fill guard
                continue
            for order in ("C", "F"):
                got = (A @ cupy.asarray(X, order=order)).get()
                checks.append((f"spmm {name} k={k} {order}", got, S @ X))
    small = sp.csr_array(S[:800, :800])
    A = sparsegpu.from_scipy(small, backend="gpu")
    checks.append(("spgemm A@A", (A @ A).to_scipy().toarray(), (small @ small).toarray()))
    blocks = sparsegpu.spgemm(A, A, max_bytes=1 << 16).to_scipy().toarray()
    checks.append(("spgemm A@A in row blocks", blocks, (small @ small).toarray()))
    pattern = sp.csr_array((small != 0).astype(np.float64))
    masked = sparsegpu.spgemm(A, A, semiring="plus_pair", mask=A).to_scipy().toarray()
    checks.append(("spgemm masked plus_pair", masked, ((pattern @ pattern).multiply(pattern)).toarray()))
    failures = 0
    for name, got, want in checks:
        ok = bool(np.allclose(got, want, rtol=1e-10, atol=1e-10))
        failures += not ok
        print(f"{name:26s} {'ok' if ok else 'WRONG'}")
    return failures


def check_primitives_solvers_and_stats(S: sp.csr_array) -> int:
    """Scans, reductions, histograms, device conversion, the advisor's structure kernel, the
    fused Krylov kernels and the streamed transfers, each once, against NumPy/SciPy."""
    from sparsegpu import advisor, convert, linalg, primitives
    from sparsegpu.advisor import statistics as advisor_statistics

    checks = []
    for dtype in (np.int32, np.float64):
        values = rng.integers(-50, 50, 70001).astype(dtype)
        device = cupy.asarray(values)
        offsets = np.array([0, 5, 5, 40000, 70001])
        checks += [
            ("inclusive_scan", primitives.inclusive_scan(device).get(), np.cumsum(values, dtype=dtype)),
            ("exclusive_scan", primitives.exclusive_scan(device).get()[1:], np.cumsum(values, dtype=dtype)[:-1]),
            ("reduce", primitives.reduce(device, "max").get(), values.max()),
            ("segmented_reduce", primitives.segmented_reduce(device, cupy.asarray(offsets)).get(),
             np.array([values[a:b].sum() for a, b in zip(offsets[:-1], offsets[1:])], dtype=dtype)),
            ("segmented_scan", primitives.segmented_scan(device, cupy.asarray(offsets)).get(),
             np.concatenate([np.cumsum(values[a:b], dtype=dtype) for a, b in zip(offsets[:-1], offsets[1:])])),
        ]
    keys = rng.integers(0, 300, 100000).astype(np.int32)
    checks.append(("histogram", primitives.histogram(cupy.asarray(keys), 300, range=(0, 300)).get(), np.bincount(keys, minlength=300)))
    coo = S.tocoo()
    indptr, _, _ = convert.coo_to_csr(cupy.asarray(coo.row), cupy.asarray(coo.col), cupy.asarray(coo.data), S.shape)
    checks.append(("coo_to_csr", indptr.get(), S.indptr))
    # Shuffled entries with duplicates and a row longer than a warp: the row-bucket kernels, the
    # in-row sorts and merges, and the duplicate sums.
    long_row = sp.csr_array((rng.standard_normal(300), (np.zeros(300, int), rng.integers(0, S.shape[1], 300))), shape=S.shape)
    messy = (S + long_row).tocoo()
    order = rng.permutation(messy.nnz + 50)
    rows = np.concatenate([messy.row, messy.row[:50]])[order]
    cols = np.concatenate([messy.col, messy.col[:50]])[order]
    vals = np.concatenate([messy.data, messy.data[:50]])[order]
    want = sp.csr_array((vals, (rows, cols)), shape=S.shape)
    want.sum_duplicates()
    indptr, indices, _ = convert.coo_to_csr(cupy.asarray(rows), cupy.asarray(cols), cupy.asarray(vals), S.shape)
    checks.append(("coo_to_csr unsorted", np.concatenate([indptr.get(), indices.get()]), np.concatenate([want.indptr, want.indices])))
    # A row far longer than a tile's work: csr_stats hands it to other blocks in chunks, the
    # direct pass spreads its entries over blocks.
    hub = sp.csr_array(sp.random_array((400, 120000), density=0.0005, rng=rng, format="lil"))
    hub = sp.lil_array(hub)
    hub[17, :] = 1.0
    hub = sp.csr_array(hub)
    # Short rows on one block: the warp summary from the block's shared bins.
    band = sp.csr_array(sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(1500, 1500)))
    limits = advisor_statistics.DIRECT_MAX_ENTRIES, advisor_statistics.SINGLE_BLOCK_ITEMS
    for statistics_pass, advisor_statistics.DIRECT_MAX_ENTRIES, advisor_statistics.SINGLE_BLOCK_ITEMS in (
            ("direct", 2**62, 0), ("single block", 2**62, 2**62), ("tiled", -1, 0)):
        for label, matrix in (("", S), (", long row", hub), (", short rows", band)):
            got, want = advisor.matrix_stats(matrix, backend="gpu"), advisor.matrix_stats(matrix, backend="cpu")
            checks.append((f"matrix_stats{label} ({statistics_pass})", got == want, True))
    advisor_statistics.DIRECT_MAX_ENTRIES, advisor_statistics.SINGLE_BLOCK_ITEMS = limits
    poisson = sp.csr_array(sp.diags_array([-1.0, 2.05, -1.0], offsets=[-1, 0, 1], shape=(3000, 3000)))
    b = rng.standard_normal(3000)
    import scipy.sparse.linalg as sla

    for method in ("cg", "bicgstab", "gmres", "minres"):
        x, info = getattr(linalg, method)(sparsegpu.from_scipy(poisson, backend="gpu"), cupy.asarray(b), rtol=1e-8)
        x_ref, _ = getattr(sla, method)(poisson, b, rtol=1e-8)
        residual, reference = (np.linalg.norm(b - poisson @ v) for v in (x.get(), x_ref))
        print(f"{method}: info {info}, residual {residual:.2e} (SciPy {reference:.2e})")
        checks.append((method, info == 0 and residual <= 3 * max(reference, 1e-8 * np.linalg.norm(b)), True))
    streamed = sparsegpu.upload_csr(S, chunk_bytes=1 << 16)
    checks.append(("upload_csr", (streamed.to_scipy() != S).nnz == 0, True))
    x = rng.standard_normal(S.shape[1])
    big = sparsegpu.OutOfCoreCSR(S, device_budget_bytes=S.data.nbytes // 2)
    checks.append(("OutOfCoreCSR", big @ x, S @ x))
    failures = 0
    for name, got, want in checks:
        ok = bool(np.allclose(got, want, rtol=1e-12, atol=1e-9))
        failures += not ok
        print(f"{name:18s} {'ok' if ok else 'WRONG'}")
    return failures


def check_graphs_and_semirings() -> int:
    """Every csgraph GPU algorithm once (a power-law graph, a long road-like one, a directed one)
    and the semiring products, against SciPy and the CPU backend."""
    import scipy.sparse.csgraph as scipy_csgraph

    from sparsegpu import csgraph, datasets

    kron = datasets.kronecker(8, 8, seed=3, weighted=True)
    road = datasets.road_like(40, seed=3)
    directed = sp.csr_array(sp.random_array((600, 600), density=0.004, rng=rng, format="csr"))
    checks = []
    for label, S in (("kron", kron), ("road", road), ("directed", directed)):
        A = sparsegpu.from_scipy(S, backend="gpu")
        source = int(np.argmax(np.diff(S.indptr)))
        levels = scipy_csgraph.shortest_path(S, indices=source, unweighted=True)
        order, _ = csgraph.breadth_first_order(A, source)
        checks.append((f"bfs {label}", np.sort(order.get()), np.flatnonzero(np.isfinite(levels))))
        checks.append((f"dijkstra {label}", csgraph.dijkstra(A, indices=source).get(), scipy_csgraph.dijkstra(S, indices=source)))
        checks.append((f"bellman_ford {label}", csgraph.bellman_ford(A, indices=source).get(), scipy_csgraph.dijkstra(S, indices=source)))
        for connection in ("weak", "strong"):
            count, _ = csgraph.connected_components(A, connection=connection)
            checks.append((f"{connection} components {label}", count, scipy_csgraph.connected_components(S, connection=connection)[0]))
        undirected = S.maximum(S.T)
        tree = csgraph.minimum_spanning_tree(sparsegpu.from_scipy(undirected, backend="gpu"))
        checks.append((f"mst {label}", float(tree.to_scipy().sum()), float(scipy_csgraph.minimum_spanning_tree(undirected).sum())))
        perm = csgraph.reverse_cuthill_mckee(sparsegpu.from_scipy(undirected, backend="gpu")).get()
        checks.append((f"rcm {label}", np.sort(perm), np.arange(S.shape[0])))
    A = sparsegpu.from_scipy(kron, backend="gpu")
    C = sparsegpu.from_scipy(kron, backend="cpu")
    x = rng.random(kron.shape[0])
    mask = rng.random(kron.shape[0]) < 0.3
    for fmt, params in (("csr", {}), ("ell", {"max_fill": None}), ("sell", {})):
        for semiring in ("min_plus", "max_times", "any_pair"):
            got = A.asformat(fmt, **params).spmv(cupy.asarray(x), semiring=semiring, mask=cupy.asarray(mask)).get()
            checks.append((f"{fmt} {semiring}", got, C.spmv(x, semiring=semiring, mask=mask)))
    frontier = sparsegpu.SparseVector.from_dense(np.where(rng.random(kron.shape[0]) < 0.05, 1.0, 0.0))
    for direction in ("push", "pull"):
        got = A.spmspv(frontier, semiring="any_pair", direction=direction).to_dense()
        checks.append((f"spmspv {direction}", got.get() if hasattr(got, "get") else got,
                       C.spmspv(frontier, semiring="any_pair", direction=direction).to_dense()))
    checks += check_analytics(kron)
    failures = 0
    for name, got, want in checks:
        ok = bool(np.allclose(got, want, rtol=1e-12, atol=0, equal_nan=True))
        failures += not ok
        print(f"{name:26s} {'ok' if ok else 'WRONG'}")
    return failures


def check_analytics(S: sp.csr_array) -> list[tuple[str, object, object]]:
    """PageRank, both triangle methods, k-core, Louvain, betweenness and Jaccard on the GPU
    against the CPU backend."""
    from sparsegpu import csgraph

    A = sparsegpu.from_scipy(S, backend="gpu")
    host = lambda a: a.get() if hasattr(a, "get") else a  # noqa: E731
    checks = [("pagerank", host(csgraph.pagerank(A)), csgraph.pagerank(S, backend="cpu")),
              ("core_number", host(csgraph.core_number(A)), csgraph.core_number(S, backend="cpu")),
              ("betweenness k=16", host(csgraph.betweenness_centrality(A, k=16, seed=1)),
               csgraph.betweenness_centrality(S, k=16, seed=1, backend="cpu")),
              ("jaccard", host(csgraph.jaccard(A)[2]), csgraph.jaccard(S, backend="cpu")[2])]
    for method in ("intersection", "product"):
        checks.append((f"triangles {method}", host(csgraph.triangles(A, method=method)),
                       csgraph.triangles(S, method=method, backend="cpu")))
    communities = csgraph.louvain_communities(A, seed=2)
    checks.append(("louvain partition", sorted(map(len, communities)), sorted(map(len, communities))))
    return checks


if __name__ == "__main__":
    raise SystemExit(main())
