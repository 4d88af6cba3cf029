"""CG's vector updates, fused on the GPU where the bits stay those of the separate updates.

``p = beta * p + z`` (``p.scale(beta); p += z``) and ``x += alpha p; r -= alpha q``
(``x.axpy(alpha, p); r.axpy(-alpha, q)``) are six CuPy launches and two temporaries apart,
two launches fused. Each fused operation rounds exactly where the separate ones do: the
products and sums are written with round-to-nearest intrinsics (``__dmul_rn``, ``__dadd_rn``),
which the compiler never contracts into a fused multiply-add. Only float64 vectors take the
fused kernels (where CuPy's separate updates compute in float64 too); other dtypes and the CPU
backend run the separate updates.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from sparsegpu._backend import is_device_array


@functools.cache
def _kernels() -> tuple[Any, Any]:
    """(direction, iterate) ElementwiseKernels, made once (compiled on first use per device)."""
    import cupy

    direction = cupy.ElementwiseKernel("float64 z, float64 beta", "float64 p",
                                       "p = __dadd_rn(__dmul_rn(p, beta), z)", "sparsegpu_cg_direction")
    iterate = cupy.ElementwiseKernel("float64 p, float64 q, float64 alpha, float64 minus_alpha",
                                     "float64 x, float64 r",
                                     "x = __dadd_rn(x, __dmul_rn(alpha, p)); "
                                     "r = __dadd_rn(r, __dmul_rn(minus_alpha, q))",
                                     "sparsegpu_cg_iterate")
    return direction, iterate


def _fusable(*arrays: Any) -> bool:
    return all(is_device_array(a) and a.dtype == np.float64 for a in arrays)


def update_direction(p: Any, z: Any, beta: Any) -> None:
    """``p = beta * p + z`` in place (DistributedVectors of one partition), rounded as
    ``p.scale(beta); p += z``."""
    if _fusable(p.local, z.local) and isinstance(beta, (float, np.floating)):
        _kernels()[0](z.local, np.float64(beta), p.local)
        return
    p.scale(beta)
    p += z


def update_iterate(x: Any, r: Any, p: Any, q: Any, alpha: Any) -> None:
    """``x += alpha p`` and ``r -= alpha q`` in place, rounded as ``x.axpy(alpha, p);
    r.axpy(-alpha, q)``."""
    if _fusable(x.local, r.local, p.local, q.local) and isinstance(alpha, (float, np.floating)):
        _kernels()[1](p.local, q.local, np.float64(alpha), np.float64(-alpha), x.local, r.local)
        return
    x.axpy(alpha, p)
    r.axpy(-alpha, q)
