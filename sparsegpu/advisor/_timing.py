"""The advisor's own clock for ``advise(autotune=True)``: CUDA events around back-to-back calls,
warm-up first, the median of repeats. (The benchmark package keeps its own clocks; the advisor
does not depend on it.)"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

#: A sample covers at least this long (back-to-back calls), so event resolution and launch
#: jitter stay below 1% of it.
MIN_SAMPLE_S = 2e-3
MAX_CALLS_PER_SAMPLE = 200


def seconds_per_call(call: Callable[[], Any], repeat: int = 20, warmup: int = 3) -> float:
    """Median GPU seconds per ``call()``: ``warmup`` untimed calls, one timed alone to size the
    samples, then ``repeat`` samples of as many back-to-back calls as make a sample last about
    :data:`MIN_SAMPLE_S`, each timed by CUDA events on the current stream."""
    import cupy

    for _ in range(warmup):
        call()
    cupy.cuda.Device().synchronize()
    once = _sample(call, 1)
    per_sample = max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(MIN_SAMPLE_S / max(once, 1e-9))))
    return statistics.median([_sample(call, per_sample) for _ in range(max(1, repeat))])


def _sample(call: Callable[[], Any], count: int) -> float:
    """Seconds per call of ``count`` back-to-back calls, by CUDA events."""
    import cupy

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(count):
        call()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3 / count
