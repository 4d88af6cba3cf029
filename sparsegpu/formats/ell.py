"""ELL: every row padded to the longest, stored column-major. ``A @ x`` runs
kernels/spmv_ell.cu (NumPy reference: reference.regular.ell_spmv).

Also home of what the regular formats (ELL, HYB, JDS, SELL-C-sigma) share:
:class:`RegularMatrix` (construction, value mapping, the transposed product), the one-pass
copy of a CSR into slots (:func:`fill_slots`: kernels/spmv_ell.cu ``csr_to_slots``) and the
way back (:func:`csr_from_positions`). Everything runs on the matrix's backend (CuPy array
operations and kernels on the GPU, NumPy on the CPU): nothing makes a host round trip.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate, convert, primitives
from sparsegpu._backend import Backend, deterministic, resolve_backend
from sparsegpu._kernels import KernelFile, blocks_for, device_properties
from sparsegpu.formats import _semiring
from sparsegpu.formats._base import SparseMatrix
from sparsegpu.formats._compressed import NULL_POINTER, dot_scratch
from sparsegpu.formats._fast_product import ALPHA, BETA, Launch, X, Y
from sparsegpu.formats.csr import CSR
from sparsegpu.reference import regular as reference
from sparsegpu.reference.spmv import dot_into

ELL_BLOCK = 256  # kernels/spmv_ell.cu ELL_BLOCK
ELL_BLOCKS_PER_SM = 8  # kernels/spmv_ell.cu ELL_BLOCKS_PER_SM
#: Default limit on padded slots per stored entry: ELL refuses a matrix whose longest row
#: would make it store more than 3 padding slots per entry (4x the slots of the entries), as
#: every slot up to a row's end costs a 4- or 8-byte index load. HYB or SELL-C-sigma pad less.
DEFAULT_MAX_FILL = 3.0

ELL_KERNELS = KernelFile(
    "spmv_ell.cu",
    ["ell_spmv<{V}, {I}>"]
    + [f"csr_to_slots<{{V}}, {{I}}, {layout}>" for layout in (reference.LAYOUT_ELL, reference.LAYOUT_SELL, reference.LAYOUT_JDS)],
)

#: ELL's semiring kernel ({S}: the semiring), one kernel file per semiring.
SEMIRING_ELL = ("ell_semiring_spmv<{V}, {I}, {S}>",)
_semiring.register_predefined("spmv_ell.cu", SEMIRING_ELL)


# --------------------------------------------------------------------------- shared helpers


def csr_from_positions(rows: Any, positions: Any, cols: Any, values: Any, shape: tuple[int, int],
                       index_dtype: Any, backend: Backend, xp: ModuleType) -> Any:
    """The CSR holding entry ``(rows[j], cols[j]) = values[j]`` at place ``positions[j]`` of its
    row (positions of a row are 0, 1, ..., in any order): one scatter, deterministic."""
    indptr = convert.compress(rows, shape[0], index_dtype, xp)
    destination = indptr[rows] + positions
    out_cols = xp.empty(cols.size, dtype=index_dtype)
    out_values = xp.empty(values.size, dtype=values.dtype)
    out_cols[destination] = cols
    out_values[destination] = values
    return CSR._make(out_values, out_cols, indptr, shape, backend)


def fill_slots(csr: Any, layout: int, n_slots: int, *, width: int = 0, perm: Any = None, offsets: Any = None,
               C: int = 1, n_ranks: int | None = None) -> tuple[Any, Any]:
    """(indices, data) of ``n_slots`` slots holding ``csr``'s entries in ``layout`` (ELL, SELL or
    JDS; see :func:`sparsegpu.reference.regular.csr_to_slots`), padding elsewhere: one pass of
    kernels/spmv_ell.cu ``csr_to_slots`` on the GPU, its NumPy reference on the CPU."""
    xp = csr._xp
    m = csr.shape[0]
    n_ranks = m if n_ranks is None else n_ranks
    indices = xp.empty(n_slots, dtype=csr.index_dtype)
    data = xp.empty(n_slots, dtype=csr.dtype)
    unused = xp.empty(0, dtype=np.int64)  # stands for the pointers a layout does not read
    perm = xp.empty(0, dtype=csr.index_dtype) if perm is None else perm
    offsets = unused if offsets is None else offsets
    arguments = (csr.indptr, csr.indices, csr.data, perm, offsets)
    scalars = (np.int64(C), np.int64(width), np.int64(m), np.int64(n_ranks))
    if csr.backend == "cpu":
        reference.csr_to_slots(*arguments, *(int(s) for s in scalars), layout, indices, data)
    elif n_ranks:
        kernel = ELL_KERNELS.function(f"csr_to_slots<{{V}}, {{I}}, {layout}>", csr.dtype, csr.index_dtype)
        kernel((blocks_for(n_ranks, ELL_BLOCK),), (ELL_BLOCK,), (*arguments, *scalars, indices, data))
    return indices, data


def reject_params(cls: type, params: dict[str, Any]) -> None:
    if params:
        raise TypeError(f"{cls.__name__} got unknown format parameters {sorted(params)}")


def int_at_least(name: str, value: Any, minimum: int) -> int:
    return _validate.check_int(name, value, minimum=minimum)


def slots_fit(csr: Any, n_slots: int, what: str) -> None:
    """ValueError before allocating ``n_slots`` padded slots (a value and an index each) that
    cannot fit in the backend's memory."""
    _validate.ensure_fits(n_slots * (csr.dtype.itemsize + csr.index_dtype.itemsize), what, csr.backend)


class RegularMatrix(SparseMatrix):
    """Shared implementation of ELL, HYB, JDS and SELL-C-sigma.

    A subclass names its stored arrays (``_array_names``), which of them hold values
    (``_value_names``), which holds column indices (``_index_name``) and its scalar layout
    parameters (``_scalar_names``); it supplies
    ``_from_csr``, ``to_csr`` and ``_forward`` (``A @ x`` on its own arrays).

    ``A.T @ x`` runs over a CSR of A^T built from ``to_csr()`` on first use and cached
    (bitwise reproducible); with ``sparsegpu.options(deterministic=False)`` it scatters over a
    cached CSR of A with atomic adds instead (kernels/spmv_csc.cu, not reproducible).
    """

    _array_names: ClassVar[tuple[str, ...]] = ()
    _value_names: ClassVar[tuple[str, ...]] = ()
    _scalar_names: ClassVar[tuple[str, ...]] = ()
    _index_name: ClassVar[str] = "indices"  # the array whose dtype is the matrix's index dtype
    _nnz: int

    def __init__(self, matrix: Any, *, dtype: Any = None, index_dtype: Any = None,
                 backend: str | None = None, **params: Any) -> None:
        """Build from a scipy sparse matrix (any format) or another sparsegpu matrix, with the
        format's parameters; ``dtype``, ``index_dtype`` and ``backend`` as in ``from_scipy``
        (scipy input only)."""
        if sp.issparse(matrix):
            built = type(self).from_scipy(matrix, dtype=dtype, index_dtype=index_dtype, backend=backend, **params)
        elif isinstance(matrix, SparseMatrix):
            if dtype is not None or index_dtype is not None or backend is not None:
                raise TypeError(
                    "dtype, index_dtype and backend apply to scipy input; for a sparsegpu matrix "
                    "use .astype(), .asbackend() or from_scipy(A.to_scipy(), index_dtype=...)"
                )
            built = type(self)._from_csr(matrix.to_csr(), **params)
        else:
            raise TypeError(
                f"{type(self).__name__} is built from a scipy sparse matrix or a sparsegpu matrix, "
                f"got {type(matrix).__module__}.{type(matrix).__name__}"
            )
        self.__dict__.update(built.__dict__)

    @classmethod
    def _new(cls, shape: tuple[int, int], backend: Backend, nnz: int, **fields: Any) -> Any:
        """Wrap arrays already known to be valid (no checks, no copies)."""
        obj = cls.__new__(cls)
        obj._init_base(shape, fields[cls._value_names[0]].dtype, fields[cls._index_name].dtype, backend)
        obj._nnz = int(nnz)
        for name, value in fields.items():
            setattr(obj, name, value)
        return obj

    @property
    def nnz(self) -> int:
        return self._nnz

    def _arrays(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._array_names}

    def _map_values(self, fn: Any) -> Any:
        fields = {name: getattr(self, name) for name in self._array_names + self._scalar_names}
        for name in self._value_names:
            fields[name] = fn(fields[name])
        return self._new(self._shape, self._backend, self._nnz, **fields)

    def _spmv(self, x: Any, y: Any, alpha: Any, beta: Any, transpose: bool) -> Any:
        if not transpose:
            return self._forward(x, y, alpha, beta)
        if deterministic():
            if "transpose" not in self._cache:
                data, indices, indptr = self.to_csr()._swapped_arrays()
                self._cache["transpose"] = CSR._make(data, indices, indptr, self._shape[::-1], self._backend)
            return self._cache["transpose"]._spmv(x, y, alpha, beta, False)
        if "csr" not in self._cache:
            self._cache["csr"] = self.to_csr()
        return self._cache["csr"]._spmv(x, y, alpha, beta, True)

    def _forward(self, x: Any, y: Any, alpha: Any, beta: Any) -> Any:
        raise NotImplementedError

    def _layout_params(self) -> dict[str, Any]:
        """The format parameters that rebuild this layout from a CSR."""
        return {name: getattr(self, name) for name in self._scalar_names}

    def asbackend(self, backend: str) -> Any:
        """The same matrix, same layout parameters, with its arrays on ``backend``."""
        target = resolve_backend(backend)
        if target == self._backend:
            return self
        return type(self)._from_csr(self.to_csr().asbackend(target), **self._layout_params())


def ell_forward(indices: Any, data: Any, width: int, x: Any, y: Any, alpha: Any, beta: Any,
                w: Any = None, dot: Any = None, cache: dict[str, Any] | None = None) -> Any:
    """y = alpha * A x + beta * y over column-major padded arrays of ``y.size`` rows, on the
    arrays' backend (the kernel on the GPU, the NumPy reference on the CPU). With ``dot`` (and ``w``, and
    the matrix's ``cache`` for the reduction scratch), also ``dot[0] = w . y`` in float64, in the
    kernel's epilogue on the GPU (the reference: the product, then ``reference.spmv.dot_into``)."""
    if isinstance(indices, np.ndarray):
        reference.ell_spmv(indices, data, width, x, y, alpha, beta)
        if dot is not None:
            dot_into(w, y, dot)
        return y
    if y.size == 0:
        if dot is not None:
            dot.fill(0)
        return y
    # A thread per row; with a dot, one wave of resident blocks, each thread striding over rows
    # (see the kernel), so the epilogue's reduction and ticket are paid once per resident block
    # (CG). Without one, a thread per row over a full grid is faster (measured on an H200 on the
    # 27-point stencil).
    blocks = blocks_for(y.size, ELL_BLOCK)
    fused: tuple[Any, ...] = (NULL_POINTER,) * 4
    if dot is not None:
        blocks = min(blocks, device_properties()["multiprocessors"] * ELL_BLOCKS_PER_SM)
        fused = (w, dot, *dot_scratch(cache, "dot_scratch", blocks))
    kernel = ELL_KERNELS.function("ell_spmv<{V}, {I}>", data.dtype, indices.dtype)
    kernel(
        (blocks,), (ELL_BLOCK,),
        (indices, data, np.int64(width), np.int64(y.size), x, y, alpha, beta, *fused),
    )
    return y


def ell_launches(indices: Any, data: Any, width: int, n_rows: int) -> list[Launch]:
    """:func:`ell_forward`'s launch (without a dot) as a packed-launch record: none for a
    matrix without rows."""
    if n_rows == 0:
        return []
    kernel = ELL_KERNELS.function("ell_spmv<{V}, {I}>", data.dtype, indices.dtype)
    return [Launch(kernel, blocks_for(n_rows, ELL_BLOCK), ELL_BLOCK,
                   (indices, data, np.int64(width), np.int64(n_rows), X, Y, ALPHA, BETA, *(NULL_POINTER,) * 4))]


class ELL(RegularMatrix):
    """ELLPACK matrix: every row padded to ``width`` (the longest row's length) and stored
    column-major, slot k of row r at ``k * n_rows + r`` in ``indices`` and ``data``; padding
    slots hold column -1 and value 0.

    ``A @ x`` gives each row one thread; a warp's 32 rows read 32 consecutive slots at each
    step (coalesced loads), and a thread stops at its row's first padding slot. Bitwise
    reproducible, and so is ``A.T @ x`` (over a CSR of A^T built on first use and cached;
    atomics, not reproducible, with ``sparsegpu.options(deterministic=False)``).

    Parameters
    ----------
    matrix : scipy sparse matrix or SparseMatrix
        The matrix to store (any scipy format, or any sparsegpu format on either backend).
    dtype, index_dtype, backend : optional
        As in :meth:`SparseMatrix.from_scipy`; for scipy input only.
    max_fill : float or None, optional
        Refuse a matrix that would store more than ``max_fill`` padding slots per stored entry
        (default 3.0; use HYB or SELL-C-sigma for uneven rows). None disables the check.

    Raises
    ------
    TypeError
        ``matrix`` of another type; ``dtype``, ``index_dtype`` or ``backend`` given with a
        sparsegpu matrix; an unknown format parameter; an unsupported dtype.
    ValueError
        The padding ratio exceeds ``max_fill`` (the message names it); a negative or
        non-finite ``max_fill``; a matrix that cannot fit in memory.

    See Also
    --------
    SparseMatrix.from_scipy : ``ELL.from_scipy(S, **params)`` takes the same parameters.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.formats import ELL
    >>> S = sp.random(50, 40, density=0.1, random_state=1, format="csr")
    >>> A = ELL.from_scipy(S, max_fill=None, backend="cpu")
    >>> x = np.arange(40.0)
    >>> bool(np.allclose(A @ x, S @ x)) and bool(np.allclose(A.T @ np.ones(50), S.T @ np.ones(50)))
    True
    >>> (A.to_scipy() != S).nnz
    0
    >>> ELL(S, max_fill=None, backend="cpu").width == A.width
    True
    """

    format = "ell"
    _array_names = ("indices", "data")
    _value_names = ("data",)
    _scalar_names = ("width",)
    indices: Any
    data: Any
    width: int

    @classmethod
    def _from_csr(cls, csr: Any, max_fill: float | None = DEFAULT_MAX_FILL, **params: Any) -> ELL:
        reject_params(cls, params)
        m, _ = csr.shape
        width = int(primitives.reduce(convert.row_lengths(csr.indptr), "max")) if m else 0
        check_fill(m, width, csr.nnz, max_fill)
        slots_fit(csr, width * m, f"ELL of {m} rows x {width} slots")
        indices, data = fill_slots(csr, reference.LAYOUT_ELL, width * m, width=width)
        return cls._new(csr.shape, csr.backend, csr.nnz, indices=indices, data=data, width=width)

    def to_csr(self) -> Any:
        xp, m = self._xp, self._shape[0]
        slots = xp.flatnonzero(self.indices >= 0)
        rows = (slots % max(m, 1)).astype(self._index_dtype)
        positions = (slots // max(m, 1)).astype(self._index_dtype)
        return csr_from_positions(rows, positions, self.indices[slots], self.data[slots], self._shape,
                                  self._index_dtype, self._backend, xp)

    def _layout_params(self) -> dict[str, Any]:
        return {"max_fill": None}  # the padding was accepted when this matrix was built

    @property
    def fill(self) -> float:
        """Padding slots per stored entry (0 for a matrix of equal rows)."""
        return (self.width * self._shape[0] - self._nnz) / self._nnz if self._nnz else 0.0

    def _forward(self, x: Any, y: Any, alpha: Any, beta: Any) -> Any:
        return ell_forward(self.indices, self.data, self.width, x, y, alpha, beta)

    def _packed_launches(self) -> tuple[list[Launch], bool]:
        return ell_launches(self.indices, self.data, self.width, self._shape[0]), False

    def _fast_key(self) -> Any:
        return None  # the product does not depend on the deterministic option

    def _semiring_gpu(self, x: Any, out: Any, semiring: Any, mask: Any, complement: bool, **flags: Any) -> Any:
        if flags:  # presence flags (a sparse x) run over the CSR
            return super()._semiring_gpu(x, out, semiring, mask, complement, **flags)
        kernel = _semiring.kernel(semiring, "spmv_ell.cu", SEMIRING_ELL, SEMIRING_ELL[0], self._dtype,
                                  self._index_dtype)
        m = self._shape[0]
        kernel((blocks_for(m, ELL_BLOCK),), (ELL_BLOCK,),
               (self.indices, self.data, np.int64(self.width), np.int64(m), x, out,
                NULL_POINTER if mask is None else mask, np.int32(complement)))
        return out

    def _spmv_dot(self, x: Any, y: Any, alpha: Any, beta: Any, w: Any, dot: Any) -> Any:
        # The product and w . y in one kernel (kernels/spmv_ell.cu ell_spmv with its dot epilogue).
        return ell_forward(self.indices, self.data, self.width, x, y, alpha, beta, w, dot, self._cache)


def check_fill(n_rows: int, width: int, nnz: int, max_fill: float | None) -> None:
    """ValueError when ELL would store more than ``max_fill`` padding slots per entry."""
    if max_fill is None:
        return
    max_fill = _validate.check_number("max_fill", max_fill)
    if isinstance(max_fill, (complex, np.complexfloating)) or not (math.isfinite(max_fill) and max_fill >= 0):
        raise ValueError(f"max_fill must be a non-negative finite number or None, got {max_fill!r}")
    padded = width * n_rows - nnz
    ratio = padded / nnz if nnz else 0.0
    if ratio > max_fill:
        raise ValueError(
            f"ELL would pad {nnz} stored entries to {n_rows} rows x {width} slots (the longest row; "
            f"the mean is {nnz / n_rows:.2f}): padding ratio {ratio:.2f} padded slots per entry "
            f"exceeds max_fill={max_fill}. Use HYB ('hyb') or SELL-C-sigma ('sell') for uneven rows, "
            f"or pass max_fill=None (or a larger limit) to build ELL anyway."
        )
