"""The advisor tests' fixtures."""

from __future__ import annotations

import pytest

from tests.advisor.helpers import PASSES, use_pass


@pytest.fixture(params=list(PASSES))
def statistics_pass(request, monkeypatch) -> str:
    """Runs the test with each GPU pass (:data:`PASSES`) for every matrix, whatever its size."""
    use_pass(monkeypatch, request.param)
    return request.param
