"""What CSR and CSC share: (data, indices, indptr) along a major axis.

A product along the major axis (CSR's ``A @ x``, CSC's ``A.T @ x``) gathers each row's
products: kernels/spmv_csr.cu, deterministic. A product across it (CSR's ``A.T @ x``, CSC's
``A @ x``) either gathers over a transposed copy built once on first use and cached (the
default: deterministic) or, with ``sparsegpu.options(deterministic=False)``, scatters with
atomic adds (kernels/spmv_csc.cu: no extra memory, rounding varies run to run).

``spmv_dot`` (y = A x with ``sum_i w_i y_i`` in the epilogue) is fused into the row kernel when
the product gathers along the major axis and no row is split into chunks; otherwise (CSC's
``A @ x``, split rows, the CPU backend) it is the product followed by a deterministic dot pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate, convert, reference
from sparsegpu._backend import Backend, backend_of, deterministic, resolve_backend
from sparsegpu._kernels import KernelFile, blocks_for
from sparsegpu.formats import _semiring
from sparsegpu.formats._base import (
    SparseMatrix,
    canonical_scipy,
    compressed_bytes,
    host_copy,
    to_backend,
)
from sparsegpu.formats._fast_product import ALPHA, BETA, Launch, Scratch, X, Y
from sparsegpu.primitives import dot_scratch, reduce

THREADS_PER_ROW = (1, 2, 4, 8, 16, 32)
ROWS_BLOCK = 256  # kernels/spmv_csr.cu ROWS_BLOCK
LONG_BLOCK = 256  # kernels/spmv_csr.cu LONG_BLOCK
LONG_CHUNK = 256 * 8  # kernels/spmv_csr.cu LONG_CHUNK
SCATTER_BLOCK = 256  # kernels/spmv_csc.cu SCATTER_BLOCK

GATHER_KERNELS = KernelFile(
    "spmv_csr.cu",
    [f"csr_spmv_rows<{{V}}, {{I}}, {t}>" for t in THREADS_PER_ROW]
    + ["csr_spmv_long_chunks<{V}, {I}>", "csr_spmv_long_finish<{V}, {I}>"],
)
SCATTER_KERNELS = KernelFile("spmv_csc.cu", [f"csc_spmv_scatter<{{V}}, {{I}}, {t}>" for t in THREADS_PER_ROW])
#: The semiring forms of the gather kernels ({S}: the semiring), one kernel file per semiring.
SEMIRING_GATHER = tuple(f"csr_semiring_rows<{{V}}, {{I}}, {t}, {{S}}>" for t in THREADS_PER_ROW) + (
    "csr_semiring_long_chunks<{V}, {I}, {S}>", "csr_semiring_long_finish<{V}, {I}, {S}>")
_semiring.register_predefined("spmv_csr.cu", SEMIRING_GATHER)


def threads_per_row(mean_length: float) -> int:
    """Threads given to each row (a power of two, 1 to 32) for rows of ``mean_length`` entries
    on average: the smallest power of two at least a seventh of the mean.

    The rule fits the fastest setting measured on an H200 (``python3 scripts/calibrate_csr.py``,
    fp64, int32 indices): 1 thread for the 2-D Poisson matrix (5 per row), 4 for the 3-D
    27-point stencil and for R-MAT scale 21 (15.5 per row), 4 to 16 alike for uniform random
    rows of 16. Fewer threads keep each row's loads in one thread's stream (the L1 merges
    them); more help only once rows fill a sub-warp several times."""
    target = max(mean_length / 7.0, 1.0)
    return next((t for t in THREADS_PER_ROW if t >= target), THREADS_PER_ROW[-1])


def long_row_limit(tpr: int) -> int:
    """Rows longer than this leave the sub-warp kernel for the block-per-chunk kernels, so one
    sub-warp never loops more than 64 times over a row."""
    return 64 * tpr


@dataclass
class GatherPlan:
    """How the gather kernels cover one compressed layout; built once per matrix on the device."""

    tpr: int
    long_row: int
    rows_grid: int
    rows_kernel: Any
    n_major: Any  # index-typed scalar for the kernel
    long_row_scalar: Any
    n_long: int = 0
    n_chunks: int = 0
    long_rows: Any = None
    chunk_first: Any = None
    chunk_slot: Any = None
    chunks_kernel: Any = None
    finish_kernel: Any = None


def make_gather_plan(indptr: Any, dtype: np.dtype, tpr: int | None = None) -> GatherPlan:
    import cupy

    index_type = indptr.dtype.type
    n_major = indptr.size - 1
    nnz = int(indptr[-1]) if n_major else 0
    if tpr is None:
        tpr = threads_per_row(nnz / n_major if n_major else 0.0)
    elif tpr not in THREADS_PER_ROW:
        raise ValueError(f"threads_per_row must be one of {THREADS_PER_ROW}, got {tpr}")
    limit = long_row_limit(tpr)
    plan = GatherPlan(
        tpr=tpr,
        long_row=limit,
        rows_grid=blocks_for(n_major * tpr, ROWS_BLOCK),
        rows_kernel=GATHER_KERNELS.function(f"csr_spmv_rows<{{V}}, {{I}}, {tpr}>", dtype, indptr.dtype),
        n_major=index_type(n_major),
        long_row_scalar=index_type(limit),
    )
    if n_major == 0:
        return plan
    # Kernels built ahead of time decide the common case (no long row), so a first product
    # compiles nothing; the long rows' bookkeeping below runs only where some row is long.
    lengths = convert.row_lengths(indptr)
    if int(reduce(lengths, "max")) <= limit:
        return plan
    long_rows = cupy.flatnonzero(lengths > limit).astype(indptr.dtype)
    chunks_per_row = (lengths[long_rows] + (LONG_CHUNK - 1)) // LONG_CHUNK
    chunk_first = cupy.zeros(long_rows.size + 1, dtype=indptr.dtype)
    cupy.cumsum(chunks_per_row, out=chunk_first[1:])
    n_chunks = int(chunk_first[-1])
    plan.n_long, plan.n_chunks = int(long_rows.size), n_chunks
    plan.long_rows, plan.chunk_first = long_rows, chunk_first
    plan.chunk_slot = convert.expand_pointers(chunk_first, cupy)
    plan.chunks_kernel = GATHER_KERNELS.function("csr_spmv_long_chunks<{V}, {I}>", dtype, indptr.dtype)
    plan.finish_kernel = GATHER_KERNELS.function("csr_spmv_long_finish<{V}, {I}>", dtype, indptr.dtype)
    return plan


NULL_POINTER = np.uint64(0)  # a null device pointer argument


def gather_spmv(plan: GatherPlan, indptr: Any, indices: Any, data: Any, x: Any, y: Any, alpha: Any, beta: Any,
                w: Any = None, dot: Any = None, scratch: tuple[Any, Any] | None = None) -> Any:
    """y = alpha * A x + beta * y over compressed arrays along their major axis (GPU). With
    ``dot`` (and ``w``, ``scratch`` from :func:`dot_scratch`), also ``dot[0] = w . y`` in the
    row kernel's epilogue; only for plans without split rows (``plan.n_long == 0``)."""
    if dot is None:
        fused: tuple[Any, ...] = (NULL_POINTER,) * 4
    else:
        if plan.n_long:
            raise ValueError("the dot epilogue needs every row in the row kernel; this plan splits rows")
        fused = (w, dot, *scratch)
    plan.rows_kernel(
        (plan.rows_grid,), (ROWS_BLOCK,),
        (indptr, indices, data, x, y, alpha, beta, plan.n_major, plan.long_row_scalar, *fused),
    )
    if plan.n_long:
        import cupy

        partials = cupy.empty(plan.n_chunks, y.dtype)
        plan.chunks_kernel(
            (plan.n_chunks,), (LONG_BLOCK,),
            (indptr, indices, data, x, plan.long_rows, plan.chunk_first, plan.chunk_slot, partials),
        )
        plan.finish_kernel(
            (blocks_for(plan.n_long * 32, 256),), (256,),
            (plan.long_rows, plan.chunk_first, partials, y, alpha, beta, indptr.dtype.type(plan.n_long)),
        )
    return y


def gather_launches(plan: GatherPlan, indptr: Any, indices: Any, data: Any) -> list[Launch]:
    """The launches of :func:`gather_spmv` (without a dot) as packed-launch records: the same
    kernels, grids and arguments, x, y, alpha, beta and the long rows' partial sums as markers."""
    launches = [Launch(plan.rows_kernel, plan.rows_grid, ROWS_BLOCK,
                       (indptr, indices, data, X, Y, ALPHA, BETA, plan.n_major, plan.long_row_scalar,
                        *(NULL_POINTER,) * 4))]
    if plan.n_long:
        partials = Scratch(plan.n_chunks, data.dtype)
        launches.append(Launch(plan.chunks_kernel, plan.n_chunks, LONG_BLOCK,
                               (indptr, indices, data, X, plan.long_rows, plan.chunk_first, plan.chunk_slot, partials)))
        launches.append(Launch(plan.finish_kernel, blocks_for(plan.n_long * 32, 256), 256,
                               (plan.long_rows, plan.chunk_first, partials, Y, ALPHA, BETA,
                                indptr.dtype.type(plan.n_long))))
    return launches


def semiring_gather(plan: GatherPlan, indptr: Any, indices: Any, data: Any, x: Any, y: Any, semiring: Any,
                    mask: Any, complement: bool, present: Any = None, hit: Any = None) -> Any:
    """y[row] = the semiring fold of the row, for rows ``mask`` allows (GPU; the plan's row
    split, the semiring's kernels). ``present``: uint8 flags on x's entries (absent ones do not
    count); ``hit``: uint8, set to whether a present term met each row."""
    import cupy

    def function(template: str) -> Any:
        return _semiring.kernel(semiring, "spmv_csr.cu", SEMIRING_GATHER, template, data.dtype, indptr.dtype)

    flags = [NULL_POINTER if a is None else a for a in (mask, present, hit)]
    rows = function(f"csr_semiring_rows<{{V}}, {{I}}, {plan.tpr}, {{S}}>")
    rows((plan.rows_grid,), (ROWS_BLOCK,), (indptr, indices, data, x, y, plan.n_major, plan.long_row_scalar,
                                           flags[0], np.int32(complement), flags[1], flags[2]))
    if plan.n_long:
        partials = cupy.empty(plan.n_chunks, y.dtype)
        chunk_hit = NULL_POINTER if hit is None else cupy.zeros(plan.n_chunks, np.uint8)
        function("csr_semiring_long_chunks<{V}, {I}, {S}>")(
            (plan.n_chunks,), (LONG_BLOCK,),
            (indptr, indices, data, x, plan.long_rows, plan.chunk_first, plan.chunk_slot, partials, flags[1],
             chunk_hit))
        function("csr_semiring_long_finish<{V}, {I}, {S}>")(
            (blocks_for(plan.n_long * 32, 256),), (256,),
            (plan.long_rows, plan.chunk_first, partials, y, indptr.dtype.type(plan.n_long), flags[0],
             np.int32(complement), chunk_hit, flags[2]))
    return y


def scale_in_place(y: Any, beta: Any) -> None:
    """y = beta * y, with beta == 0 giving zeros even where y held NaN or garbage."""
    if beta == 0:
        y.fill(0)
    else:
        y *= beta


class CompressedMatrix(SparseMatrix):
    """Shared implementation of CSR (major axis 0: rows) and CSC (major axis 1: columns)."""

    _major_axis: ClassVar[int]
    _scipy_class: ClassVar[Any]

    def __init__(
        self,
        arg1: tuple[Any, Any, Any],
        shape: Any,
        *,
        dtype: Any = None,
        index_dtype: Any = None,
        backend: str | None = None,
        check: bool = True,
        casting: str = "same_kind",
    ) -> None:
        """Build from ``(data, indices, indptr)`` arrays and a shape, as scipy does.

        CuPy arrays stay on the GPU; NumPy arrays go to ``backend`` (default: the active one).
        The matrix copies whatever it would otherwise share with the given arrays. ``check``
        validates lengths, pointer monotonicity and index ranges (one pass; pass False only for
        arrays known to be valid). Indices need not be sorted within a row or column;
        duplicates are summed by products. ``dtype`` and ``casting`` as in ``from_scipy``.
        """
        try:
            data, indices, indptr = arg1
        except (TypeError, ValueError):
            raise TypeError(f"{type(self).__name__} expects (data, indices, indptr), got {type(arg1).__name__}") from None
        m, n = _validate.shape2d(shape)
        check = _validate.check_bool("check", check)
        given = (data, indices, indptr)
        first = next((a for a in given if hasattr(a, "dtype")), None)
        target: Backend = "gpu" if first is not None and backend_of(first) == "gpu" else resolve_backend(backend)
        data, indices, indptr = (to_backend(a, target) for a in given)
        n_major, n_minor = (m, n) if self._major_axis == 0 else (n, m)
        major, minor = ("rows", "columns") if self._major_axis == 0 else ("columns", "rows")
        if check:
            _validate.check_compressed(indptr, indices, data, n_major, n_minor, major, minor)
        value_dt = _validate.stored_dtype(data.dtype, dtype, casting)
        index_dt = _validate.index_dtype((m, n), indices.size, index_dtype)
        arrays = (_validate.cast_values(data, value_dt), indices.astype(index_dt, copy=False),
                  indptr.astype(index_dt, copy=False))
        # A matrix owns its arrays: never the caller's memory.
        self._set(*(a.copy() if any(_validate.overlaps(a, g) for g in given if hasattr(g, "dtype")) else a
                    for a in arrays), (m, n), target)

    def _set(self, data: Any, indices: Any, indptr: Any, shape: tuple[int, int], backend: Backend) -> None:
        self._init_base(shape, data.dtype, indices.dtype, backend)
        self.data, self.indices, self.indptr = data, indices, indptr

    @classmethod
    def _make(cls, data: Any, indices: Any, indptr: Any, shape: tuple[int, int], backend: Backend) -> Any:
        """Wrap arrays already known to be valid (no checks, no copies)."""
        obj = cls.__new__(cls)
        obj._set(data, indices, indptr, shape, backend)
        return obj

    @classmethod
    def _from_canonical_scipy(cls, S: Any, backend: Backend) -> Any:
        return cls._make(*(to_backend(a, backend) for a in (S.data, S.indices, S.indptr)), S.shape, backend)

    @classmethod
    def from_scipy(cls, S: Any, *, dtype: Any = None, index_dtype: Any = None, backend: str | None = None,
                   casting: str = "same_kind", **params: Any) -> Any:
        if params:
            raise TypeError(f"{cls.__name__}.from_scipy takes no format parameters, got {sorted(params)}")
        target = resolve_backend(backend)
        layout = "csr" if cls._major_axis == 0 else "csc"
        canonical = canonical_scipy(S, layout, dtype, index_dtype, casting, own=target == "cpu")  # uploads copy
        if target == "gpu":
            n_major = canonical.shape[1 - cls._major_axis]
            _validate.ensure_fits(compressed_bytes(n_major, canonical.nnz, canonical.dtype, canonical.indices.dtype),
                                  f"a {canonical.shape} {layout.upper()}", "gpu")
        return cls._from_canonical_scipy(canonical, target)

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    def _arrays(self) -> dict[str, Any]:
        return {"data": self.data, "indices": self.indices, "indptr": self.indptr}

    def _map_values(self, fn: Any) -> Any:
        return self._make(fn(self.data), self.indices, self.indptr, self._shape, self._backend)

    def to_scipy(self) -> sp.sparray:
        return self._scipy_class(tuple(host_copy(a) for a in (self.data, self.indices, self.indptr)), shape=self._shape)

    def _swapped_arrays(self) -> tuple[Any, Any, Any]:
        """The other orientation's (data, indices, indptr), built on first use and cached."""
        if "swapped" not in self._cache:
            n_minor = self._shape[1 - self._major_axis]
            indptr, indices, data = convert.swap_major(self.indptr, self.indices, self.data, n_minor, self._xp)
            self._cache["swapped"] = (data, indices, indptr)
        return self._cache["swapped"]

    def _plan(self, key: str, indptr: Any) -> GatherPlan:
        if key not in self._cache:
            self._cache[key] = make_gather_plan(indptr, self._dtype, self._cache.get("threads_per_row"))
        return self._cache[key]

    @property
    def threads_per_row(self) -> int | None:
        """Threads per major-axis line in the gather kernel: None (chosen from the mean length)
        or a fixed power of two from 1 to 32. Setting it drops the cached launch plans."""
        return self._cache.get("threads_per_row")

    @threads_per_row.setter
    def threads_per_row(self, value: int | None) -> None:
        if value is not None and value not in THREADS_PER_ROW:
            raise ValueError(f"threads_per_row must be None or one of {THREADS_PER_ROW}, got {value}")
        self._cache = {k: v for k, v in self._cache.items() if k == "swapped"}
        if value is not None:
            self._cache["threads_per_row"] = value

    def _spmv(self, x: Any, y: Any, alpha: Any, beta: Any, transpose: bool) -> Any:
        along_major = transpose == (self._major_axis == 1)
        if self._backend == "cpu":
            reference_spmv = reference.csr_spmv if along_major else reference.csc_spmv
            return reference_spmv(self.indptr, self.indices, self.data, x, y, alpha, beta)
        if along_major:
            return gather_spmv(self._plan("plan", self.indptr), self.indptr, self.indices, self.data, x, y, alpha, beta)
        if deterministic():
            data, indices, indptr = self._swapped_arrays()
            return gather_spmv(self._plan("swapped_plan", indptr), indptr, indices, data, x, y, alpha, beta)
        return self._scatter(x, y, alpha, beta)

    def _packed_launches(self) -> tuple[list[Launch], bool]:
        if self._major_axis == 0:
            return gather_launches(self._plan("plan", self.indptr), self.indptr, self.indices, self.data), False
        if deterministic():
            data, indices, indptr = self._swapped_arrays()
            return gather_launches(self._plan("swapped_plan", indptr), indptr, indices, data), False
        return self._scatter_launches(), True

    def _semiring_csr(self) -> Any:
        return self if self._major_axis == 0 else super()._semiring_csr()

    def _semiring_gpu(self, x: Any, out: Any, semiring: Any, mask: Any, complement: bool, **flags: Any) -> Any:
        if self._major_axis != 0:
            return super()._semiring_gpu(x, out, semiring, mask, complement, **flags)
        return semiring_gather(self._plan("plan", self.indptr), self.indptr, self.indices, self.data, x, out,
                               semiring, mask, complement, **flags)

    @staticmethod
    def _fold_runs(indptr: Any, indices: Any, data: Any, x: Any, out: Any, semiring: Any) -> Any:
        """out[r] = the semiring fold of run r of a CSR built for one product (GPU): sub-warps
        sized from the mean run, no run split (no setup pass; each run in entry order)."""
        n_runs = indptr.size - 1
        tpr = threads_per_row(data.size / n_runs if n_runs else 0.0)
        never = np.iinfo(indptr.dtype).max
        plan = GatherPlan(tpr=tpr, long_row=never, rows_grid=blocks_for(n_runs * tpr, ROWS_BLOCK), rows_kernel=None,
                          n_major=indptr.dtype.type(n_runs), long_row_scalar=indptr.dtype.type(never))
        return semiring_gather(plan, indptr, indices, data, x, out, semiring, None, False)

    def _spmv_dot(self, x: Any, y: Any, alpha: Any, beta: Any, w: Any, dot: Any) -> Any:
        if self._backend == "gpu" and self._major_axis == 0 and y.size:
            plan = self._plan("plan", self.indptr)
            if not plan.n_long:
                scratch = dot_scratch(self._cache, "dot_scratch", plan.rows_grid)
                return gather_spmv(plan, self.indptr, self.indices, self.data, x, y, alpha, beta, w, dot, scratch)
        return super()._spmv_dot(x, y, alpha, beta, w, dot)

    def _scatter(self, x: Any, y: Any, alpha: Any, beta: Any) -> Any:
        scale_in_place(y, beta)
        n_major = self.indptr.size - 1
        if n_major == 0 or self.nnz == 0:
            return y
        tpc = self._cache.get("threads_per_row") or threads_per_row(self.nnz / n_major)
        kernel = SCATTER_KERNELS.function(f"csc_spmv_scatter<{{V}}, {{I}}, {tpc}>", self._dtype, self._index_dtype)
        kernel(
            (blocks_for(n_major * tpc, SCATTER_BLOCK),), (SCATTER_BLOCK,),
            (self.indptr, self.indices, self.data, x, y, alpha, self._index_dtype.type(n_major)),
        )
        return y

    def _scatter_launches(self) -> list[Launch]:
        """:meth:`_scatter`'s launch (after y = beta * y) as a packed-launch record: none for an
        empty matrix."""
        n_major = self.indptr.size - 1
        if n_major == 0 or self.nnz == 0:
            return []
        tpc = self._cache.get("threads_per_row") or threads_per_row(self.nnz / n_major)
        kernel = SCATTER_KERNELS.function(f"csc_spmv_scatter<{{V}}, {{I}}, {tpc}>", self._dtype, self._index_dtype)
        return [Launch(kernel, blocks_for(n_major * tpc, SCATTER_BLOCK), SCATTER_BLOCK,
                       (self.indptr, self.indices, self.data, X, Y, ALPHA, self._index_dtype.type(n_major)))]

#: The constructor's sections of CSR's and CSC's class docstrings (the same arguments, major and
#: minor axes swapped), put in place of their ``%(constructor)s`` line.
_CONSTRUCTOR_DOC = """    Parameters
    ----------
    arg1 : (data, indices, indptr)
        The arrays, as scipy takes them: ``indices[k]`` the {minor} of entry k, {major} i's
        entries at ``indptr[i]:indptr[i+1]``. Indices need not be sorted; duplicates are summed
        by products. The matrix copies whatever it would share with them.
    shape : (int, int)
        The matrix's shape.
    dtype : dtype, optional
        float32, float64, complex64 or complex128 (default: the data's, with integers and
        booleans stored as float64).
    index_dtype : {int32, int64}, optional
        Default: int32 when every index fits.
    backend : {"gpu", "cpu"}, optional
        Where NumPy input goes (default: :func:`sparsegpu.backend`); CuPy input stays on the GPU.
    check : bool, optional
        Validate lengths and index ranges, pointer monotonicity in one pass (default True); pass False only for
        arrays known to be valid.
    casting : str, optional
        NumPy's casting rule from the data's dtype to ``dtype`` (default "same_kind"; complex
        to real needs "unsafe").

    Raises
    ------
    TypeError
        ``arg1`` is not a triple of arrays; an unsupported dtype or cast; ``check`` not a bool.
    ValueError
        A bad ``shape``; arrays that do not describe a matrix of that shape (lengths, pointers,
        index ranges); a matrix that cannot fit in memory.

    See Also
    --------
    SparseMatrix.from_scipy : the usual way to build one, ``{name}.from_scipy(S)``.

    Examples
    --------
"""


def document_constructor(cls: type, major: str, minor: str) -> type:
    """``cls`` with its docstring's ``%(constructor)s`` line replaced by the constructor's
    Parameters, Raises and See Also sections for a layout compressed along ``major``."""
    sections = _CONSTRUCTOR_DOC.replace("{major}", major).replace("{minor}", minor).replace("{name}", cls.__name__)
    cls.__doc__ = cls.__doc__.replace("    %(constructor)s", sections.rstrip())
    return cls
