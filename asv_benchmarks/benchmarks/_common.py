"""What the benchmark modules share: skipping without a GPU, and products checked and warmed
up before asv times them."""

from __future__ import annotations

from typing import Any

import sparsegpu
from sparsegpu import datasets
from sparsegpu.bench import spmv, timing

#: Timed samples per track_ call (each sample lasts about 2 ms; the median is returned).
REPEAT = 15


def require_gpu() -> None:
    """Skip the benchmark (asv's convention: NotImplementedError in setup) without a GPU."""
    if not sparsegpu.gpu_available():
        raise NotImplementedError("no usable GPU (CuPy and a CUDA device are needed)")


def implementations() -> list[str]:
    """Every registered sparsegpu format (formats added later appear by themselves), then the
    cupyx (cuSPARSE) baseline."""
    return [*sparsegpu.SparseMatrix.formats, "cupyx"]


def checked_product(S: Any, impl: str, dtype: str) -> tuple[spmv.Product, int]:
    """``impl``'s product on ``S`` on the GPU, checked against SciPy and warmed up (kernels
    compiled, caches built), with the bytes model of one call."""
    require_gpu()
    ops = spmv.operands(S, dtype, "gpu", timing.l2_bytes("gpu"))
    try:
        product, _ = spmv.open_on(impl, ops, "gpu")
    except spmv.Refused as exc:
        raise NotImplementedError(f"{impl} refuses this matrix: {exc}") from None
    outcome = spmv.check(product, ops.reference, dtype)
    if outcome.status != "ok":
        raise AssertionError(f"{impl} {outcome.status.upper()}: {outcome.message}")
    for i in range(3):
        product.run(i)
    timing.synchronize("gpu")
    return product, ops.nbytes


def medium(family: str) -> Any:
    """A generated family's medium preset, built once and then loaded from the disk cache
    (asv starts a process per parameter combination)."""
    return datasets.generate(family, "medium", cache=True)
