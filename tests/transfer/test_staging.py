"""sparsegpu.transfer.staging: chunk planning, and the stager giving everything back after an
exception (GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparsegpu import transfer
from sparsegpu.transfer import PinnedPool, pack_copy, plan_chunks, staging, upload_csr
from tests.transfer.helpers import random_csr


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


def test_pack_copy_copies_every_byte(rng):
    source = rng.standard_normal(int(rng.integers(1, 5000)))
    destination = np.full_like(source, np.nan)
    pack_copy(destination, source)
    assert np.array_equal(destination, source)


def test_default_pack_threads_in_range():
    assert 1 <= transfer.default_pack_threads() <= 16


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("pack", ["threads", "register"])
@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_upload_gpu_no_leak_on_exception(rng, monkeypatch, error, pack):
    S = random_csr(rng, 40_000, 300, 8)
    calls = {"n": 0}
    original = staging.Stager._pack_into

    def failing(self, buffer, piece, meanwhile):
        calls["n"] += 1
        if calls["n"] == (4 if pack == "threads" else 2):
            raise error("injected")
        return original(self, buffer, piece, meanwhile)

    monkeypatch.setattr(staging.Stager, "_pack_into", failing)
    pool = PinnedPool(buffers=3, buffer_bytes=1 << 12)
    with pytest.raises(error, match="injected"):
        # register: only the partial pages at the arrays' ends are packed, so fail early
        upload_csr(S, pool=pool, chunk_bytes=1 << 12, pack=pack)
    assert pool.available == 3
    assert not any(transfer.is_pinned(a) for a in (S.data, S.indices, S.indptr))
    pool.close()  # raises if a buffer were still lent out
