"""The semiring objects (sparsegpu.semiring), their kernel files, and the semiring references
(sparsegpu.reference.semiring) against a dense oracle."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import semiring as sr
from sparsegpu._kernels import KernelFile
from sparsegpu.formats import _compressed, _semiring
from sparsegpu.reference import semiring as ref

PREDEFINED = list(sr.PREDEFINED.values())
IDS = [s.name for s in PREDEFINED]


def dense_oracle(S: sp.csr_array, x: np.ndarray, semiring: sr.Semiring) -> np.ndarray:
    """out[i] = fold over the stored entries of row i of mul(A[i, j], x[j]), computed densely."""
    coo = S.tocoo()
    identity = semiring.identity(S.dtype)
    terms = np.full(S.shape, identity, dtype=S.dtype)
    terms[coo.row, coo.col] = semiring.mul.apply(coo.data, x[coo.col])
    if semiring.add == sr.ANY:
        return np.logical_or.reduce(terms != 0, axis=1).astype(S.dtype)
    return semiring.add.ufunc.reduce(terms, axis=1) if S.shape[1] else np.full(S.shape[0], identity, S.dtype)


def test_predefined_names_and_parts():
    assert set(sr.PREDEFINED) == {"plus_times", "min_plus", "max_times", "any_pair", "min_second", "plus_pair",
                                  "max_plus", "min_times", "plus_min"}
    assert sr.min_plus.add == sr.MIN and sr.min_plus.mul == sr.PLUS
    assert sr.any_pair.add == sr.ANY and sr.any_pair.mul == sr.PAIR
    assert repr(sr.plus_min) == "Semiring(plus, min)"
    assert sr.Semiring(sr.MIN, sr.PLUS) == sr.min_plus and hash(sr.Semiring(sr.MIN, sr.PLUS)) == hash(sr.min_plus)
    assert sr.min_plus != sr.max_plus and sr.min_plus != "min_plus"
    assert sr.plus_times.is_plus_times and not sr.plus_pair.is_plus_times


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_identities_per_dtype(dtype):
    dt = np.dtype(dtype)
    assert sr.PLUS_MONOID.identity(dt) == 0 and sr.PLUS_MONOID.identity(dt).dtype == dt
    assert sr.ANY.identity(dt) == 0
    high = np.inf if dt.kind == "f" else np.iinfo(dt).max
    low = -np.inf if dt.kind == "f" else np.iinfo(dt).min
    assert sr.MIN.identity(dt) == high and sr.MAX.identity(dt) == low
    assert sr.MIN.identity(dt).dtype == dt


def test_binary_ops_elementwise(rng):
    a, b = rng.standard_normal(7), rng.standard_normal(7)
    assert np.array_equal(sr.TIMES.apply(a, b), a * b)
    assert np.array_equal(sr.PLUS.apply(a, b), a + b)
    assert np.array_equal(sr.FIRST.apply(a, b), a) and np.array_equal(sr.SECOND.apply(a, b), b)
    assert np.array_equal(sr.PAIR.apply(a, b), np.ones(7))
    assert np.array_equal(sr.MIN_OP.apply(a, b), np.minimum(a, b))
    assert np.array_equal(sr.MAX_OP.apply(a, b), np.maximum(a, b))
    assert sr.PAIR.apply(a.astype(np.float32), b).dtype == np.float32


def test_min_max_propagate_nan():
    values = np.array([3.0, np.nan, 1.0])
    assert np.isnan(sr.MIN.reduce(values)) and np.isnan(sr.MAX.reduce(values))
    assert np.isnan(sr.MIN_OP.apply(np.array([np.nan]), np.array([1.0]))[0])
    assert sr.MIN.reduce(np.array([], dtype=np.float64)) == np.inf


def test_any_is_a_logical_or():
    assert sr.ANY.ufunc(np.array([0.0, 2.0, 0.0]), np.array([0.0, 0.0, -1.0])).tolist() == [0.0, 1.0, 1.0]
    out = sr.ANY.ufunc.reduceat(np.array([0.0, 0.0, 5.0, 0.0]), np.array([0, 2]))
    assert out.tolist() == [0.0, 1.0] and out.dtype == np.float64


def test_as_semiring():
    assert sr.as_semiring(None) is sr.plus_times
    assert sr.as_semiring("any_pair") is sr.any_pair
    assert sr.as_semiring(sr.max_times) is sr.max_times
    with pytest.raises(ValueError, match="unknown semiring 'min_max'"):
        sr.as_semiring("min_max")
    with pytest.raises(TypeError, match="semiring must be"):
        sr.as_semiring(3)


def test_constructors_check_their_arguments():
    with pytest.raises(TypeError, match="monoid"):
        sr.Semiring(sr.TIMES, sr.TIMES)
    with pytest.raises(TypeError, match="op must be"):
        sr.Semiring(sr.MIN, sr.MIN)
    with pytest.raises(ValueError, match="name"):
        sr.BinaryOp("bad name", np.add, "a + b")
    with pytest.raises(ValueError, match="cpp"):
        sr.BinaryOp("evil", np.add, "a; }")
    with pytest.raises(ValueError, match="cpp"):
        sr.BinaryOp("empty", np.add, "  ")
    with pytest.raises(TypeError, match="apply"):
        sr.BinaryOp("notcallable", 3, "a")
    with pytest.raises(ValueError, match="name"):
        sr.Monoid("2x", np.add, lambda dt: 0, "x")


def test_user_op_source_and_cpp_spelling():
    hop = sr.BinaryOp("hop", lambda a, b: b + 1, "b + V(1)")
    assert not hop.builtin and hop.cpp.startswith("UserOp_hop_")
    assert "struct " + hop.cpp in hop.source() and "return V(b + V(1));" in hop.source()
    assert sr.TIMES.source() == ""
    s = sr.Semiring(sr.MIN, hop)
    assert s.cpp == f"sg::Semiring<{{V}}, sg::MonoidMin, {hop.cpp}>" and s.name == "min_hop"
    other = sr.BinaryOp("hop", lambda a, b: b + 2, "b + V(2)")
    assert other != hop and other.cpp != hop.cpp  # the expression is part of the kernel's name


def test_semiring_kernel_files_are_separate_and_registered():
    arithmetic = " ".join(_compressed.GATHER_KERNELS.expressions)
    assert "semiring" not in arithmetic and "Semiring" not in arithmetic
    registered = {(k.filename, e) for k in KernelFile.registry for e in k.expressions}
    for s in PREDEFINED:
        for template in _compressed.SEMIRING_GATHER:
            assert ("spmv_csr.cu", template.replace("{S}", s.cpp)) in registered
    files = _semiring.semiring_kernels(sr.min_plus, "spmv_csr.cu", _compressed.SEMIRING_GATHER)
    assert files is _semiring.semiring_kernels(sr.min_plus, "spmv_csr.cu", _compressed.SEMIRING_GATHER)
    assert [str(d) for d in files.value_dtypes] == ["float32", "float64"]
    plus_times = _semiring.semiring_kernels(sr.plus_times, "spmv_csr.cu", _compressed.SEMIRING_GATHER)
    assert np.dtype(np.complex128) in plus_times.value_dtypes


def test_user_kernel_file_carries_its_functor_and_stays_unregistered():
    hop = sr.BinaryOp("hop2", lambda a, b: b + 1, "b + V(1)")
    files = _semiring.semiring_kernels(sr.Semiring(sr.MIN, hop), "spmv_csr.cu", _compressed.SEMIRING_GATHER)
    assert files.prefix == hop.source() and files not in KernelFile.registry
    assert all(hop.cpp in e for e in files.expressions)


def test_emitted_units_put_prefixes_before_the_source(tmp_path):
    hop = sr.BinaryOp("hop3", lambda a, b: a - b, "a - b")
    files = KernelFile("spmv_ell.cu", ["ell_semiring_spmv<{V}, {I}, " + sr.Semiring(sr.MAX, hop).cpp + ">"],
                       (np.float64,), prefix=hop.source())
    try:
        from sparsegpu._kernels import emit_instantiation_units

        unit = next(p for p in emit_instantiation_units(tmp_path) if p.name == "instantiate_spmv_ell.cu")
        text = unit.read_text()
        assert text.index(hop.cpp) < text.index('#include') and f"{hop.cpp}>>" in text
    finally:
        KernelFile.registry.remove(files)


# --------------------------------------------------------------------------- references


def random_csr(rng, m, n, density, dtype=np.float64, empty_rows=True):
    S = sp.random(m, n, density=density, format="csr", random_state=rng, dtype=np.float64)
    S.data = rng.uniform(-2.0, 3.0, S.nnz)
    if empty_rows and m > 2:
        keep = np.ones(m, bool)
        keep[rng.choice(m, m // 4, replace=False)] = False
        S = sp.csr_array(sp.diags(keep.astype(float)) @ S)
        S.eliminate_zeros()
    S = sp.csr_array(S.astype(dtype))
    S.sort_indices()
    return S


@pytest.mark.parametrize("semiring", PREDEFINED, ids=IDS)
def test_csr_reference_matches_dense_oracle(rng, semiring):
    S = random_csr(rng, 30, 25, 0.2)
    x = rng.uniform(-1.0, 2.0, 25)
    y = np.full(30, np.nan)
    ref.csr_semiring_spmv(S.indptr, S.indices, S.data, x, y, semiring.add.ufunc, semiring.mul.apply,
                          semiring.identity(S.dtype))
    expected = dense_oracle(S, x, semiring)
    if semiring.add == sr.PLUS_MONOID:
        np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)
    else:
        assert np.array_equal(y, expected)


def test_csr_reference_mask_presence_and_hits(rng):
    S = random_csr(rng, 40, 30, 0.15)
    x = rng.uniform(0.0, 1.0, 30)
    present = (rng.random(30) < 0.3).astype(np.uint8)
    mask = (rng.random(40) < 0.6).astype(np.uint8)
    for complement in (False, True):
        y = np.full(40, -7.0)
        hit = np.full(40, 9, np.uint8)
        ref.csr_semiring_spmv(S.indptr, S.indices, S.data, x, y, np.minimum, np.add, np.inf, mask, complement,
                              present, hit)
        allowed = (mask != 0) != complement
        dense = S.toarray()
        pattern = (sp.csr_array((np.ones(S.nnz), S.indices, S.indptr), shape=S.shape).toarray() != 0)
        counted = pattern & (present[None, :] != 0)
        expected_hit = allowed & counted.any(axis=1)
        assert np.array_equal(hit, expected_hit.astype(np.uint8))
        expected = np.where(counted, dense + x[None, :], np.inf).min(axis=1)
        assert np.array_equal(y[allowed], expected[allowed])
        assert np.all(y[~allowed] == -7.0)  # not computed


def test_ell_and_sell_references_over_their_layouts(rng):
    S = random_csr(rng, 37, 29, 0.2)
    x = rng.uniform(-1.0, 1.0, 29)
    mask = (rng.random(37) < 0.5).astype(np.uint8)
    expected = dense_oracle(S, x, sr.max_plus)
    allowed = mask != 0
    A = sparsegpu.from_scipy(S, format="ell", backend="cpu", max_fill=None)
    y = np.full(37, -5.0)
    ref.ell_semiring_spmv(A.indices, A.data, A.width, 37, x, y, np.maximum, np.add, -np.inf, mask)
    assert np.array_equal(y[allowed], expected[allowed]) and np.all(y[~allowed] == -5.0)
    B = sparsegpu.from_scipy(S, format="sell", backend="cpu", C=4, sigma=8, split=0, hot=0)
    assert B.mode == "direct"
    y = np.full(37, -5.0)
    ref.sell_semiring_spmv(B.slice_ptr, B.indices, B.data, B.perm, B.C, 37, x, y, np.maximum, np.add, -np.inf,
                           mask, True)
    assert np.array_equal(y[~allowed], expected[~allowed]) and np.all(y[allowed] == -5.0)
