#!/usr/bin/env python3
"""Where one GPU ``A @ A`` spends its time: each phase of sparsegpu's SpGEMM timed with the
device synchronised around it, then the whole call and cupyx's (median of ``--repeat``), and
the CuPy pool's high-water mark of each. One table, a row per matrix.

    python3 scripts/profile_spgemm.py                      # the power-law graphs and a few others
    python3 scripts/profile_spgemm.py ego-Twitter rmat:18 poisson2d:1000 stencil27:60
    python3 scripts/profile_spgemm.py --fold-turns -1 ani4_amd_chol   # block folds always in warp turns

Names: real matrices (sparsegpu.datasets, $SPARSEGPU_MATRICES) or generated ones, ``rmat:S``
(R-MAT scale S), ``poisson2d:N``, ``stencil27:N``. The phases (kernels/spgemm.cu,
sparsegpu/formats/_spgemm_device.py): ``plan`` (plan, row lists, the stats read), ``sym <bin>``
(symbolic kernels per bin), ``scan`` (row pointers), ``bins`` (numeric binning and its read, the
listing when a row moved bin, and every row block's listing), ``alloc`` (the output), ``num
<bin>`` (numeric kernels per bin), ``drop`` (the read of the zeros, and when there are some the
kept entries' scan and the compaction). ``--fold-turns``: the block kernels' fold rule
(``FOLD_TURNS``; -1 always warp turns, a large value never; the bits are the same). Bins: w32
(a warp, bound <= 32), b256, b1024, b2048 (a block, hash tables) and wide (a bitmap per row).
Synchronising around each phase adds a few microseconds per phase: their sum exceeds the call.
cupyx's result is checked against ours; the geometric mean counts only the matrices where it is
right.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's package

import numpy as np
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets, primitives
from sparsegpu.bench.spgemm import compare, peak_pool_bytes
from sparsegpu.bench.timing import measure, synchronize
from sparsegpu.formats import _spgemm_device as device
from sparsegpu.formats._spgemm import spgemm
from sparsegpu.reference import spgemm as reference

DEFAULT = ("ego-Twitter", "email-Enron", "as-caida", "tech-WHOIS", "ego-Facebook", "bio-dmela", "cit-HepPh",
           "ani4_amd_chol", "EX5", "Pd", "add32", "poisson2d:1000", "stencil27:60", "rmat:18")
BIN_NAMES = ("w32", "b256", "b1024", "b2048", "wide")
PHASES = ("plan", *(f"sym {b}" for b in BIN_NAMES), "scan", "bins", "alloc", *(f"num {b}" for b in BIN_NAMES),
          "drop")


def load(name: str) -> sp.csr_array:
    """A real matrix by name, or a generated one (``rmat:18``, ``poisson2d:1000``, any
    :func:`sparsegpu.datasets.matrix` name)."""
    return sp.csr_array(datasets.matrix(name))


@contextlib.contextmanager
def phase_timer(sync: Callable[[], None]) -> Iterator[dict[str, float]]:
    """Patch the SpGEMM driver's steps so that each runs between two synchronisations; yields
    the seconds per phase (summed over row blocks), filled while the call runs."""
    seconds: dict[str, float] = defaultdict(float)
    scans = [0]
    saved: list[tuple[Any, str, Any]] = []

    def timed(label: Callable[..., str], fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            name = label(*args, **kwargs)
            if name not in PHASES:  # within a timed phase
                return fn(*args, **kwargs)
            sync()
            start = time.perf_counter()
            out = fn(*args, **kwargs)
            sync()
            seconds[name] += time.perf_counter() - start
            return out
        return wrapper

    def patch(owner: Any, attr: str, label: Callable[..., str]) -> None:
        original = getattr(owner, attr)
        saved.append((owner, attr, original))
        setattr(owner, attr, timed(label, original))

    def scan_label(*_: Any) -> str:  # the kept counts' scan is timed within "drop"
        scans[0] += 1
        return "scan" if scans[0] == 1 else "drop scan"

    def rows_label(_self: Any, bin_id: int, numeric: bool, *_: Any) -> str:
        return f"{'num' if numeric else 'sym'} {BIN_NAMES[bin_id]}"

    patch(device._Device, "plan", lambda *_: "plan")
    patch(device._Device, "rows", rows_label)
    patch(device, "_drop_zeros", lambda *_: "drop")
    patch(device, "_list_block", lambda *_a, **_k: "bins")
    patch(device, "_numeric_lists", lambda *_: "bins")
    patch(device, "_allocate", lambda *_: "alloc")
    patch(primitives, "exclusive_scan", scan_label)
    original_to_host = device.to_host
    reads = [0]

    def to_host(x: Any) -> Any:  # the first read is the plan's (its list and stats belong to it)
        reads[0] += 1
        if reads[0] > 1:
            return original_to_host(x)
        sync()
        start = time.perf_counter()
        out = original_to_host(x)
        seconds["plan"] += time.perf_counter() - start
        return out

    saved.append((device, "to_host", original_to_host))
    device.to_host = to_host
    try:
        yield seconds
    finally:
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)


def plan_summary(S: sp.csr_array) -> dict[str, int]:
    """Products, wide rows (bound past the largest hash table) and their products (host)."""
    products = reference.upper_bounds(S.indptr, S.indices, S.indptr)
    bounds = np.minimum(products, S.shape[1])
    wide = bounds > device.CAPACITIES[-1]
    return {"products": int(products.sum()), "wide_rows": int(wide.sum()), "wide_products": int(products[wide].sum())}


def profile(name: str, S: sp.csr_array, repeat: int) -> dict[str, Any]:
    """One matrix's row of the table."""
    import cupyx.scipy.sparse as cusp

    A = sparsegpu.from_scipy(S, backend="gpu")
    row: dict[str, Any] = {"matrix": name, "n": S.shape[0], "nnz": S.nnz, **plan_summary(S)}
    C = spgemm(A, A)  # compiled and warmed
    row["out_nnz"] = C.nnz
    ours = C.to_scipy()
    del C
    with phase_timer(lambda: synchronize("gpu")) as seconds:
        spgemm(A, A)
    row.update({phase: seconds.get(phase, 0.0) * 1e3 for phase in PHASES})
    row["ours_ms"] = measure(lambda i: spgemm(A, A), "gpu", repeat=repeat, warmup=0).seconds * 1e3
    row["ours_mib"] = peak_pool_bytes(lambda: spgemm(A, A), "gpu") / 2**20
    G = cusp.csr_matrix(S)
    try:
        theirs = sp.csr_array((G @ G).get())
        theirs.sort_indices()
        row["cupyx_status"] = compare(ours, theirs)
        row["cupyx_ms"] = measure(lambda i: G @ G, "gpu", repeat=repeat, warmup=0).seconds * 1e3
        row["cupyx_mib"] = peak_pool_bytes(lambda: G @ G, "gpu") / 2**20
    except Exception as exc:  # cuSPARSE's resource errors among them
        row["cupyx"] = f"{type(exc).__name__}"
    return row


def format_table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table; phases in ms, memory in MiB."""
    header = ["matrix", "n", "products", "wide", *PHASES, "ours", "cupyx", "speedup", "ours MiB", "cupyx MiB",
              "cupyx result"]
    lines = [header]
    for r in rows:
        speedup = r["cupyx_ms"] / r["ours_ms"] if "cupyx_ms" in r else None
        lines.append([r["matrix"], str(r["n"]), f"{r['products']:.3g}", str(r["wide_rows"]),
                      *(f"{r[p]:.2f}" if r[p] else "-" for p in PHASES), f"{r['ours_ms']:.2f}",
                      f"{r['cupyx_ms']:.2f}" if "cupyx_ms" in r else r.get("cupyx", "-"),
                      f"{speedup:.2f}" if speedup else "-", f"{r['ours_mib']:.0f}",
                      f"{r['cupyx_mib']:.0f}" if "cupyx_mib" in r else "-", r.get("cupyx_status", "-")])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in
                               enumerate(zip(line, widths))) for line in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(DEFAULT), help="matrices (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="samples of the whole calls (median)")
    parser.add_argument("--fold-turns", type=int, default=device.FOLD_TURNS,
                        help="the block folds' rule, spans per warp past which warps take turns (default: %(default)s)")
    args = parser.parse_args(argv)
    device.FOLD_TURNS = args.fold_turns
    rows = []
    for name in args.names:
        try:
            S = load(name)
        except FileNotFoundError as exc:
            print(f"{name}: skipped ({exc})", file=sys.stderr)
            continue
        rows.append(profile(name, S, args.repeat))
        print(f"{name}: {rows[-1]['ours_ms']:.2f} ms", file=sys.stderr, flush=True)
    print(format_table(rows))
    ratios = [r["cupyx_ms"] / r["ours_ms"] for r in rows if r.get("cupyx_status") == "ok"]
    if ratios:
        print(f"geomean speedup over cupyx where its result is right: {statistics.geometric_mean(ratios):.2f}x "
              f"({len(ratios)} matrices)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
