"""The CPU steps: in-place NumPy, bitwise the reference steps."""

import numpy as np
import pytest

from sparsegpu.linalg import _fused, cg, jacobi
from sparsegpu.reference import krylov as reference
from tests.linalg.helpers import poisson2d


def _reference_step(op, n, vectors, dinv, flag, sc, st, history, scratch):
    scratch.fill(np.nan)  # the reference steps never read it
    reference.krylov_step(op, n, *vectors, dinv, flag, sc, st, history)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("preconditioned", [False, True])
def test_cpu_cg_steps_are_bitwise_the_reference(dtype, preconditioned, rng, monkeypatch):
    S = poisson2d(12).astype(dtype)
    b = rng.standard_normal(S.shape[0]).astype(dtype)
    M = jacobi(S) if preconditioned else None
    for maxiter in (None, 5):
        x, info = cg(S, b, rtol=1e-6, M=M, maxiter=maxiter)
        with monkeypatch.context() as patch:
            patch.setattr(_fused, "host_step", _reference_step)
            x_ref, info_ref = cg(S, b, rtol=1e-6, M=M, maxiter=maxiter)
        assert info == info_ref and np.array_equal(x, x_ref)


def test_vector_arguments_by_role():
    assert reference.vector_arguments(reference.BI_OMEGA, s="s", t="t") == ("t", "s", None, None, None, None)
    with pytest.raises(TypeError, match="takes the vectors"):
        reference.vector_arguments(reference.CG_P, q="q")
    assert set(reference.ROLES) == set(range(reference.OPS))
