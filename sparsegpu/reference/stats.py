"""Twin of kernels/matrix_stats.cu: where a CSR pattern's entries sit relative to the diagonal."""

from __future__ import annotations

import numpy as np


def csr_structure(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """[entries below the diagonal, on it, above it, sum of |i - j|, max |i - j|] as int64.

    >>> csr_structure(np.array([0, 2, 3]), np.array([0, 1, 0])).tolist()
    [1, 1, 1, 2, 1]
    """
    rows = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    offset = indices.astype(np.int64) - rows
    distance = np.abs(offset)
    return np.array([(offset < 0).sum(), (offset == 0).sum(), (offset > 0).sum(), distance.sum(),
                     distance.max() if distance.size else 0], dtype=np.int64)
