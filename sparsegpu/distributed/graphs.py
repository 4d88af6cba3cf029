"""Graph functions over a :class:`DistributedCSR` adjacency: PageRank with NetworkX's iteration
(as :func:`sparsegpu.csgraph.pagerank`) and breadth-first levels, every step a distributed
product and rank-local vector work, every decision taken from sums made in rank order, so every
rank stops at the same step.

>>> import numpy as np, scipy.sparse as sp
>>> from sparsegpu.distributed import DistributedCSR, world
>>> S = sp.csr_array(np.array([[0, 1, 1], [0, 0, 1], [1, 0, 0]], dtype=float))
>>> A = DistributedCSR.from_scipy(S, world(), backend="cpu")
>>> np.round(pagerank(A).allgather(), 4).tolist()
[0.3878, 0.2148, 0.3974]
>>> breadth_first_levels(A, 1).allgather().tolist()
[2, 0, 1]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu import _validate
from sparsegpu._backend import array_module
from sparsegpu.distributed.matrix import DistributedCSR
from sparsegpu.distributed.vector import DistributedVector

__all__ = ["breadth_first_levels", "pagerank"]


class PowerIterationFailedConvergence(RuntimeError):
    """No iterate passed the stopping test within ``max_iter`` iterations."""


def _square(name: str, A: Any) -> DistributedCSR:
    if not isinstance(A, DistributedCSR):
        raise TypeError(f"{name} must be a DistributedCSR, got {type(A).__name__}")
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be square, got shape {A.shape}")
    return A


def _transpose(A: DistributedCSR, pattern: bool) -> DistributedCSR:
    """A^T (its values, or ones with ``pattern``), built once and kept on ``A``."""
    cache = A.__dict__.setdefault("_graph_transposes", {})
    if pattern not in cache:
        cache[pattern] = A.transpose(pattern=pattern)
    return cache[pattern]


def pagerank(A: DistributedCSR, alpha: float = 0.85, max_iter: int = 100, tol: float = 1.0e-6) -> DistributedVector:
    """PageRank of the weighted directed graph ``A`` (A[i, j]: the edge i -> j and its weight),
    NetworkX's iteration and stopping test (collective).

    Parameters
    ----------
    A : DistributedCSR
        Square; weights finite and non-negative.
    alpha : float, optional
        Damping factor in (0, 1) (default 0.85).
    max_iter : int, optional
        Iterations at most (default 100).
    tol : float, optional
        Stop when the l1 change is below ``N * tol`` (default 1e-6).

    Returns
    -------
    DistributedVector
        The ranks, split as A's rows; ``.allgather()`` gives the whole vector.

    Raises
    ------
    TypeError
        ``A`` not a DistributedCSR.
    ValueError
        ``A`` not square; ``alpha``, ``max_iter`` or ``tol`` out of range.
    PowerIterationFailedConvergence
        No convergence within ``max_iter`` iterations.
    """
    A = _square("A", A)
    alpha = _validate.check_real_finite("alpha", alpha)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    max_iter = _validate.check_int("max_iter", max_iter, minimum=1)
    tol = _validate.check_real_finite("tol", tol)
    if tol <= 0:
        raise ValueError(f"tol must be positive, got {tol}")
    n = A.shape[0]
    part = A.row_partition
    xp = array_module(A.backend)
    out_weight = A @ DistributedVector(xp.ones(part.local_size), part)  # row sums (all ranks' columns)
    dangling = out_weight.local == 0
    inverse = DistributedVector(xp.where(dangling, 0.0, 1.0 / xp.where(dangling, 1.0, out_weight.local)), part)
    mask = DistributedVector(dangling.astype(np.float64), part)
    T = _transpose(A, pattern=False)
    x = DistributedVector(xp.full(part.local_size, 1.0 / n), part)
    for _ in range(max_iter):
        carried = (x * mask).sum()
        new = T @ (x * inverse)
        new.local += carried / n
        new.scale(alpha)
        new.local += (1 - alpha) / n
        change = DistributedVector(xp.abs(new.local - x.local), part).sum()
        x = new
        if change < n * tol:
            return x
    raise PowerIterationFailedConvergence(f"power iteration failed to converge within {max_iter} iterations")


def breadth_first_levels(A: DistributedCSR, source: int) -> DistributedVector:
    """Each vertex's number of edges from ``source`` along A's edges (A[i, j]: i -> j; a stored
    entry is an edge whatever its value), -1 where unreached (collective). Level-synchronous:
    a level is one product with the pattern of A^T.

    Parameters
    ----------
    A : DistributedCSR
        Square.
    source : int
        The start vertex, in [0, N).

    Returns
    -------
    DistributedVector
        int64 levels, split as A's rows.

    Raises
    ------
    TypeError, ValueError
        ``A`` not a square DistributedCSR; ``source`` not an integer in range.
    """
    A = _square("A", A)
    n = A.shape[0]
    source = _validate.check_int("source", source, minimum=0)
    if source >= n:
        raise ValueError(f"source must be below {n}, got {source}")
    part = A.row_partition
    xp = array_module(A.backend)
    T = _transpose(A, pattern=True)
    levels = xp.full(part.local_size, -1, dtype=np.int64)
    frontier = xp.zeros(part.local_size)
    if part.start <= source < part.stop:
        levels[source - part.start] = 0
        frontier[source - part.start] = 1.0
    depth = 0
    while True:
        reach = T @ DistributedVector(frontier, part)  # in-edges from the frontier, counted
        new = (reach.local > 0) & (levels < 0)
        if DistributedVector(new.astype(np.float64), part).sum() == 0:
            return DistributedVector(levels, part)
        depth += 1
        levels[new] = depth
        frontier = new.astype(np.float64)
