"""SpMV: effective GB/s of every sparsegpu format and cupyx on matrices larger than L2, the
copy ceiling they are measured against, and the cost of one call on a small matrix."""

from __future__ import annotations

from sparsegpu import datasets
from sparsegpu.bench import effective_gbps, measure, synchronized_clock
from sparsegpu.bench.spmv import python_overhead
from sparsegpu.bench.timing import copy_ceiling

from ._common import REPEAT, checked_product, implementations, medium, require_gpu

FAMILIES = ["poisson2d", "stencil27", "rmat", "powerlaw", "lower_triangular"]
DTYPES = ["float32", "float64"]


class SpMV:
    """y = A @ x on each family's medium preset (10-25M nonzeros, beyond the 50 MB L2):
    effective GB/s (CUDA events, median of samples) by the shared bytes model."""

    params = [implementations(), DTYPES, FAMILIES]
    param_names = ["implementation", "dtype", "family"]
    unit = "GB/s"

    def setup(self, impl: str, dtype: str, family: str) -> None:
        require_gpu()  # before building a matrix nobody will use
        self.product, self.nbytes = checked_product(medium(family), impl, dtype)

    def track_gbps(self, impl: str, dtype: str, family: str) -> float:
        return effective_gbps(self.nbytes, measure(self.product.run, "gpu", REPEAT).seconds)


class Ceiling:
    """Device-to-device copy of 1 GiB (bytes read + written): the bandwidth ceiling."""

    unit = "GB/s"

    def setup(self) -> None:
        require_gpu()

    def track_copy_gbps(self) -> float:
        return copy_ceiling("gpu", repeat=REPEAT)["gbps"]


class SpMVLatency:
    """One product on a 1000-row matrix (8 per row): launch and Python cost dominate. The
    timer synchronises the device, so the GPU work of the timed calls is included."""

    params = [implementations()]
    param_names = ["implementation"]
    timer = staticmethod(synchronized_clock)

    def setup(self, impl: str) -> None:
        self.product, _ = checked_product(datasets.random_uniform(1000, 8, seed=0), impl, "float64")

    def time_spmv(self, impl: str) -> None:
        self.product.run(0)


class PythonOverhead:
    """The per-call target (<= 15 us): one CSR ``spmv(x, y)`` call plus synchronisation on a
    1000-row matrix, minus the GPU time of its kernels."""

    unit = "us"

    def setup(self) -> None:
        require_gpu()

    def track_overhead_us(self) -> float:
        return python_overhead("gpu")["overhead_us"]
