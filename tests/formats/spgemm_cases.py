"""Operands, oracles and checks shared by the SpGEMM tests (tests/formats/test_spgemm*.py), and
NumPy emulations of the SpGEMM kernels that run the GPU path's host code without a GPU."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sparsegpu import datasets
from sparsegpu import semiring as sr
from sparsegpu.formats import _spgemm_device as _spgemm
from sparsegpu.reference import spgemm as ref
from tests.conftest import to_numpy

PREDEFINED = list(sr.PREDEFINED.values())
IDS = [s.name for s in PREDEFINED]
DTYPES = [(np.float64, np.int32), (np.float32, np.int64), (np.complex128, np.int32), (np.complex64, np.int64)]
DTYPE_IDS = ["f64-i32", "f32-i64", "c128-i32", "c64-i64"]


def random_csr(rng, m, n, density, dtype=np.float64):
    S = sp.random_array((m, n), density=density, format="csr", rng=rng, dtype=np.float64)
    S.data = rng.uniform(-2.0, 2.0, S.nnz)
    if np.dtype(dtype).kind == "c":
        S = S.astype(dtype)
        S.data += 1j * rng.uniform(-2.0, 2.0, S.nnz)
    return sp.csr_array(S.astype(dtype))


def scipy_product(S, T):
    C = sp.csr_array(S @ T)
    C.sort_indices()
    return C


def assert_same_pattern_and_values(C, expected, dtype):
    """C's pattern equals ``expected``'s exactly; values within the dtype's tolerance (row-wise
    relative in float64)."""
    got = C.to_scipy()
    assert C.shape == expected.shape
    assert np.array_equal(got.indptr, expected.indptr)
    assert np.array_equal(got.indices, expected.indices)
    tol = 1e-12 if np.dtype(dtype) in (np.float64, np.complex128) else 1e-5
    scale = np.abs(expected.data).max(initial=0.0) or 1.0
    assert np.abs(got.data - expected.data).max(initial=0.0) <= tol * scale * 4


def ones_pattern(S):
    return sp.csr_array((np.ones(S.nnz), S.indices, S.indptr), shape=S.shape)


def structure_product(S, T):
    """The pattern of every product of stored entries (explicit zeros included)."""
    return sp.csr_array((ones_pattern(S) @ ones_pattern(T)) > 0)


def dense_oracle(S, T, semiring, dtype):
    """(pattern, values): pattern[i, j] when some stored k joins them; values the fold over k in
    A's storage order (sorted here) of mul(A[i, k], B[k, j])."""
    m, n = S.shape[0], T.shape[1]
    identity = semiring.identity(dtype)
    values = np.full((m, n), identity, dtype=dtype)
    pattern = np.zeros((m, n), dtype=bool)
    for i in range(m):
        for p in range(S.indptr[i], S.indptr[i + 1]):
            k = S.indices[p]
            cols = T.indices[T.indptr[k]:T.indptr[k + 1]]
            terms = semiring.mul.apply(np.full(cols.size, S.data[p], dtype), T.data[T.indptr[k]:T.indptr[k + 1]])
            for j, term in zip(cols, terms):
                values[i, j] = semiring.add.ufunc(np.asarray([values[i, j]], dtype), np.asarray([term], dtype))[0]
                pattern[i, j] = True
    return pattern, values


def check_against_oracle(C, pattern, values, semiring):
    got = C.to_scipy()
    dense_pattern = np.zeros(pattern.shape, dtype=bool)
    rows = np.repeat(np.arange(got.shape[0]), np.diff(got.indptr))
    dense_pattern[rows, got.indices] = True
    assert np.array_equal(dense_pattern, pattern)
    assert all(np.all(np.diff(got.indices[got.indptr[i]:got.indptr[i + 1]]) > 0) for i in range(got.shape[0]))
    expected = values[rows, got.indices]
    if semiring.add == sr.PLUS_MONOID:
        tol = 1e-5 if got.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got.data, expected, rtol=tol, atol=tol)
    else:
        assert np.array_equal(got.data, expected)


# --------------------------------------------------------------------------- operands


def rows_of(rng, lengths, n_cols, dtype=np.float64):
    """A CSR whose row i holds lengths[i] distinct random columns of n_cols."""
    indices = [np.sort(rng.choice(n_cols, size=length, replace=False)) for length in lengths]
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    data = rng.uniform(-2.0, 2.0, int(indptr[-1])).astype(dtype)
    return sp.csr_array((data, np.concatenate(indices + [np.zeros(0, np.int64)]), indptr), shape=(len(lengths), n_cols))


def every_bin_operands(rng, dtype=np.float64):
    """(S, T): T has 300 rows of 10 entries and 10 of 2700; S's rows reach bounds of 0, 20,
    100, 1000 and 1500 over the short rows and 2700 over a long one: every hash bin and a wide
    row."""
    T = rows_of(rng, [10] * 300 + [2700] * 10, 3000, dtype)
    S = rows_of(rng, [0, 2, 10, 100, 150] * 5, 300, dtype)
    S.resize((S.shape[0], 310))
    long_rows = sp.csr_array((rng.uniform(-2, 2, 3).astype(dtype), np.array([300, 305, 5]), np.array([0, 1, 3])),
                             shape=(2, 310))
    return sp.csr_array(sp.vstack([S, long_rows, S])), T


def dense_rows_operands(rng, n_rows, n_dense, n_cols=3000):
    """(S, T): S has ``n_rows`` rows of random length, ``n_dense`` of them nearly full, over T's
    400 rows of 5 to 60 entries in ``n_cols`` columns: the dense rows have bounds past 2048."""
    T = rows_of(rng, rng.integers(5, 60, 400).tolist(), n_cols)
    lengths = rng.integers(0, 20, n_rows)
    lengths[rng.choice(n_rows, n_dense, replace=False)] = rng.integers(300, 400, n_dense)
    S = rows_of(rng, lengths.tolist(), 400)
    return S, T


def small_rows_operands(rng, n_rows=120, few=False, a_lengths=7):
    """(S, T) with positive values (no sum is zero): every row of S @ T has 1 to 32 products
    (S's rows below ``a_lengths`` entries, T's below 5), so it is planned and computed in the
    warp bin; ``few``: a last row of 40 products on 4 columns, planned in the 256 bin and
    computed in the warp bin."""
    T = rows_of(rng, rng.integers(1, 5, 60).tolist(), 50)
    S = rows_of(rng, rng.integers(1, a_lengths, n_rows).tolist(), 60)
    S.data, T.data = np.abs(S.data) + 0.5, np.abs(T.data) + 0.5
    if few:
        T = sp.csr_array(sp.vstack([T, sp.csr_array((np.ones(40), np.tile([3, 9, 20, 30], 10), np.arange(0, 41, 4)),
                                                    shape=(10, 50))]))
        S.resize((n_rows, 70))
        S = sp.csr_array(sp.vstack([S, sp.csr_array((np.ones(10), np.arange(60, 70), [0, 10]), shape=(1, 70))]))
    return S, T


def few_column_operands(rng, n_cols, n_rows=40, a_lengths=None):
    """(S, T): T's 300 rows of 20 to 80 entries within ``n_cols`` columns, S's ``n_rows`` rows of
    10 to 60 entries (or ``a_lengths``): rows of thousands of products on at most ``n_cols``
    columns (many per entry), values of many magnitudes so that any other summation order shows
    in the bits."""
    T = rows_of(rng, rng.integers(20, min(80, n_cols), 300).tolist(), n_cols)
    lengths = rng.integers(10, 60, n_rows).tolist() if a_lengths is None else a_lengths
    S = rows_of(rng, lengths, 300)
    S.data *= 10.0 ** rng.integers(-8, 8, S.nnz)
    return S, T


SMALL_PRODUCTS = 3_000_000  # products of A @ A (upper bound) a test computes


def real_square_product(name):
    S = datasets.load_matrix(name)
    T = S if S.shape[0] == S.shape[1] else sp.csr_array(S.T)
    products = int(ref.upper_bounds(S.indptr, S.indices, T.indptr).sum())
    return S, T, products


# --------------------------------------------------------------------------- the fold's rounds


NEVER_TURNS = 2**30  # a fold_turns no round exceeds: the lowest warp always folds


def round_lanes(slots, threads, base=0):
    """slot -> warp -> lanes of the round of ``threads`` products from ``base``."""
    lanes = {}
    for t in range(base, min(base + threads, slots.size)):
        lanes.setdefault(int(slots[t]), {}).setdefault((t - base) // 32, []).append(t)
    return lanes


# --------------------------------------------------------------------------- bitwise checks


def bitwise_reference(S, T, semiring=None, mask=None):
    """The NumPy reference's (indptr, indices, data) of S (+.x) T: SciPy's pattern rule (zeros
    dropped) without a semiring."""
    parts = semiring or sr.plus_times
    pattern = None if mask is None else (mask.indptr, mask.indices)
    return ref.csr_spgemm((S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data), parts.add.ufunc,
                          parts.mul.apply, parts.identity(S.dtype), n_cols=T.shape[1], mask=pattern,
                          drop_zero_values=semiring is None)


def assert_bitwise(C, expected):
    assert to_numpy(C.indptr).astype(np.int64).tobytes() == expected[0].tobytes()
    assert to_numpy(C.indices).astype(np.int64).tobytes() == expected[1].tobytes()
    assert to_numpy(C.data).tobytes() == expected[2].tobytes()


# --------------------------------------------------------------------------- emulated kernels


class EmulatedKernels:
    """kernels/spgemm.cu's kernels as NumPy functions of the same arguments, one call per
    launch (the hash rows through the reference's :func:`hash_row`, the plan through its
    bounds, bins and costs): the GPU path's host code runs on them without a GPU. Rows are
    listed in a shuffled order within each bin, as the kernel's atomics may list them."""

    def __init__(self, semiring, rng=None):
        semiring = semiring or sr.plus_times
        self.semiring = semiring
        self.rng = rng or np.random.default_rng(0)
        self.launches: list[str] = []
        self.wide_grids: list[tuple[int, bool]] = []
        self.fold_turns: list[int] = []

    def __call__(self, template):
        name = template.split("<")[0]
        self.launches.append(template)
        if name == "spgemm_rows":
            threads, table, phase = (part.strip() for part in template[:-1].split(",")[-3:])
            return lambda grid, block, args, shared_mem=0: self.rows(int(threads), int(table), phase == "true", args)
        if name == "spgemm_wide":
            numeric = template[:-1].split(",")[-1].strip() == "true"
            return lambda grid, block, args, shared_mem=0: self.wide(numeric, grid[0], block[0], shared_mem, args)
        return {"spgemm_plan": lambda grid, block, args: self.plan(args),
                "spgemm_count_bins": lambda grid, block, args: self.count_bins(args),
                "spgemm_list_rows": lambda grid, block, args: self.list_rows(args),
                "spgemm_drop_zeros": lambda grid, block, args: self.drop_zeros(args)}[name]

    def parts(self, dtype):
        return self.semiring.add.ufunc, self.semiring.mul.apply, self.semiring.identity(dtype)

    @staticmethod
    def mask_of(m_indptr, m_indices):
        return None if isinstance(m_indptr, np.uint64) else (m_indptr, m_indices)

    def plan(self, args):
        (_, a_indptr, a_indices, b_indptr, m_indptr, complement, n_cols, *caps, entry_bytes, wide_bytes,
         row_overhead, bins, costs, counts, stats) = args
        assert (wide_bytes, row_overhead) == (_spgemm.wide_scratch_bytes(int(n_cols)), ref.ROW_OVERHEAD_BYTES)
        counts[:] = 0
        products = ref.upper_bounds(a_indptr, a_indices, b_indptr)
        mask_lengths = None if isinstance(m_indptr, np.uint64) else np.diff(m_indptr)
        bounds = ref.output_bounds(products, int(n_cols), mask_lengths, bool(complement))
        bins[:] = ref.bin_rows(bounds, tuple(int(c) for c in caps))
        wide = bins == len(caps)
        costs[:] = ref.row_costs(bounds, wide, int(entry_bytes), int(wide_bytes))
        stats[:len(caps) + 1] += np.bincount(bins[bins >= 0], minlength=len(caps) + 1).astype(np.uint64)
        stats[_spgemm.STAT_COST] += np.uint64(costs.sum())
        stats[_spgemm.STAT_WIDE_PRODUCTS] += np.uint64(products[wide].sum())
        stats[_spgemm.STAT_PRODUCTS] += np.uint64(products.sum())

    def count_bins(self, args):
        lo, hi, counts, *caps, bins, indptr, stats = args
        lo, hi = int(lo), int(hi)
        if not isinstance(counts, np.uint64):
            planned = bins[lo:hi].copy()
            bins[lo:hi] = ref.bin_rows(counts[lo:hi], tuple(int(c) for c in caps))
            stats[_spgemm.STAT_MOVED] += np.uint64(np.count_nonzero((bins[lo:hi] >= 0) & (bins[lo:hi] != planned)))
        block = bins[lo:hi]
        stats[:len(caps) + 1] += np.bincount(block[block >= 0], minlength=len(caps) + 1).astype(np.uint64)
        if not isinstance(indptr, np.uint64):
            stats[_spgemm.STAT_TOTAL] = indptr[hi]

    def list_rows(self, args):
        lo, hi, bins, bin_rows, cursors, lists = args
        starts = np.concatenate([[0], np.cumsum(bin_rows[:_spgemm.N_BINS].astype(np.int64))])
        for b in range(_spgemm.N_BINS):
            rows = int(lo) + np.flatnonzero(bins[int(lo):int(hi)] == b)
            assert rows.size == bin_rows[b] and cursors[b] == 0
            lists[starts[b]:starts[b] + rows.size] = self.rng.permutation(rows)
            cursors[b] += np.uint64(rows.size)

    def drop_zeros(self, args):
        _, indptr, kept_ptr, indices, data, out_indices, out_data = args
        keep = data != 0
        out_indices[:] = indices[keep]
        out_data[:] = data[keep]
        assert np.array_equal(kept_ptr, np.concatenate([[0], np.cumsum(keep)])[indptr])

    def rows(self, threads, table, numeric, args):
        (n_rows, rows, indptr, counts, *operands, m_indptr, m_indices, complement, c_indices, c_data, stats,
         fold_turns) = args
        assert fold_turns == _spgemm.FOLD_TURNS and isinstance(fold_turns, np.int32)
        self.fold_turns.append(int(fold_turns))
        a, b = tuple(operands[:3]), tuple(operands[3:])
        add, mul, identity = self.parts(a[2].dtype)
        mask = self.mask_of(m_indptr, m_indices)
        for r in range(int(n_rows)):
            row = int(rows[r])
            small = ref.warp_row(row, a, b, add, mul, identity, mask, bool(complement)) if threads == 32 else None
            keys, values = small or ref.hash_row(row, a, b, add, mul, identity, mask, bool(complement), threads,
                                                 table, int(fold_turns))
            assert keys.size <= table // 2  # what the bin promises the kernel
            self.write_row(numeric, row, keys, values, indptr, counts, c_indices, c_data, stats)

    @staticmethod
    def write_row(numeric, row, keys, values, indptr, counts, c_indices, c_data, stats):
        """Symbolic: the count; numeric: the entries, and unless counts is null the nonzero
        count and the zeros added to stats[STAT_ZEROS]."""
        if numeric:
            assert indptr[row + 1] - indptr[row] == keys.size  # the symbolic count
            c_indices[indptr[row]:indptr[row] + keys.size] = keys
            c_data[indptr[row]:indptr[row] + keys.size] = values
            if not isinstance(counts, np.uint64):
                counts[row] = np.count_nonzero(values)
                stats[_spgemm.STAT_ZEROS] += np.uint64(keys.size - counts[row])
        else:
            assert isinstance(stats, np.uint64)
            counts[row] = keys.size

    def wide(self, numeric, grid, threads, shared_mem, args):
        """spgemm_wide: block g takes rows[g], rows[g + grid], ...; its bitmap (2 words per 32
        columns) in shared memory, or its slice of the scratch, zero on entry and left zero."""
        (n_rows, rows, indptr, counts, *operands, m_indptr, m_indices, complement, c_indices, c_data, n_cols,
         scratch, stats, fold_turns) = args
        assert fold_turns == _spgemm.FOLD_TURNS and isinstance(fold_turns, np.int32)
        self.fold_turns.append(int(fold_turns))
        a, b = tuple(operands[:3]), tuple(operands[3:])
        add, mul, identity = self.parts(a[2].dtype)
        words = -(-int(n_cols) // 32)
        walk = _spgemm.wide_walk_bytes(a[2].dtype.itemsize)
        in_shared = isinstance(scratch, np.uint64)
        assert threads == _spgemm.WIDE_THREADS and 1 <= grid <= max(int(n_rows), 1)
        assert shared_mem == walk + (8 * words if in_shared else 0)
        assert in_shared or (scratch.dtype == np.uint32 and scratch.size >= grid * 2 * words and not scratch.any())
        self.wide_grids.append((grid, in_shared))
        for g in range(grid):
            for r in range(g, int(n_rows), grid):
                row = int(rows[r])
                keys, values = ref.wide_row(row, a, b, add, mul, identity, self.mask_of(m_indptr, m_indices),
                                            bool(complement), int(n_cols), threads, _spgemm.WIDE_TOUCH,
                                            int(fold_turns))
                assert keys.size == 0 or keys[-1] < n_cols
                self.write_row(numeric, row, keys, values, indptr, counts, c_indices, c_data, stats)
