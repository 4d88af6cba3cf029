"""Bad input gets a clear ValueError or TypeError naming the problem, before any SciPy routine,
kernel or allocation sized from it, on both backends; never a crash, never a silent wrong answer.

The cases are the ones a new user hits: scipy matrices whose arrays were changed after
construction (SciPy allows it), scalars and options of the wrong type, casts that lose
information, sizes that cannot fit, outputs that alias inputs. Cases that crashed SciPy run in a
subprocess, so a crash fails its test instead of ending the run."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import convert, primitives
from tests.conftest import xp_for

FORMATS = sorted(sparsegpu.SparseMatrix.formats)


def small(rng, m=6, n=5, fmt="csr"):
    S = sp.random_array((m, n), density=0.5, rng=rng, format=fmt)
    return S if S.nnz else sp.coo_array(([1.0], ([0], [0])), shape=(m, n)).asformat(fmt)


def build(S, fmt, backend):
    return sparsegpu.from_scipy(S, format=fmt, backend=backend, **({"max_fill": None} if fmt == "ell" else {}))


# --------------------------------------------------------------------------- crashing SciPy

CRASHERS = {
    "indptr jumps far": "S = sp.csr_array(np.eye(3)); S.indptr = np.array([0, 10**8, 2, 3], S.indptr.dtype)",
    "indptr goes down": "S = sp.csr_array(np.eye(3)); S.indptr = np.array([0, 2, 1, 3], S.indptr.dtype)",
    "indptr back to zero": "S = sp.csr_array(np.eye(3)); S.indptr = np.array([0, 3, 0, 3], S.indptr.dtype)",
    "csc row past the end": "S = sp.csc_array(np.eye(3)); S.indices[1] = 7",
    "coo negative row": "S = sp.coo_array(np.eye(3)); S.coords[0][1] = -1",
    "coo row past the end": "S = sp.coo_array(np.eye(3)); S.coords[0][2] = 3",
}
ENTRIES = {
    "from_scipy": "sparsegpu.from_scipy(S, backend=BACKEND)",
    "auto": "sparsegpu.from_scipy(S, format='auto', backend=BACKEND)",
    "ell": "sparsegpu.from_scipy(S, format='ell', backend=BACKEND)",
    "upload_csr": "sparsegpu.upload_csr(S, backend=BACKEND)",
    "advise": "sparsegpu.advise(S, backend=BACKEND)",
    "matrix_stats": "sparsegpu.matrix_stats(S, backend=BACKEND)",
    "out_of_core": "sparsegpu.OutOfCoreCSR(S) @ np.ones(3)",
    "cg": "sparsegpu.linalg.cg(S, np.ones(3))",
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_corrupted_scipy_matrices_raise_in_a_subprocess(entry, backend):
    """Each corruption, through each entry point: a ValueError naming the problem, then a clean
    exit (no segfault, no abort at garbage collection)."""
    if entry == "out_of_core" and backend == "cpu":
        pytest.skip("OutOfCoreCSR streams through the GPU")
    lines = ["import gc, numpy as np, scipy.sparse as sp, sparsegpu", f"BACKEND = {backend!r}"]
    for name, setup in CRASHERS.items():
        lines += [setup, "try:", f"    {ENTRIES[entry]}", f"    print('ACCEPTED', {name!r})",
                  "except ValueError as e:", f"    print('REFUSED', {name!r}, e)", "del S; gc.collect()"]
    run = subprocess.run([sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"crashed (exit {run.returncode}):\n{run.stdout}\n{run.stderr[-2000:]}"
    refused = [line for line in run.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(refused) == len(CRASHERS), run.stdout
    assert all(("indptr" in line or "row" in line or "indices" in line) for line in refused), run.stdout


# --------------------------------------------------------------------------- silent wrong answers


@pytest.mark.parametrize("fmt", FORMATS)
def test_negative_and_out_of_range_indices_are_refused(fmt, backend, rng):
    for bad in (-1, 5, 7, 2**32 + 1):
        S = small(rng)
        S.indices = S.indices.astype(np.int64)
        S.indices[0] = bad
        with pytest.raises(ValueError, match="indices holds"):
            build(S, fmt, backend)
    C = small(rng, fmt="coo")
    C.coords = (C.coords[0], np.where(np.arange(C.nnz) == 0, -1, C.coords[1]))
    with pytest.raises(ValueError, match="col holds a negative index"):
        build(C, fmt, backend)


def test_int64_indices_past_int32_are_never_wrapped(backend):
    """2^32 + 1 would wrap to the valid column 1 if it were cast to int32 unchecked."""
    S = sp.csr_array((np.array([1.0]), np.array([2**32 + 1], np.int64), np.array([0, 1], np.int64)), shape=(1, 3))
    with pytest.raises(ValueError, match="out of range for 3 columns"):
        sparsegpu.from_scipy(S, backend=backend)
    with pytest.raises(ValueError, match="out of range"):
        sparsegpu.CSR((np.array([1.0]), np.array([2**32 + 1]), np.array([0, 1])), (1, 3), backend=backend)


@pytest.mark.parametrize("fmt", ["csr", "coo"])
def test_a_matrix_never_shares_the_callers_arrays(fmt, backend, rng):
    S = small(rng, fmt=fmt)
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend)
    before = A.to_scipy().toarray()
    S.data[:] = 99.0
    assert np.array_equal(A.to_scipy().toarray(), before)
    T = A.to_scipy()
    T.data[:] = -1.0
    assert np.array_equal(A.to_scipy().toarray(), before), "to_scipy() returned A's own arrays"
    data, indices, indptr = rng.standard_normal(3), np.array([0, 1, 2]), np.array([0, 1, 3])
    B = sparsegpu.CSR((data, indices, indptr), (2, 3), backend=backend)
    data[:] = 0
    indices[:] = 0
    assert B.to_scipy().toarray()[1, 2] != 0


@pytest.mark.parametrize("value", [None, "2", True, [1.0], np.ones(2), object()])
@pytest.mark.parametrize("name", ["alpha", "beta"])
def test_scalars_must_be_numbers(name, value, backend, rng):
    A = sparsegpu.from_scipy(small(rng), backend=backend)
    xp = xp_for(backend)
    with pytest.raises((TypeError, ValueError), match=name):
        A.spmv(xp.ones(5), xp.zeros(6), **{name: value})


def test_scalars_accept_every_kind_of_number(backend, rng):
    S = small(rng)
    A = sparsegpu.from_scipy(S, backend=backend)
    xp = xp_for(backend)
    for alpha in (2, 2.0, np.float32(2), np.int64(2), np.array(2.0), 2 + 0j):
        y = A.spmv(xp.ones(5), xp.zeros(6), alpha=alpha)
        np.testing.assert_allclose(np.asarray(y.get() if hasattr(y, "get") else y), 2 * (S @ np.ones(5)))


def test_options_must_be_bools():
    for value in ("false", 0, None, 1.0):
        with pytest.raises(TypeError, match="deterministic"):
            sparsegpu.set_options(deterministic=value)
    assert sparsegpu.get_options()["deterministic"] is True
    with sparsegpu.options(deterministic=np.bool_(False)):
        assert sparsegpu.get_options()["deterministic"] is False


def test_dtypes_are_checked_and_casts_never_lose_silently(backend, rng):
    S = small(rng).astype(np.complex128)
    S.data += 1j
    with pytest.raises(TypeError, match="casting"):
        sparsegpu.from_scipy(S, dtype=np.float64, backend=backend)
    A = sparsegpu.from_scipy(S, dtype=np.float64, casting="unsafe", backend=backend)
    assert A.dtype == np.float64
    with pytest.raises(TypeError, match="float32, float64, complex64 or complex128"):
        sparsegpu.from_scipy(small(rng), dtype=np.int32, backend=backend)
    with pytest.raises(TypeError, match="dtype"):
        sparsegpu.from_scipy(small(rng), dtype="not a dtype", backend=backend)
    C = sparsegpu.from_scipy(S, backend=backend)
    with pytest.raises(TypeError, match="casting"):
        C.astype(np.float32)
    assert C.astype(np.float32, casting="unsafe").dtype == np.float32
    with pytest.raises(TypeError, match="cannot be cast safely"):
        A @ xp_for(backend).ones(5, np.complex128)


@pytest.mark.parametrize("value", [np.nan, np.inf, -1.0, "3", True])
def test_ell_max_fill_is_a_finite_non_negative_number(value, backend, rng):
    with pytest.raises((TypeError, ValueError), match="max_fill"):
        sparsegpu.from_scipy(small(rng), format="ell", backend=backend, max_fill=value)


def test_spmv_dot_refuses_y_that_overlaps_x(backend, rng):
    A = sparsegpu.from_scipy(small(rng, 5, 5), backend=backend)
    xp = xp_for(backend)
    x, dot = xp.ones(5), xp.zeros(1)
    with pytest.raises(ValueError, match="y must not overlap x"):
        A.spmv_dot(x, x, dot)
    with pytest.raises(ValueError, match="y must not overlap x"):
        A.spmv(x, x)


def test_a_read_only_y_is_refused(rng):
    A = sparsegpu.from_scipy(small(rng), backend="cpu")
    y = np.zeros(6)
    y.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        A.spmv(np.ones(5), y)


# --------------------------------------------------------------------------- unclear errors


@pytest.mark.parametrize("fmt", [None, 3, ["csr"]])
def test_format_must_be_a_string(fmt, rng):
    with pytest.raises(TypeError, match="format must be a string"):
        sparsegpu.from_scipy(small(rng), format=fmt)
    with pytest.raises(TypeError, match="format must be a string"):
        sparsegpu.from_scipy(small(rng), backend="cpu").asformat(fmt)


def test_out_of_range_indices_are_refused_at_construction(backend):
    with pytest.raises(ValueError, match="indices holds index 7"):
        sparsegpu.CSR((np.ones(2), np.array([0, 7]), np.array([0, 1, 2])), (2, 3), backend=backend)
    with pytest.raises(ValueError, match="col holds"):
        sparsegpu.COO((np.ones(2), (np.array([0, 1]), np.array([0, 7]))), (2, 3), backend=backend)


def test_convert_takes_lists_and_refuses_other_objects():
    indptr, indices, data = convert.coo_to_csr([1, 0], [2, 1], [1.0, 2.0], (2, 3))
    assert indptr.tolist() == [0, 1, 2] and indices.tolist() == [1, 2]
    for bad in (None, {"a": 1}, 3):
        with pytest.raises(TypeError, match="rows must be a NumPy or CuPy array"):
            convert.coo_to_csr(bad, [0], [1.0], (2, 3))
    with pytest.raises(ValueError, match="not monotone"):
        convert.csr_to_coo([0, 2, 1, 2], [0, 1], [1.0, 2.0])
    with pytest.raises(ValueError, match="not monotone"):
        convert.row_length_stats(np.array([0, 2, 1]))


@pytest.mark.parametrize("shape", [(2**40, 2**40), (2**36, 3)])
def test_sizes_that_cannot_fit_raise_naming_the_memory(shape, backend):
    with pytest.raises(ValueError, match="memory"):
        sparsegpu.from_scipy(sp.coo_array(shape), backend=backend)


def test_huge_widths_and_bins_raise_naming_the_memory(backend, rng):
    xp = xp_for(backend)
    with pytest.raises(ValueError, match="memory"):
        primitives.histogram(xp.arange(10.0), 2**40)
    with pytest.raises(ValueError, match="memory"):
        sparsegpu.from_scipy(small(rng, 10**6 // 10 * 10, 5), format="hyb", width=10**9, backend=backend)


def test_shapes_must_be_pairs_of_non_negative_ints(backend):
    for shape, error in (((2.5, 3), TypeError), ((-1, 3), ValueError), ((1, 2, 3), ValueError), (None, TypeError)):
        with pytest.raises(error, match="shape"):
            sparsegpu.CSR((np.ones(0), np.zeros(0, int), np.zeros(1, int)), shape, backend=backend)


def test_valid_but_unusual_input_still_gives_the_right_answer(backend, rng):
    """Unsorted indices, duplicates and explicit zeros are valid: the right product, always,
    also when SciPy's cached canonical flag is stale."""
    S = sp.csr_array((np.array([1.0, 2.0, 3.0, 0.0]), np.array([2, 0, 2, 1]), np.array([0, 3, 4])), shape=(2, 3))
    S.has_canonical_format = True  # stale, as after a change of S.indices
    x = rng.standard_normal(3)
    want = np.array([4 * x[2] + 2 * x[0], 0.0])
    for fmt in FORMATS:
        A = build(S, fmt, backend)
        got = A @ xp_for(backend).asarray(x)
        np.testing.assert_allclose(got.get() if hasattr(got, "get") else got, want, rtol=1e-12, atol=1e-12)
        assert A.nnz == 3  # the duplicate summed, the explicit zero kept
