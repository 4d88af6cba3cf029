"""Breadth-first search on the GPU (kernels/graph_bfs.cu; NumPy reference: reference.graph_bfs)."""

from __future__ import annotations

from typing import Any


def bfs(indptr: Any, indices: Any, source: int, *, in_indptr: Any = None, in_indices: Any = None,
        predecessors: bool = True) -> tuple[Any, Any]:
    """Levels (int32, -1 unreached) and predecessors (index dtype, -9999 none) from ``source``."""
    raise NotImplementedError


def bfs_order(levels: Any) -> Any:
    """The reached vertices sorted by (level, vertex), index dtype int32."""
    raise NotImplementedError
