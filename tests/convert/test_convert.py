"""sparsegpu.convert: pointer expansion and compression, CSR <-> CSC, COO <-> CSR, row-length
statistics, against SciPy and NumPy on every backend (GPU cases marked ``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu import convert
from sparsegpu.convert import coo_sort
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


# --------------------------------------------------------------------------- kernels/convert.cu and their NumPy references

from sparsegpu.reference import convert as reference  # noqa: E402

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
def test_partition_pipeline_on_references_matches_scipy(rng, index_dtype, nnz, long_row):
    """The GPU's unsorted COO -> CSR pipeline, run on the kernels' NumPy references."""
    m, n = 301, 97
    rows, cols = random_coo(rng, m, n, nnz, index_dtype, long_row=long_row)
    if nnz == 0:
        return
    data = rng.standard_normal(rows.size)
    indptr, indices, values = coo_sort._sort_by_rows(rows, cols, data, m)
    S = scipy_csr(rows, cols, data, (m, n))
    np.testing.assert_array_equal(indptr, S.indptr)
    np.testing.assert_array_equal(indices, S.indices)
    np.testing.assert_allclose(values, S.data, rtol=1e-12, atol=1e-12)
    want = convert.coo_to_csr(rows, cols, data, (m, n), index_dtype=index_dtype)[2]
    assert values.tobytes() == want.tobytes(), "duplicates not summed as the CPU path sums them"


def test_inspect_coo_reference_matches_numpy(rng):
    rows = rng.integers(-5, 1000, size=777)
    cols = rng.integers(-(2**40), 2**40, size=777)
    facts = convert.inspect_coo(rows, cols)
    unsorted = int(((rows[1:] < rows[:-1]) | ((rows[1:] == rows[:-1]) & (cols[1:] <= cols[:-1]))).sum())
    assert facts == convert.CooFacts(rows.min(), rows.max(), cols.min(), cols.max(), unsorted)
    assert convert.inspect_coo(rows[:0], cols[:0]).row_min is None


def test_references_of_pointer_kernels(rng):
    lengths = rng.integers(0, 4, size=200)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    marks = np.full(int(indptr[-1]), -1, dtype=np.int32)
    reference.mark_row_starts(indptr, marks)
    np.testing.assert_array_equal(np.maximum.accumulate(marks), np.repeat(np.arange(200), lengths))
    rows = np.repeat(np.arange(200), lengths)
    np.testing.assert_array_equal(reference.compress_sorted(rows, np.empty(201, np.int64)), indptr)


SKEWED_CASES = ["ten per row", "one huge row", "all in one row", "medium rows", "power law", "hyper-sparse", "wide"]


def skewed_coo(rng, case, index_dtype):
    """Shuffled COO coordinates with an awkward row-length distribution: (rows, cols, m, n)."""
    if case == "ten per row":  # the benchmark's shape, smaller; a few duplicates
        m, n, nnz = 20011, 10**6, 200_113
        rows = rng.integers(0, m, size=nnz)
    elif case == "one huge row":  # a row longer than a leaf holds, many duplicates in it
        m, n, nnz = 3001, 5000, 40_007
        rows = rng.integers(0, m, size=nnz)
        rows[: nnz // 2] = m // 2
    elif case == "all in one row":
        m, n, nnz = 1, 10**6, 30_011
        rows = np.zeros(nnz, dtype=np.int64)
    elif case == "medium rows":  # rows longer than LOCAL_ROW that still fit a leaf; duplicates
        m, n, nnz = 97, 200, 97 * 300 + 5
        rows = rng.integers(0, m, size=nnz)
    elif case == "power law":  # low rows crowded, high rows mostly empty
        m, n, nnz = 50_000, 3000, 200_003
        rows = np.minimum((m * rng.random(nnz) ** 4).astype(np.int64), m - 1)
    elif case == "hyper-sparse":  # far more rows than entries: empty ranges at every level
        m, n, nnz = 2**22 + 3, 50, 5003
        rows = rng.integers(0, m, size=nnz)
        rows[:2] = m - 1, 0
    else:  # "wide": rows x columns beyond 2^32, int32 indices still fit
        m, n, nnz = 70_001, 2**31 - 1, 100_003
        rows = rng.integers(0, m, size=nnz)
    cols = rng.integers(0, n, size=nnz)
    return rows.astype(index_dtype), cols.astype(index_dtype), m, n


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("case", SKEWED_CASES)
def test_partition_pipeline_on_references_handles_skewed_rows(rng, index_dtype, case):
    """Leaves of the partition cover every row exactly once, hold exactly their rows' entries,
    and the whole path on the references gives SciPy's CSR."""
    rows, cols, m, n = skewed_coo(rng, case, index_dtype)
    segments, buffers = coo_sort._partition_rows(rows, cols, m)
    start, count, first_row, info = segments.T
    bits, piece = info & 255, (info & reference.LONG_PIECE) != 0
    assert (count <= reference.segment_capacity(index_dtype)).all()
    assert (bits[count > 0] <= 8).all() and (bits[piece] == 0).all()
    covers = ~piece | ((info & reference.FIRST_PIECE) != 0)  # a long row's first piece covers it
    span = np.minimum(first_row + (1 << bits), m) - first_row
    order = np.argsort(first_row[covers], kind="stable")
    f, w = first_row[covers][order], span[covers][order]
    assert f[0] == 0 and (np.cumsum(w)[:-1] == f[1:]).all() and w.sum() == m, "rows not covered once"
    assert count.sum() == rows.size and np.unique(start[count > 0]).size == np.count_nonzero(count)
    for g in rng.choice(segments.shape[0], size=min(50, segments.shape[0]), replace=False):
        b = buffers[(info[g] >> 8) & 1, :, start[g]:start[g] + count[g]]
        assert ((b[0] >= first_row[g]) & (b[0] < first_row[g] + max(span[g], 1))).all()
        np.testing.assert_array_equal(b[0], rows[b[2]])
        np.testing.assert_array_equal(b[1], cols[b[2]])
    data = rng.standard_normal(rows.size)
    indptr, indices, values = coo_sort._sort_by_rows(rows, cols, data, m)
    S = scipy_csr(rows, cols, data, (m, n))
    np.testing.assert_array_equal(indptr, S.indptr)
    np.testing.assert_array_equal(indices, S.indices)
    want = convert.coo_to_csr(rows, cols, data, (m, n), index_dtype=index_dtype)[2]
    assert values.tobytes() == want.tobytes(), "duplicates not summed as the CPU path sums them"


def gpu_arrays(*arrays):
    import cupy

    return [cupy.asarray(a) for a in arrays]


def children_as_sets(buffer, counts, starts):
    """The (row, col, pos) triples of a partition target, child by child ordered by position (the
    kernel's order inside a child depends on timing)."""
    counts, starts = counts.ravel(), starts.ravel()
    owner = np.repeat(np.arange(counts.size), counts)
    where = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(owner.size)
    triples = buffer[:, where]
    return triples[:, np.lexsort((triples[2], owner))]


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("nnz", [1, 31, 4097, 2**20 + 7])
@pytest.mark.parametrize("long_row", [False, True])
def test_gpu_partition_kernels_match_references(rng, index_dtype, nnz, long_row):
    """count_digits and partition_tiles against their references: the first level (implicit positions,
    one parent) and a second level over many parents; counts and cursors exactly, children as sets,
    every entry written."""
    import cupy

    m = max(nnz // 3, 2)
    rows, cols = random_coo(rng, m, 5000, nnz, index_dtype, long_row=long_row)
    nnz = rows.size
    shift = max(int(m - 1).bit_length() - convert.DIGIT_BITS, 0)
    parents = np.array([[0, nnz, 0]], dtype=np.int64)
    source = (rows, cols, rows)
    for level in range(2):
        want_target = np.full((3, nnz), POISON, dtype=index_dtype)
        want_counts, want_starts = coo_sort._partition_level(source, level == 0, parents, shift, want_target)
        got_target = cupy.full((3, nnz), POISON, dtype=index_dtype)
        got_counts, got_starts = coo_sort._partition_level(tuple(gpu_arrays(*source)), level == 0, cupy.asarray(parents),
                                                          shift, got_target)
        np.testing.assert_array_equal(got_counts.get(), want_counts)
        np.testing.assert_array_equal(got_starts.get(), want_starts)
        got = got_target.get()
        covered = np.concatenate([np.arange(s, s + c) for s, c in parents[:, :2]])
        assert (got[:, covered] != POISON).all(), "an entry was never written"
        np.testing.assert_array_equal(children_as_sets(got, want_counts, want_starts),
                                      children_as_sets(want_target, want_counts, want_starts))
        # The next level: every non-empty child a parent, fed the reference's output.
        counts, starts = want_counts.ravel(), want_starts.ravel()
        first_rows = (parents[:, 2:3] + (np.arange(convert.DIGITS) << shift)).ravel()
        split = counts > 0
        parents = np.stack([starts[split], counts[split], first_rows[split]], axis=1)
        source = tuple(want_target)
        shift = max(shift - convert.DIGIT_BITS, 0)


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("case", SKEWED_CASES)
@pytest.mark.parametrize("value_dtype", [np.float64, np.complex64, np.int32])
def test_gpu_sort_segments_and_long_rows_match_references(rng, index_dtype, case, value_dtype):
    """sort_segments, then the long-row kernels, against their references on the references' leaves; outputs
    poisoned first. Long rows' pairs leave sort_segments in any order within their row."""
    rows, cols, m, n = skewed_coo(rng, case, index_dtype)
    nnz = rows.size
    data = (rng.standard_normal(nnz) * 100).astype(value_dtype)
    segments, buffers = coo_sort._partition_rows(rows, cols, m)
    outputs = {}
    for backend in ("gpu", "cpu"):
        xp = xp_for(backend)
        row_ptr = xp.full(m + 1, POISON, dtype=index_dtype)
        row_ptr[m] = nnz
        indices = xp.full(nnz, POISON, dtype=index_dtype)
        values = xp.full(nnz, np.nan if np.dtype(value_dtype).kind != "i" else POISON, dtype=value_dtype)
        long_entries = xp.full((nnz, 2), POISON, dtype=index_dtype)
        tallies = xp.zeros(2, dtype=np.uint64)
        args = [xp.asarray(a) for a in (segments, buffers, data)]
        if backend == "gpu":
            convert.GATHER_KERNELS.function("sort_segments<{V}, {I}>", value_dtype, index_dtype)(
                (97,), (convert.CONVERT_BLOCK,),  # fewer blocks than leaves: the grid-stride loop runs
                (args[0], np.int64(segments.shape[0]), args[1], np.int64(nnz), np.int64(m), args[2], row_ptr, indices,
                 values, long_entries, tallies))
        else:
            reference.sort_segments(*args, row_ptr, indices, values, long_entries, tallies)
        outputs[backend] = [to_numpy(a) for a in (row_ptr, indices, values, long_entries, tallies)]
        outputs[backend + " after long rows"] = (row_ptr, long_entries, args[2], indices, values, tallies)
    got, want = outputs["gpu"], outputs["cpu"]
    for g, w in zip(got[:3] + got[4:], want[:3] + want[4:]):
        np.testing.assert_array_equal(g, w)
    assert (want[0] != POISON).all(), "a row pointer was never written"
    lengths = np.diff(want[0])
    long_rows = np.flatnonzero(lengths > convert.LOCAL_ROW)
    assert int(want[4][0]) == long_rows.size
    for r in long_rows:  # the same pairs, in any order
        a, b = got[3][want[0][r]:want[0][r + 1]], want[3][want[0][r]:want[0][r + 1]]
        np.testing.assert_array_equal(a[np.argsort(a[:, 1])], b[np.argsort(b[:, 1])])
    if long_rows.size:
        finals = []
        for backend in ("gpu", "cpu"):
            row_ptr, long_entries, d, indices, values, tallies = outputs[backend + " after long rows"]
            coo_sort._sort_long_rows(row_ptr, long_entries, d, indices, values, tallies)
            finals.append([to_numpy(a) for a in (indices, values, tallies)])
        for g, w in zip(*finals):
            np.testing.assert_array_equal(g, w)
        assert (finals[1][0] != POISON).all(), "an index was never written"


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("case", SKEWED_CASES)
@pytest.mark.parametrize("value_dtype", [np.float64, np.float32, np.complex128, np.int64])
def test_gpu_unsorted_coo_to_csr_skewed_rows(rng, index_dtype, case, value_dtype):
    """The whole unsorted conversion on skewed rows against SciPy and the CPU path: pointers and
    indices exactly, values bitwise where there are no duplicates (a permutation of the input),
    and bitwise run to run."""
    rows, cols, m, n = skewed_coo(rng, case, index_dtype)
    data = (rng.standard_normal(rows.size) * 100).astype(value_dtype)
    if np.dtype(value_dtype).kind == "c":
        data = data + 1j * rng.standard_normal(rows.size).astype(value_dtype)
    got = [a.get() for a in convert.coo_to_csr(*gpu_arrays(rows, cols, data), (m, n), index_dtype=index_dtype)]
    S = scipy_csr(rows, cols, data, (m, n))
    np.testing.assert_array_equal(got[0], S.indptr)
    np.testing.assert_array_equal(got[1], S.indices)
    assert got[0].dtype == index_dtype and got[1].dtype == index_dtype and got[2].dtype == value_dtype
    if S.nnz == rows.size:
        assert got[2].tobytes() == S.data.astype(value_dtype).tobytes()
    else:
        tol = 1e-3 if np.dtype(value_dtype) in (np.float32,) else 1e-9
        np.testing.assert_allclose(got[2], S.data, rtol=tol, atol=tol)
    again = convert.coo_to_csr(*gpu_arrays(rows, cols, data), (m, n), index_dtype=index_dtype)
    for a, b in zip(again, got):
        assert a.get().tobytes() == b.tobytes(), "not bitwise reproducible"


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("nnz", AWKWARD_NNZ)
@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_gpu_inspect_coo_matches_reference(rng, index_dtype, nnz, order):
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
def test_gpu_pointer_kernels_match_references(rng, index_dtype, nnz):
    import cupy

    m = max(nnz // 3, 1)
    rows = np.sort(rng.integers(0, m, size=nnz)).astype(index_dtype)
    if nnz > 10:
        rows[nnz // 4: nnz // 2] = rows[nnz // 4]  # a very long row
    indptr = reference.compress_sorted(rows, np.empty(m + 1, dtype=index_dtype))
    got = cupy.full(m + 1, POISON, dtype=index_dtype)
    coo_sort._launch("compress_sorted", index_dtype, m + 1, (cupy.asarray(rows), np.int64(nnz), np.int64(m), got))
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


def _random_csr_chunk(rng, nnz, index_dtype, canonical):
    """A CSR of 3,000 columns whose chunk [start, stop) is inspected; with ``canonical`` False a
    few pairs inside rows go down or repeat, and a few row starts go up as they may."""
    m = max(nnz // 7, 1)
    S = sp.random_array((m, 3000), density=min(nnz / (m * 3000), 1.0), rng=rng, format="csr")
    indptr, indices = S.indptr.astype(index_dtype), S.indices.astype(index_dtype)
    if not canonical and indices.size > 2:
        for j in rng.integers(1, indices.size, size=5):
            indices[j] = indices[j - 1] - int(rng.integers(0, 2))
    start = int(rng.integers(0, max(indices.size // 3, 1)))
    stop = int(rng.integers(start, indices.size + 1))
    starts = indptr[(indptr > start) & (indptr < stop)]
    return indices, start, stop, starts


def _brute_force_chunk(indices, start, stop, starts):
    chunk = indices[start:stop]
    down = sum(1 for j in range(1, chunk.size) if chunk[j] <= chunk[j - 1] and start + j not in set(starts.tolist()))
    return (int(chunk.min()), int(chunk.max()), down) if chunk.size else None


@pytest.mark.parametrize("canonical", [True, False])
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_inspect_csr_chunk_reference_counts_pairs_inside_rows(rng, canonical, index_dtype):
    for nnz in (0, 1, 57, 4000):
        indices, start, stop, starts = _random_csr_chunk(rng, nnz, index_dtype, canonical)
        words = np.zeros(4, np.uint64)
        convert.inspect_csr_chunk(indices[start:stop], starts, start, words)
        want = _brute_force_chunk(indices, start, stop, starts)
        if want is not None:
            got = (reference.decode_key(~int(words[0]) & ((1 << 64) - 1)), reference.decode_key(int(words[1])),
                   int(words[2]) - int(words[3]))
            assert got == want


@pytest.mark.gpu
@pytest.mark.parametrize("canonical", [True, False])
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("nnz", AWKWARD_NNZ)
def test_gpu_inspect_csr_chunk_matches_reference(rng, canonical, index_dtype, nnz):
    """The kernel's four words equal the reference's, accumulated over two chunks."""
    import cupy

    indices, start, stop, starts = _random_csr_chunk(rng, nnz, index_dtype, canonical)
    want = np.zeros(4, np.uint64)
    got = cupy.zeros(4, np.uint64)
    for a, b in ((start, (start + stop) // 2), ((start + stop) // 2, stop)):
        inner = starts[(starts > a) & (starts < b)]
        convert.inspect_csr_chunk(indices[a:b], inner, a, want)
        convert.inspect_csr_chunk(cupy.asarray(indices[a:b]), cupy.asarray(inner), a, got)
    assert got.get().tolist() == want.tolist()
