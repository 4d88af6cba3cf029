"""CG's vector updates (sparsegpu.distributed._updates) round as the separate updates do: the
CPU backend runs the separate updates; the GPU's fused float64 kernels must give their bits."""

from __future__ import annotations

import numpy as np
import pytest

from sparsegpu.distributed import DistributedVector, Partition
from sparsegpu.distributed._updates import update_direction, update_iterate
from tests.distributed.conftest import check_all


def vectors(comm, rng, count, xp=np, dtype=np.float64, n=5000):
    offsets = np.linspace(0, n, comm.Get_size() + 1).astype(np.int64)
    partition = Partition(offsets, comm)
    return [DistributedVector.from_global(xp.asarray(rng.standard_normal(n).astype(dtype)), partition)
            for _ in range(count)]


def separate(x, r, p, q, z, alpha, beta):
    """The updates one at a time, as cg wrote them before fusing."""
    p.scale(beta)
    p += z
    x.axpy(alpha, p)
    r.axpy(-alpha, q)


def fused(x, r, p, q, z, alpha, beta):
    update_direction(p, z, beta)
    update_iterate(x, r, p, q, alpha)


def check_same_bits(comm, rng, xp, dtype):
    one = vectors(comm, rng, 5, xp, dtype)
    two = [v.copy() for v in one]
    alpha, beta = np.float64(rng.standard_normal()), np.float64(rng.standard_normal())
    separate(*one, alpha, beta)
    fused(*two, alpha, beta)
    same = all(bool(xp.array_equal(a.local, b.local)) for a, b in zip(one, two))
    check_all(comm, same, f"fused updates ({np.dtype(dtype).name}) give the separate updates' bits")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_updates_match_the_separate_updates(comm, shared_rng, dtype):
    check_same_bits(comm, shared_rng, np, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gpu_fused_updates_match_the_separate_updates(comm, shared_rng, dtype):
    from sparsegpu.distributed import use_local_device

    use_local_device(comm)
    import cupy

    check_same_bits(comm, shared_rng, cupy, dtype)
