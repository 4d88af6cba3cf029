"""Connected components, as :func:`scipy.sparse.csgraph.connected_components`.

Both backends number components by their smallest vertex (component 0 holds vertex 0). SciPy
numbers weak components that way too; its strong components come numbered in the completion
order of its sequential depth-first search, which is inherently serial, so the CPU backend
renumbers SciPy's labels (the partition is SciPy's) and the GPU's forward-backward search
numbers them the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse.csgraph as scipy_csgraph

from sparsegpu import _validate
from sparsegpu.csgraph import _device_components
from sparsegpu.csgraph._graph import as_graph, check_choice

__all__ = ["connected_components", "number_by_smallest_vertex"]


def number_by_smallest_vertex(labels: np.ndarray) -> np.ndarray:
    """``labels`` renumbered so that components count up in the order of their smallest vertex.

    Examples
    --------
    >>> import numpy as np
    >>> number_by_smallest_vertex(np.array([2, 0, 2, 1])).tolist()
    [0, 1, 0, 2]
    """
    # Linear time (SciPy's labels are 0..k-1): each label's first vertex, then a running count
    # of first vertices numbers the labels in the order they first appear.
    labels = np.asarray(labels)
    if labels.size == 0:
        return labels.astype(np.int32)
    n = labels.size
    first = np.full(int(labels.max()) + 1, n, dtype=np.int64)
    np.minimum.at(first, labels, np.arange(n, dtype=np.int64))
    first = first[first < n]
    starts = np.zeros(n, dtype=bool)
    starts[first] = True
    number = np.cumsum(starts, dtype=np.int32) - 1
    rank = np.zeros(int(labels.max()) + 1, dtype=np.int32)
    rank[labels[first]] = number[first]
    return rank[labels]


def connected_components(csgraph: Any, directed: bool = True, connection: str = "weak",
                         return_labels: bool = True, *, backend: str | None = None) -> Any:
    """The connected components of a graph.

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency. Sparse input: every stored entry is an edge (an explicit 0
        too); dense input: 0, inf and NaN mean "no edge".
    directed : bool, optional
        False reads every edge both ways, which makes the components weak whatever
        ``connection`` says (default True).
    connection : {"weak", "strong"}, optional
        For a directed graph: weak (edges read both ways) or strong (mutually reachable)
        components; case-insensitive (default "weak").
    return_labels : bool, optional
        Also return each vertex's component (default True).
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`); a sparsegpu matrix
        runs where it lives.

    Returns
    -------
    n_components : int
        How many components.
    labels : ndarray of int32, length N
        Each vertex's component, numbered by smallest vertex on both backends (see the module
        docstring: SciPy's strong labels are a permutation of these). NumPy, or CuPy for a GPU
        sparsegpu matrix. Only with ``return_labels``.

    Raises
    ------
    TypeError
        ``csgraph`` not a graph or complex; ``connection`` not a string; a flag not a bool.
    ValueError
        ``csgraph`` not square or 2-D, corrupted sparse arrays, an unknown ``connection``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph import connected_components
    >>> G = sp.csr_array(np.array([[0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 1, 0]]))
    >>> connected_components(G, backend="cpu")
    (1, array([0, 0, 0, 0], dtype=int32))
    >>> connected_components(G, connection="strong", backend="cpu")
    (2, array([0, 0, 0, 1], dtype=int32))
    """
    graph = as_graph(csgraph, backend)
    directed = _validate.check_bool("directed", directed)
    connection = check_choice("connection", connection, ("weak", "strong"), fold_case=True)
    return_labels = _validate.check_bool("return_labels", return_labels)
    strong = directed and connection == "strong"
    if graph.backend == "cpu":
        count, labels = scipy_csgraph.connected_components(graph.to_scipy(), directed, connection)
        if strong:
            labels = number_by_smallest_vertex(labels)
    elif strong and not graph.is_structurally_symmetric():
        reverse = graph.transpose()
        count, labels = _device_components.strong_components(graph.indptr, graph.indices, reverse.indptr,
                                                             reverse.indices)
    else:  # weak, or strong on a symmetric graph, where they are the same
        # Hooking reads each edge both ways, so weak components need no undirected copy; a graph
        # known to be symmetric lets it skip the giant component's rows (Afforest).
        count, labels = _device_components.weak_components(graph.indptr, graph.indices,
                                                           symmetric=graph.known_structurally_symmetric())
    count = int(count)
    return (count, graph.output(labels)) if return_labels else count
