"""Distributed sparse matrices and vectors over MPI: one process per GPU (or per CPU core).

Launch a script with ``mpirun -n K python script.py``; every process runs it and builds its
part of each matrix. :class:`DistributedCSR` splits rows over the ranks (balanced by nonzeros)
and ``A @ x`` exchanges halo entries (NCCL between GPUs, mpi4py with host buffers otherwise)
and is bitwise equal to the single-process product. :class:`DistributedVector` holds one
rank's slice with the dot products and updates a Krylov solver needs; :func:`cg` solves
with SciPy's signature. Without mpi4py, :func:`world` gives a one-process communicator, so
the same code runs on one process.

>>> import numpy as np, scipy.sparse as sp
>>> from sparsegpu.distributed import DistributedCSR, world
>>> comm = world()
>>> S = sp.random(40, 40, density=0.1, random_state=0, format="csr")
>>> A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
>>> y = (A @ np.ones(40)).gather()
>>> comm.Get_rank() != 0 or bool(np.array_equal(y, S @ np.ones(40)))
True
"""

from __future__ import annotations

from sparsegpu.distributed._comm import SerialComm, world
from sparsegpu.distributed.devices import local_rank, use_local_device
from sparsegpu.distributed.graphs import breadth_first_levels, pagerank
from sparsegpu.distributed.matrix import DistributedCSR
from sparsegpu.distributed.partition import Partition, balanced_offsets
from sparsegpu.distributed.solvers import bicgstab, block_jacobi, cg, gmres
from sparsegpu.distributed.vector import DistributedVector

__all__ = ["DistributedCSR", "DistributedVector", "Partition", "SerialComm", "balanced_offsets", "bicgstab", "block_jacobi", "breadth_first_levels", "cg", "gmres", "local_rank",
           "pagerank", "use_local_device", "world"]
