"""Turning a run's results into a table (rich when installed, plain text otherwise), a JSON file
and a PNG chart (matplotlib with the Agg backend, when installed)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

Table = tuple[str, list[str], list[list[str]]]


def _fmt_gbps(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def spmv_cell(outcome: dict[str, Any], copy_gbps: float | None, baseline_seconds: float | None) -> str:
    """One implementation on one matrix: ``GB/s [% of copy] [x baseline]``, or its status."""
    if outcome["status"] != "ok":
        return {"wrong": "WRONG"}.get(outcome["status"], outcome["status"])
    parts = [_fmt_gbps(outcome["gbps"])]
    if copy_gbps:
        parts.append(f"{100 * outcome['gbps'] / copy_gbps:.0f}%")
    if baseline_seconds:
        parts.append(f"{baseline_seconds / outcome['seconds']:.2f}x")
    return " ".join(parts)


def enrich(result: dict[str, Any], copy_gbps: float | None) -> None:
    """Add ``pct_copy``, ``vs_baseline`` and ``convert_in_spmvs`` (conversion from the uploaded
    CSR over one product of the format) to each correct outcome of one matrix's result."""
    base = result["outcomes"].get(result["baseline"], {})
    base_seconds = base.get("seconds") if base.get("status") == "ok" else None
    for outcome in result["outcomes"].values():
        if outcome["status"] == "ok":
            outcome["pct_copy"] = 100 * outcome["gbps"] / copy_gbps if copy_gbps else None
            outcome["vs_baseline"] = base_seconds / outcome["seconds"] if base_seconds else None
            convert = outcome.get("convert_s")
            outcome["convert_in_spmvs"] = convert / outcome["seconds"] if convert is not None else None


def spmv_table(payload: dict[str, Any]) -> Table:
    results = payload["spmv"]
    copy = (payload.get("ceiling") or {}).get("gbps")
    formats = payload["meta"]["formats"]
    baseline = payload["meta"]["baseline"]
    headers = ["matrix", "rows", "nnz", "len mean", "len max", *formats, baseline, "best", f"best/{baseline}"]
    rows = []
    for r in results:
        if "error" in r:
            rows.append([r["matrix"], "", "", "", "", *["" for _ in formats], r["error"], "", ""])
            continue
        base = r["outcomes"].get(baseline, {})
        base_seconds = base.get("seconds") if base.get("status") == "ok" else None
        cells = [spmv_cell(r["outcomes"][f], copy, base_seconds) for f in formats]
        base_cell = spmv_cell(base, copy, None) if base else "-"
        best = r.get("best")
        ratio = f"{base_seconds / r['outcomes'][best]['seconds']:.2f}x" if best and base_seconds else "-"
        name = r["matrix"] + (" (L2)" if r.get("fits_l2") else "")
        rows.append([name, f"{r['rows']:,}", f"{r['nnz']:,}", f"{r['rowlen_mean']:.1f}", f"{r['rowlen_max']:,}",
                     *cells, base_cell, best or "-", ratio])
    unit = "GB/s, % of copy, x " + baseline if copy else "GB/s, x " + baseline
    title = f"SpMV {payload['meta']['dtype']} ({unit})"
    if copy:
        title += f"; copy ceiling {copy:.0f} GB/s; (L2) = fits in L2, latency-bound"
    return title, headers, rows


def advisor_table(payload: dict[str, Any]) -> Table:
    """Per matrix: the baseline's time, ``from_scipy(S, format="auto")``'s (and its format), the
    fastest format measured, and the ratios; the geometric means last."""
    baseline = payload["meta"]["baseline"]
    rows, vs_base, vs_best = [], [], []
    for r in payload["spmv"]:
        outcomes = r.get("outcomes", {})
        base, auto = outcomes.get(baseline, {}), outcomes.get("auto", {})
        best = r.get("best")
        if "error" in r or auto.get("status") != "ok" or not best:
            rows.append([r["matrix"], "-", auto.get("status", r.get("error", "-")), "-", "-", "-"])
            continue
        best_s, auto_s = outcomes[best]["seconds"], auto["seconds"]
        ratio = base["seconds"] / auto_s if base.get("status") == "ok" else None
        if ratio:
            vs_base.append(ratio)
        vs_best.append(auto_s / best_s)
        rows.append([r["matrix"], f"{base['seconds'] * 1e6:.1f}" if ratio else "-",
                     f"{auto_s * 1e6:.1f} ({auto['chosen']})", f"{ratio:.2f}x" if ratio else "-",
                     f"{best_s * 1e6:.1f} ({best})", f"{auto_s / best_s:.2f}"])
    if vs_best:
        geo = lambda values: math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan  # noqa: E731
        rows.append(["geometric mean", "", "", f"{geo(vs_base):.2f}x", "", f"{geo(vs_best):.2f}"])
    return ("The advisor: from_scipy(S, format=\"auto\") against " + baseline + " and the fastest format (µs)",
            ["matrix", baseline, "auto (format)", f"vs {baseline}", "best format", "auto / best"], rows)


def conversion_table(payload: dict[str, Any]) -> Table:
    """Per matrix and format: milliseconds to convert from the uploaded CSR, and that time in
    products of the format (the target is at most 10)."""
    formats = [f for f in payload["meta"]["formats"] if f != "csr"]
    rows = []
    for r in payload["spmv"]:
        cells = []
        for f in formats:
            o = r.get("outcomes", {}).get(f, {})
            cells.append(f"{1e3 * o['convert_s']:.2f} ({o['convert_in_spmvs']:.1f})"
                         if o.get("convert_in_spmvs") is not None else o.get("status", "-"))
        rows.append([r["matrix"], *cells])
    return "Conversion from the uploaded CSR: ms (in SpMVs of that format)", ["matrix", *formats], rows


def primitives_table(payload: dict[str, Any]) -> Table:
    copy = (payload.get("ceiling") or {}).get("gbps")
    rows = []
    for r in payload["primitives"]:
        ok = r["status"] == "ok"
        rows.append([r["op"], r["dtype"], f"{r['n']:,}", r["impl"], r["status"],
                     f"{r['seconds'] * 1e3:.3f}" if ok else "-", _fmt_gbps(r["gbps"]) if ok else "-",
                     f"{100 * r['gbps'] / copy:.0f}%" if ok and copy else "-"])
    return "Primitives", ["op", "dtype", "n", "impl", "status", "ms", "GB/s", "% copy"], rows


def cg_table(payload: dict[str, Any]) -> Table:
    rows = []
    for r in payload["cg"]:
        ok = r["status"] == "ok"
        rows.append([r["matrix"], f"{r['unknowns']:,}", r["impl"], r["status"],
                     f"{r['ms_per_iteration']:.4f}" if ok else r.get("message", "-"), _fmt_gbps(r["gbps"]) if ok else "-"])
    return "CG per iteration", ["matrix", "unknowns", "impl", "status", "ms/iteration", "GB/s"], rows


def overhead_table(payload: dict[str, Any]) -> Table:
    """Per-call costs: CSR's ``spmv(x, y)``, cupyx's ``A @ x``, then every format's ``A @ x`` and
    ``A.spmv(x, y)`` (payloads without ``formats`` print the first two rows only)."""
    o = payload["python_overhead"]
    keys = [k for k in ("call_us", "kernel_us", "issue_us", "overhead_us", "floor_us") if k in o]

    def figures(costs: dict[str, Any]) -> list[str]:
        return [f"{costs.get(k, o.get(k, math.nan) if k == 'floor_us' else math.nan):.1f}" for k in keys]

    rows = [["sparsegpu CSR.spmv", *figures(o)]]
    if "cupyx" in o:
        rows.append(["cupyx A @ x", *figures(o["cupyx"])])
    for name, entry in o.get("formats", {}).items():
        if entry.get("status", "ok") != "ok":
            rows.append([f"{name.upper()} (failed: {entry['status']})", *["-"] * len(keys)])
            continue
        rows.append([f"{name.upper()} A @ x", *figures(entry["matmul"])])
        rows.append([f"{name.upper()} A.spmv(x, y)", *figures(entry["spmv"])])
    return (f"Per-call cost, {o['rows']}-row matrix, 8 per row (microseconds; target call_us <= 13 on the GPU)",
            ["call", *keys], rows)


def tables(payload: dict[str, Any]) -> list[Table]:
    """Every table the payload has data for."""
    out = []
    if payload.get("spmv"):
        out.append(spmv_table(payload))
        if any(f != "csr" for f in payload["meta"]["formats"]):
            out.append(conversion_table(payload))
        out.append(advisor_table(payload))
    if payload.get("primitives"):
        out.append(primitives_table(payload))
    if payload.get("cg"):
        out.append(cg_table(payload))
    if payload.get("python_overhead"):
        out.append(overhead_table(payload))
    return out


def print_tables(payload: dict[str, Any], file: Any = None) -> None:
    """Print :func:`tables` with rich (wide enough for log files) or as aligned text."""
    file = sys.stdout if file is None else file
    try:
        from rich.console import Console
        from rich.table import Table as RichTable
    except ImportError:
        for title, headers, rows in tables(payload):
            widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows)]
            print(f"\n{title}", file=file)
            for line in [headers, *rows]:
                print("  ".join(str(c).ljust(w) for c, w in zip(line, widths)), file=file)
        return
    width = None if file.isatty() else int(os.environ.get("COLUMNS", 250))
    console = Console(file=file, width=width)
    for title, headers, rows in tables(payload):
        console.print(f"\n[bold]{title}[/bold]", highlight=False)
        table = RichTable()
        for i, header in enumerate(headers):
            table.add_column(header, justify="left" if i == 0 else "right", no_wrap=True)
        for row in rows:
            table.add_row(*[str(c) for c in row])
        console.print(table)


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """The whole payload, NaN and infinity written as null."""
    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    path.write_text(json.dumps(clean(payload), indent=1, default=str) + "\n")


def plot_spmv(path: Path, payload: dict[str, Any]) -> bool:
    """A horizontal bar chart of GB/s per matrix and implementation, the copy ceiling as a
    dashed line. Returns False (writing nothing) when matplotlib is missing; the command then
    says it skipped the chart."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    results = [r for r in payload["spmv"] if "outcomes" in r]
    impls = [*payload["meta"]["formats"], payload["meta"]["baseline"]]
    height = 0.8 / max(len(impls), 1)
    fig, ax = plt.subplots(figsize=(10, 2 + 0.07 * len(results) * max(len(impls), 3)))
    for k, impl in enumerate(impls):
        values = [r["outcomes"].get(impl, {}).get("gbps") or 0.0 for r in results]
        positions = [i + (k - (len(impls) - 1) / 2) * height for i in range(len(results))]
        ax.barh(positions, values, height=height, label=impl)
    copy = (payload.get("ceiling") or {}).get("gbps")
    if copy:
        ax.axvline(copy, color="black", linestyle="--", linewidth=1, label=f"copy {copy:.0f} GB/s")
    ax.set_yticks(range(len(results)), [r["matrix"] for r in results], fontsize=7)
    ax.set_ylim(len(results) - 0.5, -0.5)  # first matrix on top, no empty margin
    ax.set_xlabel("effective GB/s (bytes model / time)")
    meta = payload["meta"]
    ax.set_title(f"SpMV {meta['dtype']} on {meta['device']}")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
