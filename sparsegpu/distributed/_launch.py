"""A row run's GPU launch with its arguments packed once, when the matrix is built.

A run is the single-GPU row kernel (``csr_spmv_rows`` of kernels/spmv_csr.cu) over a slice of
a CSR's row pointers, writing a slice of y. Through CuPy each launch packs its thirteen
arguments anew, and the slices of the row pointers and of y are array views, each costing
microseconds of host time. Here the arguments live in C storage
(:class:`sparsegpu._kernels.PackedLaunch`): the row pointers' address (the slice's first
entry), the other arrays' addresses, alpha = 1, beta = 0, the row count and the long-row limit
are set at build time; a call sets only x's address and y's (the output's address plus the
run's byte offset), then makes one driver call. The kernel and its launch shape are the
ones :func:`sparsegpu.formats._compressed.gather_spmv` uses, so the bits are the same.

Runs with rows long enough to be split into chunks (the plan's ``n_long``) keep CuPy's path:
their chunks' partial sums need a scratch array per call.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from sparsegpu._kernels import PackedLaunch
from sparsegpu.formats._compressed import ROWS_BLOCK
from sparsegpu.formats._fast_product import (
    SCALAR_TYPES,
    VALUE_TYPES,
    address,
    set_scalar,
)

#: ``csr_spmv_rows`` parameters: indptr, indices, data, x, y, alpha, beta, n_rows, long_row,
#: w, dot, partials, counter (the last four null: no dot epilogue).
X_ARGUMENT, Y_ARGUMENT = 3, 4


def rows_parameters(value_dtype: Any, index_dtype: Any) -> list[type]:
    """The ctypes type of each ``csr_spmv_rows`` parameter, in order (values and scalars as
    :mod:`sparsegpu.formats._fast_product` packs them)."""
    pointer = ctypes.c_uint64
    value, index = VALUE_TYPES[np.dtype(value_dtype)], SCALAR_TYPES[np.dtype(index_dtype)]
    return [pointer] * 5 + [value, value, index, index] + [pointer] * 4


def packed_rows_launch(plan: Any, indptr_pointer: int, indices_pointer: int, data_pointer: int, value_dtype: Any,
                       index_dtype: Any) -> PackedLaunch:
    """The run's ``csr_spmv_rows`` launch (``plan``: its
    :class:`~sparsegpu.formats._compressed.GatherPlan`, without split rows) with every argument
    set but x and y. ``plan.rows_kernel`` None packs the arguments only (what tests inspect)."""
    launch = PackedLaunch(plan.rows_kernel, rows_parameters(value_dtype, index_dtype))
    arguments = launch.arguments
    for position, pointer in enumerate((indptr_pointer, indices_pointer, data_pointer)):
        arguments[position].value = int(pointer)
    set_scalar(arguments[5], 1.0)  # alpha
    set_scalar(arguments[6], 0.0)  # beta
    arguments[7].value = int(plan.n_major)
    arguments[8].value = int(plan.long_row_scalar)
    return launch


class PackedRuns:
    """Runs launched with packed arguments: ``(launch, grid, y byte offset)`` each.

    A call sets x's and y's addresses in each launch and launches it on ``stream``: one
    driver call per run, no array made."""

    def __init__(self) -> None:
        self.launches: list[tuple[PackedLaunch, int, int]] = []

    def add(self, plan: Any, indptr: Any, indices: Any, data: Any, at: int, first: int,
            pointer: Any = address) -> None:
        """Add the run of the CSR ``(indptr, indices, data)`` whose rows start at row ``at`` and
        write y from row ``first``; ``plan``: the run's gather plan (its ``rows_grid`` rows),
        ``pointer``: an array's address (device arrays by default)."""
        launch = packed_rows_launch(plan, pointer(indptr) + at * indptr.itemsize, pointer(indices), pointer(data),
                                    data.dtype, indptr.dtype)
        self.launches.append((launch, int(plan.rows_grid), int(first) * data.itemsize))

    def __call__(self, x_pointer: int, y_pointer: int, stream: int) -> None:
        """Launch every run on ``stream`` reading x at ``x_pointer``, writing y at ``y_pointer``."""
        for launch, grid, y_offset in self.launches:
            arguments = launch.arguments
            arguments[X_ARGUMENT].value = x_pointer
            arguments[Y_ARGUMENT].value = y_pointer + y_offset
            launch(grid, ROWS_BLOCK, stream)
