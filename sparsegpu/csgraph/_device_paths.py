"""Single-source shortest paths on the GPU (kernels/graph_paths.cu; NumPy reference:
reference.graph_paths)."""

from __future__ import annotations

from typing import Any

import numpy as np


def delta_stepping(indptr: Any, indices: Any, weights: Any, sources: Any, *, limit: float = np.inf,
                   predecessors: bool = True, nearest_source: bool = False) -> tuple[Any, Any, Any]:
    """(dist float64, predecessors or None, nearest source or None) from the set ``sources``;
    non-negative weights."""
    raise NotImplementedError


def bellman_ford(indptr: Any, indices: Any, weights: Any, source: int, *,
                 predecessors: bool = True) -> tuple[Any, Any]:
    """(dist float64, predecessors or None); raises scipy's NegativeCycleError."""
    raise NotImplementedError
