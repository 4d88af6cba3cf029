"""Minimum spanning tree (forest), as :func:`scipy.sparse.csgraph.minimum_spanning_tree`.

The GPU runs Boruvka's algorithm (``_device_mst``) on the undirected graph; the CPU backend
calls SciPy (Kruskal's algorithm).
"""

from __future__ import annotations

from typing import Any

import scipy.sparse.csgraph as scipy_csgraph

from sparsegpu import _validate
from sparsegpu.csgraph import _device_mst
from sparsegpu.csgraph._graph import as_graph

__all__ = ["minimum_spanning_tree"]


def minimum_spanning_tree(csgraph: Any, overwrite: bool = False, *, backend: str | None = None) -> Any:
    """A minimum spanning forest of the undirected graph ``csgraph`` describes.

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N weights, read as undirected: entry (i, j) and (j, i) are one edge, the
        smaller weight where both are stored. Sparse input: every stored entry is an edge (an
        explicit 0 is an edge of weight 0); dense input: 0, inf and NaN mean "no edge".
        Negative weights are allowed.
    overwrite : bool, optional
        Accepted for SciPy's signature; the input is never modified.
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`); a sparsegpu matrix
        runs where it lives.

    Returns
    -------
    tree : sparse N x N matrix
        Each forest edge once; zero-weight edges are not stored (as in SciPy). On the CPU
        SciPy's tree, of SciPy's type (``csr_matrix`` for a scipy matrix input, ``csr_array``
        otherwise); on the GPU the unique forest under ties broken by (weight, smaller vertex,
        larger vertex), each edge stored as (smaller vertex, larger vertex), as SciPy's type
        for host input or a sparsegpu CSR on the GPU for a GPU matrix. Where weights tie, the
        two trees may differ; their total weight is the same.

    Raises
    ------
    TypeError
        ``csgraph`` not a graph or complex; ``overwrite`` not a bool.
    ValueError
        ``csgraph`` not square or 2-D, corrupted sparse arrays, NaN weights.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph import minimum_spanning_tree
    >>> G = sp.csr_array(np.array([[0, 8, 0, 3], [0, 0, 2, 5], [0, 0, 0, 6], [0, 0, 0, 0]]))
    >>> T = minimum_spanning_tree(G, backend="cpu")
    >>> float(T.sum()), T.nnz
    (10.0, 3)
    """
    graph = as_graph(csgraph, backend)
    _validate.check_bool("overwrite", overwrite)
    graph.check_weights("minimum_spanning_tree")
    if graph.backend == "cpu":
        return graph.scipy_type(scipy_csgraph.minimum_spanning_tree(graph.to_scipy(), overwrite=False))
    undirected = graph.undirected()
    rows, cols, weights = _device_mst.minimum_spanning_forest(undirected.indptr, undirected.indices,
                                                              undirected.weights)
    return graph.sparse_output(rows, cols, weights, drop_zeros=True)
