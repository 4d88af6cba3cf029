"""Fixtures for tests that run at once on every rank of ``mpiexec -n K python -m pytest tests/distributed``
(and on one process under plain pytest, with or without mpi4py).

Rules that keep a multi-rank run from hanging: every rank collects the same tests and makes the
same skips; random inputs come from a seed broadcast by rank 0 (:func:`shared_rng`); a check
that may differ between ranks goes through :func:`check_all`, so it fails on every rank at
once. As a last guard, every rank waits for the others after each test on a communicator of
its own; a rank still waiting after :data:`STRAGGLER_SECONDS` (another rank stuck in a
collective the first never joined) aborts the whole job instead of hanging it.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from sparsegpu.distributed import world

COMM = world()
STRAGGLER_SECONDS = 120.0
_HARNESS = COMM.Dup() if hasattr(COMM, "Dup") else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield
    if _HARNESS is None or _HARNESS.Get_size() == 1:
        return
    request = _HARNESS.Ibarrier()
    deadline = time.monotonic() + STRAGGLER_SECONDS
    while not request.Test():
        if time.monotonic() > deadline:
            print(f"rank {COMM.Get_rank()}: the other ranks never finished {item.nodeid}; aborting", flush=True)
            from mpi4py import MPI

            MPI.COMM_WORLD.Abort(1)
        time.sleep(0.001)


@pytest.fixture
def comm():
    return COMM


@pytest.fixture
def shared_rng(request, comm) -> np.random.Generator:
    """A fresh generator seeded alike on every rank (rank 0's seed; in the report on failure)."""
    seed = comm.bcast(int.from_bytes(os.urandom(4), "little") if comm.Get_rank() == 0 else None, root=0)
    request.node.user_properties.append(("seed", seed))
    print(f"random seed: {seed}")
    return np.random.default_rng(seed)


def check_all(comm, ok, what: str) -> None:
    """Assert ``ok`` on every rank: all ranks pass or all fail, naming the ranks where it failed."""
    flags = comm.allgather(bool(ok))
    failed = [rank for rank, flag in enumerate(flags) if not flag]
    assert not failed, f"{what}: failed on ranks {failed} of {len(flags)}"


def raises_everywhere(comm, error, fn, *args, **kwargs):
    """Call ``fn``; check on every rank that it raised ``error`` (a type or a tuple of types) on
    every rank; return the message."""
    name = error.__name__ if isinstance(error, type) else " or ".join(e.__name__ for e in error)
    try:
        fn(*args, **kwargs)
    except error as caught:
        check_all(comm, True, f"{fn.__name__} raised {name}")
        return str(caught)
    except Exception as caught:  # noqa: BLE001 (reported through the collective check)
        check_all(comm, False, f"{fn.__name__} raised {type(caught).__name__} ({caught}), not {name}")
    check_all(comm, False, f"{fn.__name__} did not raise {name}")
    return ""
