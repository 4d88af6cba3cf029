"""sparsegpu.transfer.report: what a TransferReport says, on the GPU and on the CPU backend."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from sparsegpu.transfer import OutOfCoreCSR, TransferReport, upload, upload_csr


def test_gpu_report_gives_rate_and_overlap(rng):
    wall = float(rng.uniform(0.01, 1.0))
    report = TransferReport(wall=wall, nbytes=10**9, chunks=4,
                            stages={"pack": wall / 2, "h2d": wall, "device": wall / 4, "d2h": 0.0})
    assert report.transferred and math.isclose(report.gbps, 1.0 / wall)
    assert math.isclose(report.overlap, 1.75)
    text = repr(report)
    assert "GB" in text and "overlap" in text and "GB/s" in text and "4 chunks" in text


def test_cpu_report_says_nothing_was_transferred(rng):
    S = sp.random(50, 40, density=0.1, random_state=int(rng.integers(1 << 30)), format="csr")
    reports = [upload_csr(S, backend="cpu", report=True)[1],
               upload([np.ones(10)], backend="cpu", report=True)[1]]
    A = OutOfCoreCSR(S, device_budget_bytes=8192, backend="cpu")
    A.spmv(np.ones(40), report=True)
    reports.append(A.last_report)
    for report in reports:
        text = repr(report)
        assert not report.transferred and "nothing was transferred" in text
        assert "GB/s" not in text and "nan" not in text
        assert report.wall > 0 and report.nbytes > 0
