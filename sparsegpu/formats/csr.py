"""CSR: compressed sparse rows. ``A @ x`` runs kernels/spmv_csr.cu (NumPy reference: reference.csr_spmv)."""

from __future__ import annotations

from typing import Any

import scipy.sparse as sp

from sparsegpu.formats._compressed import CompressedMatrix, document_constructor


class CSR(CompressedMatrix):
    """Compressed sparse row matrix: ``data``, ``indices`` (column of each entry) and
    ``indptr`` (row i's entries are ``indptr[i]:indptr[i+1]``).

    ``A @ x`` gives each row a sub-warp of 1 to 32 threads, chosen from the mean row length,
    and splits rows much longer than that across blocks, so one long row never serialises on a
    thread. Both ``A @ x`` and ``A.T @ x`` are bitwise reproducible run to run (``A.T @ x``
    uses a transposed copy built on first use; with ``sparsegpu.options(deterministic=False)``
    it scatters with atomics instead, saving that memory but not reproducible).

    %(constructor)s
    >>> import numpy as np, scipy.sparse as sp, sparsegpu
    >>> S = sp.random(50, 40, density=0.1, random_state=1, format="csr")
    >>> A = sparsegpu.CSR.from_scipy(S, backend="cpu")
    >>> x = np.arange(40.0)
    >>> bool(np.allclose(A @ x, S @ x)) and bool(np.allclose(A.T @ np.ones(50), S.T @ np.ones(50)))
    True
    >>> B = sparsegpu.CSR((np.array([1.0, 2.0]), np.array([1, 0]), np.array([0, 1, 2])), (2, 2), backend="cpu")
    >>> (B @ np.array([10.0, 20.0])).tolist()
    [20.0, 20.0]
    """

    format = "csr"
    _major_axis = 0
    _scipy_class = sp.csr_array

    @classmethod
    def _from_csr(cls, csr: Any, **params: Any) -> CSR:
        if params:
            raise TypeError(f"CSR takes no format parameters, got {sorted(params)}")
        return csr

    def to_csr(self) -> CSR:
        return self


document_constructor(CSR, "row", "column")
