"""The halo exchange's buffer, and the exchange over mpi4py with host buffers: the CPU
backend's, and the GPU backend's when NCCL is not available (device entries then travel
through the host).

The plan is fixed when the matrix is built, so the exchange's memory is too: one buffer per
matrix, allocated once, laid out ``[send | gathered | lead | halo]``:

- ``send``: the entries of x that peers need, grouped by peer in rank order (the plan's
  ``send_indices``);
- ``gathered``: further entries of this rank's x that the caller's product reads next to the
  halo, packed by the same gather as ``send`` (one ``take`` fills both);
- ``lead``: slots the caller fills itself (a whole copy of x, when the product needs most of it);
- ``halo``: what the peers send, in the plan's order.

``vector`` (``[gathered | lead | halo]``) is what the product after the exchange reads. An
exchanger has four steps, ``ready()`` (x is written), ``start(x_local)``, ``finish()`` and
``release()``, each taking the caller's stream (its handle, on the GPU) when the caller has it
at hand: the NCCL exchanger (``_nccl.py``) overlaps work between them; this one does all
of it in ``start``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._backend import array_module
from sparsegpu.distributed._halo import HaloPlan


def index_array(indices: np.ndarray, bound: int, xp: Any) -> Any:
    """``indices`` (all below ``bound``) as int32 when they fit (a cheaper gather), on xp."""
    dtype = np.int32 if bound < np.iinfo(np.int32).max else np.int64
    return xp.asarray(np.ascontiguousarray(indices, dtype=dtype))


class HaloBuffer:
    """The exchange's one buffer ``[send | gathered | lead | halo]`` and its views.

    Parameters
    ----------
    plan : HaloPlan
    n_own : int
        This rank's entries of x (the bound of every gathered index).
    dtype : dtype
        The entries' dtype (the matrix's).
    backend : {"cpu", "gpu"}
    gathered : ndarray of int, optional
        Positions of this rank's x packed after the send list.
    lead : int, optional
        Slots between the gathered entries and the halo, for the caller.
    """

    def __init__(self, plan: HaloPlan, n_own: int, dtype: Any, backend: str, gathered: Any = None,
                 lead: int = 0) -> None:
        xp = array_module(backend)
        gathered = np.zeros(0, np.int64) if gathered is None else np.asarray(gathered, dtype=np.int64)
        n_send, n_pack = plan.send_indices.size, plan.send_indices.size + gathered.size
        n_halo = plan.halo_columns.size
        self.xp = xp
        self.pack_indices = index_array(np.concatenate([plan.send_indices, gathered]), n_own, xp)
        self.buffer = xp.empty(n_pack + lead + n_halo, dtype=dtype)
        self.packed = self.buffer[:n_pack]
        self.send = self.buffer[:n_send]
        self.vector = self.buffer[n_send:]
        self.lead = self.buffer[n_pack:n_pack + lead]
        self.halo = self.buffer[n_pack + lead:]
        if backend == "gpu":  # what a call reads, looked up once
            self.vector_pointer = self.vector.data.ptr
            self.lead_pointer, self.lead_bytes = self.lead.data.ptr, self.lead.nbytes
            self.runtime = xp.cuda.runtime

    def copy_lead(self, x_pointer: int, stream: int) -> None:
        """Copy this rank's x (at ``x_pointer``, on the device) into :attr:`lead` on ``stream``:
        one asynchronous device-to-device copy, no kernel, no array made (GPU)."""
        if self.lead_bytes:
            runtime = self.runtime
            runtime.memcpyAsync(self.lead_pointer, x_pointer, self.lead_bytes, runtime.memcpyDeviceToDevice, stream)

    def pack(self, x_local: Any) -> None:
        """Gather the send list and the gathered entries of ``x_local`` into place (one
        ``take``, on the current stream, no allocation)."""
        if self.packed.size:
            self.xp.take(x_local, self.pack_indices, out=self.packed)


class BufferViews:
    """An exchanger's views of its :class:`HaloBuffer` (``buffers``): the extended vector, its
    lead (the slots before the halo) and the halo; on the GPU the vector's address and the
    lead's copy."""

    buffers: HaloBuffer

    @property
    def vector(self) -> Any:
        return self.buffers.vector

    @property
    def vector_pointer(self) -> int:
        return self.buffers.vector_pointer

    def copy_lead(self, x_pointer: int, stream: int) -> None:
        self.buffers.copy_lead(x_pointer, stream)

    @property
    def lead(self) -> Any:
        return self.buffers.lead

    @property
    def halo(self) -> Any:
        return self.buffers.halo


class MpiExchanger(BufferViews):
    """Fills each rank's halo from its peers' entries of x with one ``Alltoallv`` (counts and
    displacements from the plan, so the layout is fixed; no reduction, so the result never
    depends on timing). GPU entries go through preallocated host buffers: the exchange waits
    for the device, as any host-buffer MPI exchange must.

    Parameters
    ----------
    plan : HaloPlan
    comm : communicator
    dtype : dtype, optional
        The entries' dtype (default float64).
    backend : {"cpu", "gpu"}, optional
    n_own : int, optional
        This rank's entries of x (default: the plan's bound).
    gathered, lead
        As for :class:`HaloBuffer`.
    """

    def __init__(self, plan: HaloPlan, comm: Any, dtype: Any = np.float64, backend: str = "cpu",
                 n_own: int | None = None, gathered: Any = None, lead: int = 0) -> None:
        self.plan = plan
        self.comm = comm
        n_own = _bound(plan) if n_own is None else n_own
        self.buffers = HaloBuffer(plan, n_own, dtype, backend, gathered, lead)
        self._send_spec = (plan.send_counts, plan.send_displs)
        self._recv_spec = (plan.recv_counts, plan.recv_displs)
        self._on_device = backend == "gpu"
        if self._on_device:  # host staging, allocated once
            self._host_send = np.empty(self.buffers.send.size, dtype=dtype)
            self._host_halo = np.empty(self.buffers.halo.size, dtype=dtype)

    #: ``start`` holds the host until the halo is in place: the caller queues its interior
    #: rows after it (on the GPU, before it they would delay the pack's read back).
    asynchronous = False

    def ready(self, stream: int | None = None) -> None:
        """Nothing to mark: :meth:`start` packs on the caller's stream."""

    def start(self, x_local: Any, stream: int | None = None) -> None:
        """Pack (on the current stream, which ``stream`` names when given), then write into
        :attr:`halo` the peers' entries this rank needs, sending them
        the entries of ``x_local`` they need (collective)."""
        self.buffers.pack(x_local)
        if not self.plan.active:
            return
        if not self._on_device:
            self.comm.Alltoallv([self.buffers.send, self._send_spec], [self.buffers.halo, self._recv_spec])
            return
        self.buffers.send.get(out=self._host_send)
        self.comm.Alltoallv([self._host_send, self._send_spec], [self._host_halo, self._recv_spec])
        self.buffers.halo.set(self._host_halo)

    def finish(self, stream: int | None = None) -> None:
        """Nothing left to wait for: :meth:`start` returns once the halo is in place."""

    def release(self, stream: int | None = None) -> None:
        """Nothing to order: the next :meth:`start` runs after this call's product was queued."""


def _bound(plan: HaloPlan) -> int:
    return int(plan.send_indices.max()) + 1 if plan.send_indices.size else 0

