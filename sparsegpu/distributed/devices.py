"""One GPU per rank: which device this rank should use."""

from __future__ import annotations

import os
from typing import Any

from sparsegpu.distributed._comm import check_comm

#: Environment variables launchers set to a process's rank among those on its host.
LOCAL_RANK_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK")


def local_rank(comm: Any = None) -> int:
    """This process's rank among the ranks of ``comm`` on the same host.

    Parameters
    ----------
    comm : communicator, optional
        Default :func:`sparsegpu.distributed.world`.

    Returns
    -------
    int
        From ``comm.Split_type(MPI.COMM_TYPE_SHARED)`` with mpi4py, else from the launcher's
        environment (Open MPI, MPICH, Slurm, torchrun), else the rank in ``comm``.

    Examples
    --------
    >>> from sparsegpu.distributed import world
    >>> from sparsegpu.distributed.devices import local_rank
    >>> local_rank(world()) >= 0
    True
    """
    comm = check_comm(comm)
    if hasattr(comm, "Split_type"):
        from mpi4py import MPI

        shared = comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            return int(shared.Get_rank())
        finally:
            shared.Free()
    for name in LOCAL_RANK_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return int(comm.Get_rank())


def use_local_device(comm: Any = None) -> int:
    """Make this rank's GPU the current CuPy device: the host-local rank modulo the GPUs on
    the host (collective). Call it before building GPU matrices; returns the device id."""
    import cupy

    device = local_rank(comm) % cupy.cuda.runtime.getDeviceCount()
    cupy.cuda.Device(device).use()
    return device
