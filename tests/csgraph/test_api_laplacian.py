"""laplacian: SciPy's result for host input; the same matrix built on the device for a GPU
matrix."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as scipy_csgraph

import sparsegpu
from sparsegpu import csgraph
from tests.csgraph.graphs import random_digraph, real_graph, real_params

FLAGS = list(itertools.product((False, True), (False, True), (False, True)))  # normed, out-degree, symmetrized


def assert_equal_result(ours, expected) -> None:
    assert type(ours) is type(expected) and ours.dtype == expected.dtype
    if sp.issparse(expected):
        assert (sp.csr_array(ours) != sp.csr_array(expected)).nnz == 0
    else:
        assert np.array_equal(ours, expected)


@pytest.mark.parametrize("normed, use_out_degree, symmetrized", FLAGS)
def test_host_input_is_scipys_result(rng, normed, use_out_degree, symmetrized):
    S = sp.csr_array(random_digraph(rng, n=60))
    inputs = [S, sp.csr_matrix(S), S.tocoo(), S.toarray(), sp.csr_array(S.astype(np.int64) * 0 + (S != 0))]
    for graph in inputs:
        ours, diag = csgraph.laplacian(graph.copy(), normed, True, use_out_degree, symmetrized=symmetrized,
                                       backend="cpu")
        expected, expected_diag = scipy_csgraph.laplacian(graph.copy(), normed, True, use_out_degree,
                                                          symmetrized=symmetrized)
        assert_equal_result(ours, expected)
        assert np.array_equal(diag, expected_diag)


def test_forms_and_dtype(rng):
    S = sp.csr_array(random_digraph(rng, n=40))
    x = rng.standard_normal(40)
    expected = scipy_csgraph.laplacian(S, normed=True)
    for form in ("function", "lo"):
        operator = csgraph.laplacian(S, normed=True, form=form, backend="cpu")
        # SciPy's sparse function and operator forms work on column blocks (its matvec on a
        # vector fails in SciPy 1.17), so both are given one column
        result = operator(x[:, None]) if form == "function" else operator.matmat(x[:, None])
        np.testing.assert_allclose(np.ravel(result), expected @ x, rtol=1e-12, atol=1e-12)
    assert csgraph.laplacian(S, dtype=np.float32, backend="cpu").dtype == np.float32
    A = sparsegpu.from_scipy(S, backend="cpu")
    assert_equal_result(csgraph.laplacian(A), scipy_csgraph.laplacian(A.to_scipy()))


@pytest.mark.parametrize("name", real_params())
def test_real_graphs(name):
    S = real_graph(name, weighted=True)
    assert_equal_result(csgraph.laplacian(S, normed=True, backend="cpu"), scipy_csgraph.laplacian(S, normed=True))


@pytest.mark.gpu
@pytest.mark.parametrize("normed, use_out_degree, symmetrized", FLAGS)
def test_gpu_laplacian_equals_scipy(rng, normed, use_out_degree, symmetrized):
    import cupy

    for n in (0, 1, 300):
        S = sp.csr_array(random_digraph(rng, n=n)) if n > 1 else sp.csr_array(np.full((n, n), 2.0))
        A = sparsegpu.from_scipy(S, backend="gpu")
        lap, diag = csgraph.laplacian(A, normed, True, use_out_degree, symmetrized=symmetrized)
        expected, expected_diag = scipy_csgraph.laplacian(S, normed, True, use_out_degree, symmetrized=symmetrized)
        assert isinstance(lap, sparsegpu.CSR) and lap.backend == "gpu" and isinstance(diag, cupy.ndarray)
        np.testing.assert_allclose(lap.to_scipy().toarray(), expected.toarray(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(diag.get(), expected_diag, rtol=1e-12, atol=1e-14)
        x = cupy.asarray(rng.standard_normal(n))
        for form in ("function", "lo"):
            operator = csgraph.laplacian(A, normed, form=form, use_out_degree=use_out_degree, symmetrized=symmetrized)
            apply = operator if form == "function" else operator.matvec
            np.testing.assert_allclose(apply(x).get(), expected @ x.get(), rtol=1e-11, atol=1e-12)
            if form == "function":
                block = operator(x[:, None]).get()
                assert block.shape == (n, 1)
                np.testing.assert_allclose(block[:, 0], expected @ x.get(), rtol=1e-11, atol=1e-12)
    A32 = sparsegpu.from_scipy(S, backend="gpu", dtype=np.float32)
    assert csgraph.laplacian(A32).dtype == np.float32
    assert csgraph.laplacian(A, dtype=np.float32).dtype == np.float32


def test_nested_list_gives_the_arrays_result(rng):
    """A 2-D array_like is read as an array (SciPy's own laplacian needs ``.ndim``)."""
    dense = rng.integers(0, 3, size=(5, 5))
    for normed in (False, True):
        got = csgraph.laplacian(dense.tolist(), normed=normed, backend="cpu")
        np.testing.assert_array_equal(got, scipy_csgraph.laplacian(dense.copy(), normed=normed))


@pytest.mark.parametrize("as_sparse", [False, True])
def test_bool_graph_is_refused_naming_csgraph(rng, as_sparse):
    """SciPy fails inside a ufunc on bool input (it writes degrees into the input's dtype)."""
    dense = rng.random((4, 4)) < 0.5
    graph = sp.csr_array(dense) if as_sparse else dense
    with pytest.raises(TypeError, match="csgraph has dtype bool"):
        csgraph.laplacian(graph, backend="cpu")
