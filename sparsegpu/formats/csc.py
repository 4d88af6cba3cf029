"""CSC: compressed sparse columns. ``A @ x`` runs kernels/spmv_csc.cu (NumPy reference: reference.csc_spmv)
or, deterministically, kernels/spmv_csr.cu over a cached CSR copy."""

from __future__ import annotations

from typing import Any

import scipy.sparse as sp

from sparsegpu.formats._compressed import CompressedMatrix, document_constructor
from sparsegpu.formats.csr import CSR


class CSC(CompressedMatrix):
    """Compressed sparse column matrix: ``data``, ``indices`` (row of each entry) and
    ``indptr`` (column j's entries are ``indptr[j]:indptr[j+1]``).

    ``A.T @ x`` gathers down each column (the CSR kernel over these arrays): fast and bitwise
    reproducible. ``A @ x`` by default builds a CSR copy once on first use and gathers over it
    (bitwise reproducible); with ``sparsegpu.options(deterministic=False)`` it scatters each
    column with atomic adds instead (no copy, not reproducible).

    %(constructor)s
    >>> import numpy as np, scipy.sparse as sp, sparsegpu
    >>> S = sp.random(30, 20, density=0.2, random_state=2, format="csc")
    >>> A = sparsegpu.CSC.from_scipy(S, backend="cpu")
    >>> bool(np.allclose(A @ np.ones(20), S @ np.ones(20)))
    True
    """

    format = "csc"
    _major_axis = 1
    _scipy_class = sp.csc_array

    @classmethod
    def _from_csr(cls, csr: Any, **params: Any) -> CSC:
        if params:
            raise TypeError(f"CSC takes no format parameters, got {sorted(params)}")
        data, indices, indptr = csr._swapped_arrays()
        return cls._make(data, indices, indptr, csr.shape, csr.backend)

    def to_csr(self) -> Any:
        data, indices, indptr = self._swapped_arrays()
        return CSR._make(data, indices, indptr, self._shape, self._backend)


document_constructor(CSC, "column", "row")
