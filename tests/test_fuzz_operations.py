"""The operations fuzzer (tests/fuzz/operations.py and graphs.py), run in a subprocess so that a crash fails
this test instead of ending the test run: products, arithmetic, constructors and graph
algorithms on awkward operands against SciPy, and bad arguments against clean errors. A few
hundred examples in all on every run (SPARSEGPU_FUZZ_OPERATIONS_EXAMPLES sets the count), on
the CPU backend and, on a GPU machine, the GPU backend."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GPU

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = int(os.environ.get("SPARSEGPU_FUZZ_OPERATIONS_EXAMPLES", "800"))


@pytest.mark.parametrize("backend", ["cpu"] + (["gpu"] if GPU else []))
def test_operations_match_scipy_or_refuse_cleanly(backend):
    env = {**os.environ, "SPARSEGPU_FUZZ_EXAMPLES": str(EXAMPLES), "SPARSEGPU_FUZZ_BACKEND": backend,
           "PYTHONFAULTHANDLER": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::RuntimeWarning",
         "tests/fuzz/operations.py", "tests/fuzz/graphs.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False,
    )
    output = (run.stdout + run.stderr).splitlines()
    cases = [line for line in output if line.startswith("case:")]
    lines = [line for line in output if not line.startswith("case:")]
    tail = "\n".join(lines[-60:] + cases[-1:])  # the last case drawn: the one that failed, or crashed
    assert run.returncode == 0, f"the fuzzer failed or crashed (exit {run.returncode}):\n{tail}"
    assert "passed" in run.stdout and "failed" not in run.stdout, tail
