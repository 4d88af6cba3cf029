"""Distributed PageRank and BFS against the one-process functions, and the distributed transpose."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph as scipy_csgraph

from sparsegpu import csgraph, datasets
from sparsegpu.distributed import DistributedCSR
from sparsegpu.distributed.graphs import PowerIterationFailedConvergence, breadth_first_levels, pagerank
from tests.distributed.conftest import check_all, raises_everywhere
from tests.distributed.matrices import crossing


def directed_graph(rng, n):
    """A random directed graph with dangling vertices and edges across every rank."""
    S = crossing(rng, n, density=4 / n)
    S = sp.csr_array(S)
    S.data = np.abs(S.data) + 0.1
    rows = np.repeat(np.arange(n), np.diff(S.indptr))
    S.data[rows % 7 == 0] = 0  # vertices without out-edges
    S.eliminate_zeros()
    return S


def test_transpose_equals_scipy(comm, shared_rng):
    S = crossing(shared_rng, 120, 90, density=0.05)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    T = A.transpose()
    x = shared_rng.random(120)
    check_all(comm, T.shape == (90, 120), "the transposed shape")
    check_all(comm, np.array_equal((T @ x).allgather(), S.T.tocsr() @ x), "A^T x as SciPy's")
    P = A.transpose(pattern=True)
    check_all(comm, np.array_equal((P @ x).allgather(), (S != 0).T.astype(float).tocsr() @ x), "the pattern")


@pytest.mark.parametrize("graph", ["directed", "kron"])
def test_pagerank_equals_the_one_process_function(comm, shared_rng, graph):
    S = directed_graph(shared_rng, 300) if graph == "directed" else sp.csr_array(datasets.kronecker(9, 8, seed=2))
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    got = pagerank(A).allgather()
    want = csgraph.pagerank(S, backend="cpu")
    check_all(comm, np.abs(got - want).sum() < 1e-9, "the ranks agree with csgraph.pagerank")
    check_all(comm, np.array_equal(pagerank(A).allgather(), got), "a second run repeats bit for bit")
    raises_everywhere(comm, PowerIterationFailedConvergence, pagerank, A, max_iter=1)
    raises_everywhere(comm, ValueError, pagerank, A, alpha=1.5)


def test_bfs_levels_equal_scipy(comm, shared_rng):
    S = directed_graph(shared_rng, 400)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    for source in (1, 399, int(shared_rng.integers(400))):
        got = breadth_first_levels(A, source).allgather()
        hops = scipy_csgraph.shortest_path(S, indices=source, unweighted=True)
        want = np.where(np.isinf(hops), -1, hops).astype(np.int64)
        check_all(comm, np.array_equal(got, want), f"levels from {source}")
    raises_everywhere(comm, ValueError, breadth_first_levels, A, 400)
    raises_everywhere(comm, TypeError, breadth_first_levels, S, 0)
