"""Checks shared by the transfer entry points: options, and the scipy matrix a CSR upload
starts from. Each raises TypeError or ValueError naming the problem before anything is
allocated or copied, and before any SciPy routine reads the matrix's arrays."""

from __future__ import annotations

from typing import Any, Literal

import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu.formats._base import as_scipy_sparse

PackStrategy = Literal["threads", "register", "auto"]
CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def positive_int(name: str, value: Any) -> int:
    """``value`` as an int if it is an integer (not a bool or a float) and at least 1."""
    value = _validate.check_int(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def optional_positive_int(name: str, value: Any) -> int | None:
    """None, or ``value`` checked by :func:`positive_int`."""
    return None if value is None else positive_int(name, value)


def check_pack(pack: Any) -> str:
    """The packing strategy to use for ``pack`` ("threads", "register" or "auto")."""
    if not isinstance(pack, str):
        raise TypeError(f"pack must be 'threads', 'register' or 'auto', got {type(pack).__name__} {pack!r}")
    if pack not in ("threads", "register", "auto"):
        raise ValueError(f"pack must be 'threads', 'register' or 'auto', not {pack!r}")
    # auto = threads: packing with threads moved more bytes per second end to end than
    # registering (the driver serialises cudaHostRegister), and registering a share of the
    # chunks while packing the others gave no more than packing alone (measured on an H200,
    # see docs/performance.md).
    return "threads" if pack == "auto" else pack


def check_casting(casting: Any) -> str:
    """``casting`` if it is one of NumPy's casting rules."""
    if not isinstance(casting, str) or casting not in CASTINGS:
        raise ValueError(f"casting must be one of {CASTINGS}, not {casting!r}")
    return casting


def csr_input(S: Any) -> Any:
    """``S`` as a scipy CSR. Other scipy formats are checked in full (:func:`_validate.check_scipy`:
    SciPy's conversions trust the arrays and can crash on corrupted ones) and converted on
    the host; a CSR is returned as it is, unchecked."""
    S = as_scipy_sparse(S)
    if S.format != "csr":
        _validate.check_scipy(S)
        m, n = S.shape
        _validate.ensure_fits((m + 1) * 8 + S.nnz * (S.dtype.itemsize + 8),
                              f"converting a {m}x{n} {S.format.upper()} matrix to CSR", "cpu")
        S = sp.csr_array(S)
    return S


def check_csr_ends(S: Any) -> None:
    """The cheap host checks of a CSR, before any copy: array kinds and lengths, and the two
    ends of indptr (what lies between is checked on the device, or in full on the host)."""
    m, _ = S.shape
    _validate.check_index_array("indptr", S.indptr, m + 1)
    _validate.check_index_array("indices", S.indices, S.data.size)
    if S.data.ndim != 1:
        raise ValueError(f"data must be 1-D, got shape {S.data.shape}")
    if int(S.indptr[0]) != 0:
        raise ValueError(f"indptr[0] must be 0, got {int(S.indptr[0])}")
    if int(S.indptr[-1]) != S.indices.size:
        raise ValueError(f"indptr[-1] is {int(S.indptr[-1])} but there are {S.indices.size} stored entries")
