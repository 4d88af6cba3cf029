"""What a first call costs on a fresh machine: one process per format, with empty kernel caches.

Each format's child process starts with an empty sparsegpu NVRTC cache and an empty CuPy kernel
cache (as on a machine that never ran sparsegpu), builds a random CSR with SciPy, and times
``from_scipy(S, format=...)`` then ``A @ x`` with a device synchronise: the first call, kernels
loaded from the shipped cubins where they match the device (``sparsegpu._aot``) and compiled by
NVRTC otherwise. The same call made again gives the steady cost beside it.

What the first call compiled is counted beside its time: the library's kernel files NVRTC built
(each module the loader compiles instead of loading a cubin) and CuPy's own kernels, which CuPy
compiles with NVRTC the first time a process meets an array expression (``a + b``, ``astype``,
fancy indexing...). Every NVRTC build, CuPy's and the library's, leaves one file in CuPy's kernel
cache (``CUPY_CACHE_DIR``), so CuPy's count is the new files there less the library's modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

#: Rows of the random test matrix (8 entries per row): small, so the time is loading, not work.
ROWS = 20_000

_CHILD = """
import json, os, sys, time
start = time.perf_counter()
import numpy as np, sparsegpu
from sparsegpu import _kernels, datasets
from sparsegpu._backend import array_module
from sparsegpu.bench.timing import synchronize
imported = time.perf_counter() - start
fmt, backend, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
nvrtc_modules = []
load_module = _kernels._module

def counted_module(kernels, value, index, device):
    # The loader's modules are built once per process (cached): a module with no mangled-name
    # table came from NVRTC, not from a shipped cubin.
    module, mangled = load_module(kernels, value, index, device)
    if not mangled:
        nvrtc_modules.append(f"{kernels.filename}:{value.name}:{index.name}")
    return module, mangled

_kernels._module = counted_module

def cache_files():
    return sum(len(files) for _, _, files in os.walk(os.environ["CUPY_CACHE_DIR"]))

S = datasets.random_uniform(rows, 8, seed=0)
x = array_module(backend).asarray(np.random.default_rng(0).random(rows))
times, compiled = [], []
for _ in range(2):
    files, modules = cache_files(), len(nvrtc_modules)
    start = time.perf_counter()
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend)
    y = A @ x
    synchronize(backend)
    times.append(time.perf_counter() - start)
    nvrtc = nvrtc_modules[modules:]
    compiled.append({"cupy_jit": cache_files() - files - len(nvrtc), "nvrtc": len(nvrtc), "nvrtc_modules": nvrtc})
print(json.dumps({"format": fmt, "backend": backend, "import_s": imported, "first_s": times[0], "again_s": times[1],
                  "first_compiled": compiled[0], "again_compiled": compiled[1],
                  "built_as": type(A).__name__, "shipped_kernels": _kernels.aot_enabled()
                  and _kernels.aot_manifest(_kernels.AOT_DIR) is not None}))
"""


def first_calls(formats: list[str], backend: str, rows: int = ROWS) -> list[dict[str, Any]]:
    """One row per format: seconds to import sparsegpu, of the first ``from_scipy`` + ``A @ x``
    (synchronised) in a fresh process with empty kernel caches, and of the same call again;
    ``first_compiled`` / ``again_compiled``: what each call compiled, ``{"cupy_jit": CuPy's
    kernels, "nvrtc": the library's kernel files NVRTC built, "nvrtc_modules": their
    "file:value:index" names}``. ``status`` is ``"error"`` with the child's last line where it
    failed."""
    rows_out = []
    for fmt in formats:
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "SPARSEGPU_CACHE": os.path.join(cache, "sparsegpu"),
                   "CUPY_CACHE_DIR": os.path.join(cache, "cupy")}
            done = subprocess.run([sys.executable, "-c", _CHILD, fmt, backend, str(rows)], env=env,
                                  capture_output=True, text=True, timeout=600)
        lines = done.stdout.strip().splitlines()
        if done.returncode or not lines:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            rows_out.append({"format": fmt, "status": "error", "error": last})
            continue
        rows_out.append({"status": "ok", **json.loads(lines[-1])})
    return rows_out


def format_first_calls(rows: list[dict[str, Any]]) -> str:
    """The rows as a plain table."""
    lines = [f"{'format':8} {'import s':>9} {'first call s':>13} {'again ms':>9}  {'compiled in first call':24}  kernels"]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"{r['format']:8} failed: {r['error']}")
            continue
        source = ("host" if r["backend"] == "cpu" else
                  "shipped cubins, else NVRTC" if r["shipped_kernels"] else "NVRTC")
        compiled = r["first_compiled"]
        counts = f"cupy JIT {compiled['cupy_jit']}, nvrtc {compiled['nvrtc']}"
        built = "".join(f"; nvrtc: {name}" for name in compiled["nvrtc_modules"])
        lines.append(f"{r['format']:8} {r['import_s']:9.2f} {r['first_s']:13.3f} {r['again_s'] * 1e3:9.2f}  "
                     f"{counts:24}  {source} ({r['built_as']}){built}")
    return "\n".join(lines)
