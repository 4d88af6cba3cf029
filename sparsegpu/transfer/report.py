"""Where the time of a transfer went (:class:`TransferReport`), how it is collected (host
clocks and CUDA event pairs), and the optional progress bar over chunks."""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


def _stages() -> dict[str, float]:
    return {"pack": 0.0, "h2d": 0.0, "device": 0.0, "d2h": 0.0}


@dataclass
class TransferReport:
    """Where the time of one transfer went.

    Returned by :func:`upload` and :func:`upload_csr` with ``report=True`` and kept by
    :class:`OutOfCoreCSR` in ``last_report``.

    Parameters
    ----------
    wall : float
        Seconds from the call to the data being ready.
    nbytes : int
        Bytes copied host -> device; on the CPU backend the bytes of the arrays built in host
        memory (nothing is transferred).
    chunks : int
        Chunks (or row blocks) the data went in.
    stages : dict of str to float
        Seconds per stage: ``pack`` (host seconds packing or registering), ``h2d`` (GPU seconds
        copying host -> device), ``device`` (GPU seconds of conversion, validation and kernels)
        and ``d2h`` (out-of-core pieces of y coming back).
    backend : {"gpu", "cpu"}
        ``"cpu"`` when the call ran on the CPU backend and transferred nothing.

    Examples
    --------
    >>> r = TransferReport(wall=0.5, nbytes=2 * 10**9, chunks=8)
    >>> r.gbps, r.transferred
    (4.0, True)
    >>> TransferReport(wall=0.001, nbytes=10**6, backend="cpu")
    TransferReport(CPU backend: nothing was transferred; 0.001 GB stayed in host memory, 1.0 ms)
    """

    wall: float = 0.0
    nbytes: int = 0
    chunks: int = 0
    stages: dict[str, float] = field(default_factory=_stages)
    backend: str = "gpu"

    @property
    def transferred(self) -> bool:
        """Whether bytes went to a GPU (False on the CPU backend)."""
        return self.backend == "gpu"

    @property
    def overlap(self) -> float:
        """Sum of the stages over ``wall``: above 1 means stages ran side by side (NaN when
        nothing was timed)."""
        return sum(self.stages.values()) / self.wall if self.wall > 0 else float("nan")

    @property
    def gbps(self) -> float:
        """Bytes moved host -> device per second of wall time (10^9 B/s); NaN when nothing was
        transferred."""
        if not self.transferred or self.wall <= 0:
            return float("nan")
        return self.nbytes / self.wall / 1e9

    def __repr__(self) -> str:
        if not self.transferred:
            return (f"TransferReport(CPU backend: nothing was transferred; {self.nbytes / 1e9:.3f} GB stayed in "
                    f"host memory, {self.wall * 1e3:.1f} ms)")
        stages = ", ".join(f"{name} {seconds * 1e3:.1f} ms" for name, seconds in self.stages.items())
        return (f"TransferReport({self.nbytes / 1e9:.3f} GB in {self.chunks} chunks, wall {self.wall * 1e3:.1f} ms, "
                f"{self.gbps:.1f} GB/s; {stages}; overlap {self.overlap:.2f})")


class Timeline:
    """Collects stage times: host stages by the clock, GPU stages by event pairs read once at
    the end (only when asked for: events cost a little)."""

    def __init__(self, enabled: bool, backend: str = "gpu") -> None:
        self.enabled = enabled
        self.report = TransferReport(backend=backend)
        self._pairs: list[tuple[str, Any, Any]] = []
        self._start = time.perf_counter()

    @contextmanager
    def host(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.report.stages[stage] += time.perf_counter() - start

    @contextmanager
    def device(self, stage: str, stream: Any) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        import cupy

        start = cupy.cuda.Event()
        start.record(stream)
        yield
        end = cupy.cuda.Event()
        end.record(stream)
        self._pairs.append((stage, start, end))

    def finish(self) -> TransferReport:
        """Call after the work is complete (streams synchronised)."""
        if self._pairs:
            cupy = sys.modules["cupy"]
            for stage, start, end in self._pairs:
                self.report.stages[stage] += cupy.cuda.get_elapsed_time(start, end) / 1e3
        self.report.wall = time.perf_counter() - self._start
        return self.report


class Progress:
    """A progress bar over chunks (tqdm, else rich), or nothing."""

    def __init__(self, enabled: bool, total: int, description: str) -> None:
        self._bar: Any = None
        self._rich: Any = None
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=description, unit="chunk")
            return
        except ImportError:
            pass
        try:
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress()
            self._rich.start()
            self._bar = self._rich.add_task(description, total=total)
        except ImportError:
            warnings.warn("progress=True needs tqdm or rich; neither is installed", RuntimeWarning, stacklevel=3)

    def advance(self) -> None:
        if self._rich is not None:
            self._rich.advance(self._bar)
        elif self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif self._bar is not None:
            self._bar.close()
