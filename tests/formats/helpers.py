"""Helpers the format tests share: real matrices (loaded once), random values of any dtype, and
the relative tolerances per value type."""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp

from sparsegpu import datasets

TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12, np.complex64: 1e-5, np.complex128: 1e-12}


@functools.cache
def real(name: str) -> sp.csr_array:
    return datasets.load_matrix(name)


def random_values(rng, shape, dtype):
    """Standard normal values (real and imaginary parts for a complex dtype)."""
    values = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)
