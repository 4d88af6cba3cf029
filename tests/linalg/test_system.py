"""Bad input to the solvers: the named error before any work."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu.linalg import block_jacobi, gmres, jacobi, minres, solve
from tests.linalg.helpers import (
    SOLVERS,
    convection_diffusion,
    poisson2d,
)


@pytest.mark.parametrize("method", list(SOLVERS))
def test_bad_input(method):
    solver = SOLVERS[method]
    S = poisson2d(4)
    b = np.ones(16)
    with pytest.raises(ValueError, match="square"):
        solver(sp.csr_array(np.ones((3, 4))), np.ones(3))
    with pytest.raises(ValueError, match="shape"):
        solver(S, np.ones(15))
    with pytest.raises(ValueError, match="NaN or infinity"):
        solver(S, np.where(np.arange(16) == 5, np.nan, 1.0))
    with pytest.raises(ValueError, match="rtol"):
        solver(S, b, rtol=-1e-3)
    with pytest.raises(ValueError, match="atol"):
        solver(S, b, atol=None)
    with pytest.raises(ValueError, match="maxiter"):
        solver(S, b, maxiter=-1)
    with pytest.raises(ValueError, match="preconditioner M has shape"):
        solver(S, b, M=sp.eye_array(3))
    with pytest.raises(TypeError, match="complex"):
        solver(S.astype(np.complex128), b)


BAD_OPTIONS = [
    ({"maxiter": 0}, ValueError, "maxiter must be at least 1"),
    ({"maxiter": 2.5}, TypeError, "maxiter must be an integer"),
    ({"maxiter": "3"}, TypeError, "maxiter must be an integer"),
    ({"check_every": 0}, ValueError, "check_every must be at least 1"),
    ({"check_every": 2.5}, TypeError, "check_every must be an integer"),
    ({"rtol": np.nan}, ValueError, "rtol"),
    ({"rtol": np.inf}, ValueError, "rtol"),
    ({"atol": 1j}, ValueError, "atol"),
    ({"rtol": True}, ValueError, "rtol"),
    ({"callback": "print"}, TypeError, "callback must be callable"),
    ({"M": "jacobi"}, TypeError, "M must be a sparsegpu matrix"),
    ({"M": object()}, TypeError, "M must be a sparsegpu matrix"),
    ({"M": np.eye(3)}, ValueError, "preconditioner M has shape"),
    ({"x0": np.ones(15)}, ValueError, "x0 has shape"),
    ({"x0": "zeros"}, ValueError, "x0 must be"),
]


@pytest.mark.parametrize("method", list(SOLVERS))
@pytest.mark.parametrize("options, error, message", BAD_OPTIONS)
def test_bad_options_raise_the_named_error(method, options, error, message):
    S = poisson2d(4)
    with pytest.raises(error, match=message):
        SOLVERS[method](S, np.ones(16), **options)


@pytest.mark.parametrize("method", list(SOLVERS))
def test_bad_system_names_a_or_b(method):
    solver = SOLVERS[method]
    S = poisson2d(4)
    with pytest.raises(ValueError, match=f"{method}: A must be square"):
        solver(np.ones((3, 4)), np.ones(3))
    with pytest.raises(TypeError, match="A has dtype complex128"):
        solver(S.astype(np.complex128), np.ones(16))
    with pytest.raises(TypeError, match="b has dtype complex128"):
        solver(S, np.ones(16, np.complex128))
    with pytest.raises(ValueError, match="b has shape"):
        solver(S, np.ones(17))
    with pytest.raises(TypeError, match="A must be"):
        solver("A", np.ones(16))
    with pytest.raises(ValueError, match="history of"):
        solve(S, np.ones(16), method=method, history=True, check_every=10**15)


def test_gmres_specific_options_and_maxiter_zero():
    S = poisson2d(4)
    for restart, error in ((0, ValueError), (2.5, TypeError), ("20", TypeError)):
        with pytest.raises(error, match="restart"):
            gmres(S, np.ones(16), restart=restart)
    with pytest.raises(ValueError, match="callback_type"):
        gmres(S, np.ones(16), callback=print, callback_type="residual")
    with pytest.raises(ValueError, match="gmres: maxiter must be at least 1"):  # SciPy: info 0, residual 1
        gmres(S, np.ones(16), maxiter=0)
    with pytest.raises(TypeError, match="check must be True or False"):
        minres(S, np.ones(16), check="yes")
    with pytest.raises(TypeError, match="shift"):
        minres(S, np.ones(16), shift="1")
    with pytest.raises(TypeError, match="history"):
        solve(S, np.ones(16), history="yes")


@pytest.mark.parametrize("method", list(SOLVERS))
def test_b_and_x0_are_never_written(method, rng):
    S = convection_diffusion(8) if method in ("bicgstab", "gmres") else poisson2d(8)
    b, x0 = rng.standard_normal(64), rng.standard_normal(64)
    b_copy, x0_copy = b.copy(), x0.copy()
    for M in (None, jacobi(S), block_jacobi(S, 4)):
        x, info = SOLVERS[method](S, b, x0=x0, rtol=1e-8, M=M)
        assert info == 0 and not np.shares_memory(x, b) and not np.shares_memory(x, x0)
        np.testing.assert_array_equal(b, b_copy)
        np.testing.assert_array_equal(x0, x0_copy)
