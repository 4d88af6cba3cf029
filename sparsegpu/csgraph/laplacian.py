"""Graph Laplacian, as :func:`scipy.sparse.csgraph.laplacian`.

Host input (scipy sparse, NumPy, a CPU sparsegpu matrix) goes to SciPy whatever the backend:
the Laplacian is one pass over the entries, less work than moving them to the device and back.
A GPU sparsegpu matrix gets its Laplacian built on the device as a sparsegpu CSR.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as scipy_csgraph

from sparsegpu import _validate, convert
from sparsegpu._backend import resolve_backend
from sparsegpu.csgraph._graph import check_choice, check_square
from sparsegpu.formats import CSR, SparseMatrix

__all__ = ["laplacian"]

FORMS = ("array", "function", "lo")


def laplacian(csgraph: Any, normed: bool = False, return_diag: bool = False, use_out_degree: bool = False, *,
              copy: bool = True, form: str = "array", dtype: Any = None, symmetrized: bool = False,
              backend: str | None = None) -> Any:
    """The Laplacian ``D - A`` of a graph (or its normalised form), SciPy's conventions.

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency; its values are used as they are (the edge rules of the other
        functions do not apply: SciPy's Laplacian is arithmetic on the entries) and its
        diagonal is ignored.
    normed : bool, optional
        The symmetrically normalised Laplacian ``I - D^-1/2 A D^-1/2`` (default False);
        isolated vertices get 0 on the diagonal and a scale of 1.
    return_diag : bool, optional
        Also return the degrees (their square roots when ``normed``).
    use_out_degree : bool, optional
        Degrees as row sums (out-degrees) instead of column sums (in-degrees, the default).
    copy : bool, optional
        As in SciPy (False lets SciPy work in the input's memory for host input).
    form : {"array", "function", "lo"}, optional
        The Laplacian as a matrix (default), as a function ``v -> L @ v`` (SciPy's takes
        2-D column blocks; the GPU's takes vectors and column blocks), or as a linear
        operator (SciPy's ``LinearOperator``; ``cupyx.scipy.sparse.linalg.LinearOperator`` for
        a GPU matrix).
    dtype : dtype, optional
        The result's dtype (default: the input's; float64 for integer input with ``normed``).
        For a GPU matrix one of float32, float64, complex64, complex128.
    symmetrized : bool, optional
        Use ``A + A^H`` (default False).
    backend : {"cpu", "gpu"}, optional
        Checked for symmetry with the other functions; host input always goes to SciPy.

    Returns
    -------
    lap : ndarray, sparse matrix, function or linear operator
        Host input: exactly SciPy's result (a COO matrix or array for sparse input, a dense
        array for dense input). GPU matrix: a sparsegpu CSR on the GPU storing every
        off-diagonal entry of A and all N diagonal entries.
    diag : ndarray
        The degrees (square roots of them when ``normed``); only with ``return_diag``. CuPy
        for a GPU matrix.

    Raises
    ------
    TypeError
        ``csgraph`` not a matrix or array, a flag not a bool, ``form`` not a string, an
        unsupported ``dtype``.
    ValueError
        ``csgraph`` not square or 2-D, corrupted sparse arrays, an unknown ``form``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph import laplacian
    >>> G = sp.csr_array(np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]]))
    >>> laplacian(G, backend="cpu").toarray().tolist()
    [[2, -1, -1], [-1, 1, 0], [-1, 0, 1]]
    >>> L, d = laplacian(G.toarray(), normed=True, return_diag=True, backend="cpu")
    >>> np.round(d ** 2, 12).tolist()
    [2.0, 1.0, 1.0]
    """
    flags = {name: _validate.check_bool(name, value) for name, value in (
        ("normed", normed), ("return_diag", return_diag), ("use_out_degree", use_out_degree), ("copy", copy),
        ("symmetrized", symmetrized))}
    form = check_choice("form", form, FORMS)
    if backend is not None:
        resolve_backend(backend)
    if isinstance(csgraph, SparseMatrix) and csgraph.backend == "gpu":
        check_square(csgraph.shape)
        target = csgraph.dtype if dtype is None else _validate.requested_value_dtype(dtype)
        lap, diag = _device_laplacian(csgraph, flags["normed"], flags["use_out_degree"], flags["symmetrized"],
                                      np.dtype(target))
        lap = _shaped(lap, form)
        return (lap, diag) if flags["return_diag"] else lap
    host = _host_input(csgraph)
    if dtype is not None:
        dtype = _validate._as_dtype("dtype", dtype)
    return scipy_csgraph.laplacian(host, form=form, dtype=dtype, **flags)


def _host_input(csgraph: Any) -> Any:
    """``csgraph`` checked for SciPy: a scipy matrix (arrays validated), a sparsegpu CPU matrix
    as scipy, or a square 2-D numeric array."""
    if isinstance(csgraph, SparseMatrix):
        check_square(csgraph.shape)
        return csgraph.to_scipy()
    if sp.issparse(csgraph):
        _validate.check_scipy(csgraph)
        _no_bool(csgraph.dtype)
        check_square(csgraph.shape)
        return csgraph
    if isinstance(csgraph, (str, bytes, dict, set)) or csgraph is None or np.isscalar(csgraph):
        raise TypeError(f"csgraph must be a sparse matrix or a 2-D array, got {type(csgraph).__name__}")
    array = csgraph if isinstance(csgraph, np.ndarray) else np.asarray(csgraph)  # array_like: SciPy needs .ndim
    if array.dtype.kind not in "biufc":
        raise TypeError(f"csgraph must hold numbers, got dtype {array.dtype}")
    _no_bool(array.dtype)
    check_square(array.shape)
    return array


def _no_bool(dtype: np.dtype) -> None:
    """SciPy's Laplacian writes degrees into the input's dtype, which a bool cannot hold."""
    if dtype.kind == "b":
        raise TypeError("csgraph has dtype bool, which cannot hold degrees; cast it first, e.g. "
                        "csgraph.astype(np.int8)")


def _device_laplacian(A: SparseMatrix, normed: bool, out_degree: bool, symmetrized: bool,
                      dtype: np.dtype) -> tuple[CSR, Any]:
    """(L, degrees) of a GPU matrix, on the device. Degrees are the off-diagonal row (column)
    sums, computed as products with a vector of ones: deterministic."""
    import cupy

    n = A.shape[0]
    csr = A.to_csr()
    rows, cols, data = convert.expand_pointers(csr.indptr, cupy), csr.indices, csr.data
    if symmetrized:
        rows, cols = cupy.concatenate([rows, cols]), cupy.concatenate([cols, rows])
        data = cupy.concatenate([data, data.conj()])
    index_dt = _validate.index_dtype((n, n), int(rows.size) + n)
    indptr, indices, values = convert.coo_to_csr(rows.astype(index_dt), cols.astype(index_dt), data, (n, n),
                                                 index_dtype=index_dt)
    rows = convert.expand_pointers(indptr, cupy)
    off = rows != indices
    summed = CSR((cupy.where(off, values, 0), indices, indptr), (n, n), check=False)
    ones = cupy.ones(n, dtype=values.dtype)
    degrees = summed @ ones if out_degree else summed.T @ ones
    off_rows, off_cols, off_values = rows[off], indices[off], values[off]
    if normed:
        isolated = degrees == 0
        scale = cupy.where(isolated, 1, cupy.sqrt(degrees))
        off_values = -(off_values / scale[off_rows] / scale[off_cols])
        diagonal, degrees = (~isolated).astype(values.dtype), scale
    else:
        off_values, diagonal = -off_values, degrees
    every = cupy.arange(n, dtype=index_dt)
    lap_indptr, lap_indices, lap_values = convert.coo_to_csr(
        cupy.concatenate([off_rows.astype(index_dt), every]), cupy.concatenate([off_cols, every]),
        cupy.concatenate([off_values, diagonal]), (n, n), index_dtype=index_dt)
    lap = CSR((lap_values, lap_indices, lap_indptr), (n, n), dtype=dtype, check=False, casting="unsafe")
    return lap, _validate.cast_values(degrees, dtype)


def _shaped(lap: CSR, form: str) -> Any:
    if form == "array":
        return lap
    if form == "function":
        return lambda v: _apply(lap, v)
    import cupyx.scipy.sparse.linalg as device_linalg

    return device_linalg.LinearOperator(lap.shape, matvec=lambda v: lap @ v, dtype=lap.dtype)


def _apply(lap: CSR, v: Any) -> Any:
    """``lap @ v`` for a vector, or column by column for a 2-D block (SciPy's function form
    takes column vectors)."""
    if v.ndim == 1:
        return lap @ v
    import cupy

    return cupy.stack([lap @ v[:, j] for j in range(v.shape[1])], axis=1)
