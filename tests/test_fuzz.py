"""The corruption fuzzer (tests/fuzz/corruptions.py), run in a subprocess so that a crash fails
this test instead of ending the test run. At least 2,000 corrupted inputs on every run, on the
active backend (the GPU backend on a GPU machine)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GPU

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = 2000


@pytest.mark.parametrize("backend", ["cpu"] + (["gpu"] if GPU else []))
def test_corruptions_never_crash_or_answer_wrong(backend):
    env = {**os.environ, "SPARSEGPU_FUZZ_EXAMPLES": str(EXAMPLES), "SPARSEGPU_FUZZ_BACKEND": backend,
           "PYTHONFAULTHANDLER": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "tests/fuzz/corruptions.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )
    tail = "\n".join((run.stdout + run.stderr).splitlines()[-40:])
    assert run.returncode == 0, f"the fuzzer failed or crashed (exit {run.returncode}):\n{tail}"
    assert "1 passed" in run.stdout, tail
