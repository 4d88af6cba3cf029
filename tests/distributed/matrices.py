"""Test matrices for the distributed tests: random ones whose halos cross every rank."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def crossing(rng: np.random.Generator, n_rows: int, n_cols: int | None = None, density: float = 0.02,
             dtype=np.float64) -> sp.csr_array:
    """A random matrix plus 16 evenly spaced dense columns, so that for up to 16 ranks every
    rank's rows reference columns of every other rank (the tests check it on the plan)."""
    n_cols = n_rows if n_cols is None else n_cols
    S = sp.random(n_rows, n_cols, density=density, random_state=rng, format="coo")
    dense_cols = np.unique(np.linspace(0, n_cols - 1, min(16, n_cols)).astype(np.int64))
    rows = np.repeat(np.arange(n_rows), dense_cols.size)
    cols = np.tile(dense_cols, n_rows)
    values = rng.standard_normal(rows.size)
    A = sp.coo_array((np.concatenate([S.data, values]), (np.concatenate([S.row, rows]), np.concatenate([S.col, cols]))),
                     shape=(n_rows, n_cols)).tocsr()
    if np.dtype(dtype).kind == "c":
        A = A + 1j * sp.csr_array((rng.standard_normal(A.nnz), A.indices, A.indptr), shape=A.shape)
    return sp.csr_array(A.astype(dtype))


def vector(rng: np.random.Generator, n: int, dtype=np.float64) -> np.ndarray:
    x = rng.standard_normal(n)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(n)
    return x.astype(dtype)
