"""Generators and the registry of sparsegpu.datasets (CPU only, small presets)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu import datasets

from .conftest import REAL_MATRICES, requires_matrices


def assert_canonical(S: sp.csr_array) -> None:
    assert isinstance(S, sp.csr_array)
    assert S.indices.dtype == np.int32 and S.indptr.dtype == np.int32
    assert S.indptr[0] == 0 and S.indptr[-1] == S.nnz and np.all(np.diff(S.indptr) >= 0)
    assert S.indices.size == 0 or (S.indices.min() >= 0 and S.indices.max() < S.shape[1])
    for i in range(S.shape[0]):  # sorted, no duplicates
        assert np.all(np.diff(S.indices[S.indptr[i]:S.indptr[i + 1]]) > 0)


def reference_stencil(grid: tuple[int, ...], offsets: list[tuple[int, ...]], center: float) -> np.ndarray:
    """The stencil matrix built point by point, the obvious way."""
    n = int(np.prod(grid))
    dense = np.zeros((n, n))
    for point in np.ndindex(*grid):
        row = np.ravel_multi_index(point, grid)
        for off in offsets:
            neighbour = tuple(p + o for p, o in zip(point, off))
            if all(0 <= q < g for q, g in zip(neighbour, grid)):
                dense[row, np.ravel_multi_index(neighbour, grid)] = center if not any(off) else -1.0
    return dense


@pytest.mark.parametrize(
    ("build", "n", "expected_nnz"),
    [
        (datasets.poisson2d, 7, 5 * 7**2 - 4 * 7),
        (datasets.poisson3d, 5, 7 * 5**3 - 6 * 5**2),
        (datasets.stencil27, 5, (3 * 5 - 2) ** 3),
    ],
)
def test_stencils_counts_symmetry_and_definiteness(build, n, expected_nnz):
    S = build(n)
    assert_canonical(S)
    assert S.shape[0] == S.shape[1] == n ** (2 if build is datasets.poisson2d else 3)
    assert S.nnz == expected_nnz
    assert (S - S.T).count_nonzero() == 0
    assert np.linalg.eigvalsh(S.toarray()).min() > 0  # SPD, as CG benchmarks need


def test_stencils_match_point_by_point_construction():
    five = [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)]
    np.testing.assert_array_equal(datasets.poisson2d(4).toarray(), reference_stencil((4, 4), five, 4.0))
    from itertools import product

    cube = list(product((-1, 0, 1), repeat=3))
    np.testing.assert_array_equal(datasets.stencil27(3).toarray(), reference_stencil((3, 3, 3), cube, 26.0))
    # A non-square grid catches swapped strides.
    np.testing.assert_array_equal(datasets.stencil((3, 5), five, 4.0, -1.0).toarray(),
                                  reference_stencil((3, 5), five, 4.0))


def test_rmat_shape_duplicates_and_skew():
    S = datasets.rmat(10, 8, seed=5)
    assert_canonical(S)
    assert S.shape == (1024, 1024)
    edges = 8 * 1024
    assert S.nnz < edges  # repeated edges merged...
    assert abs(S.sum() / edges - 1.0) < 0.05  # ...by summing their weights (mean 1), not dropping them
    lengths = np.diff(S.indptr)
    assert lengths[:32].mean() > 4 * lengths.mean()  # no label permutation: heavy rows first
    with pytest.raises(ValueError, match="probabilities"):
        datasets.rmat(4, a=0.5, b=0.3, c=0.3)


def test_sum_duplicates_by_hand():
    S = datasets._sum_duplicates(np.array([1, 0, 1, 1]), np.array([2, 0, 2, 0]), np.array([1.0, 2.0, 3.0, 4.0]), (2, 3))
    assert S.toarray().tolist() == [[2.0, 0.0, 0.0], [4.0, 0.0, 4.0]]
    assert S.nnz == 3


def test_random_uniform_has_exact_distinct_rows():
    S = datasets.random_uniform(300, 9, n_cols=40, seed=2)  # 9 of 40: repeats are drawn and replaced
    assert_canonical(S)
    assert S.shape == (300, 40)
    assert set(np.diff(S.indptr)) == {9}
    assert S.data.min() >= 0.5 and S.data.max() < 1.5
    with pytest.raises(ValueError, match="distinct"):
        datasets.random_uniform(3, 5, n_cols=4)


def test_banded_stays_in_band():
    S = datasets.banded(400, 6, 5, seed=1)
    assert_canonical(S)
    coo = S.tocoo()
    assert np.abs(coo.row - coo.col).max() <= 6
    lengths = np.diff(S.indptr)
    assert np.all(lengths[6:-6] == 5) and lengths.min() >= 1


def test_powerlaw_has_long_rows_and_skew():
    S = datasets.powerlaw(4000, 6, long_rows=3, long_row_length=1500, seed=4)
    assert_canonical(S)
    lengths = np.sort(np.diff(S.indptr))
    assert np.all(lengths[-3:] > 1200)  # the long rows, less the duplicates summed
    assert 3 < lengths[:-3].mean() < 12
    with pytest.raises(ValueError, match="exponent"):
        datasets.powerlaw(10, 3, 1, 5, exponent=2.0)


def test_lower_triangular_is_triangular_and_nonsingular():
    S = datasets.lower_triangular(500, 6, seed=3)
    assert_canonical(S)
    assert sp.triu(S, k=1).nnz == 0
    assert np.all(S.diagonal() > 0)
    lengths = np.diff(S.indptr)
    assert lengths[:50].mean() < lengths[-50:].mean()  # grows down the matrix


@pytest.mark.parametrize("name", list(datasets.GENERATED))
def test_every_family_small_preset_is_deterministic(name):
    family = datasets.GENERATED[name]
    assert set(family.presets) == set(datasets.SIZES)
    first, again = datasets.generate(name, "small", seed=7), datasets.generate(name, "small", seed=7)
    assert_canonical(first)
    assert first.nnz > 0
    for attr in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(first, attr), getattr(again, attr))
    if family.seeded:
        other = datasets.generate(name, "small", seed=8)
        assert other.nnz != first.nnz or not np.array_equal(other.indices, first.indices)
    assert datasets.generate(name, "small", dtype=np.float32).dtype == np.float32


def test_generate_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path))
    built = datasets.generate("rmat", "small", seed=3, cache=True)
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].suffix == ".npz"
    loaded = datasets.generate("rmat", "small", seed=3, cache=True)
    assert (built != loaded).nnz == 0 and loaded.indices.dtype == np.int32
    datasets.generate("rmat", "small", seed=4, cache=True)
    assert len(list(tmp_path.iterdir())) == 2  # the seed is part of the key


def test_matrix_spec_and_errors():
    assert datasets.matrix("poisson2d:small").shape == (1024, 1024)
    assert datasets.matrix("poisson2d", size="small").shape == (1024, 1024)
    with pytest.raises(ValueError, match="unknown size"):
        datasets.generate("poisson2d", "huge")
    with pytest.raises(ValueError, match="unknown generated family"):
        datasets.generate("nope")
    with pytest.raises(ValueError, match="only generated families"):
        datasets.matrix("west0067:small")


@requires_matrices
def test_real_matrices_still_load():
    name = "west0067" if "west0067" in REAL_MATRICES else REAL_MATRICES[0]
    S = datasets.matrix(name)
    row = datasets.manifest()[name]
    assert S.shape == (int(row["rows"]), int(row["cols"]))
    assert datasets.matrix_dir() is not None


def test_kronecker_is_a_permuted_symmetric_simple_graph():
    A = datasets.kronecker(12, 16, seed=5)
    n = 1 << 12
    assert A.shape == (n, n) and A.has_canonical_format
    assert (A != A.T).nnz == 0 and A.diagonal().sum() == 0 and set(np.unique(A.data)) == {1.0}
    degrees = np.diff(A.indptr)
    # Each of the 16 n drawn edges gives at most two stored entries; R-MAT repeats many.
    assert 8 * n < A.nnz <= 2 * 16 * n
    # Labels are permuted: the hub is not vertex 0 (R-MAT's unpermuted hub), and degrees are skewed.
    assert degrees.argmax() != 0 and degrees.max() > 20 * degrees.mean()
    again = datasets.kronecker(12, 16, seed=5)
    assert (again != A).nnz == 0
    assert (datasets.kronecker(12, 16, seed=6) != A).nnz > 0


def test_weighted_graphs_have_positive_symmetric_weights():
    for G in (datasets.kronecker(9, 8, seed=1, weighted=True), datasets.grid_graph(7, 9, seed=2),
              datasets.road_like(15, seed=3)):
        assert (G != G.T).nnz == 0 and G.diagonal().sum() == 0
        assert G.data.min() > 0 and np.isfinite(G.data).all()
    assert datasets.kronecker(9, 8, seed=1, weighted=True).data.max() <= 1


def test_grid_and_road_graphs_have_grid_degrees():
    G = datasets.grid_graph(5, 6, weighted=False)
    assert G.nnz == 2 * (5 * 5 + 4 * 6) and np.diff(G.indptr).max() == 4
    R = datasets.road_like(30, seed=4, keep=1.0)
    assert R.nnz == 2 * 2 * 30 * 29 and np.diff(R.indptr).max() == 4
    with pytest.raises(ValueError, match="keep"):
        datasets.road_like(5, keep=0)
