"""DistributedVector: dots reduce in rank order (the same bits on every rank), updates and
arithmetic stay rank-local, gather/scatter round-trip in the original order."""

from __future__ import annotations

import numpy as np
import pytest

from sparsegpu.distributed import DistributedVector, Partition, balanced_offsets
from sparsegpu.distributed.partition import even_offsets
from sparsegpu.distributed.vector import dots
from tests.distributed.conftest import check_all
from tests.distributed.matrices import vector


@pytest.fixture
def partition(comm, shared_rng):
    """An uneven partition of a length-n vector (some ranks may hold nothing)."""
    n = int(shared_rng.integers(50, 400))
    cuts = np.sort(shared_rng.integers(0, n + 1, comm.Get_size() - 1))
    return Partition(np.concatenate([[0], cuts, [n]]), comm)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_dot_is_the_rank_ordered_sum_on_every_rank(comm, shared_rng, partition, dtype):
    a, b = vector(shared_rng, partition.n, dtype), vector(shared_rng, partition.n, dtype)
    u, v = (DistributedVector.from_global(w, partition, backend="cpu") for w in (a, b))
    dot = u.dot(v)
    everyone = comm.allgather(dot)
    check_all(comm, all(d == everyone[0] for d in everyone), "the same bits on every rank")
    # The definition: per-rank float64 (complex128) partials, added in rank order.
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    bounds = zip(partition.offsets[:-1], partition.offsets[1:])
    partials = [np.vdot(a[s:e].astype(wide), b[s:e].astype(wide)) for s, e in bounds]
    expected = partials[0]
    for p in partials[1:]:
        expected = expected + p
    tolerance = 1e-12 * np.sqrt(partition.n) * (np.abs(a) @ np.abs(b))
    check_all(comm, abs(dot - expected) <= tolerance, "the rank-ordered sum of the partials")
    check_all(comm, abs(dot - np.vdot(a.astype(wide), b.astype(wide))) <= tolerance + 1e-12, "close to NumPy's dot")
    check_all(comm, u.dot(v) == dot, "the same bits run to run")


def test_norms(comm, shared_rng, partition):
    a = vector(shared_rng, partition.n)
    u = DistributedVector.from_global(a, partition, backend="cpu")
    check_all(comm, np.isclose(u.norm(), np.linalg.norm(a), rtol=1e-13), "2-norm")
    check_all(comm, u.norm(np.inf) == np.abs(a).max(), "max-norm")
    check_all(comm, np.isclose(u.sum(), a.sum(), rtol=1e-12, atol=1e-12), "sum")
    with pytest.raises(ValueError, match="ord"):
        u.norm(1)


def test_updates_and_arithmetic(comm, shared_rng, partition):
    a, b = vector(shared_rng, partition.n), vector(shared_rng, partition.n)
    u, v = (DistributedVector.from_global(w, partition, backend="cpu") for w in (a, b))
    w = u.copy()
    w.axpy(2.5, v)
    check_all(comm, np.array_equal(w.allgather(), a + 2.5 * b), "axpy")
    check_all(comm, np.array_equal(u.allgather(), a), "copy leaves the original alone")
    results = {
        "add": ((u + v), a + b), "sub": ((u - v), a - b), "mul": ((u * v), a * b), "div": ((u / 3.0), a / 3.0),
        "rmul": ((3.0 * u), 3.0 * a), "rsub": ((1.0 - u), 1.0 - a), "neg": ((-u), -a), "radd": ((1 + u), 1 + a),
        "rdiv": ((1.0 / v), 1.0 / b), "np scalar": ((np.float64(2.0) * u), 2.0 * a),
    }
    for what, (got, expected) in results.items():
        check_all(comm, np.array_equal(got.allgather(), expected), what)
    z = u.copy()
    z += v
    z -= 2 * v
    z *= 4.0
    z /= 2.0
    check_all(comm, np.array_equal(z.allgather(), ((a + b) - 2 * b) * 4.0 / 2.0), "in-place operators")
    check_all(comm, np.array_equal(u.copy().scale(3.0).allgather(), 3.0 * a), "scale")
    check_all(comm, np.all(u.zeros_like().allgather() == 0) and np.all(u.copy().fill(7).allgather() == 7), "fill")


def test_gather_scatter_round_trip_with_a_permutation(comm, shared_rng):
    n = 97
    permutation = shared_rng.permutation(n)  # the same on every rank: one seed
    partition = Partition(even_offsets(n, comm.Get_size()), comm, permutation)
    a = vector(shared_rng, n)
    u = DistributedVector.scatter(a if comm.Get_rank() == 0 else None, partition, backend="cpu")
    local_ok = np.array_equal(u.local, a[permutation[partition.start:partition.stop]])
    check_all(comm, local_ok, "scatter applies the permutation")
    sliced = DistributedVector.from_global(a, partition, backend="cpu")
    check_all(comm, np.array_equal(sliced.local, u.local), "from_global")
    gathered = u.gather(root=comm.Get_size() - 1)
    is_root = comm.Get_rank() == comm.Get_size() - 1
    check_all(comm, np.array_equal(gathered, a) if is_root else gathered is None, "gather to the last rank")
    check_all(comm, np.array_equal(u.allgather(), a), "allgather")


def test_mismatched_partitions_and_bad_input_are_refused(comm, shared_rng):
    n = 40
    p = Partition(even_offsets(n, comm.Get_size()), comm)
    q = Partition(balanced_offsets(np.arange(n + 1) ** 2, comm.Get_size()), comm)
    u = DistributedVector.zeros(p, backend="cpu")
    v = DistributedVector.zeros(q, backend="cpu")
    if comm.Get_size() > 1:
        with pytest.raises(ValueError, match="different partitions"):
            u.dot(v)
        with pytest.raises(ValueError, match="different partitions"):
            u + v
    with pytest.raises(TypeError, match="DistributedVector"):
        u.axpy(1.0, np.zeros(n))
    with pytest.raises(ValueError, match="length 40"):
        DistributedVector.from_global(np.zeros(n + 1), p)
    with pytest.raises(ValueError, match="1-D"):
        DistributedVector(np.zeros((p.local_size, 1)), p)
    with pytest.raises(TypeError, match="Partition"):
        DistributedVector(np.zeros(p.local_size), [0, n])
    with pytest.raises(ValueError, match="length 40"):
        DistributedVector.scatter(np.zeros(3) if comm.Get_rank() == 0 else None, p)


def test_partition_rules(comm):
    size = comm.Get_size()
    with pytest.raises(ValueError, match="entries"):
        Partition([0, 5] * size + [5], comm)
    with pytest.raises(ValueError, match="never decrease"):
        Partition(list(range(size)) + [-1], comm)
    with pytest.raises(TypeError, match="communicator"):
        Partition([0, 5], object())
    p = Partition(even_offsets(10, size), comm)
    assert p.owners(np.arange(10)).tolist() == np.repeat(np.arange(size), p.counts).tolist()


def test_balanced_offsets_balance_weight(shared_rng):
    lengths = shared_rng.integers(0, 50, 1000)
    lengths[shared_rng.integers(0, 1000, 5)] = 3000  # a few long rows
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    for size in (1, 2, 3, 4, 7, 16):
        offsets = balanced_offsets(indptr, size)
        assert offsets[0] == 0 and offsets[-1] == 1000 and np.all(np.diff(offsets) >= 0)
        weights = np.add.reduceat(lengths + 1, offsets[:-1])[np.diff(offsets) > 0]
        # No rank exceeds its share by more than the heaviest row.
        assert weights.max() <= (lengths.sum() + 1000) / size + lengths.max() + 1


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_fused_dots_have_each_dot_s_bits(comm, shared_rng, partition, dtype):
    """dots() reduces several pairs at once (one exchange), each value the bits of its dot;
    pairs of mixed dtypes too, and a vector's cached buffer reused by a longer list."""
    u, v, w = (DistributedVector.from_global(vector(shared_rng, partition.n, dtype), partition, backend="cpu")
               for _ in range(3))
    single = [u.dot(u)]
    check_all(comm, dots([(u, u)]) == single, "one pair")
    pairs = [(u, u), (u, v), (w, v)]
    fused = dots(pairs)
    check_all(comm, fused == [a.dot(b) for a, b in pairs], "three pairs, each its own dot's bits")
    mixed = [(u, v.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float32)), (v, w)]
    check_all(comm, dots(mixed) == [a.dot(b) for a, b in mixed], "mixed dtypes")
    check_all(comm, len(set(map(str, comm.allgather(fused)))) == 1, "the same on every rank")
