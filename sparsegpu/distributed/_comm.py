"""Communicators: mpi4py's, or a one-process stand-in when mpi4py is not installed.

The package talks to a communicator through a few mpi4py methods only: ``Get_rank``,
``Get_size``, the object collectives ``bcast``, ``allgather``, ``allreduce`` (integer counts
only, where the order of a sum cannot matter), ``gather``, ``scatter`` and ``alltoall``, and
the buffer collective ``Alltoallv`` on the exchange's hot path (never called at one process).
So :class:`SerialComm` can stand in for ``MPI.COMM_WORLD`` at one process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_COMM_METHODS = ("Get_rank", "Get_size", "bcast", "allgather", "allreduce", "gather", "scatter", "alltoall")


class SerialComm:
    """A communicator of one process with mpi4py's method names: what :func:`world` returns
    when mpi4py is not installed, so one-process runs need no MPI."""

    def Get_rank(self) -> int:
        return 0

    def Get_size(self) -> int:
        return 1

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return obj

    def allgather(self, obj: Any) -> list[Any]:
        return [obj]

    def allreduce(self, obj: Any) -> Any:
        return obj

    def gather(self, obj: Any, root: int = 0) -> list[Any]:
        return [obj]

    def scatter(self, objs: Any, root: int = 0) -> Any:
        return objs[0]

    def alltoall(self, objs: Any) -> list[Any]:
        return [objs[0]]

    def Barrier(self) -> None:
        return None


_SERIAL = SerialComm()  # one object, so partitions built on it compare equal


def world() -> Any:
    """``mpi4py.MPI.COMM_WORLD``, or a :class:`SerialComm` when mpi4py is not installed.

    Returns
    -------
    communicator
        Every process started by ``mpirun -n K`` gets the same K-process communicator.

    Examples
    --------
    >>> from sparsegpu.distributed import world
    >>> comm = world()
    >>> 0 <= comm.Get_rank() < comm.Get_size()
    True
    """
    try:
        from mpi4py import MPI
    except ImportError:
        return _SERIAL
    return MPI.COMM_WORLD


def check_comm(comm: Any) -> Any:
    """``comm`` (``None`` gives :func:`world`) if it has the communicator methods the package
    uses; a TypeError naming the argument otherwise."""
    if comm is None:
        return world()
    missing = [name for name in _COMM_METHODS if not callable(getattr(comm, name, None))]
    if missing:
        raise TypeError(f"comm must be an mpi4py communicator (such as MPI.COMM_WORLD), got "
                        f"{type(comm).__name__} without {', '.join(missing)}")
    return comm


def ordered_sum(partials: list[Any]) -> Any:
    """The partials added left to right (rank order): the same bits on every rank, whatever
    the timing, unlike MPI_SUM whose association is unspecified."""
    total = partials[0]
    for value in partials[1:]:
        total = total + value
    return total


def all_agree(comm: Any, ok: bool) -> bool:
    """Whether ``ok`` holds on every rank (every rank gets the same answer), so a check that
    fails on one rank fails on all of them instead of leaving the others waiting."""
    return all(comm.allgather(bool(ok)))


def raise_collectively(comm: Any, error: Exception | None) -> None:
    """Raise ``error`` on its rank and a ValueError naming the failing ranks on the others, so
    no rank goes on to a collective that the failing one will never join."""
    failures = comm.allgather(None if error is None else f"{type(error).__name__}: {error}")
    if error is not None:
        raise error
    failed = [rank for rank, message in enumerate(failures) if message is not None]
    if failed:
        raise ValueError(f"rank {failed[0]} failed: {failures[failed[0]]}"
                         + (f" (and ranks {failed[1:]})" if len(failed) > 1 else ""))


def as_int64(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)
