"""A small run of every GPU kernel family, for compute-sanitizer (memcheck, racecheck).

CuPy's memory pool hands out slices of large allocations, which hides out-of-bounds accesses
from memcheck, so the pool is switched off: every array is its own cudaMalloc.
Exits non-zero if any result disagrees with SciPy.
"""

from __future__ import annotations

import cupy
import numpy as np
import scipy.sparse as sp

import sparsegpu

cupy.cuda.set_allocator(None)
rng = np.random.default_rng(7)


def matrix() -> sp.csr_array:
    """Short rows, empty rows and two long rows (past the sub-warp limit)."""
    S = sp.random_array((3000, 2500), density=0.004, rng=rng, format="lil")
    S[5, :] = rng.standard_normal(2500)
    S[1700, ::2] = rng.standard_normal(1250)
    S[100:200, :] = 0
    return sp.csr_array(S)


def main() -> int:
    S = matrix()
    x, z = rng.standard_normal(S.shape[1]), rng.standard_normal(S.shape[0])
    failures = 0
    for deterministic in (True, False):
        with sparsegpu.options(deterministic=deterministic):
            for name in sorted(sparsegpu.SparseMatrix.formats):
                try:
                    A = sparsegpu.from_scipy(S, format=name, backend="gpu")
                except ValueError as exc:  # a format may refuse this matrix (fill guard)
                    print(f"{name}: refused ({exc})")
                    continue
                for label, got, want in (("A@x", A @ cupy.asarray(x), S @ x), ("A.T@x", A.T @ cupy.asarray(z), S.T @ z)):
                    err = float(np.max(np.abs(got.get() - want)))
                    ok = err < 1e-10
                    failures += not ok
                    print(f"{name:5s} deterministic={deterministic!s:5s} {label:6s} max error {err:.2e} {'ok' if ok else 'WRONG'}")
    cupy.cuda.runtime.deviceSynchronize()
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
