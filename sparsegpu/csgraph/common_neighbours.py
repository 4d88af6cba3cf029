"""Triangles and Jaccard similarity, as :func:`networkx.triangles` and
:func:`networkx.jaccard_coefficient` on the undirected graph of ``A``.

The graph read is the ``networkx.Graph`` of A's structure: every stored entry (an explicit 0
too) is an edge, read both ways, weights ignored. Triangles ignore self loops, as NetworkX
does; Jaccard counts a self loop in the vertex's neighbour set, as NetworkX does.

Triangles are counted on the degree-oriented graph: each undirected edge kept once, from the
lower to the higher (degree, vertex). Every triangle then has exactly one corner with an edge to
the two others, and two ways count them (:func:`choose_method` picks one):

- ``"intersection"``: per oriented edge u -> v, the common out-neighbours of u and v (the
  shorter sorted list searched in the longer): the kernel of kernels/graph_triangles.cu on the
  GPU, its NumPy reference on the CPU. Jaccard similarity counts common neighbours the same way.
- ``"product"``: the masked products ``(U @ U) * U`` and ``(U.T @ U) * U`` of the oriented
  adjacency U (SciPy's on the CPU, masked ``plus_pair`` products on the GPU), summed by row and
  column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import convert
from sparsegpu._backend import is_device_array, to_backend
from sparsegpu.csgraph import _device_triangles
from sparsegpu.csgraph._graph import Graph, as_graph, check_choice
from sparsegpu.formats import CSR, spgemm
from sparsegpu.reference import graph_triangles as reference

__all__ = ["choose_method", "jaccard", "triangle_count", "triangles"]

METHODS = ("auto", "intersection", "product")
#: Oriented wedges (paths u -> v -> w of the degree-oriented graph: the masked product's
#: multiply-adds, and the intersection's searches at most) up to which the GPU takes the masked
#: product. A placeholder until both are measured on the GPU.
GPU_PRODUCT_MAX_WEDGES = 1 << 22
#: The CPU's threshold. SciPy's products measured faster than the NumPy intersection on every
#: graph tried (real graphs, Kronecker graphs up to scale 17), but they hold U @ U (up to one
#: entry per wedge) at once; past this the intersection, whose memory is bounded, takes over.
CPU_PRODUCT_MAX_WEDGES = 1 << 28


def choose_method(backend: str, wedges: int, edges: int = 0) -> str:
    """The faster way to count the triangles of a degree-oriented graph.

    Parameters
    ----------
    backend : {"cpu", "gpu"}
        Where the count runs.
    wedges : int
        Paths u -> v -> w of the degree-oriented graph.
    edges : int, optional
        Its edges (each undirected edge once).

    Returns
    -------
    str
        ``"product"`` up to the backend's threshold (:data:`GPU_PRODUCT_MAX_WEDGES`,
        :data:`CPU_PRODUCT_MAX_WEDGES`) of wedges, else ``"intersection"``.

    Examples
    --------
    >>> choose_method("cpu", 10), choose_method("cpu", 10**12)
    ('product', 'intersection')
    """
    limit = GPU_PRODUCT_MAX_WEDGES if backend == "gpu" else CPU_PRODUCT_MAX_WEDGES
    return "product" if wedges <= limit else "intersection"


# --------------------------------------------------------------------------- graphs


def simple_pattern(graph: Graph) -> tuple[Any, Any]:
    """CSR arrays (indptr, indices) of the undirected graph without self loops. On the CPU
    SciPy's P + P.T of the pattern P (linear: a transpose and a merge) is an order of magnitude
    faster than the graph's sort-based :meth:`Graph.undirected`, which the GPU uses."""
    xp = graph.xp
    if graph.backend == "gpu":
        indptr, indices = graph.undirected().indptr, graph.undirected().indices
    else:
        P = sp.csr_array((np.ones(graph.nnz), graph.indices, graph.indptr), shape=(graph.n, graph.n))
        S = sp.csr_array(P + P.T)
        S.sort_indices()
        indptr, indices = S.indptr, S.indices
    rows = convert.expand_pointers(indptr, xp)
    keep = rows != indices
    if bool(keep.all()):
        return indptr, indices
    return convert.compress(rows[keep], graph.n, indptr.dtype, xp), indices[keep]


def degree_oriented(indptr: Any, indices: Any, xp: Any) -> tuple[Any, Any, Any]:
    """(indptr, indices, rows) of a symmetric loop-free pattern with each edge kept once, from
    the lower to the higher (degree, vertex): out-degrees stay below sqrt(2 * edges), which
    bounds every intersection. Rows stay sorted: a filter of a canonical CSR."""
    degree = xp.diff(indptr)
    rows = convert.expand_pointers(indptr, xp).astype(indices.dtype, copy=False)
    low, high = degree[rows], degree[indices]
    keep = (low < high) | ((low == high) & (rows < indices))
    rows = rows[keep]
    return convert.compress(rows, indptr.size - 1, indptr.dtype, xp), indices[keep], rows


def oriented_wedges(indptr: Any, indices: Any) -> int:
    """Paths u -> v -> w of an oriented pattern: the sum over its edges u -> v of v's out-degree."""
    if indices.size == 0:
        return 0
    out_degree = indptr[1:] - indptr[:-1]
    return int(out_degree[indices].astype(np.int64).sum())


def _common_neighbours(graph: Graph, indptr: Any, indices: Any, first: Any, second: Any, *,
                       corners: bool = False, edges: bool = False) -> tuple[Any, Any, Any]:
    module = _device_triangles if graph.backend == "gpu" else reference
    return module.common_neighbours(indptr, indices, first, second, corners=corners, edges=edges)


def _by_product(graph: Graph, indptr: Any, indices: Any, per_vertex: bool) -> Any:
    """Per-vertex counts (int64) or the total (int) from the masked products of the oriented
    pattern U: ``(U @ U) * U`` holds at (a, c) the triangles whose lowest corner is a and
    highest c; ``(U.T @ U) * U`` at (b, c) those whose middle corner is b and highest c. On the
    GPU both are masked ``plus_pair`` products (:func:`sparsegpu.spgemm` with U as the mask),
    which never form the unmasked product; on the CPU SciPy's products, masked after."""
    xp, n = graph.xp, graph.n
    if n == 0 or indices.size == 0:
        return xp.zeros(n, dtype=np.int64) if per_vertex else 0
    if graph.backend == "gpu":
        U = CSR((xp.ones(indices.size), indices, indptr), (n, n), backend="gpu", check=False)
        parts = [spgemm(U, U, semiring="plus_pair", mask=U)]
        if per_vertex:
            parts.append(spgemm(U.T, U, semiring="plus_pair", mask=U))
        arrays = [(C.indptr, C.indices, C.data) for C in parts]
    else:
        U = sp.csr_array((np.ones(indices.size), indices, indptr), shape=(n, n))
        products = [(U @ U).multiply(U)] + ([(U.T @ U).multiply(U)] if per_vertex else [])
        arrays = [(C.indptr, C.indices, C.data) for C in map(sp.csr_array, products)]
    low_high = arrays[0]
    if not per_vertex:
        return round(float(low_high[2].sum()))
    # Every count is an integer held exactly in float64: the sums do not depend on their order.
    middle_high = arrays[1]
    total = (_row_sums(*low_high, xp) + xp.bincount(low_high[1], weights=low_high[2], minlength=n)
             + _row_sums(*middle_high, xp))
    return xp.rint(total).astype(np.int64)


def _row_sums(indptr: Any, indices: Any, data: Any, xp: Any) -> Any:
    sums = xp.zeros(data.size + 1, dtype=np.float64)
    sums[1:] = xp.cumsum(data)
    return sums[indptr[1:]] - sums[indptr[:-1]]


def _count(graph: Graph, method: str, per_vertex: bool) -> Any:
    """Triangles per vertex (int64 array) or in all (int) by ``method``."""
    indptr, indices, rows = degree_oriented(*simple_pattern(graph), graph.xp)
    if method == "auto":
        method = choose_method(graph.backend, oriented_wedges(indptr, indices), int(indices.size))
    if method == "product":
        return _by_product(graph, indptr, indices, per_vertex)
    counts, corners, _ = _common_neighbours(graph, indptr, indices, rows, indices, corners=per_vertex)
    return corners if per_vertex else int(counts.sum())


# --------------------------------------------------------------------------- arguments


def check_vertices(name: str, values: Any, n: int) -> Any:
    """``values`` as an int64 array (NumPy, or CuPy when given on the device) of vertices in
    [0, n); TypeError for anything but integers, ValueError out of range."""
    array = values if is_device_array(values) else _as_host_array(name, values)
    if array.dtype.kind not in "iu" and not (array.size == 0 and array.dtype.kind == "f"):
        raise TypeError(f"{name} must hold vertex indices (integers), got dtype {array.dtype}")
    if array.size:
        low, high = int(array.min()), int(array.max())
        if low < 0 or high >= n:
            bad = low if low < 0 else high
            raise ValueError(f"{name} holds {bad}, not a vertex of a graph of {n} vertices")
    return array.astype(np.int64)


def _as_host_array(name: str, values: Any) -> np.ndarray:
    if isinstance(values, (str, bytes, dict, set, float, complex)) or values is None:
        raise TypeError(f"{name} must be integers or an array of integers, got {type(values).__name__}")
    try:
        return np.asarray(values)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be integers or an array of integers, got {type(values).__name__}") from None


def check_pairs(pairs: Any, n: int) -> tuple[Any, Any]:
    """The columns (first, second) of a (k, 2) array of vertex pairs, int64."""
    array = check_vertices("pairs", pairs, n)
    if array.size == 0 and array.ndim <= 2 and array.shape[-1:] in ((0,), (2,)):
        array = array.reshape(0, 2)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"pairs must be a (k, 2) array of vertex pairs, got shape {tuple(array.shape)}")
    return array[:, 0], array[:, 1]


# --------------------------------------------------------------------------- public API


def triangles(A: Any, nodes: Any = None, *, method: str = "auto", backend: str | None = None) -> Any:
    """The number of triangles at each vertex, as :func:`networkx.triangles`.

    Parameters
    ----------
    A : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency, read as the ``networkx.Graph`` of its structure: every stored
        entry is an edge (dense input: 0, inf and NaN are not), read both ways; weights and
        self loops are ignored.
    nodes : int or array_like of int, optional
        One vertex (the result is then an int) or vertices to count at; None (default) for all.
    method : {"auto", "intersection", "product"}, optional
        How to count (see the module docstring); "auto" (default) asks :func:`choose_method`.
        Every method gives the same counts.
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`); a sparsegpu matrix
        runs where it lives.

    Returns
    -------
    ndarray of int64 or int
        The triangles through each vertex (of ``nodes``, in their order); NumPy, or CuPy for a
        GPU sparsegpu matrix. An int when ``nodes`` is one vertex.

    Raises
    ------
    TypeError
        ``A`` not a graph or complex; ``nodes`` not integers; ``method`` not a string.
    ValueError
        ``A`` not square; ``nodes`` out of range; an unknown ``method``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph.common_neighbours import triangles
    >>> A = sp.csr_array(np.array([[0, 1, 1, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]]))
    >>> triangles(A, backend="cpu").tolist()
    [1, 1, 1, 0]
    >>> triangles(A, 2, backend="cpu")
    1
    """
    graph = as_graph(A, backend, name="A")
    method = check_choice("method", method, METHODS)
    scalar = isinstance(nodes, (int, np.integer)) and not isinstance(nodes, (bool, np.bool_))
    vertices = None if nodes is None else check_vertices("nodes", nodes, graph.n)
    counts = _count(graph, method, per_vertex=True)
    if scalar:
        return int(counts[int(vertices)])
    if vertices is not None:
        counts = counts[to_backend(vertices, graph.backend)]
    return graph.output(counts)


def triangle_count(A: Any, *, method: str = "auto", backend: str | None = None) -> int:
    """The number of triangles of the undirected graph, ``sum(triangles(A)) // 3``.

    Parameters
    ----------
    A : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency, read as in :func:`triangles`.
    method : {"auto", "intersection", "product"}, optional
        As in :func:`triangles`.
    backend : {"cpu", "gpu"}, optional
        As in :func:`triangles`.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        ``A`` not a graph or complex; ``method`` not a string.
    ValueError
        ``A`` not square; an unknown ``method``.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.csgraph.common_neighbours import triangle_count
    >>> triangle_count(np.ones((4, 4)), backend="cpu")  # the complete graph on 4 vertices
    4
    """
    graph = as_graph(A, backend, name="A")
    method = check_choice("method", method, METHODS)
    return int(_count(graph, method, per_vertex=False))


def jaccard(A: Any, pairs: Any = None, *, method: str = "auto", backend: str | None = None) -> Any:
    """Jaccard similarity |N(u) & N(v)| / |N(u) | N(v)| of vertex pairs, as
    :func:`networkx.jaccard_coefficient`.

    Parameters
    ----------
    A : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency, read as the ``networkx.Graph`` of its structure: every stored
        entry is an edge, read both ways, weights ignored. As in NetworkX, a self loop puts the
        vertex in its own neighbour set N(u) for the union, and the common neighbours exclude
        u and v themselves.
    pairs : array_like of int, shape (k, 2), optional
        The pairs (NetworkX's ``ebunch``); NumPy, or CuPy with a GPU matrix. None (default):
        every edge {u, v}, u < v, once (NetworkX's default is every non-edge instead, which
        grows as N^2; cuGraph's is the edges).
    method : {"auto", "intersection", "product"}, optional
        How every edge's common neighbours are counted without ``pairs``: the intersection of
        sorted neighbour lists over the degree-oriented graph, or the masked product
        ``P (plus.pair) P`` on the pattern P's own entries (:func:`sparsegpu.spgemm` with P as
        the mask on the GPU, SciPy's product on the CPU); "auto" (default) asks
        :func:`choose_method`. Both give the same counts, so the same bits. Pairs are always
        intersected.
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`); a sparsegpu matrix
        runs where it lives.

    Returns
    -------
    ndarray of float64
        With ``pairs``: the similarity of each pair, in order (0 where the union is empty, as
        NetworkX gives). NumPy, or CuPy for a GPU sparsegpu matrix.
    (rows, cols, values) : tuple of ndarray
        Without ``pairs``: the edges (int64, rows < cols, ordered by row then column) and their
        similarity (float64), NetworkX's ``(u, v, p)`` triples as three arrays; an edge
        without common neighbours has similarity 0 and is kept.
        ``scipy.sparse.coo_array((values, (rows, cols)), shape=A.shape)`` makes them a matrix.

    Raises
    ------
    TypeError
        ``A`` not a graph or complex; ``pairs`` not integers.
    ValueError
        ``A`` not square; ``pairs`` not of shape (k, 2), or holding a vertex out of range.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph.common_neighbours import jaccard
    >>> A = sp.csr_array(np.array([[0, 1, 1, 1], [0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]]))
    >>> jaccard(A, [(1, 2), (0, 3)], backend="cpu").tolist()
    [0.3333333333333333, 0.0]
    >>> rows, cols, values = jaccard(A, backend="cpu")
    >>> rows.tolist(), cols.tolist(), values.round(3).tolist()
    ([0, 0, 0, 1], [1, 2, 3, 2], [0.25, 0.25, 0.0, 0.333])
    """
    method = check_choice("method", method, METHODS)
    graph = as_graph(A, backend, name="A")
    if pairs is None:
        return _edge_similarity(graph, method)
    first, second = (to_backend(a, graph.backend) for a in check_pairs(pairs, graph.n))
    indptr, indices = simple_pattern(graph)
    common, _, _ = _common_neighbours(graph, indptr, indices, first, second)
    union = _degrees(indptr)[first] + _degrees(indptr)[second] - common + _loops_in_union(graph, indptr, indices,
                                                                                             first, second)
    return graph.output(_ratio(graph.xp, common, union))


def _degrees(indptr: Any) -> Any:
    return (indptr[1:] - indptr[:-1]).astype(np.int64)


def _ratio(xp: Any, common: Any, union: Any) -> Any:
    return xp.where(union > 0, common / xp.maximum(union, 1), 0.0)


def _edge_similarity(graph: Graph, method: str) -> tuple[Any, Any, Any]:
    """(rows, cols, values) of every edge u < v, from the common neighbours of each edge."""
    indptr, indices = simple_pattern(graph)
    if method == "auto":
        method = choose_method(graph.backend, oriented_wedges(indptr, indices), int(indices.size) // 2)
    count = _edge_common_by_product if method == "product" else _edge_common_by_intersection
    rows, cols, common = count(graph, indptr, indices)
    degree = _degrees(indptr)
    values = _ratio(graph.xp, common, degree[rows] + degree[cols] - common)
    return graph.output(rows), graph.output(cols), graph.output(values)


def _edge_common_by_product(graph: Graph, indptr: Any, indices: Any) -> tuple[Any, Any, Any]:
    """Every edge u < v (ordered by u then v) and its common neighbours, from the masked product
    C = P (plus.pair) P on P's entries: C holds an edge's count where it is not 0."""
    xp, n = graph.xp, graph.n
    if graph.backend == "gpu":
        P = CSR((xp.ones(indices.size), indices, indptr), (n, n), backend="gpu", check=False)
        C = spgemm(P, P, semiring="plus_pair", mask=P)
        c_ptr, c_idx, c_val = C.indptr, C.indices, C.data
    else:
        P = sp.csr_array((np.ones(indices.size), indices, indptr), shape=(n, n))
        C = sp.csr_array((P @ P).multiply(P))
        C.sum_duplicates()
        C.sort_indices()
        c_ptr, c_idx, c_val = C.indptr, C.indices, C.data
    rows = convert.expand_pointers(indptr, xp).astype(np.int64)
    upper = rows < indices
    rows, cols = rows[upper], indices[upper].astype(np.int64)
    c_rows = convert.expand_pointers(c_ptr, xp).astype(np.int64)
    c_upper = c_rows < c_idx
    common = xp.zeros(rows.size, dtype=np.float64)
    keys = rows * n + cols  # sorted: P is canonical
    common[xp.searchsorted(keys, c_rows[c_upper] * n + c_idx[c_upper])] = c_val[c_upper]
    return rows, cols, common


def _edge_common_by_intersection(graph: Graph, indptr: Any, indices: Any) -> tuple[Any, Any, Any]:
    """Every edge u < v (ordered by u then v) and its common neighbours: the triangles through
    it, each found once on the degree-oriented graph (the searched pair's count, plus the two
    other edges of each triangle found)."""
    xp = graph.xp
    oriented_ptr, oriented_idx, oriented_rows = degree_oriented(indptr, indices, xp)
    counts, _, others = _common_neighbours(graph, oriented_ptr, oriented_idx, oriented_rows, oriented_idx,
                                           edges=True)
    low = xp.minimum(oriented_rows, oriented_idx).astype(np.int64)
    high = xp.maximum(oriented_rows, oriented_idx).astype(np.int64)
    order = xp.argsort(low * max(graph.n, 1) + high)
    return low[order], high[order], (counts + others)[order]


def _loops_in_union(graph: Graph, indptr: Any, indices: Any, first: Any, second: Any) -> Any:
    """What self loops add to |N(u) | N(v)| beyond the loop-free deg(u) + deg(v) - common: a
    vertex with a loop is its own neighbour, so each end's loop counts unless the edge {u, v}
    already puts that end in the union (u == v counts its loop once)."""
    xp = graph.xp
    rows = convert.expand_pointers(graph.indptr, xp)
    loop = xp.zeros(graph.n, dtype=np.int64)
    loop[rows[rows == graph.indices]] = 1
    if first.size == 0 or not bool(loop.any()):
        return 0
    keys = convert.expand_pointers(indptr, xp).astype(np.int64) * graph.n + indices.astype(np.int64)
    wanted = first * graph.n + second
    at = xp.minimum(xp.searchsorted(keys, wanted), max(keys.size - 1, 0))
    adjacent = keys[at] == wanted if keys.size else xp.zeros(first.size, dtype=bool)
    return xp.where(first == second, loop[first], (loop[first] + loop[second]) * ~adjacent)
