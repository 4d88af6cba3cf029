"""The fused workspace: graph cache, and the GPU steps against the reference steps."""

from __future__ import annotations

import numpy as np
import pytest

from sparsegpu.reference import krylov as reference
from tests.conftest import to_numpy
from tests.linalg.helpers import (
    GMRES_STEPS,
    _gmres_case,
    _gmres_step_arguments,
    _minres_state,
    _random_case,
    assert_step_matches_reference,
)


def test_graph_cache_launches_each_run_once(monkeypatch):
    """GraphCache: a key's first run is eager, its second captures and launches the graph,
    later runs replay it; a failed capture leaves everything eager."""
    from sparsegpu.linalg import _fused

    class FakeGraph:
        def __init__(self, launches):
            self.launch = launches

    for capturable in (True, False):
        captures = []
        monkeypatch.setattr(_fused, "capture_graph",
                            lambda launches: captures.append(1) or (FakeGraph(launches) if capturable else None))
        cache = _fused.GraphCache(_fused.FusedWorkspace("cpu", 3, np.dtype(np.float64), 0.0, 1))
        assert not cache.enabled  # the CPU backend never captures
        cache.enabled = True
        calls = []
        for _ in range(4):
            for key in (0, "end of cycle"):
                cache.run(key, lambda key=key: calls.append(key))
        assert calls == [0, "end of cycle"] * 4
        assert len(captures) == (2 if capturable else 1) and cache.enabled == capturable


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 255, 1000, 70_001])
@pytest.mark.parametrize("op", list(range(10)))
@pytest.mark.parametrize("flag", [0, reference.FLAG_DINV])
def test_fused_step_matches_reference(op, n, dtype, flag, rng):
    import cupy as cp

    from sparsegpu.linalg._fused import FusedWorkspace

    vecs, dinv, sc, st = _random_case(op, n, dtype, rng, cp)
    ws = FusedWorkspace("gpu", n, np.dtype(dtype), 1e-3, 50, history_ring=8)
    ws.sc[...] = cp.asarray(sc)
    ws.st[...] = cp.asarray(st)
    device = [cp.asarray(v) for v in vecs]
    written = {reference.BI_P: 3, reference.BI_S: 2}.get(op)
    if written is not None and flag:
        device[written].fill(np.nan)  # an output only: poisoned so unwritten entries show
        vecs[written][:] = np.nan
    host_hist = np.full(8, np.nan)
    ws.step(op, *device, dinv=cp.asarray(dinv), flag=flag)
    reference.krylov_step(op, n, *vecs, dinv, flag, sc, st, host_hist)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in zip(device, vecs):
        np.testing.assert_allclose(to_numpy(got), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(to_numpy(ws.sc), sc, rtol=1e-9 if dtype == np.float64 else 1e-4)
    np.testing.assert_array_equal(to_numpy(ws.st), st)
    # The history holds norms from float32 dot products when dtype is float32.
    np.testing.assert_allclose(to_numpy(ws.history), host_hist, rtol=1e-9 if dtype == np.float64 else 1e-5)
    assert int(ws.counter[0]) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 255, 70_001])
@pytest.mark.parametrize("op", [reference.MR_LANCZOS, reference.MR_RESIDUAL, reference.MR_RZ, reference.MR_UPDATE])
@pytest.mark.parametrize("flag", [0, reference.FLAG_DINV, reference.FLAG_LATE_RHO, reference.FLAG_START | reference.FLAG_DINV])
def test_fused_minres_step_matches_reference(op, n, dtype, flag, rng):
    import cupy as cp

    from sparsegpu.linalg._fused import FusedWorkspace

    vecs, dinv, sc, st = _minres_state(n, rng)
    vecs = [v.astype(dtype) for v in vecs]
    dinv = dinv.astype(dtype)
    ws = FusedWorkspace("gpu", n, np.dtype(dtype), 1e-3, 50, history_ring=8)
    ws.sc[...] = cp.asarray(sc)
    ws.st[...] = cp.asarray(st)
    device = [cp.asarray(v) for v in vecs]
    host_hist = np.full(8, np.nan)
    exact_sc = sc.copy()  # the same inputs stepped in float64
    reference.krylov_step(op, n, *(v.astype(np.float64) for v in vecs), dinv.astype(np.float64), flag, exact_sc,
                     st.copy(), np.full(8, np.nan))
    ws.step(op, *device, dinv=cp.asarray(dinv), flag=flag)
    reference.krylov_step(op, n, *vecs, dinv, flag, sc, st, host_hist)
    assert_step_matches_reference(ws, device, vecs, sc, st, host_hist, dtype, float32_scalar_rtol=1e-4, exact_sc=exact_sc)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 255, 70_001])
@pytest.mark.parametrize("op, flag, status", GMRES_STEPS)
def test_fused_gmres_step_matches_reference(op, flag, status, n, dtype, rng):
    import cupy as cp

    from sparsegpu.linalg._fused import FusedWorkspace

    col, sc, st, basis, vecs, dinv = _gmres_case(op, flag, status, n, dtype, rng)
    outputs = {(reference.GM_ARNOLDI_FIRST, reference.FLAG_DINV): 0, (reference.GM_RESIDUAL, reference.FLAG_START | reference.FLAG_DINV): 3}
    host_args = _gmres_step_arguments(op, flag, basis, vecs, col)
    if (op, flag) in outputs:
        host_args[outputs[op, flag]][:] = np.nan  # an output only: poisoned so unwritten entries show
    if (op, flag) == (reference.GM_RESIDUAL, reference.FLAG_START):
        basis[0][:] = np.nan  # v[0] = r is written, never read
    device_basis, device_vecs = cp.asarray(basis), [cp.asarray(v) for v in vecs]
    device_args = _gmres_step_arguments(op, flag, device_basis, device_vecs, col)
    ws = FusedWorkspace("gpu", n, np.dtype(dtype), 1e-3, 50, history_ring=8, gmres_restart=4)
    ws.sc[...] = cp.asarray(sc)
    ws.st[...] = cp.asarray(st)
    host_hist = np.full(8, np.nan)
    padding = [None] * (6 - len(host_args))
    ws.step(op, *device_args, *padding, dinv=cp.asarray(dinv), flag=flag)
    reference.krylov_step(op, n, *host_args, *padding, dinv, flag, sc, st, host_hist)
    assert_step_matches_reference(ws, [device_basis, *device_vecs], [basis, *vecs], sc, st, host_hist, dtype,
                             float32_scalar_rtol=1e-5)
