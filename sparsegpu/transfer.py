"""Host -> device transfers through pinned memory, and SpMV on matrices kept in host memory.

- :class:`PinnedPool`: reusable page-locked staging buffers (``cudaHostAlloc``), released by
  ``close()``, by ``with``, or at exit; a failed pinned allocation falls back to pageable
  buffers with a warning.
- :func:`pinned_empty`, :func:`pin` / :func:`unpin`: host arrays the GPU reads directly.
- :func:`upload` / :func:`upload_csr`: arrays (or a scipy matrix) split into chunks, each
  packed into a pinned buffer by several host threads and copied with ``cudaMemcpyAsync`` on
  one of several streams, while device work (dtype conversion, validation) runs on chunks
  already arrived. Arrays already pinned are copied without packing.
- :class:`OutOfCoreCSR`: ``A @ x`` for a CSR matrix held in host memory (possibly memory
  mapped), streamed through the GPU row block by row block under a device memory budget.

On the CPU backend the same calls run without copies: :func:`upload_csr` builds a CPU
:class:`~sparsegpu.CSR`, :class:`OutOfCoreCSR` runs the reference twin block by block.

>>> import numpy as np, scipy.sparse as sp
>>> S = sp.random(1000, 300, density=0.02, random_state=0, format="csr")
>>> A = upload_csr(S, chunk_bytes=4096)
>>> bool(np.allclose(A @ np.ones(300), S @ np.ones(300)))
True
>>> big = OutOfCoreCSR(S, device_budget_bytes=8192)
>>> bool(np.array_equal(big @ np.ones(300), A @ np.ones(300)))
True
"""

from __future__ import annotations

import atexit
import mmap
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate, convert, reference
from sparsegpu._backend import Backend, is_device_array, resolve_backend
from sparsegpu.formats._base import as_scipy_sparse, canonical_scipy
from sparsegpu.formats.csr import CSR

PackStrategy = Literal["threads", "register", "auto"]

#: Default staging pool: 3 buffers of 256 MiB (one being packed while the others are in flight).
#: On the H200 host, with streaming-store packing, a 2.48 GB pageable CSR uploaded in 72.0 ms
#: with 3 x 256 MiB, 72.6 ms with 4 x 256, 76.9-77.9 ms with 4, 6 or 8 x 128 and 95.9 ms with
#: 8 x 64 (same run); fewer, larger copies leave the DMA fewer gaps.
DEFAULT_BUFFERS = 3
DEFAULT_BUFFER_BYTES = 256 << 20
#: Host page size: ``pack="register"`` places chunk boundaries on page boundaries so that no
#: two chunks register the same page.
PAGE_BYTES = mmap.PAGESIZE
#: Pieces smaller than this are packed by the calling thread (a thread hand-off costs more).
MIN_THREAD_PIECE = 1 << 20
#: Out-of-core slots place each block array on this boundary (CUDA allocations' alignment),
#: so a slot may need up to 3 * SLOT_ALIGN bytes beyond :func:`block_bytes`.
SLOT_ALIGN = 256


try:
    from sparsegpu._streamcopy import copy as _streaming_copy
except ImportError:  # built without a C compiler (setup.py marks the extension optional)
    _streaming_copy = None

#: Whether packing uses non-temporal stores (sparsegpu/_streamcopy.c, built at install).
STREAMING_PACK = _streaming_copy is not None


def pack_copy(destination: np.ndarray, source: np.ndarray) -> None:
    """Copy the bytes of ``source`` into ``destination`` (both C-contiguous, the same size):
    with non-temporal stores when the compiled helper is there (sparsegpu/_streamcopy.c: a
    staging buffer is written once and read by the DMA, so reading its old lines first is
    wasted host memory traffic), else ``numpy.copyto``. Releases the GIL either way.

    >>> a, b = np.arange(10.0), np.zeros(10)
    >>> pack_copy(b, a); b.tolist() == a.tolist()
    True
    """
    if _streaming_copy is None:
        np.copyto(destination, source)
    else:
        _streaming_copy(destination, source)


def default_pack_threads() -> int:
    """Host threads packing chunks: one per core, at most 16. On the 16-core H200 host, with
    128 MiB chunks, 16 threads uploaded a 2.48 GB pageable CSR in 88-93 ms against 98-103 ms
    with 8 (three runs each); packing is bound by host memory bandwidth shared with the DMA."""
    return max(1, min(16, os.cpu_count() or 1))


_pack_executors: dict[int, ThreadPoolExecutor] = {}
_pack_executors_lock = threading.Lock()


def _pack_executor(threads: int) -> ThreadPoolExecutor:
    """The process-wide pool of ``threads`` packing threads, started on first use: starting 16
    threads for every upload put about 1.5 ms on its critical path. concurrent.futures joins
    the threads at exit."""
    with _pack_executors_lock:
        if threads not in _pack_executors:
            _pack_executors[threads] = ThreadPoolExecutor(threads, thread_name_prefix=f"sparsegpu-pack{threads}")
        return _pack_executors[threads]


def _check_positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a positive integer, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return int(value)


def _check_pack(pack: str) -> str:
    if pack not in ("threads", "register", "auto"):
        raise ValueError(f"pack must be 'threads', 'register' or 'auto', not {pack!r}")
    # auto = threads. Measured in this pipeline on the H200 host (2.48 GB, pageable): packing
    # with 8 threads ~26 GB/s end to end, registering ~20 GB/s (the driver serialises
    # cudaHostRegister: ~28 GB/s at most, whatever the number of threads), and registering a
    # share of the chunks while packing the others gave no more than packing alone.
    return "threads" if pack == "auto" else pack


# =========================================================================== pinned memory


def _pinning_available(backend: Backend) -> bool:
    return backend == "gpu"


def _alloc_pinned(nbytes: int) -> int:
    """A page-locked host allocation (``cudaHostAlloc``); its address."""
    import cupy

    return int(cupy.cuda.runtime.hostAlloc(nbytes, 0))


def _free_pinned(address: int) -> None:
    import cupy

    cupy.cuda.runtime.freeHost(address)


def _host_view(address: int, nbytes: int) -> np.ndarray:
    """A uint8 NumPy view of ``nbytes`` at ``address`` (memory owned elsewhere)."""
    import ctypes

    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))


def is_pinned(array: np.ndarray) -> bool:
    """True when ``array``'s memory is page-locked and known to CUDA (``cudaHostAlloc``,
    :func:`pinned_empty`, :func:`pin`), so the GPU copies it at the pinned rate without
    staging. Always False on the CPU backend and for empty arrays."""
    if not isinstance(array, np.ndarray) or array.size == 0 or resolve_backend(None) != "gpu":
        return False
    import cupy

    try:
        attributes = cupy.cuda.runtime.pointerGetAttributes(array.ctypes.data)
    except Exception:  # older drivers raise for unregistered host memory
        return False
    return int(attributes.type) == 1  # cudaMemoryTypeHost


def pinned_empty(shape: Any, dtype: Any = np.float64) -> np.ndarray:
    """An uninitialised NumPy array in page-locked host memory (CuPy's pinned allocator; the
    memory goes back to CuPy's pinned pool when the array is collected). Arrays built here
    upload at the pinned rate without staging. On the CPU backend: ``np.empty``.

    >>> a = pinned_empty((2, 3), np.float32)
    >>> a.shape, a.dtype
    ((2, 3), dtype('float32'))
    """
    dt = np.dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    count = int(np.prod(shape, dtype=np.int64))
    if resolve_backend(None) != "gpu" or count == 0:
        return np.empty(shape, dt)
    import cupy

    memory = cupy.cuda.alloc_pinned_memory(count * dt.itemsize)
    return np.frombuffer(memory, dt, count).reshape(shape)


#: Arrays registered by :func:`pin`: id -> (address, finalizer).
_REGISTERED: dict[int, tuple[int, weakref.finalize]] = {}
_REGISTERED_LOCK = threading.Lock()


def _unregister(address: int) -> None:
    try:
        import cupy

        cupy.cuda.runtime.hostUnregister(address)
    except Exception:  # the context may be gone at exit; the OS reclaims the pages then
        pass


def pin(array: np.ndarray) -> np.ndarray:
    """Page-lock ``array``'s own memory in place with ``cudaHostRegister`` (no copy) and return
    it, so uploads of it run at the pinned rate without staging. The pages stay locked until
    :func:`unpin`, until the array is collected, or until exit. An array already pinned is
    returned as it is. When registration fails (memory the driver cannot lock, or a page
    shared with another registration), the array is copied into :func:`pinned_empty` memory
    with a warning and the copy is returned. On the CPU backend the array is returned as is.

    >>> a = pin(np.arange(5.0))
    >>> unpin(a).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0]
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"pin takes a NumPy array, got {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise ValueError("pin needs a C-contiguous array; pass np.ascontiguousarray(a)")
    if resolve_backend(None) != "gpu" or array.size == 0 or is_pinned(array):
        return array
    import cupy

    # The array's bytes exactly, not the whole pages around them: the driver locks the pages
    # anyway, but a registration rounded out to pages covers the start of whatever memory shares
    # the array's last page (or the end of what shares its first), and any later copy to or from
    # that neighbour then fails with cudaErrorInvalidValue (H200 check: a D2H copy into memory
    # just past a page-rounded registration fails, past an exact one it works).
    address = array.ctypes.data
    try:
        cupy.cuda.runtime.hostRegister(address, array.nbytes, 0)
    except Exception as exc:
        warnings.warn(f"cudaHostRegister of {array.nbytes} bytes failed ({exc}); copying into pinned memory instead",
                      RuntimeWarning, stacklevel=2)
        copy = pinned_empty(array.shape, array.dtype)
        np.copyto(copy, array)
        return copy
    with _REGISTERED_LOCK:
        _REGISTERED[id(array)] = (address, weakref.finalize(array, _forget_registration, id(array), address))
    return array


def _forget_registration(key: int, address: int) -> None:
    with _REGISTERED_LOCK:
        _REGISTERED.pop(key, None)
    _unregister(address)


def unpin(array: np.ndarray) -> np.ndarray:
    """Undo :func:`pin` (``cudaHostUnregister``) and return the array; a no-op for arrays
    :func:`pin` did not register."""
    with _REGISTERED_LOCK:
        entry = _REGISTERED.get(id(array))
    if entry is not None:
        entry[1]()  # runs _forget_registration once
    return array


@atexit.register
def _unregister_all() -> None:
    with _REGISTERED_LOCK:
        finalizers = [finalizer for _, finalizer in _REGISTERED.values()]
    for finalizer in finalizers:
        finalizer()


class PinnedPool:
    """A pool of page-locked host staging buffers, allocated once and reused by every upload
    that is given the pool.

    ``buffers`` buffers of ``buffer_bytes`` each (default 3 x 256 MiB). The memory is freed by
    :meth:`close`, at the end of a ``with`` block, or at exit. If pinned allocation fails
    (locked-memory limits, no GPU driver), the pool warns with the cause and uses pageable
    buffers: transfers stay correct, only slower. On the CPU backend buffers are plain NumPy.

    >>> with PinnedPool(buffers=2, buffer_bytes=1 << 16) as pool:
    ...     with pool.borrow(2) as bufs:
    ...         len(bufs), pool.available
    (2, 0)
    >>> pool.closed
    True
    """

    def __init__(self, buffers: int = DEFAULT_BUFFERS, buffer_bytes: int = DEFAULT_BUFFER_BYTES, *,
                 backend: str | None = None) -> None:
        self.buffers = _check_positive("buffers", buffers)
        self.buffer_bytes = _check_positive("buffer_bytes", buffer_bytes)
        self.backend = resolve_backend(backend)
        addresses: list[int] = []
        views: list[np.ndarray] = []
        self.pinned = _pinning_available(self.backend)
        if self.pinned:
            try:
                for _ in range(self.buffers):
                    addresses.append(_alloc_pinned(self.buffer_bytes))
            except Exception as exc:
                for address in addresses:
                    _free_pinned(address)
                addresses = []
                self.pinned = False
                warnings.warn(
                    f"could not allocate {self.buffers} pinned buffers of {self.buffer_bytes} bytes ({exc}); "
                    "falling back to pageable buffers: transfers stay correct but run at the pageable rate",
                    RuntimeWarning, stacklevel=2)
        if self.pinned:
            views = [_host_view(address, self.buffer_bytes) for address in addresses]
        else:
            views = [np.empty(self.buffer_bytes, np.uint8) for _ in range(self.buffers)]
        self._free: list[np.ndarray] = list(views)
        self._condition = threading.Condition()
        self._closed = False
        self._finalizer = weakref.finalize(self, _release_pinned, addresses)

    @property
    def available(self) -> int:
        """Buffers not lent out now."""
        return len(self._free)

    @property
    def closed(self) -> bool:
        return self._closed

    @contextmanager
    def borrow(self, count: int) -> Iterator[list[np.ndarray]]:
        """Up to ``count`` buffers (uint8 arrays of ``buffer_bytes``) for the ``with`` block,
        at least one (waits for another user to return one); all are returned on exit, also
        after an exception or KeyboardInterrupt. Whoever borrows must make sure no copy still
        reads a buffer when the block ends."""
        if self._closed:
            raise ValueError("this PinnedPool is closed")
        with self._condition:
            self._condition.wait_for(lambda: self._free or self._closed)
            if self._closed:
                raise ValueError("this PinnedPool is closed")
            taken = self._free[:count]
            del self._free[:count]
        try:
            yield taken
        finally:
            with self._condition:
                self._free.extend(taken)
                self._condition.notify_all()

    def close(self) -> None:
        """Free the pinned memory (buffers must all have been returned)."""
        with self._condition:
            if self._closed:
                return
            if len(self._free) != self.buffers:
                raise RuntimeError(f"{self.buffers - len(self._free)} buffers are still lent out")
            self._closed = True
            self._free = []
            self._condition.notify_all()
        self._finalizer()

    def __enter__(self) -> PinnedPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        kind = "pinned" if self.pinned else "pageable"
        state = "closed" if self._closed else f"{self.available} free"
        return f"<PinnedPool {self.buffers} x {self.buffer_bytes} B {kind}, {state}>"


def _release_pinned(addresses: list[int]) -> None:
    for address in addresses:
        try:
            _free_pinned(address)
        except Exception:  # at exit the CUDA context may already be gone
            pass
    addresses.clear()


_DEFAULT_POOL: PinnedPool | None = None
_DEFAULT_POOL_LOCK = threading.Lock()


def default_pool() -> PinnedPool:
    """The shared pool uploads use when given none (created on first use, freed at exit)."""
    global _DEFAULT_POOL
    with _DEFAULT_POOL_LOCK:
        if _DEFAULT_POOL is None or _DEFAULT_POOL.closed:
            _DEFAULT_POOL = PinnedPool()
        return _DEFAULT_POOL


# =========================================================================== planning


@dataclass(frozen=True)
class Chunk:
    """Elements ``start:stop`` of array number ``array`` of an upload."""

    array: int
    start: int
    stop: int


def plan_chunks(lengths: Sequence[int], itemsizes: Sequence[int], chunk_bytes: int, *,
                addresses: Sequence[int] | None = None, align: int = 1) -> list[Chunk]:
    """Split arrays of ``lengths`` elements (of ``itemsizes`` bytes) into chunks of at most
    ``chunk_bytes`` bytes, array after array; empty arrays give no chunk.

    With ``align > 1`` interior boundaries fall where ``address + offset`` is a multiple of
    ``align`` and chunks span a multiple of ``align`` bytes (at least one, even above
    ``chunk_bytes``): ``pack="register"`` aligns to the page size, so only the two ends of an
    array have partial pages (those go through the staging buffers).

    >>> [(c.array, c.start, c.stop) for c in plan_chunks([10, 0, 3], [8, 4, 4], 32)]
    [(0, 0, 4), (0, 4, 8), (0, 8, 10), (2, 0, 3)]
    """
    chunk_bytes = _check_positive("chunk_bytes", chunk_bytes)
    chunks: list[Chunk] = []
    for number, (length, itemsize) in enumerate(zip(lengths, itemsizes)):
        if length == 0:
            continue
        if itemsize > chunk_bytes:
            raise ValueError(f"chunk_bytes={chunk_bytes} is smaller than one element ({itemsize} bytes)")
        address = addresses[number] if addresses is not None else 0
        if align > 1 and address % itemsize == 0:
            step = max(align, chunk_bytes // align * align)
            first = address // align * align
            bounds = list(range(first + step, address + length * itemsize, step))
            cuts = [0] + [(b - address) // itemsize for b in bounds] + [length]
        else:
            per_chunk = chunk_bytes // itemsize
            cuts = list(range(0, length, per_chunk)) + [length]
        chunks += [Chunk(number, a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    return chunks


def block_bytes(rows: int, nnz: int, value_itemsize: int, index_itemsize: int) -> int:
    """Device bytes one row block of an :class:`OutOfCoreCSR` occupies: its values and column
    indices, its rebased row pointers and its piece of y.

    >>> block_bytes(rows=10, nnz=100, value_itemsize=8, index_itemsize=4)
    1324
    """
    return nnz * (value_itemsize + index_itemsize) + (rows + 1) * index_itemsize + rows * value_itemsize


def plan_row_blocks(indptr: np.ndarray, budget_bytes: int, value_itemsize: int, index_itemsize: int, *,
                    slots: int = 2, chunk_rows: int | None = None) -> list[tuple[int, int]]:
    """Row blocks ``[(r0, r1), ...]`` covering every row, each within ``budget_bytes // slots``
    as :func:`block_bytes` counts it (``slots`` blocks are on the device at once). Greedy:
    each block takes as many rows as fit, or ``chunk_rows`` rows when given. A row that does
    not fit alone raises ValueError naming it.

    >>> plan_row_blocks(np.array([0, 3, 3, 9, 10]), 2 * 100, 8, 4)
    [(0, 2), (2, 3), (3, 4)]
    """
    budget_bytes = _check_positive("device_budget_bytes", budget_bytes)
    slot_bytes = budget_bytes // slots
    m = indptr.size - 1
    if chunk_rows is not None:
        chunk_rows = _check_positive("chunk_rows", chunk_rows)
    per_entry, per_row = value_itemsize + index_itemsize, index_itemsize + value_itemsize
    # cost[r]: bytes of rows 0..r-1 (entries and per-row terms); a block [r0, r1) costs
    # cost[r1] - cost[r0] + one extra pointer. Monotone, so each block end is a search.
    cost = np.asarray(indptr, dtype=np.int64) * per_entry + np.arange(m + 1, dtype=np.int64) * per_row
    blocks: list[tuple[int, int]] = []
    r0 = 0
    while r0 < m:
        if chunk_rows is not None:
            r1 = min(m, r0 + chunk_rows)
        else:
            r1 = int(np.searchsorted(cost, cost[r0] + slot_bytes - index_itemsize, side="right")) - 1
            r1 = min(r1, m)
        too_big = cost[r0 + 1:r1 + 1] - cost[r0] + index_itemsize > slot_bytes
        if r1 <= r0 or too_big.any():
            row = r0 if r1 <= r0 else r0 + int(too_big.argmax())
            length = int(indptr[row + 1] - indptr[row])
            need = block_bytes(1, length, value_itemsize, index_itemsize)
            if chunk_rows is not None and need <= slot_bytes:
                raise ValueError(f"chunk_rows={chunk_rows}: rows {r0}..{r1 - 1} need more than the {slot_bytes} bytes "
                                 f"a block may use (device_budget_bytes={budget_bytes} over {slots} blocks); "
                                 "pass fewer rows or a larger budget")
            raise ValueError(f"row {row} has {length} entries ({need} bytes on the device), more than the "
                             f"{slot_bytes} bytes a block may use (device_budget_bytes={budget_bytes} over {slots} "
                             "blocks in flight)")
        blocks.append((r0, r1))
        r0 = r1
    return blocks


# =========================================================================== timeline


@dataclass
class TransferReport:
    """Where the time of one transfer went. ``stages`` maps ``pack`` (host seconds packing or
    registering), ``h2d`` (GPU seconds copying host -> device), ``device`` (GPU seconds of
    conversion, validation and kernels) and ``d2h`` (out-of-core y pieces) to seconds;
    ``overlap`` = sum of the stages / ``wall``: above 1 means stages ran side by side."""

    wall: float = 0.0
    nbytes: int = 0
    chunks: int = 0
    stages: dict[str, float] = field(default_factory=lambda: {"pack": 0.0, "h2d": 0.0, "device": 0.0, "d2h": 0.0})

    @property
    def overlap(self) -> float:
        return sum(self.stages.values()) / self.wall if self.wall > 0 else float("nan")

    @property
    def gbps(self) -> float:
        """Bytes moved host -> device per second of wall time (10^9 B/s)."""
        return self.nbytes / self.wall / 1e9 if self.wall > 0 else float("nan")

    def __repr__(self) -> str:
        stages = ", ".join(f"{name} {seconds * 1e3:.1f} ms" for name, seconds in self.stages.items())
        return (f"TransferReport({self.nbytes / 1e9:.3f} GB in {self.chunks} chunks, wall {self.wall * 1e3:.1f} ms, "
                f"{self.gbps:.1f} GB/s; {stages}; overlap {self.overlap:.2f})")


class _Timeline:
    """Collects stage times: host stages by the clock, GPU stages by event pairs read once at
    the end (only when asked for: events cost a little)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.report = TransferReport()
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
        import sys

        if self._pairs:
            cupy = sys.modules["cupy"]
            for stage, start, end in self._pairs:
                self.report.stages[stage] += cupy.cuda.get_elapsed_time(start, end) / 1e3
        self.report.wall = time.perf_counter() - self._start
        return self.report


class _Progress:
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
            from rich.progress import Progress

            self._rich = Progress()
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


# =========================================================================== staging engine


class _Stager:
    """Copies host slices into device memory on given streams.

    Pinned sources are copied directly. Pageable ones are packed into the borrowed pool
    buffers (several threads per chunk; NumPy copies release the GIL) or, with
    ``pack="register"``, have their own pages registered for the copy and unregistered after
    it. A buffer is reused only after the event of its last copy completed (waited for on the
    host, per buffer; never a device-wide synchronise). The packing threads are shared by all
    uploads (:func:`_pack_executor`); a stager waits for its own pieces before it lets its
    buffers go, also after an exception."""

    def __init__(self, buffers: list[np.ndarray], pack: str, pack_threads: int, timeline: _Timeline) -> None:
        import cupy

        self._cupy = cupy
        self._buffers = buffers
        self._buffer_events: list[Any] = [None] * len(buffers)
        self._next_buffer = 0
        self._pack = pack
        self._executor = _pack_executor(pack_threads) if pack_threads > 1 else None
        self._threads = pack_threads
        self._packing: list[Any] = []  # futures of the pieces being packed now
        self._timeline = timeline
        self._registered: list[tuple[int, Any]] = []  # (address, event of the copy reading it)
        self.buffer_bytes = int(buffers[0].nbytes) if buffers else 0

    def copy(self, destination: Any, source: np.ndarray, stream: Any, source_pinned: bool,
             meanwhile: Callable[[], None] | None = None) -> None:
        """``destination[:] = source`` (1-D contiguous, same dtype) ordered on ``stream``.
        ``meanwhile()``, when given, is called exactly once: while the threads pack the first
        piece (so host work such as kernel launches hides behind the packing), or after the
        copy is issued when nothing is packed."""
        pending = [meanwhile] if meanwhile is not None else []

        def run_meanwhile() -> None:
            if pending:
                pending.pop()()

        nbytes = source.nbytes
        if nbytes and source_pinned:
            self._memcpy(destination.data.ptr, source.ctypes.data, nbytes, stream)
        elif nbytes:
            raw = np.ascontiguousarray(source).reshape(-1).view(np.uint8)
            if not (self._pack == "register" and self._copy_registered(destination.data.ptr, raw, stream)):
                self._copy_packed(destination.data.ptr, raw, stream, run_meanwhile)
        run_meanwhile()

    def _copy_packed(self, device_address: int, raw: np.ndarray, stream: Any,
                     meanwhile: Callable[[], None] = lambda: None) -> None:
        """Bytes ``raw`` to ``device_address`` through the staging buffers, buffer by buffer."""
        for offset in range(0, raw.size, self.buffer_bytes):
            piece = raw[offset:offset + self.buffer_bytes]
            number = self._next_buffer
            self._next_buffer = (number + 1) % len(self._buffers)
            if self._buffer_events[number] is not None:
                self._buffer_events[number].synchronize()  # its previous copy has left it
            buffer = self._buffers[number][:piece.size]
            with self._timeline.host("pack"):
                self._pack_into(buffer, piece, meanwhile)
            self._memcpy(device_address + offset, buffer.ctypes.data, piece.size, stream)
            self._buffer_events[number] = self._record(stream)

    def _pack_into(self, buffer: np.ndarray, piece: np.ndarray, meanwhile: Callable[[], None]) -> None:
        if self._executor is None or piece.size < 2 * MIN_THREAD_PIECE:
            pack_copy(buffer, piece)
            meanwhile()
            return
        parts = min(self._threads, piece.size // MIN_THREAD_PIECE)
        cuts = np.linspace(0, piece.size, parts + 1).astype(np.int64)
        self._packing = [self._executor.submit(pack_copy, buffer[a:b], piece[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
        meanwhile()
        for future in self._packing:
            future.result()
        self._packing = []

    def _copy_registered(self, device_address: int, raw: np.ndarray, stream: Any) -> bool:
        """Register the whole pages inside ``raw`` and copy them from where they are; the
        partial pages at either end go through the staging buffers, so neighbouring slices
        never register the same page. False (nothing done) when there is no whole page or the
        driver refuses (memory it cannot lock)."""
        address = raw.ctypes.data
        first = -(-address // PAGE_BYTES) * PAGE_BYTES
        last = (address + raw.size) // PAGE_BYTES * PAGE_BYTES
        if last <= first:
            return False
        try:
            with self._timeline.host("pack"):
                self._cupy.cuda.runtime.hostRegister(first, last - first, 0)
        except Exception:
            return False
        head, tail = first - address, last - address
        self._memcpy(device_address + head, first, last - first, stream)
        self._registered.append((first, self._record(stream)))
        if head:
            self._copy_packed(device_address, raw[:head], stream)
        if tail < raw.size:
            self._copy_packed(device_address + tail, raw[tail:], stream)
        self._unregister_finished()
        return True

    def _unregister_finished(self, wait: bool = False) -> None:
        keep = []
        for address, event in self._registered:
            if wait:
                event.synchronize()
            if event.done:
                with self._timeline.host("pack"):
                    _unregister(address)
            else:
                keep.append((address, event))
        self._registered = keep

    def _memcpy(self, device_address: int, host_address: int, nbytes: int, stream: Any) -> None:
        runtime = self._cupy.cuda.runtime
        with self._timeline.device("h2d", stream):
            runtime.memcpyAsync(device_address, host_address, nbytes, runtime.memcpyHostToDevice, stream.ptr)
        self._timeline.report.nbytes += nbytes

    def _record(self, stream: Any) -> Any:
        event = self._cupy.cuda.Event(block=False, disable_timing=True)
        event.record(stream)
        return event

    def close(self) -> None:
        """Wait until no copy reads a buffer or a registered page and no thread still packs
        into a buffer, then unregister pages (also on the way out of an exception)."""
        try:
            for event in self._buffer_events:
                if event is not None:
                    event.synchronize()
            self._unregister_finished(wait=True)
        finally:
            # After an exception (a KeyboardInterrupt while waiting, say), pieces may still be
            # being packed into buffers about to go back to the pool.
            wait_for_futures(self._packing)
            self._packing = []


@contextmanager
def _staging(pool: PinnedPool | None, streams: int, pack: str, pack_threads: int | None,
             timeline: _Timeline) -> Iterator[tuple[_Stager, list[Any]]]:
    import cupy

    threads = default_pack_threads() if pack_threads is None else _check_positive("pack_threads", pack_threads)
    pool = default_pool() if pool is None else pool
    with pool.borrow(pool.buffers) as buffers:
        stager = _Stager(buffers, pack, threads, timeline)
        stream_list = [cupy.cuda.Stream(non_blocking=True) for _ in range(streams)]
        try:
            yield stager, stream_list
        finally:
            try:
                # Also on an exception: nothing may still write device memory the pool would
                # hand out again, or read a buffer about to go back to the pool.
                for stream in stream_list:
                    stream.synchronize()
            finally:
                stager.close()


def _stream_arrays(sources: Sequence[np.ndarray], targets: Sequence[Any], chunks: Sequence[Chunk],
                   stager: _Stager, streams: list[Any], timeline: _Timeline, progress: _Progress,
                   staging: dict[tuple[int, str, int], Any],
                   on_chunk: Callable[[Chunk, Any, Any], None] | None = None) -> None:
    """Chunk k of ``sources`` goes to ``targets`` on stream k % len(streams); when the dtypes
    differ it lands in a device staging array (kept in ``staging``, which the caller holds
    until the streams are joined, so the memory pool cannot hand it out while a stream still
    uses it) and is converted there. Device work
    for chunk k (``on_chunk(chunk, arrived, stream)`` on the arrived, unconverted view, then
    the conversion) is issued while chunk k+1 is packed, on chunk k's stream, so its launches
    hide behind the packing and chunk k+1's copy (on the next stream) never queues behind it;
    with a single stream, after chunk k+1's copy instead (breadth-first: the copy engine is
    never queued behind the compute of an earlier chunk)."""
    import cupy

    pinned = [is_pinned(s) for s in sources]
    # Staging slot k % max(2, streams): with one stream, chunk k+1's copy is issued before
    # chunk k's conversion, so consecutive chunks need different slots.
    slots = max(2, len(streams))
    largest = max((c.stop - c.start for c in chunks), default=0)

    def device_work(chunk: Chunk, arrived: Any, stream: Any, cast: bool) -> None:
        if on_chunk is None and not cast:
            return
        with stream, timeline.device("device", stream):
            if on_chunk is not None:
                on_chunk(chunk, arrived, stream)
            if cast:
                cupy.copyto(targets[chunk.array][chunk.start:chunk.stop], arrived, casting="unsafe")

    pending: tuple[Chunk, Any, Any, bool] | None = None
    for number, chunk in enumerate(chunks):
        stream = streams[number % len(streams)]
        source, target = sources[chunk.array], targets[chunk.array]
        cast = source.dtype != target.dtype
        if not cast:
            arrived = target[chunk.start:chunk.stop]
        else:
            key = (number % slots, source.dtype.str, largest)  # never replaced while a stream may read it
            if key not in staging:
                staging[key] = cupy.empty(largest, source.dtype)
            arrived = staging[key][:chunk.stop - chunk.start]
        earlier = pending
        if len(streams) > 1 and earlier is not None:
            stager.copy(arrived, source[chunk.start:chunk.stop], stream, pinned[chunk.array],
                        meanwhile=lambda: device_work(*earlier))
        else:
            stager.copy(arrived, source[chunk.start:chunk.stop], stream, pinned[chunk.array])
            if earlier is not None:
                device_work(*earlier)
        pending = (chunk, arrived, stream, cast)
        progress.advance()
    if pending is not None:
        device_work(*pending)


def _sources_of(arrays: Any) -> list[np.ndarray]:
    """Host arrays to upload (contiguous: copies are made of strided ones) from an array, a
    sequence of arrays or a scipy matrix."""
    if sp.issparse(arrays):
        S = as_scipy_sparse(arrays)
        if S.format in ("csr", "csc"):
            return [np.ascontiguousarray(a) for a in (S.data, S.indices, S.indptr)]
        if S.format == "coo":
            return [np.ascontiguousarray(a) for a in (S.data, S.row, S.col)]
        raise TypeError(f"upload takes a CSR, CSC or COO scipy matrix, got {S.format}; convert it first (S.tocsr())")
    items = [arrays] if isinstance(arrays, np.ndarray) else arrays
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError("upload takes a NumPy array, a sequence of them or a scipy matrix, "
                        f"got {type(arrays).__name__}")
    sources = []
    for number, item in enumerate(items):
        if not isinstance(item, np.ndarray):
            raise TypeError(f"item {number} is a {type(item).__name__}, not a NumPy array")
        if item.ndim != 1:
            raise ValueError(f"item {number} must be 1-D (reshape(-1) it), got shape {item.shape}")
        sources.append(np.ascontiguousarray(item))
    return sources


def upload(arrays: Any, *, dtypes: Sequence[Any] | None = None, chunk_bytes: int | None = None, streams: int = 2,
           pool: PinnedPool | None = None, pack: PackStrategy = "auto", pack_threads: int | None = None,
           progress: bool = False, report: bool = False, backend: str | None = None) -> Any:
    """Upload 1-D NumPy arrays (or a scipy CSR/CSC matrix's ``(data, indices, indptr)``, a COO
    matrix's ``(data, row, col)``) in chunks through pinned staging buffers, on ``streams``
    CUDA streams; returns a tuple of device arrays in the same order (NumPy arrays on the CPU
    backend), cast on the device to ``dtypes`` when given.

    ``chunk_bytes``: bytes per chunk (default: the pool's buffer size). ``pool``: a
    :class:`PinnedPool` (default: a shared 3 x 256 MiB pool). ``pack``: how pageable arrays
    reach pinned memory: ``"threads"`` (copy into pool buffers with ``pack_threads`` threads),
    ``"register"`` (``cudaHostRegister`` the chunk's own pages for the copy) or ``"auto"``
    (default, currently ``"threads"``: faster in the H200 anchors). Arrays already pinned are
    copied directly. ``progress``: a progress bar over chunks. ``report``: return
    ``(arrays, TransferReport)``. Returns once the copies are complete.

    >>> out = upload([np.arange(10.0), np.arange(3)], chunk_bytes=16)
    >>> [a.tolist() for a in out][1]
    [0, 1, 2]
    """
    sources = _sources_of(arrays)
    if dtypes is not None and len(dtypes) != len(sources):
        raise ValueError(f"dtypes has {len(dtypes)} entries for {len(sources)} arrays")
    target_dtypes = [np.dtype(d) for d in dtypes] if dtypes is not None else [s.dtype for s in sources]
    streams = _check_positive("streams", streams)
    pack = _check_pack(pack)
    pool_bytes = (pool.buffer_bytes if pool is not None else DEFAULT_BUFFER_BYTES)
    chunk_bytes = pool_bytes if chunk_bytes is None else _check_positive("chunk_bytes", chunk_bytes)
    chunks = _plan_for(sources, chunk_bytes, pack)
    timeline = _Timeline(report)
    target_backend = resolve_backend(backend)
    if target_backend == "cpu":
        with timeline.host("pack"):
            out = tuple(s.astype(d, copy=False) for s, d in zip(sources, target_dtypes))
        timeline.report.nbytes, timeline.report.chunks = sum(s.nbytes for s in sources), len(chunks)
        result = timeline.finish()
        return (out, result) if report else out
    import cupy

    targets = [cupy.empty(s.size, d) for s, d in zip(sources, target_dtypes)]
    bar = _Progress(progress, len(chunks), "upload")
    try:
        with _staging(pool, streams, pack, pack_threads, timeline) as (stager, stream_list):
            staging: dict[tuple[int, str, int], Any] = {}  # alive until the streams are joined
            _stream_arrays(sources, targets, chunks, stager, stream_list, timeline, bar, staging)
            _join(stream_list)
    finally:
        bar.close()
    timeline.report.chunks = len(chunks)
    result = timeline.finish()
    return (tuple(targets), result) if report else tuple(targets)


def _plan_for(sources: Sequence[np.ndarray], chunk_bytes: int, pack: str) -> list[Chunk]:
    """Chunks of ``sources``; page-aligned when their pages are to be registered."""
    lengths, itemsizes = [s.size for s in sources], [s.dtype.itemsize for s in sources]
    if pack == "register":
        addresses = [s.ctypes.data for s in sources]
        return plan_chunks(lengths, itemsizes, chunk_bytes, addresses=addresses, align=PAGE_BYTES)
    return plan_chunks(lengths, itemsizes, chunk_bytes)


def _join(streams: list[Any]) -> None:
    """Make the current stream wait for ``streams`` and wait on the host for all of them."""
    import cupy

    current = cupy.cuda.get_current_stream()
    for stream in streams:
        current.wait_event(stream.record())
        stream.synchronize()


# =========================================================================== CSR upload


class _CsrChecks:
    """Per-chunk validation of a CSR upload, run on the device as chunks arrive: index range
    (min, max), strictly increasing columns within rows (sorted, no duplicates), monotone row
    pointers. Results stay on the device until :meth:`verdict` reads them once."""

    def __init__(self, indptr_host: np.ndarray, n_cols: int) -> None:
        self.indptr_host = indptr_host
        self.n_cols = n_cols
        self.minima: list[Any] = []
        self.maxima: list[Any] = []
        self.unsorted: list[Any] = []
        self.pointer_drops: list[Any] = []
        self.indptr_device: Any = None
        self.indptr_ready: list[Any] = []
        self.waited: set[int] = set()

    def _search(self, positions: Any, side: Literal["left", "right"]) -> Any:
        """``np.searchsorted`` over the host row pointers with needles of their own dtype: a
        needle of another dtype (a Python int, int64 against int32 pointers) makes NumPy cast
        the whole pointer array on every call (40 ms at 20M rows)."""
        return np.searchsorted(self.indptr_host, np.asarray(positions, dtype=self.indptr_host.dtype), side=side)

    def __call__(self, chunk: Chunk, arrived: Any, stream: Any) -> None:
        import cupy

        if chunk.array == 2:  # indptr
            if arrived.size > 1:
                self.pointer_drops.append(cupy.count_nonzero(arrived[1:] < arrived[:-1]))
            return
        if chunk.array != 1:
            return
        if id(stream) not in self.waited:  # the row starts must have arrived
            for event in self.indptr_ready:
                stream.wait_event(event)
            self.waited.add(id(stream))
        self.minima.append(arrived.min())
        self.maxima.append(arrived.max())
        if arrived.size > 1:
            drops = arrived[1:] <= arrived[:-1]
            # Row starts strictly inside the chunk may go down: clear their pair.
            first = int(self._search(chunk.start, "right"))
            last = int(self._search(chunk.stop, "left"))
            if last > first:
                at = self.indptr_device[first:last].astype(np.int64) - (chunk.start + 1)
                # Clipped into a spare slot, so malformed pointers cannot write out of bounds.
                padded = cupy.zeros(drops.size + 1, bool)
                padded[:-1] = drops
                padded[cupy.clip(at, 0, drops.size)] = False
                drops = padded[:-1]
            self.unsorted.append(cupy.count_nonzero(drops))

    def verdict(self, indices: Any, indptr: Any, index_chunks: list[Chunk], pointer_chunks: list[Chunk]) -> bool:
        """Raise ValueError for bad indices or pointers; True when canonical."""
        import cupy

        counts = list(self.unsorted)
        # Pairs across chunk boundaries (those not at a row start), checked once at the end.
        starts = np.array([c.start for c in index_chunks[1:]], dtype=np.int64)
        if starts.size:
            position = np.minimum(self._search(starts, "left"), self.indptr_host.size - 1)
            at_row_start = self.indptr_host[position] == starts
            inner = cupy.asarray(starts[~at_row_start])
            if inner.size:
                counts.append(cupy.count_nonzero(indices[inner] <= indices[inner - 1]))
        cuts = np.array([c.start for c in pointer_chunks[1:]], dtype=np.int64)
        drops = list(self.pointer_drops)
        if cuts.size:
            device_cuts = cupy.asarray(cuts)
            drops.append(cupy.count_nonzero(indptr[device_cuts] < indptr[device_cuts - 1]))
        values = [v.astype(np.int64) for v in (self.minima + self.maxima + counts + drops)]
        host = cupy.stack(values).get() if values else np.zeros(0, np.int64)
        k = len(self.minima)
        minima, maxima = host[:k], host[k:2 * k]
        unsorted, pointer_drops = host[2 * k:2 * k + len(counts)], host[2 * k + len(counts):]
        if pointer_drops.sum():
            raise ValueError("indptr is not monotone (row pointers go down somewhere)")
        if k and minima.min() < 0:
            raise ValueError(f"indices holds a negative index ({int(minima.min())})")
        if k and maxima.max() >= self.n_cols:
            raise ValueError(f"indices holds index {int(maxima.max())}, out of range for {self.n_cols} columns")
        return not unsorted.sum()


#: ``from_scipy`` streams matrices of at least this many bytes (values and indices) through
#: :func:`upload_csr` on the GPU; below it one plain copy costs less than setting up streams.
STREAM_MIN_BYTES = 16 << 20


def worth_streaming(S: Any) -> bool:
    """Whether ``from_scipy`` uploads the scipy matrix ``S`` with :func:`upload_csr`."""
    S = as_scipy_sparse(S)
    return S.nnz * (S.dtype.itemsize + 4) >= STREAM_MIN_BYTES


def _csr_input(S: Any) -> Any:
    """``S`` as a scipy CSR (other scipy formats converted on the host); TypeError otherwise."""
    S = as_scipy_sparse(S)
    if S.format != "csr":
        S = sp.csr_array(S)
    return S


def _check_csr_arrays(S: Any) -> None:
    """The cheap host checks, before any copy: lengths and the two ends of indptr."""
    m, _ = S.shape
    _validate.check_index_array("indptr", S.indptr, m + 1)
    _validate.check_index_array("indices", S.indices, S.data.size)
    if S.data.ndim != 1:
        raise ValueError(f"data must be 1-D, got shape {S.data.shape}")
    if int(S.indptr[0]) != 0:
        raise ValueError(f"indptr[0] must be 0, got {int(S.indptr[0])}")
    if int(S.indptr[-1]) != S.indices.size:
        raise ValueError(f"indptr[-1] is {int(S.indptr[-1])} but there are {S.indices.size} stored entries")


def upload_csr(S: Any, *, dtype: Any = None, index_dtype: Any = None, chunk_bytes: int | None = None,
               streams: int = 2, pool: PinnedPool | None = None, pack: PackStrategy = "auto",
               pack_threads: int | None = None, progress: bool = False, report: bool = False,
               backend: str | None = None) -> Any:
    """A :class:`~sparsegpu.CSR` from a scipy sparse matrix, streamed to the device as
    :func:`upload` does (other scipy formats are converted to CSR on the host first).

    While later chunks are still in flight, each arrived chunk is converted to the stored
    dtypes and validated on the device (indices in range, pointers monotone, columns strictly
    increasing within rows). Non-canonical input (unsorted columns or duplicates) is then
    made canonical on the device (:func:`sparsegpu.convert.coo_to_csr`), so the result equals
    ``CSR.from_scipy(S)``; the caller's matrix is never modified. Arguments as for
    :func:`upload`; ``dtype``/``index_dtype`` as for ``from_scipy``. With ``report=True``
    returns ``(csr, TransferReport)``.

    >>> S = sp.csr_array((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 2]), np.array([0, 3, 3])), shape=(2, 3))
    >>> A = upload_csr(S)            # unsorted, with a duplicate
    >>> A.to_scipy().toarray().tolist()
    [[2.0, 0.0, 4.0], [0.0, 0.0, 0.0]]
    """
    S = _csr_input(S)
    streams = _check_positive("streams", streams)
    pack = _check_pack(pack)
    if chunk_bytes is not None:
        chunk_bytes = _check_positive("chunk_bytes", chunk_bytes)
    _check_csr_arrays(S)
    value_dt = _validate.value_dtype(S.dtype if dtype is None else dtype)
    index_dt = _validate.index_dtype(S.shape, S.nnz, index_dtype)
    target_backend = resolve_backend(backend)
    if target_backend == "cpu":
        timeline = _Timeline(report)
        with timeline.host("pack"):
            csr = CSR._from_canonical_scipy(canonical_scipy(S, "csr", value_dt, index_dt), "cpu")
        timeline.report.nbytes = csr.nbytes
        result = timeline.finish()
        return (csr, result) if report else csr
    import cupy

    chunk_bytes = chunk_bytes or (pool.buffer_bytes if pool is not None else DEFAULT_BUFFER_BYTES)
    m, n = S.shape
    # indptr first: the indices checks need the row starts on the device.
    sources = [np.ascontiguousarray(a) for a in (S.data, S.indices, S.indptr)]
    order = [2, 1, 0]
    targets = [cupy.empty(S.nnz, value_dt), cupy.empty(S.nnz, index_dt), cupy.empty(m + 1, index_dt)]
    chunks = sorted(_plan_for(sources, chunk_bytes, pack), key=lambda c: order.index(c.array))
    checks = _CsrChecks(S.indptr, n)
    timeline = _Timeline(report)
    bar = _Progress(progress, len(chunks), "upload_csr")
    pointer_chunks = [c for c in chunks if c.array == 2]
    index_chunks = [c for c in chunks if c.array == 1]
    try:
        with _staging(pool, streams, pack, pack_threads, timeline) as (stager, stream_list):
            # The pointers go up (and are converted) first; their completion events gate the
            # indices checks on every stream.
            staging: dict[tuple[int, str, int], Any] = {}
            _stream_arrays(sources, targets, pointer_chunks, stager, stream_list, timeline, bar, staging, checks)
            checks.indptr_device = targets[2]
            checks.indptr_ready = [s.record() for s in stream_list]
            _stream_arrays(sources, targets, index_chunks + [c for c in chunks if c.array == 0], stager,
                           stream_list, timeline, bar, staging, checks)
            _join(stream_list)
    finally:
        bar.close()
    data, indices, indptr = targets
    canonical = checks.verdict(indices, indptr, index_chunks, pointer_chunks)
    if not canonical:
        with timeline.device("device", cupy.cuda.get_current_stream()):
            rows = convert.expand_pointers(indptr, cupy)
            indptr, indices, data = convert.coo_to_csr(rows, indices, data, (m, n), index_dtype=index_dt)
        cupy.cuda.get_current_stream().synchronize()
    timeline.report.chunks = len(chunks)
    result = timeline.finish()
    csr = CSR._make(data, indices, indptr, (m, n), "gpu")
    return (csr, result) if report else csr


# =========================================================================== out of core


class OutOfCoreCSR:
    """A CSR matrix kept in host memory whose products stream row blocks through the GPU.

    ``S``: a scipy sparse matrix (CSR is used as it is, never copied, so memory-mapped
    arrays stay on disk until read; other formats are converted on the host). Its values must
    be float32, float64, complex64 or complex128 and its indices int32 or int64.
    ``device_budget_bytes``: device memory for the blocks in flight (``streams`` blocks, each
    its values, column indices, rebased row pointers and piece of y, per
    :func:`block_bytes`); default half the free device memory. x (and y when it is a CuPy
    array) stay resident on top of it. ``chunk_rows``: fixed rows per block instead of the
    largest that fit. ``streams``: blocks in flight, each on its own CUDA stream: block b's
    upload runs while block b-1's SpMV runs. ``pool``/``pack``/``pack_threads``: staging,
    as for :func:`upload`; arrays already pinned (:func:`pin`, :func:`pinned_empty`) are
    copied directly. ``check`` (default True): validate the row pointers and column indices
    once, on the host, at construction (one pass over them; pass False for trusted input,
    e.g. a memory-mapped matrix that was checked when written).

    Each block runs the same gather kernel as the in-memory :class:`~sparsegpu.CSR` with the
    same threads per row, so ``A @ x`` is bitwise equal to ``CSR.from_scipy(S) @ x`` for a
    canonical ``S``, and deterministic. Launch plans are built per block on the first
    product and cached.

    >>> S = sp.random(200, 50, density=0.1, random_state=3, format="csr")
    >>> A = OutOfCoreCSR(S, device_budget_bytes=2048)
    >>> len(A.blocks) > 1, bool(np.allclose(A @ np.ones(50), S @ np.ones(50)))
    (True, True)
    """

    def __init__(self, S: Any, *, device_budget_bytes: int | None = None, chunk_rows: int | None = None,
                 streams: int = 2, pool: PinnedPool | None = None, pack: PackStrategy = "auto",
                 pack_threads: int | None = None, backend: str | None = None, check: bool = True) -> None:
        S = _csr_input(S)
        _check_csr_arrays(S)
        if check:
            _validate.check_compressed(S.indptr, S.indices, S.data, S.shape[0], S.shape[1], "rows", "columns")
        if S.dtype not in _validate.VALUE_DTYPES:
            raise TypeError(f"OutOfCoreCSR stores values as they are; {S.dtype} is not one of float32, float64, "
                            "complex64, complex128 (convert with S.astype(np.float64) first)")
        if S.indices.dtype not in _validate.INDEX_DTYPES or S.indptr.dtype != S.indices.dtype:
            raise TypeError(f"indices ({S.indices.dtype}) and indptr ({S.indptr.dtype}) must both be int32 "
                            "or both int64")
        self.streams = _check_positive("streams", streams)
        if self.streams < 2:
            raise ValueError("streams must be at least 2: one block uploads while another computes")
        self.pack = _check_pack(pack)
        self.pack_threads = pack_threads
        self.pool = pool
        self.backend: Backend = resolve_backend(backend)
        self._S = S
        self.shape: tuple[int, int] = S.shape
        self.dtype = np.dtype(S.dtype)
        self.index_dtype = np.dtype(S.indices.dtype)
        if device_budget_bytes is None:
            device_budget_bytes = self._default_budget()
        self.device_budget_bytes = _check_positive("device_budget_bytes", device_budget_bytes)
        padding = self.streams * 3 * SLOT_ALIGN
        if self.device_budget_bytes <= padding:
            raise ValueError(f"device_budget_bytes={self.device_budget_bytes} leaves nothing for the matrix: "
                             f"{self.streams} blocks in flight need {padding} bytes of alignment alone")
        self.blocks = plan_row_blocks(S.indptr, self.device_budget_bytes - padding, self.dtype.itemsize,
                                      self.index_dtype.itemsize, slots=self.streams, chunk_rows=chunk_rows)
        m = self.shape[0]
        self._tpr = _threads_per_row(S.nnz / m if m else 0.0)
        self._plans: dict[int, Any] = {}
        self._pinned = [is_pinned(a) for a in (S.data, S.indices, S.indptr)]
        self._pinned_y: np.ndarray | None = None
        self.last_report: TransferReport | None = None

    def _default_budget(self) -> int:
        if self.backend == "gpu":
            import cupy

            return int(cupy.cuda.runtime.memGetInfo()[0]) // 2
        return 1 << 30

    @property
    def nnz(self) -> int:
        return int(self._S.nnz)

    @property
    def nbytes(self) -> int:
        """Host bytes of the matrix's arrays (what every product moves to the device)."""
        return int(self._S.data.nbytes + self._S.indices.nbytes + self._S.indptr.nbytes)

    def __matmul__(self, x: Any) -> Any:
        if sp.issparse(x):
            return NotImplemented
        return self.spmv(x)

    def spmv(self, x: Any, y: Any = None, alpha: Any = 1, beta: Any = 0, *, progress: bool = False,
             report: bool = False) -> Any:
        """``alpha * A @ x + beta * y``, arguments as for :meth:`sparsegpu.CSR.spmv`: a NumPy
        x gives a NumPy y (pieces come back block by block); a CuPy x keeps y on the device.
        ``progress``: a bar over blocks. ``report``: the timeline goes to ``last_report``."""
        m, n = self.shape
        x = _validate.check_vector(x, n, self.dtype)
        if y is not None:
            _validate.check_out(y, m, self.dtype, x)
        alpha = _validate.check_scalar("alpha", alpha, self.dtype)
        beta = _validate.check_scalar("beta", beta, self.dtype)
        if y is None and beta != 0:
            raise ValueError("beta is nonzero but no y was given to scale and add")
        if self.backend == "cpu":
            if is_device_array(x):
                raise TypeError("this OutOfCoreCSR runs on the CPU backend but x is a CuPy array")
            out = np.empty(m, self.dtype) if y is None else y
            timeline = _Timeline(report)
            with timeline.host("device"):
                self._spmv_cpu(x, out, alpha, beta)
            timeline.report.nbytes, timeline.report.chunks = self.nbytes, len(self.blocks)
            self.last_report = timeline.finish()
            return out
        return self._spmv_gpu(x, y, alpha, beta, progress, report)

    def _block_arrays(self, r0: int, r1: int) -> tuple[int, int]:
        indptr = self._S.indptr
        return int(indptr[r0]), int(indptr[r1])

    def _spmv_cpu(self, x: np.ndarray, y: np.ndarray, alpha: Any, beta: Any) -> np.ndarray:
        S = self._S
        for r0, r1 in self.blocks:
            a, b = self._block_arrays(r0, r1)
            rebased = S.indptr[r0:r1 + 1] - S.indptr[r0]
            if b == S.nnz:
                reference.csr_spmv(rebased, S.indices[a:b], S.data[a:b], x, y[r0:r1], alpha, beta)
                continue
            # The twin's last row also sums everything after it (a padding zero), and NumPy's
            # pairwise sum groups by length; one borrowed entry in a dummy row keeps each real
            # row's sum exactly as in the whole-matrix product, so the results are bitwise equal.
            extended = np.append(rebased, rebased.dtype.type(b - a + 1))
            piece = np.empty(r1 - r0 + 1, self.dtype)
            piece[:-1] = y[r0:r1]
            reference.csr_spmv(extended, S.indices[a:b + 1], S.data[a:b + 1], x, piece, alpha, beta)
            y[r0:r1] = piece[:-1]
        return y

    def _spmv_gpu(self, x: Any, y: Any, alpha: Any, beta: Any, progress: bool, report: bool) -> Any:
        import cupy

        from sparsegpu.formats._compressed import gather_spmv, make_gather_plan

        m, _ = self.shape
        S = self._S
        host_out = not is_device_array(x)
        x_device = cupy.asarray(x)
        if host_out:
            if self._pinned_y is None:
                self._pinned_y = pinned_empty(m, self.dtype)
            y_device = None
        else:
            y_device = cupy.empty(m, self.dtype) if y is None else y
        layouts = [self._layout(r0, r1) for r0, r1 in self.blocks]
        slot_bytes = max((layout[-1] for layout in layouts), default=0)
        slots = [cupy.empty(slot_bytes, np.uint8) for _ in range(self.streams)]
        timeline = _Timeline(report)
        bar = _Progress(progress, len(self.blocks), "out-of-core spmv")
        runtime = cupy.cuda.runtime
        try:
            with _staging(self.pool, self.streams, self.pack, self.pack_threads, timeline) as (stager, streams):
                # x was uploaded on the current stream; every block stream waits for it.
                x_ready = cupy.cuda.get_current_stream().record()
                for stream in streams:
                    stream.wait_event(x_ready)
                for number, (r0, r1) in enumerate(self.blocks):
                    stream, slot = streams[number % self.streams], slots[number % self.streams]
                    a, b = self._block_arrays(r0, r1)
                    rows = r1 - r0
                    data, indices, indptr_block, y_slot = self._carve(slot, layouts[number], rows, b - a)
                    stager.copy(indptr_block, S.indptr[r0:r1 + 1], stream, self._pinned[2])
                    stager.copy(indices, S.indices[a:b], stream, self._pinned[1])
                    stager.copy(data, S.data[a:b], stream, self._pinned[0])
                    with stream:
                        y_piece = y_slot if host_out else y_device[r0:r1]
                        if host_out and beta != 0:
                            y_piece.set(y[r0:r1], stream=stream)
                        with timeline.device("device", stream):
                            indptr_block -= indptr_block.dtype.type(a)  # rebase to the block's first entry
                            if number not in self._plans:
                                self._plans[number] = make_gather_plan(indptr_block, self.dtype, self._tpr)
                            gather_spmv(self._plans[number], indptr_block, indices, data, x_device, y_piece,
                                        alpha, beta)
                        if host_out and rows:
                            with timeline.device("d2h", stream):
                                runtime.memcpyAsync(self._pinned_y[r0:r1].ctypes.data, y_piece.data.ptr,
                                                    y_piece.nbytes, runtime.memcpyDeviceToHost, stream.ptr)
                    bar.advance()
                _join(streams)
        finally:
            bar.close()
        timeline.report.chunks = len(self.blocks)
        self.last_report = timeline.finish()
        if not host_out:
            return y_device
        if y is None:
            return self._pinned_y.copy()
        np.copyto(y, self._pinned_y)
        return y

    def _layout(self, r0: int, r1: int) -> tuple[int, int, int, int]:
        """Byte offsets of a block's indices, row pointers and y piece in its slot, and the
        slot bytes it needs (each array starts on a :data:`SLOT_ALIGN` boundary)."""
        a, b = self._block_arrays(r0, r1)
        nnz, rows = b - a, r1 - r0
        indices_at = _align_up(nnz * self.dtype.itemsize)
        indptr_at = _align_up(indices_at + nnz * self.index_dtype.itemsize)
        y_at = _align_up(indptr_at + (rows + 1) * self.index_dtype.itemsize)
        return indices_at, indptr_at, y_at, y_at + rows * self.dtype.itemsize

    def _carve(self, slot: Any, layout: tuple[int, int, int, int], rows: int, nnz: int) -> tuple[Any, Any, Any, Any]:
        indices_at, indptr_at, y_at, _ = layout
        value_size, index_size = self.dtype.itemsize, self.index_dtype.itemsize
        return (slot[:nnz * value_size].view(self.dtype),
                slot[indices_at:indices_at + nnz * index_size].view(self.index_dtype),
                slot[indptr_at:indptr_at + (rows + 1) * index_size].view(self.index_dtype),
                slot[y_at:y_at + rows * value_size].view(self.dtype))

    def __repr__(self) -> str:
        m, n = self.shape
        return (f"<OutOfCoreCSR {m}x{n}, {self.dtype}, {self.nnz} stored, {len(self.blocks)} row blocks "
                f"under {self.device_budget_bytes} B, on {self.backend}>")


def _align_up(nbytes: int) -> int:
    return -(-nbytes // SLOT_ALIGN) * SLOT_ALIGN


def _threads_per_row(mean_length: float) -> int:
    from sparsegpu.formats._compressed import threads_per_row

    return threads_per_row(mean_length)


__all__ = [
    "Chunk",
    "OutOfCoreCSR",
    "PinnedPool",
    "TransferReport",
    "block_bytes",
    "default_pool",
    "is_pinned",
    "pin",
    "pinned_empty",
    "plan_chunks",
    "plan_row_blocks",
    "unpin",
    "upload",
    "upload_csr",
]
