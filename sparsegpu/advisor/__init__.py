"""The format advisor: row-length statistics -> per-format estimates -> a choice -> reasons.

``advise(S)`` reads a matrix once on its backend, estimates each format's SpMV time with a
small calibrated model, and says which format to use, with what parameters and why.

- :mod:`.statistics`: :func:`matrix_stats` and its GPU side (launch plans, the per-device
  workspace, the pinned record the host polls).
- :mod:`.summary`: the host summary of the statistics buffer, identical to the device's, and
  :class:`MatrixStats`.
- :mod:`.model`: the cost model (:func:`estimates`, :func:`rank`, SELL's predicted layout)
  and its calibration.
- :mod:`.advice`: :func:`advise`, :class:`Advice` and the reasons; ``autotune`` measures every
  candidate on the device.
- :mod:`.construct`: :func:`from_scipy`, whose ``format="auto"`` asks :func:`advise`.
"""

from sparsegpu.advisor.advice import AUTOTUNE_ROUNDS, Advice, advise
from sparsegpu.advisor.construct import from_scipy
from sparsegpu.advisor.model import (CANDIDATES, CSR_MARGIN, Estimate, SellLayout, calibration, estimates, rank,
                                     sell_layout, spmv_bytes)
from sparsegpu.advisor.statistics import matrix_stats
from sparsegpu.advisor.summary import QUANTILES, MatrixStats, hyb_width_from_lengths

__all__ = [
    "AUTOTUNE_ROUNDS", "Advice", "CANDIDATES", "CSR_MARGIN", "Estimate", "MatrixStats", "QUANTILES", "SellLayout",
    "advise", "calibration", "estimates", "from_scipy", "hyb_width_from_lengths", "matrix_stats", "rank", "sell_layout",
    "spmv_bytes",
]
