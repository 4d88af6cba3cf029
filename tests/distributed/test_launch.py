"""Packed run launches (sparsegpu.distributed._launch), checked on the CPU: the runs are packed
over NumPy arrays' host addresses and "launched" by a stand-in for the driver that runs the
row kernel's arithmetic on what the arguments point at. So every address, offset and scalar a
GPU launch would get is exercised without a GPU."""

from __future__ import annotations

import ctypes
import itertools
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu.distributed._launch import (
    PackedRuns,
    packed_rows_launch,
    rows_parameters,
)


def host_pointer(a: np.ndarray) -> int:
    return a.ctypes.data


def view(address: int, dtype, count: int) -> np.ndarray:
    """``count`` entries of ``dtype`` at a host address (writable)."""
    dtype = np.dtype(dtype)
    return np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(address), dtype=dtype)


def scalar(argument, dtype):
    if isinstance(argument, ctypes.Structure):  # complex: (re, im)
        return np.dtype(dtype).type(complex(argument.re, argument.im))
    return np.dtype(dtype).type(argument.value)


class RowKernel:
    """Stands in for ``driver.launchKernel``: reads the packed arguments as csr_spmv_rows
    does and computes y = alpha * rows @ x + beta * y on the host."""

    def __init__(self, launch, value_dtype, index_dtype, x_size, y_size, nnz):
        self.launch, self.value, self.index = launch, np.dtype(value_dtype), np.dtype(index_dtype)
        self.sizes = (x_size, y_size, nnz)
        self.calls = []

    def __call__(self, handle, gx, gy, gz, bx, by, bz, shared, stream, parameters, extra):
        assert parameters == self.launch.parameters_address
        args = self.launch.arguments
        n_rows = int(args[7].value)
        x_size, _, nnz = self.sizes
        indptr = view(args[0].value, self.index, n_rows + 1)
        indices, data = view(args[1].value, self.index, nnz), view(args[2].value, self.value, nnz)
        x, y = view(args[3].value, self.value, x_size), view(args[4].value, self.value, n_rows)
        alpha, beta = scalar(args[5], self.value), scalar(args[6], self.value)
        assert all(a.value == 0 for a in args[9:])  # no dot epilogue
        lo, hi = int(indptr[0]), int(indptr[-1])  # the row pointers are absolute offsets
        rows = sp.csr_array((data[lo:hi], indices[lo:hi], indptr - lo), shape=(n_rows, x_size))
        y[:] = alpha * (rows @ x) + (beta * y if beta else 0)
        self.calls.append((gx, bx, stream, n_rows))


def pack(packed, S, index_dtype, runs):
    """Pack ``runs`` (first row of y, stop, first row of S) of the CSR S; returns its arrays
    (kept alive by the caller: the launches hold only their addresses)."""
    arrays = (S.indptr.astype(index_dtype), S.indices.astype(index_dtype), np.ascontiguousarray(S.data))
    for first, stop, at in runs:
        plan = SimpleNamespace(rows_kernel=None, n_major=index_dtype(stop - first), long_row_scalar=index_dtype(64),
                               rows_grid=stop - first + 1)
        packed.add(plan, *arrays, at, first, pointer=host_pointer)
    return arrays


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_packed_runs_write_each_slice_of_y(shared_rng, dtype, index_dtype):
    """Runs over the whole CSR (early runs: row k of y is row k of the CSR) and over a CSR of
    the other rows only (late runs: consecutive in that CSR, apart in y)."""
    n = 300
    S = sp.random(n, n, density=0.05, random_state=shared_rng, format="csr").astype(dtype)
    cuts = np.unique(np.concatenate([[0, n], shared_rng.integers(1, n, 8)])).tolist()
    pieces = list(itertools.pairwise(cuts))
    early, late = pieces[1::2], pieces[0::2]
    late_rows = np.concatenate([np.arange(a, b) for a, b in late])
    positions = np.cumsum([0] + [b - a for a, b in late])
    packed = PackedRuns()
    kept = [pack(packed, S, index_dtype, [(a, b, a) for a, b in early]),
            pack(packed, sp.csr_array(S[late_rows]), index_dtype,
                 [(a, b, int(at)) for (a, b), at in zip(late, positions)])]
    x = shared_rng.standard_normal(n).astype(dtype)
    y = np.full(n, np.nan, dtype=dtype)
    kernels = []
    for launch, _, _ in packed.launches:
        launch.handle = 0
        nnz = S.nnz if len(kernels) < len(early) else kept[1][1].size
        launch.launch_kernel = kernel = RowKernel(launch, dtype, index_dtype, n, n, nnz)
        kernels.append(kernel)
    packed(host_pointer(x), host_pointer(y), 1234)
    runs = early + late
    assert [k.calls for k in kernels] == [[(b - a + 1, 256, 1234, b - a)] for a, b in runs]
    assert np.array_equal(y, S @ x)


def test_arguments_set_once():
    plan = SimpleNamespace(rows_kernel=None, n_major=np.int64(5), long_row_scalar=np.int64(128))
    launch = packed_rows_launch(plan, 1000, 2000, 3000, np.complex64, np.int64)
    assert len(launch.arguments) == len(rows_parameters(np.complex64, np.int64)) == 13
    values = [launch.arguments[k].value for k in (0, 1, 2, 3, 4, 7, 8)]
    assert values == [1000, 2000, 3000, 0, 0, 5, 128]
    alpha, beta = launch.arguments[5], launch.arguments[6]
    assert (alpha.re, alpha.im) == (1.0, 0.0) and (beta.re, beta.im) == (0.0, 0.0)
    with pytest.raises(KeyError):
        rows_parameters(np.int32, np.int32)
