"""sparsegpu.primitives.dot: the deterministic dot product ``w . y`` accumulated in float64.

CPU tests check :func:`vector_dot` against NumPy in float64; GPU tests (marked ``gpu``) run
kernels/krylov.cu op DOT into a poisoned output against the NumPy reference, and check that it
is bitwise reproducible and allocates its scratch once.
"""

from __future__ import annotations

import numpy as np
import pytest

from sparsegpu import primitives as P
from sparsegpu.reference.spmv import dot_into
from tests.conftest import to_numpy
from tests.primitives.helpers import device

FLOAT_DTYPES = [np.float32, np.float64]


def dot_bound(w, y, n):
    """float64 rounding of a sum of n products, in any order: a generous depth times sum |w y|."""
    scale = float(np.abs(w.astype(np.float64)) @ np.abs(y.astype(np.float64)))
    return np.finfo(np.float64).eps * (64 + n) * scale + np.finfo(np.float64).tiny


# =========================================================================== CPU: NumPy


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("n", [0, 1, 33, 10_007])
def test_vector_dot_matches_numpy_in_float64(rng, dtype, n):
    w, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    out = np.full(1, np.nan)
    got = P.vector_dot(w, y, out, {})
    assert got is out and out.dtype == np.float64
    assert out[0] == np.dot(w.astype(np.float64), y.astype(np.float64))


def test_vector_dot_writes_into_a_view():
    buffer = np.full(3, np.nan)
    P.vector_dot(np.arange(4.0), np.ones(4), buffer[1:2], {})
    assert buffer[1] == 6.0 and np.isnan(buffer[0]) and np.isnan(buffer[2])


# =========================================================================== GPU: the kernel


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("n", [1, 33, 1023, 70_001, 2**20 + 7])
def test_gpu_vector_dot_matches_the_reference(rng, dtype, n):
    import cupy

    w, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    want = dot_into(w, y, np.empty(1))[0]
    cache: dict = {}
    out = cupy.full(1, np.nan)
    P.vector_dot(device(w), device(y), out, cache)
    got = float(to_numpy(out)[0])
    assert abs(got - want) <= dot_bound(w, y, n)
    scratch = cache["krylov_dot_scratch"]
    for _ in range(2):  # bitwise the same, with the same scratch
        again = cupy.full(1, np.nan)
        P.vector_dot(device(w), device(y), again, cache)
        assert to_numpy(again).tobytes() == to_numpy(out).tobytes(), "not reproducible"
        assert cache["krylov_dot_scratch"] is scratch
    assert int(scratch[1][0]) == 0  # the ticket counter is left at zero for the next launch

