"""Kernels compiled ahead of time: every registered kernel file, built with nvcc into one cubin
per (source, value type, index type) and GPU architecture, and a manifest naming each
template expression's mangled entry (read by the loader in :mod:`sparsegpu._kernels`).

Each cubin is compiled from exactly the source NVRTC would compile (the file's prefix and its
text with headers inlined, :func:`sparsegpu._kernels.module_source`) with the options CuPy gives
NVRTC, then one line per expression that takes its address, which instantiates it (as CI's
units do). Entries are found in the cubin's ELF symbol table and demangled through the C++
runtime's ``__cxa_demangle``; every expression the library launches must be found, else the
build fails. Run as ``python -m sparsegpu._aot OUTDIR --arch sm_90`` (which imports the package
first, registering every kernel file), or through ``scripts/build_kernels.py``; ``setup.py`` runs
it when a wheel is built.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sparsegpu._kernels import (
    AOT_MANIFEST,
    NVRTC_OPTIONS,
    KernelFile,
    _substitute,
    aot_key,
    module_source,
)

DEFAULT_ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")
# What CuPy adds to NVRTC_OPTIONS (--std=c++17): flush denormals, as CuPy compiles every kernel.
NVCC_OPTIONS = tuple(o.replace("--std", "-std") for o in NVRTC_OPTIONS) + ("-ftz=true",)
_STO_CUDA_ENTRY = 0x10  # st_other bit of a kernel (an entry) in a cubin's symbol table


class KernelBuildError(RuntimeError):
    """nvcc failed, or a cubin lacks an expression the library launches."""


@dataclass(frozen=True)
class Module:
    """One cubin's worth of source: a kernel file's source at one type pair, and every
    expression registered for it (from all the KernelFiles that share that source)."""

    filename: str
    source: str
    value: np.dtype
    index: np.dtype
    expressions: tuple[str, ...]

    @property
    def key(self) -> str:
        return aot_key(self.filename, self.source, self.value, self.index)

    def cubin_name(self, arch: str) -> str:
        digest = self.key.rsplit(":", 1)[1][:12]
        return f"{Path(self.filename).stem}.{self.value.name}.{self.index.name}.{digest}.{arch}.cubin"

    def unit(self) -> str:
        """The translation unit nvcc compiles: the source, then each expression instantiated."""
        lines = [f"    (void)&{expression};" for expression in self.expressions]
        return self.source + "\nvoid sparsegpu_instantiate_all() {\n" + "\n".join(lines) + "\n}\n"


def modules(registry: Iterable[KernelFile] | None = None, files: Iterable[str] | None = None) -> list[Module]:
    """The modules to build for the registered kernel files (those named in ``files`` only, when
    given), one per (source, value type, index type), in a stable order."""
    wanted = None if files is None else set(files)
    grouped: dict[tuple[str, str, np.dtype, np.dtype], dict[str, None]] = {}
    for kernels in KernelFile.registry if registry is None else registry:
        if not kernels.registered or (wanted is not None and kernels.filename not in wanted):
            continue
        source = module_source(kernels)
        for value in kernels.value_dtypes:
            for index in kernels.index_dtypes:
                names = grouped.setdefault((kernels.filename, source, value, index), {})
                names.update(dict.fromkeys(_substitute(e, value, index) for e in kernels.expressions))
    if wanted is not None and wanted - {key[0] for key in grouped}:
        raise ValueError(f"files: no registered kernel file named {sorted(wanted - {k[0] for k in grouped})}")
    return [Module(f, s, v, i, tuple(names)) for (f, s, v, i), names in grouped.items()]


# --------------------------------------------------------------------------- names in a cubin


def _cxx_runtime() -> tuple[ctypes.CDLL, ctypes.CDLL]:
    name = ctypes.util.find_library("stdc++") or "libstdc++.so.6"
    runtime, libc = ctypes.CDLL(name), ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    runtime.__cxa_demangle.restype = ctypes.c_void_p
    runtime.__cxa_demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.POINTER(ctypes.c_int)]
    libc.free.argtypes = [ctypes.c_void_p]
    return runtime, libc


def demangle(mangled: str) -> str:
    """The C++ spelling of a mangled name (through libstdc++'s ``__cxa_demangle``).

    >>> demangle("_Z3fooIfLi4EEvPf")
    'void foo<float, 4>(float*)'
    """
    runtime, libc = _cxx_runtime()
    status = ctypes.c_int()
    pointer = runtime.__cxa_demangle(mangled.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        raise ValueError(f"mangled: {mangled!r} does not demangle (status {status.value})")
    try:
        return ctypes.string_at(pointer).decode()
    finally:
        libc.free(pointer)


def normalise(expression: str) -> str:
    """An expression without spacing that does not separate words, and without integer
    literals' suffixes (a demangler writes ``4u`` for an unsigned 4): how names are compared.

    >>> normalise("spmv< sg::complex<float> , long long, 4u >")
    'spmv<sg::complex<float>,long long,4>'
    """
    spaced = " ".join(expression.split())
    tight = re.sub(r"\s*([^\w\s])\s*", r"\1", spaced)
    return re.sub(r"\b(\d+)(?:[uU]?[lL]{0,2}|[lL]{1,2}[uU])\b", r"\1", tight)


def template_name(demangled: str) -> str:
    """A demangled function name without its return type and parameters: the template
    expression that names it.

    >>> template_name("void csr_spmv<float, int, (unsigned int)4>(float const*, int)")
    'csr_spmv<float, int, (unsigned int)4>'
    """
    depth, end = 0, len(demangled)
    for position in range(len(demangled) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(demangled[position], 0)
        if depth == 0 and demangled[position] == "(":
            end = position
            break
    return demangled[:end].removeprefix("void ").strip()


def cubin_entries(cubin: bytes) -> list[str]:
    """The mangled names of the kernels (entries) in a cubin, from its ELF symbol table."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise KernelBuildError("not a 64-bit ELF cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strings = sections[link][4]
        for start in range(offset, offset + size, entsize):
            name_at, info, other = struct.unpack_from("<IBB", cubin, start)
            if info & 0xF == 2 and other & _STO_CUDA_ENTRY:  # STT_FUNC, an entry
                names.append(cubin[strings + name_at : cubin.index(b"\0", strings + name_at)].decode())
    return names


def template_parts(expression: str) -> tuple[str, tuple[str, ...]]:
    """A normalised expression's template name and its top-level template arguments.

    >>> template_parts("f<sg::Sum<int>,true,4>")
    ('f', ('sg::Sum<int>', 'true', '4'))
    """
    if not expression.endswith(">") or "<" not in expression:
        return expression, ()
    name, inside = expression[: expression.index("<")], expression[expression.index("<") + 1 : -1]
    arguments, depth, start = [], 0, 0
    for position, char in enumerate(inside):
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            arguments.append(inside[start:position])
            start = position + 1
    return name, (*arguments, inside[start:])


def map_entries(expressions: Iterable[str], mangled_names: Iterable[str]) -> dict[str, str]:
    """Each expression's mangled name. An entry spells every template argument, an expression
    may leave trailing defaulted ones out: an expression takes the entry it names exactly, else
    the one entry its arguments begin (entries other expressions name exactly set aside).
    KernelBuildError names any expression without exactly one entry."""
    entries = {template_parts(normalise(template_name(demangle(m)))): m for m in mangled_names}
    wanted = {e: template_parts(normalise(e)) for e in expressions}
    exact = {parts for parts in wanted.values() if parts in entries}
    found, unresolved = {}, []
    for expression, (name, arguments) in wanted.items():
        if (name, arguments) in entries:
            found[expression] = entries[name, arguments]
            continue
        longer = [p for p in entries if p[0] == name and p[1][: len(arguments)] == arguments]
        if len(longer) > 1:
            longer = [p for p in longer if p not in exact]
        if len(longer) == 1:
            found[expression] = entries[longer[0]]
        else:
            unresolved.append(f"{expression} ({len(longer)} candidate entries)")
    if unresolved:
        raise KernelBuildError(f"{len(unresolved)} expressions have no single entry in the cubin, e.g. "
                               f"{unresolved[:3]}; entries: {sorted(map(str, entries))[:4]}")
    return found


# --------------------------------------------------------------------------- building


def find_nvcc(nvcc: str | None = None) -> str | None:
    """``nvcc``, else the one on PATH, else ``$CUDA_HOME/bin/nvcc`` (or CUDA_PATH's); None if none."""
    if nvcc:
        return nvcc
    homes = [h for h in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda") if h]
    for candidate in ("nvcc", *(str(Path(home) / "bin" / "nvcc") for home in homes)):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def nvcc_version(nvcc: str) -> tuple[int, int, int]:
    """nvcc's release, (13, 0, 88) for ``V13.0.88``."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"V(\d+)\.(\d+)\.(\d+)", out)
    if match is None:
        raise KernelBuildError(f"cannot read nvcc's version from {out!r}")
    major, minor, patch = map(int, match.groups())
    return major, minor, patch


def supported_archs(nvcc: str, archs: Sequence[str]) -> list[str]:
    """Those of ``archs`` (``sm_90``) this nvcc can build cubins for."""
    listed = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True).stdout.split()
    return [a for a in archs if a in listed] if listed else list(archs)


def compile_cubin(nvcc: str, module: Module, arch: str, out_dir: Path) -> dict[str, str]:
    """Build ``module``'s cubin for ``arch`` into ``out_dir``; return each expression's mangled name."""
    target = out_dir / module.cubin_name(arch)
    with tempfile.TemporaryDirectory(prefix="sparsegpu-aot-") as work:
        unit = Path(work) / f"{Path(module.filename).stem}.cu"
        unit.write_text(module.unit())
        command = [nvcc, "-cubin", f"-arch={arch}", *NVCC_OPTIONS, "-o", str(target), str(unit)]
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise KernelBuildError(f"nvcc failed on kernels/{module.filename} ({module.value}, {module.index}, "
                               f"{arch}):\n{' '.join(command)}\n{done.stderr[-4000:]}")
    try:
        return map_entries(module.expressions, cubin_entries(target.read_bytes()))
    except KernelBuildError as exc:
        raise KernelBuildError(f"kernels/{module.filename} ({module.value}, {module.index}, {arch}): {exc}") from None


def build(
    out_dir: Path,
    archs: Sequence[str] = DEFAULT_ARCHS,
    *,
    files: Iterable[str] | None = None,
    jobs: int | None = None,
    nvcc: str | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Build every registered module's cubins for ``archs`` into ``out_dir`` and write its
    manifest; returns the manifest. ``files``: only these kernel files (``["spmv_csr.cu"]``);
    ``log``: called with a line per cubin built (its name and seconds). Raises KernelBuildError when nvcc is missing or fails, or an expression has no entry."""
    if not KernelFile.registry:
        raise KernelBuildError("no kernel file is registered: import sparsegpu first")
    compiler = find_nvcc(nvcc)
    if compiler is None:
        raise KernelBuildError("nvcc not found (looked on PATH, in $CUDA_HOME and $CUDA_PATH)")
    unknown = [a for a in archs if a not in supported_archs(compiler, archs)]
    if unknown:
        raise KernelBuildError(f"archs: this nvcc cannot build {unknown}")
    out_dir.mkdir(parents=True, exist_ok=True)
    todo = [(module, arch) for module in modules(files=files) for arch in archs]

    def run(job: tuple[Module, str]) -> dict[str, str]:
        started = time.perf_counter()
        entries = compile_cubin(compiler, *job, out_dir)
        if log is not None:
            log(f"{job[0].cubin_name(job[1])} {time.perf_counter() - started:.1f} s")
        return entries

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        results = list(pool.map(run, todo))
    version = nvcc_version(compiler)
    manifest: dict = {
        "format": 1,
        "nvcc": ".".join(map(str, version)),
        "cuda_major": version[0],
        "options": list(NVCC_OPTIONS),
        "archs": list(archs),
        "modules": {},
    }
    for (module, arch), entries in zip(todo, results):
        record = manifest["modules"].setdefault(module.key, {
            "file": module.filename, "value": module.value.name, "index": module.index.name,
            "cubins": {}, "entries": entries})
        if record["entries"] != entries:
            raise KernelBuildError(f"kernels/{module.filename}: {arch} mangles names differently")
        record["cubins"][arch] = module.cubin_name(arch)
    (out_dir / AOT_MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``python -m sparsegpu._aot OUTDIR [--arch SM ...] [--files F.cu ...]``."""
    parser = argparse.ArgumentParser(prog="build_kernels", description="Compile sparsegpu's kernels ahead of time.")
    parser.add_argument("out_dir", type=Path, help="folder for the cubins and manifest.json")
    parser.add_argument("--arch", action="append", dest="archs", metavar="SM",
                        help=f"a GPU architecture, repeatable (default: {' '.join(DEFAULT_ARCHS)})")
    parser.add_argument("--files", nargs="+", metavar="FILE.cu", help="only these kernel files")
    parser.add_argument("--jobs", type=int, default=None, help="nvcc processes at once (default: CPU count)")
    parser.add_argument("--nvcc", default=None, help="the nvcc to use (default: on PATH or in $CUDA_HOME)")
    parser.add_argument("--verbose", action="store_true", help="print each cubin and its compile time")
    args = parser.parse_args(argv)
    archs = [a for spec in args.archs or DEFAULT_ARCHS for a in spec.replace(",", " ").split()]
    started = time.perf_counter()
    try:
        manifest = build(args.out_dir, archs, files=args.files, jobs=args.jobs, nvcc=args.nvcc,
                         log=(lambda line: print(line, flush=True)) if args.verbose else None)
    except (KernelBuildError, ValueError) as exc:
        print(f"build_kernels: {exc}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - started
    for arch in archs:
        names = [record["cubins"][arch] for record in manifest["modules"].values()]
        size = sum((args.out_dir / name).stat().st_size for name in names)
        print(f"{arch}: {len(names)} cubins, {size / 2**20:.1f} MiB")
    entries = sum(len(record["entries"]) for record in manifest["modules"].values())
    print(f"built {entries} kernels x {len(archs)} archs with nvcc {manifest['nvcc']} in {seconds:.0f} s "
          f"into {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
