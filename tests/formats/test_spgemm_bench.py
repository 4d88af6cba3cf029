"""The SpGEMM comparison (sparsegpu/bench/spgemm.py) goes on past a product ours cannot compute."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from sparsegpu import datasets, primitives
from sparsegpu.bench import spgemm as bench
from sparsegpu.formats import _spgemm_device as _spgemm
from tests.formats.spgemm_cases import EmulatedKernels, dense_rows_operands


def test_a_failing_product_is_reported_and_the_run_goes_on(rng, monkeypatch):
    real = bench.spgemm
    big = sp.csr_array(sp.random_array((30, 30), density=0.3, rng=rng, format="csr"))

    def spgemm(A, B):
        if A.shape[0] == 30:
            raise MemoryError("spgemm: the product has 900 entries")
        return real(A, B)

    monkeypatch.setattr(bench, "spgemm", spgemm)
    rows = bench.run_spgemm({"big": big, "small": datasets.poisson2d(6)}, products=("AA",), backend="cpu", repeat=1)
    assert [r["matrix"] for r in rows] == ["big", "small"]
    assert rows[0]["status"].startswith("ours failed: MemoryError: spgemm: the product has 900")
    assert "ours_ms" not in rows[0]
    assert rows[1]["status"] == "ok" and rows[1]["baseline_status"] == "ok"
    assert rows[1]["out_nnz"] == (datasets.poisson2d(6) @ datasets.poisson2d(6)).nnz
    table = bench.format_rows(rows).splitlines()
    assert "ours failed: MemoryError" in table[1] and table[2].split()[0] == "small"
    assert np.isfinite(rows[1]["ours_ms"])


def test_profile_script_times_every_phase_and_restores_the_driver(rng):
    # scripts/profile_spgemm.py's phase timer around the GPU driver, run on the NumPy emulations
    # of the kernels: every phase of a product with wide rows and zeros is timed, nothing stays patched.
    path = Path(__file__).resolve().parents[2] / "scripts" / "profile_spgemm.py"
    spec = importlib.util.spec_from_file_location("profile_spgemm", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    S, T = dense_rows_operands(rng, 60, 4)
    S.data[::3] = 0.0
    originals = (_spgemm._Device.rows, _spgemm._allocate, _spgemm.to_host, primitives.exclusive_scan,
                 _spgemm._drop_zeros, _spgemm._numeric_lists, _spgemm._list_block)
    with script.phase_timer(lambda: None) as seconds:
        got = _spgemm.device_spgemm((S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data),
                                    (S.shape[0], T.shape[1]), None, None, False, 1 << 40, xp=np,
                                    kernels=EmulatedKernels(None, rng))
    assert (_spgemm._Device.rows, _spgemm._allocate, _spgemm.to_host, primitives.exclusive_scan,
            _spgemm._drop_zeros, _spgemm._numeric_lists, _spgemm._list_block) == originals
    assert {"plan", "sym wide", "num wide", "scan", "bins", "alloc", "drop"} <= set(seconds)
    assert set(seconds) <= set(script.PHASES) and all(v >= 0 for v in seconds.values())
    assert np.array_equal(got[0], sp.csr_array(S @ T).indptr)
    assert script.load("poisson2d:4").shape == (16, 16)
    table = script.format_table([{"matrix": "m", "n": 3, "products": 9, "wide_rows": 0, **dict.fromkeys(script.PHASES, 0.5),
                                  "ours_ms": 1.0, "ours_mib": 2.0, "cupyx_ms": 2.0, "cupyx_mib": 3.0,
                                  "cupyx_status": "ok"}])
    assert table.splitlines()[1].split()[-6:] == ["1.00", "2.00", "2.00", "2", "3", "ok"]
