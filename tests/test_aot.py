"""Kernels compiled ahead of time: the builder (nvcc -> cubins + manifest) and the loader's choice
between a shipped cubin and NVRTC.

The builder's tests compile one small kernel file for one architecture (skipped without nvcc);
the loader's run against a stand-in for CuPy, so the device's compute capability and the
driver's version can be set. The GPU tests load every registered kernel from cubins, and
compare one product's bits between the cubin and the NVRTC build."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import _aot, _kernels
from sparsegpu._kernels import KernelFile

NVCC = _aot.find_nvcc()
requires_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc")
SMALL_FILE, SMALL_ARCH = "pointers.cu", "sm_90"


# --------------------------------------------------------------------------- names


def test_demangle_and_template_name_give_the_expression():
    assert _aot.template_name(_aot.demangle("_Z3fooIN2sg7complexIdEExLb1EEvPKT_S4_")) == (
        "foo<sg::complex<double>, long long, true>")
    assert _aot.normalise("f< sg::Sum<int> >") == "f<sg::Sum<int>>" == _aot.normalise("f<sg::Sum<int>>")
    with pytest.raises(ValueError, match="mangled"):
        _aot.demangle("not a mangled name")


def test_map_entries_takes_exact_names_then_defaulted_arguments():
    # f<int, 2, 256> and f<int, 4, 256>, g<float> (mangled by hand, Itanium ABI)
    f2, f4, g = "_Z1fIiLi2ELi256EEvv", "_Z1fIiLi4ELi256EEvv", "_Z1gIfEvv"
    found = _aot.map_entries(["f<int, 4>", "f<int, 2, 256>", "g<float>", "f<int,4,256>"], [f2, f4, g])
    assert found == {"f<int, 4>": f4, "f<int, 2, 256>": f2, "g<float>": g, "f<int,4,256>": f4}
    # f<int> could be either entry: nothing names one of them exactly, so the build refuses
    with pytest.raises(_aot.KernelBuildError, match="f<int>"):
        _aot.map_entries(["f<int>"], [f2, f4])
    with pytest.raises(_aot.KernelBuildError, match="h<int>"):
        _aot.map_entries(["h<int>", "g<float>"], [f2, g])


def test_pick_arch_takes_the_device_own_or_an_older_minor_of_its_major():
    built = ["sm_80", "sm_90", "sm_100", "sm_120"]
    assert [_aot_pick(built, c) for c in (80, 86, 89, 90, 100, 103, 120, 121)] == [
        "sm_80", "sm_80", "sm_80", "sm_90", "sm_100", "sm_100", "sm_120", "sm_120"]
    assert [_aot_pick(built, c) for c in (75, 70, 110)] == [None, None, None]
    assert _aot_pick(["sm_86", "sm_80"], 89) == "sm_86"
    assert _aot_pick(["sm_90a"], 90) is None


def _aot_pick(built, capability):
    return _kernels.pick_arch(built, capability)


def test_cubin_entries_rejects_what_is_not_an_elf_cubin():
    with pytest.raises(_aot.KernelBuildError, match="ELF"):
        _aot.cubin_entries(b"\x00" * 64)


def test_modules_group_every_registered_expression_by_source_and_types():
    built = _aot.modules(files=[SMALL_FILE])
    registered = [k for k in KernelFile.registry if k.filename == SMALL_FILE]
    pairs = {(v, i) for k in registered for v in k.value_dtypes for i in k.index_dtypes}
    assert {(m.value, m.index) for m in built} == pairs and len(built) == len(pairs)
    for kernels in registered:
        for value, index in pairs & {(v, i) for v in kernels.value_dtypes for i in kernels.index_dtypes}:
            module = next(m for m in built if (m.value, m.index) == (value, index))
            assert module.source == _kernels.module_source(kernels)
            assert {_kernels._substitute(e, value, index) for e in kernels.expressions} <= set(module.expressions)
    with pytest.raises(ValueError, match="no_such.cu"):
        _aot.modules(files=["no_such.cu"])


# --------------------------------------------------------------------------- the build


@pytest.fixture(scope="module")
def small_build(tmp_path_factory):
    """One kernel file built for one architecture."""
    if NVCC is None:
        pytest.skip("needs nvcc")
    out = tmp_path_factory.mktemp("cubins")
    manifest = _aot.build(out, [SMALL_ARCH], files=[SMALL_FILE], jobs=2)
    return out, manifest


@requires_nvcc
def test_manifest_covers_every_expression_of_the_file(small_build):
    out, manifest = small_build
    assert json.loads((out / _kernels.AOT_MANIFEST).read_text()) == manifest
    assert manifest["archs"] == [SMALL_ARCH] and manifest["cuda_major"] >= 11
    for kernels in (k for k in KernelFile.registry if k.filename == SMALL_FILE):
        for value in kernels.value_dtypes:
            for index in kernels.index_dtypes:
                record = manifest["modules"][_kernels.aot_key(SMALL_FILE, _kernels.module_source(kernels), value, index)]
                cubin = out / record["cubins"][SMALL_ARCH]
                in_cubin = set(_aot.cubin_entries(cubin.read_bytes()))
                for expression in kernels.expressions:
                    name = _kernels._substitute(expression, value, index)
                    assert record["entries"][name] in in_cubin, name
                    assert _aot.template_name(_aot.demangle(record["entries"][name])).startswith(name[:-1])


@requires_nvcc
def test_a_build_fails_loudly_on_a_bad_arch_or_source(tmp_path, monkeypatch):
    with pytest.raises(_aot.KernelBuildError, match="sm_1"):
        _aot.build(tmp_path, ["sm_1"], files=[SMALL_FILE])
    module = _aot.modules(files=[SMALL_FILE])[0]
    broken = _aot.Module(module.filename, module.source + "\nthis is not C++;\n", module.value, module.index,
                         module.expressions)
    with pytest.raises(_aot.KernelBuildError, match="nvcc failed"):
        _aot.compile_cubin(NVCC, broken, SMALL_ARCH, tmp_path)
    missing = _aot.Module(module.filename, module.source, module.value, module.index, ())
    entries = _aot.compile_cubin(NVCC, missing, SMALL_ARCH, tmp_path)  # nothing instantiated, nothing found
    assert entries == {}
    with pytest.raises(_aot.KernelBuildError, match="no single entry"):
        _aot.map_entries(module.expressions, _aot.cubin_entries((tmp_path / missing.cubin_name(SMALL_ARCH)).read_bytes()))


# --------------------------------------------------------------------------- the loader


class FakeDriverError(RuntimeError):
    pass


class FakeRawModule:
    """Records how it was made; ``get_function`` answers (module, name)."""

    refuse_paths = False

    def __init__(self, *, code=None, path=None, options=(), name_expressions=None):
        self.code, self.path, self.name_expressions = code, path, name_expressions

    def compile(self):
        if self.path is not None and FakeRawModule.refuse_paths:
            raise FakeDriverError("CUDA_ERROR_UNSUPPORTED_PTX_VERSION")

    def get_function(self, name):
        return self, name


@pytest.fixture
def fake_device(monkeypatch, small_build):
    """CuPy replaced by a stand-in whose device and driver the test sets; the loader reads the
    small build's cubins."""
    device = types.SimpleNamespace(capability=90, driver=13000)
    cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0, driverGetVersion=lambda: device.driver),
        Device=lambda number: types.SimpleNamespace(compute_capability=str(device.capability)),
        driver=types.SimpleNamespace(CUDADriverError=FakeDriverError),
        compiler=types.SimpleNamespace(CompileException=RuntimeError),
    )
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(RawModule=FakeRawModule, cuda=cuda))
    monkeypatch.setattr(_kernels, "AOT_DIR", small_build[0])
    monkeypatch.setattr(FakeRawModule, "refuse_paths", False)
    monkeypatch.delenv("SPARSEGPU_AOT", raising=False)
    _clear_loader_caches()
    yield device
    _clear_loader_caches()


def _clear_loader_caches():
    _kernels._module.cache_clear()
    _kernels._function.cache_clear()
    _kernels.aot_manifest.cache_clear()


def _load(kernels: KernelFile):
    """(module, name) for each of the kernel file's expressions at its first type pair."""
    _clear_loader_caches()
    value, index = kernels.value_dtypes[0], kernels.index_dtypes[0]
    return [kernels.function(e, value, index) for e in kernels.expressions]


def _small_kernels() -> KernelFile:
    return next(k for k in KernelFile.registry if k.filename == SMALL_FILE)


@requires_nvcc
def test_the_loader_takes_the_cubin_for_a_matching_device(fake_device, small_build):
    kernels = _small_kernels()
    value, index = kernels.value_dtypes[0], kernels.index_dtypes[0]
    record = small_build[1]["modules"][_kernels.aot_key(SMALL_FILE, _kernels.module_source(kernels), value, index)]
    for capability in (90, 91):
        fake_device.capability = capability
        for module, name in _load(kernels):
            assert module.code is None and Path(module.path) == small_build[0] / record["cubins"][SMALL_ARCH]
            assert name == record["entries"][_kernels._substitute(kernels.expressions[0], value, index)]
            assert name.startswith("_Z")


@requires_nvcc
@pytest.mark.parametrize("why", ["older device", "newer major", "SPARSEGPU_AOT=0", "old driver", "refused",
                                 "not registered", "other source", "no manifest"])
def test_the_loader_falls_back_to_nvrtc(fake_device, monkeypatch, tmp_path, why):
    kernels = _small_kernels()
    if why == "older device":
        fake_device.capability = 86
    elif why == "newer major":
        fake_device.capability = 100
    elif why == "SPARSEGPU_AOT=0":
        monkeypatch.setenv("SPARSEGPU_AOT", "0")
    elif why == "old driver":
        fake_device.driver = 12080
    elif why == "refused":
        monkeypatch.setattr(FakeRawModule, "refuse_paths", True)
    elif why == "not registered":
        kernels = KernelFile(SMALL_FILE, kernels.expressions, kernels.value_dtypes, kernels.index_dtypes,
                             register=False)
    elif why == "other source":
        monkeypatch.setattr(KernelFile, "registry", list(KernelFile.registry))
        kernels = KernelFile(SMALL_FILE, kernels.expressions, kernels.value_dtypes, kernels.index_dtypes,
                             prefix="// a different prefix\n")
    elif why == "no manifest":
        monkeypatch.setattr(_kernels, "AOT_DIR", tmp_path)
    loaded = _load(kernels)
    value, index = kernels.value_dtypes[0], kernels.index_dtypes[0]
    for (module, name), expression in zip(loaded, kernels.expressions):
        assert module.path is None and module.code == _kernels.module_source(kernels)
        assert name == _kernels._substitute(expression, value, index)  # NVRTC maps the expression itself


def test_aot_cubin_ignores_a_manifest_that_lacks_a_file_or_an_expression(tmp_path, monkeypatch):
    kernels = _small_kernels()
    value, index = kernels.value_dtypes[0], kernels.index_dtypes[0]
    key = _kernels.aot_key(SMALL_FILE, _kernels.module_source(kernels), value, index)
    entries = {_kernels._substitute(e, value, index): "_Z1fv" for e in kernels.expressions}
    record = {"cubins": {"sm_90": "x.sm_90.cubin"}, "entries": entries}
    (tmp_path / _kernels.AOT_MANIFEST).write_text(json.dumps({"cuda_major": 13, "modules": {key: record}}))
    monkeypatch.setattr(_kernels, "AOT_DIR", tmp_path)
    monkeypatch.delenv("SPARSEGPU_AOT", raising=False)
    _kernels.aot_manifest.cache_clear()
    try:
        assert _kernels.aot_cubin(kernels, value, index, 90, 13000) is None  # the cubin is missing
        (tmp_path / "x.sm_90.cubin").write_bytes(b"\x7fELF")
        assert _kernels.aot_cubin(kernels, value, index, 90, 13000) == (tmp_path / "x.sm_90.cubin", entries)
        entries.popitem()
        (tmp_path / _kernels.AOT_MANIFEST).write_text(json.dumps({"cuda_major": 13, "modules": {key: record}}))
        _kernels.aot_manifest.cache_clear()
        assert _kernels.aot_cubin(kernels, value, index, 90, 13000) is None  # an expression is missing
        (tmp_path / _kernels.AOT_MANIFEST).write_text("{not json")
        _kernels.aot_manifest.cache_clear()
        assert _kernels.aot_cubin(kernels, value, index, 90, 13000) is None
    finally:
        _kernels.aot_manifest.cache_clear()


# --------------------------------------------------------------------------- on the GPU


@pytest.fixture(scope="module")
def device_cubins(tmp_path_factory):
    """A cubin folder for this GPU: the package's own where it has this architecture, else one
    built now with nvcc (skipped where neither is at hand)."""
    import cupy

    capability = int(cupy.cuda.Device().compute_capability)
    manifest = _kernels.aot_manifest(_kernels.AOT_DIR)
    if manifest and _kernels.pick_arch(manifest["archs"], capability):
        return _kernels.AOT_DIR
    if NVCC is None:
        pytest.skip("no cubins for this GPU in the package and no nvcc to build them")
    out = tmp_path_factory.mktemp("device_cubins")
    _aot.build(out, [f"sm_{capability}"])
    return out


@pytest.fixture
def gpu_loader(monkeypatch, device_cubins):
    monkeypatch.setattr(_kernels, "AOT_DIR", device_cubins)
    monkeypatch.delenv("SPARSEGPU_AOT", raising=False)
    _clear_loader_caches()
    yield
    _clear_loader_caches()


@pytest.mark.gpu
def test_gpu_every_registered_kernel_loads_from_the_cubins(gpu_loader):
    import cupy

    device = cupy.cuda.runtime.getDevice()
    for kernels in KernelFile.registry:
        for value in kernels.value_dtypes:
            for index in kernels.index_dtypes:
                module, mangled = _kernels._module(kernels, value, index, device)
                assert module.file_path is not None and module.code is None, (
                    f"{kernels} at {value}, {index} compiled with NVRTC: rebuild the cubins (scripts/build_kernels.py)")
                for expression in kernels.expressions:
                    function = kernels.function(expression, value, index)
                    assert function.kernel.ptr != 0 and function.name == mangled[
                        _kernels._substitute(expression, value, index)]


@pytest.mark.gpu
def test_gpu_the_cubin_and_the_nvrtc_build_give_the_same_bits(gpu_loader, monkeypatch, rng):
    import cupy

    n = 3000
    lengths = rng.integers(0, 40, n)
    lengths[rng.integers(0, n, 5)] = rng.integers(2000, 3000, 5)  # a few long rows take the chunked path
    rows = np.repeat(np.arange(n), lengths)
    S = sp.csr_matrix((rng.standard_normal(rows.size), (rows, rng.integers(0, n, rows.size))), shape=(n, n))
    S.sum_duplicates()
    x = cupy.asarray(rng.standard_normal(n))
    loads = []
    real_load = _kernels._load_cubin
    monkeypatch.setattr(_kernels, "_load_cubin", lambda path: loads.append(path) or real_load(path))

    def product():
        _clear_loader_caches()
        A = sparsegpu.from_scipy(S, format="csr", backend="gpu")
        return cupy.asnumpy(A @ x)

    from_cubin = product()
    assert loads, "the product did not load a cubin"
    monkeypatch.setenv("SPARSEGPU_AOT", "0")
    loads.clear()
    from_nvrtc = product()
    assert not loads
    np.testing.assert_allclose(from_cubin, S @ cupy.asnumpy(x), rtol=1e-12, atol=1e-10)
    assert from_cubin.tobytes() == from_nvrtc.tobytes()
