"""sparsegpu.transfer: chunk and row-block planning, the pinned pool, streamed upload and
out-of-core SpMV (CPU logic here; GPU tests marked ``gpu``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsegpu
from sparsegpu import transfer
from sparsegpu.transfer import (
    OutOfCoreCSR,
    PinnedPool,
    TransferReport,
    block_bytes,
    plan_chunks,
    plan_row_blocks,
    upload,
    upload_csr,
)
from tests.conftest import poisoned, to_numpy

# --------------------------------------------------------------------------- helpers


def random_csr(rng, m, n, per_row, *, long_rows=(), long_length=0, empty_rows=(), dtype=np.float64):
    """A canonical CSR with about ``per_row`` entries per row, some rows long, some empty."""
    lengths = rng.integers(0, 2 * per_row + 1, size=m)
    for r in long_rows:
        lengths[r] = min(long_length, n)
    for r in empty_rows:
        lengths[r] = 0
    indptr = np.zeros(m + 1, np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.concatenate([np.sort(rng.choice(n, size=k, replace=False)) for k in lengths] or [np.zeros(0)])
    data = rng.standard_normal(indptr[-1]).astype(dtype)
    return sp.csr_array((data, indices.astype(np.int32), indptr.astype(np.int32)), shape=(m, n))


def messy_csr(rng, S, duplicates):
    """S's entries in a CSR that is not canonical: columns shuffled within rows and
    ``duplicates`` entries repeated (scipy's constructor keeps the arrays as given)."""
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    extra = rng.integers(0, S.nnz, duplicates)
    rows = np.concatenate([rows, rows[extra]])
    cols = np.concatenate([S.indices, S.indices[extra]])
    data = np.concatenate([S.data, S.data[extra]])
    order = np.lexsort((rng.random(rows.size), rows))  # by row, random within a row
    indptr = np.zeros(S.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=S.shape[0]), out=indptr[1:])
    messy = sp.csr_array((data[order], cols[order].astype(S.indices.dtype), indptr.astype(S.indptr.dtype)),
                         shape=S.shape)
    assert not messy.has_canonical_format
    return messy


def chunk_bytes_for(S, count):
    """A chunk size giving about ``count`` chunks of S's value array."""
    return max(8, -(-S.data.nbytes // count))


def budget_for(S, blocks, streams=2):
    """A device budget giving about ``blocks`` row blocks (never too small for the longest row)."""
    sizes = S.data.dtype.itemsize, S.indices.dtype.itemsize
    whole = block_bytes(S.shape[0], S.nnz, *sizes)
    longest = block_bytes(1, int(np.diff(S.indptr).max(initial=0)), *sizes)
    return streams * max(-(-whole // blocks) + 64, longest) + streams * 3 * transfer.SLOT_ALIGN


def nonzero_x(rng, n):
    x = rng.standard_normal(n)
    x[x == 0] = 1.0
    return x


# --------------------------------------------------------------------------- chunk planning


@pytest.mark.parametrize("count", [1, 2, 7, 1000])
def test_plan_chunks_counts_and_cover(count):
    n = 7000
    chunks = plan_chunks([n], [8], -(-n * 8 // count))
    assert len(chunks) == count
    assert chunks[0].start == 0 and chunks[-1].stop == n
    assert all(a.stop == b.start for a, b in zip(chunks, chunks[1:]))
    assert all((c.stop - c.start) * 8 <= -(-n * 8 // count) for c in chunks)


def test_plan_chunks_skips_empty_arrays_and_orders_arrays():
    chunks = plan_chunks([0, 5, 0, 3], [8, 4, 8, 4], 8)
    assert [(c.array, c.start, c.stop) for c in chunks] == [(1, 0, 2), (1, 2, 4), (1, 4, 5), (3, 0, 2), (3, 2, 3)]
    assert plan_chunks([0, 0], [8, 4], 64) == []


def test_plan_chunks_split_inside_a_long_row():
    # row 1 holds entries 3..1002; 100-entry chunks start inside it at 100, 200, ..., 1000
    indptr = np.array([0, 3, 1003, 1005])
    chunks = plan_chunks([1005], [8], 800)
    inside = [c.start for c in chunks if indptr[1] < c.start < indptr[2]]
    assert inside == list(range(100, 1001, 100))


@pytest.mark.parametrize("bad", [0, -1, -4096])
def test_plan_chunks_rejects_nonpositive(bad):
    with pytest.raises(ValueError, match="chunk_bytes must be positive"):
        plan_chunks([10], [8], bad)


def test_plan_chunks_rejects_non_integer_and_too_small():
    with pytest.raises(TypeError, match="chunk_bytes"):
        plan_chunks([10], [8], 1.5)
    with pytest.raises(ValueError, match="smaller than one element"):
        plan_chunks([10], [8], 4)


def test_plan_chunks_page_aligned_boundaries():
    address = 4096 * 10 + 24  # an array starting mid-page, as NumPy's large allocations do
    chunks = plan_chunks([100_000], [8], 3 * 4096 + 100, addresses=[address], align=4096)
    for c in chunks[1:]:
        assert (address + c.start * 8) % 4096 == 0
    assert chunks[0].start == 0 and chunks[-1].stop == 100_000
    assert all(a.stop == b.start for a, b in zip(chunks, chunks[1:]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3000), min_size=1, max_size=4), st.integers(8, 5000))
def test_plan_chunks_property(lengths, chunk_bytes):
    itemsizes = [8, 4, 4, 8][: len(lengths)]
    chunks = plan_chunks(lengths, itemsizes, chunk_bytes)
    for number, length in enumerate(lengths):
        mine = [c for c in chunks if c.array == number]
        assert sum(c.stop - c.start for c in mine) == length
        assert all(0 < (c.stop - c.start) * itemsizes[number] <= chunk_bytes for c in mine)


# --------------------------------------------------------------------------- row-block planning


def test_plan_row_blocks_fit_and_cover(rng):
    S = random_csr(rng, 500, 80, 6, long_rows=[17], long_length=70, empty_rows=range(100, 160))
    budget = 2 * 4000
    blocks = plan_row_blocks(S.indptr, budget, 8, 4)
    assert blocks[0][0] == 0 and blocks[-1][1] == 500
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
    for r0, r1 in blocks:
        nnz = int(S.indptr[r1] - S.indptr[r0])
        assert block_bytes(r1 - r0, nnz, 8, 4) <= budget // 2
    # greedy: a block plus the next row would not fit
    for (r0, r1), _ in zip(blocks, blocks[1:]):
        assert block_bytes(r1 + 1 - r0, int(S.indptr[r1 + 1] - S.indptr[r0]), 8, 4) > budget // 2


def test_plan_row_blocks_row_too_long_names_the_row():
    indptr = np.array([0, 2, 4, 504, 506])
    with pytest.raises(ValueError, match=r"row 2 has 500 entries"):
        plan_row_blocks(indptr, 2 * 1000, 8, 4)


def test_plan_row_blocks_fixed_rows_and_empty():
    indptr = np.array([0, 0, 0, 0, 0, 1])
    assert plan_row_blocks(indptr, 10_000, 8, 4, chunk_rows=2) == [(0, 2), (2, 4), (4, 5)]
    assert plan_row_blocks(np.array([0]), 10_000, 8, 4) == []
    with pytest.raises(ValueError, match="chunk_rows=5"):
        plan_row_blocks(np.array([0, 10, 20, 30, 40, 50]), 2 * 300, 8, 4, chunk_rows=5)
    with pytest.raises(ValueError, match="device_budget_bytes must be positive"):
        plan_row_blocks(indptr, 0, 8, 4)


# --------------------------------------------------------------------------- pinned pool


def test_pool_borrow_returns_buffers_after_exception():
    pool = PinnedPool(buffers=3, buffer_bytes=1024, backend="cpu")
    with pytest.raises(RuntimeError, match="boom"):
        with pool.borrow(2) as buffers:
            assert len(buffers) == 2 and pool.available == 1
            raise RuntimeError("boom")
    assert pool.available == 3
    pool.close()
    assert pool.closed
    with pytest.raises(ValueError, match="closed"):
        with pool.borrow(1):
            pass
    assert "closed" in repr(pool)


def test_pool_rejects_bad_sizes():
    with pytest.raises(ValueError, match="buffers must be positive"):
        PinnedPool(buffers=0, backend="cpu")
    with pytest.raises(ValueError, match="buffer_bytes must be positive"):
        PinnedPool(buffer_bytes=-5, backend="cpu")


def test_pool_falls_back_to_pageable_when_pinning_fails(monkeypatch):
    allocated, freed = [], []

    def alloc(nbytes):
        if len(allocated) == 1:
            raise MemoryError("locked-memory limit reached")
        allocated.append(12345)
        return 12345

    monkeypatch.setattr(transfer, "_pinning_available", lambda backend: True)
    monkeypatch.setattr(transfer, "_alloc_pinned", alloc)
    monkeypatch.setattr(transfer, "_free_pinned", freed.append)
    with pytest.warns(RuntimeWarning, match="locked-memory limit reached"):
        pool = PinnedPool(buffers=3, buffer_bytes=256, backend="cpu")
    assert not pool.pinned and freed == [12345]  # the one that succeeded went back
    with pool.borrow(3) as buffers:
        assert all(b.nbytes == 256 for b in buffers)
    pool.close()


# --------------------------------------------------------------------------- CPU upload / out of core


def test_upload_csr_cpu_canonicalises(rng):
    S = random_csr(rng, 60, 30, 4)
    messy = messy_csr(rng, S, 5)
    A = upload_csr(messy, backend="cpu")
    ref = sparsegpu.CSR.from_scipy(messy, backend="cpu")
    assert np.array_equal(A.indptr, ref.indptr) and np.array_equal(A.indices, ref.indices)
    assert np.allclose(A.data, ref.data)
    A2, report = upload_csr(S, backend="cpu", report=True, chunk_bytes=64)
    assert isinstance(report, TransferReport) and report.nbytes == A2.nbytes
    assert "GB" in repr(report) and "overlap" in repr(report)


@pytest.mark.parametrize("bad", [np.ones((3, 3)), [[1, 2]], "matrix"])
def test_upload_csr_rejects_non_scipy(bad):
    with pytest.raises(TypeError, match="scipy.sparse"):
        upload_csr(bad, backend="cpu")


def test_upload_rejects_bad_input():
    with pytest.raises(ValueError, match="chunk_bytes must be positive"):
        upload([np.ones(4)], chunk_bytes=0, backend="cpu")
    with pytest.raises(ValueError, match="chunk_bytes must be positive"):
        upload_csr(sp.eye(3, format="csr"), chunk_bytes=-1, backend="cpu")
    with pytest.raises(TypeError, match="not a NumPy array"):
        upload([np.ones(3), [1, 2]], backend="cpu")
    with pytest.raises(ValueError, match="pack must be"):
        upload([np.ones(3)], pack="magic", backend="cpu")
    with pytest.raises(TypeError, match="upload takes"):
        upload(3, backend="cpu")
    bad = sp.csr_array((np.ones(2), np.array([0, 1]), np.array([0, 1, 2])), shape=(2, 2))
    bad.indptr[-1] = 3  # scipy checks at construction only
    with pytest.raises(ValueError, match=r"indptr\[-1\] is 3"):
        upload_csr(bad, backend="cpu")


def test_upload_cpu_casts(rng):
    a, b = rng.standard_normal(10), rng.integers(0, 9, 7)
    out = upload([a, b], dtypes=[np.float32, np.int64], chunk_bytes=8, backend="cpu")
    assert out[0].dtype == np.float32 and np.array_equal(out[1], b)


@pytest.mark.parametrize("blocks", [1, 2, 7, 60])
def test_out_of_core_cpu_matches_scipy_and_is_bitwise_in_memory(rng, blocks):
    S = random_csr(rng, 400, 150, 5, long_rows=[3, 250], long_length=40, empty_rows=range(100, 180))
    A = OutOfCoreCSR(S, device_budget_bytes=budget_for(S, blocks), backend="cpu")
    assert len(A.blocks) == 1 if blocks == 1 else len(A.blocks) >= 0.8 * blocks
    x = nonzero_x(rng, 150)
    y = A @ x
    assert np.allclose(y, S @ x)
    assert np.array_equal(y, sparsegpu.CSR.from_scipy(S, backend="cpu") @ x)
    assert np.array_equal(A @ x, y)  # deterministic


def test_out_of_core_cpu_alpha_beta_and_out(rng):
    S = random_csr(rng, 90, 40, 3)
    A = OutOfCoreCSR(S, device_budget_bytes=budget_for(S, 5), backend="cpu")
    x, y0 = nonzero_x(rng, 40), rng.standard_normal(90)
    y = y0.copy()
    assert A.spmv(x, y, alpha=2.0, beta=-0.5) is y
    assert np.allclose(y, 2.0 * (S @ x) - 0.5 * y0)
    out = poisoned(90, np.float64, np)
    A.spmv(x, out)
    assert np.allclose(out, S @ x)


def test_out_of_core_bad_input(rng):
    S = random_csr(rng, 20, 10, 2)
    A = OutOfCoreCSR(S, device_budget_bytes=budget_for(S, 2), backend="cpu")
    with pytest.raises(ValueError, match="length 9"):
        A @ np.ones(9)
    with pytest.raises(ValueError, match="beta is nonzero"):
        A.spmv(np.ones(10), beta=1.0)
    with pytest.raises(TypeError, match="scipy.sparse"):
        OutOfCoreCSR(np.ones((3, 3)), backend="cpu")
    with pytest.raises(TypeError, match="float32, float64"):
        OutOfCoreCSR(sp.csr_array(np.eye(3, dtype=np.int64)), backend="cpu")
    with pytest.raises(ValueError, match="device_budget_bytes must be positive"):
        OutOfCoreCSR(S, device_budget_bytes=0, backend="cpu")
    long = sp.csr_array(np.ones((3, 500)))
    with pytest.raises(ValueError, match="row 0 has 500 entries"):
        OutOfCoreCSR(long, device_budget_bytes=2 * 4000 + 6 * transfer.SLOT_ALIGN, backend="cpu")
    with pytest.raises(ValueError, match="at least 2"):
        OutOfCoreCSR(S, streams=1, backend="cpu")
    bad = S.copy()
    bad.indices[0] = 10  # scipy checks at construction only
    with pytest.raises(ValueError, match="out of range for 10 columns"):
        OutOfCoreCSR(bad, backend="cpu")


def test_out_of_core_cpu_memory_mapped(rng, tmp_path):
    S = random_csr(rng, 300, 60, 4)
    arrays = {}
    for name in ("data", "indices", "indptr"):
        source = getattr(S, name)
        mapped = np.lib.format.open_memmap(tmp_path / f"{name}.npy", mode="w+", dtype=source.dtype, shape=source.shape)
        mapped[...] = source
        mapped.flush()
        arrays[name] = np.load(tmp_path / f"{name}.npy", mmap_mode="r")
    M = sp.csr_array((arrays["data"], arrays["indices"], arrays["indptr"]), shape=S.shape, copy=False)
    A = OutOfCoreCSR(M, device_budget_bytes=budget_for(S, 4), backend="cpu")
    x = nonzero_x(rng, 60)
    assert np.array_equal(A @ x, sparsegpu.CSR.from_scipy(S, backend="cpu") @ x)


# --------------------------------------------------------------------------- GPU


def gpu_csr_equal(A, S):
    ref = sparsegpu.CSR.from_scipy(S)
    return (np.array_equal(to_numpy(A.indptr), to_numpy(ref.indptr))
            and np.array_equal(to_numpy(A.indices), to_numpy(ref.indices))
            and np.allclose(to_numpy(A.data), to_numpy(ref.data)))


@pytest.mark.gpu
@pytest.mark.parametrize("count", [1, 2, 7, 200])
@pytest.mark.parametrize("pack", ["threads", "register"])
def test_upload_csr_gpu_chunk_counts(rng, count, pack):
    S = random_csr(rng, 3000, 500, 8, long_rows=[5, 2000], long_length=480, empty_rows=range(1000, 1400))
    with PinnedPool(buffers=3, buffer_bytes=1 << 16) as pool:
        A, report = upload_csr(S, chunk_bytes=chunk_bytes_for(S, count), pool=pool, pack=pack, report=True)
        assert pool.available == 3
    assert A.backend == "gpu" and gpu_csr_equal(A, S)
    assert not transfer.is_pinned(S.data) and not transfer.is_pinned(S.indices)  # registrations undone
    x = nonzero_x(rng, 500)
    assert np.allclose(A @ x, S @ x)
    assert report.nbytes == S.data.nbytes + S.indices.nbytes + S.indptr.nbytes and report.wall > 0


@pytest.mark.gpu
def test_upload_csr_gpu_long_row_across_chunks_and_empty(rng):
    S = random_csr(rng, 50, 20000, 2, long_rows=[25], long_length=20000, empty_rows=range(30, 50))
    A = upload_csr(S, chunk_bytes=4096, streams=3)
    assert gpu_csr_equal(A, S)
    empty = sp.csr_array((40, 7))
    E = upload_csr(empty, chunk_bytes=64)
    assert E.nnz == 0 and np.array_equal(to_numpy(E @ np.ones(7)), np.zeros(40))


@pytest.mark.gpu
def test_upload_csr_gpu_non_canonical_and_int64(rng):
    S = random_csr(rng, 800, 300, 6)
    messy = messy_csr(rng, S, 50)
    before = (messy.data.copy(), messy.indices.copy())
    messy.indices, messy.indptr = messy.indices.astype(np.int64), messy.indptr.astype(np.int64)
    A = upload_csr(messy, chunk_bytes=1000)
    assert np.array_equal(messy.data, before[0]) and np.array_equal(messy.indices, before[1])  # untouched
    assert A.index_dtype == np.int32 and gpu_csr_equal(A, messy.copy())
    sorted_only = messy_csr(rng, S, 0)  # unsorted, no duplicates
    assert gpu_csr_equal(upload_csr(sorted_only, chunk_bytes=777), sorted_only)


@pytest.mark.gpu
def test_upload_csr_gpu_bad_indices():
    S = sp.csr_array((np.ones(3), np.array([0, 1, 2]), np.array([0, 2, 3])), shape=(2, 3))
    S.indices[1] = 7
    with pytest.raises(ValueError, match="out of range"):
        upload_csr(S, chunk_bytes=8)


@pytest.mark.gpu
def test_upload_gpu_pinned_sources_and_casts(rng):
    a = transfer.pinned_empty(10_001, np.float64)
    a[...] = rng.standard_normal(a.size)
    b = transfer.pin(rng.integers(0, 100, 200_003).astype(np.int64))  # own pages (> 128 KiB)
    try:
        assert transfer.is_pinned(a) and transfer.is_pinned(b)
        out = upload([a, b], dtypes=[np.float64, np.int32], chunk_bytes=4096, streams=3)
        assert np.array_equal(out[0].get(), a) and np.array_equal(out[1].get(), b)
        assert out[1].dtype == np.int32
    finally:
        transfer.unpin(b)
    assert not transfer.is_pinned(b)


@pytest.mark.gpu
def test_gpu_pin_leaves_memory_sharing_its_pages_usable(rng):
    """Copies to and from memory that shares a page with a pinned array keep working: pin
    registers the array's own bytes, not the pages around them (a page-rounded registration made
    a later D2H copy into the next buffer fail with cudaErrorInvalidValue)."""
    import cupy

    slab = np.empty(4 << 20, dtype=np.uint8)
    first = -(-slab.ctypes.data // transfer.PAGE_BYTES) * transfer.PAGE_BYTES - slab.ctypes.data + 16
    pinned = transfer.pin(slab[first:first + 8 * 100_003].view(np.int64))
    before = slab[:first]  # shares the pinned array's first page
    after = slab[first + pinned.nbytes:first + pinned.nbytes + 4 * 50_001].view(np.int32)
    try:
        assert transfer.is_pinned(pinned) and not transfer.is_pinned(after)
        pinned[...] = rng.integers(-99, 99, pinned.size)
        source = cupy.asarray(rng.integers(-99, 99, after.size).astype(np.int32))
        source.get(out=after)
        np.testing.assert_array_equal(after, source.get())
        np.testing.assert_array_equal(cupy.asarray(after).get(), after)
        np.testing.assert_array_equal(cupy.asarray(before).get(), before)
        np.testing.assert_array_equal(upload([pinned])[0].get(), pinned)
    finally:
        transfer.unpin(pinned)


@pytest.mark.gpu
def test_upload_gpu_pinned_fallback(rng, monkeypatch):
    def refuse(nbytes):
        raise MemoryError("no pinned memory today")

    monkeypatch.setattr(transfer, "_alloc_pinned", refuse)
    with pytest.warns(RuntimeWarning, match="no pinned memory today"):
        pool = PinnedPool(buffers=2, buffer_bytes=1 << 14)
    S = random_csr(rng, 2000, 300, 5)
    with pool:
        A = upload_csr(S, pool=pool, chunk_bytes=5000)
    assert gpu_csr_equal(A, S)


@pytest.mark.gpu
@pytest.mark.parametrize("pack", ["threads", "register"])
@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_upload_gpu_no_leak_on_exception(rng, monkeypatch, error, pack):
    S = random_csr(rng, 40_000, 300, 8)
    calls = {"n": 0}
    original = transfer._Stager._pack_into

    def failing(self, buffer, piece, meanwhile):
        calls["n"] += 1
        if calls["n"] == (4 if pack == "threads" else 2):
            raise error("injected")
        return original(self, buffer, piece, meanwhile)

    monkeypatch.setattr(transfer._Stager, "_pack_into", failing)
    pool = PinnedPool(buffers=3, buffer_bytes=1 << 12)
    with pytest.raises(error, match="injected"):
        # register: only the partial pages at the arrays' ends are packed, so fail early
        upload_csr(S, pool=pool, chunk_bytes=1 << 12, pack=pack)
    assert pool.available == 3
    assert not any(transfer.is_pinned(a) for a in (S.data, S.indices, S.indptr))
    pool.close()  # raises if a buffer were still lent out


@pytest.mark.gpu
@pytest.mark.parametrize("blocks", [1, 2, 7, 60])
def test_out_of_core_gpu_matches_and_bitwise(rng, blocks):
    import cupy

    # rows of 690 go to the long-row kernels (the mean of ~9 per row gives 2 threads per row)
    S = random_csr(rng, 5000, 700, 9, long_rows=[7, 4000], long_length=690, empty_rows=range(2000, 2600))
    A = OutOfCoreCSR(S, device_budget_bytes=budget_for(S, blocks))
    assert len(A.blocks) == 1 if blocks == 1 else len(A.blocks) >= 0.8 * blocks
    assert blocks <= 2 or A.device_budget_bytes < A.nbytes
    x = nonzero_x(rng, 700)
    ref = sparsegpu.CSR.from_scipy(S)
    y_host = A @ x
    assert isinstance(y_host, np.ndarray) and np.allclose(y_host, S @ x)
    assert np.array_equal(y_host, ref @ x)
    x_dev = cupy.asarray(x)
    out = poisoned(5000, np.float64, cupy)
    y_dev = A.spmv(x_dev, out)
    assert y_dev is out and np.array_equal(out.get(), (ref @ x_dev).get())
    assert np.array_equal(A @ x, y_host)  # deterministic, plans cached


@pytest.mark.gpu
def test_out_of_core_gpu_pinned_source_beta_and_report(rng):
    S = random_csr(rng, 3000, 400, 6)
    for name in ("data", "indices", "indptr"):
        pinned = transfer.pinned_empty(getattr(S, name).shape, getattr(S, name).dtype)
        pinned[...] = getattr(S, name)
        setattr(S, name, pinned)
    A = OutOfCoreCSR(S, device_budget_bytes=budget_for(S, 5), streams=3)
    x, y0 = nonzero_x(rng, 400), rng.standard_normal(3000)
    y = y0.copy()
    A.spmv(x, y, alpha=1.5, beta=2.0, report=True)
    assert np.allclose(y, 1.5 * (S @ x) + 2.0 * y0)
    assert A.last_report is not None and A.last_report.chunks == len(A.blocks)


@pytest.mark.gpu
def test_out_of_core_gpu_progress_quiet_warnings(rng):
    S = random_csr(rng, 500, 100, 3)
    A = OutOfCoreCSR(S, device_budget_bytes=budget_for(S, 3))
    x = nonzero_x(rng, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.allclose(A.spmv(x, progress=True), S @ x)
        assert np.allclose(upload_csr(S, chunk_bytes=512, progress=True) @ x, S @ x)
