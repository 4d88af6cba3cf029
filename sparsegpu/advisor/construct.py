"""``from_scipy``: a scipy matrix to any format, ``"auto"`` included, streamed to the GPU when large.

It sits with the advisor because ``format="auto"`` asks it, and above the transfers because a
large matrix streams through :func:`sparsegpu.transfer.upload_csr`; the formats themselves never
stream (their own ``from_scipy`` makes the matrix canonical on the host, then copies it once).
"""

from __future__ import annotations

from typing import Any

from sparsegpu._backend import resolve_backend
from sparsegpu.advisor.advice import advise
from sparsegpu.formats import CSR, SparseMatrix
from sparsegpu.formats._base import format_key
from sparsegpu.transfer import upload_csr, worth_streaming


def from_scipy(S: Any, format: str = "csr", **kwargs: Any) -> SparseMatrix:
    """Build a sparsegpu matrix of ``format`` from any scipy sparse matrix or array.

    Parameters
    ----------
    S : scipy sparse matrix or array
        Any scipy format. Its arrays are checked before any SciPy routine or kernel reads them.
    format : str, optional
        ``"csr"`` (default), ``"csc"``, ``"coo"``, ``"ell"``, ``"hyb"``, ``"jds"``, ``"sell"``,
        or ``"auto"``: ask :func:`advise` and convert to its choice (on the device, from one
        upload). On the CPU backend ``"auto"`` keeps CSR, whose products run SciPy's.
    **kwargs
        ``dtype``, ``index_dtype``, ``backend``, ``casting`` (see
        :meth:`SparseMatrix.from_scipy`) and the format's parameters.

    Returns
    -------
    SparseMatrix
        On the GPU, matrices of :data:`sparsegpu.transfer.STREAM_MIN_BYTES` or more stream
        through :func:`upload_csr` (checked on the device as they arrive); smaller ones are made
        canonical on the host and copied once.

    Raises
    ------
    TypeError
        ``S`` is not a scipy sparse matrix, ``format`` is not a string, a dtype is unsupported
        or its cast unsafe.
    ValueError
        An unknown format; ``S``'s arrays do not describe a matrix; it cannot fit in memory.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, sparsegpu
    >>> S = sp.random(100, 100, density=0.05, random_state=0)
    >>> A = sparsegpu.from_scipy(S, format="csr", backend="cpu")
    >>> bool(np.allclose(A @ np.ones(100), S @ np.ones(100)))
    True
    """
    auto = isinstance(format, str) and format.lower() == "auto"
    key = "csr" if auto else format_key(format)
    layout = {name: kwargs.pop(name) for name in ("dtype", "index_dtype", "backend", "casting") if name in kwargs}
    target = resolve_backend(layout.pop("backend", None))
    if target == "gpu" and worth_streaming(S):
        csr = upload_csr(S, **layout)
    else:
        csr = CSR.from_scipy(S, backend=target, **layout)
    if auto:
        if kwargs:
            raise TypeError(f"format='auto' chooses the format's parameters itself, got {sorted(kwargs)}")
        if csr.backend == "cpu":
            return csr
        advice = advise(csr)
        return csr.asformat(advice.format, **advice.params)
    return csr.asformat(key, **kwargs) if (key != "csr" or kwargs) else csr
