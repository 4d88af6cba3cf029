"""Matrix formats: one module per format, all sharing :class:`SparseMatrix`."""

from sparsegpu.formats._base import SparseMatrix, TransposedOperator
from sparsegpu.formats._construct import diags, eye, hstack, kron, vstack
from sparsegpu.formats._spgemm import spgemm
from sparsegpu.formats.coo import COO
from sparsegpu.formats.csc import CSC
from sparsegpu.formats.csr import CSR
from sparsegpu.formats.ell import ELL
from sparsegpu.formats.hyb import HYB
from sparsegpu.formats.jds import JDS
from sparsegpu.formats.sell import SELL
from sparsegpu.formats.vector import SparseVector

__all__ = ["COO", "CSC", "CSR", "ELL", "HYB", "JDS", "SELL", "SparseMatrix", "SparseVector", "TransposedOperator", "diags", "eye", "hstack",
           "kron", "spgemm", "vstack"]
