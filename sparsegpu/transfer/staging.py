"""The staging engine under every upload: chunk planning, packing pageable memory into pinned
buffers on several host threads, and copies with ``cudaMemcpyAsync`` on several CUDA streams
while device work (dtype conversion, validation) runs on chunks already arrived."""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsegpu.transfer._checks import positive_int
from sparsegpu.transfer.pinned import (
    PinnedPool,
    default_pool,
    is_pinned,
    unregister_pages,
)
from sparsegpu.transfer.report import Progress, Timeline

#: Host page size: ``pack="register"`` places chunk boundaries on page boundaries so that no
#: two chunks register the same page.
PAGE_BYTES = mmap.PAGESIZE
#: Pieces smaller than this are packed by the calling thread (a thread hand-off costs more).
MIN_THREAD_PIECE = 1 << 20


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
    """Host threads packing chunks: one per core, at most 16. Packing is bound by host memory
    bandwidth shared with the DMA, and 16 threads still packed faster than 8 on a 16-core host
    (measured on an H200, see docs/performance.md)."""
    return max(1, min(16, os.cpu_count() or 1))


_pack_executors: dict[int, ThreadPoolExecutor] = {}
_pack_executors_lock = threading.Lock()


def _pack_executor(threads: int) -> ThreadPoolExecutor:
    """The process-wide pool of ``threads`` packing threads, started on first use: starting
    the threads for every upload would put their start-up on its critical path.
    concurrent.futures joins the threads at exit."""
    with _pack_executors_lock:
        if threads not in _pack_executors:
            _pack_executors[threads] = ThreadPoolExecutor(threads, thread_name_prefix=f"sparsegpu-pack{threads}")
        return _pack_executors[threads]


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
    chunk_bytes = positive_int("chunk_bytes", chunk_bytes)
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


def plan_for(sources: Sequence[np.ndarray], chunk_bytes: int, pack: str) -> list[Chunk]:
    """Chunks of ``sources``; page-aligned when their pages are to be registered."""
    lengths, itemsizes = [s.size for s in sources], [s.dtype.itemsize for s in sources]
    if pack == "register":
        addresses = [s.ctypes.data for s in sources]
        return plan_chunks(lengths, itemsizes, chunk_bytes, addresses=addresses, align=PAGE_BYTES)
    return plan_chunks(lengths, itemsizes, chunk_bytes)


def join_streams(streams: list[Any]) -> None:
    """Make the current stream wait for ``streams`` and wait on the host for all of them."""
    import cupy

    current = cupy.cuda.get_current_stream()
    for stream in streams:
        current.wait_event(stream.record())
        stream.synchronize()


class Stager:
    """Copies host slices into device memory on given streams.

    Pinned sources are copied directly. Pageable ones are packed into the borrowed pool
    buffers (several threads per chunk; NumPy copies release the GIL) or, with
    ``pack="register"``, have their own pages registered for the copy and unregistered after
    it. A buffer is reused only after the event of its last copy completed (waited for on the
    host, per buffer; never a device-wide synchronise). The packing threads are shared by all
    uploads (:func:`_pack_executor`); a stager waits for its own pieces before it lets its
    buffers go, also after an exception."""

    def __init__(self, buffers: list[np.ndarray], pack: str, pack_threads: int, timeline: Timeline) -> None:
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
                    unregister_pages(address)
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
def staged_streams(pool: PinnedPool | None, streams: int, pack: str, pack_threads: int | None,
                   timeline: Timeline) -> Iterator[tuple[Stager, list[Any]]]:
    """A :class:`Stager` over every buffer of ``pool`` (default: :func:`default_pool`) and
    ``streams`` non-blocking CUDA streams, for the ``with`` block; on the way out (also after
    an exception) the streams are synchronised and the stager closed before the buffers go
    back to the pool."""
    import cupy

    threads = default_pack_threads() if pack_threads is None else positive_int("pack_threads", pack_threads)
    pool = default_pool() if pool is None else pool
    with pool.borrow(pool.buffers) as buffers:
        stager = Stager(buffers, pack, threads, timeline)
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


def stream_arrays(sources: Sequence[np.ndarray], targets: Sequence[Any], chunks: Sequence[Chunk],
                  stager: Stager, streams: list[Any], timeline: Timeline, progress: Progress,
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

