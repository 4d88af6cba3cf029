"""The demo names the matrix it used, accepts every kind of --matrix, and refuses bad ones in
one line (CPU backend)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sparsegpu import datasets, demo


@pytest.fixture
def no_real_matrices(monkeypatch, tmp_path):
    """The demo as on a machine without the real matrices."""
    monkeypatch.setattr(datasets, "matrix_dir", lambda: None)
    monkeypatch.delenv(datasets.MATRICES_ENV, raising=False)
    monkeypatch.chdir(tmp_path)


def test_fallback_names_the_true_grid_and_why(no_real_matrices, capsys):
    assert demo.main(["--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    n = datasets.GENERATED["poisson2d"].presets["small"]["n"]
    assert f"2-D Poisson {n}x{n} grid ({n * n:,} rows)" in out
    assert "no real matrices found; set SPARSEGPU_MATRICES" in out
    assert f"{n * n:,} x {n * n:,}" in out
    assert "poisson2d(300)" not in out
    assert "solve A x = b with CG" in out and "info 0" in out


def test_generated_family_with_a_size(no_real_matrices, capsys):
    assert demo.main(["--backend", "cpu", "--matrix", "poisson3d:small"]) == 0
    out = capsys.readouterr().out
    preset = datasets.GENERATED["poisson3d"].presets["small"]
    S = datasets.generate("poisson3d", "small")
    assert out.splitlines()[1].startswith("matrix: poisson3d:small, 3-D 7-point Laplacian")
    assert f"n={preset['n']}" in out
    assert f"{S.shape[0]:,} x {S.shape[1]:,}, {S.nnz:,} stored entries" in out


def test_medium_preset_loads_by_its_name(no_real_matrices):
    label, S = demo.load("poisson2d:medium")
    n = datasets.GENERATED["poisson2d"].presets["medium"]["n"]
    assert label.startswith("poisson2d:medium") and f"n={n}" in label
    assert S.shape == (n * n, n * n)


def test_family_without_a_size_takes_small(no_real_matrices):
    label, S = demo.load("banded")
    assert label.startswith("banded:small")
    assert (S != datasets.generate("banded", "small")).nnz == 0


@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
def test_matrix_market_file(no_real_matrices, tmp_path, rng, capsys, suffix):
    S = sp.random_array((60, 45), density=0.1, rng=rng, format="csr")
    path = tmp_path / f"mine{suffix}"
    if suffix == ".mtx":
        scipy.io.mmwrite(str(path), S)
    else:
        plain = tmp_path / "plain.mtx"
        scipy.io.mmwrite(str(plain), S)
        path.write_bytes(gzip.compress(plain.read_bytes()))
    label, loaded = demo.load(str(path))
    assert label.startswith(f"mine{suffix}")
    np.testing.assert_allclose(loaded.toarray(), S.toarray())
    assert demo.main(["--backend", "cpu", "--matrix", str(path)]) == 0  # rectangular: no solve
    out = capsys.readouterr().out
    assert "60 x 45" in out and "solve" not in out


def test_real_matrix_from_the_environment_folder(monkeypatch, tmp_path, rng, capsys):
    """A folder of gzipped Matrix Market files named by SPARSEGPU_MATRICES is enough."""
    monkeypatch.setattr(datasets, "matrix_dir", lambda: None)
    monkeypatch.setenv(datasets.MATRICES_ENV, str(tmp_path))
    S = sp.random_array((30, 30), density=0.2, rng=rng, format="csr")
    S = (S + S.T + 10 * sp.eye_array(30)).tocsr()
    plain = tmp_path / "plain.mtx"
    scipy.io.mmwrite(str(plain), S)
    (tmp_path / f"{demo.DEFAULT_MATRIX}.mtx.gz").write_bytes(gzip.compress(plain.read_bytes()))
    assert demo.main(["--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert f"matrix: {demo.DEFAULT_MATRIX} from {tmp_path} (the default)" in out
    label, loaded = demo.load(demo.DEFAULT_MATRIX)
    assert label == f"{demo.DEFAULT_MATRIX} from {tmp_path}"
    np.testing.assert_allclose(loaded.toarray(), S.toarray())


@pytest.mark.parametrize("spec, says", [
    ("poisson2d:huge", "unknown size 'huge'"),
    ("no_such_matrix", "'no_such_matrix' is not a generated family"),
    ("missing/file.mtx", "no file 'missing/file.mtx'"),
    ("missing.mtx.gz", "no file 'missing.mtx.gz'"),
])
def test_bad_matrix_is_a_one_line_usage_error(no_real_matrices, capsys, spec, says):
    with pytest.raises(SystemExit) as stopped:
        demo.main(["--backend", "cpu", "--matrix", spec])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("usage:"), err
    assert "error: argument --matrix:" in lines[1] and says in lines[1]
    assert "poisson2d" in lines[1] and ".mtx.gz" in lines[1] and "medium" in lines[1]
    assert "Traceback" not in err


def test_unreadable_file_is_a_usage_error(no_real_matrices, tmp_path, capsys):
    path = tmp_path / "broken.mtx"
    path.write_text("this is not a Matrix Market file\n")
    with pytest.raises(SystemExit) as stopped:
        demo.main(["--backend", "cpu", "--matrix", str(path)])
    assert stopped.value.code == 2
    assert f"cannot read {path}" in capsys.readouterr().err
