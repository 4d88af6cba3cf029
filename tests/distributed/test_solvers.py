"""Distributed CG, BiCGSTAB and GMRES: converge to the tolerance within one iteration of the one-process solver,
the same decisions on every rank."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu.distributed import DistributedCSR, DistributedVector
from sparsegpu.distributed.solvers import bicgstab, block_jacobi, cg, gmres
from tests.distributed.conftest import check_all, raises_everywhere
from tests.distributed.matrices import vector


def iterations(solver, *args, **kwargs):
    count = [0]
    result = solver(*args, callback=lambda x: count.__setitem__(0, count[0] + 1), **kwargs)
    return result, count[0]


def spd(rng, n):
    """A random well-conditioned SPD matrix whose rows reach across the whole range."""
    R = sp.random(n, n, density=8 / n, random_state=rng, format="csr")
    S = sp.csr_array(R @ R.T + sp.diags(np.full(n, 4.0)))
    return S


@pytest.mark.parametrize("M", [None, "jacobi"])
@pytest.mark.parametrize("reorder", [False, True])
def test_cg_matches_the_one_process_solver(comm, shared_rng, M, reorder):
    S = spd(shared_rng, 400) if not reorder else sp.csr_array(datasets.poisson2d(20) + sp.diags(np.full(400, 0.1)))
    b = vector(shared_rng, 400)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu", reorder=reorder)
    (x, info), count = iterations(cg, A, b, rtol=1e-10, M=M)
    one_M = None if M is None else sparsegpu.linalg.jacobi(sparsegpu.from_scipy(S, backend="cpu"))
    (_, info1), count1 = iterations(sparsegpu.linalg.cg, sparsegpu.from_scipy(S, backend="cpu"), b, rtol=1e-10,
                                     M=one_M)
    full = x.allgather()
    check_all(comm, info == 0 and info1 == 0, "both converge")
    check_all(comm, np.linalg.norm(S @ full - b) <= 1e-10 * np.linalg.norm(b) * 1.0001, "to the tolerance")
    check_all(comm, abs(count - count1) <= 1, f"iterations {count} vs one process {count1}")
    check_all(comm, len(set(comm.allgather(count))) == 1, "the same iteration count on every rank")
    again, _ = cg(A, b, rtol=1e-10, M=M)
    check_all(comm, np.array_equal(again.local, x.local), "a second run repeats bit for bit")


def test_cg_x0_maxiter_zero_rhs_and_callable_preconditioner(comm, shared_rng):
    S = spd(shared_rng, 300)
    b = vector(shared_rng, 300)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    x, info = cg(A, b, maxiter=2, rtol=1e-12)
    check_all(comm, info == 2, "not converged in 2 iterations: info is the count")
    x2, info2 = cg(A, DistributedVector.from_global(b, A.row_partition, backend="cpu"), x0=x, rtol=1e-10)
    check_all(comm, info2 == 0 and np.linalg.norm(S @ x2.allgather() - b) <= 1.0001e-10 * np.linalg.norm(b),
              "restarted from x0")
    zero, info0 = cg(A, np.zeros(300))
    check_all(comm, info0 == 0 and not np.any(zero.local), "zero right-hand side")
    inverse = 1.0 / A.diagonal()
    x3, info3 = cg(A, b, rtol=1e-10, M=lambda r: inverse * r)
    x4, _ = cg(A, b, rtol=1e-10, M="jacobi")
    check_all(comm, info3 == 0 and np.array_equal(x3.local, x4.local), "a callable Jacobi is M='jacobi'")
    raises_everywhere(comm, TypeError, cg, S, b)
    raises_everywhere(comm, TypeError, cg, A, b, M=3)
    raises_everywhere(comm, ValueError, cg, A, b, rtol=-1.0)
    raises_everywhere(comm, ValueError, cg, A, np.ones(299))


def nonsymmetric(rng, n):
    """A random diagonally dominant nonsymmetric matrix whose rows reach across the range."""
    R = sp.random(n, n, density=6 / n, random_state=rng, format="csr")
    return sp.csr_array(R + sp.diags(np.full(n, 3.0) + np.asarray(abs(R).sum(axis=1)).ravel()))


@pytest.mark.parametrize("M", [None, "jacobi"])
def test_bicgstab_matches_the_one_process_solver(comm, shared_rng, M):
    S = nonsymmetric(shared_rng, 400)
    b = vector(shared_rng, 400)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    (x, info), count = iterations(bicgstab, A, b, rtol=1e-10, M=M)
    one = sparsegpu.from_scipy(S, backend="cpu")
    one_M = None if M is None else sparsegpu.linalg.jacobi(one)
    (_, info1), count1 = iterations(sparsegpu.linalg.bicgstab, one, b, rtol=1e-10, M=one_M)
    check_all(comm, info == 0 and info1 == 0, "both converge")
    check_all(comm, np.linalg.norm(S @ x.allgather() - b) <= 1.0001e-10 * np.linalg.norm(b), "to the tolerance")
    check_all(comm, abs(count - count1) <= 1, f"iterations {count} vs one process {count1}")
    again, _ = bicgstab(A, b, rtol=1e-10, M=M)
    check_all(comm, np.array_equal(again.local, x.local), "a second run repeats bit for bit")
    _, info2 = bicgstab(A, b, rtol=1e-14, maxiter=2)
    check_all(comm, info2 == 2, "not converged in 2 iterations: info is the count")
    raises_everywhere(comm, ValueError, bicgstab, A, np.ones(399))


@pytest.mark.parametrize("restart", [5, 30])
def test_gmres_converges_and_repeats(comm, shared_rng, restart):
    S = nonsymmetric(shared_rng, 400)
    b = vector(shared_rng, 400)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    for M in (None, "jacobi", block_jacobi(A, 8)):
        x, info = gmres(A, b, rtol=1e-10, restart=restart, M=M)
        check_all(comm, info == 0, "converges")
        check_all(comm, np.linalg.norm(S @ x.allgather() - b) <= 1.0001e-10 * np.linalg.norm(b), "to the tolerance")
        again, _ = gmres(A, b, rtol=1e-10, restart=restart, M=M)
        check_all(comm, np.array_equal(again.local, x.local), "a second run repeats bit for bit")
    _, info = gmres(A, b, rtol=1e-15, restart=2, maxiter=1)
    check_all(comm, info == 1, "one cycle, not converged: info is the cycles")
    raises_everywhere(comm, ValueError, gmres, A, b, restart=0)


def test_block_jacobi_blocks_stay_inside_ranks(comm, shared_rng):
    S = spd(shared_rng, 300)
    b = vector(shared_rng, 300)
    A = DistributedCSR.from_scipy(S if comm.Get_rank() == 0 else None, comm, backend="cpu")
    M = block_jacobi(A, 7)
    r = DistributedVector.from_global(b, A.row_partition, backend="cpu")
    local = sparsegpu.linalg.block_jacobi(A.local_block, 7) @ r.local if A.row_partition.local_size else r.local
    check_all(comm, np.array_equal(M(r).local, local), "each rank applies its own blocks")
    x, info = cg(A, b, rtol=1e-10, M=M)
    check_all(comm, info == 0 and np.linalg.norm(S @ x.allgather() - b) <= 1.0001e-10 * np.linalg.norm(b),
              "cg with block Jacobi converges")
    raises_everywhere(comm, TypeError, block_jacobi, A, 2.5)
