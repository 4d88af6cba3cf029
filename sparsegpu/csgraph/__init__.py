"""Graph algorithms on sparse adjacency matrices, mirroring :mod:`scipy.sparse.csgraph`.

The functions take SciPy's names, arguments, defaults and conventions (``directed=True``,
``unweighted``, ``return_predecessors``, ``indices``, -9999 for "no predecessor", inf for
"unreachable"). They accept any scipy sparse matrix or array, a dense 2-D array (SciPy's dense
convention: 0, inf and NaN are "no edge") or any sparsegpu matrix, and a keyword-only
``backend``: a GPU sparsegpu matrix runs on the GPU and gets CuPy arrays and sparsegpu CSR
matrices back; scipy / NumPy input runs where ``backend`` says (default
:func:`sparsegpu.backend`) and gets NumPy arrays and SciPy's sparse types back. The CPU backend
calls SciPy. Where the GPU's answer may legitimately differ from SciPy's (order of vertices
within a BFS level, which parent among equals, component numbering, tie-breaking in spanning
trees), each function's docstring says how.

Beyond SciPy's functions, the analytics (``pagerank``, ``katz_centrality``,
``eigenvector_centrality``, ``betweenness_centrality``, ``triangles``, ``triangle_count``,
``jaccard``, ``core_number``, ``louvain_communities``, ``modularity``) follow NetworkX's
definitions and parameter names, returning arrays indexed by vertex.

>>> import numpy as np, scipy.sparse as sp
>>> from sparsegpu import csgraph
>>> G = sp.csr_array(np.array([[0, 2, 0], [0, 0, 3], [0, 0, 0]]))
>>> csgraph.shortest_path(G, indices=0, backend="cpu").tolist()
[0.0, 2.0, 5.0]
"""

from __future__ import annotations

from sparsegpu.csgraph.betweenness import betweenness_centrality
from sparsegpu.csgraph.centrality import (
    PowerIterationFailedConvergence,
    eigenvector_centrality,
    katz_centrality,
    pagerank,
)
from sparsegpu.csgraph.common_neighbours import jaccard, triangle_count, triangles
from sparsegpu.csgraph.community import louvain_communities, modularity
from sparsegpu.csgraph.components import connected_components
from sparsegpu.csgraph.cores import core_number
from sparsegpu.csgraph.laplacian import laplacian
from sparsegpu.csgraph.paths import (
    NegativeCycleError,
    bellman_ford,
    dijkstra,
    shortest_path,
)
from sparsegpu.csgraph.reordering import reverse_cuthill_mckee
from sparsegpu.csgraph.spanning import minimum_spanning_tree
from sparsegpu.csgraph.traversal import (
    breadth_first_order,
    breadth_first_tree,
    depth_first_order,
    depth_first_tree,
)

__all__ = [
    "NegativeCycleError",
    "PowerIterationFailedConvergence",
    "bellman_ford",
    "betweenness_centrality",
    "breadth_first_order",
    "breadth_first_tree",
    "connected_components",
    "core_number",
    "depth_first_order",
    "depth_first_tree",
    "dijkstra",
    "eigenvector_centrality",
    "jaccard",
    "katz_centrality",
    "laplacian",
    "louvain_communities",
    "minimum_spanning_tree",
    "modularity",
    "pagerank",
    "reverse_cuthill_mckee",
    "shortest_path",
    "triangle_count",
    "triangles",
]
