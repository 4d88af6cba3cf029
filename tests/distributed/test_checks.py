"""The checks of ``x`` and ``out`` that ``A.matvec`` keeps from call to call: an array of the
last accepted signature skips them, so every change of array, dtype, layout or partition
after an accepted call must still be checked (and refused or converted as on a first call)."""

from __future__ import annotations

import numpy as np
import pytest

from sparsegpu.distributed import DistributedCSR, DistributedVector, Partition
from tests.distributed.conftest import check_all, raises_everywhere
from tests.distributed.matrices import crossing, vector
from tests.distributed.test_spmv import single_process


def build(comm, rng, n=240, backend="cpu"):
    S = crossing(rng, n)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend=backend)
    return S, A


def mine(A, y_global):
    part = A.row_partition
    return y_global[part.start:part.stop]


def poisoned(A, dtype=np.float64):
    return DistributedVector(np.full(A.row_partition.local_size, np.nan, dtype=dtype), A.row_partition)


def test_outs_taken_in_turn_are_each_written(comm, shared_rng):
    S, A = build(comm, shared_rng)
    outs = [poisoned(A), poisoned(A)]
    for round_ in range(4):
        x = vector(shared_rng, S.shape[1])
        out = outs[round_ % 2]
        out.local[:] = np.nan
        y = A.matvec(DistributedVector.from_global(x, A.col_partition, backend="cpu"), out=out)
        check_all(comm, y is out and np.array_equal(out.local, mine(A, single_process(S, x))),
                  f"round {round_}: out written in place")


def test_x_changing_dtype_after_an_accepted_call(comm, shared_rng):
    S, A = build(comm, shared_rng)
    x = vector(shared_rng, S.shape[1])
    split = DistributedVector.from_global(x, A.col_partition, backend="cpu")
    A @ split  # accepted: float64, contiguous
    complex_x = DistributedVector.from_global(x + 1j, A.col_partition, backend="cpu")
    raises_everywhere(comm, TypeError, A.matvec, complex_x)  # no safe cast to float64
    out = poisoned(A)
    raises_everywhere(comm, TypeError, A.matvec, complex_x, out=out)
    x32 = x.astype(np.float32)
    y = A @ DistributedVector.from_global(x32, A.col_partition, backend="cpu")  # cast, as the single-process product
    check_all(comm, np.array_equal(y.local, mine(A, single_process(S, x32))), "float32 x cast")
    split.local = split.local.astype(np.float32)  # the same vector's array swapped for another dtype
    y = A.matvec(split, out=out)
    check_all(comm, np.array_equal(y.local, mine(A, single_process(S, x32))), "swapped array cast")
    y = A @ DistributedVector.from_global(x, A.col_partition, backend="cpu")
    check_all(comm, np.array_equal(y.local, mine(A, single_process(S, x))), "float64 again")


def test_x_changing_layout_or_length_after_an_accepted_call(comm, shared_rng):
    S, A = build(comm, shared_rng)
    x = vector(shared_rng, S.shape[1])
    split = DistributedVector.from_global(x, A.col_partition, backend="cpu")
    A @ split
    local = split.local
    strided = np.zeros(2 * local.size)
    strided[::2] = local
    split.local = strided[::2]  # same values, not contiguous: copied
    y = A @ split
    check_all(comm, np.array_equal(y.local, mine(A, single_process(S, x))), "strided x copied")
    split.local = np.zeros(local.size + 1)  # a wrong length slipped past the constructor
    raises_everywhere(comm, ValueError, A.matvec, split)
    other = Partition(np.array(A.col_partition.offsets), comm, permutation=np.arange(S.shape[1])[::-1].copy())
    raises_everywhere(comm, ValueError, A.matvec, DistributedVector.from_global(x, other, backend="cpu"))


def test_out_changing_after_an_accepted_call(comm, shared_rng):
    S, A = build(comm, shared_rng)
    x = DistributedVector.from_global(vector(shared_rng, S.shape[1]), A.col_partition, backend="cpu")
    out = poisoned(A)
    A.matvec(x, out=out)  # accepted
    raises_everywhere(comm, TypeError, A.matvec, x, out=poisoned(A, np.float32))
    local = A.row_partition.local_size
    raises_everywhere(comm, ValueError, A.matvec, x, out=DistributedVector(np.zeros(2 * local)[::2], A.row_partition))
    out.local = np.zeros(local + 1)  # a wrong length slipped past the constructor
    raises_everywhere(comm, ValueError, A.matvec, x, out=out)
    raises_everywhere(comm, ValueError, A.matvec, x, out=x)  # the same signature as the accepted out
    out = poisoned(A)
    A.matvec(x, out=out)
    shared = DistributedVector(x.local, A.row_partition)  # another vector over x's memory
    raises_everywhere(comm, ValueError, A.matvec, x, out=shared)


@pytest.mark.gpu
def test_gpu_outs_streams_and_dtypes_in_turn(comm, shared_rng):
    """On the GPU: two outs in turn, a call from another stream, then a float32 x (cast)."""
    from sparsegpu.distributed import use_local_device

    use_local_device(comm)
    import cupy

    S, A = build(comm, shared_rng, n=3000, backend="gpu")
    outs = [DistributedVector(cupy.full(A.row_partition.local_size, cupy.nan), A.row_partition) for _ in range(2)]
    for round_ in range(6):
        x = vector(shared_rng, S.shape[1], np.float32 if round_ == 5 else np.float64)
        out = outs[round_ % 2]
        stream = cupy.cuda.Stream(non_blocking=True) if round_ in (2, 3) else cupy.cuda.Stream.null
        with stream:
            A.matvec(DistributedVector.from_global(cupy.asarray(x), A.col_partition), out=out)
            got = out.local.get()
        check_all(comm, np.array_equal(got, mine(A, single_process(S, x, "gpu"))), f"gpu round {round_}")
