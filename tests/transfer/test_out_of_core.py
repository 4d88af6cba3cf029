"""sparsegpu.transfer.out_of_core: row-block planning and OutOfCoreCSR on the CPU backend
and on the GPU."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import transfer
from sparsegpu.transfer import OutOfCoreCSR, block_bytes, plan_row_blocks, upload_csr
from sparsegpu.transfer.out_of_core import is_memory_mapped
from tests.conftest import poisoned
from tests.transfer.helpers import budget_for, nonzero_x, random_csr

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


# --------------------------------------------------------------------------- CPU


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


@pytest.mark.parametrize("option, value, error, words", [
    ("chunk_rows", 1.5, TypeError, "chunk_rows must be an integer"),
    ("chunk_rows", 0, ValueError, "chunk_rows must be positive"),
    ("streams", "2", TypeError, "streams must be an integer"),
    ("pack_threads", -1, ValueError, "pack_threads must be positive"),
    ("device_budget_bytes", 1e6, TypeError, "device_budget_bytes must be an integer"),
    ("check", "no", TypeError, "check must be True or False"),
    ("pin", "yes", TypeError, "pin must be True or False"),
])
def test_out_of_core_option_checks(option, value, error, words):
    with pytest.raises(error, match=words):
        OutOfCoreCSR(sp.eye(4, format="csr"), backend="cpu", **{option: value})


def test_out_of_core_spmv_scalars_and_vectors(rng):
    S = random_csr(rng, 30, 30, 3)
    A = OutOfCoreCSR(S, device_budget_bytes=budget_for(S, 3), backend="cpu")
    x = nonzero_x(rng, 30)
    for bad in (None, "2", [1.0]):
        with pytest.raises(TypeError, match="alpha must be a number"):
            A.spmv(x, alpha=bad)
    with pytest.raises(TypeError, match="beta must be a number"):
        A.spmv(x, np.zeros(30), beta=None)
    with pytest.raises(TypeError, match="complex"):
        A.spmv(x, alpha=1j)
    with pytest.raises(TypeError, match="progress must be True or False"):
        A.spmv(x, progress=1)
    with pytest.raises(TypeError, match="report must be True or False"):
        A.spmv(x, report="yes")
    frozen = np.zeros(30)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        A.spmv(x, frozen)
    with pytest.raises(ValueError, match="must not overlap x"):
        A.spmv(x, x)
    with pytest.raises(TypeError, match="dtype float32"):
        A.spmv(x, np.zeros(30, np.float32))
    with pytest.raises(TypeError, match="cannot be cast safely"):
        A.spmv(x.astype(np.complex128))
    assert np.allclose(A.spmv(x, alpha=np.array(2.0)), 2 * (S @ x))


def test_out_of_core_converted_input_and_int64(rng):
    S = random_csr(rng, 60, 20, 3)
    x = nonzero_x(rng, 20)
    wide = sp.csr_array((S.data, S.indices.astype(np.int64), S.indptr.astype(np.int64)), shape=S.shape)
    for given in (S.tocoo(), S.tocsc(), wide):
        A = OutOfCoreCSR(given, device_budget_bytes=budget_for(S, 4), backend="cpu")
        assert np.allclose(A @ x, S @ x)


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
    assert all(map(is_memory_mapped, (M.data, M.indices, M.indptr)))
    assert not any(map(is_memory_mapped, (S.data, S.indices, S.indptr)))


@pytest.mark.gpu
def test_out_of_core_gpu_pins_ordinary_arrays_in_place(rng, tmp_path):
    import cupy

    S = random_csr(rng, 3000, 600, 8)
    x = nonzero_x(rng, 600)
    expected = sparsegpu.CSR.from_scipy(S, backend="gpu") @ cupy.asarray(x)
    A = OutOfCoreCSR(S, device_budget_bytes=budget_for(S, 4), backend="gpu")
    assert A._pinned == [True, True, True] and A._S.data is S.data  # page-locked in place, not copied
    assert cupy.array_equal(A @ cupy.asarray(x), expected)
    assert OutOfCoreCSR(S.copy(), backend="gpu", pin=False)._pinned == [False, False, False]
    np.save(tmp_path / "data.npy", S.data)
    mapped = sp.csr_array((np.load(tmp_path / "data.npy", mmap_mode="r"), S.indices.copy(), S.indptr.copy()),
                          shape=S.shape, copy=False)
    assert OutOfCoreCSR(mapped, backend="gpu")._pinned == [False, True, True]  # a memory map stays on disk


# --------------------------------------------------------------------------- GPU


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
    assert A.last_report.transferred and "GB/s" in repr(A.last_report)


@pytest.mark.gpu
def test_out_of_core_gpu_progress_quiet_warnings(rng):
    S = random_csr(rng, 500, 100, 3)
    A = OutOfCoreCSR(S, device_budget_bytes=budget_for(S, 3))
    x = nonzero_x(rng, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.allclose(A.spmv(x, progress=True), S @ x)
        assert np.allclose(upload_csr(S, chunk_bytes=512, progress=True) @ x, S @ x)


@pytest.mark.gpu
def test_out_of_core_gpu_vector_checks(rng):
    import cupy

    S = random_csr(rng, 200, 200, 3)
    A = OutOfCoreCSR(S, device_budget_bytes=budget_for(S, 3))
    x = cupy.asarray(nonzero_x(rng, 200))
    with pytest.raises(ValueError, match="must not overlap x"):
        A.spmv(x, x)
    with pytest.raises(TypeError, match="alpha must be a number"):
        A.spmv(x, alpha="2")
    with pytest.raises(TypeError, match="NumPy array but x is not"):
        A.spmv(x, np.zeros(200))


@pytest.mark.gpu
def test_out_of_core_gpu_too_large_names_device_memory(rng, monkeypatch):
    from sparsegpu import _validate
    from sparsegpu.bench.transfer import build_matrix

    S = build_matrix(800_000, 10, seed=int(rng.integers(1 << 30)))
    monkeypatch.setattr(_validate, "available_bytes", lambda backend: 65 << 20)
    with pytest.raises(ValueError, match="blocks in flight .* free device memory"):
        OutOfCoreCSR(S, device_budget_bytes=1 << 30)
