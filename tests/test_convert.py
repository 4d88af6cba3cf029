"""sparsegpu.convert: pointer expansion and compression, CSR <-> CSC, COO <-> CSR, row-length
statistics, against SciPy and NumPy on every backend (GPU cases marked ``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu import convert
from tests.conftest import to_numpy, xp_for

INDEX_DTYPES = [np.int32, np.int64]
VALUE_DTYPES = [np.float32, np.float64, np.complex128, np.int64]


def skewed_csr(rng, m, n, index_dtype=np.int32):
    """A random CSR matrix with empty rows, short rows and a few long ones."""
    lengths = rng.integers(0, 6, size=m)
    lengths[rng.random(m) < 0.3] = 0
    if m:
        lengths[rng.integers(0, m, size=min(3, m))] = min(n, 3000)
    rows = np.repeat(np.arange(m), lengths)
    cols = np.concatenate([rng.choice(n, size=k, replace=False) for k in lengths]) if m else np.empty(0, int)
    S = sp.csr_array((rng.standard_normal(rows.size), (rows, cols)), shape=(m, n))
    S.sum_duplicates()
    S.indptr, S.indices = S.indptr.astype(index_dtype), S.indices.astype(index_dtype)
    return S


def on(backend, *arrays):
    xp = xp_for(backend)
    return [xp.asarray(a) for a in arrays]


def gpu_param(backend):
    return pytest.param(backend, marks=pytest.mark.gpu) if backend == "gpu" else backend


ALL_BACKENDS = [gpu_param(b) for b in ("cpu", "gpu")]


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("m", [0, 1, 33, 5000])
def test_expand_and_compress_round_trip(rng, backend, index_dtype, m):
    S = skewed_csr(rng, m, 4000, index_dtype)
    (indptr,) = on(backend, S.indptr)
    xp = xp_for(backend)
    rows = convert.expand_pointers(indptr, xp)
    want = np.repeat(np.arange(m), np.diff(S.indptr))
    assert rows.dtype == index_dtype
    np.testing.assert_array_equal(to_numpy(rows), want)
    back = convert.compress(rows, m, index_dtype, xp)
    assert back.dtype == index_dtype
    np.testing.assert_array_equal(to_numpy(back), S.indptr)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_swap_major_is_the_transpose(rng, backend, index_dtype):
    S = skewed_csr(rng, 700, 900, index_dtype)
    indptr, indices, data = on(backend, S.indptr, S.indices, S.data)
    p, i, d = convert.swap_major(indptr, indices, data, 900, xp_for(backend))
    T = sp.csr_array(S.T)
    T.sort_indices()
    np.testing.assert_array_equal(to_numpy(p), T.indptr)
    np.testing.assert_array_equal(to_numpy(i), T.indices)
    np.testing.assert_array_equal(to_numpy(d), T.data)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("value_dtype", VALUE_DTYPES)
@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_coo_to_csr_matches_scipy(rng, backend, value_dtype, order):
    m, n, nnz = 300, 200, 4000
    rows = rng.integers(0, m, size=nnz)
    cols = rng.integers(0, n, size=nnz)  # many duplicates
    data = rng.standard_normal(nnz)
    if np.dtype(value_dtype).kind == "c":
        data = data + 1j * rng.standard_normal(nnz)
    data = (data * 10).astype(value_dtype)
    if order == "sorted":
        key = np.unique(rows * n + cols)  # strictly sorted: the no-sort path
        rows, cols, data = key // n, key % n, data[: key.size]
    rd, cd, dd = on(backend, rows, cols, data)
    indptr, indices, values = convert.coo_to_csr(rd, cd, dd, (m, n))
    S = sp.csr_array((data, (rows, cols)), shape=(m, n))
    S.sum_duplicates()
    np.testing.assert_array_equal(to_numpy(indptr), S.indptr)
    np.testing.assert_array_equal(to_numpy(indices), S.indices)
    tol = 1e-5 if np.dtype(value_dtype) in (np.float32,) else 1e-12
    np.testing.assert_allclose(to_numpy(values), S.data, rtol=tol, atol=tol)
    assert values.dtype == value_dtype and indptr.dtype == np.int32
    again = convert.coo_to_csr(rd, cd, dd, (m, n))[2]
    assert to_numpy(again).tobytes() == to_numpy(values).tobytes(), "duplicates not summed reproducibly"


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_coo_to_csr_edge_cases(backend):
    empty = np.empty(0, dtype=np.int64)
    indptr, indices, data = convert.coo_to_csr(*on(backend, empty, empty, np.empty(0)), (3, 4))
    assert to_numpy(indptr).tolist() == [0, 0, 0, 0] and indices.size == 0 and data.size == 0
    same = np.zeros(1000, dtype=np.int32)  # one entry, repeated: all-equal keys
    indptr, indices, data = convert.coo_to_csr(*on(backend, same, same, np.ones(1000)), (2, 2), index_dtype=np.int64)
    assert to_numpy(indptr).tolist() == [0, 1, 1] and to_numpy(indices).tolist() == [0]
    assert to_numpy(data).tolist() == [1000.0] and indptr.dtype == np.int64



def test_coo_to_csr_keys_past_64_bits():
    # rows x columns > 2^63: a row-major key would overflow int64 (the CPU path sorts the pairs).
    wide = 2**62
    rows = np.array([3, 1, 2, 1, 3], dtype=np.int64)
    cols = np.array([wide - 1, 7, 0, 7, 3], dtype=np.int64)
    indptr, indices, data = convert.coo_to_csr(rows, cols, np.array([1.0, 2.0, 3.0, 4.0, 5.0]), (4, wide))
    assert indptr.tolist() == [0, 0, 1, 2, 4]
    assert indices.tolist() == [7, 0, 3, wide - 1] and data.tolist() == [6.0, 3.0, 5.0, 1.0]


def test_coo_to_csr_bad_input_raises():
    r = np.array([0, 1])
    with pytest.raises(ValueError, match="out of range"):
        convert.coo_to_csr(r, np.array([0, 5]), np.ones(2), (2, 5))
    with pytest.raises(ValueError, match="negative"):
        convert.coo_to_csr(np.array([0, -1]), r, np.ones(2), (2, 2))
    with pytest.raises(ValueError, match="length"):
        convert.coo_to_csr(r, np.array([0]), np.ones(2), (2, 2))
    with pytest.raises(ValueError, match="data has shape"):
        convert.coo_to_csr(r, r, np.ones(3), (2, 2))
    with pytest.raises(TypeError, match="integers"):
        convert.coo_to_csr(r.astype(float), r, np.ones(2), (2, 2))
    with pytest.raises(TypeError, match="dtype"):
        convert.coo_to_csr(r, r, np.ones(2, dtype=np.float16), (2, 2))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_csr_to_coo_and_back(rng, backend, index_dtype):
    S = skewed_csr(rng, 1000, 5000, index_dtype)
    indptr, indices, data = on(backend, S.indptr, S.indices, S.data)
    rows, cols, values = convert.csr_to_coo(indptr, indices, data)
    C = S.tocoo()
    np.testing.assert_array_equal(to_numpy(rows), C.row)
    np.testing.assert_array_equal(to_numpy(cols), C.col)
    back = convert.coo_to_csr(rows, cols, values, S.shape, index_dtype=index_dtype)
    for got, want in zip(back, (S.indptr, S.indices, S.data)):
        np.testing.assert_array_equal(to_numpy(got), want)


def test_csr_to_coo_bad_input_raises():
    with pytest.raises(ValueError, match="stored entries"):
        convert.csr_to_coo(np.array([0, 3]), np.array([0, 1]), np.ones(2))
    with pytest.raises(ValueError, match="1-D"):
        convert.csr_to_coo(np.zeros((2, 2), dtype=int), np.array([0]), np.ones(1))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("m", [0, 1, 31, 2000])
def test_row_length_stats_match_numpy(rng, backend, index_dtype, m):
    S = skewed_csr(rng, m, 4000, index_dtype)
    (indptr,) = on(backend, S.indptr)
    lengths = np.diff(S.indptr)
    np.testing.assert_array_equal(to_numpy(convert.row_lengths(indptr)), lengths)
    stats = convert.row_length_stats(indptr)
    assert stats.rows == m and stats.nnz == S.nnz
    assert all(type(v) in (int, float) for v in (stats.rows, stats.nnz, stats.mean, stats.std, stats.min, stats.max, stats.empty_rows))
    if m == 0:
        assert stats.mean == 0.0 and stats.max == 0
        return
    assert stats.min == lengths.min() and stats.max == lengths.max()
    assert stats.empty_rows == int((lengths == 0).sum())
    assert stats.mean == pytest.approx(lengths.mean()) and stats.std == pytest.approx(lengths.std())
    for q, value in stats.quantiles.items():
        assert value == pytest.approx(float(np.quantile(lengths, q)))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_row_length_stats_of_very_long_rows(backend):
    """Row lengths past the histogram limit: quantiles by sorting instead."""
    indptr = np.array([0, 3, 3, convert.HISTOGRAM_QUANTILE_LIMIT + 10], dtype=np.int64)
    stats = convert.row_length_stats(*on(backend, indptr))
    lengths = np.diff(indptr)
    assert stats.max == lengths.max() and stats.empty_rows == 1
    assert stats.quantiles[0.5] == pytest.approx(float(np.quantile(lengths, 0.5)))


# --------------------------------------------------------------------------- kernels/convert.cu and twins

from sparsegpu.reference import convert as twin  # noqa: E402

AWKWARD_NNZ = [0, 1, 31, 33, 2**20 + 7]
POISON = -7777  # integer outputs cannot hold NaN: a value no kernel writes


def random_coo(rng, m, n, nnz, index_dtype, *, long_row=False, duplicates=True, order="shuffled"):
    """Random COO coordinates (index_dtype), with empty rows, optionally one very long row, with or
    without duplicates, shuffled or strictly sorted."""
    rows = rng.integers(0, max(m // 2, 1), size=nnz) * 2 if m > 1 else np.zeros(nnz, int)  # odd rows empty
    cols = rng.integers(0, n, size=nnz)
    if long_row and nnz:
        rows[: nnz // 2] = m - 1
    if not duplicates or order == "sorted":
        key = np.unique(rows.astype(np.int64) * n + cols)
        rows, cols = key // n, key % n
    if order == "shuffled":
        perm = rng.permutation(rows.size)
        rows, cols = rows[perm], cols[perm]
    return rows.astype(index_dtype), cols.astype(index_dtype)


def scipy_csr(rows, cols, data, shape):
    S = sp.csr_array((data, (rows.astype(np.int64), cols.astype(np.int64))), shape=shape)
    S.sum_duplicates()
    return S


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("nnz", [0, 1, 31, 33, 5000])
@pytest.mark.parametrize("long_row", [False, True])
def test_row_bucket_pipeline_on_twins_matches_scipy(rng, index_dtype, nnz, long_row):
    """The GPU's unsorted COO -> CSR pipeline, run on the kernels' twins."""
    m, n = 301, 97
    rows, cols = random_coo(rng, m, n, nnz, index_dtype, long_row=long_row)
    if nnz == 0:
        return
    data = rng.standard_normal(rows.size)
    indptr, indices, values = convert._sort_by_rows(rows, cols, data, m)
    S = scipy_csr(rows, cols, data, (m, n))
    np.testing.assert_array_equal(indptr, S.indptr)
    np.testing.assert_array_equal(indices, S.indices)
    np.testing.assert_allclose(values, S.data, rtol=1e-12, atol=1e-12)
    want = convert.coo_to_csr(rows, cols, data, (m, n), index_dtype=index_dtype)[2]
    assert values.tobytes() == want.tobytes(), "duplicates not summed as the CPU path sums them"


def test_inspect_coo_twin_matches_numpy(rng):
    rows = rng.integers(-5, 1000, size=777)
    cols = rng.integers(-(2**40), 2**40, size=777)
    facts = convert.inspect_coo(rows, cols)
    unsorted = int(((rows[1:] < rows[:-1]) | ((rows[1:] == rows[:-1]) & (cols[1:] <= cols[:-1]))).sum())
    assert facts == convert.CooFacts(rows.min(), rows.max(), cols.min(), cols.max(), unsorted)
    assert convert.inspect_coo(rows[:0], cols[:0]).row_min is None


def test_twins_of_pointer_kernels(rng):
    lengths = rng.integers(0, 4, size=200)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    marks = np.full(int(indptr[-1]), -1, dtype=np.int32)
    twin.mark_row_starts(indptr, marks)
    np.testing.assert_array_equal(np.maximum.accumulate(marks), np.repeat(np.arange(200), lengths))
    rows = np.repeat(np.arange(200), lengths)
    np.testing.assert_array_equal(twin.compress_sorted(rows, np.empty(201, np.int64)), indptr)


def gpu_arrays(*arrays):
    import cupy

    return [cupy.asarray(a) for a in arrays]


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("nnz", AWKWARD_NNZ)
@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_gpu_inspect_coo_matches_twin(rng, index_dtype, nnz, order):
    rows, cols = random_coo(rng, 5000, 3000, nnz, index_dtype, order=order)
    if rows.size > 1 and order == "sorted":
        j = int(rng.integers(1, rows.size))
        rows[j], cols[j] = rows[j - 1], cols[j - 1]  # one repeated entry: one unsorted pair
    facts = convert.inspect_coo(*gpu_arrays(rows, cols))
    assert facts == convert.inspect_coo(rows, cols)
    if rows.size > 1 and order == "sorted":
        assert facts.unsorted_pairs == 1


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("nnz", AWKWARD_NNZ)
def test_gpu_pointer_kernels_match_twins(rng, index_dtype, nnz):
    import cupy

    m = max(nnz // 3, 1)
    rows = np.sort(rng.integers(0, m, size=nnz)).astype(index_dtype)
    if nnz > 10:
        rows[nnz // 4: nnz // 2] = rows[nnz // 4]  # a very long row
    indptr = twin.compress_sorted(rows, np.empty(m + 1, dtype=index_dtype))
    got = cupy.full(m + 1, POISON, dtype=index_dtype)
    convert._launch("compress_sorted", index_dtype, m + 1, (cupy.asarray(rows), np.int64(nnz), np.int64(m), got))
    np.testing.assert_array_equal(got.get(), indptr)
    np.testing.assert_array_equal(indptr, np.searchsorted(rows, np.arange(m + 1)))
    expanded = convert.expand_pointers(cupy.asarray(indptr), cupy)
    assert expanded.dtype == index_dtype
    np.testing.assert_array_equal(expanded.get(), rows)
    shifted = indptr + 3  # positions before indptr[0] get -1
    np.testing.assert_array_equal(convert.expand_pointers(cupy.asarray(shifted), cupy).get(),
                                  convert.expand_pointers(shifted, np))


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("nnz", [1, 31, 33, 2**20 + 7])
@pytest.mark.parametrize("long_row", [False, True])
def test_gpu_row_bucket_kernels_match_twins(rng, index_dtype, nnz, long_row):
    """Each kernel of the unsorted path against its twin, fed the same inputs."""
    import cupy

    m, n = max(nnz // 5, 2), 1000
    rows, cols = random_coo(rng, m, n, nnz, index_dtype, long_row=long_row)
    nnz = rows.size
    d_rows, d_cols = gpu_arrays(rows, cols)
    counts = cupy.zeros(m, dtype=index_dtype)
    slot = cupy.full(nnz, POISON, dtype=index_dtype)
    convert._launch("rank_in_row", index_dtype, nnz, (d_rows, np.int64(nnz), counts, slot))
    want_counts, _ = twin.rank_in_row(rows, np.zeros(m, index_dtype), np.empty(nnz, index_dtype))
    np.testing.assert_array_equal(counts.get(), want_counts)
    slot_h = slot.get()  # timing orders a row's slots; they must be 0..count-1 in every row
    key = rows.astype(np.int64) * (nnz + 1) + slot_h
    assert np.unique(key).size == nnz and (slot_h >= 0).all() and (slot_h < want_counts[rows]).all()
    bucket_ptr = np.concatenate([[0], np.cumsum(want_counts)]).astype(index_dtype)
    entries = cupy.full((nnz, 2), POISON, dtype=index_dtype)
    convert._launch("scatter_by_row", index_dtype, nnz, (d_rows, d_cols, slot, cupy.asarray(bucket_ptr), np.int64(nnz), entries))
    want_entries = twin.scatter_by_row(rows, cols, slot_h, bucket_ptr, np.full((nnz, 2), POISON, index_dtype))
    np.testing.assert_array_equal(entries.get(), want_entries)
    heads = cupy.full(nnz, POISON, dtype=index_dtype)
    tallies = cupy.zeros(2, dtype=np.uint64)
    convert._index_kernel("sort_short_rows", index_dtype)((97,), (convert.CONVERT_BLOCK,),
                                                          (cupy.asarray(bucket_ptr), np.int64(m), entries, heads, tallies))
    want_heads, want_tallies = np.full(nnz, POISON, index_dtype), np.zeros(2, np.uint64)
    twin.sort_short_rows(bucket_ptr, want_entries, want_heads, want_tallies)
    np.testing.assert_array_equal(entries.get(), want_entries)
    np.testing.assert_array_equal(heads.get(), want_heads)
    np.testing.assert_array_equal(tallies.get(), want_tallies)
    if want_tallies[0]:
        convert._sort_long_rows(cupy.asarray(bucket_ptr), counts, entries, heads, tallies)
        convert._sort_long_rows(bucket_ptr, want_counts, want_entries, want_heads, want_tallies)
        np.testing.assert_array_equal(entries.get(), want_entries)
        np.testing.assert_array_equal(heads.get(), want_heads)
        np.testing.assert_array_equal(tallies.get(), want_tallies)
    assert (want_heads != POISON).all(), "a run head was never written"
    for duplicates in (False, True):
        data = rng.standard_normal(nnz)
        heads_scan = np.cumsum(want_heads).astype(index_dtype)
        distinct = int(heads_scan[-1])
        if not duplicates:
            if distinct != nnz:
                continue
            indices, values = cupy.full(nnz, POISON, index_dtype), cupy.full(nnz, np.nan)
            convert.EMIT_KERNELS.function("emit_csr<{V}, {I}, false>", np.float64, index_dtype)(
                (convert.blocks_for(nnz, 256),), (256,), (entries, cupy.asarray(data), heads, np.int64(nnz), indices, values, heads))
            want = twin.emit_csr(want_entries, data, None, np.empty(nnz, index_dtype), np.empty(nnz), None)
            got = (indices.get(), values.get())
        else:
            indices, values = cupy.full(distinct, POISON, index_dtype), cupy.full(nnz, np.nan)
            run_start = cupy.full(distinct + 1, POISON, index_dtype)
            convert.EMIT_KERNELS.function("emit_csr<{V}, {I}, true>", np.float64, index_dtype)(
                (convert.blocks_for(nnz, 256),), (256,),
                (entries, cupy.asarray(data), cupy.asarray(heads_scan), np.int64(nnz), indices, values, run_start))
            want = twin.emit_csr(want_entries, data, heads_scan, np.empty(distinct, index_dtype), np.empty(nnz),
                                 np.full(distinct + 1, POISON, index_dtype))
            got = (indices.get(), values.get(), run_start.get())
            indptr = cupy.full(m + 1, POISON, index_dtype)
            convert._launch("final_pointers", index_dtype, m + 1, (cupy.asarray(bucket_ptr), cupy.asarray(heads_scan), np.int64(m), indptr))
            np.testing.assert_array_equal(indptr.get(), twin.final_pointers(bucket_ptr, heads_scan, np.empty(m + 1, index_dtype)))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("nnz", AWKWARD_NNZ)
@pytest.mark.parametrize("case", ["sorted", "shuffled", "duplicates", "long row", "long row duplicates"])
def test_gpu_coo_to_csr_matches_scipy_and_cpu(rng, index_dtype, nnz, case):
    import cupy

    m, n = max(nnz // 7, 3), 40000
    rows, cols = random_coo(rng, m, n, nnz, index_dtype, long_row="long row" in case,
                            duplicates="duplicates" in case, order="sorted" if case == "sorted" else "shuffled")
    data = rng.standard_normal(rows.size)
    got = convert.coo_to_csr(*gpu_arrays(rows, cols, data), (m, n), index_dtype=index_dtype)
    cpu = convert.coo_to_csr(rows, cols, data, (m, n), index_dtype=index_dtype)
    S = scipy_csr(rows, cols, data, (m, n))
    np.testing.assert_array_equal(got[0].get(), S.indptr)
    np.testing.assert_array_equal(got[1].get(), S.indices)
    np.testing.assert_allclose(got[2].get(), S.data, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got[0].get(), cpu[0])
    again = convert.coo_to_csr(*gpu_arrays(rows, cols, data), (m, n), index_dtype=index_dtype)
    assert again[2].get().tobytes() == got[2].get().tobytes(), "not bitwise reproducible"
    assert isinstance(got[0], cupy.ndarray) and got[0].dtype == index_dtype


@pytest.mark.gpu
def test_gpu_coo_to_csr_single_long_row_and_mixed_dtypes(rng):
    """One row holding every entry (many merge passes), rows int64 and cols int32, complex data."""
    nnz, n = 300_001, 50_000
    rows = np.full(nnz, 4, dtype=np.int64)
    cols = rng.integers(0, n, size=nnz).astype(np.int32)
    data = (rng.standard_normal(nnz) + 1j * rng.standard_normal(nnz)).astype(np.complex64)
    got = convert.coo_to_csr(*gpu_arrays(rows, cols, data), (9, n))
    S = scipy_csr(rows, cols, data, (9, n))
    np.testing.assert_array_equal(got[0].get(), S.indptr)
    np.testing.assert_array_equal(got[1].get(), S.indices)
    np.testing.assert_allclose(got[2].get(), S.data, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_gpu_coo_to_csr_bad_input_raises():
    import cupy

    r = cupy.asarray([0, 1])
    with pytest.raises(ValueError, match="out of range for 2 rows"):
        convert.coo_to_csr(cupy.asarray([0, 2]), r, cupy.ones(2), (2, 5))
    with pytest.raises(ValueError, match=r"cols holds a negative index \(-3\)"):
        convert.coo_to_csr(r, cupy.asarray([0, -3]), cupy.ones(2), (2, 2))
    with pytest.raises(ValueError, match="cols holds index 5, out of range for 5 columns"):
        convert.coo_to_csr(r, cupy.asarray([0, 5], dtype=np.uint64), cupy.ones(2), (2, 5))
