"""PageRank's fused vector step on the GPU (kernels/graph_centrality.cu; NumPy reference:
reference.graph_centrality.pagerank_update, same arguments)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._kernels import KernelFile, blocks_for

PR_BLOCK = 256  # kernels/graph_centrality.cu PR_BLOCK
#: The most blocks of the fused step: past this each thread takes more entries. The grid depends
#: on n alone, so the sums' order (and bits) does not depend on the GPU.
MAX_BLOCKS = 1024

# float64 only: graphs are float64 (the index type is a placeholder).
CENTRALITY_KERNELS = KernelFile("graph_centrality.cu", ["pagerank_update<{V}>"], (np.float64,), (np.int32,))


class PagerankStep:
    """The vector work of PageRank's steps after each product, on the device: launch
    :meth:`update` after ``y = M @ x``. It keeps the dangling mass of the last iterate in device
    memory for the next step, so no step waits for the host.

    Parameters
    ----------
    dangling : cupy.ndarray of bool
        The vertices without out-weight.
    dangling_weights, teleport : cupy.ndarray of float64
        NetworkX's dangling distribution and ``(1 - alpha) * personalization``.
    alpha : float
        The damping factor.
    start : cupy.ndarray of float64
        The first iterate x_0 (its dangling mass starts the first step).
    """

    def __init__(self, dangling: Any, dangling_weights: Any, teleport: Any, alpha: float, start: Any) -> None:
        import cupy

        self.n = start.size
        self.grid = min(MAX_BLOCKS, blocks_for(self.n, PR_BLOCK))
        self.dangling = cupy.ascontiguousarray(dangling, dtype=np.uint8)
        self.dangling_weights = cupy.ascontiguousarray(dangling_weights, dtype=np.float64)
        self.teleport = cupy.ascontiguousarray(teleport, dtype=np.float64)
        self.alpha = np.float64(alpha)
        self.partials = cupy.empty(2 * self.grid, dtype=np.float64)
        self.counter = cupy.zeros(1, dtype=np.uint32)
        self.carried = cupy.empty(2, dtype=np.float64)  # dangling mass, in turn read and written
        self.carried[0] = (start * self.dangling).sum()
        self.steps = 0
        self.kernel = CENTRALITY_KERNELS.function("pagerank_update<{V}>", np.float64)

    def update(self, y: Any, x: Any, error: Any) -> None:
        """``y`` (holding M x) becomes the next iterate; ``error`` (one float64 on the device)
        gets its l1 change from ``x``."""
        read, write = self.carried[self.steps % 2:][:1], self.carried[(self.steps + 1) % 2:][:1]
        self.kernel((self.grid,), (PR_BLOCK,), (y, x, self.dangling_weights, self.teleport, self.dangling,
                                                self.alpha, np.int64(self.n), read, self.partials, self.counter,
                                                error, write))
        self.steps += 1
