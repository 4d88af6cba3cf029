"""A matrix's ``A @ x`` on the GPU with its launches packed once: the per-call fast path.

Through CuPy, every launch packs each of its (about a dozen) Python arguments anew, and the
checks of x, y, alpha and beta run again: several microseconds per call, more than a small
matrix's kernels take. Here each launch's arguments live in C storage
(:class:`sparsegpu._kernels.PackedLaunch`), set once at the first product; a call only writes
x's and y's device addresses, alpha and beta, then makes one driver call per launch on the
current CuPy stream.

A format supplies the launches its ``_spmv`` makes, as :class:`Launch` records (kernel, grid,
block, shared memory, the same argument tuple CuPy would get) with the per-call arguments
replaced by the markers :data:`X`, :data:`Y`, :data:`ALPHA`, :data:`BETA` and scratch arrays by
:class:`Scratch`; so the kernels, grids and arguments, hence the bits, are those of the general
path. Each parameter's C type follows from the argument (what CuPy does): an array, a marker
of x or y or scratch, or a null pointer is a ``c_uint64`` address; a NumPy integer scalar its
own width; alpha and beta the matrix's value type (complex: a pair of floats or doubles, the
layout of ``sg::complex<T>`` in kernels/common.cuh).

A call goes this way only when x (and y, when given) has an array type, dtype, shape and
strides that the general path accepted before for this matrix (:meth:`FastProduct.accept`:
contiguous CuPy arrays of the matrix's dtype), and alpha and beta are plain numbers; anything
else returns None and the caller takes the general path, which checks and raises. Whether y
overlaps x depends on the data, so it is compared every call (an overlap goes to the general
path, which raises).

Scratch (the partial sums of long CSR rows, the carries of COO's reduction tree) is allocated
once per CUDA stream a product runs on, so products on different streams never share it.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsegpu._kernels import PackedLaunch

#: The key of a matrix's fast products in its ``_cache``: ``(FAST, matrix._fast_key())``.
FAST = "fast_product"


class _Marker:
    """An argument a call fills in: x's or y's address, alpha or beta."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


X, Y, ALPHA, BETA = _Marker("X"), _Marker("Y"), _Marker("ALPHA"), _Marker("BETA")


class Scratch:
    """A device array of ``size`` entries of ``dtype`` that the launches use as work space (the
    same object in several launches is the same array)."""

    def __init__(self, size: int, dtype: Any) -> None:
        self.size, self.dtype = int(size), np.dtype(dtype)

    def __repr__(self) -> str:
        return f"Scratch({self.size}, {self.dtype})"


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a product: ``function`` (a compiled kernel, or None to pack
    arguments only), ``grid`` blocks of ``block`` threads, ``shared`` bytes of dynamic shared
    memory, and its ``arguments`` in the order of the kernel's parameters."""

    function: Any
    grid: int
    block: int
    arguments: tuple[Any, ...]
    shared: int = 0


def complex_type(part: type) -> type:
    """The C struct of ``sg::complex<T>`` (kernels/common.cuh) with parts of ctypes type ``part``."""
    return type(f"complex_{part.__name__}", (ctypes.Structure,), {"_fields_": [("re", part), ("im", part)]})


#: ctypes storage of a kernel parameter of each value dtype.
VALUE_TYPES = {
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.complex64): complex_type(ctypes.c_float),
    np.dtype(np.complex128): complex_type(ctypes.c_double),
}
#: ctypes storage of a NumPy integer scalar argument (a null pointer is a uint64 zero).
SCALAR_TYPES = {
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.uint64): ctypes.c_uint64,
}
POINTER = ctypes.c_uint64
#: alpha and beta types the fast path takes, per kind of matrix (others: the general path).
REAL_SCALARS = frozenset((int, float, np.float64, np.float32))
COMPLEX_SCALARS = REAL_SCALARS | {complex, np.complex128, np.complex64}


def is_device_array(a: Any) -> bool:
    """Whether ``a`` has a device address (a CuPy array or anything with ``data.ptr``)."""
    return hasattr(a, "data") and hasattr(a.data, "ptr")


def address(a: Any) -> int:
    """A device array's address."""
    return int(a.data.ptr)


def parameter_type(argument: Any, value_dtype: Any) -> type:
    """The ctypes type of a launch argument (see the module docstring); TypeError for an
    argument with no fixed C type (a Python int, whose width CuPy would guess).

    >>> parameter_type(ALPHA, np.complex128).__name__, parameter_type(np.int64(3), np.float32) is ctypes.c_int64
    ('complex_c_double', True)
    """
    if argument is ALPHA or argument is BETA:
        return VALUE_TYPES[np.dtype(value_dtype)]
    if argument is X or argument is Y or isinstance(argument, Scratch) or is_device_array(argument):
        return POINTER
    if isinstance(argument, np.generic) and argument.dtype in SCALAR_TYPES:
        return SCALAR_TYPES[argument.dtype]
    raise TypeError(f"a packed launch argument must be an array, a marker or a NumPy integer scalar, "
                    f"got {type(argument).__name__} {argument!r}")


def set_scalar(argument: Any, value: Any) -> None:
    """Write a number into a value parameter's storage (a complex one takes both parts)."""
    if isinstance(argument, ctypes.Structure):
        argument.re, argument.im = value.real, value.imag
    else:
        argument.value = value


class PackedProduct:
    """A product's launches with their arguments packed: a call sets x, y, alpha and beta in
    every launch that takes them and launches each in turn (without a GPU, ``function`` None:
    the arguments only, what the CPU tests inspect)."""

    def __init__(self, launches: Sequence[Launch], value_dtype: Any) -> None:
        self.launches = [PackedLaunch(launch.function, [parameter_type(a, value_dtype) for a in launch.arguments])
                         for launch in launches]
        self.shapes = [(launch.grid, launch.block, launch.shared) for launch in launches]
        self.slots: dict[str, list[Any]] = {"x": [], "y": [], "alpha": [], "beta": []}
        self.scratch: list[tuple[Scratch, list[Any]]] = []  # each array and the arguments holding it
        self.records = list(launches)  # also keeps alive the arrays whose addresses are packed
        scratch_slots: dict[int, tuple[Scratch, list[Any]]] = {}
        markers = {id(X): "x", id(Y): "y", id(ALPHA): "alpha", id(BETA): "beta"}
        for launch, packed in zip(launches, self.launches):
            for argument, storage in zip(launch.arguments, packed.arguments):
                if id(argument) in markers:
                    self.slots[markers[id(argument)]].append(storage)
                elif isinstance(argument, Scratch):
                    scratch_slots.setdefault(id(argument), (argument, []))[1].append(storage)
                elif is_device_array(argument):
                    storage.value = address(argument)
                else:
                    storage.value = int(argument)
        self.scratch = list(scratch_slots.values())
        self.x_slots, self.y_slots = tuple(self.slots["x"]), tuple(self.slots["y"])
        self.alpha_slots, self.beta_slots = tuple(self.slots["alpha"]), tuple(self.slots["beta"])
        self.bind_launches()

    def bind_launches(self) -> None:
        """Gather what each launch's driver call takes, once (launches without a kernel have none)."""
        self.calls = [(packed.launch_kernel, packed.handle, grid, block, shared, packed.parameters_address)
                      for packed, (grid, block, shared) in zip(self.launches, self.shapes)
                      if hasattr(packed, "launch_kernel")]

    def set_call(self, x_pointer: int, y_pointer: int, alpha: Any, beta: Any) -> None:
        """Write one call's arguments into every launch."""
        for storage in self.x_slots:
            storage.value = x_pointer
        for storage in self.y_slots:
            storage.value = y_pointer
        for storage in self.alpha_slots:
            set_scalar(storage, alpha)
        for storage in self.beta_slots:
            set_scalar(storage, beta)

    def set_scratch(self, pointers: Sequence[int]) -> None:
        """Point the scratch arguments at ``pointers`` (one per :class:`Scratch`, in order)."""
        for (_, storages), pointer in zip(self.scratch, pointers):
            for storage in storages:
                storage.value = pointer

    def launch(self, stream: int) -> None:
        """Launch every kernel on ``stream`` (a CUDA stream handle)."""
        for launch_kernel, handle, grid, block, shared, parameters in self.calls:
            launch_kernel(handle, grid, 1, 1, block, 1, 1, shared, stream, parameters, 0)


def signature(a: Any) -> tuple:
    """What the checks of an x or a y read: array type, dtype, shape and strides."""
    return (type(a), a.dtype, a.shape, a.strides)


class FastProduct:
    """One matrix's ``alpha * A @ x + beta * y`` on the GPU by packed launches.

    ``launches``: the format's (:meth:`SparseMatrix._packed_launches`); ``n_rows``: y's length;
    ``scale_first``: y = beta * y before the launches (formats whose kernels only add into y:
    scatters and COO's reduction), by a memset for beta = 0 as the general path's fill."""

    def __init__(self, launches: Sequence[Launch], n_rows: int, dtype: Any, scale_first: bool = False,
                 xp: Any = None) -> None:
        if xp is None:
            import cupy as xp
        self.cupy = xp  # the array module (CuPy; tests pass a stand-in)
        self.dtype = np.dtype(dtype)
        self.n_rows = int(n_rows)
        self.scale_first = scale_first
        self.packed = PackedProduct(launches, self.dtype)
        self.scalars = COMPLEX_SCALARS if self.dtype.kind == "c" else REAL_SCALARS
        self.x_signature: tuple | None = None
        self.y_signature: tuple | None = None
        self.lock = threading.Lock()  # the packed arguments are shared: one call at a time
        self.stream: int | None = None
        self.scratch_by_stream: dict[int, list[Any]] = {}

    def accept(self, given_x: Any, x: Any, y: Any) -> None:
        """Record the signatures of an x and a y the general path has just accepted and used as
        they came (``given_x is x``: no cast or upload), when they are contiguous arrays of the
        matrix's dtype."""
        if given_x is x and x.dtype == self.dtype and x.flags.c_contiguous and is_device_array(x):
            self.x_signature = signature(x)
        if y is not None and y.dtype == self.dtype and y.flags.c_contiguous and is_device_array(y):
            self.y_signature = signature(y)

    def __call__(self, x: Any, y: Any, alpha: Any, beta: Any) -> Any:
        """y (a new array when None) after the product, or None when this call must take the
        general path (see the module docstring)."""
        x_signature = self.x_signature
        if x_signature is None or type(x) is not x_signature[0] or (type(x), x.dtype, x.shape, x.strides) != x_signature:
            return None
        if type(alpha) not in self.scalars or type(beta) not in self.scalars:
            return None
        if y is None:
            if beta != 0:
                return None  # the general path raises
            y = self.cupy.empty(self.n_rows, self.dtype)
        elif type(y) is not x_signature[0] or (type(y), y.dtype, y.shape, y.strides) != self.y_signature:
            return None
        x_pointer, y_pointer = x.data.ptr, y.data.ptr
        x_bytes, y_bytes = x.nbytes, y.nbytes
        if x is y or (x_bytes and y_bytes and x_pointer < y_pointer + y_bytes and y_pointer < x_pointer + x_bytes):
            return None  # y overlaps x: the general path raises
        stream = self.cupy.cuda.get_current_stream().ptr
        if self.scale_first:
            self._scale(y, y_pointer, y_bytes, beta, stream)
        packed = self.packed
        with self.lock:
            if packed.scratch and stream != self.stream:
                self._bind_scratch(stream)
            packed.set_call(x_pointer, y_pointer, alpha, beta)
            packed.launch(stream)
        return y

    def _scale(self, y: Any, y_pointer: int, y_bytes: int, beta: Any, stream: int) -> None:
        """y = beta * y as the general path does it (``scale_in_place``): zeros for beta = 0
        whatever y held, else CuPy's in-place multiply by beta in the matrix's dtype."""
        if beta == 0:
            if y_bytes:
                self.cupy.cuda.runtime.memsetAsync(y_pointer, 0, y_bytes, stream)
        else:
            y *= self.dtype.type(beta)

    def _bind_scratch(self, stream: int) -> None:
        """Point the launches at this stream's scratch arrays (allocated on its first use)."""
        arrays = self.scratch_by_stream.get(stream)
        if arrays is None:
            arrays = [self.cupy.empty(s.size, s.dtype) for s, _ in self.packed.scratch]
            self.scratch_by_stream[stream] = arrays
        self.packed.set_scratch([address(a) for a in arrays])
        self.stream = stream


def fast_product(matrix: Any, key: Any) -> FastProduct | None:
    """``matrix``'s fast product for ``key`` (its ``_fast_key()``), built from its
    ``_packed_launches()`` on first use and kept in its ``_cache`` (None for a format without
    packed launches)."""
    cache_key = (FAST, key)
    if cache_key not in matrix._cache:
        spec = matrix._packed_launches()
        matrix._cache[cache_key] = None if spec is None else FastProduct(
            spec[0], matrix.shape[0], matrix.dtype, scale_first=spec[1])
    return matrix._cache[cache_key]
