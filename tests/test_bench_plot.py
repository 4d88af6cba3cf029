"""The comparison command says when it skipped its chart because matplotlib is missing."""

from __future__ import annotations

import sys

from sparsegpu.bench import cli


def test_bench_says_it_skipped_the_chart_without_matplotlib(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    code = cli.main(["--backend", "cpu", "--repeat", "2", "--out", str(tmp_path),
                     "--matrices", "poisson2d:small", "--formats", "csr"])
    assert code == 0
    out = capsys.readouterr().out
    assert f"skipped {tmp_path / 'bench.png'}: matplotlib is not installed" in out
    assert 'pip install "sparsegpu[plot]"' in out
    assert (tmp_path / "bench.json").is_file() and not (tmp_path / "bench.png").exists()


def test_bench_without_spmv_mentions_no_chart(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert cli.main(["--backend", "cpu", "--repeat", "2", "--out", str(tmp_path), "--no-spmv"]) == 0
    assert "bench.png" not in capsys.readouterr().out
