"""The kernel loader: CUDA source in ``kernels/`` -> ``cupy.RawModule`` -> kernel function.

Every kernel family is one C++ template over a value type ``V`` and an index type ``I``
(plus compile-time tuning parameters spelled out in its expressions). A :class:`KernelFile`
names a source file and the template expressions the library launches from it; the file is
compiled once per process and per (value type, index type), with all its expressions
instantiated together, and the module is cached. This module is the only place that knows
about RawModule.

Local headers (``#include "common.cuh"``) are inlined here rather than left to NVRTC, so the
source CuPy hashes for its on-disk cache contains them: editing a header recompiles.

Kernels compiled ahead of time: a wheel built where nvcc is present ships ``sparsegpu/_cubins/``
(built by :mod:`sparsegpu._aot`), one cubin per kernel file, type pair and GPU architecture, and
a manifest giving each expression's mangled name. A registered file's module loads from the
cubin built for the device's architecture (or an older one of the same major version, which
runs there), when the manifest lists the exact source the file has now; otherwise, and always
for kernels made from user code or with ``SPARSEGPU_AOT=0``, NVRTC compiles it (CuPy keeps
that on disk, so only a process's first use of a file waits for it).

:func:`emit_instantiation_units` writes one translation unit per kernel file that instantiates
every expression for every declared type pair, so CI compiles exactly what the library launches
with ``nvcc -arch=sm_90`` on a machine without a GPU (see ``.ci/run``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
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
AOT_DIR = Path(__file__).resolve().parent / "_cubins"
AOT_MANIFEST = "manifest.json"
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
        self.registered = register
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


def module_source(kernels: KernelFile) -> str:
    """The exact source a kernel file compiles from: its prefix, then its text with headers inlined."""
    return kernels.prefix + read_source(kernels.filename)


def aot_key(filename: str, source: str, value: np.dtype, index: np.dtype) -> str:
    """The manifest's key for a module: file, types and a digest of the source (so a cubin built
    from other source is never found)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    return f"{filename}:{value.name}:{index.name}:{digest}"


@functools.cache
def aot_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of the cubins in ``folder`` (None where there is none or it is unreadable)."""
    try:
        manifest = json.loads((folder / AOT_MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("modules"), dict) else None


def pick_arch(available: Iterable[str], capability: int) -> str | None:
    """The cubin architecture to load on a device of ``capability`` (``90`` for 9.0): its own,
    else the newest of the same major version below it (a cubin runs on later minor versions of
    its major one), else None.

    >>> pick_arch(["sm_80", "sm_90"], 86), pick_arch(["sm_80", "sm_90"], 90), pick_arch(["sm_90"], 100)
    ('sm_80', 'sm_90', None)
    """
    major, minor = divmod(int(capability), 10)
    best: tuple[int, str] | None = None
    for arch in available:
        number = arch.removeprefix("sm_")
        if not number.isdigit():
            continue  # arch-specific builds (sm_90a) run only on their own device: not picked
        arch_major, arch_minor = divmod(int(number), 10)
        if arch_major == major and arch_minor <= minor and (best is None or arch_minor > best[0]):
            best = (arch_minor, arch)
    return None if best is None else best[1]


def aot_enabled() -> bool:
    """Whether registered kernels may load from shipped cubins (``SPARSEGPU_AOT=0`` turns it off)."""
    return os.environ.get("SPARSEGPU_AOT", "1").strip() not in ("0", "false", "no", "off")


def aot_cubin(
    kernels: KernelFile, value: np.dtype, index: np.dtype, capability: int, driver_version: int
) -> tuple[Path, dict[str, str]] | None:
    """The shipped cubin for this module on a device of ``capability`` under a driver of
    ``driver_version`` (``13000`` for CUDA 13.0), and its expressions' mangled names; None when
    NVRTC must compile it instead."""
    if not kernels.registered or not aot_enabled():
        return None
    manifest = aot_manifest(AOT_DIR)
    if manifest is None or driver_version < 1000 * int(manifest.get("cuda_major", 0)):
        return None  # a cubin needs a driver of at least the major version that built it
    entry = manifest["modules"].get(aot_key(kernels.filename, module_source(kernels), value, index))
    if entry is None:
        return None
    arch = pick_arch(entry["cubins"], capability)
    if arch is None or not (AOT_DIR / entry["cubins"][arch]).is_file():
        return None
    names = {_substitute(e, value, index) for e in kernels.expressions}
    if not names <= entry["entries"].keys():
        return None
    return AOT_DIR / entry["cubins"][arch], entry["entries"]


def _device_versions(device: int) -> tuple[int, int]:
    """The device's compute capability (``90``) and the driver's CUDA version (``13000``)."""
    import cupy

    return int(cupy.cuda.Device(device).compute_capability), int(cupy.cuda.runtime.driverGetVersion())


def _load_cubin(path: Path) -> Any:
    """``path`` loaded as a module, or None where the driver refuses it (NVRTC then compiles)."""
    import cupy

    module = cupy.RawModule(path=str(path))
    try:
        module.compile()  # loads the file now, so a refusal falls back here rather than at launch
    except (cupy.cuda.driver.CUDADriverError, OSError):
        return None
    return module


@functools.cache
def _module(kernels: KernelFile, value: np.dtype, index: np.dtype, device: int) -> tuple[Any, dict[str, str]]:
    """The loaded module and, for a cubin, each expression's mangled name (empty for NVRTC,
    whose module maps expressions itself)."""
    import cupy

    if value not in kernels.value_dtypes or index not in kernels.index_dtypes:
        raise TypeError(
            f"{kernels.filename} is not built for value type {value} and index type {index}; "
            f"it supports {[str(d) for d in kernels.value_dtypes]} x "
            f"{[str(d) for d in kernels.index_dtypes]}"
        )
    found = aot_cubin(kernels, value, index, *_device_versions(device)) if kernels.registered else None
    if found is not None:
        module = _load_cubin(found[0])
        if module is not None:
            return module, found[1]
    names = sorted({_substitute(e, value, index) for e in kernels.expressions})
    module = cupy.RawModule(code=module_source(kernels), options=NVRTC_OPTIONS, name_expressions=names)
    try:
        module.compile()
    except cupy.cuda.compiler.CompileException as exc:
        raise KernelCompileError(
            f"compiling kernels/{kernels.filename} (V={CTYPES[value]}, I={CTYPES[index]}) failed; "
            f"the log names file and line:\n{exc.get_message() if hasattr(exc, 'get_message') else exc}"
        ) from None
    return module, {}


@functools.cache
def _function(kernels: KernelFile, expression: str, value: np.dtype, index: np.dtype) -> Any:
    import cupy

    device = cupy.cuda.runtime.getDevice()
    with _compile_lock:
        module, mangled = _module(kernels, value, index, device)
    name = _substitute(expression, value, index)
    return module.get_function(mangled.get(name, name))


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
