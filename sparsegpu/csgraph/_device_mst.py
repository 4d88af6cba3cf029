"""Minimum spanning forest on the GPU, Boruvka's algorithm (kernels/graph_mst.cu; NumPy reference:
reference.graph_mst)."""

from __future__ import annotations

from typing import Any


def minimum_spanning_forest(indptr: Any, indices: Any, weights: Any) -> tuple[Any, Any, Any]:
    """(rows, cols, weights) of the forest's edges, each once, row < col."""
    raise NotImplementedError
