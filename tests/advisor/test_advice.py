"""sparsegpu/advisor/advice.py: advise's choices, reasons, payoff and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import advisor
from sparsegpu.advisor.advice import _reason, _sell_reason
from tests.advisor.helpers import model_cases, tridiagonal


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
    # SELL qualifies only because its conversion splits the long row into parts.
    assert advice.format in ("csr", "hyb", "coo", "sell"), repr(advice)
    assert advisor.sell_layout(advice.stats).mode == "units"
    assert advice.estimates["ell"].refused
    assert advice.estimates["jds"].time_us > 10 * advice.estimates[advice.format].time_us


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


def test_reasons_describe_sells_mode_and_csrs_margin(rng):
    hubs = advisor.matrix_stats(model_cases(rng)["hub rows"], backend="cpu")
    assert advisor.sell_layout(hubs).mode == "units"
    units = _sell_reason(hubs)
    assert "cut into parts" in units and "one launch" in units and "two more launches" in units
    assert "a thread per row" in _sell_reason(advisor.matrix_stats(tridiagonal(500), backend="cpu"))
    stats = advisor.matrix_stats(tridiagonal(500), backend="cpu")
    est = advisor.estimates(stats)
    est["csr"].time_us, est["jds"].time_us = 10.3, 10.0
    ranking = advisor.rank(est, ["csr", "jds"])
    assert ranking == ["csr", "jds"]
    assert "so CSR is kept" in _reason("csr", stats, est, ranking)


def test_advice_says_where_its_times_come_from(backend, rng):
    """The printed advice says, on the CPU backend, that its times are the model's GPU
    predictions and that nothing was measured."""
    S = sp.random_array((300, 300), density=0.02, rng=rng, format="csr")
    advice = sparsegpu.advise(S, backend=backend)
    assert advice.backend == backend
    text = repr(advice)
    assert ("predicted GPU times (the model's, not measured on this CPU backend)" in text) == (backend == "cpu")
    assert str(advice) == text and "predicted" in text
