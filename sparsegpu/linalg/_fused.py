"""The device side of CG, BiCGSTAB, MINRES and GMRES: scalar slots, status words, and the fused
steps of kernels/krylov.cu (NumPy vector operations on the CPU backend: :mod:`._host`).

A :class:`FusedWorkspace` owns everything a solve needs besides the vectors: ``sc`` (float64
scalar slots: atol, rho, alpha, beta, omega, last residual norm, rho tolerance, MINRES's
recurrence, GMRES's ptol and presid; for GMRES followed by its Hessenberg matrix, Givens
rotations and rhs S), ``st`` (int64 words: status, completed iterations, iteration limit,
history ring length, MINRES's istop, GMRES's restart, column, cycle and breakdown words), the
block partial sums and the ticket counter of the deterministic reductions, and the optional
ring of residual norms. Nothing here reads a value back to the host except
:meth:`FusedWorkspace.read` and :meth:`StatusSnapshot.wait`, which the solvers call once per
batch of iterations, and :meth:`FusedWorkspace.slot` (GMRES's per-iteration callbacks).

:class:`BatchLauncher` replays a batch of identical iterations as a CUDA graph;
:class:`GraphCache` replays keyed launch sequences (GMRES's batches and cycle ends).

:func:`vector_dot` is the deterministic dot product (kernels/krylov.cu op DOT) that
``SparseMatrix.spmv_dot`` and :meth:`~sparsegpu.linalg._operator.Operator.apply_dot` fall back
to when an operator has no fused epilogue.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from sparsegpu._backend import Backend, array_module
from sparsegpu.primitives.dot import (BLOCK, BLOCKS_PER_SM, KRYLOV_KERNELS, NULL_POINTER, OPS, dot_scratch,  # noqa: F401
                                      krylov_grid, vector_dot)
from sparsegpu.linalg._host import host_step
from sparsegpu.reference import krylov as codes

class FusedWorkspace:
    """Scalars, status and reduction scratch for one fused solve on one backend."""

    def __init__(self, where: Backend, n: int, dtype: np.dtype, atol: float, maxiter: int,
                 history_ring: int = 0, gmres_restart: int = 0) -> None:
        xp = array_module(where)
        self.backend, self.n, self.dtype, self.xp = where, n, np.dtype(dtype), xp
        # GMRES's Hessenberg matrix, rotations and rhs follow the fixed slots.
        sc = np.zeros(codes.SLOTS + (codes.gmres_slots(gmres_restart) if gmres_restart else 0), np.float64)
        sc[codes.ATOL] = atol
        # SciPy's BiCGSTAB tolerance for rho and omega: eps**2 of the working dtype.
        sc[codes.RHOTOL] = float(np.finfo(self.dtype).eps) ** 2
        st = np.zeros(codes.WORDS, np.int64)
        st[codes.MAXITER] = maxiter
        st[codes.HISTCAP] = max(history_ring, 1)
        st[codes.GM_RESTART] = gmres_restart
        self.sc, self.st = xp.asarray(sc), xp.asarray(st)
        #: Where the operator's spmv_dot leaves p.Ap for CG_UPDATE (a view of sc).
        self.pq = self.sc[codes.PQ : codes.PQ + 1]
        self.history = xp.full(history_ring, np.nan) if history_ring else None
        if where == "gpu":
            self.grid = krylov_grid(n)
            self.partials = xp.empty(2 * self.grid, np.float64)
            self.counter = xp.zeros(1, np.uint32)
            self.dummy = xp.empty(1, self.dtype)
            self.n_arg = np.int64(n)
            self.kernels = [KRYLOV_KERNELS.function(f"krylov_step<{{V}}, {op}>", self.dtype) for op in OPS]
        else:
            self.scratch = xp.empty(n, self.dtype)  # the CPU steps' temporary vector

    def zeros(self) -> Any:
        return self.xp.zeros(self.n, self.dtype)

    def empty(self) -> Any:
        return self.xp.empty(self.n, self.dtype)

    def step(self, op: int, *vectors: Any, dinv: Any = None, flag: int = 0, **roles: Any) -> None:
        """One fused step (kernels/krylov.cu ``krylov_step<V, op>`` on the GPU, NumPy on the
        CPU), its vectors named by role (``ws.step(CG_P, p=p, z=z, x=x)``, roles as in
        :data:`sparsegpu.reference.krylov.ROLES`) or given in the kernel's order. GM_SOLVE runs
        on one block (it has no vectors)."""
        if roles:
            vectors = codes.vector_arguments(op, **roles)
        vectors = vectors + (None,) * (codes.VECTOR_ARGUMENTS - len(vectors))
        if self.backend == "cpu":
            host_step(op, self.n, vectors, dinv, flag, self.sc, self.st, self.history, self.scratch)
            return
        dummy = self.dummy
        arguments = tuple(dummy if v is None else v for v in (*vectors, dinv))
        history = NULL_POINTER if self.history is None else self.history
        self.kernels[op](
            (1 if op == codes.GM_SOLVE else self.grid,), (BLOCK,),
            (self.n_arg, *arguments, np.int32(flag), self.sc, self.st, self.partials, self.counter, history),
        )

    def set_slots(self, values: dict[int, float]) -> None:
        """Write scalar slots (setup, before the first step: one host-to-device copy)."""
        sc = np.asarray(self.sc.get() if self.backend == "gpu" else self.sc, np.float64).copy()
        for slot, value in values.items():
            sc[slot] = value
        self.sc[...] = self.xp.asarray(sc)

    def snapshots(self) -> tuple[StatusSnapshot, StatusSnapshot]:
        """Two asynchronous readers of the status words (GPU only), for pipelined batches."""
        return StatusSnapshot(self.st), StatusSnapshot(self.st)

    def set_words(self, values: dict[int, int]) -> None:
        """Write status words (setup, before the first step)."""
        st = np.asarray(self.st.get() if self.backend == "gpu" else self.st, np.int64).copy()
        for word, value in values.items():
            st[word] = value
        self.st[...] = self.xp.asarray(st)

    def slot(self, index: int) -> float:
        """One scalar slot, read back (a synchronisation on the GPU)."""
        return float(self.sc[index : index + 1].get()[0] if self.backend == "gpu" else self.sc[index])

    def read(self) -> tuple[int, int]:
        """(status, completed iterations): the one host read per batch (a synchronisation on
        the GPU)."""
        st = self.st.get() if self.backend == "gpu" else self.st
        return int(st[codes.STATUS]), int(st[codes.COUNT])

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


class StatusSnapshot:
    """An asynchronous copy of the status words into pinned host memory, ordered on the
    current stream: :meth:`take` after launching a batch, :meth:`wait` later (while the next
    batch runs) for (status, completed iterations) as they were when the batch ended."""

    def __init__(self, st: Any) -> None:
        import cupy
        import cupyx

        self.st = st
        self.host = cupyx.empty_pinned(st.shape, st.dtype)
        self.event = cupy.cuda.Event(disable_timing=True)

    def take(self) -> StatusSnapshot:
        import cupy

        stream = cupy.cuda.get_current_stream()
        cupy.cuda.runtime.memcpyAsync(self.host.ctypes.data, self.st.data.ptr, self.st.nbytes,
                                      cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        self.event.record(stream)
        return self

    def wait(self) -> tuple[int, int]:
        self.event.synchronize()
        return int(self.host[codes.STATUS]), int(self.host[codes.COUNT])


#: Iterations per captured CUDA graph. A batch of ``check_every`` iterations replays the graph
#: ceil(check_every / GRAPH_ITERATIONS) times. Capturing costs the host about as much as running
#: the iterations eagerly, once per solve, so a short graph keeps that fixed cost small; its
#: replays still cost the host far less than the GPU spends on them.
GRAPH_ITERATIONS = 4


def history_ring_length(check_every: int) -> int:
    """Residual norms one batch can record: the batch rounded up to whole graphs, the first
    batch's warm-up iteration, and the test before the first iteration."""
    return check_every + GRAPH_ITERATIONS + 2


class BatchLauncher:
    """Launches batches of ``iteration()``.

    The first iteration of a solve always runs eagerly: it compiles kernels and lets operators
    build their launch plans and scratch (which reads the device and allocates, neither allowed
    in a capture). On the GPU, when a batch still needs at least GRAPH_ITERATIONS iterations,
    that many are captured once into a CUDA graph, and batches then replay it: a batch is rounded
    up to whole graphs. That is safe because iterations past convergence, breakdown or maxiter
    are frozen on the device (they change nothing). If an operator cannot be captured,
    everything stays eager: same kernels, same arguments, same results."""

    def __init__(self, ws: FusedWorkspace, iteration: Callable[[], None], batch: int) -> None:
        self.iteration = iteration
        self.graph_iterations = min(GRAPH_ITERATIONS, batch)
        self.use_graph = USE_CUDA_GRAPHS and ws.backend == "gpu" and batch > 1
        self.graph: Any = None
        self.warmed_up = False

    def run(self, count: int) -> int:
        """Launch at least ``count`` iterations (exactly ``count`` when eager); returns how many."""
        launched = 0
        if not self.warmed_up:
            self.iteration()
            self.warmed_up = True
            launched = 1
        if self.use_graph and self.graph is None and count - launched >= self.graph_iterations:
            self.graph = self._capture()
        if self.graph is not None:
            while launched < count:
                self.graph.launch()
                launched += self.graph_iterations
            return launched
        for _ in range(count - launched):
            self.iteration()
        return max(launched, count)

    def _capture(self) -> Any:
        def iterations() -> None:
            for _ in range(self.graph_iterations):
                self.iteration()

        graph = capture_graph(iterations)
        if graph is None:
            self.use_graph = False
        return graph


def capture_graph(launches: Callable[[], None]) -> Any:
    """``launches()`` captured on the current stream as a CUDA graph, or None when it cannot be
    (an old driver or CuPy, or an operator that reads the device or allocates: nothing ran
    then, the caller launches eagerly)."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    try:
        stream.begin_capture()
    except Exception:  # an old driver or CuPy: stay eager
        return None
    try:
        launches()
    except Exception:  # an operator did something a graph cannot hold: stay eager
        try:
            stream.end_capture()
        except Exception:
            pass
        return None
    try:
        return stream.end_capture()
    except Exception:
        return None


class GraphCache:
    """Runs fixed launch sequences by key (GMRES: a batch of inner iterations from a given
    column, the end of a cycle), as CUDA graphs on the GPU: the first run of a key is eager
    (kernels compile, operators build their plans and scratch), the second captures a graph
    and launches it, later runs replay it. The graph holds the same kernels with the same
    arguments, so results are bitwise those of eager launches. Eager on the CPU, with
    USE_CUDA_GRAPHS off, and for good once a capture fails."""

    def __init__(self, ws: FusedWorkspace) -> None:
        self.enabled = USE_CUDA_GRAPHS and ws.backend == "gpu"
        self.graphs: dict[Any, Any] = {}
        self.seen: set[Any] = set()

    def run(self, key: Any, launches: Callable[[], None]) -> None:
        graph = self.graphs.get(key)
        if graph is not None:
            graph.launch()
            return
        if not self.enabled or key not in self.seen:
            self.seen.add(key)
            launches()
            return
        graph = capture_graph(launches)
        if graph is None:
            self.enabled = False
            launches()
            return
        self.graphs[key] = graph
        graph.launch()
