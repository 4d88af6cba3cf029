#!/usr/bin/env python3
"""Compile every registered kernel ahead of time: one cubin per kernel file, type pair and GPU
architecture, and the manifest the kernel loader reads.

    python3 scripts/build_kernels.py sparsegpu/_cubins          # sm_80 sm_90 sm_100 sm_120
    python3 scripts/build_kernels.py OUTDIR --arch sm_90 --files spmv_csr.cu --jobs 2

sparsegpu/_cubins/ is where the package looks for them; a wheel built where nvcc is present
gets them (setup.py). Same as ``python -m sparsegpu._aot``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's package

import sparsegpu  # noqa: E402,F401  (importing the package registers every kernel file)
from sparsegpu import _aot  # noqa: E402

if __name__ == "__main__":
    sys.exit(_aot.main())
