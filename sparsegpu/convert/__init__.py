"""Layout changes on whichever backend holds the arrays (NumPy or CuPy), without a host trip.

These are the building blocks of format conversion, built on :mod:`sparsegpu.primitives`:

- :func:`expand_pointers`: one major index per stored entry (a max-scan of row starts);
- :func:`compress`: pointers from major indices (a histogram of the indices, then a scan);
- :func:`swap_major`: CSR <-> CSC of the same matrix (which is also the transpose); on the GPU
  by :func:`transpose_compressed`, a stable radix sort by minor index in the kernels of
  ``kernels/transpose.cu``;
- :func:`coo_to_csr` / :func:`csr_to_coo`: coordinates <-> compressed rows (on the GPU with
  the kernels of ``kernels/convert.cu``: one inspection pass, pointers by binary search for
  sorted input, row-range partitions and a sort in shared memory for unsorted input);
- :func:`inspect_coo`: index extremes and sortedness of coordinates in one pass;
- :func:`row_lengths` / :func:`row_length_stats`: what the advisor reads off a pointer array.

Results are canonical (indices sorted within each row or column, duplicates summed in input
order), so conversions are deterministic: bitwise the same run to run.
"""

from sparsegpu.convert.coo import (
    CooFacts,
    coo_to_csr,
    csr_to_coo,
    inspect_coo,
    inspect_csr_chunk,
)
from sparsegpu.convert.coo_sort import (
    BLOCKS_PER_SM,
    CONVERT_BLOCK,
    DATA_DTYPES,
    DIGIT_BITS,
    DIGITS,
    GATHER_KERNELS,
    INDEX_KERNELS,
    INSPECT_ITEMS,
    LOCAL_ROW,
    MAX_GRID,
    PARTITION_TILE,
    SHORT_ROW,
)
from sparsegpu.convert.pointers import (
    HISTOGRAM_QUANTILE_LIMIT,
    QUANTILES,
    RowLengthStats,
    compress,
    row_length_stats,
    row_lengths,
)
from sparsegpu.convert.transpose import (
    swap_major,
    transposable_on_device,
    transpose_compressed,
)
from sparsegpu.primitives import expand_pointers

__all__ = [
    "BLOCKS_PER_SM",
    "CONVERT_BLOCK",
    "DATA_DTYPES",
    "DIGITS",
    "DIGIT_BITS",
    "GATHER_KERNELS",
    "HISTOGRAM_QUANTILE_LIMIT",
    "INDEX_KERNELS",
    "INSPECT_ITEMS",
    "LOCAL_ROW",
    "MAX_GRID",
    "PARTITION_TILE",
    "QUANTILES",
    "SHORT_ROW",
    "CooFacts",
    "RowLengthStats",
    "compress",
    "coo_to_csr",
    "csr_to_coo",
    "expand_pointers",
    "inspect_coo",
    "inspect_csr_chunk",
    "row_length_stats",
    "row_lengths",
    "swap_major",
    "transposable_on_device",
    "transpose_compressed",
]
