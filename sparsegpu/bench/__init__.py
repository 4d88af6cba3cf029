"""Measuring instruments: the bytes model behind every "effective GB/s", device-synchronised
timers, and the comparison command ``python -m sparsegpu.bench`` (also used by the asv suite
in ``asv_benchmarks/``).

>>> from sparsegpu.bench import spmv_bytes, effective_gbps
>>> spmv_bytes(rows=3, cols=4, nnz=5)   # 5*(8+4) + 4*4 + 4*8 + 3*8
132
"""

from sparsegpu.bench.bytes_model import (
    cg_iteration_bytes,
    copy_bytes,
    effective_gbps,
    histogram_bytes,
    reduce_bytes,
    scan_bytes,
    spmv_bytes,
    spmv_bytes_of,
)
from sparsegpu.bench.timing import Timing, measure, synchronized_clock

__all__ = [
    "Timing",
    "cg_iteration_bytes",
    "copy_bytes",
    "effective_gbps",
    "histogram_bytes",
    "measure",
    "reduce_bytes",
    "scan_bytes",
    "spmv_bytes",
    "spmv_bytes_of",
    "synchronized_clock",
]
