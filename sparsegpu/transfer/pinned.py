"""Page-locked host memory: arrays the GPU copies at the pinned rate without staging
(:func:`pinned_empty`, :func:`pin`, :func:`unpin`, :func:`is_pinned`) and the pool of staging
buffers uploads pack pageable arrays into (:class:`PinnedPool`, :func:`default_pool`)."""

from __future__ import annotations

import atexit
import ctypes
import math
import threading
import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from sparsegpu import _validate
from sparsegpu._backend import Backend, resolve_backend
from sparsegpu.transfer._checks import positive_int

#: Default staging pool: 3 buffers of 256 MiB, one being packed while the others are in flight.
#: Fewer, larger copies leave the DMA fewer gaps: 3 x 256 MiB uploaded a 2.48 GB pageable CSR
#: faster than 4 x 256, 8 x 128 or 8 x 64 MiB (measured on an H200, see docs/performance.md).
DEFAULT_BUFFERS = 3
DEFAULT_BUFFER_BYTES = 256 << 20


def _pinning_available(backend: Backend) -> bool:
    return backend == "gpu"


def _alloc_pinned(nbytes: int) -> int:
    """A page-locked host allocation (``cudaHostAlloc``); its address."""
    import cupy

    return int(cupy.cuda.runtime.hostAlloc(nbytes, 0))


def _free_pinned(address: int) -> None:
    import cupy

    cupy.cuda.runtime.freeHost(address)


def _host_view(address: int, nbytes: int) -> np.ndarray:
    """A uint8 NumPy view of ``nbytes`` at ``address`` (memory owned elsewhere)."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))


def is_pinned(array: Any) -> bool:
    """Whether ``array``'s memory is page-locked and known to CUDA.

    Such arrays (from ``cudaHostAlloc``, :func:`pinned_empty` or :func:`pin`) are copied to
    the GPU at the pinned rate without staging.

    Parameters
    ----------
    array : numpy.ndarray
        Any host array; other objects give False.

    Returns
    -------
    bool
        Always False on the CPU backend and for empty arrays.

    Examples
    --------
    >>> is_pinned(np.zeros(3))
    False
    """
    if not isinstance(array, np.ndarray) or array.size == 0 or resolve_backend(None) != "gpu":
        return False
    import cupy

    try:
        attributes = cupy.cuda.runtime.pointerGetAttributes(array.ctypes.data)
    except Exception:  # older drivers raise for unregistered host memory
        return False
    return int(attributes.type) == 1  # cudaMemoryTypeHost


def _shape_of(shape: Any) -> tuple[int, ...]:
    if np.ndim(shape) == 0:
        return (_validate.check_int("shape", shape, minimum=0),)
    return tuple(_validate.check_int("shape", s, minimum=0) for s in shape)


def pinned_empty(shape: Any, dtype: Any = np.float64) -> np.ndarray:
    """An uninitialised NumPy array in page-locked host memory.

    The memory comes from CuPy's pinned allocator and goes back to CuPy's pinned pool when
    the array is collected. Arrays built here upload at the pinned rate without staging.

    Parameters
    ----------
    shape : int or tuple of int
        Non-negative sizes.
    dtype : numpy dtype, default float64
        The element type.

    Returns
    -------
    numpy.ndarray
        C-contiguous; plain ``np.empty`` memory on the CPU backend.

    Raises
    ------
    TypeError
        ``shape`` holds something other than integers, or ``dtype`` is not a dtype.
    ValueError
        A negative size, or more bytes than the host has available.

    Examples
    --------
    >>> a = pinned_empty((2, 3), np.float32)
    >>> a.shape, a.dtype
    ((2, 3), dtype('float32'))
    """
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a NumPy dtype, got {dtype!r}") from None
    shape = _shape_of(shape)
    count = math.prod(shape)
    _validate.ensure_fits(count * dt.itemsize, f"pinned_empty({shape}, {dt})", "cpu")
    if resolve_backend(None) != "gpu" or count == 0:
        return np.empty(shape, dt)
    import cupy

    memory = cupy.cuda.alloc_pinned_memory(count * dt.itemsize)
    return np.frombuffer(memory, dt, count).reshape(shape)


#: Arrays registered by :func:`pin`: id -> (address, finalizer).
_REGISTERED: dict[int, tuple[int, weakref.finalize]] = {}
_REGISTERED_LOCK = threading.Lock()


def unregister_pages(address: int) -> None:
    """``cudaHostUnregister`` of a registration starting at ``address``; errors ignored (at
    exit the context may be gone, and the OS reclaims the pages then)."""
    try:
        import cupy

        cupy.cuda.runtime.hostUnregister(address)
    except Exception:
        pass


def pin(array: np.ndarray) -> np.ndarray:
    """Page-lock ``array``'s own memory in place with ``cudaHostRegister`` (no copy).

    Uploads of the array then run at the pinned rate without staging. The pages stay locked
    until :func:`unpin`, until the array is collected, or until exit. An array already pinned
    is returned as it is. When registration fails (memory the driver cannot lock, or a page
    shared with another registration), the array is copied into :func:`pinned_empty` memory
    with a warning and the copy is returned.

    Parameters
    ----------
    array : numpy.ndarray
        C-contiguous.

    Returns
    -------
    numpy.ndarray
        ``array`` itself (or its pinned copy); on the CPU backend ``array`` unchanged.

    Raises
    ------
    TypeError
        ``array`` is not a NumPy array.
    ValueError
        ``array`` is not C-contiguous.

    Examples
    --------
    >>> a = pin(np.arange(5.0))
    >>> unpin(a).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0]
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"pin takes a NumPy array, got {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise ValueError("pin needs a C-contiguous array; pass np.ascontiguousarray(a)")
    if resolve_backend(None) != "gpu" or array.size == 0 or is_pinned(array):
        return array
    import cupy

    # The array's bytes exactly, not the whole pages around them: the driver locks the pages
    # anyway, but a registration rounded out to pages covers the start of whatever memory shares
    # the array's last page (or the end of what shares its first), and any later copy to or from
    # that neighbour then fails with cudaErrorInvalidValue.
    address = array.ctypes.data
    try:
        cupy.cuda.runtime.hostRegister(address, array.nbytes, 0)
    except Exception as exc:
        warnings.warn(f"cudaHostRegister of {array.nbytes} bytes failed ({exc}); copying into pinned memory instead",
                      RuntimeWarning, stacklevel=2)
        copy = pinned_empty(array.shape, array.dtype)
        np.copyto(copy, array)
        return copy
    with _REGISTERED_LOCK:
        _REGISTERED[id(array)] = (address, weakref.finalize(array, _forget_registration, id(array), address))
    return array


def _forget_registration(key: int, address: int) -> None:
    with _REGISTERED_LOCK:
        _REGISTERED.pop(key, None)
    unregister_pages(address)


def unpin(array: np.ndarray) -> np.ndarray:
    """Undo :func:`pin` (``cudaHostUnregister``).

    Parameters
    ----------
    array : numpy.ndarray
        An array :func:`pin` returned; for any other array this does nothing.

    Returns
    -------
    numpy.ndarray
        ``array``, its memory pageable again.

    Examples
    --------
    >>> unpin(pin(np.ones(2))).tolist()
    [1.0, 1.0]
    """
    with _REGISTERED_LOCK:
        entry = _REGISTERED.get(id(array))
    if entry is not None:
        entry[1]()  # runs _forget_registration once
    return array


@atexit.register
def _unregister_all() -> None:
    with _REGISTERED_LOCK:
        finalizers = [finalizer for _, finalizer in _REGISTERED.values()]
    for finalizer in finalizers:
        finalizer()


class PinnedPool:
    """A pool of page-locked host staging buffers, allocated once and reused by every upload
    that is given the pool.

    The memory is freed by :meth:`close`, at the end of a ``with`` block, or at exit. If
    pinned allocation fails (locked-memory limits, no GPU driver), the pool warns with the
    cause and uses pageable buffers: transfers stay correct, only slower.

    Parameters
    ----------
    buffers : int, default 3
        Number of buffers (at least 1).
    buffer_bytes : int, default 256 MiB
        Bytes per buffer (at least 1).
    backend : {"cpu", "gpu"} or None
        Where the uploads go; None picks the GPU when there is one. On the CPU backend the
        buffers are plain NumPy memory.

    Raises
    ------
    TypeError
        ``buffers`` or ``buffer_bytes`` is not an integer.
    ValueError
        A size below 1, or ``buffers * buffer_bytes`` more than the host has available.

    Examples
    --------
    >>> with PinnedPool(buffers=2, buffer_bytes=1 << 16, backend="cpu") as pool:
    ...     with pool.borrow(2) as bufs:
    ...         len(bufs), pool.available
    (2, 0)
    >>> pool.closed
    True
    """

    def __init__(self, buffers: int = DEFAULT_BUFFERS, buffer_bytes: int = DEFAULT_BUFFER_BYTES, *,
                 backend: str | None = None) -> None:
        self.buffers = positive_int("buffers", buffers)
        self.buffer_bytes = positive_int("buffer_bytes", buffer_bytes)
        self.backend = resolve_backend(backend)
        _validate.ensure_fits(self.buffers * self.buffer_bytes,
                              f"PinnedPool(buffers={self.buffers}, buffer_bytes={self.buffer_bytes})", "cpu")
        addresses: list[int] = []
        self.pinned = _pinning_available(self.backend)
        if self.pinned:
            try:
                for _ in range(self.buffers):
                    addresses.append(_alloc_pinned(self.buffer_bytes))
            except Exception as exc:
                for address in addresses:
                    _free_pinned(address)
                addresses = []
                self.pinned = False
                warnings.warn(
                    f"could not allocate {self.buffers} pinned buffers of {self.buffer_bytes} bytes ({exc}); "
                    "falling back to pageable buffers: transfers stay correct but run at the pageable rate",
                    RuntimeWarning, stacklevel=2)
        if self.pinned:
            views = [_host_view(address, self.buffer_bytes) for address in addresses]
        else:
            views = [np.empty(self.buffer_bytes, np.uint8) for _ in range(self.buffers)]
        self._free: list[np.ndarray] = list(views)
        self._condition = threading.Condition()
        self._closed = False
        self._finalizer = weakref.finalize(self, _release_pinned, addresses)

    @property
    def available(self) -> int:
        """Buffers not lent out now."""
        return len(self._free)

    @property
    def closed(self) -> bool:
        return self._closed

    @contextmanager
    def borrow(self, count: int) -> Iterator[list[np.ndarray]]:
        """Up to ``count`` buffers (uint8 arrays of ``buffer_bytes``) for the ``with`` block,
        at least one (waits for another user to return one); all are returned on exit, also
        after an exception or KeyboardInterrupt. Whoever borrows must make sure no copy still
        reads a buffer when the block ends."""
        if self._closed:
            raise ValueError("this PinnedPool is closed")
        with self._condition:
            self._condition.wait_for(lambda: self._free or self._closed)
            if self._closed:
                raise ValueError("this PinnedPool is closed")
            taken = self._free[:count]
            del self._free[:count]
        try:
            yield taken
        finally:
            with self._condition:
                self._free.extend(taken)
                self._condition.notify_all()

    def close(self) -> None:
        """Free the pinned memory (buffers must all have been returned)."""
        with self._condition:
            if self._closed:
                return
            if len(self._free) != self.buffers:
                raise RuntimeError(f"{self.buffers - len(self._free)} buffers are still lent out")
            self._closed = True
            self._free = []
            self._condition.notify_all()
        self._finalizer()

    def __enter__(self) -> PinnedPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        kind = "pinned" if self.pinned else "pageable"
        state = "closed" if self._closed else f"{self.available} free"
        return f"<PinnedPool {self.buffers} x {self.buffer_bytes} B {kind}, {state}>"


def _release_pinned(addresses: list[int]) -> None:
    for address in addresses:
        try:
            _free_pinned(address)
        except Exception:  # at exit the CUDA context may already be gone
            pass
    addresses.clear()


_DEFAULT_POOL: PinnedPool | None = None
_DEFAULT_POOL_LOCK = threading.Lock()


def default_pool() -> PinnedPool:
    """The shared pool uploads use when given none (created on first use, freed at exit)."""
    global _DEFAULT_POOL
    with _DEFAULT_POOL_LOCK:
        if _DEFAULT_POOL is None or _DEFAULT_POOL.closed:
            _DEFAULT_POOL = PinnedPool()
        return _DEFAULT_POOL
