"""Reverse Cuthill-McKee ordering on the GPU (kernels/graph_rcm.cu; NumPy reference: reference.graph_rcm)."""

from __future__ import annotations

from typing import Any


def reverse_cuthill_mckee(indptr: Any, indices: Any) -> Any:
    """The RCM permutation of a structurally symmetric graph (int32)."""
    raise NotImplementedError
