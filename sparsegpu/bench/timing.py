"""Clocks that really time GPU work: CUDA events (or a synchronised host clock), warm-up
first, the median of repeats. On the CPU backend the same functions time with the host clock.

>>> t = measure(lambda i: sum(range(100)), "cpu", repeat=3)
>>> t.seconds > 0 and len(t.samples) == 3
True
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparsegpu._kernels import device_properties
from sparsegpu.bench.bytes_model import copy_bytes, effective_gbps

#: A sample covers at least this long (back-to-back calls), so event resolution and launch
#: jitter stay below 1% of it.
MIN_SAMPLE_S = 2e-3
MAX_CALLS_PER_SAMPLE = 200


@dataclass
class Timing:
    """Seconds per call: the median over ``samples``, each the mean of ``calls`` back-to-back
    calls."""

    seconds: float
    samples: list[float] = field(default_factory=list)
    calls: int = 1


def synchronize(backend: str) -> None:
    """Wait for all queued GPU work (nothing to wait for on the CPU backend)."""
    if backend == "gpu":
        import cupy

        cupy.cuda.Device().synchronize()


def synchronized_clock() -> float:
    """``time.perf_counter()`` after the device finished its queued work, when CuPy is in use:
    a timer for asv's ``timer`` attribute, so a timed loop of asynchronous launches is charged
    for the GPU time it caused."""
    import sys

    if "cupy" in sys.modules:
        sys.modules["cupy"].cuda.Device().synchronize()
    return time.perf_counter()


def measure(fn: Callable[[int], Any], backend: str, repeat: int = 20, warmup: int = 3) -> Timing:
    """Time ``fn(i)`` (``i`` counts calls, to rotate inputs): ``warmup`` untimed calls, then
    ``repeat`` samples of back-to-back calls (as many as make a sample last about
    :data:`MIN_SAMPLE_S`), each timed by CUDA events on the GPU or ``perf_counter`` on the
    CPU. Returns the median seconds per call."""
    calls = 0
    for _ in range(warmup):
        fn(calls)
        calls += 1
    synchronize(backend)
    once = _sample(fn, backend, calls, 1)
    calls += 1
    per_sample = max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(MIN_SAMPLE_S / max(once, 1e-9))))
    samples = []
    for _ in range(max(1, repeat)):
        samples.append(_sample(fn, backend, calls, per_sample))
        calls += per_sample
    return Timing(statistics.median(samples), samples, per_sample)


def median_call_seconds(call: Callable[[], Any], calls: int = 200, warmup: int = 5) -> float:
    """Median wall time of single calls of ``call()``, each timed alone by the host clock: for a
    call that ends with its own synchronisation (launch to result, as a user sees it), after
    ``warmup`` untimed calls.

    >>> median_call_seconds(lambda: None, calls=3) < 1e-3
    True
    """
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _sample(fn: Callable[[int], Any], backend: str, first: int, count: int) -> float:
    if backend != "gpu":
        start = time.perf_counter()
        for i in range(first, first + count):
            fn(i)
        return (time.perf_counter() - start) / count
    import cupy

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for i in range(first, first + count):
        fn(i)
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3 / count


def l2_bytes(backend: str) -> int:
    """The device's L2 cache size (0 on the CPU backend)."""
    if backend != "gpu":
        return 0

    return int(device_properties()["l2_bytes"])


def copy_ceiling(backend: str, nbytes: int = 1 << 30, repeat: int = 20) -> dict[str, Any] | None:
    """Device-to-device copy bandwidth (bytes read + written, per :func:`copy_bytes`) of a
    buffer of ``nbytes`` (default 1 GiB, far larger than L2): the ceiling SpMV figures are
    compared with. None on the CPU backend."""
    if backend != "gpu":
        return None
    import cupy

    def copy_seconds() -> float:
        src = cupy.ones(nbytes // 8, dtype=cupy.float64)
        dst = cupy.empty_like(src)
        return measure(lambda i: dst.data.copy_from_device_async(src.data, src.nbytes), backend, repeat).seconds

    seconds = copy_seconds()
    cupy.get_default_memory_pool().free_all_blocks()  # the 2 GiB go back to the device
    moved = copy_bytes(nbytes // 8 * 8)
    return {"bytes": moved, "seconds": seconds, "gbps": effective_gbps(moved, seconds)}


class GpuBusy:
    """Keeps the GPU busy for a while (in-place passes over a buffer larger than L2), so calls
    issued meanwhile queue up: their events then time the GPU work alone, and the host time
    spent issuing them is not hidden behind a synchronisation."""

    def __init__(self, nbytes: int = 256 << 20) -> None:
        import cupy

        self._buffer = cupy.ones(nbytes // 8, dtype=cupy.float64)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        self._pass()
        start.record()
        self._pass()
        end.record()
        end.synchronize()
        self.pass_seconds = max(cupy.cuda.get_elapsed_time(start, end) / 1e3, 1e-6)

    def _pass(self) -> None:
        import cupy

        cupy.multiply(self._buffer, 1.0, out=self._buffer)

    def hold(self, seconds: float) -> None:
        """Queue about ``seconds`` of GPU work."""
        for _ in range(max(1, math.ceil(seconds / self.pass_seconds))):
            self._pass()
