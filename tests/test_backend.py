"""Backend selection, options, and the kernel loader."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import sparsegpu
from sparsegpu import _backend, _kernels
from tests.conftest import GPU


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_backend_is_cpu_or_gpu():
    assert sparsegpu.backend() == ("gpu" if sparsegpu.gpu_available() else "cpu") or GPU is False


def test_forced_cpu(monkeypatch):
    monkeypatch.setenv("SPARSEGPU_BACKEND", "cpu")
    assert sparsegpu.backend() == "cpu"


def test_forced_gpu_without_gpu_raises(monkeypatch):
    if sparsegpu.gpu_available():
        pytest.skip("a GPU is present")
    monkeypatch.setenv("SPARSEGPU_BACKEND", "gpu")
    with pytest.raises(sparsegpu.BackendError, match="SPARSEGPU_BACKEND=gpu"):
        sparsegpu.backend()
    with pytest.raises(sparsegpu.BackendError):
        sparsegpu.from_scipy(__import__("scipy.sparse").sparse.eye(3), backend="gpu")


def test_bad_backend_value(monkeypatch):
    monkeypatch.setenv("SPARSEGPU_BACKEND", "tpu")
    with pytest.raises(sparsegpu.BackendError, match="'cpu' or 'gpu'"):
        sparsegpu.backend()
    with pytest.raises(ValueError, match="backend must be"):
        _backend.resolve_backend("tpu")


def test_import_does_not_need_cupy():
    result = run_python("import sys; sys.modules['cupy'] = None; import sparsegpu; print(sparsegpu.backend())")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "cpu"


def test_options_context_restores():
    assert sparsegpu.get_options()["deterministic"] is True
    with sparsegpu.options(deterministic=False):
        assert sparsegpu.get_options()["deterministic"] is False
    assert sparsegpu.get_options()["deterministic"] is True
    with pytest.raises(TypeError, match="unknown option"):
        sparsegpu.set_options(fast=True)


# --------------------------------------------------------------------------- loader


def test_kernel_dir_found_and_headers_inlined():
    root = _kernels.kernel_dir()
    assert (root / "common.cuh").is_file()
    source = _kernels.read_source("spmv_csr.cu")
    assert '#include "common.cuh"' not in source
    assert "namespace sg" in source
    assert re.search(r'#line \d+ "kernels/spmv_csr.cu"', source)


def test_every_kernel_file_is_registered_and_instantiable():
    files = {k.filename for k in _kernels.KernelFile.registry}
    on_disk = {p.name for p in _kernels.kernel_dir().glob("*.cu")}
    assert on_disk <= files, f"kernel files nobody launches: {on_disk - files}"
    for kernels in _kernels.KernelFile.registry:
        names = kernels.instantiations()
        assert names and all("{" not in n for n in names)


def test_emit_instantiation_units(tmp_path):
    units = _kernels.emit_instantiation_units(tmp_path)
    text = units[0].read_text()
    assert text.startswith("#include") and "(void)&" in text


def test_type_spellings():
    assert _kernels.CTYPES[np.dtype(np.complex128)] == "sg::complex<double>"
    assert _kernels.blocks_for(0, 256) == 1 and _kernels.blocks_for(257, 256) == 2


@pytest.mark.gpu
def test_compile_error_names_file_and_line(tmp_path, monkeypatch):
    (tmp_path / "common.cuh").write_text("#pragma once\n")
    (tmp_path / "broken.cu").write_text('#include "common.cuh"\ntemplate <class V, class I>\n__global__ void k(V* y) {\n  y[0] = undefined_name;\n}\n')
    monkeypatch.setattr(_kernels, "kernel_dir", lambda: tmp_path)
    broken = _kernels.KernelFile("broken.cu", ["k<{V}, {I}>"])
    try:
        with pytest.raises(_kernels.KernelCompileError, match=r"broken\.cu"):
            broken.function("k<{V}, {I}>", np.float64, np.int32)
        try:
            broken.function("k<{V}, {I}>", np.float32, np.int32)
        except _kernels.KernelCompileError as exc:
            assert re.search(r"broken\.cu\(4\)", str(exc)), str(exc)
    finally:
        _kernels.KernelFile.registry.remove(broken)


@pytest.mark.gpu
def test_modules_compiled_once_and_cached():
    import cupy

    from sparsegpu.formats._compressed import GATHER_KERNELS

    f1 = GATHER_KERNELS.function("csr_spmv_rows<{V}, {I}, 4>", np.float64, np.int32)
    f2 = GATHER_KERNELS.function("csr_spmv_rows<{V}, {I}, 4>", np.float64, np.int32)
    assert f1 is f2
    props = _kernels.device_properties()
    assert props["multiprocessors"] > 0 and props["warp_size"] == 32
    assert isinstance(f1, cupy.RawKernel)


class _StubKernel:
    """What allow_dynamic_shared reads and writes of a CuPy Function."""

    def __init__(self, static: int) -> None:
        self.shared_size_bytes = static
        self.max_dynamic_shared_size_bytes = 0
        self.raised = 0

    def __setattr__(self, name, value):
        if name == "max_dynamic_shared_size_bytes" and hasattr(self, "raised"):
            self.raised += 1
        object.__setattr__(self, name, value)


def test_allow_dynamic_shared_asks_once_past_the_default_and_refuses_past_the_device(monkeypatch):
    monkeypatch.setattr(_kernels, "device_properties",
                        lambda: {"max_shared_per_block": 48 * 1024, "max_shared_per_block_optin": 227 * 1024})
    small = _StubKernel(static=64)
    assert _kernels.allow_dynamic_shared(small, 32 * 1024) is small and small.raised == 0
    exactly = _StubKernel(static=64)  # 48 KiB dynamic plus static shared memory: past the default
    _kernels.allow_dynamic_shared(exactly, 48 * 1024)
    assert exactly.raised == 1 and exactly.max_dynamic_shared_size_bytes == 48 * 1024
    big = _StubKernel(static=0)
    for _ in range(3):
        _kernels.allow_dynamic_shared(big, 192 * 1024)
    assert big.raised == 1 and big.max_dynamic_shared_size_bytes == 192 * 1024
    with pytest.raises(ValueError, match="hot columns needs 233472 bytes .* at most 232448"):
        _kernels.allow_dynamic_shared(_StubKernel(static=0), 228 * 1024, "hot columns")
