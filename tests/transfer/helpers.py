"""Matrices, sizes and runners shared by the transfer tests."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import sparsegpu
from sparsegpu.transfer import SLOT_ALIGN, block_bytes
from tests.conftest import to_numpy

REPO = Path(__file__).resolve().parents[2]


def random_csr(rng, m, n, per_row, *, long_rows=(), long_length=0, empty_rows=(), dtype=np.float64):
    """A canonical CSR with about ``per_row`` entries per row, some rows long, some empty."""
    lengths = rng.integers(0, 2 * per_row + 1, size=m)
    for r in long_rows:
        lengths[r] = min(long_length, n)
    for r in empty_rows:
        lengths[r] = 0
    indptr = np.zeros(m + 1, np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.concatenate([np.sort(rng.choice(n, size=k, replace=False)) for k in lengths] or [np.zeros(0)])
    data = rng.standard_normal(indptr[-1]).astype(dtype)
    return sp.csr_array((data, indices.astype(np.int32), indptr.astype(np.int32)), shape=(m, n))


def messy_csr(rng, S, duplicates):
    """S's entries in a CSR that is not canonical: columns shuffled within rows and
    ``duplicates`` entries repeated (scipy's constructor keeps the arrays as given)."""
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    extra = rng.integers(0, S.nnz, duplicates)
    rows = np.concatenate([rows, rows[extra]])
    cols = np.concatenate([S.indices, S.indices[extra]])
    data = np.concatenate([S.data, S.data[extra]])
    order = np.lexsort((rng.random(rows.size), rows))  # by row, random within a row
    indptr = np.zeros(S.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=S.shape[0]), out=indptr[1:])
    messy = sp.csr_array((data[order], cols[order].astype(S.indices.dtype), indptr.astype(S.indptr.dtype)),
                         shape=S.shape)
    assert not messy.has_canonical_format
    return messy


def chunk_bytes_for(S, count):
    """A chunk size giving about ``count`` chunks of S's value array."""
    return max(8, -(-S.data.nbytes // count))


def budget_for(S, blocks, streams=2):
    """A device budget giving about ``blocks`` row blocks (never too small for the longest row)."""
    sizes = S.data.dtype.itemsize, S.indices.dtype.itemsize
    whole = block_bytes(S.shape[0], S.nnz, *sizes)
    longest = block_bytes(1, int(np.diff(S.indptr).max(initial=0)), *sizes)
    return streams * max(-(-whole // blocks) + 64, longest) + streams * 3 * SLOT_ALIGN


def nonzero_x(rng, n):
    x = rng.standard_normal(n)
    x[x == 0] = 1.0
    return x


def gpu_csr_equal(A, S):
    ref = sparsegpu.CSR.from_scipy(S)
    return (np.array_equal(to_numpy(A.indptr), to_numpy(ref.indptr))
            and np.array_equal(to_numpy(A.indices), to_numpy(ref.indices))
            and np.allclose(to_numpy(A.data), to_numpy(ref.data)))


#: scipy matrices whose arrays were changed after construction (SciPy checks at construction
#: only), as code building ``S``, and the words the error must name. SciPy's own routines
#: read such arrays out of bounds: they run in a subprocess, so a crash fails the test.
CORRUPTIONS = {
    "csr indptr not monotone": (
        "S = sp.csr_array((np.ones(3), np.array([0, 1, 2]), np.array([0, 1, 2, 3])), shape=(3, 3))\n"
        "S.indptr[1] = 10**8",
        "not monotone"),
    "coo negative row": (
        "S = sp.coo_array((np.ones(3), (np.array([0, 1, 2]), np.array([0, 1, 2]))), shape=(3, 3))\n"
        "S.row[1] = -1",
        "negative index"),
    "csc row past the end": (
        "S = sp.csc_array((np.ones(3), np.array([0, 1, 2]), np.array([0, 1, 2, 3])), shape=(3, 3))\n"
        "S.indices[2] = 7",
        "out of range for 3 rows"),
    "int64 index of 2**32": (
        "S = sp.csr_array((np.ones(3), np.array([0, 1, 2], np.int64), np.array([0, 1, 2, 3], np.int64)),"
        " shape=(3, 3))\n"
        "S.indices[1] = 2**32",
        "out of range for 3 columns"),
}


def run_isolated(code: str) -> subprocess.CompletedProcess:
    """``code`` (after imports of numpy, scipy.sparse and sparsegpu.transfer) in a fresh
    interpreter from the repository root; its output comes back as text."""
    preamble = "import numpy as np, scipy.sparse as sp\nfrom sparsegpu import transfer\n"
    return subprocess.run([sys.executable, "-c", preamble + textwrap.dedent(code)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def corrupted_call(build: str, call: str) -> str:
    """Code that builds a corrupted ``S``, runs ``call`` and prints ``ValueError: <message>``
    (or ``accepted`` when nothing was raised); any other exception propagates."""
    return f"{build}\ntry:\n    {call}\n    print('accepted')\nexcept ValueError as exc:\n    print('ValueError:', exc)\n"
