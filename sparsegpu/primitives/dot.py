"""The deterministic dot product ``w . y``, accumulated in float64 and reduced in a fixed order.

Its kernel is op DOT of kernels/krylov.cu, the family of fused vector steps the Krylov solvers
run (one translation unit, so the grid-wide reduction is compiled once for all of them):
:data:`KRYLOV_KERNELS` is declared here, below the formats that fall back to the dot product
and the solvers that launch the other steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._kernels import KernelFile, blocks_for, device_properties
from sparsegpu.reference import krylov as krylov_reference
from sparsegpu.reference.spmv import dot_into

BLOCK = 256  # kernels/krylov.cu sg_krylov::BLOCK
BLOCKS_PER_SM = 8  # 2048 resident threads per SM / BLOCK
OPS = range(krylov_reference.OPS)  # kernels/krylov.cu enum Op
KRYLOV_KERNELS = KernelFile(
    "krylov.cu",
    [f"krylov_step<{{V}}, {op}>" for op in OPS],
    value_dtypes=(np.float32, np.float64),
    index_dtypes=(np.int32,),
)
NULL_POINTER = np.uint64(0)  # a null device pointer argument


def krylov_grid(n: int) -> int:
    """Blocks of a krylov_step launch over n elements: one wave of resident blocks at most."""
    return min(blocks_for(n, BLOCK), device_properties()["multiprocessors"] * BLOCKS_PER_SM)


def dot_scratch(cache: dict[str, Any], key: str, blocks: int) -> tuple[Any, Any]:
    """(partials, counter) for a deterministic grid-wide dot product over ``blocks`` blocks
    (common.cuh ``sg::grid_sums``): ``blocks`` doubles and a ticket counter that the kernel
    leaves at zero. Allocated on first use and kept in ``cache`` (a matrix's cache), so later
    calls allocate nothing (CUDA graph capture)."""
    import cupy

    held = cache.get(key)
    if held is None or held[0].size < blocks:
        held = (cupy.empty(blocks, np.float64), cupy.zeros(1, np.uint32))
        cache[key] = held
    return held


def vector_dot(w: Any, y: Any, out: Any, cache: dict[str, Any]) -> Any:
    """``out[0] = w . y``, accumulated in float64 and reduced in a fixed order.

    Parameters
    ----------
    w, y : ndarray
        float32 or float64 vectors of one length, both NumPy or both CuPy. Not checked here
        (:meth:`SparseMatrix.spmv_dot <sparsegpu.formats.SparseMatrix.spmv_dot>` checks them).
    out : ndarray
        float64, shape (1,), on the same backend; a view into a larger array works.
    cache : dict
        Where the GPU's reduction scratch is kept between calls (a matrix's cache), so nothing
        is allocated after the first call.

    Returns
    -------
    ndarray
        ``out``, written in place. Bitwise reproducible run to run.

    Notes
    -----
    On the GPU this is kernels/krylov.cu op DOT: nothing is read back to the host and nothing
    allocated after the first call, so the call can be captured in a CUDA graph. On the CPU,
    NumPy's dot product in float64.

    Examples
    --------
    >>> import numpy as np
    >>> out = np.empty(1)
    >>> float(vector_dot(np.arange(3.0), np.ones(3), out, {})[0])
    3.0
    """
    if isinstance(y, np.ndarray):
        return dot_into(w, y, out)
    grid = krylov_grid(y.size)
    partials, counter = dot_scratch(cache, "krylov_dot_scratch", 2 * grid)
    dummy = y[:0]
    kernel = KRYLOV_KERNELS.function(f"krylov_step<{{V}}, {krylov_reference.DOT}>", y.dtype)
    kernel(
        (grid,), (BLOCK,),
        (np.int64(y.size), w, y, dummy, dummy, dummy, dummy, dummy, np.int32(0), out, NULL_POINTER,
         partials, counter, NULL_POINTER),
    )
    return out
