"""The halo exchange over mpi4py with host buffers: the CPU backend's, and the GPU backend's
when NCCL is not available (device entries then travel through the host).

An exchanger has two steps, ``start(x_local, halo)`` and ``finish()``: the NCCL exchanger
(``_nccl.py``) overlaps work between them; this one does all of it in ``start``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._backend import is_device_array, to_host
from sparsegpu.distributed._halo import HaloPlan


class MpiExchanger:
    """Fills each rank's halo vector from its peers' entries of x with one ``Alltoallv``
    (counts and displacements from the plan, so the layout is fixed; no reduction, so the
    result never depends on timing)."""

    def __init__(self, plan: HaloPlan, comm: Any) -> None:
        self.plan = plan
        self.comm = comm
        self._send_spec = (plan.send_counts, plan.send_displs)
        self._recv_spec = (plan.recv_counts, plan.recv_displs)
        self._device_indices: Any = None

    def start(self, x_local: Any, halo: Any) -> None:
        """Write into ``halo`` (length ``plan.recv_counts.sum()``) the peers' entries this rank
        needs, sending them the entries of ``x_local`` they need (collective)."""
        if not self.plan.active:
            return
        send = np.ascontiguousarray(to_host(x_local[self._indices_like(x_local)]))
        if is_device_array(halo):
            received = np.empty(halo.shape, dtype=halo.dtype)
            self._alltoallv(send, received)
            halo.set(received)
        else:
            self._alltoallv(send, halo)

    def _indices_like(self, x_local: Any) -> Any:
        """The send list as an index array of x's library (a device copy made once)."""
        if not is_device_array(x_local):
            return self.plan.send_indices
        if self._device_indices is None:
            import cupy

            self._device_indices = cupy.asarray(self.plan.send_indices)
        return self._device_indices

    def finish(self) -> None:
        """Nothing left to wait for: :meth:`start` returns once the halo is in place."""

    def _alltoallv(self, send: np.ndarray, received: np.ndarray) -> None:
        self.comm.Alltoallv([send, self._send_spec], [received, self._recv_spec])
