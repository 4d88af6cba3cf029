"""The constructors' collective steps: scatter a root's matrix, check and line up every rank's
own rows, and gather a distributed matrix back.

Argument errors are raised on every rank (the failing rank's error there, a ValueError naming
it elsewhere), so no rank is left waiting in a collective the others have abandoned.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu.csgraph import reverse_cuthill_mckee
from sparsegpu.distributed._comm import check_comm, raise_collectively
from sparsegpu.distributed.partition import Partition, balanced_offsets, even_offsets
from sparsegpu.formats import SparseMatrix
from sparsegpu.formats._base import canonical_scipy

__all__ = ["canonical_rows", "check_comm", "even_offsets", "gather_local_rows", "gather_rows", "scatter_rows"]


def as_scipy(name: str, S: Any) -> Any:
    """A sparsegpu matrix as scipy (copied to the host); scipy matrices as they are."""
    if isinstance(S, SparseMatrix):
        return S.to_scipy()
    if not sp.issparse(S):
        raise TypeError(f"{name} must be a scipy sparse matrix or a sparsegpu matrix, got {type(S).__name__}")
    return S


def canonical_rows(rows: Any, n_rows: int, n_cols: int, dtype: Any = None) -> sp.csr_array:
    """``rows`` as a canonical scipy CSR (duplicates summed, columns sorted) of ``n_rows`` x
    ``n_cols``; a narrower matrix is widened (its columns are global indices)."""
    S = canonical_scipy(as_scipy("rows", rows), "csr", dtype)
    if S.shape[0] != n_rows or S.shape[1] > n_cols:
        raise ValueError(f"rows must be {n_rows} x {n_cols} (this rank's rows, global columns), got {S.shape}")
    return sp.csr_array((S.data, S.indices, S.indptr), shape=(n_rows, n_cols))


def scatter_rows(S: Any, comm: Any, root: int, reorder: bool, dtype: Any) -> tuple[Any, np.ndarray, tuple, Any]:
    """(this rank's rows, row offsets, shape, permutation or None) of the matrix ``S`` held on
    ``root``, its rows balanced by nonzeros (collective)."""
    size = comm.Get_size()
    root = _validate.check_int("root", root, minimum=0, maximum=size - 1)
    payload = None
    if comm.Get_rank() == root:
        try:
            payload = _split_on_root(S, size, reorder, dtype)
        except (TypeError, ValueError) as error:
            payload = [error] * size
    received = comm.scatter(payload, root=root)
    if isinstance(received, Exception):
        raise received
    return received


def _split_on_root(S: Any, size: int, reorder: bool, dtype: Any) -> list[tuple]:
    C = canonical_scipy(as_scipy("S", S), "csr", dtype)
    permutation = None
    if reorder:
        if C.shape[0] != C.shape[1]:
            raise ValueError(f"reorder=True needs a square matrix, got shape {C.shape}")
        permutation = np.asarray(reverse_cuthill_mckee(C, backend="cpu"), dtype=np.int64)
        C = canonical_scipy(C[permutation][:, permutation], "csr")
    offsets = balanced_offsets(C.indptr, size)
    return [(C[offsets[r]:offsets[r + 1]], offsets, C.shape, permutation) for r in range(size)]


def gather_local_rows(local_csr: Any, row_offset: Any, comm: Any, shape: Any,
                      dtype: Any) -> tuple[Any, np.ndarray, tuple]:
    """(this rank's canonical rows, row offsets, shape) from every rank's own rows (collective)."""
    info, error = None, None
    try:
        S = as_scipy("local_csr", local_csr)
        row_offset = _validate.check_int("row_offset", row_offset, minimum=0)
        info = (row_offset, int(S.shape[0]), int(S.shape[1]), _validate.stored_dtype(S.dtype, dtype))
    except (TypeError, ValueError) as caught:
        error = caught
    raise_collectively(comm, error)
    infos = comm.allgather(info)
    counts = np.array([i[1] for i in infos], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    starts = [i[0] for i in infos]
    if starts != offsets[:-1].tolist():
        raise ValueError(f"the ranks' row ranges must follow one another from row 0 in rank order: "
                         f"row_offset per rank {starts}, rows per rank {counts.tolist()}")
    n_rows, n_cols = int(offsets[-1]), max(i[2] for i in infos)
    if shape is not None:
        m, n = _validate.shape2d(shape)
        if m != n_rows or n < n_cols:
            raise ValueError(f"shape {(m, n)} does not fit the ranks' rows: {n_rows} rows, {n_cols} columns")
        n_cols = n
    common = np.result_type(*[i[3] for i in infos])
    error = None
    try:
        rows = canonical_rows(S, info[1], n_cols, common)
    except (TypeError, ValueError) as caught:
        error = caught
    raise_collectively(comm, error)
    return rows, offsets, (n_rows, n_cols)


def global_columns(extended: sp.csr_array, halo_columns: np.ndarray, cols: Partition) -> np.ndarray:
    """The global column of each entry of a rank's extended CSR."""
    n_own = cols.local_size
    ext = extended.indices.astype(np.int64)
    return np.where(ext < n_own, ext + cols.start, halo_columns[np.maximum(ext - n_own, 0)]
                    if halo_columns.size else ext + cols.start)


def gather_rows(extended: sp.csr_array, halo_columns: np.ndarray, cols: Partition, rows: Partition,
                root: int) -> sp.csr_array | None:
    """The whole matrix on ``root`` from every rank's extended CSR, None elsewhere (collective)."""
    piece = sp.csr_array((extended.data, global_columns(extended, halo_columns, cols), extended.indptr),
                         shape=(extended.shape[0], cols.n))
    pieces = rows.comm.gather(piece, root=root)
    if pieces is None or rows.rank != root:
        return None
    return sp.csr_array(sp.vstack(pieces, format="csr")) if pieces else None
