"""Input checks shared by every entry point. Each raises ValueError or TypeError naming the
problem before any kernel launches."""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._backend import backend_of

VALUE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64), np.dtype(np.complex128))
INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
_INT32_MAX = np.iinfo(np.int32).max


def value_dtype(dtype: Any) -> np.dtype:
    """The value type a matrix of ``dtype`` is stored in.

    float32, float64, complex64 and complex128 are kept; booleans and integers become float64
    and float16 becomes float32 (kernels exist for the four types only); anything else raises.
    """
    dt = np.dtype(dtype)
    if dt in VALUE_DTYPES:
        return dt
    if dt.kind in "biu":
        return np.dtype(np.float64)
    if dt == np.float16:
        return np.dtype(np.float32)
    raise TypeError(
        f"unsupported value dtype {dt}; sparsegpu stores float32, float64, complex64 or complex128"
    )


def index_dtype(shape: tuple[int, int], nnz: int, requested: Any = None) -> np.dtype:
    """int32 when every index and offset fits, else int64; or the ``requested`` one, checked."""
    needs_64 = max(shape[0], shape[1], nnz) > _INT32_MAX
    if requested is None:
        return np.dtype(np.int64 if needs_64 else np.int32)
    dt = np.dtype(requested)
    if dt not in INDEX_DTYPES:
        raise TypeError(f"index_dtype must be int32 or int64, not {dt}")
    if dt == np.int32 and needs_64:
        raise ValueError(
            f"index_dtype int32 cannot hold shape {shape} with {nnz} nonzeros; use int64"
        )
    return dt


def shape2d(shape: Any) -> tuple[int, int]:
    """A (rows, cols) pair of non-negative ints."""
    try:
        m, n = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape must be a pair (rows, cols), got {shape!r}") from None
    if m < 0 or n < 0:
        raise ValueError(f"shape must be non-negative, got {(m, n)}")
    return m, n


def _host_int(value: Any) -> int:
    return int(value.item() if hasattr(value, "item") else value)


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
    check_indices_in_range("indices", indices, n_minor, minor)


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
    """y, written in place, is 1-D of ``length``, exactly ``dtype``, and the same kind of array
    (NumPy or CuPy) as x."""
    if not hasattr(y, "dtype") or not hasattr(y, "ndim"):
        raise TypeError(f"y must be a NumPy or CuPy array, got {type(y).__name__}")
    if y.ndim != 1 or y.shape[0] != length:
        raise ValueError(f"y must be 1-D of length {length}, got shape {tuple(y.shape)}")
    if y.dtype != dtype:
        raise TypeError(f"y has dtype {y.dtype}; it is written in place, so it must be {dtype}")
    if backend_of(y) != backend_of(like):
        raise TypeError(
            f"y is a {'CuPy' if backend_of(y) == 'gpu' else 'NumPy'} array but x is not; "
            "pass both from the same library"
        )


def check_scalar(name: str, value: Any, dtype: np.dtype) -> Any:
    """``value`` as a scalar of ``dtype``; complex scalars for a real matrix raise."""
    if np.ndim(value) != 0:
        raise ValueError(f"{name} must be a scalar, got shape {np.shape(value)}")
    if np.iscomplexobj(value) and dtype.kind != "c":
        if np.imag(value) != 0:
            raise TypeError(f"{name} = {value} is complex but the matrix dtype is {dtype}")
        value = np.real(value)
    return dtype.type(value)
