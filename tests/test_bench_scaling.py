"""The distributed scaling model: halo counts against a direct count, and the model's shape."""

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu import datasets
from sparsegpu.bench import scaling


def test_halo_counts_equal_a_direct_count(rng):
    S = sp.random_array((300, 300), density=0.02, rng=rng, format="csr")
    offsets = np.array([0, 70, 150, 300])
    counts = scaling.halo_counts(S, offsets)
    dense = S.toarray() != 0
    for r in range(3):
        for q in range(3):
            cols = np.flatnonzero(dense[offsets[r]:offsets[r + 1], offsets[q]:offsets[q + 1]].any(axis=0))
            assert counts[r, q] == (0 if r == q else cols.size)


def test_poisson_halo_is_two_grid_lines_and_scaling_is_sublinear():
    S = datasets.poisson2d(100)  # 10,000 rows: a rank in the middle needs a grid line on each side
    rows = scaling.strong_scaling(S, spmv_seconds=1e-3, ranks=(1, 2, 4, 8))
    assert rows[0]["speedup"] == pytest.approx(1.0) and rows[0]["halo_s"] == 0
    assert rows[2]["halo_entries_max"] == 200
    speedups = [r["speedup"] for r in rows]
    assert speedups == sorted(speedups) and speedups[-1] < 8
    slow_link = scaling.predict(S, 8, 1e-3, gpus_per_node=1)  # every peer over the network
    assert slow_link["seconds"] > rows[-1]["seconds"]


def test_weak_scaling_efficiency_at_most_one():
    rows = scaling.weak_scaling(lambda p: datasets.poisson2d(round(50 * p ** 0.5)), spmv_seconds=1e-4, ranks=(1, 2, 4))
    assert rows[0]["efficiency"] == pytest.approx(1.0)
    assert all(0 < r["efficiency"] <= 1.0 for r in rows)
    assert "GPUs" in scaling.format_rows(rows)
