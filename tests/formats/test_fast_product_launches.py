"""Without a GPU: each format's packed launches are the general path's launches.

A fresh process stands in for CuPy (NumPy arrays, kernels that record their launches, a driver
that records its calls), runs each format's general product and its fast product
(sparsegpu/formats/_fast_product.py), and checks that they launch the same kernels with the same
grids, blocks, shared memory and arguments, every packed parameter of the C type its kernel
declares in kernels/*.cu."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

import sparsegpu
from sparsegpu import _kernels
from sparsegpu.formats import _fast_product
from sparsegpu.formats._fast_product import FastProduct, Scratch
from tests.formats.test_fast_product import (
    FORMATS,
    expected_type,
    kernel_parameters,
    random_matrix,
)


def test_packed_launches_are_the_general_paths_launches():
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "tests.formats.test_fast_product_launches"], cwd=root,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    checked = [line for line in result.stdout.splitlines() if line.startswith("same launches")]
    assert len(checked) == len(FORMATS) * 8 + 2 + 3 * len(FORMATS) * 2, result.stdout[-2000:]


class StandInKernel:
    """A compiled kernel's stand-in: records each launch CuPy would make."""

    log: ClassVar[list] = []

    def __init__(self, filename, expression, value, index):
        self.filename, self.expression = filename, expression
        self.value, self.index = np.dtype(value), np.dtype(index)
        self.kernel = SimpleNamespace(ptr=id(self))
        self.shared_size_bytes, self.attributes = 0, {"num_regs": 32}

    def __call__(self, grid, block, args, shared_mem=0):
        StandInKernel.log.append((self, grid[0], block[0], shared_mem, args))


class DeviceStandIn:
    """A NumPy array that is not an ndarray (so formats take their GPU branches) with ``data.ptr``."""

    def __init__(self, a):
        self.a = np.asarray(a)

    def __getattr__(self, name):
        return getattr(self.a, name)

    def __array__(self, dtype=None, copy=None):
        return self.a

    def __getitem__(self, i):
        return self.a[i]

    def __gt__(self, other):
        return self.a > other

    def __ge__(self, other):
        return self.a >= other

    def __ne__(self, other):
        return self.a != other

    @property
    def data(self):
        return SimpleNamespace(ptr=self.a.ctypes.data)


def stand_in_address(a):
    return a.a.ctypes.data if isinstance(a, DeviceStandIn) else a.ctypes.data if isinstance(a, np.ndarray) else None


def install_stand_ins():
    """Replace CuPy, the driver, kernel compilation and device queries (this process only)."""
    import types

    from sparsegpu import convert
    from sparsegpu.formats import sell

    fake = types.ModuleType("cupy")
    fake.__dict__.update({k: v for k, v in vars(np).items() if not k.startswith("__")})
    fake.driver_calls, fake.memsets = [], []
    fake.cuda = SimpleNamespace(get_current_stream=lambda: SimpleNamespace(ptr=0),
                                runtime=SimpleNamespace(memsetAsync=lambda *a: fake.memsets.append(a)))
    sys.modules["cupy"] = fake
    for name in ("cupy_backends", "cupy_backends.cuda", "cupy_backends.cuda.api"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["cupy_backends.cuda.api"].driver = SimpleNamespace(launchKernel=lambda *a: fake.driver_calls.append(a))
    _kernels.KernelFile.function = lambda self, e, v, i=np.int32: StandInKernel(self.filename, e, v, i)
    _fast_product.is_device_array = lambda a: isinstance(a, (np.ndarray, DeviceStandIn))
    _fast_product.address = stand_in_address
    expand = convert.expand_pointers
    convert.expand_pointers = lambda indptr, xp: expand(np.asarray(indptr), np)
    sell.allow_dynamic_shared = lambda kernel, shared, what="": kernel
    sell._resident_blocks = lambda *a: 1000
    return fake


def same_launches(fake, fmt, params, S, dtype, index_dtype, deterministic):
    A = sparsegpu.from_scipy(S, format=fmt, dtype=dtype, index_dtype=index_dtype, backend="cpu", **params)
    if hasattr(A, "_swapped_arrays"):
        A._swapped_arrays()  # built on the CPU, before the arrays are stood in for
    for name, value in list(vars(A).items()):
        if isinstance(value, np.ndarray):
            setattr(A, name, DeviceStandIn(value))
    A._backend = "gpu"
    m, n = A.shape
    x, y = DeviceStandIn(np.ones(n, dtype)), DeviceStandIn(np.full(m, np.nan, dtype))
    alpha = A.dtype.type(2 - 1j if A.dtype.kind == "c" else 2)
    with sparsegpu.options(deterministic=deterministic):
        StandInKernel.log.clear()
        A._spmv(x, y, alpha, A.dtype.type(0), False)
        general = list(StandInKernel.log)
        launches, scale_first = A._packed_launches()
        fast = FastProduct(launches, m, dtype, scale_first, xp=fake)
    fast.accept(x, x, y)
    fake.driver_calls.clear()
    fake.memsets.clear()
    assert fast(x, y, alpha.item(), 0) is y, "the fast path declined"
    assert len(general) == len(fake.driver_calls) == len(fast.packed.launches), (len(general), len(fake.driver_calls))
    assert len(fake.memsets) == (scale_first and y.size > 0)
    for (kernel, grid, block, shared, args), call, record, packed in zip(general, fake.driver_calls,
                                                                           fast.packed.records, fast.packed.launches):
        function = record.function
        assert (function.filename, function.expression, function.value, function.index) == (
            kernel.filename, kernel.expression, kernel.value, kernel.index)
        assert (call[1], call[4], call[7]) == (grid, block, shared), (kernel.expression, call, grid, block, shared)
        declared = [expected_type(p, np.dtype(dtype), np.dtype(index_dtype))
                    for p in kernel_parameters(kernel.filename, kernel.expression.split("<")[0])]
        assert [type(a) for a in packed.arguments] == declared, kernel.expression
        assert len(args) == len(declared)
        for position, (given, storage, marked) in enumerate(zip(args, packed.arguments, record.arguments)):
            where = (kernel.expression, position)
            if isinstance(storage, ctypes.Structure):
                assert (storage.re, storage.im) == (complex(given).real, complex(given).imag), where
            elif isinstance(marked, Scratch):
                assert stand_in_address(given) is not None, where  # an array of the general path's own
            elif stand_in_address(given) is not None:
                assert storage.value == stand_in_address(given), where
            else:
                assert isinstance(given, np.generic) and storage.value == given, where
    print(f"same launches: {fmt} {params} {np.dtype(dtype)} {np.dtype(index_dtype)} deterministic={deterministic}")


def launch_equivalence_main():
    from sparsegpu.formats import sell

    fake = install_stand_ins()
    rng = np.random.default_rng(7)
    S = random_matrix(rng)
    for fmt, params in FORMATS:
        for dtype in (np.float32, np.complex128):
            for index_dtype in (np.int32, np.int64):
                for deterministic in (True, False):
                    same_launches(fake, fmt, params, S, dtype, index_dtype, deterministic)
    sell.HOT_STAGE_FIRST = 1  # sell_stage_hot before the product
    same_launches(fake, "sell", {"C": 8, "split": 2, "hot": 3}, S, np.float64, np.int32, True)
    same_launches(fake, "sell", {"hot": 5}, S, np.complex64, np.int64, True)
    sell.HOT_STAGE_FIRST = 4096
    for shape in ((0, 5), (5, 0), (4, 3)):
        for fmt, params in FORMATS:
            for deterministic in (True, False):
                same_launches(fake, fmt, params, sp.csr_array(shape), np.float64, np.int32, deterministic)


if __name__ == "__main__":
    launch_equivalence_main()
