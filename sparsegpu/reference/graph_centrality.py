"""NumPy reference of kernels/graph_centrality.cu: the same arguments and results."""

from __future__ import annotations

import numpy as np


def pagerank_update(y: np.ndarray, x: np.ndarray, dangling_weights: np.ndarray, teleport: np.ndarray,
                    dangling: np.ndarray, alpha: float, dangling_sum: float) -> tuple[float, float]:
    """Overwrite ``y`` (the product M x) with the PageRank step ``alpha * (y + dangling_sum *
    dangling_weights) + teleport``; return (the l1 change from ``x``, the new iterate's sum over
    the ``dangling`` vertices). The kernel sums in another order: the sums agree to rounding.

    >>> y = np.array([0.5, 0.25]); x = np.array([0.5, 0.5])
    >>> pagerank_update(y, x, np.full(2, 0.5), np.full(2, 0.25), np.array([0, 1], bool), 0.5, 0.5)
    (0.125, 0.5)
    >>> y.tolist()
    [0.625, 0.5]
    """
    np.add(y, dangling_sum * dangling_weights, out=y)
    np.multiply(y, alpha, out=y)
    np.add(y, teleport, out=y)
    return float(np.abs(y - x).sum()), float(y[dangling.astype(bool)].sum())
