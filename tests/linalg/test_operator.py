"""Operators: products without a fused epilogue fall back to a separate dot."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

import sparsegpu
from sparsegpu.linalg import (
    cg,
)
from tests.linalg.helpers import (
    poisson2d,
)


def test_operators_without_a_fused_product_fall_back(rng):
    """CG over operators that have no spmv_dot (A.T, a LinearOperator, a dense array) gives
    SciPy's iterates: their product is followed by a separate dot pass."""
    S = poisson2d(14)
    b = rng.standard_normal(S.shape[0])
    x_ref, _ = sla.cg(S, b, rtol=1e-10)
    A = sparsegpu.from_scipy(S, backend="cpu")
    for op in (A.T, sla.aslinearoperator(S), S.toarray(), A):
        x, info = cg(op, b, rtol=1e-10)
        assert info == 0
        np.testing.assert_allclose(x, x_ref, rtol=1e-8, atol=1e-10)


def test_operator_apply_dot_fallback_is_the_product_and_numpy_dot(rng):
    from sparsegpu.linalg._operator import as_operator

    S = sp.csr_array(sp.random_array((40, 40), density=0.2, rng=rng) + sp.eye_array(40))
    x = rng.standard_normal(40)
    for A in (S, sla.aslinearoperator(S), sparsegpu.from_scipy(S, backend="cpu").T.T):
        op = as_operator(A, np.dtype(np.float64), "cpu")
        out, dot = np.empty(40), np.empty(1)
        op.apply_dot(x, out, dot)
        np.testing.assert_allclose(out, S @ x, rtol=1e-13)
        assert dot[0] == float(np.dot(x, out))
