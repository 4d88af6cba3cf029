"""Breadth-first and depth-first traversals, as :mod:`scipy.sparse.csgraph` names them.

Breadth-first search runs on the GPU (``_device_bfs``: the whole traversal on the device) for a
GPU matrix, or for scipy / NumPy input when the backend is ``"gpu"``; the CPU backend calls
SciPy on the input's canonical CSR form (SciPy's own order of visiting neighbours depends on the
input's format: for an undirected traversal of a CSC input it visits the transposed edges
first, so its order there can differ from the CSR form's). Depth-first search is sequential by nature and always runs on the host through SciPy
(for a GPU matrix the graph is downloaded and the results uploaded).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse.csgraph as scipy_csgraph

from sparsegpu import _validate
from sparsegpu._backend import resolve_backend
from sparsegpu.csgraph import _device_bfs
from sparsegpu.csgraph._graph import NO_PREDECESSOR, Graph, as_graph, check_vertex
from sparsegpu.formats import SparseMatrix

__all__ = ["breadth_first_order", "breadth_first_tree", "depth_first_order", "depth_first_tree"]


def _prepare(csgraph: Any, i_start: Any, directed: Any, backend: str | None) -> tuple[Graph, int, bool]:
    graph = as_graph(csgraph, backend)
    directed = _validate.check_bool("directed", directed)
    return graph, check_vertex("i_start", i_start, graph.n), directed


def device_bfs(graph: Graph, source: int, directed: bool, predecessors: bool = True) -> tuple[Any, Any]:
    """(levels int32, predecessors or None) from the device BFS; in-edges passed for a directed
    graph so the search may pull along them."""
    oriented = graph.oriented(directed)
    # The kernels take in-edges that are the out-edges themselves as an undirected graph, whose
    # levels need no in-edge tallies: a symmetric structure is passed once.
    if directed and not graph.is_structurally_symmetric():
        reverse = graph.transpose()
        return _device_bfs.bfs(oriented.indptr, oriented.indices, source, in_indptr=reverse.indptr,
                               in_indices=reverse.indices, predecessors=predecessors)
    return _device_bfs.bfs(oriented.indptr, oriented.indices, source, predecessors=predecessors)


def _int32_when_fits(a: Any) -> Any:
    """Predecessors as SciPy's int32 whenever every vertex index fits."""
    return a.astype(np.int32, copy=False) if a.size < 2**31 else a


def _host_backend(csgraph: Any, backend: str | None) -> str | None:
    """Where a host-only algorithm reads ``csgraph``: a sparsegpu matrix where it lives, other
    input on the CPU (``backend`` still checked)."""
    if isinstance(csgraph, SparseMatrix):
        return backend
    resolve_backend(backend)
    return "cpu"


def breadth_first_order(csgraph: Any, i_start: int, directed: bool = True, return_predecessors: bool = True,
                        *, backend: str | None = None) -> Any:
    """The vertices reached from ``i_start`` in breadth-first order, and their predecessors.

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency. Sparse input: every stored entry is an edge (an explicit 0 too);
        dense input: 0, inf and NaN mean "no edge".
    i_start : int
        The starting vertex.
    directed : bool, optional
        False reads every edge both ways (default True).
    return_predecessors : bool, optional
        Also return the predecessor array (default True).
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`); a sparsegpu matrix
        runs where it lives.

    Returns
    -------
    node_array : ndarray of int32
        The reached vertices, ``i_start`` first. The CPU backend returns SciPy's order (for the
        input's CSR form); the GPU returns them sorted by (level, vertex), an equally valid
        breadth-first order.
    predecessors : ndarray of int32, length N
        Each reached vertex's parent in the search tree, -9999 for ``i_start`` and vertices not
        reached. On the GPU the parent is the smallest-index vertex on the previous level with
        an edge to it (deterministic); SciPy's may be another vertex of that level. Only with
        ``return_predecessors``.

    Arrays are NumPy, or CuPy for a GPU sparsegpu matrix.

    Raises
    ------
    TypeError
        ``csgraph`` not a graph, complex weights, ``i_start`` not an integer, a flag not a bool.
    ValueError
        ``csgraph`` not square or 2-D, corrupted sparse arrays, ``i_start`` out of range.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph import breadth_first_order
    >>> G = sp.csr_array(np.array([[0, 1, 2, 0], [0, 0, 0, 1], [2, 0, 0, 3], [0, 0, 0, 0]]))
    >>> order, preds = breadth_first_order(G, 0, backend="cpu")
    >>> order.tolist(), preds.tolist()
    ([0, 1, 2, 3], [-9999, 0, 0, 1])
    """
    graph, source, directed = _prepare(csgraph, i_start, directed, backend)
    return_predecessors = _validate.check_bool("return_predecessors", return_predecessors)
    if graph.backend == "cpu":
        result = scipy_csgraph.breadth_first_order(graph.to_scipy(), source, directed, return_predecessors)
        return tuple(graph.output(a) for a in result) if return_predecessors else graph.output(result)
    levels, preds = device_bfs(graph, source, directed, return_predecessors)
    order = _device_bfs.bfs_order(levels)
    if not return_predecessors:
        return graph.output(order)
    return graph.output(order), graph.output(_int32_when_fits(preds))


def breadth_first_tree(csgraph: Any, i_start: int, directed: bool = True, *, backend: str | None = None) -> Any:
    """The breadth-first search tree from ``i_start``, as a sparse N x N matrix.

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency (edge rules as in :func:`breadth_first_order`).
    i_start : int
        The root.
    directed : bool, optional
        False reads every edge both ways, with the smaller weight of the two (default True).
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`).

    Returns
    -------
    tree : sparse matrix
        Entry (parent, child) holds the edge's weight. SciPy's type for host input
        (``csr_matrix`` for a scipy matrix, ``csr_array`` otherwise), a sparsegpu CSR on the GPU
        for a GPU matrix. The GPU's tree uses the parents of :func:`breadth_first_order`. An
        undirected edge stored as 0 both ways weighs 0 in the GPU's tree; SciPy's holds inf
        there.

    Raises
    ------
    TypeError
        As :func:`breadth_first_order`.
    ValueError
        As :func:`breadth_first_order`.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph import breadth_first_tree
    >>> G = sp.csr_array(np.array([[0, 1, 2, 0], [0, 0, 0, 1], [2, 0, 0, 3], [0, 0, 0, 0]]))
    >>> breadth_first_tree(G, 0, backend="cpu").toarray().tolist()
    [[0.0, 1.0, 2.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    """
    graph, source, directed = _prepare(csgraph, i_start, directed, backend)
    if graph.backend == "cpu":
        return graph.scipy_type(scipy_csgraph.breadth_first_tree(graph.to_scipy(), source, directed))
    _, preds = device_bfs(graph, source, directed)
    return tree_from_predecessors(graph.oriented(directed), preds)


def tree_from_predecessors(graph: Graph, preds: Any) -> Any:
    """The tree whose edges are (preds[v], v) for every v with a parent, weighted as in
    ``graph`` (where each such edge is stored)."""
    xp = graph.xp
    children = xp.flatnonzero(preds != NO_PREDECESSOR)
    parents = preds[children]
    weights = graph.edge_weights(parents, children)
    return graph.sparse_output(parents, children, weights)


def depth_first_order(csgraph: Any, i_start: int, directed: bool = True, return_predecessors: bool = True,
                      *, backend: str | None = None) -> Any:
    """The vertices reached from ``i_start`` in depth-first order, and their predecessors.

    Depth-first search is sequential: it runs on the host through SciPy whatever the backend
    (a GPU matrix is downloaded, the results uploaded as CuPy arrays).

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency (edge rules as in :func:`breadth_first_order`).
    i_start : int
        The starting vertex.
    directed : bool, optional
        False reads every edge both ways (default True).
    return_predecessors : bool, optional
        Also return the predecessor array (default True).
    backend : {"cpu", "gpu"}, optional
        Accepted for symmetry with the other functions; the search runs on the host.

    Returns
    -------
    node_array : ndarray of int32
        SciPy's depth-first order.
    predecessors : ndarray of int32
        SciPy's predecessors (-9999 none); only with ``return_predecessors``.

    Raises
    ------
    TypeError
        As :func:`breadth_first_order`.
    ValueError
        As :func:`breadth_first_order`.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph import depth_first_order
    >>> G = sp.csr_array(np.array([[0, 1, 2, 0], [0, 0, 0, 1], [2, 0, 0, 3], [0, 0, 0, 0]]))
    >>> order, preds = depth_first_order(G, 0, backend="cpu")
    >>> order.tolist(), preds.tolist()
    ([0, 1, 3, 2], [-9999, 0, 0, 1])
    """
    graph, source, directed = _prepare(csgraph, i_start, directed, _host_backend(csgraph, backend))
    return_predecessors = _validate.check_bool("return_predecessors", return_predecessors)
    result = scipy_csgraph.depth_first_order(graph.to_scipy(), source, directed, return_predecessors)
    return tuple(graph.output(a) for a in result) if return_predecessors else graph.output(result)


def depth_first_tree(csgraph: Any, i_start: int, directed: bool = True, *, backend: str | None = None) -> Any:
    """The depth-first search tree from ``i_start`` (on the host through SciPy, as
    :func:`depth_first_order`).

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency.
    i_start : int
        The root.
    directed : bool, optional
        False reads every edge both ways (default True).
    backend : {"cpu", "gpu"}, optional
        Accepted for symmetry; the search runs on the host.

    Returns
    -------
    tree : sparse matrix
        SciPy's tree: SciPy's type for host input, a sparsegpu CSR on the GPU for a GPU matrix.

    Raises
    ------
    TypeError
        As :func:`breadth_first_order`.
    ValueError
        As :func:`breadth_first_order`.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph import depth_first_tree
    >>> G = sp.csr_array(np.array([[0, 1, 2, 0], [0, 0, 0, 1], [2, 0, 0, 3], [0, 0, 0, 0]]))
    >>> depth_first_tree(G, 0, backend="cpu").nnz
    3
    """
    graph, source, directed = _prepare(csgraph, i_start, directed, _host_backend(csgraph, backend))
    return graph.scipy_type(scipy_csgraph.depth_first_tree(graph.to_scipy(), source, directed))
