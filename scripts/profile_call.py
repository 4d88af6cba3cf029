#!/usr/bin/env python3
"""Where one small-matrix product call spends its host time, per format (GPU).

    python3 scripts/profile_call.py                       # 1000 rows, 8 per row, float64
    python3 scripts/profile_call.py --rows 4000 --dtype complex128 --repeat 5000

For each format the advisor can pick, the matrix is built and called twice (the general path,
which accepts x's and y's signatures and packs the launches), then each step of a fast call
(sparsegpu/formats/_fast_product.py) is timed on the host with ``time.perf_counter_ns`` over
``--repeat`` calls, median in microseconds:

``lookup`` (the fast product for the current options, from the matrix's cache), ``checks`` (x's
and y's signatures, alpha and beta types, the overlap of y with x), ``alloc`` (a new y, as
``A @ x`` makes), ``stream`` (the current CuPy stream's handle), ``args`` (x, y, alpha and beta
written into the packed launches), ``launch`` (the driver calls, after a memset of y where the format scales y first), ``sync`` (device
synchronise). ``sum`` adds them; ``A @ x`` and ``spmv(x, y)`` time whole calls plus synchronise
as users make them; ``general`` the general path's call (checks, CuPy's argument packing) with
y given, plus synchronise (an alpha of type float16 sends it there). ``floor`` is one tiny CuPy kernel plus synchronise, and ``cupyx``
cupyx's ``A @ x`` plus synchronise, on the same matrix.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's package

import numpy as np

import sparsegpu
from sparsegpu import datasets
from sparsegpu.formats._fast_product import FAST

FORMATS = ("csr", "ell", "sell", "hyb", "jds", "csc", "coo")
STEPS = ("lookup", "checks", "alloc", "stream", "args", "launch", "sync")


def median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1e3


def whole_call(call: Callable[[], Any], sync: Callable[[], None], repeat: int) -> float:
    """Median host time of ``call()`` plus synchronise, in microseconds."""
    for _ in range(20):
        call()
    sync()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        call()
        sync()
        samples.append(time.perf_counter_ns() - start)
    return median_us(samples)


def fast_steps(A: Any, x: Any, y: Any, repeat: int) -> dict[str, float]:
    """Each step of a fast ``A @ x`` (a new y each call; ``y`` only fixes its signature)."""
    import cupy

    sync = cupy.cuda.Device().synchronize
    samples: dict[str, list[int]] = {step: [] for step in STEPS}
    clock = time.perf_counter_ns
    for _ in range(repeat):
        t0 = clock()
        fast = A._cache.get((FAST, A._fast_key()))
        t1 = clock()
        accepted = (type(x), x.dtype, x.shape, x.strides) == fast.x_signature and int in fast.scalars
        t2 = clock()
        out = cupy.empty(fast.n_rows, fast.dtype)
        t3 = clock()
        x_pointer, y_pointer = x.data.ptr, out.data.ptr
        accepted = accepted and not (x_pointer < y_pointer + out.nbytes and y_pointer < x_pointer + x.nbytes)
        t4 = clock()
        stream = cupy.cuda.get_current_stream().ptr
        t5 = clock()
        fast.packed.set_call(x_pointer, y_pointer, 1, 0)
        t6 = clock()
        if fast.scale_first:
            cupy.cuda.runtime.memsetAsync(y_pointer, 0, out.nbytes, stream)
        if fast.packed.scratch and stream != fast.stream:
            fast._bind_scratch(stream)
        fast.packed.launch(stream)
        t7 = clock()
        sync()
        t8 = clock()
        assert accepted
        for step, took in zip(STEPS, (t1 - t0, t2 - t1 + t4 - t3, t3 - t2, t5 - t4, t6 - t5, t7 - t6, t8 - t7)):
            samples[step].append(took)
    return {step: median_us(values) for step, values in samples.items()}


def profile(name: str, S: Any, dtype: Any, repeat: int) -> dict[str, Any]:
    import cupy

    sync = cupy.cuda.Device().synchronize
    A = sparsegpu.from_scipy(S, format=name, dtype=dtype, backend="gpu", **({"max_fill": None} if name == "ell" else {}))
    m, n = A.shape
    x = cupy.asarray(np.random.default_rng(0).uniform(-1, 1, n).astype(dtype))
    y = cupy.empty(m, dtype)
    A.spmv(x, y)
    A @ x  # both signatures accepted, launches packed
    expected = (A @ x).get()
    if (A._cache.get((FAST, A._fast_key()))) is None:
        return {"format": name, "error": "no fast product"}
    steps = fast_steps(A, x, y, repeat)
    if not np.array_equal((A @ x).get().view(np.uint8), expected.view(np.uint8)):
        return {"format": name, "error": "results differ between calls"}
    general_y = y.copy()
    alpha = np.float16(1)  # a type the fast path leaves to the general path, as a user's would

    return {"format": name, **steps, "sum": sum(steps.values()),
            "A @ x": whole_call(lambda: A @ x, sync, repeat), "spmv(x, y)": whole_call(lambda: A.spmv(x, y), sync, repeat),
            "general": whole_call(lambda: A.spmv(x, general_y, alpha, 0), sync, repeat)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--per-row", type=int, default=8)
    parser.add_argument("--dtype", default="float64", choices=["float32", "float64", "complex64", "complex128"])
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--formats", default=",".join(FORMATS))
    args = parser.parse_args(argv)
    import cupy
    import cupyx.scipy.sparse as csp

    dtype = np.dtype(args.dtype)
    S = datasets.random_uniform(args.rows, args.per_row, seed=0).astype(dtype)
    sync = cupy.cuda.Device().synchronize
    tiny = cupy.empty(1, dtype)
    matrix = csp.csr_matrix(S)
    x = cupy.asarray(np.ones(S.shape[1], dtype))
    floor, cupyx = whole_call(lambda: tiny.fill(0), sync, args.repeat), whole_call(lambda: matrix @ x, sync, args.repeat)
    print(f"{args.rows} rows x {args.per_row} per row, {dtype}, median of {args.repeat} calls (microseconds); "
          f"floor {floor:.1f}, cupyx A @ x {cupyx:.1f}, target 13")
    columns = [*STEPS, "sum", "A @ x", "spmv(x, y)", "general"]
    print(f"{'format':8}" + "".join(f"{c:>11}" for c in columns))
    for name in args.formats.split(","):
        row = profile(name, S, dtype, args.repeat)
        if "error" in row:
            print(f"{name:8} {row['error']}")
            continue
        print(f"{name:8}" + "".join(f"{row[c]:11.2f}" for c in columns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
