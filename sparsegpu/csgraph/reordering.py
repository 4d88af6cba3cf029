"""Reverse Cuthill-McKee ordering, as :func:`scipy.sparse.csgraph.reverse_cuthill_mckee`.

The GPU builds the Cuthill-McKee order from breadth-first levels (``_device_rcm``); the CPU
backend calls SciPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse.csgraph as scipy_csgraph

from sparsegpu import _validate
from sparsegpu.csgraph import _device_rcm
from sparsegpu.csgraph._graph import as_graph

__all__ = ["reverse_cuthill_mckee"]


def reverse_cuthill_mckee(graph: Any, symmetric_mode: bool = False, *, backend: str | None = None) -> Any:
    """A permutation that gathers the nonzeros of ``graph`` near the diagonal (reverse
    Cuthill-McKee).

    Parameters
    ----------
    graph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N matrix; only its structure counts (sparse: every stored entry; dense: entries
        that are not 0, inf or NaN). SciPy takes CSR or CSC only; any format is accepted here.
        Without ``symmetric_mode`` the structure is that of A + A^T as SciPy forms it, which
        leaves out explicitly stored zeros.
    symmetric_mode : bool, optional
        True promises a structurally symmetric ``graph`` and skips symmetrising it (default
        False: the ordering is that of the structure of A + A^T).
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`); a sparsegpu matrix
        runs where it lives.

    Returns
    -------
    perm : ndarray of int
        ``perm[k]`` is the vertex placed k-th. SciPy's permutation on the CPU; on the GPU a
        valid RCM permutation (int32) whose bandwidth may differ from SciPy's. NumPy, or CuPy
        for a GPU sparsegpu matrix.

    Raises
    ------
    TypeError
        ``graph`` not a graph or complex; ``symmetric_mode`` not a bool.
    ValueError
        ``graph`` not square or 2-D, corrupted sparse arrays.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph import reverse_cuthill_mckee
    >>> G = sp.csr_array(np.array([[1, 0, 0, 1], [0, 1, 1, 0], [0, 1, 1, 1], [1, 0, 1, 1]]))
    >>> sorted(reverse_cuthill_mckee(G, backend="cpu").tolist())
    [0, 1, 2, 3]
    """
    adjacency = as_graph(graph, backend, name="graph")
    symmetric_mode = _validate.check_bool("symmetric_mode", symmetric_mode)
    if adjacency.n == 0:  # SciPy's routine fails on an empty graph
        return adjacency.output(np.empty(0, dtype=np.int32))
    if adjacency.backend == "cpu":
        return adjacency.output(scipy_csgraph.reverse_cuthill_mckee(adjacency.to_scipy(), symmetric_mode))
    # SciPy adds A^T to A, which drops entries whose sum is 0: explicit zeros leave the structure
    structure = adjacency if symmetric_mode else adjacency.without_zero_weights().undirected()
    return adjacency.output(_device_rcm.reverse_cuthill_mckee(structure.indptr, structure.indices))
