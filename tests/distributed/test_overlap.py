"""The overlapped product: interior runs multiplied while the halo travels, the other rows after
it, each run straight into its slice of y, keep the single-process bits; ``out`` is written in
place. Banded matrices have long interior runs at every rank count, so the split is exercised."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu.distributed import DistributedCSR, DistributedVector
from tests.distributed.conftest import check_all, raises_everywhere
from tests.distributed.matrices import crossing, vector
from tests.distributed.test_spmv import check_product


def banded(rng, n, width=3, dtype=np.float64, dense_rows=()):
    """A random band of half-width ``width``, plus fully dense rows (which touch every rank's
    columns, so those rows read the halo and most of their rank's x)."""
    offsets = list(range(-width, width + 1))
    S = sp.diags([rng.standard_normal(n - abs(k)) for k in offsets], offsets, shape=(n, n), format="lil")
    for row in dense_rows:
        S[row, :] = rng.standard_normal(n)
    S = sp.csr_array(S)
    if np.dtype(dtype).kind == "c":
        S = S + 1j * sp.csr_array((rng.standard_normal(S.nnz), S.indices, S.indptr), shape=S.shape)
    return sp.csr_array(S.astype(dtype))


def check_runs(comm, A):
    """The early and late runs cover every row once; early rows read no halo entry."""
    product = A._product
    covered = np.zeros(A.row_partition.local_size, dtype=np.int64)
    for first, stop, _ in product.early.runs + product.late.runs:
        covered[first:stop] += 1
    rows = product.matrix.to_scipy()
    early_halo = [rows[first:stop].indices.max(initial=-1) >= product.n_own for first, stop, _ in product.early.runs]
    check_all(comm, np.all(covered == 1) and not any(early_halo), "runs cover every row once; early rows own-only")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_banded_overlap_is_bitwise_and_splits(comm, shared_rng, dtype):
    S = banded(shared_rng, 900, dtype=dtype)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu", overlap=True)
    check_runs(comm, A)
    check_all(comm, A._product.split and A._product.early.runs, "interior rows run early")
    check_all(comm, comm.Get_size() == 1 or A._product.gathered is not None or A.halo_plan.recv_counts.sum() == 0,
              "late rows read a compact [gathered | halo] vector")
    for _ in range(2):  # the second product runs over dirty buffers
        check_product(comm, A, S, vector(shared_rng, 900, dtype), f"banded {np.dtype(dtype).name}")


def test_dense_boundary_rows_read_the_whole_x(comm, shared_rng):
    """A dense row per rank makes the late rows need most of x: they read [my x | halo x]."""
    n = 1200
    starts = [n * r // comm.Get_size() for r in range(comm.Get_size())]
    S = banded(shared_rng, n, dense_rows=starts)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu", overlap=True)
    check_runs(comm, A)
    part = A.row_partition
    holds_dense = any(part.start <= row < part.stop for row in starts)
    whole = A._product.lead == A._product.n_own and A._product.gathered is None
    check_all(comm, comm.Get_size() == 1 or not holds_dense or whole, "a rank with a dense row copies x whole")
    check_all(comm, comm.Get_size() == 1 or any(comm.allgather(whole)), "some rank copies x whole")
    for _ in range(2):
        check_product(comm, A, S, vector(shared_rng, n), "dense boundary rows")


@pytest.mark.parametrize("overlap", [False, True])
def test_out_is_written_in_place(comm, shared_rng, overlap):
    S = banded(shared_rng, 700)
    x = vector(shared_rng, 700)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu", overlap=overlap)
    out = DistributedVector(np.full(A.row_partition.local_size, np.nan), A.row_partition)  # poisoned
    y = A.matvec(x, out=out)
    check_all(comm, y is out and np.array_equal(out.local, (A @ x).local), "every row written in place")


def test_bad_out_is_refused_on_every_rank(comm, shared_rng):
    S = crossing(shared_rng, 100)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    x = DistributedVector.from_global(vector(shared_rng, 100), A.col_partition, backend="cpu")
    local = A.row_partition.local_size
    raises_everywhere(comm, TypeError, A.matvec, x, out=np.zeros(local))
    raises_everywhere(comm, TypeError, A.matvec, x, out=DistributedVector(np.zeros(local, np.float32), A.row_partition))
    raises_everywhere(comm, ValueError, A.matvec, x, out=DistributedVector(np.zeros(2 * local)[::2], A.row_partition))
    raises_everywhere(comm, ValueError, A.matvec, x, out=x)  # 100 rows: every rank holds some


@pytest.mark.gpu
@pytest.mark.parametrize("exchange", ["mpi", "nccl"])
@pytest.mark.parametrize("dense", [False, True])
def test_gpu_runs_keep_the_single_gpu_bits(comm, shared_rng, exchange, dense):
    """On the GPU: interior runs first, late rows over [gathered | halo] (banded) or over
    [my x | halo x] (dense rows), products repeated into one out vector and from another stream."""
    from sparsegpu.distributed import use_local_device
    from sparsegpu.distributed._nccl import nccl_available

    use_local_device(comm)
    if exchange == "nccl" and not nccl_available():
        pytest.skip("CuPy without NCCL")
    import cupy

    n = 20000
    S = banded(shared_rng, n, dense_rows=[n * r // comm.Get_size() for r in range(comm.Get_size())] if dense else ())
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="gpu", exchange=exchange)
    check_runs(comm, A)
    out = DistributedVector(cupy.full(A.row_partition.local_size, cupy.nan), A.row_partition)
    for attempt in range(3):
        x = vector(shared_rng, n)
        expected = check_product(comm, A, S, x, f"gpu {exchange} dense={dense} round {attempt}", backend="gpu")
        with cupy.cuda.Stream(non_blocking=True) if attempt == 2 else cupy.cuda.Stream.null:
            A.matvec(DistributedVector.from_global(cupy.asarray(x), A.col_partition), out=out)
            same = bool(cupy.array_equal(out.local, expected.local))
        check_all(comm, same, "out written in place, on the current stream")
