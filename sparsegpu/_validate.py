"""Input checks shared by every entry point. Each raises ValueError or TypeError naming the
problem before any kernel launches."""

from __future__ import annotations

import math
import numbers
import os
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu._backend import backend_of, is_device_array

VALUE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64), np.dtype(np.complex128))
INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
_INT32_MAX = np.iinfo(np.int32).max
_VALUE_NAMES = "float32, float64, complex64 or complex128"
_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")
_PLAIN_REALS = (int, float, np.float64, np.float32)


def value_dtype(dtype: Any) -> np.dtype:
    """The value type a matrix whose values are ``dtype`` is stored in (no dtype requested).

    float32, float64, complex64 and complex128 are kept; booleans and integers become float64
    and float16 becomes float32 (kernels exist for the four types only); anything else raises.
    """
    dt = _as_dtype("dtype", dtype)
    if dt in VALUE_DTYPES:
        return dt
    if dt.kind in "biu":
        return np.dtype(np.float64)
    if dt == np.float16:
        return np.dtype(np.float32)
    raise TypeError(f"unsupported value dtype {dt}; sparsegpu stores {_VALUE_NAMES}")


def requested_value_dtype(dtype: Any) -> np.dtype:
    """A value dtype the caller asked for by name: exactly one of the four stored types."""
    dt = _as_dtype("dtype", dtype)
    if dt not in VALUE_DTYPES:
        raise TypeError(f"dtype {dt} is not supported; sparsegpu stores {_VALUE_NAMES}")
    return dt


def stored_dtype(source: Any, requested: Any = None, casting: str = "same_kind") -> np.dtype:
    """The stored value type for values of dtype ``source``: ``requested`` (checked, and the cast
    from ``source`` allowed by NumPy's ``casting`` rule; complex to real needs
    ``casting="unsafe"``), or :func:`value_dtype` of ``source`` when None."""
    if requested is None:
        return value_dtype(source)
    target = requested_value_dtype(requested)
    check_cast("values", np.dtype(source), target, casting)
    return target


def check_cast(name: str, source: np.dtype, target: np.dtype, casting: str = "same_kind") -> None:
    """Raise TypeError when NumPy's ``casting`` rule forbids ``source`` -> ``target``."""
    if casting not in _CASTINGS:
        raise ValueError(f"casting must be one of {_CASTINGS}, not {casting!r}")
    if not np.can_cast(source, target, casting):
        hint = ' (pass casting="unsafe" to drop imaginary parts)' if source.kind == "c" else ""
        raise TypeError(f"cannot cast {name} from {source} to {target} under casting={casting!r}{hint}")


def cast_values(values: Any, dtype: np.dtype) -> Any:
    """``values`` (NumPy or CuPy) as ``dtype``, a cast already allowed by :func:`check_cast`
    (complex to real keeps the real part, as asked for with ``casting="unsafe"``)."""
    if values.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        values = values.real
    return values.astype(dtype, copy=False)


def _as_dtype(name: str, dtype: Any) -> np.dtype:
    if dtype is None or isinstance(dtype, bool):
        raise TypeError(f"{name} must be a NumPy dtype, got {dtype!r}")
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name} must be a NumPy dtype, got {dtype!r}") from None


def index_dtype(shape: tuple[int, int], nnz: int, requested: Any = None) -> np.dtype:
    """int32 when every index and offset fits, else int64; or the ``requested`` one, checked."""
    needs_64 = max(shape[0], shape[1], nnz) > _INT32_MAX
    if requested is None:
        return np.dtype(np.int64 if needs_64 else np.int32)
    dt = _as_dtype("index_dtype", requested)
    if dt not in INDEX_DTYPES:
        raise TypeError(f"index_dtype must be int32 or int64, not {dt}")
    if dt == np.int32 and needs_64:
        raise ValueError(
            f"index_dtype int32 cannot hold shape {shape} with {nnz} nonzeros; use int64"
        )
    return dt


def shape2d(shape: Any) -> tuple[int, int]:
    """A (rows, cols) pair of non-negative integers (Python or NumPy ints; no floats or bools)."""
    try:
        pair = tuple(shape)
    except TypeError:
        raise TypeError(f"shape must be a pair (rows, cols), got {shape!r}") from None
    if len(pair) != 2:
        raise ValueError(f"shape must be a pair (rows, cols), got {shape!r}")
    m, n = (check_int("shape", s, minimum=0) for s in pair)
    return m, n


def _host_int(value: Any) -> int:
    return int(value.item() if hasattr(value, "item") else value)


def as_array(name: str, a: Any) -> Any:
    """``a`` if it is a NumPy or CuPy array; a list or tuple becomes a NumPy array; anything
    else (None, a dict, a scalar) raises TypeError naming ``name``."""
    if hasattr(a, "dtype") and hasattr(a, "ndim"):
        return a
    if isinstance(a, (list, tuple)):
        converted = np.asarray(a)
        if converted.dtype != object:
            return converted
    raise TypeError(f"{name} must be a NumPy or CuPy array, got {type(a).__name__}")


def check_index_array(name: str, a: Any, length: int | None = None) -> None:
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(a.shape)}")
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
    if length is not None and a.size != length:
        raise ValueError(f"{name} has length {a.size}, expected {length}")


def check_indices_in_range(name: str, indices: Any, bound: int, axis: str) -> None:
    """Every entry in [0, bound)."""
    if indices.size == 0:
        return
    check_index_extremes(name, _host_int(indices.min()), _host_int(indices.max()), bound, axis)


def check_index_extremes(name: str, low: int, high: int, bound: int, axis: str) -> None:
    """The smallest and largest of an index array (found however the caller likes) in [0, bound)."""
    if low < 0:
        raise ValueError(f"{name} holds a negative index ({low})")
    if high >= bound:
        raise ValueError(f"{name} holds index {high}, out of range for {bound} {axis}")


def check_compressed(indptr: Any, indices: Any, data: Any, n_major: int, n_minor: int,
                     major: str, minor: str) -> None:
    """The arrays of a CSR (major = rows) or CSC (major = columns) matrix describe one."""
    check_pointers(indptr, indices, data, n_major, major)
    check_indices_in_range("indices", indices, n_minor, minor)


def check_pointers(indptr: Any, indices: Any, data: Any, n_major: int, major: str) -> None:
    """The pointers of a compressed layout: ``n_major + 1`` integers from 0, monotone, ending at
    the stored entries, which ``indices`` and ``data`` hold alike (their values not read)."""
    check_index_array("indptr", indptr, n_major + 1)
    check_index_array("indices", indices)
    if data.ndim != 1:
        raise ValueError(f"data must be 1-D, got shape {tuple(data.shape)}")
    if data.size != indices.size:
        raise ValueError(f"data has {data.size} entries but indices has {indices.size}")
    first, last = _host_int(indptr[0]), _host_int(indptr[-1])
    if first != 0:
        raise ValueError(f"indptr[0] must be 0, got {first}")
    if last != indices.size:
        raise ValueError(f"indptr[-1] is {last} but there are {indices.size} stored entries")
    if n_major > 0 and bool((indptr[1:] < indptr[:-1]).any()):
        bad = _host_int((indptr[1:] < indptr[:-1]).argmax())
        raise ValueError(
            f"indptr is not monotone: indptr[{bad + 1}] = {_host_int(indptr[bad + 1])} < "
            f"indptr[{bad}] = {_host_int(indptr[bad])} ({major} {bad})"
        )


def is_canonical(indptr: np.ndarray, indices: np.ndarray) -> bool:
    """Whether every row's (column's) indices strictly increase: sorted, without duplicates.
    Host arrays already checked by :func:`check_compressed`."""
    if indices.size < 2:
        return True
    increasing = indices[1:] > indices[:-1]
    starts = np.asarray(indptr[1:-1], dtype=np.int64)
    starts = starts[(starts > 0) & (starts < indices.size)]
    increasing[starts - 1] = True  # a pair across a row boundary may go down
    return bool(increasing.all())


def check_vector(x: Any, length: int, dtype: np.dtype, name: str = "x") -> Any:
    """x as an array of ``dtype`` (cast only when safe), 1-D of ``length``.

    Non-array input (a list) is turned into a NumPy array first.
    """
    if not hasattr(x, "dtype") or not hasattr(x, "ndim"):
        x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D of length {length}, got shape {tuple(x.shape)}")
    if x.shape[0] != length:
        raise ValueError(f"{name} has length {x.shape[0]}, but the operator needs {length}")
    if x.dtype != dtype:
        if not np.can_cast(x.dtype, dtype, "safe"):
            raise TypeError(
                f"{name} has dtype {x.dtype}, which cannot be cast safely to the matrix dtype "
                f"{dtype}; convert one of them first (A.astype(...) or {name}.astype(...))"
            )
        x = x.astype(dtype)
    return x


def check_out(y: Any, length: int, dtype: np.dtype, like: Any) -> None:
    """y, written in place, is a writeable 1-D array of ``length``, exactly ``dtype``, of the same
    library (NumPy or CuPy) as ``like`` (x), and shares no memory with it."""
    if not hasattr(y, "dtype") or not hasattr(y, "ndim"):
        raise TypeError(f"y must be a NumPy or CuPy array, got {type(y).__name__}")
    if y.ndim != 1 or y.shape[0] != length:
        raise ValueError(f"y must be 1-D of length {length}, got shape {tuple(y.shape)}")
    if y.dtype != dtype:
        raise TypeError(f"y has dtype {y.dtype}; it is written in place, so it must be {dtype}")
    check_same_library("y", y, like)
    if isinstance(y, np.ndarray) and not y.flags.writeable:
        raise ValueError("y is read-only; pass a writeable array (it is written in place)")
    if overlaps(y, like):
        raise ValueError("y must not overlap x: the product reads x while it writes y")


def check_same_library(name: str, a: Any, like: Any) -> None:
    """``a`` is a CuPy array exactly when ``like`` (x) is one."""
    if backend_of(a) != backend_of(like):
        raise TypeError(
            f"{name} is a {'CuPy' if backend_of(a) == 'gpu' else 'NumPy'} array but x is not; "
            "pass both from the same library"
        )


def overlaps(a: Any, b: Any) -> bool:
    """Whether two arrays of one library may share memory (by address ranges on the device)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    if is_device_array(a) and is_device_array(b) and a.size and b.size:
        a_low, b_low = a.data.ptr, b.data.ptr
        a_high, b_high = a_low + a.nbytes * max(1, _stride_span(a)), b_low + b.nbytes * max(1, _stride_span(b))
        return a_low < b_high and b_low < a_high
    return False


def _stride_span(a: Any) -> int:
    """How many times its own bytes a 1-D view spans (its stride over its item size)."""
    return abs(a.strides[0]) // a.itemsize if a.ndim == 1 and a.strides[0] else 1


def check_number(name: str, value: Any) -> Any:
    """``value`` if it is a number: a Python int, float or complex, a NumPy numeric scalar, or a
    0-d numeric array (returned as a scalar). None, strings, booleans and arrays raise."""
    if isinstance(value, np.ndarray) or is_device_array(value):
        if value.ndim != 0:
            raise ValueError(f"{name} must be a scalar, got an array of shape {tuple(value.shape)}")
        value = value.item() if isinstance(value, np.ndarray) else value.get().item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Number, np.number)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    return value


def check_scalar(name: str, value: Any, dtype: np.dtype) -> Any:
    """``value`` as a scalar of ``dtype``; a complex value for a real matrix raises."""
    if type(value) in _PLAIN_REALS:  # the common case, kept cheap: a product costs a few us
        return dtype.type(value)
    value = check_number(name, value)
    if np.iscomplexobj(value) and dtype.kind != "c":
        if np.imag(value) != 0:
            raise TypeError(f"{name} = {value} is complex but the matrix dtype is {dtype}")
        value = np.real(value)
    return dtype.type(value)


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is a bool (Python or NumPy); anything else raises TypeError."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int if it is an integer (Python or NumPy, not a bool, not a float) within
    [minimum, maximum]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value}")
    return value


def check_real_finite(name: str, value: Any, *, minimum: float | None = None) -> float:
    """``value`` as a float if it is a real, finite number (at least ``minimum`` when given)."""
    value = check_number(name, value)
    if isinstance(value, (complex, np.complexfloating)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_positive_finite(name: str, value: Any, *, allow_none: bool = False) -> float | None:
    """``value`` as a float if it is a real number, positive and finite (or None when allowed)."""
    if value is None and allow_none:
        return None
    value = check_number(name, value)
    if isinstance(value, (complex, np.complexfloating)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return value


# --------------------------------------------------------------------------- memory


def available_bytes(backend: str) -> int:
    """Memory an allocation on ``backend`` can take now: free device memory plus what CuPy's pool
    holds unused, or the host's available RAM (MemAvailable; physical memory where unknown)."""
    if backend == "gpu":
        import cupy

        free, _ = cupy.cuda.runtime.memGetInfo()
        return int(free) + int(cupy.get_default_memory_pool().free_bytes())
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def ensure_fits(nbytes: int, what: str, backend: str) -> None:
    """Raise ValueError, naming ``what`` and the memory available, when ``nbytes`` cannot be
    allocated on ``backend``; called before allocating from user-given sizes."""
    if nbytes <= _ALWAYS_FITS:
        return
    available = available_bytes(backend)
    if nbytes > available:
        where = "free device memory" if backend == "gpu" else "available host memory"
        raise ValueError(f"{what} needs {_gib(nbytes)} but only {_gib(available)} of {where} is left")


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:,.3g} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:,.3g} MiB"


#: Allocations up to this size are not checked against free memory (the check costs a call).
_ALWAYS_FITS = 64 << 20


# --------------------------------------------------------------------------- scipy input


def check_scipy(S: Any) -> Any:
    """``S`` if it is a 2-D scipy sparse matrix or array whose stored arrays describe one, checked
    before any SciPy routine reads them (SciPy's own routines trust them and can crash or write
    out of bounds when they were changed after construction).

    CSR, CSC and BSR: the compressed checks of :func:`check_compressed`; COO: rows and columns
    of the data's length, in range; DIA: one offset per stored diagonal. LIL and DOK hold Python
    lists and dicts that SciPy converts with bounds checks; their result is checked again by the
    caller's own conversion."""
    if not sp.issparse(S):
        raise TypeError(
            f"expected a scipy.sparse matrix or array, got {type(S).__module__}.{type(S).__name__}"
        )
    if S.ndim != 2:
        raise ValueError(f"expected a 2-D sparse matrix, got {S.ndim}-D")
    m, n = shape2d(S.shape)
    fmt = S.format
    if fmt in ("csr", "csc"):
        n_major, n_minor = (m, n) if fmt == "csr" else (n, m)
        names = ("rows", "columns") if fmt == "csr" else ("columns", "rows")
        check_compressed(S.indptr, S.indices, S.data, n_major, n_minor, *names)
    elif fmt == "bsr":
        _check_bsr(S, m, n)
    elif fmt == "coo":
        rows, cols = S.row, S.col
        if S.data.ndim != 1:
            raise ValueError(f"data must be 1-D, got shape {S.data.shape}")
        check_index_array("row", rows, S.data.shape[0])
        check_index_array("col", cols, S.data.shape[0])
        check_indices_in_range("row", rows, m, "rows")
        check_indices_in_range("col", cols, n, "columns")
    elif fmt == "dia":
        check_index_array("offsets", S.offsets)
        if S.data.ndim != 2 or S.data.shape[0] != S.offsets.size:
            raise ValueError(f"a DIA matrix needs data of shape (len(offsets), L), got {S.data.shape} "
                             f"for {S.offsets.size} offsets")
    return S


def _check_bsr(S: Any, m: int, n: int) -> None:
    r, c = S.blocksize
    if S.data.ndim != 3 or S.data.shape[1:] != (r, c):
        raise ValueError(f"BSR data must have shape (blocks, {r}, {c}), got {S.data.shape}")
    if r <= 0 or c <= 0 or m % r or n % c:
        raise ValueError(f"BSR blocksize {(r, c)} does not divide the shape {(m, n)}")
    check_index_array("indptr", S.indptr, m // r + 1)
    check_index_array("indices", S.indices, S.data.shape[0])
    check_compressed(S.indptr, S.indices, np.empty(S.indices.size, np.int8), m // r, n // c,
                     "block rows", "block columns")
