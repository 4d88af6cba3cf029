"""The halo exchange between GPUs over NCCL (CuPy's ``cupy.cuda.nccl``), with the interface
of :class:`sparsegpu.distributed._exchange.MpiExchanger`.

MPI carries only control data here (the NCCL unique id, broadcast once per communicator), so
it need not be CUDA-aware. ``start`` queues, on a high-priority stream of its own: the gather
of the entries peers need into the preallocated send buffer, then one NCCL group of
``send``/``recv`` calls, one per peer with traffic, in rank order, planned with their pointers
when the matrix is built. It returns at once, so the caller's stream multiplies the interior
rows meanwhile; ``finish`` makes the caller's stream wait for the group (an event, no host
wait). Nothing is reduced, so the halo holds the same bits whatever the timing.

Every rank must use the GPU backend (NCCL calls are collective over the communicator), and
NVLink multicast should stay off (``NCCL_NVLS_ENABLE=0``) on machines where it misbehaves.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from sparsegpu.distributed._exchange import BufferViews, HaloBuffer
from sparsegpu.distributed._halo import HaloPlan

# (the NCCL datatype's name, NCCL elements per entry): complex entries travel as value pairs.
_WIRE_TYPES = {
    np.dtype(np.float32): ("NCCL_FLOAT32", 1),
    np.dtype(np.float64): ("NCCL_FLOAT64", 1),
    np.dtype(np.complex64): ("NCCL_FLOAT32", 2),
    np.dtype(np.complex128): ("NCCL_FLOAT64", 2),
}
# One NCCL communicator per MPI communicator and device, made once (making one is collective
# and slow); the MPI communicator is kept with it so its id is never reused.
_COMMUNICATORS: dict[tuple[int, int], tuple[Any, Any]] = {}


def nccl_available() -> bool:
    """Whether CuPy's NCCL bindings import and report NCCL present."""
    try:
        from cupy.cuda import nccl
    except Exception:  # noqa: BLE001 (CuPy absent, or built without NCCL)
        return False
    return bool(getattr(nccl, "available", True))


def nccl_communicator(comm: Any) -> Any:
    """The NCCL communicator over the ranks of ``comm`` on the current device (collective on
    first use for a communicator: rank 0 makes the unique id, MPI broadcasts it)."""
    import cupy
    from cupy.cuda import nccl

    key = (id(comm), cupy.cuda.Device().id)
    if key not in _COMMUNICATORS:
        unique_id = nccl.get_unique_id() if comm.Get_rank() == 0 else None
        unique_id = comm.bcast(unique_id, root=0)
        _COMMUNICATORS[key] = (nccl.NcclCommunicator(comm.Get_size(), unique_id, comm.Get_rank()), comm)
    return _COMMUNICATORS[key][0]


class GroupCall(NamedTuple):
    """One NCCL call of the exchange's group: ``operation`` ("send" from the send buffer or
    "recv" into the halo), ``count`` wire elements at ``byte_offset`` of that buffer."""

    operation: str
    peer: int
    byte_offset: int
    count: int
    wire_type: str


def group_calls(plan: HaloPlan, dtype: Any) -> list[GroupCall]:
    """The exchange's NCCL calls for entries of ``dtype``: per peer with traffic, in rank
    order, its send then its receive (NCCL matches them inside one group in any order)."""
    wire_type, per_entry = _WIRE_TYPES[np.dtype(dtype)]
    itemsize = np.dtype(dtype).itemsize
    calls = []
    for peer in plan.peers:
        for operation, counts, displs in (("send", plan.send_counts, plan.send_displs),
                                          ("recv", plan.recv_counts, plan.recv_displs)):
            if counts[peer]:
                calls.append(GroupCall(operation, peer, int(displs[peer]) * itemsize, int(counts[peer]) * per_entry,
                                       wire_type))
    return calls


class NcclExchanger(BufferViews):
    """Fills each rank's device halo from its peers' device entries of x over NCCL.

    Everything a call needs is made here: the buffer (:class:`HaloBuffer`), the stream and its
    events, and the group's calls with their device pointers, so a call allocates nothing,
    reads nothing back and waits for nothing on the host.

    Parameters
    ----------
    plan : HaloPlan
    comm : communicator
    dtype : dtype
        The entries' dtype (the matrix's).
    n_own : int
        This rank's entries of x.
    gathered, lead
        As for :class:`sparsegpu.distributed._exchange.HaloBuffer`.
    """

    def __init__(self, plan: HaloPlan, comm: Any, dtype: Any, n_own: int, gathered: Any = None,
                 lead: int = 0) -> None:
        import cupy
        from cupy.cuda import nccl

        self.plan = plan
        self.nccl = nccl_communicator(comm)
        self.buffers = HaloBuffer(plan, n_own, dtype, "gpu", gathered, lead)
        self.stream = exchange_stream()
        self.x_ready = cupy.cuda.Event(disable_timing=True)
        self.halo_ready = cupy.cuda.Event(disable_timing=True)
        self.consumed = cupy.cuda.Event(disable_timing=True)
        self._caller: int | None = None  # the stream the last call's product ran on
        self._marked = False  # whether ready() marked x for the next start()
        self._calls = []
        for call in group_calls(plan, dtype):
            base = self.buffers.send.data.ptr if call.operation == "send" else self.buffers.halo.data.ptr
            operation = self.nccl.send if call.operation == "send" else self.nccl.recv
            self._calls.append((operation, base + call.byte_offset, call.count, getattr(nccl, call.wire_type),
                                call.peer))
        self._queues_work = bool(self._calls) or self.buffers.packed.size > 0
        # What a call touches, looked up once: the runtime's event calls on raw handles, the
        # group's bounds, the current stream's lookup and the pack's arrays.
        self._runtime = cupy.cuda.runtime
        self._group = (nccl.groupStart, nccl.groupEnd)
        self._current_stream = cupy.cuda.get_current_stream
        self._handles = (self.stream.ptr, self.x_ready.ptr, self.halo_ready.ptr, self.consumed.ptr)
        self._take = cupy.take
        self._pack = (self.buffers.pack_indices, self.buffers.packed) if self.buffers.packed.size else None

    #: ``start`` returns at once: the caller queues its interior rows before it.
    asynchronous = True

    def _caller_stream(self, stream: int | None) -> int:
        return self._current_stream().ptr if stream is None else stream

    def ready(self, stream: int | None = None) -> None:
        """Mark the point of the caller's stream (``stream``, default the current one) where x
        is written: ``start`` queues the exchange after it, whatever the caller queues in
        between."""
        if not self._queues_work:
            return
        caller = self._caller_stream(stream)
        _, x_ready, _, consumed = self._handles
        if self._caller is not None and self._caller != caller:
            self._runtime.streamWaitEvent(caller, consumed)  # the last product read the buffer elsewhere
        self._runtime.eventRecord(x_ready, caller)
        self._marked = True

    def start(self, x_local: Any, stream: int | None = None) -> None:
        """Queue the pack and the group on the exchanger's stream, after the point marked by
        :meth:`ready` (marked here when it was not called); returns without waiting
        (collective)."""
        if not self._queues_work:
            return
        if not self._marked:
            self.ready(stream)
        self._marked = False
        own, x_ready, halo_ready, _ = self._handles
        runtime = self._runtime
        runtime.streamWaitEvent(own, x_ready)
        if self._pack is not None:
            with self.stream:  # CuPy's take queues on the current stream
                self._take(x_local, self._pack[0], out=self._pack[1])
        if self._calls:
            group_start, group_end = self._group
            group_start()
            for operation, pointer, count, wire_type, peer in self._calls:
                operation(pointer, count, wire_type, peer, own)
            group_end()
        runtime.eventRecord(halo_ready, own)

    def finish(self, stream: int | None = None) -> None:
        """Make the caller's stream wait until the halo has arrived (no host wait)."""
        if not self._queues_work:
            return
        self._runtime.streamWaitEvent(self._caller_stream(stream), self._handles[2])

    def release(self, stream: int | None = None) -> None:
        """Mark where the caller's product stopped reading the buffer, so a next call from
        another stream waits for it (calls from one stream are ordered by the stream)."""
        if not self._queues_work:
            return
        caller = self._caller_stream(stream)
        self._caller = caller
        self._runtime.eventRecord(self._handles[3], caller)


def exchange_stream() -> Any:
    """A non-blocking stream of the device's highest priority, so the pack and NCCL's kernel
    get SMs ahead of the interior product that runs meanwhile (plain priority where CuPy
    takes no priority)."""
    import cupy

    try:
        highest = cupy.cuda.runtime.deviceGetStreamPriorityRange()[1]
        return cupy.cuda.Stream(non_blocking=True, priority=highest)
    except (AttributeError, TypeError):
        return cupy.cuda.Stream(non_blocking=True)
