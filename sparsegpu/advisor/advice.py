"""``advise``: the format the model predicts fastest for ``A @ x``, with its parameters and the
reasons, and optionally every candidate measured on the device."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from sparsegpu.advisor._timing import seconds_per_call
from sparsegpu.advisor.model import (CANDIDATES, CSR_MARGIN, Estimate, calibration, estimates, rank, sell_layout,
                                     spmv_bytes)
from sparsegpu.advisor.statistics import as_csr, matrix_stats
from sparsegpu.advisor.summary import MatrixStats
from sparsegpu.formats import sell
from sparsegpu.formats._base import SparseMatrix
from sparsegpu.formats._compressed import threads_per_row
from sparsegpu.formats.sell import DEFAULT_C


@dataclass
class Advice:
    """:func:`advise`'s answer. Its times are the model's predictions for a GPU; only
    ``measured`` holds measurements (with ``autotune=True``, on the GPU).

    Attributes
    ----------
    format : str
        The advised format, to pass to ``asformat`` or ``from_scipy``.
    params : dict
        The format's parameters, to pass with it (HYB's ``width``, SELL's ``C``).
    stats : MatrixStats
        The statistics behind the advice.
    estimates : dict of str to Estimate
        The model's estimate for every candidate format (predicted GPU time in microseconds,
        bytes, launches; ``refused`` says why a format would refuse the matrix).
    ranking : list of str
        The formats that accept the matrix, fastest predicted first.
    reason : str
        Why, in plain sentences.
    payoff : dict of str to float or None
        With ``n_spmv``: each format's predicted conversion plus ``n_spmv`` products, in
        microseconds.
    measured : dict of str to float or None
        With ``autotune``: each format's measured ``A @ x`` rate in GB/s (least bytes moved
        over time).
    measured_best : str or None
        With ``autotune``: the format measured fastest.
    backend : {"gpu", "cpu"}
        Where the matrix was read. On "cpu" the printed advice says that its times are GPU
        predictions, not measurements.

    Examples
    --------
    >>> import scipy.sparse as sp, sparsegpu
    >>> S = sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(1000, 1000))
    >>> advice = sparsegpu.advise(S, backend="cpu")
    >>> advice.ranking[0] == advice.format, advice.estimates["csr"].time_us > 0
    (True, True)
    >>> print(advice)  # doctest: +ELLIPSIS
    Advice: ...
      matrix 1000x1000, 2998 entries; rows 2..3, mean 3.0, cv 0.01, 0 empty
      predicted GPU times (the model's, not measured on this CPU backend): ...
    """

    format: str
    params: dict[str, Any]
    stats: MatrixStats
    estimates: dict[str, Estimate]
    ranking: list[str]
    reason: str
    payoff: dict[str, float] | None = None
    measured: dict[str, float] | None = None
    measured_best: str | None = None
    backend: str = "gpu"

    def __repr__(self) -> str:
        s = self.stats
        lines = [
            f"Advice: {self.format}" + (f" {self.params}" if self.params else ""),
            f"  matrix {s.rows}x{s.cols}, {s.nnz} entries; rows {s.row_min}..{s.row_max}, "
            f"mean {s.row_mean:.1f}, cv {s.row_cv:.2f}, {s.empty_rows} empty",
            ("  predicted: " if self.backend == "gpu" else
             "  predicted GPU times (the model's, not measured on this CPU backend): ") + ", ".join(
                f"{f} {self.estimates[f].time_us:.1f}us" for f in self.ranking),
        ]
        refused = [f"{f} ({e.refused})" for f, e in self.estimates.items() if e.refused]
        if refused:
            lines.append("  refused: " + "; ".join(refused))
        if self.measured:
            lines.append("  measured GB/s: " + ", ".join(f"{f} {g:.0f}" for f, g in self.measured.items())
                         + f" -> best {self.measured_best}")
        lines.append("  " + self.reason)
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """The advice as plain dicts and lists (for JSON), with the statistics' ``triangular``."""
        out = asdict(self)
        out["stats"]["triangular"] = self.stats.triangular
        return out


def _sell_reason(s: MatrixStats) -> str:
    layout = sell_layout(s)
    order = "sorted by length globally" if layout.sigma != sell.DEFAULT_SIGMA else \
        f"sorted by length in windows of {layout.sigma}"
    fill = layout.slots / s.nnz - 1 if s.nnz else 0.0
    if layout.mode == "direct":
        return (f"Slices of {DEFAULT_C} rows {order} pad about {fill:.2f} slots per entry (ELL would pad "
                f"{s.ell_fill:.2f}); a thread per row, with coalesced loads, in one launch.")
    why = (f"Rows hold up to {s.row_max} entries (mean {s.row_mean:.1f}, cv {s.row_cv:.2f}): SELL's slices of "
           f"{DEFAULT_C} rows {order} pad about {fill:.2f} slots per entry, ")
    if layout.parts_of_longest > 1:
        why += (f"slices wider than {layout.split} slots are cut into parts (the longest row's into "
                f"{layout.parts_of_longest}) that groups of {DEFAULT_C} threads sum at once and add in a fixed "
                "order, ")
    if layout.hot:
        why += f"columns of x gathered at least {sell.HOT_MIN_GATHERS} times are read from shared memory, "
    why += "all in one launch"
    if s.csr_long_rows:
        rows = f"{s.csr_long_rows} row" + "s" * (s.csr_long_rows != 1)
        why += f"; CSR would need two more launches for its {rows} past its sub-warp limit"
    return why + "."


def _reason(choice: str, stats: MatrixStats, est: dict[str, Estimate], ranking: list[str]) -> str:
    s = stats
    why = {
        "csr": (f"Rows hold {s.row_mean:.1f} entries on average (cv {s.row_cv:.2f}); CSR reads each entry once with no "
                f"padding and gives each row {threads_per_row(s.row_mean)} thread(s)"
                + (f", splitting its {s.csr_long_rows} long rows across blocks." if s.csr_long_rows else ".")),
        "coo": (f"The matrix is very sparse ({s.row_mean:.2f} entries per row, {s.empty_rows} empty rows): COO's "
                "segmented reduction costs nothing per row, where row-based formats pay for every row."),
        "ell": (f"Rows are uniform ({s.row_min} to {s.row_max} entries, cv {s.row_cv:.2f}): ELL pads only "
                f"{s.ell_fill:.2f} slots per entry and every load of a warp is coalesced."),
        "hyb": (f"Row lengths are skewed (mean {s.row_mean:.1f}, max {s.row_max}, cv {s.row_cv:.2f}): HYB with width "
                f"{s.hyb_width} keeps {s.hyb_ell_fraction:.0%} of the entries in coalesced ELL slots and sends the "
                "overflow of the long rows to a COO part."),
        "jds": ("Rows sorted by length give jagged diagonals with no padding"
                + (f"; the matrix is {s.triangular} triangular, where JDS's sorted rows balance the work."
                   if s.triangular else ".")),
        "sell": _sell_reason(s),
    }[choice]
    runner = next((f for f in ranking if f != choice), None)
    if runner is not None:
        gap = est[runner].time_us / est[choice].time_us - 1
        if gap >= 0:
            why += f" Next best: {runner.upper()}, predicted {gap:.0%} slower."
        elif choice == "csr" and est["csr"].time_us <= CSR_MARGIN * est[runner].time_us:
            why += (f" {runner.upper()} is predicted {-gap:.0%} faster, within the model's error "
                    f"({CSR_MARGIN - 1:.0%}), so CSR is kept: it needs no conversion.")
        else:  # ranked by total time with conversions (n_spmv)
            why += f" {runner.upper()} is predicted {-gap:.0%} faster per product."
    return why


def advise(A: Any, *, n_spmv: int | None = None, autotune: bool = False, backend: str | None = None) -> Advice:
    """Which format suits ``A`` for ``A @ x``, with what parameters, and why.

    Reads the matrix's statistics once (:func:`matrix_stats`), predicts every candidate
    format's GPU time with a calibrated model, and ranks them. CSR is kept unless another format
    is predicted faster by more than the model's error, since it needs no conversion. On the
    CPU backend the advice still describes the GPU: its times are predictions.

    Parameters
    ----------
    A : scipy.sparse matrix or array, or sparsegpu.SparseMatrix
        The matrix.
    n_spmv : int, optional
        The number of products the caller expects. The ranking then counts the conversion from
        CSR, and ``payoff`` gives each format's total predicted time.
    autotune : bool, default False
        Also measure every candidate's ``A @ x`` on the GPU (``measured``, ``measured_best``).
    backend : {"cpu", "gpu"}, optional
        Where a SciPy matrix is read (default: the active backend). A sparsegpu matrix is read
        on its own backend.

    Returns
    -------
    Advice
        The format and its parameters, the statistics, every estimate, the ranking and the
        reason.

    Raises
    ------
    ValueError
        If ``n_spmv`` is not a positive integer, if ``autotune`` is asked of a matrix on the
        CPU backend, or if the matrix's indices hold NaN.
    TypeError
        If ``A`` is a dense array or not a sparse matrix, or its indices hold floats.
    RuntimeError
        If a format gives a wrong product while ``autotune`` measures it.

    Examples
    --------
    >>> import scipy.sparse as sp, sparsegpu
    >>> S = sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(1000, 1000))
    >>> advice = sparsegpu.advise(S, backend="cpu")
    >>> advice.format in ("csr", "ell", "sell", "jds", "hyb", "coo"), advice.stats.row_max
    (True, 3)
    >>> A = sparsegpu.from_scipy(S, format=advice.format, backend="cpu", **advice.params)
    >>> sorted(sparsegpu.advise(S, n_spmv=10, backend="cpu").payoff) == sorted(advice.ranking)
    True
    """
    if n_spmv is not None and (not isinstance(n_spmv, (int, np.integer)) or n_spmv < 1):
        raise ValueError(f"n_spmv must be a positive integer, got {n_spmv!r}")
    csr = as_csr(A, backend)
    stats = matrix_stats(csr)
    est = estimates(stats)
    allowed = [f for f in CANDIDATES if f in SparseMatrix.formats and est[f].refused is None]
    payoff = None
    if n_spmv is not None:
        conversion = calibration()["conversion_in_csr_spmv"]
        payoff = {f: conversion[f] * est["csr"].time_us + n_spmv * est[f].time_us for f in allowed}
        ranking = sorted(allowed, key=payoff.__getitem__)
    else:
        ranking = rank(est, allowed)
    choice = ranking[0]
    reason = _reason(choice, stats, est, ranking)
    if payoff is not None and choice == "csr" and min(allowed, key=lambda f: est[f].time_us) != "csr":
        fastest = min(allowed, key=lambda f: est[f].time_us)
        reason += (f" {fastest.upper()} would be faster per product, but converting to it does not pay off "
                   f"within {n_spmv} products.")
    advice = Advice(format=choice, params=dict(est[choice].params), stats=stats, estimates=est,
                    ranking=ranking, reason=reason, payoff=payoff, backend=csr.backend)
    if autotune:
        advice.measured, advice.measured_best = _autotune(csr, allowed, est, spmv_bytes(stats))
    return advice


#: Autotune times the candidates in this many interleaved rounds and keeps each one's fastest
#: round: a product of a few microseconds is paced by the host, whose speed drifts (the first
#: format timed after a conversion ran up to twice as slow), and rounds spread that over all.
AUTOTUNE_ROUNDS = 3


def _autotune(csr: Any, formats: list[str], est: dict[str, Estimate],
              nbytes: int) -> tuple[dict[str, float], str]:
    """Measured GB/s of each format's ``A @ x``, ``nbytes`` (counted on stored entries only)
    over its time. Every candidate is converted first and held while they are timed in turn."""
    if csr.backend != "gpu":
        raise ValueError("autotune measures on the GPU; this matrix is on the CPU backend")
    import cupy

    x = cupy.random.default_rng(0).standard_normal(csr.shape[1]).astype(csr.dtype)
    want = csr @ x
    scale = float(cupy.abs(want).max()) or 1.0
    y = cupy.empty(csr.shape[0], csr.dtype)
    candidates = {}
    for name in formats:
        A = candidates[name] = csr.asformat(name, **est[name].params)
        A.spmv(x, y)
        if float(cupy.abs(y - want).max()) > 1e-6 * scale * max(csr.shape[1], 1):
            raise RuntimeError(f"{name} gave a wrong product during autotune")
    seconds = {name: math.inf for name in formats}
    for _ in range(AUTOTUNE_ROUNDS):
        for name, A in candidates.items():
            seconds[name] = min(seconds[name], seconds_per_call(lambda A=A: A.spmv(x, y)))
    measured = {name: nbytes / t / 1e9 if t > 0 else math.nan for name, t in seconds.items()}
    return measured, max(measured, key=measured.__getitem__)
