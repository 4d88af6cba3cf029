"""The SpGEMM reference (sparsegpu/reference/spgemm.py) on the CPU: its phases, the kernels' row
walks (hash, wide, warp) emulated row by row against the vectorised product bitwise, and the
order and rule by which rounds of products are folded."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu import datasets
from sparsegpu import semiring as sr
from sparsegpu.formats import _spgemm_device as _spgemm
from sparsegpu.reference import spgemm as ref
from tests.conftest import requires_matrices
from tests.formats.spgemm_cases import (
    NEVER_TURNS,
    dense_rows_operands,
    every_bin_operands,
    random_csr,
    round_lanes,
    rows_of,
    structure_product,
)

# --------------------------------------------------------------------------- the reference's phases


def test_reference_phases(rng):
    S, T = random_csr(rng, 50, 40, 0.1), random_csr(rng, 40, 60, 0.1)
    bounds = ref.upper_bounds(S.indptr, S.indices, T.indptr)
    pattern_only = sp.csr_array((np.ones(S.nnz), S.indices, S.indptr), S.shape) @ \
        sp.csr_array((np.ones(T.nnz), T.indices, T.indptr), T.shape)
    assert np.array_equal(bounds, pattern_only.toarray().sum(axis=1))
    counts = ref.symbolic_counts(np.arange(50), (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data),
                                 None, False)
    assert np.array_equal(counts, np.diff(structure_product(S, T).indptr))
    assert ref.bin_rows(np.array([0, 1, 32, 33, 2049]), (32, 2048)).tolist() == [-1, 0, 0, 1, 2]
    costs = rng.integers(1, 100, 200)
    blocks = ref.row_blocks(costs, 250)
    assert blocks[0] == 0 and blocks[-1] == 200 and np.all(np.diff(blocks) > 0)
    assert all(costs[lo:hi].sum() <= 250 or hi - lo == 1 for lo, hi in pairwise(blocks))


def test_reference_folds_each_entry_in_product_order(rng):
    # Sequential from the identity, as the kernels fold (not NumPy's pairwise reduction).
    values = rng.standard_normal(500) * 10.0 ** rng.integers(-10, 10, 500)
    local, cols = np.zeros(500, np.int64), rng.integers(0, 3, 500)
    _, columns, folded = ref.fold_runs(local, cols, values, 1, np.add, 0.0)
    for column, got in zip(columns, folded):
        expected = 0.0
        for v in values[cols == column]:
            expected += v
        assert got == expected


# --------------------------------------------------------------------------- row walks


@pytest.mark.parametrize("semiring", [sr.plus_times, sr.min_plus, sr.any_pair, sr.max_times], ids=lambda s: s.name)
def test_hash_row_walk_matches_the_reference(rng, semiring):
    # The kernels' per-row algorithm (chunked walk, binary search, linear probing, sorted keys,
    # fold in visiting order), emulated row by row, against the vectorised reference.
    S, T = every_bin_operands(rng)
    S = sp.csr_array(S[:25])
    M = random_csr(rng, S.shape[0], T.shape[1], 0.3)
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    add, mul, identity = semiring.add.ufunc, semiring.mul.apply, semiring.identity(np.float64)
    for mask, complement in ((None, False), ((M.indptr, M.indices), True)):
        expected = ref.csr_spgemm(a, b, add, mul, identity, n_cols=T.shape[1], mask=mask, complement=complement)
        counts = np.diff(expected[0])
        for row in range(S.shape[0]):
            bin_id = ref.bin_rows(counts[row:row + 1], _spgemm.CAPACITIES)[0]
            if bin_id < 0 or bin_id == len(_spgemm.HASH_BINS):
                continue
            _, threads, table = _spgemm.HASH_BINS[bin_id]
            keys, values = ref.hash_row(row, a, b, add, mul, identity, mask, complement, threads, table)
            lo, hi = expected[0][row], expected[0][row + 1]
            assert np.array_equal(keys, expected[1][lo:hi])
            assert values.tobytes() == expected[2][lo:hi].tobytes()


@pytest.mark.parametrize("semiring", [sr.plus_times, sr.min_plus, sr.any_pair, sr.max_times], ids=lambda s: s.name)
def test_wide_row_walk_matches_the_reference_bitwise(rng, semiring):
    # The wide kernel's per-row algorithm (bitmap, word ranks, fold in visiting order at the
    # column's rank), emulated row by row, against the vectorised reference: the same bits.
    # Values of very different sizes make any other summation order show.
    S, T = dense_rows_operands(rng, 12, 3)
    T.data *= 10.0 ** rng.integers(-12, 12, T.nnz)
    M = random_csr(rng, S.shape[0], T.shape[1], 0.3)
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    add, mul, identity = semiring.add.ufunc, semiring.mul.apply, semiring.identity(np.float64)
    for mask, complement in ((None, False), ((M.indptr, M.indices), False), ((M.indptr, M.indices), True)):
        expected = ref.csr_spgemm(a, b, add, mul, identity, n_cols=T.shape[1], mask=mask, complement=complement)
        for row in range(S.shape[0]):
            keys, values = ref.wide_row(row, a, b, add, mul, identity, mask, complement, T.shape[1],
                                        _spgemm.WIDE_THREADS, _spgemm.WIDE_TOUCH)
            lo, hi = expected[0][row], expected[0][row + 1]
            assert np.array_equal(keys, expected[1][lo:hi])
            assert values.tobytes() == expected[2][lo:hi].tobytes()


@pytest.mark.parametrize("semiring", [sr.plus_times, sr.min_plus, sr.any_pair, sr.max_times], ids=lambda s: s.name)
def test_warp_row_in_registers_matches_the_reference_bitwise(rng, semiring):
    # The warp kernel's path for rows of at most 32 products (peers by column, leaders' ranks,
    # lane-order folds), emulated row by row, against the vectorised reference: the same bits.
    # Rows of up to 40 products: the larger ones are refused (the kernel's hash table takes them).
    T = rows_of(rng, rng.integers(0, 9, 200).tolist(), 40)
    T.data *= 10.0 ** rng.integers(-12, 12, T.nnz)
    S = rows_of(rng, rng.integers(0, 9, 300).tolist(), 200)
    S.data[::7] = 0.0
    M = random_csr(rng, S.shape[0], T.shape[1], 0.4)
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    add, mul, identity = semiring.add.ufunc, semiring.mul.apply, semiring.identity(np.float64)
    products = ref.upper_bounds(S.indptr, S.indices, T.indptr)
    assert np.any(products > 32) and np.count_nonzero(products <= 32) > 100
    for mask, complement in ((None, False), ((M.indptr, M.indices), False), ((M.indptr, M.indices), True)):
        expected = ref.csr_spgemm(a, b, add, mul, identity, n_cols=T.shape[1], mask=mask, complement=complement)
        for row in range(S.shape[0]):
            got = ref.warp_row(row, a, b, add, mul, identity, mask, complement)
            assert (got is None) == (products[row] > 32)
            if got is not None:
                lo, hi = expected[0][row], expected[0][row + 1]
                assert np.array_equal(got[0], expected[1][lo:hi])
                assert got[1].tobytes() == expected[2][lo:hi].tobytes()


# --------------------------------------------------------------------------- the fold's order and rule


@pytest.mark.parametrize("threads", [32, 128, 256])
def test_fold_order_folds_each_slot_in_product_order(rng, threads):
    # The kernels' fold: per round, either the lowest warp holding a slot folds it across the
    # round's warps, or the warps take turns. Every product once, each slot's in product order,
    # whether mark bytes are per slot (exact) or shared by slots modulo a small table, and
    # whichever way the rule goes (always turns, the default, never).
    for n_slots, touch, exact in ((40, 64, True), (2000, 2048, True), (300, 4, False), (3000, 2048, False),
                                  (3, 64, True), (5, 4, False)):
        slots = rng.integers(-1, n_slots, 5 * threads + 17)
        for turns in (-1, 0, _spgemm.FOLD_TURNS, 4, NEVER_TURNS):
            order = np.asarray(ref.fold_order(slots, threads, touch, exact, turns))
            assert np.array_equal(np.sort(order), np.flatnonzero(slots >= 0))
            for s in np.unique(slots[slots >= 0]):
                assert np.all(np.diff(order[slots[order] == s]) > 0)
    if threads > 32:  # the exact shortcut needs a byte per slot: shared bytes lose products
        slots = rng.integers(0, 300, 5 * threads)
        assert len(ref.fold_order(slots, threads, 4, True, NEVER_TURNS)) < slots.size


@pytest.mark.parametrize("threads", [128, 256])
def test_fold_rule_turns_for_few_columns_only(rng, threads):
    # Rounds whose slots spread over many warps (few columns) fold in warp turns; rounds of
    # distinct columns (no spans) fold by each slot's lowest warp; the rule's threshold decides
    # between. Few columns: the two orders differ, so the order shows which side was taken.
    warps = threads // 32
    few = rng.integers(0, 4, 3 * threads)  # every warp holds every slot: 4 (warps - 1) spans
    distinct = rng.permutation(3 * threads)  # no slot twice: no spans
    pairs = rng.permutation(np.repeat(np.arange(3 * threads // 2), 2))  # some slots in two warps
    for slots, touch, exact in ((few, 2048, True), (few, 4, False), (distinct, 2048, True), (pairs, 2048, True),
                                (pairs, 16, False)):
        for base in range(0, slots.size, threads):
            lanes = round_lanes(slots, threads, base)
            spans = ref.round_spans(lanes, touch)
            assert (spans == 0) == (slots is distinct and touch == 2048)
            for turns in (-1, 0, 1, 2, 3, 4, NEVER_TURNS):
                assert ref.takes_turns(lanes, threads, touch, turns) == (spans > turns * warps)
            if slots is not pairs:
                assert ref.takes_turns(lanes, threads, touch, _spgemm.FOLD_TURNS) == (slots is few)
    always, never = (ref.fold_order(few, threads, 2048, True, t) for t in (-1, NEVER_TURNS))
    assert always != never
    assert ref.fold_order(few, threads, 2048, True, _spgemm.FOLD_TURNS) == always
    assert ref.fold_order(few, threads, 2048, True, 4) == never  # fewer than 4 spans per warp
    assert not ref.takes_turns(round_lanes(few, 32), 32, 2048, -1)  # one warp never takes turns


def test_round_spans_count_leaders_beyond_the_first_per_byte():
    lanes = {0: {0: [0, 1], 1: [32]}, 4: {1: [33]}, 9: {0: [2], 1: [40], 2: [64]}}
    assert ref.round_spans(lanes, 2048) == 3  # slot 0 in 2 warps, slot 9 in 3
    assert ref.round_spans(lanes, 4) == 4  # slots 0 and 4 share byte 0


@requires_matrices
def test_hash_rows_of_a_real_few_column_matrix_bitwise_every_rule(rng):
    # ani4_amd_chol's rows of many products per entry: most rounds span every warp, so the rule
    # takes turns; bitwise the reference whichever way it goes.
    S = sp.csr_array(datasets.load_matrix("ani4_amd_chol"))
    S.data = rng.uniform(0.5, 2.0, S.nnz) * 10.0 ** rng.integers(-8, 8, S.nnz)
    a = (S.indptr, S.indices, S.data)
    counts = np.diff(sp.csr_array(structure_product(S, S)).indptr)
    products = ref.upper_bounds(S.indptr, S.indices, S.indptr)
    bins = ref.bin_rows(counts, _spgemm.CAPACITIES)
    rows = [int(r) for b in (1, 2) for r in rng.choice(np.flatnonzero((bins == b) & (products < 4000)), 2)]
    expected = ref.csr_spgemm(a, a, np.add, np.multiply, 0.0, n_cols=S.shape[1])
    turned = 0
    for row in rows:
        _, threads, table = _spgemm.HASH_BINS[bins[row]]
        lo, hi = expected[0][row], expected[0][row + 1]
        for turns in (-1, _spgemm.FOLD_TURNS, NEVER_TURNS):
            keys, values = ref.hash_row(row, a, a, np.add, np.multiply, 0.0, None, False, threads, table, turns)
            assert np.array_equal(keys, expected[1][lo:hi]) and values.tobytes() == expected[2][lo:hi].tobytes()
        _, _, _, cols, _ = ref._walked_products(row, a, a, None, False, threads)
        slots = np.searchsorted(np.unique(cols), cols)
        turned += sum(ref.takes_turns(round_lanes(slots, threads, base), threads, table // 2, _spgemm.FOLD_TURNS)
                      for base in range(0, slots.size, threads))
    assert turned > 0
