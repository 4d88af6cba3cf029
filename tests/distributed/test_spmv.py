"""A @ x over the ranks is bitwise equal to the single-process CSR product (CPU backend here;
the GPU tests run on a machine with one GPU per rank)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu.distributed import DistributedCSR, DistributedVector
from tests.conftest import REAL_MATRICES, requires_matrices
from tests.distributed.conftest import check_all
from tests.distributed.matrices import crossing, vector


def single_process(S, x, backend="cpu"):
    """The single-process product of the same format on the same backend, as NumPy."""
    y = sparsegpu.CSR.from_scipy(S, backend=backend) @ x
    return y.get() if hasattr(y, "get") else y


def check_product(comm, A, S, x, what, backend="cpu"):
    """Every rank's slice of A @ x equals the same rows of the single-process product, bit for bit."""
    y = A @ x
    expected = single_process(S, x, backend)
    local = y.local.get() if hasattr(y.local, "get") else y.local
    part = A.row_partition
    rows = np.arange(part.start, part.stop) if part.permutation is None else part.permutation[part.start:part.stop]
    mine = expected[rows]
    check_all(comm, isinstance(y, DistributedVector) and local.dtype == A.dtype, f"{what}: result type")
    check_all(comm, np.array_equal(local, mine), f"{what}: bitwise equal to the single-process product")
    return y


def check_halos_cross(comm, A):
    """Every rank receives halo entries from every other rank (the test exercises them all)."""
    others = np.arange(comm.Get_size()) != comm.Get_rank()
    check_all(comm, np.all(A.halo_plan.recv_counts[others] > 0), "every rank's halo reaches every other rank")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("overlap", [False, True])
def test_bitwise_equal_on_random_matrices(comm, shared_rng, dtype, overlap):
    S = crossing(shared_rng, 400, dtype=dtype)
    x = vector(shared_rng, 400, dtype)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu", overlap=overlap)
    check_halos_cross(comm, A)
    assert A.shape == S.shape and A.nnz == S.nnz and A.dtype == S.dtype
    check_product(comm, A, S, x, f"{np.dtype(dtype).name}, overlap={overlap}")


def test_distributed_vector_input_and_repeated_products(comm, shared_rng):
    """x given split, and a second product (reused buffers) gives the same bits."""
    S = crossing(shared_rng, 300)
    x = vector(shared_rng, 300)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    first = A @ DistributedVector.from_global(x, A.col_partition, backend="cpu")
    A @ vector(shared_rng, 300)  # dirty the buffers
    second = A @ x
    check_all(comm, np.array_equal(first.local, second.local), "same bits from a split and a global x")
    check_product(comm, A, S, x, "repeated")
    full = first.gather()
    check_all(comm, full is None if comm.Get_rank() else np.array_equal(full, single_process(S, x)), "gather")


def test_cast_of_x_matches_single_process(comm, shared_rng):
    """A float32 x for a float64 matrix is cast as the single-process product casts it."""
    S = crossing(shared_rng, 200)
    x = vector(shared_rng, 200, np.float32)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    check_product(comm, A, S, x, "float32 x")


@pytest.mark.parametrize("shape", [(500, 120), (90, 700)])
def test_rectangular(comm, shared_rng, shape):
    S = crossing(shared_rng, *shape, density=0.03)
    x = vector(shared_rng, shape[1])
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    assert A.col_partition.n == shape[1] and A.row_partition.n == shape[0]
    check_halos_cross(comm, A)
    check_product(comm, A, S, x, f"{shape}")


def test_reordered_product_is_the_reordered_single_process_product(comm, shared_rng):
    """With reorder=True, vectors go in and come out in the original order, and the product is
    bitwise that of the single-process product of P A P^T."""
    S = crossing(shared_rng, 300)
    S = sp.csr_array(S + S.T)
    x = vector(shared_rng, 300)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu", reorder=True)
    p = A.permutation
    check_all(comm, p is not None and np.array_equal(np.sort(p), np.arange(300)), "a permutation")
    y = (A @ x).allgather()
    reordered = np.empty(300)
    reordered[p] = single_process(sp.csr_array(S[p][:, p]), x[p])
    check_all(comm, np.array_equal(y, reordered), "bitwise the reordered product, original order")
    check_all(comm, np.allclose(y, S @ x, rtol=1e-12, atol=1e-12), "close to the unreordered product")


def test_more_ranks_than_rows(comm, shared_rng):
    """Ranks without rows take part in every exchange and hold empty slices."""
    S = sp.csr_array(shared_rng.standard_normal((3, 3)))
    x = vector(shared_rng, 3)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    check_product(comm, A, S, x, "3 x 3")
    empty = sp.csr_array((0, 0))
    B = DistributedCSR.from_scipy(empty if comm.Get_rank() == 0 else None, comm, backend="cpu")
    check_all(comm, (B @ np.zeros(0)).local.size == 0, "a 0 x 0 matrix")


def test_empty_rows_and_explicit_zeros(comm, shared_rng):
    S = crossing(shared_rng, 300)
    S = sp.csr_array(S.multiply(np.repeat(shared_rng.random(300) < 0.7, 300).reshape(300, 300)))
    S.data[::7] = 0.0  # explicit zeros stay stored entries
    x = vector(shared_rng, 300)
    x[::11] = np.inf  # 0 * inf = nan must appear where the single process has it
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    assert A.nnz == S.nnz
    y = (A @ x).allgather()
    expected = single_process(S, x)
    check_all(comm, np.array_equal(y, expected, equal_nan=True), "nan and inf where the single process has them")


@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_real_matrices(comm, shared_rng, name):
    S = datasets.load_matrix(name)
    if S.dtype.kind in "iub":
        S = sp.csr_array(S.astype(np.float64))
    x = vector(shared_rng, S.shape[1], np.complex128 if S.dtype.kind == "c" else np.float64)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    check_product(comm, A, S, x, name)
    check_product(comm, DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu",
                                                  overlap=True), S, x, f"{name}, overlap")


def test_bad_x_is_refused_on_every_rank(comm, shared_rng):
    S = crossing(shared_rng, 100)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    with pytest.raises(ValueError, match="length 100"):
        A @ np.ones(99)
    with pytest.raises(ValueError, match="1-D"):
        A @ np.ones((100, 1))
    with pytest.raises(TypeError, match="cast safely"):
        A @ np.ones(100, dtype=np.complex128)
    other = DistributedCSR.from_scipy(crossing(shared_rng, 100) if comm.Get_rank() == 0 else None, comm,
                                      backend="cpu", reorder=True)
    with pytest.raises(ValueError, match="different partition"):
        A @ (other @ np.ones(100))
    with pytest.raises(ValueError, match="exchange"):
        DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu", exchange="tcp")
