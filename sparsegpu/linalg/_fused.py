"""The device side of CG and BiCGSTAB: scalar slots, status words, and the fused steps of
kernels/krylov.cu (their NumPy twin on the CPU backend).

A :class:`FusedWorkspace` owns everything a solve needs besides the vectors: ``sc`` (float64
scalar slots: atol, rho, alpha, beta, omega, last residual norm, rho tolerance), ``st`` (int64
words: status, completed iterations, iteration limit, history ring length), the block partial
sums and the ticket counter of the deterministic reductions, and the optional ring of residual
norms. Nothing here reads a value back to the host except :meth:`FusedWorkspace.read`, which
the solvers call once per batch of iterations.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from sparsegpu._backend import Backend, array_module
from sparsegpu._kernels import KernelFile, blocks_for, device_properties
from sparsegpu.reference import krylov as twin

BLOCK = 256  # kernels/krylov.cu sg_krylov::BLOCK
BLOCKS_PER_SM = 8  # 2048 resident threads per SM / BLOCK
OPS = range(10)  # kernels/krylov.cu enum Op
KRYLOV_KERNELS = KernelFile(
    "krylov.cu",
    [f"krylov_step<{{V}}, {op}>" for op in OPS],
    value_dtypes=(np.float32, np.float64),
    index_dtypes=(np.int32,),
)
NULL_POINTER = np.uint64(0)


class FusedWorkspace:
    """Scalars, status and reduction scratch for one fused solve on one backend."""

    def __init__(self, where: Backend, n: int, dtype: np.dtype, atol: float, maxiter: int,
                 history_ring: int = 0) -> None:
        xp = array_module(where)
        self.backend, self.n, self.dtype, self.xp = where, n, np.dtype(dtype), xp
        sc = np.zeros(twin.SLOTS, np.float64)
        sc[twin.ATOL] = atol
        # SciPy's BiCGSTAB tolerance for rho and omega: eps**2 of the working dtype.
        sc[twin.RHOTOL] = float(np.finfo(self.dtype).eps) ** 2
        st = np.zeros(twin.WORDS, np.int64)
        st[twin.MAXITER] = maxiter
        st[twin.HISTCAP] = max(history_ring, 1)
        self.sc, self.st = xp.asarray(sc), xp.asarray(st)
        self.history = xp.full(history_ring, np.nan) if history_ring else None
        if where == "gpu":
            sms = device_properties()["multiprocessors"]
            self.grid = min(blocks_for(n, BLOCK), sms * BLOCKS_PER_SM)
            self.partials = xp.empty(2 * self.grid, np.float64)
            self.counter = xp.zeros(1, np.uint32)
            self.dummy = xp.empty(1, self.dtype)
            self.n_arg = np.int64(n)
            self.kernels = [KRYLOV_KERNELS.function(f"krylov_step<{{V}}, {op}>", self.dtype) for op in OPS]

    def zeros(self) -> Any:
        return self.xp.zeros(self.n, self.dtype)

    def empty(self) -> Any:
        return self.xp.empty(self.n, self.dtype)

    def step(self, op: int, a: Any, b: Any = None, c: Any = None, d: Any = None, e: Any = None,
             f: Any = None, dinv: Any = None, flag: int = 0) -> None:
        """One fused step (kernels/krylov.cu ``krylov_step<V, op>``, or its twin)."""
        if self.backend == "cpu":
            twin.krylov_step(op, self.n, a, b, c, d, e, f, dinv, flag, self.sc, self.st, self.history)
            return
        dummy = self.dummy
        vectors = tuple(dummy if v is None else v for v in (a, b, c, d, e, f, dinv))
        history = NULL_POINTER if self.history is None else self.history
        self.kernels[op](
            (self.grid,), (BLOCK,),
            (self.n_arg, *vectors, np.int32(flag), self.sc, self.st, self.partials, self.counter, history),
        )

    def read(self) -> tuple[int, int]:
        """(status, completed iterations): the one host read per batch (a synchronisation on
        the GPU)."""
        st = self.st.get() if self.backend == "gpu" else self.st
        return int(st[twin.STATUS]), int(st[twin.COUNT])

    def drain_history(self, into: list[float], count: int) -> None:
        """Append the residual norms recorded since the last drain, up to iteration ``count``."""
        if self.history is None:
            return
        ring = self.history.get() if self.backend == "gpu" else self.history
        cap = ring.size
        # Every iteration 0..count has been recorded (the top-of-iteration test records it),
        # and the ring holds more entries than one batch adds.
        into.extend(float(ring[at % cap]) for at in range(len(into), count + 1))


#: Replay batches of fused iterations as CUDA graphs on the GPU (one launch per batch instead
#: of several per iteration; the host's launch cost dominates small systems).
USE_CUDA_GRAPHS = True


@contextlib.contextmanager
def solver_stream(where: Backend) -> Iterator[None]:
    """Run the block on a private non-blocking stream (graphs cannot be captured on the legacy
    default stream), ordered after the caller's stream and before its later work."""
    if where != "gpu":
        yield
        return
    import cupy

    outer = cupy.cuda.get_current_stream()
    inner = cupy.cuda.Stream(non_blocking=True)
    inner.wait_event(outer.record())
    try:
        with inner:
            yield
    finally:
        outer.wait_event(inner.record())


class BatchLauncher:
    """Runs batches of ``iteration()``. On the GPU, the first full batch runs eagerly (it
    compiles kernels and lets operators build their launch plans, which read the device); the
    second is captured into a CUDA graph that later full batches replay. If an operator cannot
    be captured, everything stays eager: same kernels, same arguments, same results."""

    def __init__(self, ws: FusedWorkspace, iteration: Callable[[], None], full_batch: int) -> None:
        self.iteration = iteration
        self.full_batch = full_batch
        self.use_graph = USE_CUDA_GRAPHS and ws.backend == "gpu" and full_batch > 1
        self.graph: Any = None
        self.eager_full_batches = 0

    def run(self, batch: int) -> None:
        if self.use_graph and batch == self.full_batch:
            if self.graph is None and self.eager_full_batches >= 1:
                self.graph = self._capture()
            if self.graph is not None:
                self.graph.launch()
                return
            self.eager_full_batches += 1
        for _ in range(batch):
            self.iteration()

    def _capture(self) -> Any:
        import cupy

        stream = cupy.cuda.get_current_stream()
        try:
            stream.begin_capture()
        except Exception:  # an old driver or CuPy: stay eager
            self.use_graph = False
            return None
        try:
            for _ in range(self.full_batch):
                self.iteration()
        except Exception:  # an operator did something a graph cannot hold: stay eager
            try:
                stream.end_capture()
            except Exception:
                pass
            self.use_graph = False
            return None
        try:
            return stream.end_capture()
        except Exception:
            self.use_graph = False
            return None
