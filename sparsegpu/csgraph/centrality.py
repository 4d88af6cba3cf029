"""PageRank, Katz and eigenvector centrality by power iteration, with NetworkX's semantics.

Each function follows its NetworkX namesake (``networkx.pagerank``, ``katz_centrality``,
``eigenvector_centrality``, networkx 3.6): the same parameters and defaults, the same iteration,
the same stopping test (the l1 change between two iterates below ``N * tol``) and the same
normalisation; the result is the iterate at which NetworkX's loop would stop. Vertex i is
NetworkX node i and results are arrays indexed by vertex.

One iteration is one product with a matrix built once per graph and cached on it (a sparsegpu
matrix keeps its graph, so a second call on the same matrix builds nothing): A^T D^-1 for
PageRank (the transposed, row-normalised adjacency), A^T for the other two. On the GPU it is
stored in the format :func:`sparsegpu.advise` picks; on the CPU it is a CSR whose product is
SciPy's. Vector updates are array operations, and every reduction is
:func:`sparsegpu.primitives.reduce` (a fixed order on the GPU), so results are bitwise the same
run to run. The same code runs on both backends with NumPy or CuPy, except PageRank's vector
work on the GPU: one fused kernel per step after the product (kernels/graph_centrality.cu)
updates the iterate and sums its change and its dangling mass in a fixed order.

The convergence test stays on the device: each iteration's error goes into a device array that
is read back every ``check_every`` iterations. The iterates of a batch are kept in a ring of
``check_every + 1`` vectors, so the vector returned is the one of the first iteration that
passed, whatever ``check_every`` is: the iteration itself does not depend on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sparsegpu import _validate
from sparsegpu._backend import (
    array_module,
    backend_of,
    is_device_array,
    to_backend,
    to_host,
)
from sparsegpu.advisor import advise
from sparsegpu.csgraph._device_centrality import PagerankStep
from sparsegpu.csgraph._graph import Graph, as_graph
from sparsegpu.formats import CSR, SparseMatrix
from sparsegpu.primitives import reduce, segmented_reduce

__all__ = ["PowerIterationFailedConvergence", "eigenvector_centrality", "katz_centrality", "pagerank"]

#: Iterations between two reads of the stored errors (one host synchronisation each).
CHECK_EVERY = 8


class PowerIterationFailedConvergence(ArithmeticError):
    """The power iteration did not meet its tolerance within ``num_iterations`` iterations
    (NetworkX's exception of the same name and message)."""

    def __init__(self, num_iterations: int) -> None:
        super().__init__(f"power iteration failed to converge within {num_iterations} iterations")
        self.num_iterations = num_iterations


def pagerank(csgraph: Any, alpha: float = 0.85, personalization: Any = None, max_iter: int = 100,
             tol: float = 1.0e-6, nstart: Any = None, weight: bool | None = True, dangling: Any = None, *,
             directed: bool = True, check_every: int = CHECK_EVERY, backend: str | None = None) -> Any:
    """The PageRank of every vertex, as :func:`networkx.pagerank`.

    Iterates ``x = alpha * (x P + (x . dangling-vertices) d) + (1 - alpha) p`` from ``nstart``,
    where ``P`` is the row-normalised adjacency (row u divided by u's out-weight), ``d`` the
    ``dangling`` distribution and ``p`` the personalisation, until the l1 change is below
    ``N * tol``. A vertex is dangling when its out-weight is 0 (no out-edge, or only edges of
    weight 0).

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency: a stored ``A[u, v]`` is an edge u -> v of weight ``A[u, v]``
        (duplicates summed; in dense input 0, inf and NaN are "no edge"), so rank flows from u
        to v. With ``directed=True`` this is a ``networkx.DiGraph``.
    alpha : float, optional
        Damping factor, in (0, 1) (default 0.85).
    personalization : array_like, optional
        N non-negative weights, one per vertex, not all 0; scaled to sum to 1. Default uniform.
        (NetworkX takes a dict; entry i is node i's value, 0 for a node the dict omits.)
    max_iter : int, optional
        The most iterations (default 100).
    tol : float, optional
        The iteration stops when the l1 change is below ``N * tol`` (default 1e-6).
    nstart : array_like, optional
        N non-negative starting values, not all 0; scaled to sum to 1. Default uniform.
    weight : bool or None, optional
        True (default): the stored values are the weights. False or None: every edge weighs 1.
        (NetworkX names an edge attribute; None means unit weights there too.) Weights must be
        finite and non-negative.
    dangling : array_like, optional
        N non-negative weights, not all 0: where a dangling vertex's rank goes (scaled to sum
        to 1). Default: the personalisation.
    directed : bool, optional, keyword-only
        True (default): A as a ``DiGraph``. False: A as an undirected ``networkx.Graph``, each
        edge both ways (the smaller weight where both directions are stored; a symmetric A is
        read as it is).
    check_every : int, optional, keyword-only
        Iterations between two reads of the convergence test to the host (default 8). The
        result does not depend on it; the iteration keeps ``check_every + 1`` vectors of N.
    backend : {"cpu", "gpu"}, optional, keyword-only
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`); a sparsegpu matrix
        runs where it lives.

    Returns
    -------
    ndarray
        float64, length N: vertex i's rank (summing to 1 up to the tolerance). NumPy for host
        input, CuPy for a GPU sparsegpu matrix. Empty for N = 0.

    Raises
    ------
    PowerIterationFailedConvergence
        No convergence within ``max_iter`` iterations (``num_iterations`` says how many).
    TypeError
        ``csgraph`` not a graph; a parameter of the wrong type (a dict where an array is due).
    ValueError
        ``csgraph`` not square; ``alpha`` outside (0, 1); ``max_iter`` or ``check_every`` < 1;
        ``tol`` not positive; a vector of the wrong length, with negative or non-finite entries
        or summing to 0; NaN, infinite or negative weights (NetworkX does not check these).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph.centrality import pagerank
    >>> A = sp.csr_array(np.array([[0, 1, 1], [0, 0, 1], [1, 0, 0]], dtype=float))
    >>> np.round(pagerank(A, backend="cpu"), 4).tolist()
    [0.3878, 0.2148, 0.3974]
    >>> np.round(pagerank(A, personalization=[1, 0, 0], backend="cpu"), 4).tolist()
    [0.4522, 0.1922, 0.3556]
    """
    alpha = _validate.check_real_finite("alpha", alpha)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    max_iter, tol, check_every = _iteration_limits(max_iter, tol, check_every)
    weighted, directed = _weight(weight), _validate.check_bool("directed", directed)
    graph = as_graph(csgraph, backend).oriented(directed)
    n = graph.n
    p = _distribution("personalization", personalization, n)
    x0 = _distribution("nstart", nstart, n)
    d = _distribution("dangling", dangling, n)
    if weighted:
        _check_transition_weights(graph)
    xp = graph.xp
    if n == 0:
        return graph.output(xp.zeros(0))
    M, dangling_index = _transition_matrix(graph, weighted)
    p = xp.full(n, 1.0 / n) if p is None else to_backend(p, graph.backend)
    d = p if d is None else to_backend(d, graph.backend)
    teleport = (1 - alpha) * p
    start = xp.full(n, 1.0 / n) if x0 is None else to_backend(x0, graph.backend)
    if graph.backend == "gpu":  # the product, then one fused kernel writing the step's error
        dangling = xp.zeros(n, dtype=bool)
        dangling[dangling_index] = True
        fused = PagerankStep(dangling, d, teleport, alpha, start)

        def device_step(x: Any, out: Any, error: Any) -> None:
            M.spmv(x, out)
            fused.update(out, x, error)

        x, _ = _power_iterate(device_step, start, max_iter, n * tol, check_every, step_writes_error=True)
        return graph.output(x)

    def step(x: Any, out: Any) -> None:
        M.spmv(x, out)
        if dangling_index.size:
            out += reduce(x[dangling_index]) * d
        out *= alpha
        out += teleport

    x, _ = _power_iterate(step, start, max_iter, n * tol, check_every)
    return graph.output(x)


def katz_centrality(csgraph: Any, alpha: float = 0.1, beta: Any = 1.0, max_iter: int = 1000, tol: float = 1.0e-6,
                    nstart: Any = None, normalized: bool = True, weight: bool | None = False, *,
                    directed: bool = True, check_every: int = CHECK_EVERY, backend: str | None = None) -> Any:
    """The Katz centrality of every vertex, as :func:`networkx.katz_centrality`.

    Iterates ``x_v = alpha * sum over edges u -> v of A[u, v] x_u + beta_v`` from ``nstart``
    until the l1 change is below ``N * tol``, then scales x to unit Euclidean norm when
    ``normalized``. It converges when ``alpha`` is below 1 / (the largest eigenvalue of A).

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency: a stored ``A[u, v]`` is an edge u -> v (see :func:`pagerank`);
        a ``networkx.DiGraph`` with ``directed=True``, a ``networkx.Graph`` otherwise.
    alpha : float, optional
        Attenuation factor (default 0.1), finite.
    beta : float or array_like, optional
        The weight of each vertex's own term: one number for all (default 1.0) or N numbers.
    max_iter : int, optional
        The most iterations (default 1000).
    tol : float, optional
        Stop when the l1 change is below ``N * tol`` (default 1e-6).
    nstart : array_like, optional
        N finite starting values, used as given (default all 0).
    normalized : bool, optional
        Scale the result to unit Euclidean norm (default True; a zero vector stays zero).
    weight : bool or None, optional
        True: the stored values are the weights. False or None (default): every edge weighs 1.
    directed, check_every, backend : optional, keyword-only
        As for :func:`pagerank`.

    Returns
    -------
    ndarray
        float64, length N (NumPy for host input, CuPy for a GPU sparsegpu matrix). Empty for
        N = 0.

    Raises
    ------
    PowerIterationFailedConvergence
        No convergence within ``max_iter`` iterations.
    TypeError
        A parameter of the wrong type.
    ValueError
        ``csgraph`` not square; ``alpha`` not finite; ``max_iter`` or ``check_every`` < 1;
        ``tol`` not positive; ``beta`` or ``nstart`` of the wrong length or not finite; NaN
        weights.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph.centrality import katz_centrality
    >>> path = sp.diags_array([np.ones(3), np.ones(3)], offsets=[-1, 1])   # the path 0-1-2-3
    >>> phi = (1 + np.sqrt(5)) / 2                                         # its largest eigenvalue
    >>> np.round(katz_centrality(path, 1 / phi - 0.01, backend="cpu"), 2).tolist()
    [0.37, 0.6, 0.6, 0.37]
    """
    alpha = _validate.check_real_finite("alpha", alpha)
    max_iter, tol, check_every = _iteration_limits(max_iter, tol, check_every)
    normalized = _validate.check_bool("normalized", normalized)
    weighted, directed = _weight(weight), _validate.check_bool("directed", directed)
    graph = as_graph(csgraph, backend).oriented(directed)
    n = graph.n
    b = _validate.check_real_finite("beta", beta) if _is_scalar(beta) else _vector("beta", beta, n)
    x0 = _vector("nstart", nstart, n)
    if weighted:
        graph.check_weights("katz_centrality")
    xp = graph.xp
    if n == 0:
        return graph.output(xp.zeros(0))
    M = _adjacency_transpose(graph, weighted)
    b = b if isinstance(b, float) else to_backend(b, graph.backend)

    def step(x: Any, out: Any) -> None:
        M.spmv(x, out)
        out *= alpha
        out += b

    start = xp.zeros(n) if x0 is None else to_backend(x0, graph.backend)
    x, _ = _power_iterate(step, start, max_iter, n * tol, check_every)
    if normalized:
        norm = float(xp.sqrt(reduce(x * x)))
        x *= 1.0 / norm if norm != 0 else 1.0
    return graph.output(x)


def eigenvector_centrality(csgraph: Any, max_iter: int = 100, tol: float = 1.0e-6, nstart: Any = None,
                           weight: bool | None = False, *, directed: bool = True, check_every: int = CHECK_EVERY,
                           backend: str | None = None) -> Any:
    """The eigenvector centrality of every vertex, as :func:`networkx.eigenvector_centrality`.

    Power iteration with ``A + I`` (the shift keeps the eigenvectors and makes the dominant
    eigenvalue the one of largest modulus): ``x_v = x_v + sum over edges u -> v of A[u, v]
    x_u``, then x scaled to unit Euclidean norm, until the l1 change is below ``N * tol``. The
    result is the left eigenvector: a vertex's centrality adds up its predecessors'.

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency (N >= 1): a stored ``A[u, v]`` is an edge u -> v (see
        :func:`pagerank`); a ``networkx.DiGraph`` with ``directed=True``, a ``networkx.Graph``
        otherwise.
    max_iter : int, optional
        The most iterations (default 100).
    tol : float, optional
        Stop when the l1 change is below ``N * tol`` (default 1e-6).
    nstart : array_like, optional
        N finite starting values, not summing to 0; divided by their sum. Default all 1.
    weight : bool or None, optional
        True: the stored values are the weights. False or None (default): every edge weighs 1.
    directed, check_every, backend : optional, keyword-only
        As for :func:`pagerank`.

    Returns
    -------
    ndarray
        float64, length N, unit Euclidean norm (NumPy for host input, CuPy for a GPU
        sparsegpu matrix).

    Raises
    ------
    PowerIterationFailedConvergence
        No convergence within ``max_iter`` iterations.
    TypeError
        A parameter of the wrong type.
    ValueError
        ``csgraph`` not square, or empty (NetworkX: the null graph has no centrality);
        ``max_iter`` or ``check_every`` < 1; ``tol`` not positive; ``nstart`` of the wrong
        length, not finite, all 0 or summing to 0; NaN weights.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph.centrality import eigenvector_centrality
    >>> path = sp.diags_array([np.ones(3), np.ones(3)], offsets=[-1, 1])   # the path 0-1-2-3
    >>> np.round(eigenvector_centrality(path, backend="cpu"), 2).tolist()
    [0.37, 0.6, 0.6, 0.37]
    """
    max_iter, tol, check_every = _iteration_limits(max_iter, tol, check_every)
    weighted, directed = _weight(weight), _validate.check_bool("directed", directed)
    graph = as_graph(csgraph, backend).oriented(directed)
    n = graph.n
    if n == 0:
        raise ValueError("eigenvector_centrality: cannot compute centrality for the null graph (csgraph is 0 x 0)")
    x0 = _vector("nstart", nstart, n)
    if x0 is not None:
        if not x0.any():
            raise ValueError("nstart cannot have all zero values")
        total = float(x0.sum())
        if total == 0:
            raise ValueError("nstart must not sum to 0 (it is divided by its sum)")
        x0 = x0 / total
    if weighted:
        graph.check_weights("eigenvector_centrality")
    xp = graph.xp
    M = _adjacency_transpose(graph, weighted)
    scratch = xp.empty(n)

    def step(x: Any, out: Any) -> None:
        M.spmv(x, out)
        out += x
        norm = xp.sqrt(reduce(xp.multiply(out, out, out=scratch)))
        out /= norm + (norm == 0)  # NetworkX takes a zero norm as 1

    start = xp.full(n, 1.0 / n) if x0 is None else to_backend(x0, graph.backend)
    x, _ = _power_iterate(step, start, max_iter, n * tol, check_every)
    return graph.output(x)


# --------------------------------------------------------------------------- the iteration


def _power_iterate(step: Callable[..., None], start: Any, max_iter: int, threshold: float,
                   check_every: int, *, step_writes_error: bool = False) -> tuple[Any, int]:
    """(x_j, j) for the first j with ``|x_j - x_{j-1}|_1 < threshold``, where
    ``step(x_{k-1}, x_k)`` writes x_k (``step(x_{k-1}, x_k, error)`` with
    ``step_writes_error``, also writing that l1 change into the one-element array ``error``);
    PowerIterationFailedConvergence when no j <= max_iter passes. ``start`` (x_0) is this
    function's to overwrite.

    The errors are stored on the device and read every ``check_every`` iterations. The iterates
    live in a ring of ``check_every + 1`` vectors: a batch writes x_{c+1} .. x_{c+check_every}
    into distinct slots and the remaining slot holds x_c, its first input, so every iterate of
    the batch is still there when the batch's errors are read."""
    xp = array_module(backend_of(start))
    batch = min(check_every, max_iter)
    slots = batch + 1
    ring = [start] + [xp.empty_like(start) for _ in range(batch)]
    errors = xp.empty(max_iter, dtype=np.float64)
    scratch = xp.empty_like(start)
    checked = 0
    for k in range(max_iter):
        previous, current = ring[k % slots], ring[(k + 1) % slots]
        if step_writes_error:
            step(previous, current, errors[k:k + 1])
        else:
            step(previous, current)
            errors[k] = reduce(xp.abs(xp.subtract(current, previous, out=scratch), out=scratch))
        if k + 1 - checked == batch or k + 1 == max_iter:
            passed = np.flatnonzero(to_host(errors[checked:k + 1]) < threshold)
            if passed.size:
                j = checked + int(passed[0]) + 1
                return ring[j % slots], j
            checked = k + 1
    raise PowerIterationFailedConvergence(max_iter)


# --------------------------------------------------------------------------- matrices


def _transition_matrix(graph: Graph, weighted: bool) -> tuple[SparseMatrix, Any]:
    """(A^T D^-1, the dangling vertices), D the out-weights (rows of zero out-weight stay 0:
    their rank goes through the dangling term); built once and cached on the graph."""
    key = ("centrality_transition", weighted)
    if key not in graph._cache:
        xp = graph.xp
        if weighted:
            out_weight = segmented_reduce(graph.weights, graph.indptr)
        else:
            out_weight = xp.diff(graph.indptr).astype(np.float64)
        dangling = out_weight == 0
        inverse = xp.zeros(graph.n)
        inverse[~dangling] = 1.0 / out_weight[~dangling]  # scaled as NetworkX's Q @ A scales
        base = graph if graph.known_symmetric() else graph.transpose()
        values = base.weights if weighted else xp.ones(base.nnz)
        M = _product_matrix(base, values * inverse[base.indices])
        graph._cache[key] = (M, xp.flatnonzero(dangling))
    return graph._cache[key]


def _adjacency_transpose(graph: Graph, weighted: bool) -> SparseMatrix:
    """A^T (unit values unless ``weighted``), built once and cached on the graph."""
    key = ("centrality_adjacency_t", weighted)
    if key not in graph._cache:
        base = graph if graph.known_symmetric() else graph.transpose()
        values = base.weights if weighted else graph.xp.ones(base.nnz)
        graph._cache[key] = _product_matrix(base, values)
    return graph._cache[key]


def _product_matrix(base: Graph, values: Any) -> SparseMatrix:
    """``base``'s structure with ``values`` as a sparsegpu matrix: CSR on the CPU (SciPy's
    product), the advisor's format on the GPU."""
    n = base.n
    csr = CSR((values, base.indices, base.indptr), (n, n), backend=base.backend, check=False)
    if base.backend == "cpu" or csr.nnz == 0:
        return csr
    advice = advise(csr)
    return csr.asformat(advice.format, **advice.params)


# --------------------------------------------------------------------------- arguments


def _weight(weight: Any) -> bool:
    """``weight`` as a bool: None (NetworkX's "no attribute") means unit weights."""
    return False if weight is None else _validate.check_bool("weight", weight)


def _check_transition_weights(graph: Graph) -> None:
    if graph.nnz and not bool(graph.xp.isfinite(graph.weights).all()):
        raise ValueError("pagerank: csgraph holds NaN or infinite weights")
    if graph.has_negative_weight():
        raise ValueError("pagerank: csgraph holds negative weights; with weight=True they are transition "
                         "probabilities once normalised, so they must be >= 0")


def _iteration_limits(max_iter: Any, tol: Any, check_every: Any) -> tuple[int, float, int]:
    max_iter = _validate.check_int("max_iter", max_iter, minimum=1)
    tol = _validate.check_real_finite("tol", tol)
    if tol <= 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    return max_iter, tol, _validate.check_int("check_every", check_every, minimum=1)


def _is_scalar(value: Any) -> bool:
    """Whether ``value`` is one number's worth (a 0-d array included), not a sequence."""
    if is_device_array(value):
        return value.ndim == 0
    return not isinstance(value, (Mapping, str, bytes)) and np.ndim(value) == 0


def _vector(name: str, value: Any, n: int) -> np.ndarray | None:
    """``value`` as N finite float64 numbers on the host (None stays None)."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        raise TypeError(f"{name} must be an array of {n} values indexed by vertex, not a {type(value).__name__}")
    if is_device_array(value):
        value = value.get()
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be an array of numbers, got {type(value).__name__}")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} cannot be read as an array: {exc}") from None
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {array.dtype}")
    if array.shape != (n,):
        raise ValueError(f"{name} must have one value per vertex, shape ({n},), got shape {array.shape}")
    array = array.astype(np.float64)
    if not np.isfinite(array).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    return array


def _distribution(name: str, value: Any, n: int) -> np.ndarray | None:
    """``value`` as N non-negative weights scaled to sum to 1, as NetworkX scales them."""
    array = _vector(name, value, n)
    if array is None or n == 0:
        return array
    if (array < 0).any():
        raise ValueError(f"{name} holds negative values; it must be non-negative")
    total = array.sum()
    if total == 0:
        raise ValueError(f"{name} is all 0; at least one value must be positive")
    return array / total
