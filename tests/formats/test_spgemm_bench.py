"""The SpGEMM comparison (sparsegpu/bench/spgemm.py) goes on past a product ours cannot compute."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sparsegpu import datasets
from sparsegpu.bench import spgemm as bench


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
