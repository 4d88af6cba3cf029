"""NumPy references of the CUDA kernels: NumPy over the same array layouts, same arguments.

The CPU backend runs these; GPU tests compare every kernel with its reference. They are written for
clarity and vectorised speed, not to mimic the kernels' summation order, so GPU and CPU agree
to rounding, not bitwise.
"""

from sparsegpu.reference.regular import csr_to_slots, ell_spmv, hyb_spmv, jds_spmv, sell_spmv
from sparsegpu.reference.spmv import (
    coo_spmv,
    csc_spmv,
    csr_spmv,
    segment_sum,
)

__all__ = [
    "coo_spmv",
    "csc_spmv",
    "csr_spmv",
    "csr_to_slots",
    "ell_spmv",
    "hyb_spmv",
    "jds_spmv",
    "segment_sum",
    "sell_spmv",
]
