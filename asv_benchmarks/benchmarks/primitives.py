"""Primitives: sparsegpu.primitives against CuPy's cumsum, sum and bincount, effective GB/s."""

from __future__ import annotations

from sparsegpu.bench import effective_gbps, measure
from sparsegpu.bench import primitives as bench
from sparsegpu.bench.spmv import tolerance
from sparsegpu.bench.timing import synchronize

from ._common import REPEAT, require_gpu

#: 2^26 elements (256 MB of float64), far beyond L2; the comparison command runs 2^28.
N = 1 << 26


class Primitives:
    """Scan (read + write), reduce (read) and 256-bin histogram (read), checked against NumPy
    first."""

    params = [["inclusive_scan", "reduce", "histogram"], ["int32", "float64"], ["sparsegpu", "cupy"]]
    param_names = ["primitive", "dtype", "implementation"]
    unit = "GB/s"

    def setup(self, op: str, dtype: str, impl: str) -> None:
        require_gpu()
        if op == "histogram" and dtype != "int32":
            raise NotImplementedError("histograms count integer values")
        calls = bench.implementations(op, "gpu")
        if impl not in calls:
            raise NotImplementedError("sparsegpu.primitives is not available")
        self.x = bench.make_input(op, dtype, N, "gpu")
        self.call = calls[impl]
        err = bench.error(op, self.x.get(), self.call(self.x))
        if not err <= (0.0 if dtype == "int32" else tolerance(dtype)):
            raise AssertionError(f"{impl} {op} WRONG: relative error {err:.3g}")
        synchronize("gpu")
        self.nbytes = bench.model_bytes(op, N, dtype)

    def track_gbps(self, op: str, dtype: str, impl: str) -> float:
        return effective_gbps(self.nbytes, measure(lambda i: self.call(self.x), "gpu", REPEAT).seconds)
