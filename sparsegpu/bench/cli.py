"""``python -m sparsegpu.bench``: the comparison command (see ``python -m sparsegpu.bench -h``)."""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import scipy

import sparsegpu
from sparsegpu import datasets
from sparsegpu._backend import resolve_backend
from sparsegpu.bench import analytics as analytics_bench
from sparsegpu.bench import first_call
from sparsegpu.bench import graphs as graphs_bench
from sparsegpu.bench import spgemm as spgemm_bench
from sparsegpu.bench import spmm as spmm_bench
from sparsegpu.bench import primitives as primitives_bench
from sparsegpu.bench import report, solvers, spmv, timing
from sparsegpu.bench import transfer as transfer_bench

#: The matrices the SpMV performance targets name, at the sizes they name.
TARGETS = ("poisson2d:large", "stencil27:large", "rmat:large", "random_uniform:large", "lower_triangular:medium")
GROUPS = ("all", "real", "generated", "targets")
PRIMITIVE_N = {"small": 1 << 16, "medium": 1 << 28, "large": 1 << 28}
CG_GRIDS = {"small": (32,), "medium": solvers.TARGET_GRIDS, "large": solvers.TARGET_GRIDS}

EPILOG = "\n\n".join(textwrap.fill(paragraph, 90) for paragraph in [
    f"matrices: real matrix names ({len(datasets.real_matrix_names())} found), generated families "
    f"({', '.join(datasets.GENERATED)}) at --size or as FAMILY:SIZE, or the groups real, generated, all "
    f"(default) and targets ({', '.join(TARGETS)}).",
    "Effective GB/s = sparsegpu.bench.bytes_model.spmv_bytes / time (nonzeros only, padding never counts). "
    "Every result is checked against SciPy before it is timed; WRONG results are never timed. Exit "
    "status 1 when any result is WRONG or raised an error.",
])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sparsegpu.bench", description="SpMV of every sparsegpu format side by side with "
        "cupyx (cuSPARSE) and the device copy ceiling; primitives, CG and call overhead on request.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrices", nargs="+", default=["all"], metavar="NAME",
                        help="matrices, families or groups (comma or space separated; default: all)")
    parser.add_argument("--formats", default="all", help="comma-separated sparsegpu formats (default: all registered)")
    parser.add_argument("--dtype", default="float64", choices=["float32", "float64", "complex64", "complex128"])
    parser.add_argument("--size", choices=datasets.SIZES, help="preset of generated families "
                        "(default: medium on the GPU, small on the CPU)")
    parser.add_argument("--repeat", type=int, default=20, help="timed samples per product (median reported)")
    parser.add_argument("--out", type=Path, default=Path("results/bench"), help="folder for bench.json and bench.png")
    parser.add_argument("--backend", choices=["cpu", "gpu"], help="default: the active backend")
    parser.add_argument("--seed", type=int, default=0, help="seed of random families and x vectors")
    parser.add_argument("--no-spmv", action="store_true", help="skip the SpMV comparison")
    parser.add_argument("--primitives", action="store_true", help="scan, reduce, histogram vs the array library's")
    parser.add_argument("--cg", action="store_true", help="CG per iteration vs cupyx and SciPy (2-D Poisson)")
    parser.add_argument("--python-overhead", action="store_true", help="host cost of one A @ x and one "
                        "A.spmv(x, y) call per format, 1000-row matrix, vs cupyx")
    parser.add_argument("--first-call", action="store_true", help="per format, from_scipy + A @ x in a fresh process "
                        "with empty kernel caches (a fresh machine's first call), and the same call again")
    parser.add_argument("--transfer", action="store_true", help="streamed upload (pinned, pageable) vs cupyx and the "
                        "H2D rate, and out-of-core SpMV, on a 2.48 GB CSR (20M rows at --size medium/large)")
    parser.add_argument("--graphs", nargs="*", metavar="GRAPH", help="instead of SpMV: sparsegpu.csgraph vs SciPy, "
                        "a CuPy baseline and python-graphblas on the --size preset graphs, or those named "
                        f"({', '.join(f'{f}:N' for f in graphs_bench.FAMILIES)}, real graph names)")
    parser.add_argument("--analytics", nargs="*", metavar="GRAPH", help="instead of SpMV: PageRank, triangles, "
                        "betweenness, k-core, Louvain and Jaccard vs NetworkX, python-graphblas, SciPy and CuPy on the "
                        "--size preset graphs, or those named")
    parser.add_argument("--analytics-functions", default=",".join(analytics_bench.FUNCTIONS),
                        help="comma-separated functions for --analytics (default: all)")
    parser.add_argument("--networkx-backend", action="store_true", help="nx.pagerank on Kronecker 18 and "
                        "nx.betweenness_centrality(k=64) on ego-Twitter, backend='sparsegpu' vs NetworkX's own")
    parser.add_argument("--spmm", action="store_true", help="sparse times dense A @ X (k = 4, 16, 64; X in C and "
                        "F order) vs cupyx on --matrices")
    parser.add_argument("--spgemm", action="store_true", help="sparse times sparse A @ A and A.T @ A vs cupyx, "
                        "time and peak memory, on the real matrices, R-MAT 18 and 20, stencils and a 50k x 5k case")
    parser.add_argument("--graph-functions", default=",".join(graphs_bench.FUNCTIONS),
                        help="comma-separated functions for --graphs (default: all)")
    return parser.parse_args(argv)


def resolve_matrices(items: Sequence[str], size: str) -> list[str]:
    """Matrix labels to run, in order, without repeats: real names, ``family:size`` for
    generated ones. Unknown names raise ValueError listing what exists."""
    real = datasets.real_matrix_names()
    labels: list[str] = []
    for item in (part for chunk in items for part in chunk.split(",") if part):
        if item in ("real", "all"):
            labels += real
        if item in ("generated", "all"):
            labels += [f"{family}:{size}" for family in datasets.GENERATED]
        if item == "targets":
            labels += TARGETS
        if item in GROUPS:
            continue
        family, _, own_size = item.partition(":")
        if family in datasets.GENERATED:
            if own_size and own_size not in datasets.SIZES:
                raise ValueError(f"{item!r}: size must be one of {', '.join(datasets.SIZES)}")
            labels.append(f"{family}:{own_size or size}")
        elif item in real:
            labels.append(item)
        else:
            raise ValueError(f"unknown matrix {item!r}; groups: {', '.join(GROUPS)}; families: "
                             f"{', '.join(datasets.GENERATED)}; real: {', '.join(real) or 'none found'}")
    return list(dict.fromkeys(labels))


def resolve_formats(spec: str) -> list[str]:
    """Format names from ``"all"`` or a comma-separated list, CSR first."""
    known = list(sparsegpu.SparseMatrix.formats)
    wanted = known if spec == "all" else [f.strip().lower() for f in spec.split(",") if f.strip()]
    unknown = [f for f in wanted if f not in known]
    if unknown:
        raise ValueError(f"unknown format(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return sorted(dict.fromkeys(wanted), key=lambda f: (f != "csr", known.index(f)))


def device_name(backend: str) -> str:
    if backend != "gpu":
        return f"CPU ({platform.processor() or platform.machine()})"
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


@contextmanager
def progress(total: int) -> Iterator[Any]:
    """A progress bar on stderr (rich, else tqdm, else none) with ``step(text)`` and
    ``advance()``."""
    class Quiet:
        def step(self, text: str) -> None:
            pass

        def advance(self) -> None:
            pass

    try:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:
        try:
            from tqdm import tqdm
        except ImportError:
            yield Quiet()
            return
        bar = tqdm(total=total, file=sys.stderr)

        class Tqdm(Quiet):
            def step(self, text: str) -> None:
                bar.set_description(text)

            def advance(self) -> None:
                bar.update(1)

        try:
            yield Tqdm()
        finally:
            bar.close()
        return
    with Progress(TextColumn("{task.description:<42}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True)) as bar:
        task = bar.add_task("starting", total=total)

        class Rich(Quiet):
            def step(self, text: str) -> None:
                bar.update(task, description=text)

            def advance(self) -> None:
                bar.advance(task)

        yield Rich()


def run_spmv(labels: Sequence[str], formats: Sequence[str], args: argparse.Namespace, backend: str,
             copy_gbps: float | None) -> list[dict[str, Any]]:
    """:func:`spmv.bench_matrix` on each matrix (labels as :func:`resolve_matrices` gives)."""
    results = []
    l2 = timing.l2_bytes(backend)
    with progress(len(labels)) as bar:
        for label in labels:
            bar.step(f"{label}: building")
            start = time.perf_counter()
            try:
                S = datasets.matrix(label, seed=args.seed)
                build_s = time.perf_counter() - start
                result = spmv.bench_matrix(S, formats, args.dtype, backend, args.repeat, l2, args.seed,
                                           on_step=lambda impl, label=label: bar.step(f"{label}: {impl}"))
            except Exception as exc:  # a matrix that cannot be built or uploaded is reported, the run goes on
                results.append({"matrix": label, "error": f"{type(exc).__name__}: {exc}"})
                bar.advance()
                continue
            report.enrich(result, copy_gbps)
            source = "generated" if label.partition(":")[0] in datasets.GENERATED else "real"
            results.append({"matrix": label, "source": source, "build_s": build_s, **result})
            bar.advance()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        backend = resolve_backend(args.backend)
        size = args.size or ("medium" if backend == "gpu" else "small")
        other = (args.graphs is not None or args.analytics is not None or args.networkx_backend or args.spmm
                 or args.spgemm)
        labels = [] if args.no_spmv or other else resolve_matrices(args.matrices, size)
        graph_names = [] if args.graphs is None else graphs_bench.resolve_graphs(args.graphs, size)
        graph_functions = graphs_bench.resolve_functions([args.graph_functions])
        analytics_names = ([] if args.analytics is None else
                           graphs_bench.resolve_graphs(args.analytics or list(analytics_bench.SIZES[size]), size))
        analytics_functions = analytics_bench.resolve_functions([args.analytics_functions])
        formats = resolve_formats(args.formats)
    except (ValueError, sparsegpu.BackendError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    payload: dict[str, Any] = {"meta": {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python -m sparsegpu.bench", *(argv if argv is not None else sys.argv[1:])]),
        "backend": backend, "device": device_name(backend), "dtype": args.dtype, "size": size,
        "repeat": args.repeat, "seed": args.seed, "formats": formats, "baseline": spmv.baseline_name(backend),
        "versions": {"sparsegpu": sparsegpu.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
                     "python": platform.python_version()},
    }}
    if backend == "gpu":
        import cupy

        payload["meta"]["versions"]["cupy"] = cupy.__version__
    payload["ceiling"] = timing.copy_ceiling(backend, repeat=args.repeat)
    copy_gbps = (payload["ceiling"] or {}).get("gbps")
    if labels:
        payload["spmv"] = run_spmv(labels, formats, args, backend, copy_gbps)
    if args.primitives:
        payload["primitives"] = primitives_bench.bench_primitives(backend, PRIMITIVE_N[size], args.repeat, args.seed)
    if args.cg:
        payload["cg"] = solvers.bench_cg(backend, CG_GRIDS[size], iterations=50 if backend == "gpu" else 10)
        compared = solvers.linalg_compare_cg(CG_GRIDS[size]) if backend == "gpu" else None
        if compared is not None:
            payload["cg_linalg"] = compared
    if args.python_overhead:
        payload["python_overhead"] = spmv.python_overhead(backend)
    if args.first_call:
        payload["first_call"] = first_call.first_calls(formats, backend)
    if args.transfer:
        with progress(1) as bar:
            payload["transfer"] = transfer_bench.bench_transfer(backend, transfer_bench.ROWS[size], repeat=5,
                                                                seed=args.seed, on_step=bar.step)
            bar.advance()
    if graph_names:
        with progress(len(graph_names)) as bar:
            payload["graphs"] = graphs_bench.bench_graphs(graph_names, backend, graph_functions,
                                                          repeat=args.repeat, seed=args.seed, on_step=bar.step,
                                                          on_graph=bar.advance)
    if args.spmm:
        spmm_labels = resolve_matrices(args.matrices, size)
        payload["spmm"] = spmm_bench.run_spmm(spmm_labels, formats=[f for f in formats if f in ("csr", "ell", "sell")],
                                              backend=backend, repeat=args.repeat, seed=args.seed,
                                              on_row=lambda row: _progress_line(spmm_bench.format_results([row])))
    if args.spgemm:
        payload["spgemm"] = spgemm_bench.run_spgemm(spgemm_bench.suite(), backend=backend, repeat=5,
                                                    on_row=lambda row: _progress_line(spgemm_bench.format_rows([row])))
    if analytics_names:
        with progress(len(analytics_names)) as bar:
            payload["analytics"] = analytics_bench.bench_analytics(analytics_names, backend, analytics_functions,
                                                                   repeat=args.repeat, seed=args.seed,
                                                                   on_step=bar.step, on_row=print_row)
    if args.networkx_backend:
        with progress(1) as bar:
            payload["networkx_backend"] = analytics_bench.bench_networkx_backend(seed=args.seed, on_step=bar.step)
    args.out.mkdir(parents=True, exist_ok=True)
    report.write_json(args.out / "bench.json", payload)
    charted = bool(payload.get("spmv")) and report.plot_spmv(args.out / "bench.png", payload)
    report.print_tables(payload)
    for compared in payload.get("cg_linalg", []):
        print(f"\nsparsegpu.bench.solvers.compare_cg: {compared}")
    if "first_call" in payload:
        print("\nFirst call on a fresh machine\n" + first_call.format_first_calls(payload["first_call"]))
    if "transfer" in payload:
        transfer_bench.print_transfer(payload["transfer"])
    if "graphs" in payload:
        graphs_bench.print_graphs(payload["graphs"])
    if "spmm" in payload:
        print("\nSparse times dense\n" + spmm_bench.format_results(payload["spmm"]))
    if "spgemm" in payload:
        print("\nSparse times sparse\n" + spgemm_bench.format_rows(payload["spgemm"]))
    if "analytics" in payload:
        analytics_bench.print_analytics(payload["analytics"])
    if "networkx_backend" in payload:
        analytics_bench.print_networkx_backend(payload["networkx_backend"])
    bad = (failures(payload) + transfer_bench.failures(payload.get("transfer"))
           + graphs_bench.failures(payload.get("graphs")) + analytics_bench.failures(payload.get("analytics")))
    if bad:
        print(f"\nWRONG or failed: {', '.join(bad)}")
    print(f"\nwrote {args.out / 'bench.json'}" + (f" and {args.out / 'bench.png'}" if charted else ""))
    if payload.get("spmv") and not charted:
        print(f"skipped {args.out / 'bench.png'}: matplotlib is not installed "
              f"(python3 -m pip install \"sparsegpu[plot]\")")
    return 1 if bad else 0


def _progress_line(table: str) -> None:
    """A one-row table's row (its header dropped), printed at once."""
    print(table.splitlines()[-1], flush=True)


def print_row(row: dict[str, Any]) -> None:
    """An analytics row as soon as it is done (a long run shows its figures as it goes)."""
    print(analytics_bench.row_line(row), flush=True)


def failures(payload: dict[str, Any]) -> list[str]:
    """``"matrix/implementation"`` for every WRONG or failed result in the payload."""
    bad = []
    for r in payload.get("spmv", []):
        if "error" in r:
            bad.append(f"{r['matrix']}/build")
        bad += [f"{r['matrix']}/{impl}" for impl, o in r.get("outcomes", {}).items() if o["status"] in ("wrong", "error")]
    bad += [f"first_call/{r['format']}" for r in payload.get("first_call", []) if r["status"] != "ok"]
    for section in ("primitives", "cg"):
        bad += [f"{section}/{r.get('op', r.get('matrix'))}/{r['impl']}" for r in payload.get(section, [])
                if r["status"] in ("wrong", "error")]
    return bad
