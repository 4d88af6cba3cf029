"""Products over a semiring (:mod:`sparsegpu.semiring`): ``A.spmv(x, semiring=...)`` and the
sparse-vector product ``A.spmspv(v, ...)``.

``out[i] = add-reduce over stored j of mul(A[i, j], x[j])``, an empty row giving the monoid's
identity. A row mask (nonzero = compute; ``complement`` flips it) leaves the rows it excludes
uncomputed: they keep ``y``'s value when ``y`` is given, else get the identity.

GPU kernels: CSR, ELL and SELL (direct layouts) run their own kernels, templates over the
semiring (kernels/semiring.cuh); each semiring's instantiations are a kernel file of their own,
compiled on first use, so the arithmetic product's modules never grow (the predefined semirings'
files are registered for CI's compile step). Every other format (COO, CSC, HYB, JDS, SELL with
split slices or hot columns) runs semiring products through its CSR, built once and cached on
the matrix. The CPU backend folds CSR segments with the monoid's ``ufunc.reduceat``.

The sparse-vector product combines a frontier ``v`` (a :class:`SparseVector`) either by
*push* (expand the frontier's columns over A^T's CSR, cached on the matrix; sort the terms by
output row, stably, so each row's terms keep frontier order; fold each row's run with the
semiring's kernel: the same order every run, so bitwise reproducible) or by *pull* (a masked
product over rows, the frontier given densely with presence flags, so absent entries contribute
nothing; the rows any present term met are the result's pattern). ``direction="auto"`` follows
Beamer's rule: push while the frontier's out-edges are at most 1/:data:`BEAMER_ALPHA` of the
edges the pull would scan (the rows the mask lets through).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from sparsegpu import _validate, primitives
from sparsegpu._backend import array_module, is_device_array, to_host
from sparsegpu._kernels import VALUE_DTYPES, KernelFile
from sparsegpu.formats.vector import SparseVector
from sparsegpu.semiring import PREDEFINED, Semiring, as_semiring

#: Beamer's alpha: push while the frontier's out-edges are at most 1/BEAMER_ALPHA of the edges
#: a pull scans (Beamer, Asanovic and Patterson, "Direction-optimizing breadth-first search", SC 2012).
BEAMER_ALPHA = 14
DIRECTIONS = ("auto", "push", "pull")
REAL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@functools.cache
def semiring_kernels(semiring: Semiring, filename: str, templates: tuple[str, ...]) -> KernelFile:
    """The kernel file of ``semiring``'s instantiations of ``templates`` (``{S}`` stands for the
    semiring's C++ type), made once. Predefined semirings are registered for CI; a user-made
    operator's functor is prepended to the source."""
    expressions = [t.replace("{S}", semiring.cpp) for t in templates]
    dtypes = VALUE_DTYPES if semiring.is_plus_times else REAL_DTYPES
    return KernelFile(filename, expressions, dtypes, prefix=semiring.mul.source(),
                      register=semiring in PREDEFINED.values())


def register_predefined(filename: str, templates: tuple[str, ...]) -> None:
    """Make (and so register for CI) every predefined semiring's kernel file of ``templates``."""
    for semiring in PREDEFINED.values():
        semiring_kernels(semiring, filename, templates)


def kernel(semiring: Semiring, filename: str, templates: tuple[str, ...], template: str, dtype: Any,
           index_dtype: Any) -> Any:
    """The compiled kernel ``template`` (one of ``templates``) for ``semiring`` at these types."""
    return semiring_kernels(semiring, filename, templates).function(
        template.replace("{S}", semiring.cpp), dtype, index_dtype)


# --------------------------------------------------------------------------- argument checks


def check_semiring(semiring: Any, dtype: np.dtype) -> Semiring:
    """``semiring`` as a Semiring, refused for complex matrices unless plus_times."""
    semiring = as_semiring(semiring)
    if dtype.kind == "c" and not semiring.is_plus_times:
        raise TypeError(f"semiring {semiring.name} needs a real matrix; a complex matrix ({dtype}) "
                        f"supports only plus_times")
    return semiring


def check_mask(mask: Any, length: int, backend: str, complement: Any) -> tuple[Any, bool]:
    """(mask as uint8 on ``backend`` or None, complement as a bool)."""
    complement = _validate.check_bool("complement", complement)
    if mask is None:
        if complement:
            raise ValueError("complement=True needs a mask to complement")
        return None, False
    if not hasattr(mask, "dtype") or not hasattr(mask, "ndim"):
        mask = np.asarray(mask)
    if mask.dtype.kind not in "biuf":
        raise TypeError(f"mask must be an array of booleans or numbers, got dtype {mask.dtype}")
    if mask.ndim != 1 or mask.shape[0] != length:
        raise ValueError(f"mask must be 1-D of length {length} (one entry per output row), got shape "
                         f"{tuple(mask.shape)}")
    if backend == "cpu" and is_device_array(mask):
        raise TypeError("this matrix lives on the CPU backend but mask is a CuPy array; pass a NumPy mask")
    xp = array_module(backend)
    return xp.asarray(mask != 0).astype(np.uint8), complement


def check_alpha_beta(semiring: Semiring, alpha: Any, beta: Any, dtype: np.dtype, y: Any) -> tuple[Any, Any]:
    alpha = _validate.check_scalar("alpha", alpha, dtype)
    beta = _validate.check_scalar("beta", beta, dtype)
    if not semiring.is_plus_times and (alpha != 1 or beta != 0):
        raise ValueError(f"alpha and beta apply to plus_times only; semiring {semiring.name} takes alpha=1, beta=0 "
                         f"(got alpha={alpha!r}, beta={beta!r})")
    if y is None and beta != 0:
        raise ValueError("beta is nonzero but no y was given to scale and add")
    return alpha, beta


# --------------------------------------------------------------------------- CPU backend


def host_fold(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, x: np.ndarray, semiring: Semiring,
              present: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(out, hit) over a CSR on the host, vectorised: out[i] the fold of row i's terms (the
    identity for an empty row, or one no present term met), hit[i] whether a term counted."""
    m = indptr.size - 1
    identity = semiring.identity(data.dtype)
    out = np.full(m, identity, dtype=data.dtype)
    hit = np.zeros(m, dtype=bool)
    if indices.size == 0:
        return out, hit
    terms = np.asarray(semiring.mul.apply(data, x[indices]), dtype=data.dtype)
    counted = np.ones(indices.size, dtype=bool) if present is None else present[indices] != 0
    if present is not None:
        terms = np.where(counted, terms, identity)
    nonempty = indptr[1:] > indptr[:-1]
    starts = indptr[:-1][nonempty]
    out[nonempty] = semiring.add.ufunc.reduceat(terms, starts)
    hit[nonempty] = np.logical_or.reduceat(counted, starts)
    return out, hit


def _host_product(A: Any, x: np.ndarray, y: np.ndarray | None, alpha: Any, beta: Any, semiring: Semiring,
                  mask: np.ndarray | None, complement: bool) -> np.ndarray:
    csr = A._semiring_csr()
    folded, _ = host_fold(csr.indptr, csr.indices, csr.data, x, semiring)
    if semiring.is_plus_times and (alpha != 1 or beta != 0):
        folded = alpha * folded + (beta * y if beta != 0 else 0)
    allowed = np.ones(folded.size, dtype=bool) if mask is None else (mask != 0) != complement
    out = np.full(folded.size, semiring.identity(A.dtype), dtype=A.dtype) if y is None else y
    out[allowed] = folded[allowed]
    return out


# --------------------------------------------------------------------------- SpMV


def semiring_spmv(A: Any, x: Any, y: Any, alpha: Any, beta: Any, semiring: Any, mask: Any, complement: Any) -> Any:
    """``A.spmv`` with a semiring or a mask (see :meth:`SparseMatrix.spmv`)."""
    m, n = A.shape
    semiring = check_semiring(semiring, A.dtype)
    x = _validate.check_vector(x, n, A.dtype)
    if y is not None:
        _validate.check_out(y, m, A.dtype, x)
    alpha, beta = check_alpha_beta(semiring, alpha, beta, A.dtype, y)
    mask, complement = check_mask(mask, m, A.backend, complement)
    if mask is None and semiring.is_plus_times:
        return A._product(x, y, alpha, beta, transpose=False)  # the arithmetic path, unchanged
    if A.backend == "cpu":
        if is_device_array(x):
            raise TypeError("this matrix lives on the CPU backend but x is a CuPy array; move the matrix "
                            "with .asbackend('gpu') or pass a NumPy x")
        return _host_product(A, x, y, alpha, beta, semiring, mask, complement)
    import cupy

    on_device = is_device_array(x)
    xd = x if on_device else cupy.asarray(x)
    yd = None if y is None else (y if on_device else cupy.asarray(y))
    scaled = semiring.is_plus_times and (alpha != 1 or beta != 0)
    if scaled or yd is None:
        out = cupy.full(m, semiring.identity(A.dtype), dtype=A.dtype)
    else:
        out = yd  # rows the mask excludes keep y
    if m:
        A._semiring_gpu(xd, out, semiring, mask, complement)
    if scaled:
        allowed = cupy.ones(m, dtype=bool) if mask is None else (mask != 0) != complement
        new = alpha * out + (beta * yd if beta != 0 else 0)
        out = cupy.where(allowed, new, yd if yd is not None else A.dtype.type(0)).astype(A.dtype, copy=False)
        if yd is not None:
            yd[...] = out
            out = yd
    if on_device:
        return out
    if y is None:
        return out.get()
    out.get(out=y)
    return y


# --------------------------------------------------------------------------- sparse-vector product


def check_frontier(v: Any, n: int, dtype: np.dtype, backend: str) -> SparseVector:
    if not isinstance(v, SparseVector):
        raise TypeError(f"v must be a sparsegpu SparseVector, got {type(v).__name__}")
    if v.n != n:
        raise ValueError(f"v has length {v.n}, but the matrix has {n} columns")
    if v.dtype != dtype and not np.can_cast(v.dtype, dtype, "safe"):
        raise TypeError(f"v has dtype {v.dtype}, which cannot be cast safely to the matrix dtype {dtype}")
    if backend == "cpu" and v.backend == "gpu":
        raise TypeError("this matrix lives on the CPU backend but v holds CuPy arrays; pass NumPy ones")
    return v


def spmspv(A: Any, v: Any, semiring: Any, mask: Any, complement: Any, direction: Any) -> SparseVector:
    """``A.spmspv`` (see :meth:`SparseMatrix.spmspv`)."""
    m, n = A.shape
    semiring = check_semiring(semiring, A.dtype)
    v = check_frontier(v, n, A.dtype, A.backend)
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    mask, complement = check_mask(mask, m, A.backend, complement)
    xp = A._xp
    indices = xp.asarray(v.indices).astype(A.index_dtype, copy=False)
    values = xp.asarray(v.values).astype(A.dtype, copy=False)
    csr = A._semiring_csr()
    if direction != "pull":
        at_data, at_indices, at_indptr = csr._swapped_arrays()  # A^T's CSR, cached
        starts = at_indptr[indices].astype(np.int64)
        offsets = xp.zeros(indices.size + 1, dtype=np.int64)  # where each frontier entry's terms begin
        if indices.size:
            offsets[1:] = primitives.inclusive_scan(at_indptr[indices + 1].astype(np.int64) - starts)
        out_edges = int(offsets[-1])
    if direction == "auto":
        direction = beamer_direction(out_edges, _pull_edges(csr, mask, complement))
    if direction == "push":
        out_rows, out_values = _push(csr, at_indices, at_data, starts, offsets, out_edges, values, semiring, mask,
                                     complement)
    else:
        out_rows, out_values = _pull(csr, indices, values, semiring, mask, complement)
    result = SparseVector(m, out_rows, out_values, check=False)
    if v.backend == "cpu" and result.backend == "gpu":
        return SparseVector(m, to_host(out_rows), to_host(out_values), check=False)
    return result


def beamer_direction(out_edges: int, scanned_edges: int) -> str:
    """"push" while the frontier's ``out_edges`` are at most 1/BEAMER_ALPHA of the
    ``scanned_edges`` a pull would read, else "pull".

    >>> beamer_direction(10, 1000), beamer_direction(100, 1000)
    ('push', 'pull')
    """
    return "push" if out_edges * BEAMER_ALPHA <= scanned_edges else "pull"


def _pull_edges(csr: Any, mask: Any, complement: bool) -> int:
    if mask is None:
        return csr.nnz
    row_lengths = (csr.indptr[1:] - csr.indptr[:-1]).astype(np.int64)
    allowed = (mask != 0) != complement
    return int(primitives.reduce(row_lengths * allowed)) if row_lengths.size else 0


def _stable_order(rows: Any, n_rows: int, xp: Any) -> Any:
    """The permutation sorting ``rows`` (each below ``n_rows``) with ties kept in position order
    (on the GPU the keys are made unique, so any sort gives the same order)."""
    count = rows.size
    if xp is np:
        return np.argsort(rows, kind="stable")
    if n_rows < (1 << 62) // max(count, 1):
        return xp.argsort(rows.astype(np.int64) * count + xp.arange(count, dtype=np.int64))
    return xp.lexsort(xp.stack([xp.arange(count, dtype=np.int64), rows.astype(np.int64)]))


def _push(csr: Any, at_indices: Any, at_data: Any, starts: Any, offsets: Any, total: int, values: Any,
          semiring: Semiring, mask: Any, complement: bool) -> tuple[Any, Any]:
    """Expand the frontier's columns of A (rows of A^T: ``starts`` and ``offsets`` of their
    terms, ``total`` of them), sort the terms by output row (stably: each row's terms stay in
    frontier order), fold each row's run in that order."""
    xp = csr._xp
    index_dtype = csr.index_dtype
    if total == 0:
        return xp.zeros(0, dtype=index_dtype), xp.zeros(0, dtype=csr.dtype)
    position = primitives.expand_pointers(offsets, xp)  # the frontier entry of each term
    slot = starts[position] + (xp.arange(total, dtype=np.int64) - offsets[position])
    rows = at_indices[slot]
    data = at_data[slot]
    if mask is not None:
        keep = xp.flatnonzero((mask[rows] != 0) != complement)
        rows, data, position = rows[keep], data[keep], position[keep]
        if rows.size == 0:
            return xp.zeros(0, dtype=index_dtype), xp.zeros(0, dtype=csr.dtype)
    order = _stable_order(rows, csr.shape[0], xp)
    rows, data, position = rows[order], data[order], position[order].astype(index_dtype)
    heads = xp.ones(rows.size, dtype=bool)
    heads[1:] = rows[1:] != rows[:-1]
    run_starts = xp.flatnonzero(heads)
    indptr = xp.empty(run_starts.size + 1, dtype=index_dtype)
    indptr[:-1] = run_starts
    indptr[-1] = rows.size
    if csr.backend == "cpu":
        folded, _ = host_fold(indptr, position, data, values, semiring)
    else:
        folded = xp.empty(run_starts.size, dtype=csr.dtype)
        csr._fold_runs(indptr, position, data, values, folded, semiring)
    return rows[run_starts], folded


def _pull(csr: Any, indices: Any, values: Any, semiring: Semiring, mask: Any, complement: bool) -> tuple[Any, Any]:
    """A masked product over rows with the frontier dense and presence flags; the rows a present
    term met are the result."""
    xp = csr._xp
    m, n = csr.shape
    dense = xp.full(n, semiring.identity(csr.dtype), dtype=csr.dtype)
    dense[indices] = values
    present = xp.zeros(n, dtype=np.uint8)
    present[indices] = 1
    if csr.backend == "cpu":
        folded, hit = host_fold(csr.indptr, csr.indices, csr.data, dense, semiring, present)
        if mask is not None:
            hit &= (mask != 0) != complement
    else:
        folded = xp.empty(m, dtype=csr.dtype)
        hit = xp.zeros(m, dtype=np.uint8)
        if m:
            csr._semiring_gpu(dense, folded, semiring, mask, complement, present=present, hit=hit)
    rows = xp.flatnonzero(hit).astype(csr.index_dtype)
    return rows, folded[rows]
