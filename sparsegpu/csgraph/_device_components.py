"""Connected components on the GPU (kernels/graph_components.cu; NumPy reference:
reference.graph_components)."""

from __future__ import annotations

from typing import Any


def weak_components(indptr: Any, indices: Any) -> tuple[int, Any]:
    """(count, labels int32) with components numbered by their smallest vertex."""
    raise NotImplementedError


def strong_components(indptr: Any, indices: Any, in_indptr: Any, in_indices: Any) -> tuple[int, Any]:
    """(count, labels int32) with components numbered by their smallest vertex."""
    raise NotImplementedError
