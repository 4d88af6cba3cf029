"""sparsegpu/advisor/model.py: the estimates follow the model, SELL's predicted layout follows
its conversion, the calibration file and its fit."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import advisor, datasets
from sparsegpu._kernels import read_source
from sparsegpu.advisor import model as advisor_model
from sparsegpu.bench.bytes_model import spmv_bytes_of
from sparsegpu.formats import SELL
from sparsegpu.formats.sell import DEFAULT_C
from tests.advisor.helpers import model_cases, tridiagonal
from tests.conftest import GPU, REAL_MATRICES, requires_matrices


# --------------------------------------------------------------------------- the model


def calibrate_script():
    """scripts/calibrate_advisor.py as a module (its fit is what writes the calibration)."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "calibrate_advisor.py"
    spec = importlib.util.spec_from_file_location("calibrate_advisor", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_estimates_are_finite_and_follow_the_model(rng):
    model = advisor.calibration()
    for label, S in model_cases(rng).items():
        est = advisor.estimates(advisor.matrix_stats(S, backend="cpu"))
        assert set(est) == set(advisor.CANDIDATES), label
        for name, e in est.items():
            assert all(math.isfinite(t) and t > 0 for t in (e.time_us, e.host_us, e.device_us)), (label, name)
            assert e.time_us == max(e.host_us, e.device_us), (label, name)
            assert e.host_us >= model["call_us"][name] and e.device_us >= e.launches * model["kernel_us"], (label, name)
            assert e.bytes >= 0 and e.launches >= 1 and e.serial_steps >= 0, (label, name)


def test_rows_past_the_sub_warp_limit_cost_csr_two_launches_and_an_array(rng):
    model = advisor.calibration()
    stats = advisor.matrix_stats(sp.random_array((3000, 3000), density=0.002, rng=rng, format="csr"), backend="cpu")
    assert stats.csr_long_rows == 0
    plain = advisor.estimates(stats)["csr"]
    split = advisor.estimates(dataclasses.replace(stats, csr_long_rows=5, row_max=5000))["csr"]
    assert (plain.launches, split.launches) == (1, 3)
    assert split.host_us == pytest.approx(plain.host_us + 2 * model["launch_us"] + model["alloc_us"])


def test_the_coo_tree_adds_a_launch_and_two_arrays_per_level():
    model = advisor.calibration()
    stats = advisor.matrix_stats(tridiagonal(200), backend="cpu")  # 598 entries: two tiles, two levels
    coo = advisor.estimates(stats)["coo"]
    assert advisor_model._coo_launches(598) == 2 and advisor_model._coo_launches(advisor_model.COO_TILE) == 1
    assert coo.launches == 3  # y scaled, then the tree
    assert coo.host_us == pytest.approx(model["call_us"]["coo"] + 2 * model["launch_us"] + 2 * model["alloc_us"])


def test_ranking_leaves_out_refused_formats_and_prefers_csr_within_its_margin(backend, rng):
    def estimate(time_us: float) -> advisor.Estimate:
        return advisor.Estimate(bytes=1, launches=1, serial_steps=0, time_us=time_us)

    est = {"csr": estimate(10.4), "jds": estimate(10.0), "sell": estimate(5.0)}
    assert advisor.rank(est, ["csr", "jds"]) == ["csr", "jds"]
    assert advisor.rank(est, ["jds", "csr", "sell"]) == ["sell", "jds", "csr"]
    est["csr"] = estimate(10.0 * advisor.CSR_MARGIN * 1.01)
    assert advisor.rank(est, ["csr", "jds"]) == ["jds", "csr"]
    advice = sparsegpu.advise(model_cases(rng)["hub rows"], backend=backend)
    assert advice.estimates["ell"].refused and "ell" not in advice.ranking
    assert advice.format == advice.ranking[0] and advice.estimates[advice.format].refused is None


def test_sell_layout_follows_sells_own_rules(rng):
    """On matrices too small for ``split`` to exceed SPLIT_MIN, the predicted split, parts and
    mode are the conversion's (the mode where the hot columns are predicted right), and the
    slots within a factor of two of its slots when the sigma is (the sigma is predicted from
    estimated slots, so it may differ near choose_sigma's threshold; on the real matrices the
    slots come within 25%)."""

    for label, S in model_cases(rng).items():
        if S.shape[0] == 0:
            continue
        A = SELL.from_scipy(S, backend="cpu")
        layout = advisor.sell_layout(advisor.matrix_stats(S, backend="cpu"))
        widest = int(np.diff(A.slice_ptr).max()) // DEFAULT_C
        assert layout.split == A.split, label
        assert layout.parts_of_longest == (-(-widest // A.split) if widest > A.split else 1), label
        if layout.hot == bool(A.hot):
            assert layout.mode == A.mode, label
        if layout.sigma == A.sigma:
            assert int(A.slice_ptr[-1]) / 2 <= layout.slots <= 2 * int(A.slice_ptr[-1]), label


@requires_matrices
def test_sell_layout_predicts_the_mode_of_every_real_matrix():

    for name in REAL_MATRICES:
        S = datasets.load_matrix(name)
        A = SELL.from_scipy(S, backend="cpu")
        layout = advisor.sell_layout(advisor.matrix_stats(S, backend="cpu"))
        assert (layout.split, layout.mode) == (A.split, A.mode), name
        if layout.sigma == A.sigma:
            assert layout.slots == pytest.approx(int(A.slice_ptr[-1]), rel=0.25), name


def source_constant(file: str, name: str) -> int:
    """A ``constexpr int NAME = value;`` of kernels/FILE."""

    match = re.search(rf"\b{name} = (\d+);", read_source(file))
    assert match, (file, name)
    return int(match.group(1))


def test_the_model_mirrors_the_kernels_constants():
    assert advisor_model.SELL_PARTS_IN_FLIGHT == source_constant("spmv_sell.cu", "PARTS_IN_FLIGHT")
    assert advisor_model.ROUND_SLOTS == source_constant("spmv_ell.cu", "PADDED_UNROLL") == source_constant(
        "spmv_jds.cu", "JDS_UNROLL")
    assert advisor_model.COO_TILE == source_constant("spmv_coo.cu", "TILE")


def test_calibration_file_holds_every_fitted_constant_within_its_bounds():
    script = calibrate_script()
    model = advisor.calibration()
    for k, name in enumerate(script._names()):
        group, _, key = name.partition(".")
        value = model[group][key] if key else model[group]
        _, low, high = script._bounds(k)
        assert low * (1 - 1e-9) <= value <= high * (1 + 1e-9), name
    assert model["copy_GBps"] > 0
    assert set(model["conversion_in_csr_spmv"]) == set(advisor.CANDIDATES)


def synthetic_measurements(rng, model: dict, device: str = "the model itself") -> dict:
    """Records as ``calibrate_advisor.py measure`` writes them, timed by ``model`` itself."""
    records = []
    for label, S in model_cases(rng).items():
        if S.nnz == 0:
            continue
        stats = advisor.matrix_stats(S, backend="cpu")
        est = advisor.estimates(stats, model)
        records.append({"matrix": label, "stats": dataclasses.asdict(stats),
                        "time_us": {f: e.time_us for f, e in est.items() if e.refused is None},
                        "conversion_in_csr_spmv": {f: 1.0 for f in advisor.CANDIDATES}})
    return {"device": device, "copy_GBps": model["copy_GBps"], "records": records}


def test_fit_reproduces_times_made_by_the_model(rng, tmp_path, monkeypatch, capsys):
    """The fit over two GPUs' files at once (from its own starting point) and its leave-one-out
    report, on times the current calibration predicts at each GPU's copy rate: every refit
    predicts them again and advises the fastest, and the file keeps each GPU's copy rate."""
    script = calibrate_script()
    model = advisor.calibration()
    slower = {**model, "copy_GBps": 0.7 * model["copy_GBps"]}
    files = [synthetic_measurements(rng, model), synthetic_measurements(rng, slower, "a slower GPU")]
    paths = [tmp_path / "measurements.json", tmp_path / "slower.json"]
    for path, data in zip(paths, files):
        path.write_text(json.dumps(data))
    monkeypatch.setattr(advisor_model, "CALIBRATION_FILE", tmp_path / "calibration.json")
    advisor.calibration.cache_clear()
    try:
        script.fit(paths)
        stored = json.loads((tmp_path / "calibration.json").read_text())
        for data in files:
            assert stored["copy_GBps_by_device"][data["device"]] == round(data["copy_GBps"], 1)
            fitted = {**stored["model"], "copy_GBps": data["copy_GBps"]}
            for record in data["records"]:
                est = advisor.estimates(advisor.MatrixStats(**record["stats"]), fitted)
                for f, t in record["time_us"].items():
                    assert est[f].time_us == pytest.approx(t, rel=0.02), (data["device"], record["matrix"], f)
    finally:
        advisor.calibration.cache_clear()
    out = capsys.readouterr().out
    for data in files:
        n = len(data["records"])
        assert f"{data['device']}, in-sample: advised within 10% of the measured best on {n}/{n}" in out
        assert f"{data['device']}, leave-one-out: advised within 10% of the measured best on {n}/{n}" in out


def test_calibration_takes_the_gpus_copy_rate(monkeypatch):
    """Without a GPU the fit's own copy rate; on a GPU the measured figure of a GPU the file names,
    else a copy timed on the spot."""
    monkeypatch.setattr(advisor_model, "gpu_available", lambda: False)
    assert advisor_model.device_copy_gbps({"any": 1.0}, 1234.0) == 1234.0
    monkeypatch.undo()
    if not GPU:
        return
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())["name"].decode()
    assert advisor_model.device_copy_gbps({name: 777.0}, 1.0) == 777.0
    assert 100 < advisor_model.device_copy_gbps({}, 1.0) < 20000


@pytest.mark.parametrize("dtype, index_dtype", [(np.float64, np.int32), (np.float32, np.int64),
                                                (np.complex128, np.int32)])
def test_spmv_bytes_is_the_benchmarks_count(dtype, index_dtype, rng):
    """autotune's GB/s count the bytes the benchmarks count."""
    S = sp.random_array((int(rng.integers(1, 500)), int(rng.integers(1, 500))), density=0.05, rng=rng,
                        format="csr")
    csr = sparsegpu.CSR.from_scipy(S, dtype=dtype, index_dtype=index_dtype, backend="cpu")
    assert advisor.spmv_bytes(advisor.matrix_stats(csr)) == spmv_bytes_of(csr)
