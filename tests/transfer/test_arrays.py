"""sparsegpu.transfer.arrays: upload of plain arrays, its checks, and pinned sources (GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu import transfer
from sparsegpu.transfer import upload, upload_csr


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


@pytest.mark.parametrize("option, value, error, words", [
    ("streams", 2.0, TypeError, "streams must be an integer"),
    ("streams", 0, ValueError, "streams must be positive"),
    ("pack_threads", "4", TypeError, "pack_threads must be an integer"),
    ("pack_threads", 0, ValueError, "pack_threads must be positive"),
    ("progress", "yes", TypeError, "progress must be True or False"),
    ("report", None, TypeError, "report must be True or False"),
    ("dtypes", "float32", TypeError, "dtypes must be a sequence"),
    ("dtypes", ["not a dtype"], TypeError, r"dtypes\[0\]"),
    ("dtypes", [np.float32, np.float32], ValueError, "dtypes has 2 entries for 1 arrays"),
])
def test_upload_option_checks(option, value, error, words):
    with pytest.raises(error, match=words):
        upload([np.ones(3)], backend="cpu", **{option: value})


def test_upload_cpu_casts(rng):
    a, b = rng.standard_normal(10), rng.integers(0, 9, 7)
    out = upload([a, b], dtypes=[np.float32, np.int64], chunk_bytes=8, backend="cpu")
    assert out[0].dtype == np.float32 and np.array_equal(out[1], b)


def test_upload_cpu_returns_copies(rng):
    a = rng.standard_normal(int(rng.integers(1, 100)))
    (out,) = upload(a, backend="cpu")
    assert np.array_equal(out, a) and not np.shares_memory(out, a)


def test_upload_too_large_names_the_memory():
    huge = np.broadcast_to(np.zeros(1), (1 << 40,))  # a view: no memory behind it
    with pytest.raises(ValueError, match="contiguous copy of item 0 needs .* available host memory"):
        upload([huge], backend="cpu")
    lazy = np.zeros(1 << 20, np.uint8)
    with pytest.raises(ValueError, match="upload needs .* available host memory"):
        upload([lazy], dtypes=[np.dtype((np.void, 1 << 30))], backend="cpu")


# --------------------------------------------------------------------------- GPU


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
def test_upload_gpu_too_large_names_device_memory(rng, monkeypatch):
    from sparsegpu import _validate

    monkeypatch.setattr(_validate, "available_bytes", lambda backend: 65 << 20)
    with pytest.raises(ValueError, match="upload needs .* free device memory"):
        upload([rng.standard_normal(10_000_000)], backend="gpu")
