"""The format advisor: statistics (kernel vs twin vs NumPy), estimates, choices, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import advisor, datasets
from tests.conftest import REAL_MATRICES, requires_matrices


def tridiagonal(n: int) -> sp.csr_array:
    return sp.csr_array(sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(n, n)))


def test_stats_of_a_known_matrix(backend):
    s = advisor.matrix_stats(tridiagonal(1000), backend=backend)
    assert (s.rows, s.cols, s.nnz) == (1000, 1000, 2998)
    assert (s.row_min, s.row_max, s.empty_rows, s.bandwidth) == (2, 3, 0, 1)
    assert s.row_mean == pytest.approx(2.998)
    assert s.lower_fraction == pytest.approx(999 / 2998) and s.diagonal_fraction == pytest.approx(1000 / 2998)
    assert s.mean_distance == pytest.approx(1998 / 2998)
    assert s.ell_fill == pytest.approx((3000 - 2998) / 2998)
    assert s.hyb_width == 3 and s.hyb_ell_fraction == 1.0
    assert s.row_quantiles == {"p50": 3, "p90": 3, "p99": 3}
    assert s.triangular is None


def test_stats_match_numpy(backend, rng):
    S = sp.random_array((700, 500), density=0.03, rng=rng, format="csr")
    S = sp.csr_array(S.multiply(rng.random((700, 1)) < 0.8))  # some empty rows
    s = advisor.matrix_stats(S, backend=backend)
    lengths = np.diff(S.indptr)
    coo = S.tocoo()
    offset = coo.col.astype(np.int64) - coo.row
    assert s.row_max == lengths.max() and s.row_min == lengths.min() and s.empty_rows == (lengths == 0).sum()
    assert s.row_std == pytest.approx(lengths.std())
    assert s.bandwidth == np.abs(offset).max()
    assert s.upper_fraction == pytest.approx((offset > 0).mean())
    assert s.row_quantiles["p90"] == int(np.quantile(lengths, 0.9, method="inverted_cdf"))


def test_lower_triangular_is_recognised(backend):
    S = sp.csr_array(sp.tril(sp.random_array((300, 300), density=0.05, rng=0)) + sp.eye_array(300))
    assert advisor.matrix_stats(S, backend=backend).triangular == "lower"


@requires_matrices
@pytest.mark.gpu
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_gpu_structure_kernel_matches_twin(name):
    S = datasets.load_matrix(name)
    gpu = advisor.matrix_stats(S, backend="gpu")
    cpu = advisor.matrix_stats(S, backend="cpu")
    assert gpu == cpu


def test_advice_is_complete_and_readable(backend):
    advice = sparsegpu.advise(tridiagonal(2000), backend=backend)
    assert advice.format in advisor.CANDIDATES
    assert advice.ranking[0] == advice.format and set(advice.ranking) <= set(advisor.CANDIDATES)
    assert all(e.bytes > 0 and e.time_us > 0 for e in advice.estimates.values())
    assert len(advice.reason) > 40 and advice.reason.endswith(".")
    text = repr(advice)
    assert text.startswith(f"Advice: {advice.format}") and "predicted" in text
    assert advice.as_dict()["stats"]["rows"] == 2000


def test_advice_avoids_row_per_thread_formats_for_one_huge_row(backend, rng):
    S = sp.random_array((20000, 20000), density=2e-4, rng=rng, format="lil")
    S[7, :] = 1.0
    advice = sparsegpu.advise(sp.csr_array(S), backend=backend)
    assert advice.format in ("csr", "hyb", "coo"), repr(advice)
    assert advice.estimates["ell"].refused


def test_conversion_must_pay_off(backend, rng):
    S = sp.random_array((5000, 5000), density=1e-3, rng=rng, format="csr")
    once = sparsegpu.advise(S, n_spmv=1, backend=backend)
    assert once.format == "csr" and set(once.payoff) >= {"csr"}
    many = sparsegpu.advise(S, n_spmv=10**6, backend=backend)
    assert many.format == min(many.payoff, key=many.payoff.__getitem__)
    with pytest.raises(ValueError, match="n_spmv"):
        sparsegpu.advise(S, n_spmv=0, backend=backend)


def test_from_scipy_auto(backend, rng):
    S = sp.random_array((400, 300), density=0.02, rng=rng, format="csr")
    A = sparsegpu.from_scipy(S, format="auto", backend=backend)
    assert A.format == (sparsegpu.advise(S, backend=backend).format if backend == "gpu" else "csr")
    x = rng.standard_normal(300)
    np.testing.assert_allclose(np.asarray(A @ x), S @ x, rtol=1e-12, atol=1e-12)


def test_sparsegpu_matrices_are_accepted(backend, rng):
    S = sp.random_array((100, 100), density=0.05, rng=rng, format="csr")
    for fmt in ("coo", "csc"):
        assert sparsegpu.advise(sparsegpu.from_scipy(S, format=fmt, backend=backend)).stats.nnz == S.nnz


def test_bad_input():
    with pytest.raises(TypeError, match="dense 3-D"):
        sparsegpu.advise(np.ones((2, 2, 2)))
    with pytest.raises(TypeError, match="scipy.sparse"):
        sparsegpu.advise("not a matrix")
    S = tridiagonal(10)
    S.indices = S.indices.astype(np.float64)
    S.indices[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sparsegpu.advise(S)


def test_autotune_needs_the_gpu():
    with pytest.raises(ValueError, match="GPU"):
        sparsegpu.advise(tridiagonal(10), autotune=True, backend="cpu")
