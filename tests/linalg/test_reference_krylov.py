"""The reference steps of kernels/krylov.cu, by hand, and their numbers against the kernel's."""

from __future__ import annotations

import numpy as np
import pytest

from sparsegpu.reference import krylov as reference
from tests.linalg.helpers import (
    GMRES_STEPS,
    _gmres_case,
    _gmres_step_arguments,
    _minres_state,
    _workspace,
)


def test_reference_cg_steps_by_hand():
    p, q = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    sc, st = _workspace()
    sc[reference.RHO] = 22.0
    # p.q as the operator's spmv_dot leaves it (op DOT writes its one-element output)
    reference.krylov_step(reference.DOT, 2, p, q, None, None, None, None, None, 0, sc[reference.PQ : reference.PQ + 1], None)
    assert sc[reference.PQ] == 11.0
    x, r = np.zeros(2), np.array([6.0, 9.0])
    reference.krylov_step(reference.CG_UPDATE, 2, r, q, None, None, None, None, None, 0, sc, st)
    assert sc[reference.ALPHA] == 2.0  # 22 / (3 + 8), computed by CG_UPDATE
    np.testing.assert_array_equal(r, [0.0, 1.0])
    assert st[reference.COUNT] == 1 and sc[reference.RHO] == 1.0 and sc[reference.BETA] == 1.0 / 22.0
    assert st[reference.STATUS] == reference.RUNNING and sc[reference.RNORM] == 1.0 and st[reference.PENDING] == 1
    np.testing.assert_array_equal(x, [0.0, 0.0])  # x waits for CG_P
    reference.krylov_step(reference.CG_P, 2, p, r, x, None, None, None, None, 0, sc, st)
    np.testing.assert_array_equal(x, [2.0, 4.0])  # x += alpha p, with p before its update
    np.testing.assert_allclose(p, [1.0 / 22.0, 1.0 + 2.0 / 22.0])
    assert st[reference.PENDING] == 0
    # convergence: CG_P still adds alpha p to x, leaves p; then every step is frozen
    sc[reference.ATOL] = 10.0
    sc[reference.PQ] = 0.5
    p_before = p.copy()
    reference.krylov_step(reference.CG_UPDATE, 2, r, q, None, None, None, None, None, 0, sc, st)
    assert st[reference.STATUS] == reference.CONVERGED and st[reference.PENDING] == 1
    reference.krylov_step(reference.CG_P, 2, p, r, x, None, None, None, None, 0, sc, st)
    np.testing.assert_allclose(x, [2.0, 4.0] + sc[reference.ALPHA] * p_before)
    np.testing.assert_array_equal(p, p_before)
    frozen = (x.copy(), r.copy(), p.copy(), sc.copy(), st.copy())
    reference.krylov_step(reference.CG_UPDATE, 2, r, q, None, None, None, None, None, 0, sc, st)
    reference.krylov_step(reference.CG_P, 2, p, r, x, None, None, None, None, 0, sc, st)
    for got, want in zip((x, r, p, sc, st), frozen):
        assert np.array_equal(got, want)


def test_reference_jacobi_fused_rho_and_breakdowns():
    r, dinv = np.array([1.0, 2.0]), np.array([0.5, 0.25])
    sc, st = _workspace()
    reference.krylov_step(reference.CG_UPDATE, 2, r, np.zeros(2), None, None, None, None, dinv,
                     reference.FLAG_DINV | reference.FLAG_START, sc, st)
    assert sc[reference.RHO] == 1.5 and st[reference.COUNT] == 0  # 0.5 + 4 * 0.25
    for pq, status in ((0.0, reference.DENOMINATOR_BREAKDOWN), (np.nan, reference.NONFINITE)):
        sc, st = _workspace(count=2)
        sc[reference.RHO], sc[reference.PQ] = 1.0, pq
        x, r, p = np.ones(2), np.array([1.0, 2.0]), np.ones(2)
        reference.krylov_step(reference.CG_UPDATE, 2, r, np.ones(2), None, None, None, None, None, 0, sc, st)
        reference.krylov_step(reference.CG_P, 2, p, r, x, None, None, None, None, 0, sc, st)
        assert st[reference.STATUS] == status and st[reference.COUNT] == 2  # no update, no count
        assert st[reference.PENDING] == 0  # so CG_P leaves x alone
        np.testing.assert_array_equal(x, 1.0)
        np.testing.assert_array_equal(r, [1.0, 2.0])
    # The iteration limit freezes later steps (status LIMIT, info = maxiter)
    sc, st = _workspace(maxiter=3, count=2)
    sc[reference.RHO], sc[reference.PQ] = 1.0, 2.0
    x, r, p = np.zeros(2), np.array([1.0, 2.0]), np.ones(2)
    reference.krylov_step(reference.CG_UPDATE, 2, r, np.ones(2), None, None, None, None, None, 0, sc, st)
    assert st[reference.STATUS] == reference.LIMIT and st[reference.COUNT] == 3
    reference.krylov_step(reference.CG_P, 2, p, r, x, None, None, None, None, 0, sc, st)
    np.testing.assert_array_equal(x, 0.5)  # the last iteration's x update still happens
    frozen = x.copy()
    reference.krylov_step(reference.CG_UPDATE, 2, r, np.ones(2), None, None, None, None, None, 0, sc, st)
    reference.krylov_step(reference.CG_P, 2, p, r, x, None, None, None, None, 0, sc, st)
    assert np.array_equal(x, frozen) and st[reference.COUNT] == 3
    sc, st = _workspace()
    reference.krylov_step(reference.BI_START, 2, np.array([np.nan, 1.0]), np.array([1.0, 1.0]), None, None, None,
                     None, None, 0, sc, st)
    assert st[reference.STATUS] == reference.NONFINITE


def test_reference_minres_steps_are_frozen_after_istop(rng):
    """Every MINRES step leaves vectors and scalars alone once the status is not RUNNING."""
    vecs, dinv, sc, st = _minres_state(7, rng)
    st[reference.STATUS] = reference.CONVERGED
    before = [v.copy() for v in vecs], sc.copy(), st.copy()
    for op, flag in ((reference.MR_LANCZOS, 0), (reference.MR_RESIDUAL, reference.FLAG_DINV), (reference.MR_RZ, 0),
                     (reference.MR_UPDATE, reference.FLAG_DINV)):
        reference.krylov_step(op, 7, *vecs, dinv, flag, sc, st)
    for got, want in zip(vecs, before[0]):
        assert np.array_equal(got, want)
    assert np.array_equal(sc, before[1]) and np.array_equal(st, before[2])


def test_reference_minres_steps_by_hand(rng):
    vecs, dinv, sc, st = _minres_state(5, rng)
    q, v, r1 = (x.copy() for x in vecs[:3])
    reference.krylov_step(reference.MR_LANCZOS, 5, *vecs, dinv, 0, sc, st)
    y = q - sc[reference.MR_SHIFT] * v - (sc[reference.MR_BETA] / sc[reference.MR_OLDB]) * r1
    np.testing.assert_allclose(vecs[0], y, rtol=1e-14)
    assert sc[reference.MR_ALFA] == pytest.approx(v @ y, rel=1e-13)
    r2 = vecs[1].copy()
    beta = sc[reference.MR_BETA]
    reference.krylov_step(reference.MR_RESIDUAL, 5, vecs[2], vecs[1], vecs[0], None, None, None, dinv, reference.FLAG_DINV, sc, st)
    new_r2 = y - (sc[reference.MR_ALFA] / beta) * r2
    np.testing.assert_array_equal(vecs[2], r2)  # r1 = r2
    np.testing.assert_allclose(vecs[1], new_r2, rtol=1e-14)
    assert st[reference.COUNT] == 4 and sc[reference.MR_OLDB] == beta
    assert sc[reference.MR_BETA] == pytest.approx(np.sqrt(new_r2 @ (dinv * new_r2)), rel=1e-13)
    assert sc[reference.RNORM] == sc[reference.MR_PHIBAR]


def test_reference_mirrors_the_kernels_numbers():
    """Slots, words, status codes, op codes and flags: the same numbers in kernels/krylov.cu."""
    import re

    from sparsegpu._kernels import read_source

    source = read_source("krylov.cu")
    names = 0
    for block in re.findall(r"enum (?:Slot|Word|Status|Op|Flag) \{(.*?)\};", source, re.S):
        for name, value in re.findall(r"\b([A-Z][A-Z0-9_]*) = (-?\d+)", block):
            assert getattr(reference, name) == int(value), name
            names += 1
    assert names > 70
    assert (reference.OPS, reference.WORDS) == (reference.GM_RESIDUAL + 1, reference.GM_LEGACY + 1)


def test_reference_lartg_is_lapacks(rng):
    from scipy.linalg import get_lapack_funcs

    lartg = get_lapack_funcs("lartg", dtype=np.float64)
    values = rng.standard_normal((3000, 2)) * 10.0 ** rng.integers(-300, 300, (3000, 2))
    values[::7, 1] = 0.0
    values[::11, 0] = 0.0
    for f, g in values:
        assert reference.lartg(float(f), float(g)) == tuple(float(t) for t in lartg(f, g)), (f, g)


def test_reference_gmres_steps_freeze_outside_their_phase(rng):
    """Inner steps do nothing once the inner loop stopped (or the solve ended); cycle-end steps
    do nothing unless the inner loop stopped."""
    for op, flag, status in GMRES_STEPS:
        for other in (reference.CONVERGED, reference.NONFINITE, reference.RUNNING if status != reference.RUNNING else reference.GM_INNER_DONE):
            col, sc, st, basis, vecs, dinv = _gmres_case(op, flag, status, 6, np.float64, rng)
            st[reference.STATUS] = other
            before = basis.copy(), [v.copy() for v in vecs], sc.copy(), st.copy()
            args = _gmres_step_arguments(op, flag, basis, vecs, col)
            reference.krylov_step(op, 6, *args, *([None] * (6 - len(args))), dinv, flag, sc, st)
            assert np.array_equal(basis, before[0]) and all(np.array_equal(a, b) for a, b in zip(vecs, before[1]))
            assert np.array_equal(sc, before[2]) and np.array_equal(st, before[3]), (op, flag, other)


def test_reference_gmres_column_by_hand(rng):
    """GM_ARNOLDI_LAST's epilogue on column col: SciPy's rotations, lartg, S and presid."""
    col, sc, st, basis, vecs, dinv = _gmres_case(reference.GM_ARNOLDI_LAST, 0, reference.RUNNING, 8, np.float64, rng)
    h, givens, S = (a.copy() for a in reference.gmres_arrays(sc, st))
    w, v = basis[col + 1].copy(), basis[col].copy()
    reference.krylov_step(reference.GM_ARNOLDI_LAST, 8, basis[col + 1], basis[col], None, None, None, None, None, 0, sc, st)
    w -= h[col, col] * v
    np.testing.assert_array_equal(basis[col + 1], w)
    h1 = np.linalg.norm(w)
    h[col, col + 1] = h1
    for k in range(col):
        c, s = givens[k]
        h[col, k], h[col, k + 1] = c * h[col, k] + s * h[col, k + 1], -s * h[col, k] + c * h[col, k + 1]
    c, s, mag = reference.lartg(h[col, col], h[col, col + 1])
    got_h, got_givens, got_S = reference.gmres_arrays(sc, st)
    np.testing.assert_allclose(got_h[col], np.r_[h[col, : col], mag, 0.0, h[col, col + 2 :]], rtol=1e-13)
    np.testing.assert_allclose(got_givens[col], [c, s], rtol=1e-13)
    np.testing.assert_allclose(got_S[col : col + 2], [c * S[col], -s * S[col]], rtol=1e-13)
    assert sc[reference.GM_PRESID] == pytest.approx(abs(s * S[col]), rel=1e-13)
    assert sc[reference.GM_RECIPROCAL] == pytest.approx(1 / h1, rel=1e-13)
    assert st[reference.COUNT] == 4 and st[reference.GM_COLS] == col + 1 and st[reference.STATUS] == reference.RUNNING
