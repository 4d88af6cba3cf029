"""The halo plan: which entries of x each rank sends to which, planned once per matrix.

A rank's rows reference columns of its own range (its local block) and columns other ranks own
(its halo). The halo columns are kept once each, in increasing global order, which groups them
by owner in rank order: rank r's entries arrive as one contiguous run of the halo vector. The
plan is the two sides of that traffic: per peer, how many entries arrive (``recv_counts``), and
which of my entries each peer needs (``send_indices``, grouped by peer in rank order, with
``send_counts``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparsegpu.distributed.partition import Partition


@dataclass(frozen=True)
class HaloPlan:
    """The exchange one rank takes part in (host arrays; int64 counts, one per rank)."""

    halo_columns: np.ndarray  # global columns of my halo, increasing
    recv_counts: np.ndarray
    send_indices: np.ndarray  # local positions of x that peers need, grouped by peer
    send_counts: np.ndarray
    active: bool  # whether any rank sends anything (the same on every rank)

    @property
    def recv_displs(self) -> np.ndarray:
        return _displacements(self.recv_counts)

    @property
    def send_displs(self) -> np.ndarray:
        return _displacements(self.send_counts)

    @property
    def peers(self) -> list[int]:
        """Ranks this rank sends to or receives from, increasing."""
        return [int(r) for r in np.flatnonzero((self.send_counts > 0) | (self.recv_counts > 0))]


def _displacements(counts: np.ndarray) -> np.ndarray:
    displs = np.zeros_like(counts)
    np.cumsum(counts[:-1], out=displs[1:])
    return displs


def plan_halo(columns: np.ndarray, cols: Partition) -> HaloPlan:
    """The halo plan for a rank whose rows reference the global ``columns`` (collective).

    Every rank learns what its peers need with one all-to-all of the requested column lists.
    """
    comm = cols.comm
    mine = (columns >= cols.start) & (columns < cols.stop)
    halo_columns = np.unique(columns[~mine]).astype(np.int64)
    owners = cols.owners(halo_columns)
    recv_counts = np.bincount(owners, minlength=cols.size).astype(np.int64)
    bounds = np.concatenate([[0], np.cumsum(recv_counts)])
    requests = [halo_columns[bounds[r]:bounds[r + 1]] for r in range(cols.size)]
    needed = comm.alltoall(requests)
    send_counts = np.array([part.size for part in needed], dtype=np.int64)
    send_indices = (np.concatenate(needed) if needed else np.zeros(0, np.int64)).astype(np.int64) - cols.start
    if send_indices.size and (send_indices.min() < 0 or send_indices.max() >= cols.local_size):
        raise ValueError("a peer asked for columns this rank does not own; the partitions disagree")
    active = any(comm.allgather(bool(halo_columns.size)))
    return HaloPlan(halo_columns, recv_counts, send_indices, send_counts, active)


def extended_columns(columns: np.ndarray, cols: Partition, plan: HaloPlan) -> np.ndarray:
    """Each global column as an index into the extended vector [my x | halo x]: own columns
    first (renumbered from 0), halo columns after them in the plan's order."""
    mine = (columns >= cols.start) & (columns < cols.stop)
    out = np.empty(columns.size, dtype=np.int64)
    out[mine] = columns[mine] - cols.start
    out[~mine] = cols.local_size + np.searchsorted(plan.halo_columns, columns[~mine])
    return out
