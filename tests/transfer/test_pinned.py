"""sparsegpu.transfer.pinned: the staging pool, pinned arrays, and their size and type checks."""

from __future__ import annotations

import numpy as np
import pytest

from sparsegpu._backend import resolve_backend
from sparsegpu.transfer import (
    PinnedPool,
    pin,
    pinned,
    pinned_empty,
    unpin,
    upload,
    upload_csr,
)
from tests.transfer.helpers import gpu_csr_equal, random_csr

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


@pytest.mark.parametrize("name, value", [("buffers", 2.0), ("buffers", True), ("buffer_bytes", "1024"),
                                         ("buffer_bytes", None)])
def test_pool_rejects_non_integer_sizes(name, value):
    with pytest.raises(TypeError, match=f"{name} must be an integer"):
        PinnedPool(**{name: value}, backend="cpu")


def test_pool_too_large_names_the_memory():
    with pytest.raises(ValueError, match=r"PinnedPool\(buffers=1024, buffer_bytes=1099511627776\).*available host memory"):
        PinnedPool(buffers=1024, buffer_bytes=1 << 40, backend="cpu")


def test_pool_falls_back_to_pageable_when_pinning_fails(monkeypatch):
    allocated, freed = [], []

    def alloc(nbytes):
        if len(allocated) == 1:
            raise MemoryError("locked-memory limit reached")
        allocated.append(12345)
        return 12345

    monkeypatch.setattr(pinned, "_pinning_available", lambda backend: True)
    monkeypatch.setattr(pinned, "_alloc_pinned", alloc)
    monkeypatch.setattr(pinned, "_free_pinned", freed.append)
    with pytest.warns(RuntimeWarning, match="locked-memory limit reached"):
        pool = PinnedPool(buffers=3, buffer_bytes=256, backend="cpu")
    assert not pool.pinned and freed == [12345]  # the one that succeeded went back
    with pool.borrow(3) as buffers:
        assert all(b.nbytes == 256 for b in buffers)
    pool.close()


# --------------------------------------------------------------------------- pinned arrays


def test_pinned_empty_shapes_and_checks(rng):
    n = int(rng.integers(1, 50))
    a = pinned_empty(n, np.int32)
    assert a.shape == (n,) and a.dtype == np.int32 and a.flags.c_contiguous
    assert pinned_empty((0, 3)).shape == (0, 3)
    with pytest.raises(ValueError, match="shape must be at least 0"):
        pinned_empty((2, -1))
    with pytest.raises(TypeError, match="shape must be an integer"):
        pinned_empty(2.5)
    with pytest.raises(TypeError, match="dtype must be a NumPy dtype"):
        pinned_empty(3, "not a dtype")


def test_pinned_empty_too_large_names_the_memory():
    with pytest.raises(ValueError, match=r"pinned_empty\(\(1099511627776, 8\), float64\).*available host memory"):
        pinned_empty((1 << 40, 8))


def test_pin_checks_and_cpu_round_trip(rng):
    a = rng.standard_normal(7)
    kept = unpin(pin(a))
    assert np.array_equal(kept, a)
    assert kept is a or resolve_backend(None) == "gpu"  # the CPU backend returns the array itself
    with pytest.raises(TypeError, match="NumPy array"):
        pin([1.0, 2.0])
    with pytest.raises(ValueError, match="C-contiguous"):
        pin(np.ones((4, 4))[:, 0])


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_gpu_pin_leaves_memory_sharing_its_pages_usable(rng):
    """Copies to and from memory that shares a page with a pinned array keep working: pin
    registers the array's own bytes, not the pages around them (a page-rounded registration made
    a later D2H copy into the next buffer fail with cudaErrorInvalidValue)."""
    import cupy

    from sparsegpu import transfer

    slab = np.empty(4 << 20, dtype=np.uint8)
    first = -(-slab.ctypes.data // transfer.PAGE_BYTES) * transfer.PAGE_BYTES - slab.ctypes.data + 16
    pinned_array = transfer.pin(slab[first:first + 8 * 100_003].view(np.int64))
    before = slab[:first]  # shares the pinned array's first page
    after = slab[first + pinned_array.nbytes:first + pinned_array.nbytes + 4 * 50_001].view(np.int32)
    try:
        assert transfer.is_pinned(pinned_array) and not transfer.is_pinned(after)
        pinned_array[...] = rng.integers(-99, 99, pinned_array.size)
        source = cupy.asarray(rng.integers(-99, 99, after.size).astype(np.int32))
        source.get(out=after)
        np.testing.assert_array_equal(after, source.get())
        np.testing.assert_array_equal(cupy.asarray(after).get(), after)
        np.testing.assert_array_equal(cupy.asarray(before).get(), before)
        np.testing.assert_array_equal(upload([pinned_array])[0].get(), pinned_array)
    finally:
        transfer.unpin(pinned_array)


@pytest.mark.gpu
def test_upload_gpu_pinned_fallback(rng, monkeypatch):
    def refuse(nbytes):
        raise MemoryError("no pinned memory today")

    monkeypatch.setattr(pinned, "_alloc_pinned", refuse)
    with pytest.warns(RuntimeWarning, match="no pinned memory today"):
        pool = PinnedPool(buffers=2, buffer_bytes=1 << 14)
    S = random_csr(rng, 2000, 300, 5)
    with pool:
        A = upload_csr(S, pool=pool, chunk_bytes=5000)
    assert gpu_csr_equal(A, S)


@pytest.mark.gpu
def test_gpu_pinned_empty_is_pinned(rng):
    from sparsegpu.transfer import is_pinned

    a = pinned_empty(int(rng.integers(1, 1000)), np.float32)
    assert is_pinned(a)
