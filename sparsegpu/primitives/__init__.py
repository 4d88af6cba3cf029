"""Data-parallel primitives: scans, segmented scans, reductions, segmented reductions, histograms.

NumPy in gives NumPy out (the NumPy references in :mod:`sparsegpu.reference.primitives`); CuPy in gives CuPy
out (kernels/scan.cu, kernels/reduce.cu, kernels/histogram.cu). Supported dtypes: int32, int64,
float32, float64; results keep the input dtype, so integer sums wrap on overflow exactly as
NumPy does with ``dtype=x.dtype`` (an int32 scan of large values wraps: pass int64 to avoid it).

Operators are objects, not kernel copies: ``op="sum" | "min" | "max"`` picks ``sg::Sum``,
``sg::Min`` or ``sg::Max``, a template parameter of one kernel family per primitive. Min and max
propagate NaN as NumPy does.

Reproducibility on the GPU: reductions fold in a fixed order (two launches, no atomics) and are
bitwise identical run to run on a given device. Integer scans use a single-pass decoupled
look-back scan (exact). Float scans are bitwise reproducible by default: a single pass whose
look-back adds the tile totals in a fixed association (an "ordered look-back": tile t's prefix
is the prefix of tile t - span (span = 32 * :data:`LOOKBACK_WARPS` tiles) plus a fixed tree of
the tile totals between, the same sum whatever the timing; :func:`ordered_scan_reference` computes
the same bits on the host);
:data:`DETERMINISTIC_FLOAT_SCAN` =
``"reduce-then-scan"`` selects the other reproducible path (three launches, x read twice).
With ``sparsegpu.options(deterministic=False)`` float scans take the plain look-back, whose
association of predecessors depends on timing, so the last bits can change run to run.
Histograms count with integer atomics and are exact.

>>> import numpy as np
>>> from sparsegpu import primitives as P
>>> P.inclusive_scan(np.array([1, 2, 3, 4], dtype=np.int32)).tolist()
[1, 3, 6, 10]
>>> P.segmented_reduce(np.arange(6.0), np.array([0, 2, 2, 6]), op="max").tolist()
[1.0, -inf, 5.0]
"""

from __future__ import annotations

from sparsegpu.primitives._common import DTYPES, OPS
from sparsegpu.primitives.dot import dot_scratch, vector_dot
from sparsegpu.primitives.histogram import histogram
from sparsegpu.primitives.pointers import expand_pointers, line_lengths
from sparsegpu.primitives.reduce import reduce, segmented_reduce
from sparsegpu.primitives.scan import (
    DETERMINISTIC_FLOAT_SCAN,
    LOOKBACK_WARPS,
    SCAN_BLOCK,
    SCAN_THREAD_BYTES,
    exclusive_scan,
    inclusive_scan,
    ordered_scan_reference,
    segmented_scan,
)

__all__ = [
    "DETERMINISTIC_FLOAT_SCAN",
    "LOOKBACK_WARPS",
    "SCAN_BLOCK",
    "SCAN_THREAD_BYTES",
    "DTYPES",
    "OPS",
    "dot_scratch",
    "exclusive_scan",
    "expand_pointers",
    "histogram",
    "inclusive_scan",
    "line_lengths",
    "ordered_scan_reference",
    "reduce",
    "segmented_reduce",
    "segmented_scan",
    "vector_dot",
]
