"""Graph algorithms on sparse adjacency matrices, mirroring :mod:`scipy.sparse.csgraph`.

The functions take SciPy's names, arguments, defaults and conventions; they accept any scipy
sparse matrix or array, or any sparsegpu matrix, and run on the GPU when the matrix is there
(or, for a scipy input, when :func:`sparsegpu.backend` is ``"gpu"``).
"""

from __future__ import annotations

__all__: list[str] = []
