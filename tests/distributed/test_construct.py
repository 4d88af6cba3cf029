"""Constructors: scatter from a root, every rank's own rows, every rank reading its own rows
of a Matrix Market file; argument errors raised on every rank (no rank left waiting)."""

from __future__ import annotations

import gzip
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu.distributed import DistributedCSR, mmio
from tests.conftest import REAL_MATRICES, requires_matrices
from tests.distributed.conftest import check_all, raises_everywhere
from tests.distributed.matrices import crossing, vector
from tests.distributed.test_spmv import check_product


def same_matrix(comm, A, S, what):
    """A holds exactly S's entries (checked on the root) and multiplies bitwise as S does."""
    T = A.to_scipy()
    ok = True if comm.Get_rank() else (T.shape == S.shape and (T != sp.csr_array(S)).nnz == 0 and T.nnz == S.nnz)
    check_all(comm, ok, f"{what}: the same entries")


def test_from_local_rows_matches_from_scipy(comm, shared_rng):
    S = crossing(shared_rng, 350)
    x = vector(shared_rng, 350)
    size, rank = comm.Get_size(), comm.Get_rank()
    cuts = np.concatenate([[0], np.sort(shared_rng.integers(0, 351, size - 1)), [350]])
    mine = S[cuts[rank]:cuts[rank + 1]]
    A = DistributedCSR.from_local_rows(mine, int(cuts[rank]), comm, backend="cpu")
    check_all(comm, np.array_equal(A.row_partition.offsets, cuts), "the ranks' own row ranges")
    same_matrix(comm, A, S, "local rows")
    check_product(comm, A, S, x, "local rows")


def test_from_local_rows_takes_sparsegpu_matrices_narrow_rows_and_mixed_dtypes(comm, shared_rng):
    """A rank's rows may be a sparsegpu matrix, narrower than the matrix; dtypes promote alike."""
    S = crossing(shared_rng, 120, density=0.05)
    rank, size = comm.Get_rank(), comm.Get_size()
    lo, hi = rank * 120 // size, (rank + 1) * 120 // size
    mine = sp.csr_array(S[lo:hi])
    if rank % 2:
        mine = sparsegpu.from_scipy(mine.astype(np.float32), backend="cpu")
    A = DistributedCSR.from_local_rows(mine, lo, comm, shape=(120, 130), backend="cpu")
    check_all(comm, A.shape == (120, 130) and A.dtype == np.float64, "shape, and float64 from float64 and float32")
    B = DistributedCSR.from_local_rows(sp.csr_array(S[lo:hi]).astype(np.float32), lo, comm, backend="cpu")
    check_all(comm, B.shape == (120, 120) and B.dtype == np.float32, "float32 rows on every rank stay float32")
    expected = sp.lil_array((120, 130))
    for r in range(size):
        a, b = r * 120 // size, (r + 1) * 120 // size
        block = S[a:b].astype(np.float32).astype(np.float64) if r % 2 else S[a:b]
        expected[a:b, :120] = block
    same_matrix(comm, A, sp.csr_array(expected), "the ranks' rows, each in its own dtype, widened")


def test_from_local_rows_refuses_gaps_on_every_rank(comm, shared_rng):
    rank, size = comm.Get_rank(), comm.Get_size()
    mine = sp.csr_array(sp.eye(4, 4 * size))
    raises_everywhere(comm, ValueError, DistributedCSR.from_local_rows, mine, 4 * rank + (rank == size - 1), comm)
    bad = mine if rank != size - 1 else "rows"
    message = raises_everywhere(comm, (TypeError, ValueError), DistributedCSR.from_local_rows, bad, 4 * rank, comm)
    check_all(comm, "local_csr" in message or f"rank {size - 1}" in message, f"the message names the cause: {message}")
    raises_everywhere(comm, ValueError, DistributedCSR.from_local_rows, mine, 4 * rank, comm, shape=(3, 3))


def test_from_scipy_errors_reach_every_rank(comm):
    raises_everywhere(comm, TypeError, DistributedCSR.from_scipy, np.eye(3) if comm.Get_rank() == 0 else None, comm)
    raises_everywhere(comm, ValueError, DistributedCSR.from_scipy, sp.csr_array(np.ones((2, 3))) if comm.Get_rank() == 0
                      else None, comm, reorder=True)
    raises_everywhere(comm, ValueError, DistributedCSR.from_scipy, None, comm, root=comm.Get_size())
    raises_everywhere(comm, TypeError, DistributedCSR.from_scipy, None, "world")


def write_shuffled(path, S, rng, symmetry="general", field="real", gzipped=False):
    """A Matrix Market file of S (the lower triangle for a symmetric kind) with its entries in
    random order, as files in the wild often are."""
    C = sp.coo_array(S)
    if symmetry != "general":
        keep = C.row >= C.col if symmetry != "skew-symmetric" else C.row > C.col
        C = sp.coo_array((C.data[keep], (C.row[keep], C.col[keep])), shape=S.shape)
    order = rng.permutation(C.nnz)
    rows, cols, values = C.row[order] + 1, C.col[order] + 1, C.data[order]
    lines = [f"%%MatrixMarket matrix coordinate {field} {symmetry}", "% a comment",
             f"{S.shape[0]} {S.shape[1]} {C.nnz}"]
    if field == "pattern":
        lines += [f"{r} {c}" for r, c in zip(rows, cols)]
    elif field == "complex":
        lines += [f"{r} {c} {float(v.real)!r} {float(v.imag)!r}" for r, c, v in zip(rows, cols, values)]
    elif field == "integer":
        lines += [f"{r} {c} {int(v)}" for r, c, v in zip(rows, cols, values)]
    else:
        lines += [f"{r} {c} {float(v)!r}" for r, c, v in zip(rows, cols, values)]
    text = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(text) if gzipped else text)
    return path


@pytest.fixture
def shared_path(comm):
    """A folder every rank sees (made by rank 0; the ranks share a host). Not pytest's tmp_path:
    every rank would prune the same numbered folders at once."""
    folder = comm.bcast(tempfile.mkdtemp(prefix="sparsegpu-distributed-") if comm.Get_rank() == 0 else None, root=0)
    yield Path(folder)
    comm.bcast(None, root=0)  # every rank is done with the files
    if comm.Get_rank() == 0:
        shutil.rmtree(folder, ignore_errors=True)


KINDS = [("general", "real"), ("symmetric", "real"), ("skew-symmetric", "real"), ("hermitian", "complex"),
         ("general", "pattern"), ("symmetric", "integer"), ("general", "complex")]


@pytest.mark.parametrize("gzipped", [False, True])
@pytest.mark.parametrize("symmetry, field", KINDS)
@pytest.mark.parametrize("chunk_lines", [7, mmio.CHUNK_LINES])
def test_from_matrix_market_reads_shuffled_files(comm, shared_rng, shared_path, monkeypatch, symmetry, field, gzipped,
                                                 chunk_lines):
    monkeypatch.setattr(mmio, "CHUNK_LINES", chunk_lines)  # many chunks: the span skipping runs
    S = crossing(shared_rng, 60, density=0.05, dtype=np.complex128 if field == "complex" else np.float64)
    if field == "integer":
        S = sp.csr_array(np.round(S * 10))
    if symmetry == "symmetric":
        S = sp.csr_array(S + S.T)
    elif symmetry == "skew-symmetric":
        S = sp.csr_array(S - S.T)
    elif symmetry == "hermitian":
        S = sp.csr_array(S + S.conj().T)
    path = shared_path / f"m-{symmetry}-{field}.mtx{'.gz' if gzipped else ''}"
    if comm.Get_rank() == 0:
        write_shuffled(path, S, shared_rng, symmetry, field, gzipped)
    else:
        shared_rng.permutation(sp.coo_array(S).nnz if symmetry == "general" else 1)  # keep the streams alike
    comm.bcast(None, root=0)  # the file is written before anyone reads it
    expected = sp.csr_array(scipy.io.mmread(path))
    if expected.dtype.kind in "iub":
        expected = sp.csr_array(expected.astype(np.float64))
    A = DistributedCSR.from_matrix_market(path, comm, backend="cpu")
    same_matrix(comm, A, expected, f"{symmetry} {field}")
    x = vector(np.random.default_rng(0), 60, expected.dtype)
    check_product(comm, A, expected, x, f"{symmetry} {field}")


def test_from_matrix_market_with_given_offsets_and_errors(comm, shared_rng, shared_path):
    S = crossing(shared_rng, 50, density=0.05)
    path = shared_path / "given.mtx"
    if comm.Get_rank() == 0:
        write_shuffled(path, S, np.random.default_rng(1))
        (shared_path / "dense.mtx").write_text("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n")
        (shared_path / "bad.mtx").write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n")
        (shared_path / "none.mtx").write_text("hello\n")
    comm.bcast(None, root=0)
    offsets = np.array([(r * 50) // comm.Get_size() for r in range(comm.Get_size() + 1)])
    A = DistributedCSR.from_matrix_market(path, comm, backend="cpu", row_offsets=offsets)
    check_all(comm, np.array_equal(A.row_partition.offsets, offsets), "the given partition")
    same_matrix(comm, A, S, "given offsets")
    raises_everywhere(comm, ValueError, DistributedCSR.from_matrix_market, shared_path / "dense.mtx", comm)
    raises_everywhere(comm, ValueError, DistributedCSR.from_matrix_market, shared_path / "bad.mtx", comm)
    raises_everywhere(comm, ValueError, DistributedCSR.from_matrix_market, shared_path / "bad.mtx", comm,
                      row_offsets=[0] * comm.Get_size() + [2])
    raises_everywhere(comm, ValueError, DistributedCSR.from_matrix_market, shared_path / "none.mtx", comm)
    raises_everywhere(comm, ValueError, DistributedCSR.from_matrix_market, shared_path / "missing.mtx", comm)


SMALL_REAL = [name for name in REAL_MATRICES if int(datasets.manifest()[name].get("file_bytes", 0) or 0) < 1_600_000]


@requires_matrices
@pytest.mark.parametrize("name", SMALL_REAL)
def test_from_matrix_market_on_real_matrices(comm, name):
    path = datasets.matrix_dir() / f"{name}.mtx.gz"
    expected = datasets.load_matrix(name)
    if expected.dtype.kind in "iub":
        expected = sp.csr_array(expected.astype(np.float64))
    A = DistributedCSR.from_matrix_market(path, comm, backend="cpu")
    same_matrix(comm, A, expected, name)
    x = vector(np.random.default_rng(0), expected.shape[1], expected.dtype)
    check_product(comm, A, expected, x, name)
