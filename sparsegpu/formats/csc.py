"""CSC: compressed sparse columns. ``A @ x`` runs kernels/spmv_csc.cu (NumPy reference: reference.csc_spmv)
or, deterministically, kernels/spmv_csr.cu over a cached CSR copy."""

from __future__ import annotations

from typing import Any

import scipy.sparse as sp

from sparsegpu.formats._compressed import CompressedMatrix
from sparsegpu.formats.csr import CSR


class CSC(CompressedMatrix):
    """Compressed sparse column matrix: ``data``, ``indices`` (row of each entry) and
    ``indptr`` (column j's entries are ``indptr[j]:indptr[j+1]``).

    ``A.T @ x`` gathers down each column (the CSR kernel over these arrays): fast and bitwise
    reproducible. ``A @ x`` by default builds a CSR copy once on first use and gathers over it
    (bitwise reproducible); with ``sparsegpu.options(deterministic=False)`` it scatters each
    column with atomic adds instead (no copy, not reproducible).

    Parameters
    ----------
    arg1 : (data, indices, indptr)
        The arrays, as scipy takes them: ``indices[k]`` the row of entry k, column j's entries at ``indptr[j]:indptr[j+1]``. Indices need not be sorted; duplicates
        are summed by products. The matrix copies whatever it would share with them.
    shape : (int, int)
        The matrix's shape.
    dtype : dtype, optional
        float32, float64, complex64 or complex128 (default: the data's, with integers and
        booleans stored as float64).
    index_dtype : {int32, int64}, optional
        Default: int32 when every index fits.
    backend : {"gpu", "cpu"}, optional
        Where NumPy input goes (default: :func:`sparsegpu.backend`); CuPy input stays on the GPU.
    check : bool, optional
        Validate lengths and index ranges, pointer monotonicity in one pass (default True); pass False only for
        arrays known to be valid.
    casting : str, optional
        NumPy's casting rule from the data's dtype to ``dtype`` (default "same_kind"; complex
        to real needs "unsafe").

    Raises
    ------
    TypeError
        ``arg1`` is not a triple of arrays; an unsupported dtype or cast; ``check`` not a bool.
    ValueError
        A bad ``shape``; arrays that do not describe a matrix of that shape (lengths, pointers,
        index ranges); a matrix that cannot fit in memory.

    See Also
    --------
    SparseMatrix.from_scipy : the usual way to build one, ``CSC.from_scipy(S)``.

    Examples
    --------
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
