"""The NetworkX backend's description, read by NetworkX through the ``networkx.backend_info``
entry point every time ``networkx`` is imported.

It is a module of its own, outside the ``sparsegpu`` package, so that importing NetworkX does
not import sparsegpu (SciPy, and CuPy where present) for users who never call the backend;
``sparsegpu.nx`` checks that its dispatched functions are the ones listed here.

>>> get_info()["backend_name"], "pagerank" in get_info()["functions"]
('sparsegpu', True)
"""

from __future__ import annotations

from typing import Any

BACKEND_NAME = "sparsegpu"

#: The NetworkX functions sparsegpu.nx dispatches.
FUNCTION_NAMES = (
    "bfs_edges", "bfs_layers", "bfs_tree", "betweenness_centrality", "connected_components", "core_number",
    "descendants_at_distance", "eigenvector_centrality", "is_connected", "jaccard_coefficient", "katz_centrality",
    "louvain_communities", "minimum_spanning_tree", "number_connected_components", "pagerank", "shortest_path_length",
    "single_source_dijkstra_path_length", "single_source_shortest_path_length", "strongly_connected_components",
    "triangles",
)


def get_info() -> dict[str, Any]:
    """The backend's name, summary and functions, as NetworkX's backend_info expects."""
    return {
        "backend_name": BACKEND_NAME,
        "project": "sparsegpu",
        "package": "sparsegpu",
        "short_summary": "Sparse-matrix graph algorithms on NVIDIA GPUs (CPU fallback through SciPy).",
        "functions": {name: {} for name in FUNCTION_NAMES},
    }
