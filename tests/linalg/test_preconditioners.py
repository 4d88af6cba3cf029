"""Jacobi and block Jacobi: application, and what they refuse."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu.linalg import (
    BlockJacobi,
    Jacobi,
    block_jacobi,
    jacobi,
)


def test_jacobi_and_block_jacobi_apply(rng):
    S = sp.csr_array(sp.random(37, 37, density=0.2, random_state=3) + 5 * sp.eye_array(37))
    x = rng.standard_normal(37)
    np.testing.assert_allclose(jacobi(S) @ x, x / S.diagonal())
    for size in (1, 4, 37):
        M = block_jacobi(S, size)
        assert isinstance(M, BlockJacobi) and M.shape == (37, 37)
        dense = S.toarray()
        expected = np.zeros(37)
        for start in range(0, 37, size):
            block = slice(start, min(start + size, 37))
            expected[block] = np.linalg.solve(dense[block, block], x[block])
        np.testing.assert_allclose(M @ x, expected, rtol=1e-10)
    assert isinstance(jacobi(sparsegpu.from_scipy(S, backend="cpu")), Jacobi)


def test_bad_preconditioners_name_the_rows():
    S = sp.csr_array(sp.diags_array([1.0, 0.0, 2.0, 0.0]))
    with pytest.raises(ValueError, match=r"zero in 2 row\(s\): 1, 3"):
        jacobi(S)
    with pytest.raises(ValueError, match=r"singular; the first covers rows 0..1"):
        block_jacobi(S, 2)
    with pytest.raises(ValueError, match="square"):
        jacobi(sp.csr_array(np.ones((2, 3))))
    with pytest.raises(ValueError, match="block_size"):
        block_jacobi(S, 0)


def test_jacobi_refuses_nonfinite_and_overflowing_diagonals():
    with pytest.raises(ValueError, match=r"NaN or infinite in 2 row\(s\): 0, 2"):
        jacobi(sp.csr_array(sp.diags_array([np.nan, 1.0, np.inf])))
    with pytest.raises(ValueError, match=r"overflows float32 in 1 row\(s\): 1"):
        jacobi(sp.csr_array(sp.diags_array(np.array([1.0, 1e-39], np.float32))))


def test_block_jacobi_takes_an_int_and_refuses_nonfinite_blocks(rng):
    S = sp.csr_array(sp.random_array((9, 9), density=0.3, rng=rng) + 4 * sp.eye_array(9))
    for size in (2.5, "2", None, True):
        with pytest.raises(TypeError, match="block_size must be an integer"):
            block_jacobi(S, size)
    bad = S.toarray()
    bad[5, 4] = np.nan
    with pytest.raises(ValueError, match=r"hold NaN or infinity; the first covers rows 4..5"):
        block_jacobi(sp.csr_array(bad), 2)
    M = block_jacobi(S, 100)  # a block larger than A is A itself
    x = rng.standard_normal(9)
    np.testing.assert_allclose(M @ x, np.linalg.solve(S.toarray(), x), rtol=1e-10)


def test_preconditioner_spmv_refuses_an_aliased_output(rng):
    S = sp.csr_array(sp.random_array((8, 8), density=0.3, rng=rng) + 4 * sp.eye_array(8))
    for M in (jacobi(S), block_jacobi(S, 3)):
        x = rng.standard_normal(8)
        with pytest.raises(ValueError, match="must not overlap x"):
            M.spmv(x, x)
        y = np.full(8, np.nan)  # poisoned: every entry must be written
        M.spmv(x, y)
        np.testing.assert_allclose(y, M @ x)
        with pytest.raises(TypeError, match="alpha"):
            M.spmv(x, y, alpha="2")
