"""Test and benchmark matrices: real ones read from a folder of gzipped Matrix Market files
(found by path, never copied into the repository) and generators for large reproducible
problems.

The real matrices are looked up in ``$SPARSEGPU_MATRICES``, then in ``.shared/matrices`` inside
the repository. A folder's ``MANIFEST.tsv`` (tab-separated, a ``name`` column) lists them where
present; otherwise every ``*.mtx.gz`` in it is one.

Generators return a canonical scipy ``csr_array`` (indices sorted, no duplicates, int32
indices whenever they fit, int64 otherwise). They are vectorised NumPy/SciPy, so 10^8 nonzeros
build in seconds and a few GB of host memory; the random ones are deterministic for a given
``seed``. :data:`GENERATED` names the families with ``small`` / ``medium`` / ``large``
presets, and :func:`generate` / :func:`matrix` build one by name:

>>> from sparsegpu import datasets
>>> S = datasets.generate("poisson2d", "small")
>>> S.shape, S.nnz
((1024, 1024), 4992)
>>> datasets.matrix("rmat:small").shape
(1024, 1024)

Sizes: ``small`` is for tests on the CPU; ``medium`` is larger than a GPU's 50 MB L2 cache
(about 10-25 million nonzeros) for quick bandwidth figures; ``large`` matches the problems the
performance targets name (2-D Poisson with 9M rows, 27-point 150^3, R-MAT scale 21 with 16
edges per vertex, 4M rows of 16 random entries).
"""

from __future__ import annotations

import csv
import functools
import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
import scipy.io
import scipy.sparse as sp

MATRICES_ENV = "SPARSEGPU_MATRICES"
CACHE_ENV = "SPARSEGPU_CACHE"
SIZES = ("small", "medium", "large")
_REPO = Path(__file__).resolve().parent.parent
_INT32_MAX = np.iinfo(np.int32).max


# --------------------------------------------------------------------------- real matrices


def matrix_dir() -> Path | None:
    """The folder holding the real matrices (``$SPARSEGPU_MATRICES``, else ``.shared/matrices``
    in the repository), or None when neither holds any."""
    for candidate in (os.environ.get(MATRICES_ENV, ""), str(_REPO / ".shared" / "matrices")):
        folder = Path(candidate) if candidate else None
        if folder and folder.is_dir() and ((folder / "MANIFEST.tsv").is_file() or any(folder.glob("*.mtx.gz"))):
            return folder
    return None


@functools.cache
def manifest() -> dict[str, dict[str, str]]:
    """MANIFEST.tsv as {name: row} (names alone where the folder has no manifest); empty when
    the matrices are not found."""
    folder = matrix_dir()
    if folder is None:
        return {}
    if not (folder / "MANIFEST.tsv").is_file():
        return {path.name[: -len(".mtx.gz")]: {"name": path.name[: -len(".mtx.gz")]}
                for path in folder.glob("*.mtx.gz")}
    with open(folder / "MANIFEST.tsv", newline="") as handle:
        return {row["name"]: row for row in csv.DictReader(handle, delimiter="\t")}


def real_matrix_names() -> list[str]:
    """Names of the real matrices, sorted."""
    return sorted(manifest())


def load_matrix(name: str) -> sp.csr_array:
    """A real matrix by name (symmetric storage expanded) as a scipy csr_array."""
    folder = matrix_dir()
    if folder is None:
        raise FileNotFoundError(f"real matrices not found; set {MATRICES_ENV} to a folder of .mtx.gz files")
    path = folder / f"{name}.mtx.gz"
    if not path.is_file():
        raise FileNotFoundError(f"no matrix {name!r} in {folder}")
    return sp.csr_array(scipy.io.mmread(path))


# --------------------------------------------------------------------------- assembly helpers


def _index_dtype(*extents: int) -> type:
    return np.int32 if max(extents, default=0) <= _INT32_MAX else np.int64


def _csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> sp.csr_array:
    """Wrap arrays that are already canonical, in the narrowest index type that holds them."""
    index = _index_dtype(shape[0], shape[1], int(indptr[-1]))
    S = sp.csr_array((data, indices.astype(index, copy=False), indptr.astype(index, copy=False)), shape=shape)
    S.has_canonical_format = True
    return S


def _sum_duplicates(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> sp.csr_array:
    """Canonical CSR from coordinates: duplicates summed, columns sorted within each row.

    SciPy's counting sort by row followed by short per-row sorts beats one global argsort of
    64-bit keys by about 4x at 10^7 entries.
    """
    index = _index_dtype(shape[0], shape[1], rows.size)
    S = sp.csr_array((values, (rows.astype(index, copy=False), cols.astype(index, copy=False))), shape=shape)
    S.sum_duplicates()
    return _csr(S.data, S.indices, S.indptr, shape)


def _from_slots(cols: np.ndarray, valid: np.ndarray, slot_values: np.ndarray, shape: tuple[int, int]) -> sp.csr_array:
    """CSR from a (rows, K) table of candidate columns: row i keeps ``cols[i, k]`` where
    ``valid[i, k]``, in slot order (callers order slots so kept columns come out sorted), with
    the value ``slot_values[k]``."""
    lengths = valid.sum(axis=1, dtype=np.int64)
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    data = np.broadcast_to(slot_values, valid.shape)[valid]
    return _csr(data, cols[valid], indptr, shape)


def _distinct_sorted(rng: np.random.Generator, n_rows: int, k: int, span: int) -> np.ndarray:
    """A (n_rows, k) table whose rows are k distinct sorted integers drawn uniformly from
    ``[0, span)``: draw, sort, redraw the repeats, until none is left (for span >> k one or
    two rounds)."""
    if k > span:
        raise ValueError(f"cannot draw {k} distinct columns from {span}")
    table = np.sort(rng.integers(0, span, size=(n_rows, k), dtype=np.int64), axis=1)
    while True:
        repeated = np.zeros(table.shape, dtype=bool)
        repeated[:, 1:] = table[:, 1:] == table[:, :-1]
        count = int(repeated.sum())
        if count == 0:
            return table
        table[repeated] = rng.integers(0, span, size=count, dtype=np.int64)
        table.sort(axis=1)


def _values(rng: np.random.Generator, n: int, dtype: Any) -> np.ndarray:
    """Random values in [0.5, 1.5): far from zero, so a dropped or misplaced entry shows."""
    return (rng.random(n) + 0.5).astype(dtype, copy=False)


# --------------------------------------------------------------------------- stencils


def stencil(grid: Sequence[int], offsets: Sequence[Sequence[int]], center: float, neighbour: float,
            dtype: Any = np.float64) -> sp.csr_array:
    """The matrix of a stencil on a regular grid (row-major numbering, Dirichlet boundary:
    neighbours outside the grid are dropped). ``offsets`` lists the stencil points (the zero
    offset gets ``center``, every other point ``neighbour``).

    >>> S = stencil((3,), [(-1,), (0,), (1,)], 2.0, -1.0)
    >>> S.toarray().tolist()
    [[2.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 2.0]]
    """
    grid = tuple(int(g) for g in grid)
    n = int(np.prod(grid))
    strides = [int(np.prod(grid[axis + 1:])) for axis in range(len(grid))]
    # Sorting offsets by their linear shift makes every row's columns come out sorted.
    ordered = sorted((tuple(int(o) for o in off) for off in offsets),
                     key=lambda off: sum(o * s for o, s in zip(off, strides)))
    index = _index_dtype(n)
    rows = np.arange(n, dtype=index)
    cols = np.empty((n, len(ordered)), dtype=index)
    valid = np.empty((n, len(ordered)), dtype=bool)
    axes = [np.arange(g) for g in grid]
    for k, off in enumerate(ordered):
        # Inside the grid along every axis: an outer AND of one mask per axis.
        inside = functools.reduce(np.logical_and.outer, [(a + o >= 0) & (a + o < g) for a, o, g in zip(axes, off, grid)])
        valid[:, k] = inside.ravel()
        np.add(rows, sum(o * s for o, s in zip(off, strides)), out=cols[:, k], casting="unsafe")
    slot_values = np.array([center if not any(off) else neighbour for off in ordered], dtype=dtype)
    return _from_slots(cols, valid, slot_values, (n, n))


def poisson2d(n: int, dtype: Any = np.float64) -> sp.csr_array:
    """2-D 5-point Laplacian on an n x n grid (4 on the diagonal, -1 to each neighbour): n^2
    rows, 5n^2 - 4n nonzeros, symmetric positive definite.

    >>> poisson2d(3).nnz
    33
    """
    return stencil((n, n), [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)], 4.0, -1.0, dtype)


def poisson3d(n: int, dtype: Any = np.float64) -> sp.csr_array:
    """3-D 7-point Laplacian on an n^3 grid (6 / -1): 7n^3 - 6n^2 nonzeros, SPD.

    >>> poisson3d(3).nnz
    135
    """
    offsets = [(0, 0, 0)] + [tuple(s if a == axis else 0 for a in range(3)) for axis in range(3) for s in (-1, 1)]
    return stencil((n, n, n), offsets, 6.0, -1.0, dtype)


def stencil27(n: int, dtype: Any = np.float64) -> sp.csr_array:
    """3-D 27-point stencil on an n^3 grid (26 on the diagonal, -1 to each of the 26
    neighbours): (3n - 2)^3 nonzeros, symmetric positive definite.

    >>> stencil27(3).nnz
    343
    """
    return stencil((n, n, n), list(product((-1, 0, 1), repeat=3)), 26.0, -1.0, dtype)


# --------------------------------------------------------------------------- random families


def rmat(scale: int, edge_factor: int = 16, a: float = 0.57, b: float = 0.19, c: float = 0.19,
         seed: int = 0, dtype: Any = np.float64) -> sp.csr_array:
    """An R-MAT (Kronecker) graph: 2^scale vertices, ``edge_factor * 2^scale`` edges drawn by
    recursively choosing a quadrant with probabilities a, b, c and d = 1 - a - b - c (the
    Graph500 values by default), weights uniform in [0.5, 1.5), duplicate edges summed. Vertex
    labels are not permuted, so the heaviest rows come first (as in the benchmark matrices:
    scale 21 gives a longest row of about 62,000).

    >>> S = rmat(8, 4, seed=1)
    >>> S.shape, S.nnz <= 4 * 256
    ((256, 256), True)
    """
    rng = np.random.default_rng(seed)
    n, m = 1 << scale, edge_factor << scale
    rows, cols = _rmat_coordinates(scale, m, (a, b, c), rng)
    return _sum_duplicates(rows, cols, _values(rng, m, dtype), (n, n))


def _rmat_coordinates(scale: int, m: int, probabilities: tuple[float, float, float],
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``m`` R-MAT edges over 2^scale vertices: each picks a quadrant ``scale`` times, with
    probabilities a, b, c and d = 1 - a - b - c."""
    a, b, c = probabilities
    if not (a > 0 and b >= 0 and c >= 0 and a + b + c < 1):
        raise ValueError(f"R-MAT probabilities must satisfy a > 0, b, c >= 0, a + b + c < 1; got {a}, {b}, {c}")
    index = _index_dtype(1 << scale, m)
    rows = np.zeros(m, dtype=index)
    cols = np.zeros(m, dtype=index)
    # Quadrant thresholds on 16-bit draws: [0, a) top-left, [a, a+b) top-right, [a+b, a+b+c)
    # bottom-left, the rest bottom-right. 16 bits resolve the probabilities to 1.5e-5.
    t_a, t_ab, t_abc = (int(round(p * 65536)) for p in (a, a + b, a + b + c))
    for _ in range(scale):
        draw = rng.integers(0, 65536, size=m, dtype=np.uint16)
        bottom = draw >= t_ab
        right = (draw >= t_abc) | ((draw >= t_a) & ~bottom)
        rows <<= 1
        rows |= bottom
        cols <<= 1
        cols |= right
    return rows, cols


# --------------------------------------------------------------------------- graphs


def kronecker(scale: int, edge_factor: int = 16, seed: int = 0, weighted: bool = False,
              dtype: Any = np.float64) -> sp.csr_array:
    """A Graph500 Kronecker graph as a symmetric adjacency matrix: 2^scale vertices,
    ``edge_factor * 2^scale`` edges drawn as R-MAT does with a, b, c = 0.57, 0.19, 0.19, the
    vertex labels permuted at random, every edge made undirected, self loops and repeated
    edges dropped. Values are 1, or with ``weighted`` uniform in (0, 1] and the same both ways
    (never 0: SciPy's csgraph reads a stored 0 as an edge of weight 0).

    >>> A = kronecker(8, 4, seed=1)
    >>> A.shape, (A != A.T).nnz, int(A.diagonal().sum())
    ((256, 256), 0, 0)
    """
    rng = np.random.default_rng(seed)
    n, m = 1 << scale, edge_factor << scale
    rows, cols = _rmat_coordinates(scale, m, (0.57, 0.19, 0.19), rng)
    labels = rng.permutation(n).astype(rows.dtype)
    rows, cols = labels[rows], labels[cols]
    return _undirected(rows, cols, n, rng, weighted, dtype)


def grid_graph(rows: int, cols: int, seed: int = 0, weighted: bool = True, dtype: Any = np.float64) -> sp.csr_array:
    """The 4-neighbour grid of ``rows x cols`` vertices (row-major numbering) as a symmetric
    adjacency matrix; with ``weighted`` each edge weighs a uniform draw in (0, 1], the same
    both ways, else 1.

    >>> G = grid_graph(3, 4, weighted=False)
    >>> G.shape, G.nnz, (G != G.T).nnz
    ((12, 12), 34, 0)
    """
    rng = np.random.default_rng(seed)
    right_from, right_to, down_from, down_to = _grid_edges(rows, cols)
    return _undirected(np.concatenate([right_from, down_from]), np.concatenate([right_to, down_to]),
                       rows * cols, rng, weighted, dtype)


def road_like(n: int, seed: int = 0, keep: float = 0.7, dtype: Any = np.float64) -> sp.csr_array:
    """A road-network-like graph: an ``n x n`` grid of junctions at jittered positions, each
    street kept with probability ``keep``, weighted by its length. Degrees of at most 4 and a
    diameter of order n, like the road graphs that make level-by-level traversals long (it
    may have several components).

    >>> R = road_like(20, seed=2)
    >>> R.shape, bool((R.data > 0).all()), (R != R.T).nnz
    ((400, 400), True, 0)
    """
    if not 0 < keep <= 1:
        raise ValueError(f"keep must lie in (0, 1], got {keep}")
    rng = np.random.default_rng(seed)
    position = np.stack(np.divmod(np.arange(n * n), n), axis=1) + rng.uniform(-0.3, 0.3, size=(n * n, 2))
    right_from, right_to, down_from, down_to = _grid_edges(n, n)
    source, target = np.concatenate([right_from, down_from]), np.concatenate([right_to, down_to])
    kept = rng.random(source.size) < keep
    source, target = source[kept], target[kept]
    length = np.linalg.norm(position[source] - position[target], axis=1)
    return _sum_duplicates(np.concatenate([source, target]), np.concatenate([target, source]),
                           np.concatenate([length, length]).astype(dtype), (n * n, n * n))


def _grid_edges(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(from, to) of the rightward and the downward edges of a row-major grid."""
    index = _index_dtype(rows * cols)
    vertex = np.arange(rows * cols, dtype=index).reshape(rows, cols)
    return vertex[:, :-1].ravel(), vertex[:, 1:].ravel(), vertex[:-1, :].ravel(), vertex[1:, :].ravel()


def _undirected(rows: np.ndarray, cols: np.ndarray, n: int, rng: np.random.Generator, weighted: bool,
                dtype: Any) -> sp.csr_array:
    """The symmetric adjacency of the edges (rows[k], cols[k]): each unordered pair once in
    each direction, self loops dropped; values 1, or uniform in (0, 1] with ``weighted``."""
    keep = rows != cols
    low, high = np.minimum(rows[keep], cols[keep]), np.maximum(rows[keep], cols[keep])
    pairs = np.unique(low.astype(np.int64) * n + high)
    low, high = (pairs // n).astype(rows.dtype), (pairs % n).astype(rows.dtype)
    weight = 1.0 - rng.random(pairs.size) if weighted else np.ones(pairs.size)
    return _sum_duplicates(np.concatenate([low, high]), np.concatenate([high, low]),
                           np.concatenate([weight, weight]).astype(dtype), (n, n))


def random_uniform(n_rows: int, row_length: int, n_cols: int | None = None, seed: int = 0,
                   dtype: Any = np.float64) -> sp.csr_array:
    """Every row has exactly ``row_length`` distinct columns drawn uniformly (values in
    [0.5, 1.5)).

    >>> S = random_uniform(100, 7, seed=3)
    >>> set(S.indptr[1:] - S.indptr[:-1]) == {7}
    True
    """
    n_cols = n_rows if n_cols is None else n_cols
    rng = np.random.default_rng(seed)
    cols = _distinct_sorted(rng, n_rows, row_length, n_cols)
    indptr = np.arange(n_rows + 1, dtype=np.int64) * row_length
    return _csr(_values(rng, cols.size, dtype), cols.ravel(), indptr, (n_rows, n_cols))


def banded(n: int, bandwidth: int, row_length: int, seed: int = 0, dtype: Any = np.float64) -> sp.csr_array:
    """A banded matrix with a random band: row i has ``row_length`` distinct columns drawn
    uniformly from ``[i - bandwidth, i + bandwidth]`` (fewer in the first and last
    ``bandwidth`` rows, whose draws outside the matrix are dropped), values in [0.5, 1.5).

    >>> S = banded(200, 10, 5, seed=0)
    >>> bool(abs(S.tocoo().row - S.tocoo().col).max() <= 10)
    True
    """
    rng = np.random.default_rng(seed)
    offsets = _distinct_sorted(rng, n, row_length, 2 * bandwidth + 1)
    cols = offsets + (np.arange(n, dtype=np.int64) - bandwidth)[:, None]
    valid = (cols >= 0) & (cols < n)
    lengths = valid.sum(axis=1)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    return _csr(_values(rng, int(indptr[-1]), dtype), cols[valid], indptr, (n, n))


def powerlaw(n: int, mean_row_length: float, long_rows: int, long_row_length: int, exponent: float = 2.5,
             seed: int = 0, dtype: Any = np.float64) -> sp.csr_array:
    """Row lengths from a discrete Pareto law (density ~ length^-exponent, mean about
    ``mean_row_length``, capped at n/16) plus ``long_rows`` rows at random positions with
    ``long_row_length`` entries; columns uniform, duplicates summed (so a row may end up a
    little shorter than drawn), values in [0.5, 1.5).

    >>> S = powerlaw(1000, 6, long_rows=2, long_row_length=400, seed=0)
    >>> int((S.indptr[1:] - S.indptr[:-1]).max()) > 300
    True
    """
    if exponent <= 2:
        raise ValueError(f"exponent must exceed 2 for a finite mean row length, got {exponent}")
    rng = np.random.default_rng(seed)
    smallest = mean_row_length * (exponent - 2) / (exponent - 1)
    lengths = np.ceil(smallest * (1 - rng.random(n)) ** (-1 / (exponent - 1))).astype(np.int64)
    np.minimum(lengths, max(1, n // 16), out=lengths)
    lengths[rng.choice(n, size=long_rows, replace=False)] = long_row_length
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    cols = rng.integers(0, n, size=rows.size, dtype=np.int64)
    return _sum_duplicates(rows, cols, _values(rng, rows.size, dtype), (n, n))


def lower_triangular(n: int, mean_row_length: float, seed: int = 0, dtype: Any = np.float64) -> sp.csr_array:
    """A nonsingular lower-triangular matrix shaped like a sparse factor: row i holds its
    diagonal (value ``2 * mean_row_length``, dominant) and about ``2 (mean - 1) i / n``
    off-diagonal entries at uniform columns below it, so row lengths grow from 1 to about
    ``2 * mean - 1`` down the matrix (duplicates summed), values in [0.5, 1.5).

    >>> S = lower_triangular(300, 5, seed=0)
    >>> bool((sp.triu(S, k=1).nnz == 0) and (S.diagonal() > 0).all())
    True
    """
    rng = np.random.default_rng(seed)
    i = np.arange(n, dtype=np.int64)
    expected = 2.0 * (mean_row_length - 1) * i / max(n, 1)
    below = np.minimum(rng.poisson(expected), i)
    rows = np.repeat(i, below)
    cols = np.floor(rng.random(rows.size) * rows).astype(np.int64)
    diagonal = np.full(n, 2.0 * mean_row_length)
    return _sum_duplicates(np.concatenate([rows, i]), np.concatenate([cols, i]),
                           np.concatenate([_values(rng, rows.size, np.float64), diagonal]).astype(dtype), (n, n))


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Family:
    """A generator and its size presets (keyword arguments for it)."""

    name: str
    builder: Callable[..., sp.csr_array]
    presets: dict[str, dict[str, Any]]
    description: str
    seeded: bool = True

    def build(self, size: str = "medium", seed: int = 0, dtype: Any = np.float64) -> sp.csr_array:
        """The matrix at preset ``size`` (``seed`` is used by the random families only)."""
        if size not in self.presets:
            raise ValueError(f"unknown size {size!r} for {self.name}; known: {', '.join(self.presets)}")
        kwargs = dict(self.presets[size], dtype=dtype)
        if self.seeded:
            kwargs["seed"] = seed
        return self.builder(**kwargs)


GENERATED: dict[str, Family] = {
    family.name: family
    for family in [
        Family("poisson2d", poisson2d, {"small": {"n": 32}, "medium": {"n": 1500}, "large": {"n": 3000}},
               "2-D 5-point Laplacian on an n x n grid", seeded=False),
        Family("poisson3d", poisson3d, {"small": {"n": 10}, "medium": {"n": 130}, "large": {"n": 200}},
               "3-D 7-point Laplacian on an n^3 grid", seeded=False),
        Family("stencil27", stencil27, {"small": {"n": 8}, "medium": {"n": 90}, "large": {"n": 150}},
               "3-D 27-point stencil on an n^3 grid", seeded=False),
        Family("rmat", rmat, {"small": {"scale": 10, "edge_factor": 8}, "medium": {"scale": 20, "edge_factor": 16},
                              "large": {"scale": 21, "edge_factor": 16}},
               "R-MAT graph, a,b,c,d = 0.57,0.19,0.19,0.05"),
        Family("kronecker", kronecker,
               {"small": {"scale": 10, "edge_factor": 16}, "medium": {"scale": 18, "edge_factor": 16},
                "large": {"scale": 21, "edge_factor": 16}},
               "Graph500 Kronecker graph: permuted, symmetric, no self loops"),
        Family("random_uniform", random_uniform,
               {"small": {"n_rows": 1000, "row_length": 8}, "medium": {"n_rows": 1 << 20, "row_length": 16},
                "large": {"n_rows": 1 << 22, "row_length": 16}},
               "uniform random columns, fixed row length"),
        Family("banded", banded,
               {"small": {"n": 1000, "bandwidth": 50, "row_length": 8},
                "medium": {"n": 2_000_000, "bandwidth": 1000, "row_length": 8},
                "large": {"n": 8_000_000, "bandwidth": 1000, "row_length": 8}},
               "random entries inside a band around the diagonal"),
        Family("powerlaw", powerlaw,
               {"small": {"n": 2000, "mean_row_length": 8, "long_rows": 2, "long_row_length": 1000},
                "medium": {"n": 2_000_000, "mean_row_length": 8, "long_rows": 4, "long_row_length": 500_000},
                "large": {"n": 8_000_000, "mean_row_length": 8, "long_rows": 4, "long_row_length": 2_000_000}},
               "power-law row lengths with a few very long rows"),
        Family("lower_triangular", lower_triangular,
               {"small": {"n": 1000, "mean_row_length": 8}, "medium": {"n": 2_000_000, "mean_row_length": 8},
                "large": {"n": 8_000_000, "mean_row_length": 8}},
               "lower-triangular factor-like, row lengths growing down the matrix"),
    ]
}


def cache_dir() -> Path:
    """Where :func:`generate` keeps built matrices when asked to: ``$SPARSEGPU_CACHE`` or
    ``~/.cache/sparsegpu/matrices``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "sparsegpu" / "matrices")


def _cache_key(family: Family, size: str, seed: int, dtype: np.dtype) -> str:
    recipe = repr((family.name, sorted(family.presets[size].items()), seed if family.seeded else None, dtype.str))
    return f"{family.name}-{size}-{hashlib.sha1(recipe.encode()).hexdigest()[:12]}.npz"


def generate(name: str, size: str = "medium", seed: int = 0, dtype: Any = np.float64,
             cache: bool = False) -> sp.csr_array:
    """The generated matrix of family ``name`` at preset ``size``.

    ``cache=True`` keeps the result in :func:`cache_dir` (uncompressed ``.npz``, written
    atomically) and loads it from there next time; benchmarks that start a process per case
    use it so each medium matrix is built once.

    >>> generate("random_uniform", "small").shape
    (1000, 1000)
    """
    if name not in GENERATED:
        raise ValueError(f"unknown generated family {name!r}; known: {', '.join(GENERATED)}")
    family, dt = GENERATED[name], np.dtype(dtype)
    if not cache:
        return family.build(size, seed, dt)
    path = cache_dir() / _cache_key(family, size, seed, dt)
    if path.is_file():
        with np.load(path) as stored:
            return _csr(stored["data"], stored["indices"], stored["indptr"], tuple(stored["shape"]))
    S = family.build(size, seed, dt)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "wb") as handle:
            np.savez(handle, data=S.data, indices=S.indices, indptr=S.indptr, shape=np.array(S.shape))
        os.replace(partial, path)
    except OSError:  # a read-only or full disk costs the next caller a rebuild, nothing else
        partial.unlink(missing_ok=True)
    return S


def matrix(spec: str, size: str = "medium", seed: int = 0, cache: bool = False) -> sp.csr_array:
    """A matrix by name: a real matrix (``"bcsstk16"``), a generated family at ``size``
    (``"rmat"``), a family with its own preset (``"rmat:large"``), or a family with its
    generator's leading arguments (``"poisson2d:3000"``, ``"rmat:22:8"``: scale 22, 8 edges per
    vertex).

    >>> matrix("poisson2d:4").shape, matrix("rmat:5:4").shape
    ((16, 16), (32, 32))
    """
    family, _, own_size = spec.partition(":")
    if family in GENERATED and own_size and own_size.replace(":", "").isdigit():
        chosen = GENERATED[family]
        return chosen.builder(*map(int, own_size.split(":")), **({"seed": seed} if chosen.seeded else {}))
    if family in GENERATED:
        return generate(family, own_size or size, seed=seed, cache=cache)
    if own_size:
        raise ValueError(f"{spec!r}: only generated families take a size; known families: {', '.join(GENERATED)}")
    return load_matrix(spec)
