"""Calibrate the format advisor's model (sparsegpu/advisor/model.py) against measurements.

    python3 scripts/calibrate_advisor.py measure OUT.json [--size small|medium]         # on the GPU
    python3 scripts/calibrate_advisor.py fit MEASUREMENTS.json... [--no-leave-one-out]  # anywhere
    python3 scripts/calibrate_advisor.py validate [--size medium]                      # on the GPU
    python3 scripts/calibrate_advisor.py stats-cost FAMILY... [--size large]           # on the GPU

``measure`` times every candidate format's ``A @ x`` (CUDA events, median) and its conversion
from an uploaded CSR, over all real matrices and the generated families, with the advisor's
statistics for each. ``fit`` fits the model's constants to those times (least squares on log
time, soft L1), over one GPU's file or several GPUs' files at once (each file's matrices with
that GPU's copy rate), writes them into sparsegpu/advisor/calibration.json (with the
measurements' source and each GPU's copy rate), and prints, per matrix, the advised format (without autotune), the measured best, and
the ratio of their measured times; then, unless ``--no-leave-one-out``, the same for a refit
without that matrix (started from the full fit), and both counts of matrices within 10%.
``validate`` runs ``advise(autotune=True)`` on every matrix afresh and prints the same table
from new measurements.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

from sparsegpu import advisor
from sparsegpu.advisor import model as advisor_model
from sparsegpu.advisor import statistics as advisor_statistics
from sparsegpu.advisor import summary

ROOT = Path(__file__).resolve().parent.parent


def measure(out: Path, size: str) -> None:
    import cupy

    import sparsegpu
    from sparsegpu import datasets
    from sparsegpu.bench.timing import measure

    def median_gpu_ms(fn, repeat: int = 20) -> float:
        return measure(lambda _: fn(), "gpu", repeat=repeat).seconds * 1e3

    matrices = {name: (lambda name=name: datasets.load_matrix(name)) for name in datasets.real_matrix_names()}
    matrices.update({f"{family}-{size}": (lambda family=family: datasets.generate(family, size))
                     for family in datasets.GENERATED})
    src = cupy.random.random(2**28)
    dst = cupy.empty_like(src)
    copy_gbs = 2 * src.nbytes / (median_gpu_ms(lambda: dst.__setitem__(slice(None), src)) * 1e6)
    del src, dst
    device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    records = []
    for name, make in matrices.items():
        S = make()
        csr = sparsegpu.CSR.from_scipy(S, backend="gpu")
        stats = advisor.matrix_stats(csr)
        x = cupy.random.default_rng(1).standard_normal(csr.shape[1]).astype(csr.dtype)
        want = csr @ x
        y = cupy.empty(csr.shape[0], csr.dtype)
        csr_ms = median_gpu_ms(lambda: csr.spmv(x, y))
        built, conversions = {}, {}
        for fmt in advisor.CANDIDATES:
            params = advisor.estimates(stats)[fmt].params
            try:
                A = csr.asformat(fmt, **params)
            except ValueError:  # ELL's fill guard
                continue
            A.spmv(x, y)
            if not bool(cupy.allclose(y, want, rtol=1e-10, atol=1e-10 * float(cupy.abs(want).max()))):
                print(f"{name}: {fmt} WRONG; not timed", file=sys.stderr)
                continue
            conversions[fmt] = median_gpu_ms(lambda: csr.asformat(fmt, **params), repeat=5) / csr_ms
            built[fmt] = A
        # Interleaved rounds, each format's fastest kept (advisor.AUTOTUNE_ROUNDS says why).
        times = {fmt: float("inf") for fmt in built}
        for _ in range(advisor.AUTOTUNE_ROUNDS):
            for fmt, A in built.items():
                times[fmt] = min(times[fmt], median_gpu_ms(lambda: A.spmv(x, y)) * 1e3)
        layout = {}
        if "sell" in built:
            B = built["sell"]
            layout = {"sigma": B.sigma, "split": B.split, "parts": int(B.split_slice.size), "hot": B.hot,
                      "mode": B.mode, "slots": int(B.slice_ptr[-1])}
        del built
        records.append({"matrix": name, "stats": asdict(stats), "time_us": times, "conversion_in_csr_spmv": conversions,
                        "sell_layout": layout})
        out.write_text(json.dumps({"device": device, "copy_GBps": copy_gbs, "records": records}, indent=1))
        best = min(times, key=times.__getitem__)
        print(f"{name:28s} nnz={csr.nnz:>10d} best {best:5s} {times[best]:9.1f}us  "
              + " ".join(f"{f}={t:.1f}" for f, t in times.items()), flush=True)
        del csr
        cupy.get_default_memory_pool().free_all_blocks()



def _stats(record: dict) -> advisor.MatrixStats:
    fields = dict(record["stats"])
    return advisor.MatrixStats(**fields)


#: The fitted constants (see sparsegpu/advisor/model.py's docstring): where the fit starts, and its
#: bounds. Each is fitted in log space.
SCALARS = {  # name: (start, low, high)
    "launch_us": (5.0, 0.5, 50.0),
    "alloc_us": (5.0, 0.5, 50.0),
    "kernel_us": (3.0, 0.5, 30.0),
    "gather_GBps": (5000.0, 500.0, 50000.0),
    "load_ns": (200.0, 20.0, 5000.0),
    "unit_round_loads": (2.0, 2.0, 12.0),
}
PER_FORMAT = {"efficiency": (0.8, 0.05, 1.5), "call_us": (15.0, 1.0, 100.0)}
#: Residuals (log of predicted over measured time) beyond this count less and less (soft L1):
#: a matrix whose every format was timed during a burst of host load stays a few points, not a
#: lever on every constant.
NOISE_SCALE = 0.15


def _names() -> list[str]:
    return list(SCALARS) + [f"{group}.{f}" for group in PER_FORMAT for f in advisor.CANDIDATES]


def _bounds(index: int) -> tuple[float, float, float]:
    name = _names()[index]
    group = name.split(".")[0]
    return SCALARS[name] if name in SCALARS else PER_FORMAT[group]


def _model_from(theta: np.ndarray, copy_gbps: float, conversion: dict) -> dict:
    model: dict = {"copy_GBps": copy_gbps, "efficiency": {}, "call_us": {},
                   "conversion_in_csr_spmv": conversion}
    for name, value in zip(_names(), np.exp(theta).tolist()):
        group, _, key = name.partition(".")
        if key:
            model[group][key] = value
        else:
            model[group] = value
    return model


def _fit(records: list[dict], conversion: dict, start: np.ndarray | None = None) -> np.ndarray:
    """The constants fitted to ``records``, each timed on a GPU of copy rate ``record["copy_GBps"]``."""
    from scipy.optimize import least_squares

    stats = [_stats(r) for r in records]

    def residuals(theta: np.ndarray) -> np.ndarray:
        out = []
        for s, record in zip(stats, records):
            est = advisor.estimates(s, _model_from(theta, record["copy_GBps"], conversion))
            out += [np.log(est[f].time_us / t) for f, t in record["time_us"].items()]
        return np.array(out)

    low, high = (np.log([_bounds(k)[j] for k in range(len(_names()))]) for j in (1, 2))
    if start is None:
        start = np.log([_bounds(k)[0] for k in range(len(_names()))])
    return least_squares(residuals, np.clip(start, low, high), bounds=(low, high), loss="soft_l1",
                         f_scale=NOISE_SCALE, x_scale=1.0).x


def _advised(record: dict, model: dict) -> tuple[str, str, float]:
    """(advised format without autotune, measured best, measured time ratio of the two)."""
    est = advisor.estimates(_stats(record), model)
    times = record["time_us"]
    advised = advisor.rank(est, [f for f in times if est[f].refused is None])[0]
    best = min(times, key=times.__getitem__)
    return advised, best, times[advised] / times[best]


def fit(paths: list[Path], leave_one_out: bool = True) -> None:
    """Fit the model to the measurements in ``paths`` (one file per GPU), write it, print the
    per-matrix table; with ``leave_one_out``, also refit without each matrix in turn and advise
    it with that fit (the model's error on a matrix it has not seen)."""
    files = [json.loads(path.read_text()) for path in paths]
    records = [{**r, "device": f["device"], "copy_GBps": f["copy_GBps"]} for f in files for r in f["records"]]
    conversion = {f: round(float(np.median([r["conversion_in_csr_spmv"][f] for r in records
                                            if f in r["conversion_in_csr_spmv"]])), 1)
                  for f in advisor.CANDIDATES}
    theta = _fit(records, conversion)
    model = _model_from(theta, files[0]["copy_GBps"], conversion)
    devices = ", ".join(f"{len(f['records'])} on {f['device']}" for f in files)
    source = f"scripts/calibrate_advisor.py fit {' '.join(p.name for p in paths)}: matrices {devices}"
    calibration = {"source": source, "model": model,
                   "copy_GBps_by_device": {f["device"]: round(f["copy_GBps"], 1) for f in files}}
    advisor_model.CALIBRATION_FILE.write_text(json.dumps(calibration, indent=1) + "\n")
    advisor.calibration.cache_clear()
    print(f"{'device':22s} {'matrix':28s} {'advised':8s} {'best':8s} ratio" + "   left-out advised, ratio" * leave_one_out)
    rows = []
    for k, record in enumerate(records):
        own = _model_from(theta, record["copy_GBps"], conversion)
        row = [record["device"][:22], record["matrix"], *_advised(record, own)]
        if leave_one_out:
            rest = records[:k] + records[k + 1:]
            row += _advised(record, _model_from(_fit(rest, conversion, theta), record["copy_GBps"], conversion))[::2]
        rows.append(row)
        print(f"{row[0]:22s} {row[1]:28s} " + " ".join(f"{c:8s}" if isinstance(c, str) else f"{c:5.2f}   "
                                                     for c in row[2:]), flush=True)
    for device in dict.fromkeys(row[0] for row in rows):
        mine = [row for row in rows if row[0] == device]
        for label, column in [("in-sample", 4)] + [("leave-one-out", 6)] * leave_one_out:
            ratios = [row[column] for row in mine]
            print(f"{device}, {label}: advised within 10% of the measured best on "
                  f"{sum(r <= 1.10 for r in ratios)}/{len(mine)} matrices; worst ratio {max(ratios):.2f}")
    print("model:", json.dumps(model))


def validate(size: str) -> None:
    """advise(autotune=True) on every matrix: the advised format (chosen without measuring)
    against the measured best, by measured GB/s."""
    import cupy

    import sparsegpu
    from sparsegpu import datasets

    names = [(name, lambda name=name: datasets.load_matrix(name)) for name in datasets.real_matrix_names()]
    names += [(f"{family}-{size}", lambda family=family: datasets.generate(family, size, cache=True))
              for family in datasets.GENERATED]
    from sparsegpu.bench.timing import measure

    within, worst = 0, 1.0
    print(f"{'matrix':28s} {'advised':8s} {'best':8s} ratio  stats/SpMV")
    for name, make in names:
        csr = sparsegpu.CSR.from_scipy(make(), backend="gpu")
        advice = sparsegpu.advise(csr, autotune=True)
        ratio = advice.measured[advice.measured_best] / advice.measured[advice.format]
        within += ratio <= 1.10
        worst = max(worst, ratio)
        x, y = cupy.ones(csr.shape[1], csr.dtype), cupy.empty(csr.shape[0], csr.dtype)
        stats_cost = (measure(lambda _: advisor.matrix_stats(csr), "gpu", repeat=5).seconds
                      / measure(lambda _: csr.spmv(x, y), "gpu", repeat=5).seconds)
        print(f"{name:28s} {advice.format:8s} {advice.measured_best:8s} {ratio:.2f}  {stats_cost:6.1f}", flush=True)
        cupy.get_default_memory_pool().free_all_blocks()
    print(f"advised within 10% of the measured best on {within}/{len(names)} matrices; worst ratio {worst:.2f}")


def stats_cost_row(csr, calls: int = 200) -> dict[str, float]:
    """Median microseconds over ``calls`` calls each, on one GPU CSR: ``stats`` (``matrix_stats``
    end to end, host clock: it ends with a synchronisation), ``kernel`` (``csr_stats`` with its
    summary, launched back to back, CUDA events), ``host`` (stats - kernel: Python, the launch,
    the synchronisation, the record's conversion), ``record`` (that conversion alone, host
    clock), ``spmv`` (CSR SpMV, CUDA events, same run), ``ratio`` (stats / spmv), ``spmv_e2e``
    (one CSR SpMV end to end, measured as ``stats`` is: host clock, ``csr.spmv(x, y)`` then a
    synchronisation of the stream) and ``ratio_e2e`` (stats / spmv_e2e, the like-for-like
    ratio: both pay a launch and a synchronisation)."""
    import statistics

    import cupy

    from sparsegpu.bench.timing import measure, median_call_seconds

    def median_us(samples: list[float]) -> float:
        return statistics.median(samples) * 1e6

    def host_clock(fn) -> float:
        return median_call_seconds(fn, calls) * 1e6

    stats_us = host_clock(lambda: advisor.matrix_stats(csr))
    space = advisor_statistics._workspace()
    if space.record.item(advisor_statistics.RECORD_STATUS) != advisor_statistics.STATUS_SUMMARISED:
        raise RuntimeError("the kernel left this matrix's summary to the host; time matrix_stats alone")

    def kernel_alone() -> None:
        space.launch(csr, summarise=True)
        space.zero = True  # the kernel zeroes its buffer itself, before the next launch starts

    # Back to back, so the launches' host time hides behind the device's work (an event
    # recorded on an idle device would also count the host's launch).
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(5):
        kernel_alone()
    kernel_samples, per_sample = [], 10
    for _ in range(max(calls // per_sample, 5)):
        start.record()
        for _ in range(per_sample):
            kernel_alone()
        end.record()
        end.synchronize()
        kernel_samples.append(cupy.cuda.get_elapsed_time(start, end) / 1e3 / per_sample)
    kernel_us = median_us(kernel_samples)
    words = advisor_statistics._statistics_record(csr)
    record_us = host_clock(lambda: summary.stats_of_record(words, csr.shape, csr.nnz, csr.dtype.itemsize,
                                                             csr.index_dtype.itemsize))
    runtime, stream = cupy.cuda.runtime, cupy.cuda.get_current_stream().ptr
    x, y = cupy.ones(csr.shape[1], csr.dtype), cupy.empty(csr.shape[0], csr.dtype)
    spmv_us = measure(lambda _: csr.spmv(x, y), "gpu", repeat=max(calls // 10, 5)).seconds * 1e6

    def spmv_end_to_end() -> None:
        csr.spmv(x, y)
        runtime.streamSynchronize(stream)

    spmv_e2e_us = host_clock(spmv_end_to_end)
    return {"stats": stats_us, "kernel": kernel_us, "host": stats_us - kernel_us, "record": record_us,
            "spmv": spmv_us, "ratio": stats_us / spmv_us, "spmv_e2e": spmv_e2e_us, "ratio_e2e": stats_us / spmv_e2e_us}


def stats_cost(families: list[str], size: str) -> None:
    """Time of ``matrix_stats`` over the time of one CSR SpMV on generated matrices, split into
    the kernel and the host's share, and over one CSR SpMV timed end to end like it (see
    :func:`stats_cost_row`)."""
    import cupy

    import sparsegpu
    from sparsegpu import datasets

    for family in families:
        csr = sparsegpu.CSR.from_scipy(datasets.generate(family, size, cache=True), backend="gpu")
        r = stats_cost_row(csr)
        print(f"{family}-{size}: statistics {r['stats']:.1f} us (kernel {r['kernel']:.1f} us, host {r['host']:.1f} us "
              f"of which the record's conversion {r['record']:.1f} us), CSR SpMV {r['spmv']:.1f} us, ratio {r['ratio']:.2f}; "
              f"CSR SpMV end to end {r['spmv_e2e']:.1f} us, ratio {r['ratio_e2e']:.2f}", flush=True)
        del csr
        cupy.get_default_memory_pool().free_all_blocks()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("out", type=Path)
    m.add_argument("--size", default="medium")
    f = sub.add_parser("fit")
    f.add_argument("measurements", type=Path, nargs="+", help="one file per GPU")
    f.add_argument("--no-leave-one-out", dest="leave_one_out", action="store_false",
                   help="skip the refits without each matrix")
    v = sub.add_parser("validate")
    v.add_argument("--size", default="medium")
    c = sub.add_parser("stats-cost")
    c.add_argument("families", nargs="+")
    c.add_argument("--size", default="large")
    args = parser.parse_args()
    if args.command == "measure":
        measure(args.out, args.size)
    elif args.command == "fit":
        fit(args.measurements, args.leave_one_out)
    elif args.command == "stats-cost":
        stats_cost(args.families, args.size)
    else:
        validate(args.size)


if __name__ == "__main__":
    main()
