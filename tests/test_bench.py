"""The measuring instruments: bytes model, correctness checks, the comparison command end to
end on the CPU backend (and on the GPU where there is one), and the asv suite's wiring."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu.bench import bytes_model, cli, spmv, timing

from .conftest import GPU, REAL_MATRICES

ASV_DIR = Path(__file__).resolve().parent.parent / "asv_benchmarks"


# --------------------------------------------------------------------------- bytes model


def test_spmv_bytes_hand_computed():
    # 5 nonzeros of float64 + int32 (12 B each), 4 row pointers, x of 4, y of 3 (8 B each).
    assert bytes_model.spmv_bytes(3, 4, 5) == 5 * 12 + 4 * 4 + 4 * 8 + 3 * 8 == 132
    assert bytes_model.spmv_bytes(3, 4, 5, np.complex128, np.int64) == 5 * 24 + 4 * 8 + 4 * 16 + 3 * 16
    assert bytes_model.spmv_bytes(0, 0, 0) == 4  # one row pointer


def test_spmv_bytes_matches_the_anchors():
    anchors = Path(__file__).resolve().parents[2] / "shared" / "anchors" / "h200_2026-11-21.json"
    if not anchors.is_file():
        pytest.skip("shared/anchors not found")
    for row in json.loads(anchors.read_text())["spmv"]:
        assert bytes_model.spmv_bytes(row["n"], row["n"], row["nnz"]) == row["min_bytes"]


def test_spmv_bytes_of_counts_stored_entries_not_padding():
    S = datasets.poisson2d(6)
    expected = bytes_model.spmv_bytes(36, 36, S.nnz)
    assert bytes_model.spmv_bytes_of(S) == expected
    assert bytes_model.spmv_bytes_of(sparsegpu.from_scipy(S, "csr", backend="cpu")) == expected
    assert bytes_model.spmv_bytes_of(S, np.float32) == bytes_model.spmv_bytes(36, 36, S.nnz, np.float32)


def test_primitive_and_cg_models():
    assert bytes_model.scan_bytes(10, np.float64) == 160
    assert bytes_model.reduce_bytes(10, np.int32) == 40
    assert bytes_model.histogram_bytes(10, np.int32) == 40
    assert bytes_model.copy_bytes(100) == 200
    assert bytes_model.cg_iteration_bytes(10, 28) == bytes_model.spmv_bytes(10, 10, 28) + 9 * 10 * 8
    assert bytes_model.effective_gbps(2e9, 0.5) == 4.0
    assert np.isnan(bytes_model.effective_gbps(1, 0.0))


# --------------------------------------------------------------------------- checks


def test_reference_catches_one_dropped_entry_among_many():
    S = datasets.random_uniform(20_000, 8, seed=1)
    x = spmv.make_vectors(S.shape[1], np.float64, 1)[0]
    reference = spmv.Reference(S, x)
    good = S @ x
    assert reference.max_relative_error(good) <= spmv.tolerance(np.float64)
    bad = good.copy()
    bad[12_345] -= S.data[S.indptr[12_345]] * x[S.indices[S.indptr[12_345]]]
    assert reference.max_relative_error(bad) > spmv.tolerance(np.float32)  # caught even at float32's tolerance
    unwritten = good.copy()
    unwritten[3] = np.nan
    assert reference.max_relative_error(unwritten) == np.inf
    assert reference.max_relative_error(good[:-1]) == np.inf


def test_reference_of_empty_rows_must_be_zero():
    S = sp.csr_array(np.array([[1.0, 2.0], [0.0, 0.0]]))
    reference = spmv.Reference(S, np.ones(2))
    assert reference.max_relative_error(np.array([3.0, 0.0])) == 0.0
    assert reference.max_relative_error(np.array([3.0, 1e-30])) > 0


def test_tolerances_and_x_vector_rotation():
    assert spmv.tolerance(np.float32) == spmv.tolerance(np.complex64) == 1e-4
    assert spmv.tolerance(np.float64) == spmv.tolerance(np.complex128) == 1e-10
    l2 = 50 << 20
    assert spmv.x_vector_count(10 * l2, 1 << 20, l2) == 1  # big matrix: one x
    assert spmv.x_vector_count(1 << 20, 8 << 20, l2) == 7  # x's together exceed L2
    assert spmv.x_vector_count(1 << 20, 8 << 10, l2) == spmv.MAX_X_VECTORS
    assert spmv.x_vector_count(1 << 20, 8 << 10, 0) == 1  # CPU


def test_complex_matrix_benchmarked_in_a_real_type_keeps_its_real_part():
    S = sp.csr_array(np.array([[1 + 2j, 0], [0, 3 - 1j]]))
    assert spmv.as_value_type(S, np.float64).toarray().tolist() == [[1.0, 0.0], [0.0, 3.0]]


def test_measure_counts_calls_and_takes_the_median():
    calls = []
    t = timing.measure(calls.append, "cpu", repeat=5, warmup=2)
    assert len(t.samples) == 5 and t.seconds == sorted(t.samples)[2]
    assert calls[:3] == [0, 1, 2] and len(calls) == 3 + 5 * t.calls


# --------------------------------------------------------------------------- the command


def run_bench(tmp_path, *extra: str) -> tuple[int, dict]:
    code = cli.main(["--backend", "cpu", "--repeat", "2", "--out", str(tmp_path), *extra])
    return code, json.loads((tmp_path / "bench.json").read_text())


def test_bench_end_to_end_on_cpu_writes_json_and_png(tmp_path, capsys):
    matrices = "poisson2d,rmat:small" + (",west0067" if "west0067" in REAL_MATRICES else "")
    code, payload = run_bench(tmp_path, "--matrices", matrices, "--formats", "csr,coo")
    assert code == 0
    out = capsys.readouterr().out
    assert "poisson2d:small" in out and "best" in out
    assert payload["meta"]["backend"] == "cpu" and payload["meta"]["baseline"] == "scipy"
    assert payload["meta"]["formats"] == ["csr", "coo"] and payload["ceiling"] is None
    labels = [r["matrix"] for r in payload["spmv"]]
    assert labels[:2] == ["poisson2d:small", "rmat:small"]
    for r in payload["spmv"]:
        assert r["min_bytes"] == bytes_model.spmv_bytes(r["rows"], r["cols"], r["nnz"])
        assert r["best"] in ("csr", "coo")
        for impl in ("csr", "coo", "scipy"):
            o = r["outcomes"][impl]
            assert o["status"] == "ok" and o["seconds"] > 0 and o["max_rel_err"] <= 1e-10
            assert o["gbps"] == pytest.approx(r["min_bytes"] / o["seconds"] / 1e9)
        assert r["outcomes"]["csr"]["vs_baseline"] > 0
    pytest.importorskip("matplotlib")
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_wrong_result_is_reported_and_never_timed(tmp_path, monkeypatch):
    from sparsegpu.formats.coo import COO

    def off_by_a_little(self, x, y, alpha, beta, transpose):
        y[...] = self.to_scipy() @ x
        y[0] += 1e-3 * abs(y[0]) + 1e-3
        return y

    monkeypatch.setattr(COO, "_host_product", off_by_a_little)  # run_bench runs on the CPU backend
    timed = []
    real_measure = spmv.measure
    monkeypatch.setattr(spmv, "measure", lambda fn, *a, **k: timed.append(fn) or real_measure(fn, *a, **k))
    code, payload = run_bench(tmp_path, "--matrices", "poisson2d", "--formats", "coo,csr")
    coo = payload["spmv"][0]["outcomes"]["coo"]
    assert coo["status"] == "wrong" and coo["seconds"] is None and coo["gbps"] is None
    assert coo["max_rel_err"] > 1e-4
    assert len(timed) == 3  # csr, the advised format (CSR: the advisor keeps CSR here) and scipy only
    assert payload["spmv"][0]["outcomes"]["auto"]["chosen"] == "csr"
    assert payload["spmv"][0]["best"] == "csr"
    assert code == 1


def test_refusing_format_is_reported_as_refused(tmp_path, monkeypatch, capsys):
    from sparsegpu.formats.coo import COO

    def refuse(cls, csr, **params):
        raise ValueError("padding ratio 9.0 exceeds the limit; use hyb")

    monkeypatch.setattr(COO, "_from_csr", classmethod(refuse))
    code, payload = run_bench(tmp_path, "--matrices", "banded", "--formats", "coo,csr")
    coo = payload["spmv"][0]["outcomes"]["coo"]
    assert coo["status"] == "refused" and "padding ratio" in coo["message"]
    assert code == 0
    assert "refused" in capsys.readouterr().out


def test_a_matrix_that_fails_is_reported_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    real_bench = spmv.bench_matrix

    def fail_on_rmat(S, *args, **kwargs):
        if S.shape == (1024, 1024) and S.nnz != datasets.poisson2d(32).nnz:
            raise MemoryError("out of device memory")
        return real_bench(S, *args, **kwargs)

    monkeypatch.setattr(spmv, "bench_matrix", fail_on_rmat)
    code, payload = run_bench(tmp_path, "--matrices", "rmat,poisson2d", "--formats", "csr")
    assert payload["spmv"][0] == {"matrix": "rmat:small", "error": "MemoryError: out of device memory"}
    assert payload["spmv"][1]["outcomes"]["csr"]["status"] == "ok"
    assert code == 1 and "rmat:small/build" in capsys.readouterr().out


def test_extras_on_cpu(tmp_path):
    code, payload = run_bench(tmp_path, "--no-spmv", "--primitives", "--cg", "--python-overhead")
    assert code == 0 and "spmv" not in payload
    assert not (tmp_path / "bench.png").exists()
    assert payload["python_overhead"]["call_us"] > 0
    per_format = payload["python_overhead"]["formats"]
    assert set(per_format) == set(spmv.OVERHEAD_FORMATS)
    for entry in per_format.values():
        assert entry["status"] == "ok" and entry["matmul"]["call_us"] > 0 and entry["spmv"]["call_us"] > 0
    impls = {(r["op"], r["dtype"], r["impl"]) for r in payload["primitives"]}
    assert ("histogram", "int32", "numpy") in impls
    assert all(r["status"] == "ok" for r in payload["primitives"])
    assert {r["impl"] for r in payload["cg"]} >= {"scipy"}
    assert all(r["status"] == "ok" and r["ms_per_iteration"] > 0 for r in payload["cg"])


def test_overhead_table_lists_every_format():
    from sparsegpu.bench import report

    costs = {"call_us": 12.0, "kernel_us": 4.0, "issue_us": 5.0, "overhead_us": 8.0}
    payload = {"python_overhead": {"rows": 1000, **costs, "floor_us": 10.0, "cupyx": {**costs, "call_us": 30.0},
                                   "formats": {"csr": {"status": "ok", "matmul": costs, "spmv": {**costs, "call_us": 11.5}},
                                               "ell": {"status": "ValueError: too wide"}}}}
    title, headers, rows = report.overhead_table(payload)
    assert "13" in title and headers == ["call", "call_us", "kernel_us", "issue_us", "overhead_us", "floor_us"]
    assert [r[0] for r in rows] == ["sparsegpu CSR.spmv", "cupyx A @ x", "CSR A @ x", "CSR A.spmv(x, y)",
                                    "ELL (failed: ValueError: too wide)"]
    assert rows[1][1] == "30.0" and rows[3][1] == "11.5" and rows[3][-1] == "10.0" and rows[4][1] == "-"
    old_payload = {"python_overhead": {"rows": 1000, "call_us": 9.0}}  # CPU payloads of earlier versions
    assert report.overhead_table(old_payload)[2] == [["sparsegpu CSR.spmv", "9.0"]]


def test_matrix_and_format_selection():
    generated = [f"{f}:small" for f in datasets.GENERATED]
    assert cli.resolve_matrices(["generated"], "small") == generated
    assert cli.resolve_matrices(["rmat:large,poisson2d", "rmat:large"], "medium") == ["rmat:large", "poisson2d:medium"]
    assert cli.resolve_matrices(["all"], "small") == REAL_MATRICES + generated
    assert cli.resolve_matrices(["targets"], "small") == list(cli.TARGETS)
    with pytest.raises(ValueError, match="unknown matrix 'nope'"):
        cli.resolve_matrices(["nope"], "small")
    with pytest.raises(ValueError, match="size must be"):
        cli.resolve_matrices(["rmat:huge"], "small")
    assert cli.resolve_formats("all")[0] == "csr"
    assert set(cli.resolve_formats("all")) == set(sparsegpu.SparseMatrix.formats)
    assert cli.main(["--backend", "cpu", "--formats", "nope"]) == 2


# --------------------------------------------------------------------------- asv suite


def test_asv_config_and_suite_wiring(monkeypatch):
    config = pytest.importorskip("asv.config")
    conf = config.Config.load(str(ASV_DIR / "asv.conf.json"))  # as asv reads it (comments allowed)
    assert conf.launch_method == "spawn" and conf.environment_type == "existing"
    assert (ASV_DIR / conf.repo).resolve() == ASV_DIR.parent  # relative to the config file
    monkeypatch.syspath_prepend(str(ASV_DIR))
    import benchmarks.spmv as suite

    formats = list(sparsegpu.SparseMatrix.formats)
    assert suite.SpMV.params[0] == [*formats, "cupyx"]
    assert suite.SpMV.unit == "GB/s"
    if not GPU:
        with pytest.raises(NotImplementedError):
            suite.SpMV().setup("csr", "float64", "poisson2d")


def test_asv_advisor_suite(monkeypatch):
    """The advisor's benchmark imports without asv, and skips (asv's NotImplementedError) before
    building a matrix when there is no GPU; on the GPU one ratio is timed."""
    monkeypatch.syspath_prepend(str(ASV_DIR))
    import benchmarks.advisor as suite

    assert suite.AdvisorStatistics.unit == "ratio"
    if not GPU:
        with pytest.raises(NotImplementedError):
            suite.AdvisorStatistics().setup("rmat")
        return
    monkeypatch.setattr(suite, "CALLS", 5)
    bench = suite.AdvisorStatistics()
    bench.setup("random 1000 rows")
    assert 0 < bench.track_statistics_over_spmv("random 1000 rows") < 20


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_bench_on_gpu_small(tmp_path):
    code = cli.main(["--backend", "gpu", "--size", "small", "--repeat", "3", "--out", str(tmp_path),
                     "--matrices", "poisson2d,rmat,powerlaw", "--python-overhead"])
    payload = json.loads((tmp_path / "bench.json").read_text())
    assert code == 0
    assert payload["ceiling"]["gbps"] > 100
    for r in payload["spmv"]:
        assert r["outcomes"]["cupyx"]["status"] == "ok"
        assert r["outcomes"]["csr"]["status"] == "ok"
        assert all(o["status"] in ("ok", "refused") for o in r["outcomes"].values())
    overhead = payload["python_overhead"]
    assert 0 < overhead["kernel_us"] < overhead["call_us"]
    assert overhead["cupyx"]["call_us"] > 0 and overhead["floor_us"] > 0
    for name in spmv.OVERHEAD_FORMATS:
        entry = overhead["formats"][name]
        assert entry["status"] == "ok", (name, entry["status"])
        for form in ("matmul", "spmv"):
            assert 0 < entry[form]["kernel_us"] < entry[form]["call_us"]
            assert entry[form]["overhead_us"] == entry[form]["call_us"] - entry[form]["kernel_us"]


def test_first_call_runs_each_format_in_a_fresh_process(tmp_path, capsys):
    from sparsegpu.bench import first_call

    backend = "gpu" if GPU else "cpu"
    rows = first_call.first_calls(["csr", "sell"], backend, rows=2000)
    assert [r["format"] for r in rows] == ["csr", "sell"]
    for r in rows:
        assert r["status"] == "ok" and r["backend"] == backend and r["built_as"] == r["format"].upper()
        assert 0 < r["again_s"] and 0 < r["first_s"] < 600
        first, again = r["first_compiled"], r["again_compiled"]
        assert first["cupy_jit"] >= 0 and first["nvrtc"] == len(first["nvrtc_modules"])
        assert again == {"cupy_jit": 0, "nvrtc": 0, "nvrtc_modules": []}, "the second call compiled something"
        if backend == "cpu":
            assert first == again
    assert first_call.first_calls(["no-such-format"], backend, rows=10)[0]["status"] == "error"
    assert cli.main(["--no-spmv", "--first-call", "--formats", "csr", "--backend", backend,
                     "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "First call on a fresh machine" in out and "cupy JIT" in out
    assert json.loads((tmp_path / "bench.json").read_text())["first_call"][0]["format"] == "csr"


def test_first_call_table_shows_what_the_first_call_compiled():
    from sparsegpu.bench import first_call

    row = {"status": "ok", "format": "csc", "backend": "gpu", "import_s": 0.5, "first_s": 0.25, "again_s": 0.001,
           "built_as": "CSC", "shipped_kernels": True,
           "first_compiled": {"cupy_jit": 3, "nvrtc": 1, "nvrtc_modules": ["spmv_csr.cu:float64:int32"]},
           "again_compiled": {"cupy_jit": 0, "nvrtc": 0, "nvrtc_modules": []}}
    failed = {"status": "error", "format": "ell", "error": "RuntimeError: boom"}
    header, line, error = first_call.format_first_calls([row, failed]).splitlines()
    assert "compiled in first call" in header
    assert line.startswith("csc") and "cupy JIT 3, nvrtc 1" in line and "nvrtc: spmv_csr.cu:float64:int32" in line
    assert "0.250" in line and "shipped cubins, else NVRTC (CSC)" in line
    assert error == "ell      failed: RuntimeError: boom"


def test_advisor_table_names_the_advised_format_and_its_ratios(tmp_path):
    from sparsegpu.bench import report

    code, payload = run_bench(tmp_path, "--matrices", "poisson2d", "rmat", "--formats", "csr,sell")
    assert code == 0
    title, headers, rows = report.advisor_table(payload)
    assert headers[2] == "auto (format)" and rows[-1][0] == "geometric mean"
    for r, row in zip(payload["spmv"], rows):
        auto = r["outcomes"]["auto"]
        assert auto["status"] == "ok" and auto["chosen"] in sparsegpu.SparseMatrix.formats
        assert row[2].endswith(f"({auto['chosen']})")
        assert float(row[5]) == pytest.approx(auto["seconds"] / r["outcomes"][r["best"]]["seconds"], abs=0.006)
