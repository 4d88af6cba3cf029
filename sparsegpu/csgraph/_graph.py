"""Inputs of the csgraph functions turned into one canonical graph, and results turned back.

A :class:`Graph` is a CSR adjacency on one backend: sorted column indices, no duplicates,
float64 weights, int32 indices when every index fits (else int64). The edge rules are SciPy's
(checked against SciPy's csgraph):

- sparse input (scipy or sparsegpu): every stored entry is an edge, an explicit 0 included (an
  edge of weight 0); duplicates are summed (SciPy sums a COO's duplicates and reads a CSR's as
  parallel edges; the canonical form gives both the COO's reading);
- dense input: 0, inf and NaN are "no edge"; a masked array's masked entries are "no edge";
- ``directed=False`` reads each edge both ways, with the smaller weight where both directions
  are stored (:meth:`Graph.undirected`); self loops stay as stored.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate, convert
from sparsegpu._backend import (
    Backend,
    array_module,
    is_device_array,
    resolve_backend,
    to_backend,
    to_host,
)
from sparsegpu.formats import CSR, SparseMatrix
from sparsegpu.formats._base import canonical_scipy

#: SciPy's marker for "no predecessor" (the source, and vertices not reached).
NO_PREDECESSOR = -9999


@dataclass(eq=False)
class Graph:
    """A canonical CSR adjacency (``indptr``, ``indices``, float64 ``weights``) of ``n`` vertices
    on ``backend``, and where results go: CuPy arrays and sparsegpu CSR matrices when the input
    was a GPU sparsegpu matrix (``device_input``), else NumPy arrays and SciPy sparse types
    (``csr_matrix`` for a scipy ``spmatrix`` input, ``csr_array`` otherwise)."""

    indptr: Any
    indices: Any
    weights: Any
    n: int
    backend: Backend
    device_input: bool = False
    matrix_input: bool = False
    _cache: dict[str, Any] = field(default_factory=dict)

    @property
    def xp(self) -> Any:
        return array_module(self.backend)

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    def _derived(self, indptr: Any, indices: Any, weights: Any) -> Graph:
        return Graph(indptr, indices, weights, self.n, self.backend, self.device_input, self.matrix_input)

    def transpose(self) -> Graph:
        """The reversed graph (its CSR is this one's CSC), built once and cached."""
        if "transpose" not in self._cache:
            arrays = convert.swap_major(self.indptr, self.indices, self.weights, self.n, self.xp)
            self._cache["transpose"] = self._derived(*arrays)
        return self._cache["transpose"]

    def undirected(self) -> Graph:
        """A u A^T with the smaller weight of the two directions where both are stored; built
        once and cached (the result is its own undirected graph)."""
        if "undirected" not in self._cache:
            result = self._derived(*symmetrise_min(self.indptr, self.indices, self.weights, self.n, self.xp))
            result._cache["undirected"] = result
            result._cache["symmetric"] = result._cache["structurally_symmetric"] = True
            self._cache["undirected"] = result
        return self._cache["undirected"]

    def assume_symmetric(self) -> Graph:
        """Record that the graph equals its transpose, weights included, as an undirected
        graph's adjacency does by construction: it is its own transpose and undirected graph,
        and nothing is built to find out. Returns the graph."""
        self._cache["symmetric"] = self._cache["structurally_symmetric"] = True
        self._cache["transpose"] = self._cache["undirected"] = self
        return self

    def is_structurally_symmetric(self) -> bool:
        """Whether every edge's reverse is stored too (the structure, not the weights); the
        transpose is built to decide, once, and the answer is cached."""
        if "structurally_symmetric" not in self._cache:
            reverse = self.transpose()
            self._cache["structurally_symmetric"] = bool((reverse.indptr == self.indptr).all()) and bool(
                (reverse.indices == self.indices).all())
        return self._cache["structurally_symmetric"]

    def known_structurally_symmetric(self) -> bool:
        """Whether the structure is known to be symmetric without building anything."""
        return bool(self._cache.get("structurally_symmetric", False)) or self.known_symmetric()

    def known_symmetric(self) -> bool:
        """Whether the graph is known to equal its transpose, weights included (an undirected
        graph built here), without building anything."""
        return bool(self._cache.get("symmetric", False))

    def without_zero_weights(self) -> Graph:
        """The graph less its zero-weight edges (itself when it has none)."""
        keep = self.weights != 0
        if bool(keep.all()):
            return self
        rows = convert.expand_pointers(self.indptr, self.xp)[keep]
        indptr = convert.compress(rows, self.n, self.indptr.dtype, self.xp)
        return self._derived(indptr, self.indices[keep], self.weights[keep])

    def oriented(self, directed: bool) -> Graph:
        """This graph for ``directed=True``, its undirected graph otherwise."""
        return self if directed else self.undirected()

    def to_scipy(self) -> sp.csr_array:
        """The graph as a scipy ``csr_array`` on the host (sharing the arrays on the CPU)."""
        if "scipy" not in self._cache:
            arrays = tuple(to_host(a) for a in (self.weights, self.indices, self.indptr))
            S = sp.csr_array(arrays, shape=(self.n, self.n), copy=False)
            S.has_sorted_indices = True
            S.has_canonical_format = True
            self._cache["scipy"] = S
        return self._cache["scipy"]

    def has_negative_weight(self) -> bool:
        if "negative" not in self._cache:
            self._cache["negative"] = bool(self.nnz and (self.weights < 0).any())
        return self._cache["negative"]

    def check_weights(self, function: str) -> None:
        """Weights a weighted algorithm can read: NaN raises ValueError naming ``function``."""
        if self.nnz and bool(self.xp.isnan(self.weights).any()):
            raise ValueError(f"{function}: csgraph holds NaN weights; a weighted graph algorithm cannot order them")

    def edge_weights(self, rows: Any, cols: Any) -> Any:
        """The weight of each stored edge (rows[k], cols[k]) (edges known to exist)."""
        xp = self.xp
        if "edge_keys" not in self._cache:
            major = convert.expand_pointers(self.indptr, xp).astype(np.int64)
            self._cache["edge_keys"] = major * max(self.n, 1) + self.indices.astype(np.int64)
        keys = rows.astype(np.int64) * max(self.n, 1) + cols.astype(np.int64)
        return self.weights[xp.searchsorted(self._cache["edge_keys"], keys)]

    # ------------------------------------------------------------------ results
    def output(self, a: Any) -> Any:
        """An array result where the caller expects it: CuPy for device input, else NumPy."""
        return to_backend(a, "gpu") if self.device_input else to_host(a)

    def sparse_output(self, rows: Any, cols: Any, data: Any, *, drop_zeros: bool = False) -> Any:
        """An n x n result with entries (rows, cols, data): a sparsegpu CSR on the GPU for device
        input, else SciPy's type (see the class docstring); ``drop_zeros`` removes zero entries."""
        if self.device_input:
            rows, cols, data = (to_backend(a, "gpu") for a in (rows, cols, data))
            if drop_zeros:
                keep = data != 0
                rows, cols, data = rows[keep], cols[keep], data[keep]
            index_dt = _validate.index_dtype((self.n, self.n), int(rows.size))
            indptr, indices, values = convert.coo_to_csr(rows.astype(index_dt), cols.astype(index_dt),
                                                         data.astype(np.float64), (self.n, self.n),
                                                         index_dtype=index_dt)
            return CSR((values, indices, indptr), (self.n, self.n), check=False)
        rows, cols, data = (to_host(a) for a in (rows, cols, data))
        result = sp.csr_array((data, (rows, cols)), shape=(self.n, self.n))
        if drop_zeros:
            result.eliminate_zeros()
        return sp.csr_matrix(result) if self.matrix_input else result

    def scipy_type(self, S: Any) -> Any:
        """A SciPy sparse result ``S`` of this graph's host type; moved to a sparsegpu GPU CSR
        for device input."""
        if self.device_input:
            return CSR.from_scipy(S, backend="gpu")
        S = sp.csr_array(S)
        return sp.csr_matrix(S) if self.matrix_input else S


def symmetrise_min(indptr: Any, indices: Any, weights: Any, n: int, xp: Any) -> tuple[Any, Any, Any]:
    """CSR arrays of A u A^T, keeping the smaller weight where (i, j) and (j, i) are both stored.

    One sort of the 2 nnz keys ``row * n + col`` (each key occurs at most twice, A being
    canonical), then the first of each run, its weight the minimum of the run: deterministic
    whatever the sort's stability."""
    rows = convert.expand_pointers(indptr, xp).astype(np.int64)
    cols = indices.astype(np.int64)
    width = max(n, 1)
    keys = xp.concatenate([rows * width + cols, cols * width + rows])
    both = xp.concatenate([weights, weights])
    order = xp.argsort(keys)
    keys, both = keys[order], both[order]
    first = xp.ones(keys.size, dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    if keys.size > 1:
        paired = xp.zeros(keys.size, dtype=bool)
        paired[:-1] = ~first[1:]
        following = xp.concatenate([both[1:], both[-1:]])
        both = xp.where(paired, xp.minimum(both, following), both)
    keep = xp.flatnonzero(first)
    keys, both = keys[keep], both[keep]
    index_dt = _validate.index_dtype((n, n), int(keys.size))
    new_indptr = convert.compress(keys // width, n, index_dt, xp)
    return new_indptr, (keys % width).astype(index_dt), both


# --------------------------------------------------------------------------- input


def as_graph(csgraph: Any, backend: str | None = None, *, name: str = "csgraph") -> Graph:
    """``csgraph`` (scipy sparse, dense NumPy / array-like, or a sparsegpu matrix) as a checked
    canonical :class:`Graph`. A sparsegpu matrix stays on its backend (``backend``, when given,
    must name it); other input goes to ``backend`` (default :func:`sparsegpu.backend`)."""
    if isinstance(csgraph, SparseMatrix):
        return _from_sparsegpu(csgraph, backend, name)
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"backend must be 'cpu', 'gpu' or None, not {backend!r}")
    if sp.issparse(csgraph):
        return _from_scipy(csgraph, resolve_backend(backend), name)
    if is_device_array(csgraph):
        raise TypeError(f"{name} is a dense CuPy array; for device input pass a sparsegpu matrix "
                        f"(sparsegpu.CSR.from_scipy(..., backend='gpu'))")
    return _from_dense(csgraph, resolve_backend(backend), name)


def check_square(shape: tuple[int, ...], name: str = "csgraph") -> int:
    if len(shape) != 2:
        raise ValueError(f"{name} must be 2-D, got {len(shape)}-D")
    if shape[0] != shape[1]:
        raise ValueError(f"{name} must be square (N, N), got shape {tuple(shape)}")
    return int(shape[0])


def check_real(dtype: Any, name: str = "csgraph") -> None:
    dt = np.dtype(dtype)
    if dt.kind == "c":
        raise TypeError(f"{name} has complex values ({dt}); graph weights must be real")
    if dt.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers, got dtype {dt}")


def _from_sparsegpu(A: SparseMatrix, backend: str | None, name: str) -> Graph:
    """The matrix's graph, built once and cached on the matrix (with its transposed and undirected
    forms), so repeated calls on one matrix pay for neither a copy nor a sort. A CSR whose rows
    are already sorted and free of duplicates is used as it is (its values cast to float64)."""
    if backend is not None and backend != A.backend:
        raise ValueError(f"{name} is a sparsegpu matrix on the {A.backend.upper()}; backend={backend!r} "
                         f"cannot move it (leave backend=None, or convert the matrix first)")
    n = check_square(A.shape, name)
    check_real(A.dtype, name)
    cached = A._cache.get("csgraph")
    if cached is not None:
        return cached
    csr = A.to_csr()
    xp = array_module(A.backend)
    if strictly_increasing_rows(csr.indptr, csr.indices):
        arrays = (csr.indptr, csr.indices, csr.data.astype(np.float64, copy=False))
    else:
        rows = convert.expand_pointers(csr.indptr, xp)
        index_dt = _validate.index_dtype((n, n), csr.nnz)
        arrays = convert.coo_to_csr(rows.astype(index_dt), csr.indices.astype(index_dt),
                                    csr.data.astype(np.float64), (n, n), index_dtype=index_dt)
    graph = Graph(*arrays, n, A.backend, device_input=A.backend == "gpu")
    A._cache["csgraph"] = graph
    return graph


def strictly_increasing_rows(indptr: Any, indices: Any) -> bool:
    """Whether every row's indices strictly increase (sorted, no duplicates); NumPy or CuPy."""
    if indices.size < 2:
        return True
    increasing = indices[1:] > indices[:-1]
    starts = indptr[1:-1].astype(np.int64)
    starts = starts[(starts > 0) & (starts < indices.size)]
    increasing[starts - 1] = True  # a pair across a row boundary may go down
    return bool(increasing.all())


def _from_scipy(S: Any, backend: Backend, name: str) -> Graph:
    S = _validate.check_scipy(S)
    n = check_square(S.shape, name)
    check_real(S.dtype, name)
    canonical = _borrowed(S)
    if canonical is None:
        canonical = canonical_scipy(S, "csr", dtype=np.float64, checked=True)
    arrays = (to_backend(a, backend) for a in (canonical.indptr, canonical.indices, canonical.data))
    return Graph(*arrays, n, backend, matrix_input=isinstance(S, sp.spmatrix))


def _borrowed(S: Any) -> sp.csr_array | None:
    """A checked float64 CSR already in canonical form, as a view of its own arrays (None for any
    other input). The graph of a scipy input lives for one call and no algorithm writes to it,
    so sharing is safe, and a copy would cost as much as SciPy's own traversal."""
    if S.format != "csr" or S.dtype != np.float64:
        return None
    if not S.indices.dtype == S.indptr.dtype == _validate.index_dtype(S.shape, S.nnz):
        return None
    if not _validate.is_canonical(S.indptr, S.indices):
        return None
    view = sp.csr_array((S.data, S.indices, S.indptr), shape=S.shape, copy=False)
    view.has_sorted_indices = view.has_canonical_format = True
    return view


def _from_dense(a: Any, backend: Backend, name: str) -> Graph:
    if isinstance(a, np.ma.MaskedArray):
        values, edge = np.asarray(a.data), ~np.ma.getmaskarray(a)
    else:
        if isinstance(a, (str, bytes, dict, set, numbers.Number)) or a is None:
            raise TypeError(f"{name} must be a scipy sparse matrix, a sparsegpu matrix or a 2-D array, "
                            f"got {type(a).__name__}")
        try:
            values = np.asarray(a)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} cannot be read as an array: {exc}") from None
        edge = None
    check_real(values.dtype, name)
    n = check_square(values.shape, name)
    values = values.astype(np.float64, copy=False)
    if edge is None:
        edge = (values != 0) & np.isfinite(values)
    rows, cols = np.nonzero(edge)
    index_dt = _validate.index_dtype((n, n), rows.size)
    indptr = np.zeros(n + 1, dtype=index_dt)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    arrays = (to_backend(x, backend) for x in (indptr, cols.astype(index_dt), values[rows, cols]))
    return Graph(*arrays, n, backend)


# --------------------------------------------------------------------------- arguments


def check_vertex(name: str, value: Any, n: int) -> int:
    """A single vertex index in [0, n): an integer (Python or NumPy), not a bool."""
    vertex = _validate.check_int(name, value, minimum=0)
    if vertex >= n:
        raise ValueError(f"{name} = {vertex} is out of range for a graph of {n} vertices")
    return vertex


def check_sources(indices: Any, n: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """``indices`` as a flat int64 host array in [0, n) (negative ones count from the end, as in
    SciPy) and the shape the output's leading axes take; None means every vertex."""
    if indices is None:
        return np.arange(n, dtype=np.int64), (n,)
    if is_device_array(indices):
        indices = indices.get()
    if isinstance(indices, (bool, np.bool_)):
        raise TypeError(f"indices must be integers, got {indices!r}")
    try:
        array = np.asarray(indices)
    except (TypeError, ValueError):
        raise TypeError(f"indices must be an integer or an array of integers, got {type(indices).__name__}") from None
    if array.dtype.kind not in "iu" and not (array.size == 0 and array.dtype.kind == "f"):
        raise TypeError(f"indices must be integers, got dtype {array.dtype}")
    flat = array.astype(np.int64).reshape(-1)
    flat = np.where(flat < 0, flat + n, flat)
    if flat.size and (flat.min() < 0 or flat.max() >= n):
        bad = int(array.reshape(-1)[int(np.argmax((flat < 0) | (flat >= n)))])
        raise ValueError(f"indices holds {bad}, out of range for a graph of {n} vertices")
    return flat, array.shape


def check_limit(limit: Any) -> float:
    value = _validate.check_number("limit", limit)
    if isinstance(value, (complex, np.complexfloating)):
        raise TypeError(f"limit must be a real number, got {value!r}")
    value = float(value)
    if np.isnan(value) or value < 0:
        raise ValueError(f"limit must be >= 0, got {value}")
    return value


def check_choice(name: str, value: Any, choices: tuple[str, ...], *, fold_case: bool = False) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {choices}, got {type(value).__name__} {value!r}")
    key = value.lower() if fold_case else value
    if key not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return key


def check_output_size(rows: int, n: int, backend: str, what: str) -> None:
    """Refuse, before allocating, a ``rows x n`` float64 result (plus int32 predecessors) that
    cannot fit."""
    _validate.ensure_fits(rows * n * 12, f"{what} ({rows} x {n})", backend)
