"""Where the time of a distributed product goes, one GPU per rank: the whole ``A @ x`` and each
of its phases timed alone.

    mpirun -n 1 python3 scripts/profile_distributed.py poisson2d:3000
    mpirun -n 2 -x NCCL_NVLS_ENABLE=0 python3 scripts/profile_distributed.py poisson2d:3000 stencil27:150 rmat:22

Matrices are named as scripts/time_distributed.py reads them. Options: ``--repeat N`` (samples,
default 50), ``--overlap on|off`` and ``--exchange auto|nccl|mpi`` (as DistributedCSR takes them),
``--backend cpu|gpu``. For each matrix, rank 0 prints the plan (rows, entries, halo entries and
the runs of each rank) and, for each phase, the median over samples of the slowest rank's time,
by CUDA events on the caller's stream (``gpu``) and by the host clock around the call and a
device synchronisation (``host``):

- ``A @ x``: the whole product (``A.matvec(x, out=y)``);
- ``exchange``: the pack and the halo exchange alone (start, then the caller's stream waits);
- ``interior``: the early runs alone (rows without halo entries, from x into y);
- ``lead copy``: copying x next to the halo, where the late rows read it whole;
- ``halo rows``: the late runs alone (rows read after the halo arrives);
- ``enqueue``: the host time of one ``A @ x`` without any synchronisation (its host overhead;
  when it nears the ``gpu`` time the product is bound by the host);
- ``back to back``: 20 products queued without synchronising, then one synchronisation, per
  product (what a solver loop without host reads would see);
- ``enqueue parts``: the host time of each step of one ``A.matvec(x, out=y)`` (median over
  samples, the slowest rank's, no synchronisation): the checks of x and out, the current stream's
  lookup and addresses, ``ready``, the early runs, ``start`` (pack and NCCL group), the lead copy,
  ``finish``, the late runs and ``release``; their sum next to the whole call's;
- ``one-process CSR`` (one rank only): the single-process product of the same matrix.

The phases timed alone do not add up to the whole: the interior rows run while the halo travels.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's package

from time_distributed import matrix_from_name

import sparsegpu
from sparsegpu._backend import array_module, resolve_backend
from sparsegpu.bench.timing import synchronize
from sparsegpu.distributed import (
    DistributedCSR,
    DistributedVector,
    use_local_device,
    world,
)

BACK_TO_BACK = 20


class Timer:
    """Times a call on every rank, by CUDA events (GPU) and the host clock; keeps the slowest
    rank's sample of each."""

    def __init__(self, comm: Any, backend: str, repeat: int) -> None:
        self.comm, self.backend, self.repeat = comm, backend, repeat
        if backend == "gpu":
            import cupy

            self.events = (cupy.cuda.Event(), cupy.cuda.Event())

    def sample(self, call: Any) -> tuple[float, float]:
        """(device seconds or nan, host seconds) of one call, this rank's."""
        self.comm.Barrier()
        start = time.perf_counter()
        if self.backend != "gpu":
            call()
            return float("nan"), time.perf_counter() - start
        import cupy

        begin, end = self.events
        begin.record()
        call()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(begin, end) / 1e3, time.perf_counter() - start

    def median(self, call: Any, per_call: int = 1) -> tuple[float, float]:
        """Medians over the samples of the slowest rank's (device, host) seconds, per call."""
        device, host = [], []
        for index in range(self.repeat + 3):
            on_device, on_host = self.sample(call)
            slowest = self.comm.allgather((on_device, on_host))
            if index >= 3:  # warm-up samples dropped
                device.append(max(d for d, _ in slowest))
                host.append(max(h for _, h in slowest))
        return statistics.median(device) / per_call, statistics.median(host) / per_call

    def enqueue(self, call: Any) -> float:
        """Median of the slowest rank's host time to queue one call, the device idle before it."""
        samples = []
        for index in range(self.repeat + 3):
            synchronize(self.backend)
            self.comm.Barrier()
            start = time.perf_counter()
            call()
            took = time.perf_counter() - start
            synchronize(self.backend)
            if index >= 3:
                samples.append(max(self.comm.allgather(took)))
        return statistics.median(samples)


def describe(A: DistributedCSR) -> list[str]:
    """Each rank's share of the work: rows, entries, halo traffic and runs (on rank 0)."""
    product, plan = A._product, A.halo_plan
    early_rows = sum(stop - first for first, stop, _ in product.early.runs)
    mode = "x whole (lead copy)" if product.lead else f"{0 if product.gathered is None else product.gathered.size} own gathered"
    mine = (f"rank {A.row_partition.rank}: {A.row_partition.local_size:,} rows, {A.local_nnz:,} nnz, "
            f"halo in {int(plan.recv_counts.sum()):,} / out {int(plan.send_counts.sum()):,}, "
            f"{len(product.early.runs)} early runs ({early_rows:,} rows), {len(product.late.runs)} late runs, {mode}")
    return A.comm.gather(mine, root=0) or []


def phases(A: DistributedCSR, x: DistributedVector, y: DistributedVector) -> dict[str, Any]:
    """The calls to time, by name (each queues its work on the current stream)."""
    product, exchanger = A._product, A._exchanger
    x_local, y_local = x.local, y.local

    def exchange() -> None:
        exchanger.ready()
        exchanger.start(x_local)
        exchanger.finish()
        exchanger.release()

    def back_to_back() -> None:
        for _ in range(BACK_TO_BACK):
            A.matvec(x, out=y)

    calls = {"A @ x": lambda: A.matvec(x, out=y), "exchange": exchange,
             "interior": lambda: product.early.multiply(x_local, y_local)}
    if product.lead:
        calls["lead copy"] = lambda: exchanger.lead.__setitem__(Ellipsis, x_local)
    late_x = exchanger.vector if product.n_halo else x_local
    calls["halo rows"] = lambda: product.late.multiply(late_x, y_local)
    calls["back to back"] = back_to_back
    return calls


def enqueue_parts(A: DistributedCSR, x: DistributedVector, y: DistributedVector) -> dict[str, float]:
    """Host seconds of each step of one ``A.matvec(x, out=y)``, taken in the product's own order
    (``ExtendedProduct.multiply``), with no synchronisation."""
    product, exchanger = A._product, A._exchanger
    gpu = product.backend == "gpu"
    clock, parts = time.perf_counter, {}
    start = clock()
    x_local = A._checked_x(x)
    y_local = A._checked_out(y, x_local)
    at = clock()
    parts["checks"], start = at - start, at
    if gpu:
        stream = product._current_stream().ptr
        x_pointer, y_pointer = x_local.data.ptr, y_local.data.ptr
    else:
        stream = x_pointer = y_pointer = None
    late_x = exchanger.vector if product.n_halo else x_local
    late_pointer = (exchanger.vector_pointer if product.n_halo else x_pointer) if gpu else None
    at = clock()
    parts["stream, addresses"], start = at - start, at
    steps = [("ready", lambda: exchanger.ready(stream))]
    if not exchanger.asynchronous:
        steps.append(("start", lambda: exchanger.start(x_local, stream)))
    steps.append(("early runs", lambda: product.early.launch(x_local, x_pointer, y_local, y_pointer, stream)
                  if gpu else product.early.multiply(x_local, y_local)))
    if exchanger.asynchronous:
        steps.append(("start", lambda: exchanger.start(x_local, stream)))
    if product.lead:
        steps.append(("lead copy", lambda: exchanger.copy_lead(x_pointer, stream)
                      if gpu else exchanger.lead.__setitem__(Ellipsis, x_local)))
    steps.append(("finish", lambda: exchanger.finish(stream)))
    steps.append(("late runs", lambda: product.late.launch(late_x, late_pointer, y_local, y_pointer, stream)
                  if gpu else product.late.multiply(late_x, y_local)))
    steps.append(("release", lambda: exchanger.release(stream)))
    for part, step in steps:
        step()
        at = clock()
        parts[part], start = at - start, at
    return parts


def print_enqueue_parts(A: DistributedCSR, x: DistributedVector, y: DistributedVector, timer: Timer) -> None:
    """Rank 0 prints the median host time of each step (the slowest rank's) and their sum."""
    samples: dict[str, list[float]] = {}
    for index in range(timer.repeat + 3):
        synchronize(timer.backend)
        timer.comm.Barrier()
        parts = enqueue_parts(A, x, y)
        slowest = timer.comm.allgather(parts)
        if index >= 3:
            for part in parts:
                samples.setdefault(part, []).append(max(rank[part] for rank in slowest))
    synchronize(timer.backend)
    if timer.comm.Get_rank() == 0:
        medians = {part: statistics.median(values) for part, values in samples.items()}
        print("  enqueue parts (host, no synchronisation):", flush=True)
        for part, seconds in medians.items():
            print(f"    {part:<18} {seconds * 1e6:8.1f} us", flush=True)
        print(f"    {'sum':<18} {sum(medians.values()) * 1e6:8.1f} us", flush=True)


def profile(name: str, comm: Any, backend: str, options: dict[str, Any], repeat: int) -> None:
    root = comm.Get_rank() == 0
    S = matrix_from_name(name) if root else None
    A = DistributedCSR.from_scipy(S, comm, backend=backend, **options)
    x = DistributedVector.from_global(np.random.default_rng(0).standard_normal(A.shape[1]), A.col_partition,
                                      backend=backend)
    y = DistributedVector(array_module(backend).empty(A.row_partition.local_size, A.dtype), A.row_partition)
    lines = describe(A)
    if root:
        print(f"{name}: {A.shape[0]:,} rows, {A.nnz:,} nnz, {comm.Get_size()} rank(s), {backend}, {options}")
        print("\n".join(f"  {line}" for line in lines))
    timer = Timer(comm, backend, repeat)
    for phase, call in phases(A, x, y).items():
        per_call = BACK_TO_BACK if phase == "back to back" else 1
        device, host = timer.median(call, per_call)
        if root:
            print(f"  {phase:<16} gpu {device * 1e3:8.4f} ms   host {host * 1e3:8.4f} ms", flush=True)
    enqueue = timer.enqueue(lambda: A.matvec(x, out=y))
    if root:
        print(f"  {'enqueue':<16} host {enqueue * 1e3:8.4f} ms (no synchronisation)", flush=True)
    print_enqueue_parts(A, x, y, timer)
    if comm.Get_size() == 1:
        single = sparsegpu.CSR.from_scipy(S, backend=backend)
        device, host = timer.median(lambda: single @ x.local)
        print(f"  {'one-process CSR':<16} gpu {device * 1e3:8.4f} ms   host {host * 1e3:8.4f} ms", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("matrices", nargs="+", help="e.g. poisson2d:3000 stencil27:150 rmat:22")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--overlap", choices=("on", "off"), default=None)
    parser.add_argument("--exchange", choices=("auto", "nccl", "mpi"), default="auto")
    parser.add_argument("--backend", choices=("cpu", "gpu"), default=None)
    args = parser.parse_args()
    comm = world()
    backend = resolve_backend(args.backend)
    if backend == "gpu":
        use_local_device(comm)
    options: dict[str, Any] = {"exchange": args.exchange}
    if args.overlap is not None:
        options["overlap"] = args.overlap == "on"
    for name in args.matrices:
        profile(name, comm, backend, options, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
