"""The kernel loader: CUDA source in ``kernels/`` -> ``cupy.RawModule`` -> kernel function.

Every kernel family is one C++ template over a value type ``V`` and an index type ``I``
(plus compile-time tuning parameters spelled out in its expressions). A :class:`KernelFile`
names a source file and the template expressions the library launches from it; the file is
compiled once per process and per (value type, index type), with all its expressions
instantiated together, and the module is cached. This module is the only place that knows
about RawModule.

Local headers (``#include "common.cuh"``) are inlined here rather than left to NVRTC, so the
source CuPy hashes for its on-disk cache contains them: editing a header recompiles.

:func:`emit_instantiation_units` writes one translation unit per kernel file that instantiates
every expression for every declared type pair, so CI compiles exactly what the library launches
with ``nvcc -arch=sm_90`` on a machine without a GPU (see ``.ci/run``).
"""

from __future__ import annotations

import ctypes
import functools
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# C++ spellings of the dtypes kernels are instantiated for. sg::complex<T> (common.cuh) has
# the memory layout of numpy's complex types.
CTYPES: dict[np.dtype, str] = {
    np.dtype(np.int32): "int",
    np.dtype(np.int64): "long long",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.complex64): "sg::complex<float>",
    np.dtype(np.complex128): "sg::complex<double>",
}
VALUE_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))
INDEX_DTYPES = tuple(np.dtype(t) for t in (np.int32, np.int64))

NVRTC_OPTIONS = ("--std=c++17",)
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)


class KernelCompileError(RuntimeError):
    """NVRTC rejected a kernel file.

    Raised on the GPU backend the first time a kernel of a file is needed (kernels compile on
    first use). The message holds the file, the line and the compiler's log.

    Examples
    --------
    >>> from sparsegpu._kernels import KernelCompileError
    >>> issubclass(KernelCompileError, RuntimeError)
    True
    """


def kernel_dir() -> Path:
    """The folder holding the ``.cu`` sources: inside the installed package, or the checkout's."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "kernels", here.parent / "kernels"):
        if (candidate / "common.cuh").is_file():
            return candidate
    raise FileNotFoundError(
        f"kernel sources not found: looked in {here / 'kernels'} (installed wheel) and "
        f"{here.parent / 'kernels'} (source checkout)"
    )


def read_source(filename: str) -> str:
    """The file's text with its local includes inlined, ``#line`` directives keeping the
    original file names and line numbers for compiler messages."""
    root = kernel_dir()

    def expand(name: str, seen: frozenset[str]) -> str:
        path = root / name
        if not path.is_file():
            raise FileNotFoundError(f"kernel source {path} does not exist")
        text = path.read_text()
        out, last = [f'#line 1 "kernels/{name}"\n'], 0
        for match in _INCLUDE.finditer(text):
            out.append(text[last : match.start()])
            included = match.group(1)
            if included not in seen:
                out.append(expand(included, seen | {name, included}))
            line = text.count("\n", 0, match.end()) + 2  # the line after the include
            out.append(f'\n#line {line} "kernels/{name}"')
            last = match.end()
        out.append(text[last:])
        return "".join(out)

    return expand(filename, frozenset())


def _substitute(expression: str, value: np.dtype, index: np.dtype) -> str:
    return expression.format(V=CTYPES[value], I=CTYPES[index])


class KernelFile:
    """A kernel source file and the template expressions launched from it.

    ``expressions`` use ``{V}`` and ``{I}`` for the value and index type, e.g.
    ``"csr_spmv<{V}, {I}, 4>"``. ``value_dtypes`` / ``index_dtypes`` are the pairs the file is
    built for (and that CI compiles). ``prefix``: C++ source put before the file's (a user-made
    semiring operator's functor, which the expressions name). ``register``: list the file for
    CI's compile step (False for kernels made at run time from user code).
    """

    registry: list[KernelFile] = []

    def __init__(
        self,
        filename: str,
        expressions: Iterable[str],
        value_dtypes: Sequence[Any] = VALUE_DTYPES,
        index_dtypes: Sequence[Any] = INDEX_DTYPES,
        *,
        prefix: str = "",
        register: bool = True,
    ) -> None:
        self.filename = filename
        self.prefix = prefix
        self.expressions = tuple(expressions)
        self.value_dtypes = tuple(np.dtype(t) for t in value_dtypes)
        self.index_dtypes = tuple(np.dtype(t) for t in index_dtypes)
        if register:
            KernelFile.registry.append(self)

    def function(self, expression: str, value_dtype: Any, index_dtype: Any = np.int32) -> Any:
        """The compiled kernel for ``expression`` (one of this file's) at these types."""
        return _function(self, expression, np.dtype(value_dtype), np.dtype(index_dtype))

    def instantiations(self) -> list[str]:
        """Every concrete expression this file is built for, in a stable order."""
        seen: dict[str, None] = {}
        for value in self.value_dtypes:
            for index in self.index_dtypes:
                for expression in self.expressions:
                    seen[_substitute(expression, value, index)] = None
        return list(seen)

    def __repr__(self) -> str:
        return f"KernelFile({self.filename!r}, {len(self.expressions)} expressions)"


_compile_lock = threading.Lock()


@functools.cache
def _module(kernels: KernelFile, value: np.dtype, index: np.dtype, device: int) -> Any:
    import cupy

    if value not in kernels.value_dtypes or index not in kernels.index_dtypes:
        raise TypeError(
            f"{kernels.filename} is not built for value type {value} and index type {index}; "
            f"it supports {[str(d) for d in kernels.value_dtypes]} x "
            f"{[str(d) for d in kernels.index_dtypes]}"
        )
    names = sorted({_substitute(e, value, index) for e in kernels.expressions})
    module = cupy.RawModule(
        code=kernels.prefix + read_source(kernels.filename),
        options=NVRTC_OPTIONS,
        name_expressions=names,
    )
    try:
        module.compile()
    except cupy.cuda.compiler.CompileException as exc:
        raise KernelCompileError(
            f"compiling kernels/{kernels.filename} (V={CTYPES[value]}, I={CTYPES[index]}) failed; "
            f"the log names file and line:\n{exc.get_message() if hasattr(exc, 'get_message') else exc}"
        ) from None
    return module


@functools.cache
def _function(kernels: KernelFile, expression: str, value: np.dtype, index: np.dtype) -> Any:
    import cupy

    device = cupy.cuda.runtime.getDevice()
    with _compile_lock:
        module = _module(kernels, value, index, device)
    return module.get_function(_substitute(expression, value, index))


# --------------------------------------------------------------------------- launch helpers


class PackedLaunch:
    """A kernel's launch whose arguments live in C storage between calls: set those that change,
    then launch with one driver call. For small launches made again and again (the advisor's
    statistics), where packing a dozen Python arguments anew costs more than the kernel runs.
    ``function``: a compiled kernel (:meth:`KernelFile.function`; None holds arguments only, as
    below); ``types``: the ctypes type of each of its parameters, in order (``c_uint64`` for a
    pointer). ``arguments`` holds them as ctypes objects: a caller may also set one's ``value``.

    >>> import ctypes
    >>> packed = PackedLaunch(None, [ctypes.c_uint64, ctypes.c_int32])
    >>> packed.set(0, 7, -2); packed.values()
    [7, -2]
    """

    def __init__(self, function: Any, types: Sequence[type]) -> None:
        self.function = function  # kept alive with its module
        self.handle = None if function is None else function.kernel.ptr
        self.arguments = [kind() for kind in types]
        self.parameters = (ctypes.c_void_p * len(self.arguments))(*map(ctypes.addressof, self.arguments))
        self.parameters_address = ctypes.addressof(self.parameters)
        if function is not None:
            from cupy_backends.cuda.api import driver

            self.launch_kernel = driver.launchKernel  # (looked up once: a launch is a few microseconds)

    def set(self, first: int, *values: int) -> None:
        """Set the arguments from position ``first`` on."""
        arguments = self.arguments
        for value in values:
            arguments[first].value = int(value)
            first += 1

    def values(self) -> list[int]:
        """The arguments as they are now."""
        return [argument.value for argument in self.arguments]

    def __call__(self, grid: int, block: int, stream: int) -> None:
        """Launch on ``stream`` (a CUDA stream handle) with ``grid`` blocks of ``block`` threads."""
        self.launch_kernel(self.handle, grid, 1, 1, block, 1, 1, 0, stream, self.parameters_address, 0)


def blocks_for(work_items: int, per_block: int) -> int:
    """Blocks needed to cover ``work_items`` at ``per_block`` items each (at least 1)."""
    return max(1, -(-int(work_items) // int(per_block)))


@functools.cache
def device_properties(device: int | None = None) -> dict[str, int]:
    """The current device's multiprocessor count, L2 size, thread, register and shared-memory
    limits (cached)."""
    import cupy

    dev = cupy.cuda.runtime.getDevice() if device is None else device
    attrs = cupy.cuda.Device(dev).attributes
    return {
        "multiprocessors": attrs["MultiProcessorCount"],
        "l2_bytes": attrs["L2CacheSize"],
        "max_threads_per_block": attrs["MaxThreadsPerBlock"],
        "max_shared_per_block": attrs["MaxSharedMemoryPerBlock"],
        "max_shared_per_block_optin": attrs["MaxSharedMemoryPerBlockOptin"],
        "max_shared_per_sm": attrs["MaxSharedMemoryPerMultiprocessor"],
        "max_registers_per_sm": attrs["MaxRegistersPerMultiprocessor"],
        "warp_size": attrs["WarpSize"],
    }


def allow_dynamic_shared(kernel: Any, shared: int, what: str = "the kernel") -> Any:
    """``kernel``, allowed ``shared`` bytes of dynamic shared memory per block. Past what a block
    gets without asking (counting the kernel's static shared memory) the kernel's attribute is
    raised, once: it stays. ValueError naming ``what`` when the device gives a block less."""
    needed = shared + kernel.shared_size_bytes
    properties = device_properties()
    if needed > properties["max_shared_per_block"] and getattr(kernel, "max_dynamic_shared_size_bytes", 0) < shared:
        if needed > properties["max_shared_per_block_optin"]:
            raise ValueError(f"{what} needs {needed} bytes of shared memory per block; this device gives a block "
                             f"at most {properties['max_shared_per_block_optin']}")
        kernel.max_dynamic_shared_size_bytes = shared
    return kernel


# --------------------------------------------------------------------------- CI support


def emit_instantiation_units(out_dir: Path) -> list[Path]:
    """Write, per registered kernel file, a ``.cu`` that instantiates everything the library
    launches from it. Returns the paths written. Import :mod:`sparsegpu` first: importing the
    package registers every KernelFile."""

    out_dir.mkdir(parents=True, exist_ok=True)
    root = kernel_dir()
    by_file: dict[str, list[str]] = {}
    prefixes: dict[str, dict[str, None]] = {}
    for kernels in KernelFile.registry:
        by_file.setdefault(kernels.filename, []).extend(kernels.instantiations())
        prefixes.setdefault(kernels.filename, {})[kernels.prefix] = None
    written = []
    for filename, names in sorted(by_file.items()):
        unit = out_dir / f"instantiate_{Path(filename).stem}.cu"
        lines = [*filter(None, prefixes[filename]), f'#include "{root / filename}"', "void sparsegpu_instantiate_all() {"]
        lines += [f"    (void)&{name};" for name in dict.fromkeys(names)]
        lines.append("}")
        unit.write_text("\n".join(lines) + "\n")
        written.append(unit)
    return written
