"""sparsegpu.transfer.csr_upload: upload_csr on the CPU backend (canonical, owning, checked
before SciPy reads anything) and on the GPU (streamed, checked on the device)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import transfer
from sparsegpu.transfer import PinnedPool, TransferReport, upload_csr
from tests.conftest import to_numpy
from tests.transfer.helpers import (
    CORRUPTIONS,
    chunk_bytes_for,
    corrupted_call,
    gpu_csr_equal,
    messy_csr,
    nonzero_x,
    random_csr,
    run_isolated,
)


def test_upload_csr_cpu_canonicalises(rng):
    S = random_csr(rng, 60, 30, 4)
    messy = messy_csr(rng, S, 5)
    A = upload_csr(messy, backend="cpu")
    ref = sparsegpu.CSR.from_scipy(messy, backend="cpu")
    assert np.array_equal(A.indptr, ref.indptr) and np.array_equal(A.indices, ref.indices)
    assert np.allclose(A.data, ref.data)
    A2, report = upload_csr(S, backend="cpu", report=True, chunk_bytes=64)
    assert isinstance(report, TransferReport) and report.nbytes == A2.nbytes
    assert "GB" in repr(report) and "nothing was transferred" in repr(report)


@pytest.mark.parametrize("bad", [np.ones((3, 3)), [[1, 2]], "matrix"])
def test_upload_csr_rejects_non_scipy(bad):
    with pytest.raises(TypeError, match="scipy.sparse"):
        upload_csr(bad, backend="cpu")


# --------------------------------------------------------------------------- hardening (CPU)


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupted_input_raises_and_never_crashes(case):
    """Each corruption raises ValueError naming the problem from upload_csr(backend="cpu") and
    OutOfCoreCSR, in a subprocess (SciPy's routines would read such arrays out of bounds)."""
    build, words = CORRUPTIONS[case]
    code = (corrupted_call(build, "transfer.upload_csr(S, backend='cpu')")
            + corrupted_call(build, "transfer.OutOfCoreCSR(S, backend='cpu')"))
    done = run_isolated(code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("ValueError:") and words in line for line in lines), done.stdout


def test_csr_ends_are_checked_before_anything(rng):
    S = random_csr(rng, 20, 10, 2)
    bad = S.copy()
    bad.indptr[0] = 1
    with pytest.raises(ValueError, match=r"indptr\[0\] must be 0"):
        upload_csr(bad, backend="cpu", check=False)
    short = sp.csr_array((S.data, S.indices, S.indptr), shape=S.shape)
    short.indptr = short.indptr[:-1]
    with pytest.raises(ValueError, match="indptr has length 20, expected 21"):
        upload_csr(short, backend="cpu")


def test_cpu_result_never_aliases_the_input(rng):
    S = random_csr(rng, 40, 25, 3)
    inputs = [S, S.tocoo(), sp.csr_array((S.data, S.indices.astype(np.int64), S.indptr.astype(np.int64)),
                                         shape=S.shape)]
    for given in inputs:
        A = upload_csr(given, backend="cpu")
        for mine in (A.data, A.indices, A.indptr):
            for theirs in (S.data, S.indices, S.indptr, given.data):
                assert not np.shares_memory(mine, theirs)
    before = A.data.copy()
    S.data[:] = np.nan  # changing the caller's matrix afterwards leaves the result alone
    assert np.array_equal(A.data, before)


def test_dtype_and_casting(rng):
    S = random_csr(rng, 30, 20, 3)
    Z = S.astype(np.complex128)
    Z.data += 1j * rng.standard_normal(Z.nnz)
    with pytest.raises(TypeError, match="cannot cast values from complex128 to float64"):
        upload_csr(Z, dtype=np.float64, backend="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        real = upload_csr(Z, dtype=np.float64, casting="unsafe", backend="cpu")
    assert real.dtype == np.float64 and np.array_equal(real.data, Z.data.real)
    assert real.data.flags.c_contiguous and not np.shares_memory(real.data, Z.data)
    Zc = sp.csr_array((Z.data.copy(), Z.indices, Z.indptr), shape=Z.shape)  # owned only by the test
    assert upload_csr(Zc, dtype=np.float32, casting="unsafe", backend="cpu").data.flags.c_contiguous
    with pytest.raises(TypeError, match="float32, float64, complex64 or complex128"):
        upload_csr(S, dtype=np.int32, backend="cpu")
    with pytest.raises(ValueError, match="casting must be one of"):
        upload_csr(S, dtype=np.float32, casting="sometimes", backend="cpu")
    assert upload_csr(S, dtype=np.float32, backend="cpu").dtype == np.float32


@pytest.mark.parametrize("option, value, error, words", [
    ("streams", 1.5, TypeError, "streams must be an integer"),
    ("streams", 0, ValueError, "streams must be positive"),
    ("chunk_bytes", "big", TypeError, "chunk_bytes must be an integer"),
    ("pack_threads", 0, ValueError, "pack_threads must be positive"),
    ("progress", 1, TypeError, "progress must be True or False"),
    ("report", "no", TypeError, "report must be True or False"),
    ("check", None, TypeError, "check must be True or False"),
    ("pack", 3, TypeError, "pack must be"),
    ("casting", "sometimes", ValueError, "casting must be one of"),
])
def test_option_checks(option, value, error, words):
    with pytest.raises(error, match=words):
        upload_csr(sp.eye(4, format="csr"), backend="cpu", **{option: value})


def test_sizes_that_cannot_fit_name_the_memory():
    with pytest.raises(ValueError, match="COO matrix to CSR needs .* available host memory"):
        upload_csr(sp.coo_array((1 << 40, 1 << 40)), backend="cpu")


def test_check_false_trusts_a_valid_csr(rng):
    S = random_csr(rng, 50, 30, 4)
    messy = messy_csr(rng, S, 3)
    for given in (S, messy):
        A = upload_csr(given, backend="cpu", check=False)
        B = upload_csr(given, backend="cpu")
        assert all(np.array_equal(a, b) for a, b in ((A.indptr, B.indptr), (A.indices, B.indices), (A.data, B.data)))


# --------------------------------------------------------------------------- GPU


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
@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_gpu_corrupted_input_raises_and_never_crashes(case):
    """The same corruptions on the device path (checked on the device as chunks arrive, or on
    the host before conversion), in a subprocess."""
    build, words = CORRUPTIONS[case]
    code = (corrupted_call(build, "transfer.upload_csr(S, chunk_bytes=8, backend='gpu')")
            + corrupted_call(build, "transfer.OutOfCoreCSR(S, device_budget_bytes=1 << 20, backend='gpu')"))
    done = run_isolated(code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("ValueError:") for line in lines), done.stdout
    assert words in lines[1], done.stdout  # the host checks name the place; the device checks the kind
    assert any(kind in lines[0] for kind in ("not monotone", "negative", "out of range")), done.stdout


@pytest.mark.gpu
def test_gpu_check_false_matches_check_true(rng):
    S = random_csr(rng, 5000, 400, 6)
    messy = messy_csr(rng, S, 20)
    for given in (S, messy):
        assert gpu_csr_equal(upload_csr(given, chunk_bytes=4096, check=False), given)


@pytest.mark.gpu
def test_gpu_dtype_casting(rng):
    S = random_csr(rng, 300, 200, 4)
    Z = S.astype(np.complex128)
    Z.data += 1j
    with pytest.raises(TypeError, match="cannot cast values"):
        upload_csr(Z, dtype=np.float64)
    real = upload_csr(Z, dtype=np.float64, casting="unsafe", chunk_bytes=512)
    assert np.array_equal(to_numpy(real.data), S.data)


@pytest.mark.gpu
def test_gpu_upload_csr_too_large_names_device_memory(rng, monkeypatch):
    from sparsegpu import _validate
    from sparsegpu.bench.transfer import build_matrix

    S = build_matrix(800_000, 10, seed=int(rng.integers(1 << 30)))  # about 100 MB on the device
    monkeypatch.setattr(_validate, "available_bytes", lambda backend: 65 << 20)
    with pytest.raises(ValueError, match="upload_csr of a 800000x800000 matrix .* free device memory"):
        upload_csr(S)
