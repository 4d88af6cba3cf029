"""A scaling model of distributed SpMV (:class:`sparsegpu.distributed.DistributedCSR`): how
strong and weak scaling hold on 2 to 64 GPUs, from the matrix's own halo volume, the links'
bandwidth and latency, and the single-GPU product's measured time.

The model, per rank r of a row partition balanced by nonzeros (the one DistributedCSR uses):

- **local time**: the single-GPU product's time scaled by the rank's share of the bytes it
  reads (values and column indices of its entries, its row pointers and its piece of y, and
  the x entries it gathers), ``t1 * bytes_r / bytes``;
- **halo time**: per peer, the x entries it sends or receives (the larger of the two: both
  directions run at once); peers on the same node over NVLink, others over InfiniBand
  (``gpus_per_node`` per node). The exchange is one group of NCCL sends and receives, so each
  link type costs one latency plus its messages' bytes over its bandwidth (the rank's port
  is shared), the two link types at once;
- **packing**: the entries it sends, read and written once at the device's bandwidth.

The product waits for its halo (one product over [local x | halo x] keeps each row's sum in
the single-process order), so a rank's time is local + halo + packing, and the product's is
the slowest rank's. Strong scaling divides one matrix over p GPUs; weak scaling grows the
matrix with p (a generated family at p times the rows) and compares with one GPU on the
p = 1 matrix.

>>> import scipy.sparse as sp
>>> from sparsegpu import datasets
>>> S = datasets.poisson2d(64)
>>> row = predict(S, 4, spmv_seconds=1e-4)
>>> row["ranks"], row["halo_entries_max"], 0 < row["speedup"] < 4
(4, 128, True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu.distributed.partition import balanced_offsets


@dataclass(frozen=True)
class Link:
    """A link between two GPUs: bandwidth per direction (bytes/s) and one message's latency (s)."""

    name: str
    bandwidth: float
    latency: float


#: Two H200s over NVLink (NV18): 303 GB/s each way measured with NCCL send/recv (256 MiB); the
#: latency is NCCL's point-to-point latency over NVLink, about 10 microseconds.
NVLINK = Link("nvlink", 303e9, 10e-6)
#: One NDR InfiniBand port (400 Gb/s) per GPU, as on current GPU nodes; about 15 microseconds a
#: message through NCCL.
INFINIBAND = Link("infiniband", 48e9, 15e-6)
#: The device's bandwidth for packing: the H200's measured copy ceiling.
DEVICE_BANDWIDTH = 4235e9


def halo_counts(S: sp.csr_array, offsets: np.ndarray) -> np.ndarray:
    """``counts[r, q]``: the distinct columns of rank r's rows owned by rank q (q != r), the x
    entries q sends r each product (a square matrix, columns partitioned as rows)."""
    S = sp.csr_array(S)
    ranks = offsets.size - 1
    counts = np.zeros((ranks, ranks), dtype=np.int64)
    for r in range(ranks):
        block = S.indices[S.indptr[offsets[r]]:S.indptr[offsets[r + 1]]]
        columns = np.unique(block)
        owner = np.searchsorted(offsets, columns, side="right") - 1
        counts[r] = np.bincount(owner[owner != r], minlength=ranks)
    return counts


def rank_bytes(S: sp.csr_array, offsets: np.ndarray, counts: np.ndarray, value_bytes: int, index_bytes: int) -> np.ndarray:
    """The bytes each rank's product reads and writes."""
    rows = np.diff(offsets)
    nnz = np.diff(np.asarray(S.indptr, dtype=np.int64)[offsets])
    x_entries = rows + counts.sum(axis=1)  # its own x and the halo
    return nnz * (value_bytes + index_bytes) + rows * (index_bytes + value_bytes) + x_entries * value_bytes


def predict(S: sp.csr_array, ranks: int, spmv_seconds: float, *, gpus_per_node: int = 8, nvlink: Link = NVLINK,
            network: Link = INFINIBAND, device_bandwidth: float = DEVICE_BANDWIDTH) -> dict[str, Any]:
    """The model's time of one distributed product of ``S`` on ``ranks`` GPUs, given
    ``spmv_seconds``, the measured single-GPU product of all of ``S``.

    Returns a dict: ``ranks``, ``seconds``, ``speedup`` (``spmv_seconds`` over it),
    ``efficiency`` (speedup over ranks), ``local_s``, ``halo_s`` and ``pack_s`` of the slowest
    rank, ``halo_entries_max`` (most x entries a rank receives) and ``halo_bytes_total``.
    """
    value_bytes, index_bytes = S.dtype.itemsize, S.indices.dtype.itemsize
    offsets = balanced_offsets(S.indptr, ranks)
    counts = halo_counts(S, offsets)
    one = rank_bytes(S, np.array([0, S.shape[0]]), np.zeros((1, 1), dtype=np.int64), value_bytes, index_bytes)[0]
    local = spmv_seconds * rank_bytes(S, offsets, counts, value_bytes, index_bytes) / max(one, 1)
    node = np.arange(ranks) // gpus_per_node
    halo = np.zeros(ranks)
    for r in range(ranks):
        traffic = np.maximum(counts[r], counts[:, r]) * value_bytes  # receive from q, send to q
        peers = traffic > 0
        times = []
        for link, on_link in ((nvlink, node == node[r]), (network, node != node[r])):
            chosen = peers & on_link
            times.append(bool(chosen.any()) * link.latency + traffic[chosen].sum() / link.bandwidth)
        halo[r] = max(times)
    pack = 2 * counts.sum(axis=0) * value_bytes / device_bandwidth  # entries each rank sends
    total = local + halo + pack
    slowest = int(np.argmax(total))
    seconds = float(total[slowest])
    return {"ranks": ranks, "seconds": seconds, "speedup": spmv_seconds / seconds,
            "efficiency": spmv_seconds / seconds / ranks, "local_s": float(local[slowest]),
            "halo_s": float(halo[slowest]), "pack_s": float(pack[slowest]),
            "halo_entries_max": int(counts.sum(axis=1).max()), "halo_bytes_total": int(counts.sum() * value_bytes)}


def strong_scaling(S: sp.csr_array, spmv_seconds: float, ranks: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
                   **links: Any) -> list[dict[str, Any]]:
    """:func:`predict` of one matrix on each rank count."""
    return [predict(S, p, spmv_seconds, **links) for p in ranks]


def weak_scaling(make: Callable[[int], sp.csr_array], spmv_seconds: float,
                 ranks: Sequence[int] = (1, 2, 4, 8), **links: Any) -> list[dict[str, Any]]:
    """:func:`predict` of ``make(p)`` (p times the rows of ``make(1)``) on p GPUs, each rank's
    local time taken as the single-GPU ``spmv_seconds`` of ``make(1)`` scaled by its bytes; the
    efficiency is the one-GPU time over the p-GPU time."""
    rows = []
    base = make(1)
    one = rank_bytes(base, np.array([0, base.shape[0]]), np.zeros((1, 1), dtype=np.int64),
                     base.dtype.itemsize, base.indices.dtype.itemsize)[0]
    for p in ranks:
        S = make(p)
        scaled = rank_bytes(S, np.array([0, S.shape[0]]), np.zeros((1, 1), dtype=np.int64),
                            S.dtype.itemsize, S.indices.dtype.itemsize)[0]
        row = predict(S, p, spmv_seconds * scaled / one, **links)  # one GPU would take this long on S
        row["efficiency"] = spmv_seconds / row["seconds"]
        rows.append(row)
    return rows


def format_rows(rows: Sequence[dict[str, Any]]) -> str:
    """A text table of :func:`strong_scaling` or :func:`weak_scaling` rows.

    >>> print(format_rows([{"ranks": 2, "seconds": 1e-4, "speedup": 1.9, "efficiency": 0.95, "local_s": 9e-5,
    ...                     "halo_s": 1e-5, "pack_s": 0.0, "halo_entries_max": 10, "halo_bytes_total": 160}]))
    GPUs  time us  speedup  efficiency  local us  halo us  pack us  halo entries (max)
    2     100.0    1.90     0.95        90.0      10.0     0.0      10
    """
    header = ["GPUs", "time us", "speedup", "efficiency", "local us", "halo us", "pack us", "halo entries (max)"]
    table = [header] + [[str(r["ranks"]), f"{r['seconds'] * 1e6:.1f}", f"{r['speedup']:.2f}", f"{r['efficiency']:.2f}",
                         f"{r['local_s'] * 1e6:.1f}", f"{r['halo_s'] * 1e6:.1f}", f"{r['pack_s'] * 1e6:.1f}",
                         str(r["halo_entries_max"])] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in table)
