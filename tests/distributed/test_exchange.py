"""The halo plan and its exchange: every rank's halo holds exactly its peers' entries at its
halo columns; the local and halo blocks split each rank's rows by column owner; GPU runs
(one GPU per rank, NCCL or host buffers) give the single-GPU product's bits."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu.distributed import DistributedCSR, Partition, local_rank
from sparsegpu.distributed._exchange import MpiExchanger
from sparsegpu.distributed._halo import extended_columns, plan_halo
from sparsegpu.distributed._nccl import group_calls, nccl_available
from sparsegpu.distributed.partition import even_offsets
from tests.distributed.conftest import check_all, raises_everywhere
from tests.distributed.matrices import crossing, vector
from tests.distributed.test_spmv import check_product


def test_plan_and_exchange_deliver_the_needed_entries(comm, shared_rng):
    n = 500
    cols = Partition(even_offsets(n, comm.Get_size()), comm)
    wanted = np.random.default_rng(comm.Get_rank() + 1000 * int(shared_rng.integers(1 << 20))).integers(0, n, 300)
    plan = plan_halo(wanted, cols)
    everyone_sends = np.array(comm.allgather(plan.send_counts))
    everyone_receives = np.array(comm.allgather(plan.recv_counts))
    check_all(comm, np.array_equal(everyone_sends, everyone_receives.T), "what r sends s is what s receives from r")
    check_all(comm, np.all(np.diff(plan.halo_columns) > 0) and not np.any(
        (plan.halo_columns >= cols.start) & (plan.halo_columns < cols.stop)), "halo columns: others', increasing")
    x = vector(shared_rng, n)
    gathered = np.random.default_rng(comm.Get_rank()).integers(0, cols.local_size, 7) if cols.local_size else None
    exchanger = MpiExchanger(plan, comm, x.dtype, "cpu", cols.local_size, gathered=gathered, lead=3)
    exchanger.buffers.buffer.fill(np.nan)  # poisoned: unwritten entries show
    exchanger.start(x[cols.start:cols.stop])
    halo = exchanger.halo
    check_all(comm, np.array_equal(halo, x[plan.halo_columns]), "the halo holds the peers' entries")
    packed = exchanger.vector[:0 if gathered is None else gathered.size]
    check_all(comm, gathered is None or np.array_equal(packed, x[cols.start:cols.stop][gathered]),
              "the gathered entries sit before the lead slots and the halo")
    check_all(comm, exchanger.lead.size == 3 and exchanger.vector.size == packed.size + 3 + halo.size,
              "the product's vector: [gathered | lead | halo]")
    ext = np.concatenate([x[cols.start:cols.stop], halo])
    check_all(comm, np.array_equal(ext[extended_columns(wanted, cols, plan)], x[wanted]), "extended indices")


def run_group_over_mpi(comm, calls, send, halo):
    """NCCL's group, emulated: each call as a nonblocking MPI send or receive of the same bytes."""
    from mpi4py import MPI

    wire_bytes = {"NCCL_FLOAT32": 4, "NCCL_FLOAT64": 8}
    requests = []
    for call in calls:
        buffer = (send if call.operation == "send" else halo).view(np.uint8)
        piece = buffer[call.byte_offset:call.byte_offset + call.count * wire_bytes[call.wire_type]]
        start = comm.Isend if call.operation == "send" else comm.Irecv
        requests.append(start(piece, call.peer, tag=30))
    MPI.Request.Waitall(requests)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_nccl_group_calls_deliver_the_needed_entries(comm, shared_rng, dtype):
    """The NCCL exchanger's calls (peers, byte offsets, wire counts; complex entries as pairs),
    run here over MPI point-to-point, fill the halo exactly as the MPI exchanger does."""
    if not hasattr(comm, "Isend"):
        pytest.skip("needs mpi4py")
    n = 400
    cols = Partition(even_offsets(n, comm.Get_size()), comm)
    wanted = np.random.default_rng(comm.Get_rank() + 1000 * int(shared_rng.integers(1 << 20))).integers(0, n, 200)
    plan = plan_halo(wanted, cols)
    x = vector(shared_rng, n, dtype)
    send = np.ascontiguousarray(x[cols.start:cols.stop][plan.send_indices])
    halo = np.full(plan.halo_columns.size, np.nan, dtype=dtype)
    calls = group_calls(plan, dtype)
    per_entry = 2 if np.dtype(dtype).kind == "c" else 1
    check_all(comm, sum(c.count for c in calls if c.operation == "recv") == per_entry * halo.size, "wire counts")
    run_group_over_mpi(comm, calls, send, halo)
    check_all(comm, np.array_equal(halo, x[plan.halo_columns]), "the halo holds the peers' entries")


def test_local_and_halo_blocks_split_the_rows(comm, shared_rng):
    S = crossing(shared_rng, 300)
    x = vector(shared_rng, 300)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    p = A.row_partition
    local, halo = A.local_block, A.halo_block
    rows = S[p.start:p.stop]
    own = rows[:, p.start:p.stop]
    check_all(comm, local.shape == (p.local_size, p.local_size) and (local.to_scipy() != own).nnz == 0,
              "the local block: own columns from 0")
    halo_columns = A.halo_plan.halo_columns
    check_all(comm, halo.shape[1] == halo_columns.size and (halo.to_scipy() != rows[:, halo_columns]).nnz == 0,
              "the halo block: other ranks' columns in increasing order")
    split_sum = local @ x[p.start:p.stop] + halo @ x[halo_columns]
    check_all(comm, np.allclose(split_sum, (A @ x).local, rtol=1e-12, atol=1e-12), "local + halo = A @ x")
    check_all(comm, A.local_nnz == rows.nnz and A.extended.nnz == rows.nnz, "entries per rank")


def test_nccl_needs_the_gpu_backend(comm, shared_rng):
    S = crossing(shared_rng, 50)
    raises_everywhere(comm, ValueError, DistributedCSR.from_scipy, S if comm.Get_rank() == 0 else None, comm,
                      backend="cpu", exchange="nccl")
    assert isinstance(nccl_available(), bool)
    check_all(comm, 0 <= local_rank(comm) < comm.Get_size(), "a host-local rank")


@pytest.fixture
def gpu_rank(comm):
    """This rank's GPU made current (one GPU per rank, as launched on the GPU machines)."""
    from sparsegpu.distributed import use_local_device

    return use_local_device(comm)


@pytest.mark.gpu
@pytest.mark.parametrize("exchange", ["mpi", "nccl"])
@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_gpu_bitwise_equal_to_the_single_gpu_product(comm, shared_rng, gpu_rank, exchange, overlap, dtype):
    if exchange == "nccl" and not nccl_available():
        pytest.skip("CuPy without NCCL")
    S = crossing(shared_rng, 3000, density=0.003, dtype=dtype)
    x = vector(shared_rng, 3000, dtype)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="gpu", overlap=overlap,
                                  exchange=exchange)
    check_product(comm, A, S, x, f"gpu {exchange} overlap={overlap}", backend="gpu")
    import cupy

    check_product(comm, A, S, cupy.asarray(x), "gpu, CuPy x", backend="gpu")


@pytest.mark.gpu
def test_gpu_long_rows_and_vectors(comm, shared_rng, gpu_rank):
    """Rows long enough to be split across blocks keep the single-GPU bits; dots agree on every rank."""
    S = crossing(shared_rng, 2000, density=0.002)
    long_rows = (np.repeat([5, 900, 1999], 2000), np.tile(np.arange(2000), 3))
    dense = sp.csr_array((shared_rng.standard_normal(2000 * 3), long_rows), shape=(2000, 2000))
    S = sp.csr_array(S + dense)
    x = vector(shared_rng, 2000)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="gpu")
    y = check_product(comm, A, S, x, "gpu long rows", backend="gpu")
    dots = comm.allgather(float(y.dot(y)))
    check_all(comm, len(set(dots)) == 1 and np.isclose(dots[0], float(np.dot((S @ x), (S @ x))), rtol=1e-12),
              "a GPU dot, the same on every rank")
