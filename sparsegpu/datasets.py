"""Test and benchmark matrices: the real ones in ``shared/matrices`` (found by path, never
copied into the repository) and generators for large reproducible problems.

The real matrices are looked up in ``$SPARSEGPU_MATRICES``, then ``../shared/matrices`` and
``.shared/matrices`` beside the repository (the second is where the GPU check carries them).
"""

from __future__ import annotations

import csv
import functools
import os
from pathlib import Path

import scipy.io
import scipy.sparse as sp

MATRICES_ENV = "SPARSEGPU_MATRICES"
_REPO = Path(__file__).resolve().parent.parent


def matrix_dir() -> Path | None:
    """The folder holding the real matrices and their MANIFEST.tsv, or None when absent."""
    candidates = [os.environ.get(MATRICES_ENV, "")]
    candidates += [str(_REPO.parent / "shared" / "matrices"), str(_REPO / ".shared" / "matrices"),
                   str(Path.cwd().parent / "shared" / "matrices")]
    for candidate in candidates:
        if candidate and (Path(candidate) / "MANIFEST.tsv").is_file():
            return Path(candidate)
    return None


@functools.cache
def manifest() -> dict[str, dict[str, str]]:
    """MANIFEST.tsv as {name: row}; empty when the matrices are not found."""
    folder = matrix_dir()
    if folder is None:
        return {}
    with open(folder / "MANIFEST.tsv", newline="") as handle:
        return {row["name"]: row for row in csv.DictReader(handle, delimiter="\t")}


def real_matrix_names() -> list[str]:
    """Names of the real matrices, sorted."""
    return sorted(manifest())


def load_matrix(name: str) -> sp.csr_array:
    """A real matrix by name (symmetric storage expanded) as a scipy csr_array."""
    folder = matrix_dir()
    if folder is None:
        raise FileNotFoundError(f"real matrices not found; set {MATRICES_ENV} to the folder holding MANIFEST.tsv")
    path = folder / f"{name}.mtx.gz"
    if not path.is_file():
        raise FileNotFoundError(f"no matrix {name!r} in {folder}")
    return sp.csr_array(scipy.io.mmread(path))
