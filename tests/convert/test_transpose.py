"""CSR <-> CSC by kernels/transpose.cu (sparsegpu.convert.transpose): each kernel against its NumPy
reference, and the whole transpose bitwise against swap_major's NumPy result and SciPy, on every
backend (GPU cases marked ``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu import convert, datasets, primitives
from sparsegpu._kernels import kernel_dir
from sparsegpu.convert import transpose
from sparsegpu.reference import transpose as reference
from tests.conftest import REAL_MATRICES, to_numpy, xp_for

INDEX_DTYPES = [np.int32, np.int64]
VALUE_DTYPES = [np.float32, np.float64, np.complex128, np.int64]
GPU_ONLY = pytest.mark.gpu
REAL = [n for n in ("arrow", "lp_ship04l", "young1c", "add32", "email-Enron", "bcsstk16") if n in REAL_MATRICES]
#: (rows, columns, entries): empty shapes, one row, one column, and sizes past a tile (2048
#: entries) with one, two and three digit passes.
SHAPES = [(0, 7, 0), (7, 0, 0), (0, 0, 0), (1, 1, 1), (1, 300, 120), (300, 1, 150), (40, 256, 900),
          (2000, 257, 9000), (3000, 20_000, 30_000), (50, 70_000, 6000), (2, 3, 0)]


def random_values(rng, size, dtype):
    values = rng.standard_normal(size)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.standard_normal(size)
    return (values * 100).astype(dtype)


def random_csr(rng, m, n, nnz, index_dtype=np.int32, value_dtype=np.float64, canonical=True):
    """A random m x n CSR of up to ``nnz`` entries, with empty rows and columns; ``canonical=False``:
    columns shuffled within rows and some (row, column) pairs repeated."""
    if m == 0 or n == 0:
        nnz = 0
    rows, cols = rng.integers(0, max(m, 1), size=nnz), rng.integers(0, max(n, 1), size=nnz)
    if nnz and m > 3:
        keep = rows % 4 != 1  # a quarter of the rows empty
        rows, cols = rows[keep], cols[keep]
    S = sp.csr_array((random_values(rng, rows.size, value_dtype), (rows, cols)), shape=(m, n))
    S.sum_duplicates()
    if not canonical and S.nnz:
        repeat = rng.random(S.nnz) < 0.2  # repeat some entries with other values
        rows = np.repeat(np.arange(m), np.diff(S.indptr))
        rows, cols = np.concatenate([rows, rows[repeat]]), np.concatenate([S.indices, S.indices[repeat]])
        order = np.lexsort((rng.random(rows.size), rows))  # by row, shuffled within rows
        rows, cols = rows[order], cols[order]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))])
        data = random_values(rng, rows.size, value_dtype)
        S = sp.csr_array((data, cols, indptr), shape=(m, n))
    S.indptr, S.indices = S.indptr.astype(index_dtype), S.indices.astype(index_dtype)
    return S


def stable_transpose(S):
    """The transpose's arrays with each new row in storage order (old row, then position):
    what the kernels give, duplicates included."""
    m, n = S.shape
    rows = np.repeat(np.arange(m), np.diff(S.indptr)).astype(S.indptr.dtype)
    order = np.argsort(S.indices, kind="stable")
    indptr = np.searchsorted(S.indices[order], np.arange(n + 1)).astype(S.indptr.dtype)
    return indptr, rows[order], S.data[order]


def scipy_transpose(S):
    T = sp.csr_array(S.T)  # SciPy's transpose of a CSR is the CSC of A^T
    T = T.tocsr()
    T.sort_indices()
    return T


def assert_bitwise(got, want):
    for g, w, name in zip(got, want, ("indptr", "indices", "data")):
        g = to_numpy(g)
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype}, expected {w.dtype}"
        assert g.shape == w.shape and g.tobytes() == w.tobytes(), f"{name} differs"


def on(backend, *arrays):
    xp = xp_for(backend)
    return [xp.asarray(a) for a in arrays]


def poison_pool(nbytes: int) -> None:
    """Fill freed device memory with a pattern, so buffers allocated next start as garbage."""
    import cupy

    blocks = [cupy.full(max(nbytes // 8, 1) * (k + 1), -0x5A5A5A5A5A5A5A5A, dtype=np.int64) for k in range(4)]
    cupy.cuda.Device().synchronize()
    del blocks


BACKENDS = ["cpu", pytest.param("gpu", marks=GPU_ONLY)]


# ---------------------------------------------------------------- the references


def test_radix_shifts_cover_every_minor_index():
    assert reference.radix_shifts(0) == [0] and reference.radix_shifts(2) == [0]
    assert reference.radix_shifts(1 << 16) == [0, 8] and reference.radix_shifts((1 << 16) + 1) == [0, 8, 16]
    assert reference.radix_shifts(2**31 - 1) == [0, 8, 16, 24]
    assert transpose.TRANSPOSE_TILE == reference.TILE == 8 * transpose.TRANSPOSE_BLOCK


def test_kernel_constants_match_the_source():
    text = (kernel_dir() / "transpose.cu").read_text()
    assert f"TRANSPOSE_BLOCK = {transpose.TRANSPOSE_BLOCK};" in text
    assert f"TRANSPOSE_DIGIT_BITS = {reference.DIGIT_BITS};" in text
    assert "TRANSPOSE_ROUNDS = 8;" in text and "TRANSPOSE_TILE = TRANSPOSE_BLOCK * TRANSPOSE_ROUNDS;" in text


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_reference_passes_sort_stably_by_key(rng, index_dtype):
    n, n_minor = 3 * reference.TILE + 77, 70_000
    keys = rng.integers(0, n_minor, size=n).astype(index_dtype)
    keys[rng.random(n) < 0.3] = 12345  # many equal keys: stability shows
    data = random_values(rng, n, np.float64)
    row_of = rng.integers(0, 10**6, size=n).astype(index_dtype)
    shifts, n_tiles = reference.radix_shifts(n_minor), reference.tiles_for(n)
    assert len(shifts) == 3
    current, pos = keys, None
    for p, shift in enumerate(shifts):
        counts = np.full(reference.DIGITS * n_tiles, -1, dtype=index_dtype)
        reference.transpose_count(current, shift, n_tiles, counts)
        assert counts.sum() == n and (counts >= 0).all()
        starts = primitives.exclusive_scan(counts)
        keys_out = np.full(n, -1, dtype=index_dtype)
        if p + 1 < len(shifts):
            pos_out = np.full(n, -1, dtype=index_dtype)
            reference.transpose_move(current, pos, shift, n_tiles, starts, keys_out, pos_out)
            # Sorted so far by the key's bits below shift + DIGIT_BITS, ties in position order.
            low = keys_out.astype(np.int64) & ((1 << (shift + reference.DIGIT_BITS)) - 1)
            assert np.array_equal(np.lexsort((pos_out, low)), np.arange(n))
            current, pos = keys_out, pos_out
        else:
            indices_out = np.full(n, -1, dtype=index_dtype)
            data_out = np.full(n, np.nan)
            reference.transpose_place(current, pos, shift, n_tiles, starts, row_of, data, keys_out, indices_out,
                                      data_out)
    order = np.argsort(keys, kind="stable")
    assert np.array_equal(keys_out, keys[order])
    assert np.array_equal(indices_out, row_of[order]) and data_out.tobytes() == data[order].tobytes()


# ---------------------------------------------------------------- the whole transpose


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("value_dtype", VALUE_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_transpose_is_swap_major_bitwise_and_scipy(rng, backend, index_dtype, value_dtype, shape):
    m, n, nnz = shape
    S = random_csr(rng, m, n, nnz, index_dtype, value_dtype)
    want = convert.swap_major(S.indptr, S.indices, S.data, n, np)
    if backend == "gpu":
        poison_pool(16 * max(S.nnz, 1) + 8 * (n + 1))
    got = transpose.transpose_compressed(*on(backend, S.indptr, S.indices, S.data), n)
    assert_bitwise(got, want)
    T = scipy_transpose(S)
    assert np.array_equal(to_numpy(got[0]), T.indptr) and np.array_equal(to_numpy(got[1]), T.indices)
    assert to_numpy(got[2]).tobytes() == T.data.astype(value_dtype).tobytes()
    assert convert.transposable_on_device(S.indptr, S.indices, S.data, n)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_repeated_and_unsorted_entries_keep_storage_order(rng, backend, index_dtype):
    S = random_csr(rng, 900, 5000, 20_000, index_dtype, np.float64, canonical=False)
    got = transpose.transpose_compressed(*on(backend, S.indptr, S.indices, S.data), 5000)
    assert_bitwise(got, stable_transpose(S))
    summed = sp.csr_array((to_numpy(got[2]), to_numpy(got[1]), to_numpy(got[0])), shape=(5000, 900))
    np.testing.assert_allclose(summed.toarray(), S.T.toarray(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", REAL)
def test_real_matrices_transpose_like_scipy(backend, name):
    S = datasets.load_matrix(name)
    S.sort_indices()
    for index_dtype in INDEX_DTYPES:
        S.indptr, S.indices = S.indptr.astype(index_dtype), S.indices.astype(index_dtype)
        want = convert.swap_major(S.indptr, S.indices, S.data, S.shape[1], np)
        got = transpose.transpose_compressed(*on(backend, S.indptr, S.indices, S.data), S.shape[1])
        assert_bitwise(got, want)
        T = scipy_transpose(S)
        assert np.array_equal(to_numpy(got[0]), T.indptr) and np.array_equal(to_numpy(got[1]), T.indices)
        back = transpose.transpose_compressed(*got, S.shape[0])
        assert_bitwise(back, (S.indptr, S.indices, S.data))


def test_arrays_the_kernels_do_not_take_stay_on_the_sort():
    indptr, indices = np.array([0, 1, 2]), np.array([1, 0])
    assert not convert.transposable_on_device(indptr, indices.astype(np.int32), np.ones(2), 2)  # mixed dtypes
    assert not convert.transposable_on_device(indptr, indices, np.ones(2, dtype=bool), 2)  # bool values
    assert not convert.transposable_on_device(indptr.astype(np.int16), indices.astype(np.int16), np.ones(2), 2)
    assert not convert.transposable_on_device(indptr.astype(np.int32), indices.astype(np.int32), np.ones(2), 2**31)
    assert convert.transposable_on_device(indptr, indices, np.ones(2, dtype=np.complex64), 2)
    with pytest.raises(TypeError, match="indices int32"):
        convert.transpose_compressed(indptr, indices.astype(np.int32), np.ones(2), 2)
    with pytest.raises(ValueError, match="data has 3 entries"):
        convert.transpose_compressed(indptr, indices, np.ones(3), 2)


# ---------------------------------------------------------------- the kernels on the GPU


@GPU_ONLY
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("value_dtype", [np.float32, np.complex128])
def test_each_kernel_matches_its_reference(rng, index_dtype, value_dtype):
    import cupy

    n, n_minor = 5 * reference.TILE + 300, 100_000
    keys = rng.integers(0, n_minor, size=n).astype(index_dtype)
    keys[rng.random(n) < 0.2] = 777
    pos = rng.permutation(n).astype(index_dtype)
    row_of = rng.integers(0, 10**6, size=n).astype(index_dtype)
    data = random_values(rng, n, value_dtype)
    n_tiles = reference.tiles_for(n)
    for shift in (0, 8, 16):
        counts = cupy.full(reference.DIGITS * n_tiles, -3, dtype=index_dtype)
        transpose._count(cupy.asarray(keys), shift, n_tiles, counts)
        want = reference.transpose_count(keys, shift, n_tiles, np.empty(reference.DIGITS * n_tiles, index_dtype))
        assert np.array_equal(counts.get(), want)
        starts = primitives.exclusive_scan(want)
        for implicit in (True, False):
            given = None if implicit else pos
            out = [cupy.full(n, -9, dtype=index_dtype) for _ in range(2)]
            transpose._move(cupy.asarray(keys), None if implicit else cupy.asarray(pos), shift, n_tiles,
                            cupy.asarray(starts), *out)
            ref = reference.transpose_move(keys, given, shift, n_tiles, starts, np.empty(n, index_dtype),
                                           np.empty(n, index_dtype))
            assert np.array_equal(out[0].get(), ref[0]) and np.array_equal(out[1].get(), ref[1])
            placed = [cupy.full(n, -9, dtype=index_dtype), cupy.full(n, -9, dtype=index_dtype),
                      cupy.full(n, np.nan, dtype=value_dtype)]
            transpose._place(cupy.asarray(keys), None if implicit else cupy.asarray(pos), shift, n_tiles,
                             cupy.asarray(starts), cupy.asarray(row_of), cupy.asarray(data), *placed)
            ref = reference.transpose_place(keys, given, shift, n_tiles, starts, row_of, data, np.empty(n, index_dtype),
                                            np.empty(n, index_dtype), np.empty(n, value_dtype))
            for g, w in zip(placed, ref):
                assert g.get().tobytes() == w.tobytes()


@GPU_ONLY
def test_device_swap_major_takes_the_kernels_and_repeats_its_bits(rng):
    import cupy

    S = random_csr(rng, 4000, 30_000, 60_000, np.int32, np.float64)
    arrays = on("gpu", S.indptr, S.indices, S.data)
    first = convert.swap_major(*arrays, 30_000, cupy)
    again = convert.swap_major(*arrays, 30_000, cupy)
    assert_bitwise(first, convert.swap_major(S.indptr, S.indices, S.data, 30_000, np))
    assert all(a.get().tobytes() == b.get().tobytes() for a, b in zip(first, again))
    # Values the kernels are not built for take CuPy's sort, with the same result.
    flags = S.data > 0
    p, i, d = convert.swap_major(arrays[0], arrays[1], cupy.asarray(flags), 30_000, cupy)
    T = scipy_transpose(sp.csr_array((flags, S.indices, S.indptr), shape=S.shape))
    assert np.array_equal(p.get(), T.indptr) and np.array_equal(i.get(), T.indices)
    assert np.array_equal(d.get(), T.data)


@GPU_ONLY
def test_csc_product_and_transposes_agree_with_scipy(rng):
    import cupy

    import sparsegpu

    S = random_csr(rng, 3000, 2500, 40_000, np.int32, np.float64)
    x = rng.standard_normal(2500)
    A = sparsegpu.from_scipy(S.tocsc(), format="csc", backend="gpu")
    np.testing.assert_allclose((A @ cupy.asarray(x)).get(), S @ x, rtol=1e-12, atol=1e-12)
    B = A.to_csr()
    assert_bitwise((B.indptr, B.indices, B.data), (S.indptr, S.indices, S.data))


# ---------------------------------------------------------------- line lengths (kernels/pointers.cu)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES + [np.uint32])
@pytest.mark.parametrize("m", [0, 1, 257, 70_000])
def test_line_lengths_are_the_pointer_differences(rng, backend, index_dtype, m):
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 9, size=m) * (rng.random(m) < 0.7))]).astype(index_dtype)
    (device,) = on(backend, indptr)
    if backend == "gpu":
        poison_pool(8 * (m + 1))
    got = primitives.line_lengths(device, xp_for(backend))
    want = indptr[1:] - indptr[:-1]
    assert to_numpy(got).dtype == want.dtype and np.array_equal(to_numpy(got), want)
    assert to_numpy(convert.row_lengths(device)).tobytes() == want.tobytes()
