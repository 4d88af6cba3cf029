"""Matrix formats: one module per format, all sharing :class:`SparseMatrix`."""

from sparsegpu.formats._base import SparseMatrix, TransposedOperator
from sparsegpu.formats.coo import COO
from sparsegpu.formats.csc import CSC
from sparsegpu.formats.csr import CSR

__all__ = ["COO", "CSC", "CSR", "SparseMatrix", "TransposedOperator"]
