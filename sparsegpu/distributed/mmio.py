"""Each rank reads its own rows of a coordinate Matrix Market file (``.mtx``, or gzipped).

Every rank streams the file in chunks of a fixed number of lines (the same chunks on every
rank). Pass 1, only when no partition is given: rank r parses chunks r, r + size, ...,
counts each row's entries and notes each chunk's row span; the counts are summed over the
ranks (integers, exact) and give the partition balanced by nonzeros. Pass 2: each rank parses
only the chunks whose row span meets its range (all of them when pass 1 did not run) and keeps
its rows. No rank holds more than its rows and one chunk.
"""

from __future__ import annotations

import gzip
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu.distributed._comm import raise_collectively
from sparsegpu.distributed.partition import balanced_offsets

CHUNK_LINES = 1 << 18  # coordinate lines parsed at once: tens of MB at most
FIELDS = {"real": 3, "integer": 3, "double": 3, "complex": 4, "pattern": 2}
SYMMETRIES = ("general", "symmetric", "skew-symmetric", "hermitian")


def _open(path: Path) -> BinaryIO:
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gzipped else open(path, "rb")


def read_header(handle: BinaryIO) -> tuple[str, str, tuple[int, int], int]:
    """(field, symmetry, shape, stored entries) from the banner and size line; the handle is
    left at the first entry."""
    banner = handle.readline().decode("ascii", "replace").split()
    if len(banner) != 5 or banner[0].lower() != "%%matrixmarket" or banner[1].lower() != "matrix":
        raise ValueError(f"not a Matrix Market matrix file: banner {' '.join(banner)!r}")
    layout, field, symmetry = (word.lower() for word in banner[2:])
    if layout != "coordinate":
        raise ValueError(f"only coordinate Matrix Market files are read per rank, got {layout!r}")
    if field not in FIELDS or symmetry not in SYMMETRIES:
        raise ValueError(f"unsupported Matrix Market field/symmetry {field!r}/{symmetry!r}")
    line = handle.readline()
    while line.startswith(b"%") or not line.strip():
        if not line:
            raise ValueError("the Matrix Market file ends before its size line")
        line = handle.readline()
    try:
        m, n, nnz = (int(word) for word in line.split())
    except ValueError:
        raise ValueError(f"bad Matrix Market size line {line.strip()!r}") from None
    return field, symmetry, (m, n), nnz


def _chunks(path: Path) -> Iterator[list[bytes]]:
    with _open(path) as handle:
        read_header(handle)
        while True:
            lines = list(itertools.islice(handle, CHUNK_LINES))
            if not lines:
                return
            yield lines


def parse_chunk(lines: list[bytes], field: str, symmetry: str, shape: tuple[int, int]) -> tuple[Any, Any, Any]:
    """(rows, cols, values) of a chunk's entries, 0-based, stored symmetry expanded."""
    table = np.loadtxt(lines, dtype=np.float64, comments="%", ndmin=2)
    if table.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, _value_dtype(field))
    if table.shape[1] != FIELDS[field]:
        raise ValueError(f"Matrix Market {field} entries have {FIELDS[field]} numbers, found {table.shape[1]}")
    rows, cols = table[:, 0].astype(np.int64) - 1, table[:, 1].astype(np.int64) - 1
    if rows.min() < 0 or cols.min() < 0 or rows.max() >= shape[0] or cols.max() >= shape[1]:
        raise ValueError(f"a Matrix Market entry lies outside the {shape[0]} x {shape[1]} matrix")
    if field == "pattern":
        values = np.ones(rows.size)
    elif field == "complex":
        values = table[:, 2] + 1j * table[:, 3]
    else:
        values = table[:, 2]
    if symmetry == "general":
        return rows, cols, values
    off = rows != cols
    mirrored = {"symmetric": values[off], "skew-symmetric": -values[off], "hermitian": np.conj(values[off])}
    return (np.concatenate([rows, cols[off]]), np.concatenate([cols, rows[off]]),
            np.concatenate([values, mirrored[symmetry]]))


def _value_dtype(field: str) -> np.dtype:
    return np.dtype(np.complex128 if field == "complex" else np.float64)


def _count_rows(path: Path, header: tuple, comm: Any) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Pass 1: entries per row (summed over ranks) and each chunk's (first, last) row."""
    field, symmetry, shape, _ = header
    rank, size = comm.Get_rank(), comm.Get_size()
    counts = np.zeros(shape[0], dtype=np.int64)
    spans: dict[int, tuple[int, int]] = {}
    error = None
    try:
        for index, lines in enumerate(_chunks(path)):
            if index % size != rank:
                continue
            rows, _, _ = parse_chunk(lines, field, symmetry, shape)
            counts += np.bincount(rows, minlength=shape[0])
            spans[index] = (int(rows.min()), int(rows.max())) if rows.size else (0, -1)
    except ValueError as caught:  # a malformed entry in a chunk only this rank parsed
        error = caught
    raise_collectively(comm, error)
    if hasattr(comm, "Allreduce"):  # mpi4py: one buffer reduction, no pickling of n counts
        from mpi4py import MPI

        comm.Allreduce(MPI.IN_PLACE, counts, op=MPI.SUM)
    else:
        counts = comm.allreduce(counts)
    merged: dict[int, tuple[int, int]] = {}
    for part in comm.allgather(spans):
        merged.update(part)
    return counts, [merged[i] for i in sorted(merged)]


def read_rows(path: Any, comm: Any, row_offsets: Any, dtype: Any) -> tuple[sp.csr_array, np.ndarray, tuple[int, int]]:
    """(this rank's rows as a canonical CSR with global columns, row offsets, shape) (collective)."""
    header, error = None, None
    try:
        path = Path(path)
        with _open(path) as handle:
            header = read_header(handle)
    except (OSError, ValueError) as caught:
        error = caught if isinstance(caught, ValueError) else ValueError(f"cannot read {path}: {caught}")
    raise_collectively(comm, error)
    shape = header[2]
    spans = None
    if row_offsets is None:
        counts, spans = _count_rows(path, header, comm)
        row_offsets = balanced_offsets(np.concatenate([[0], np.cumsum(counts)]), comm.Get_size())
    offsets = np.asarray(row_offsets, dtype=np.int64)
    size = comm.Get_size()
    if offsets.shape != (size + 1,) or offsets[0] != 0 or offsets[-1] != shape[0] or np.any(np.diff(offsets) < 0):
        raise ValueError(f"row_offsets must rise from 0 to {shape[0]} in {size + 1} entries")
    start, stop = int(offsets[comm.Get_rank()]), int(offsets[comm.Get_rank() + 1])
    rows, error = None, None
    try:
        rows = _keep_rows(path, header, start, stop, spans, dtype)
    except (TypeError, ValueError) as caught:
        error = caught
    raise_collectively(comm, error)
    return rows, offsets, shape


def _keep_rows(path: Path, header: tuple, start: int, stop: int, spans: Any, dtype: Any) -> sp.csr_array:
    """Pass 2: this rank's rows, entries of a row in file order before duplicates are summed."""
    field, symmetry, shape, _ = header
    kept: list[tuple[Any, Any, Any]] = []
    for index, lines in enumerate(_chunks(path)):
        if spans is not None and (spans[index][1] < start or spans[index][0] >= stop):
            continue
        rows, cols, values = parse_chunk(lines, field, symmetry, shape)
        mine = (rows >= start) & (rows < stop)
        kept.append((rows[mine] - start, cols[mine], values[mine]))
    if not kept:
        kept = [(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, _value_dtype(field)))]
    rows, cols, values = (np.concatenate(column) for column in zip(*kept))
    coo = sp.coo_array((values, (rows, cols)), shape=(stop - start, shape[1]))
    target = _validate.stored_dtype(coo.dtype, dtype, "same_kind")
    return sp.csr_array(coo.tocsr().astype(target))
