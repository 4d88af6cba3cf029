"""Shared fixtures: backends to test, GPU skipping, fresh random generators, real matrices."""

from __future__ import annotations

import os

import numpy as np
import pytest

import sparsegpu
from sparsegpu import datasets

GPU = sparsegpu.gpu_available() and os.environ.get("SPARSEGPU_BACKEND", "") != "cpu"
BACKENDS = ["cpu", "gpu"] if GPU else ["cpu"]
requires_gpu = pytest.mark.skipif(not GPU, reason="needs a CUDA GPU and CuPy")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.keywords and not GPU:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU and CuPy"))


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A freshly seeded generator; the seed is in the test's report if it fails, and
    ``SPARSEGPU_TEST_SEED=<seed>`` replays it."""
    replay = os.environ.get("SPARSEGPU_TEST_SEED")
    seed = int(replay) if replay else int.from_bytes(os.urandom(4), "little")
    request.node.user_properties.append(("seed", seed))
    print(f"random seed: {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


def xp_for(backend: str):
    if backend == "gpu":
        import cupy

        return cupy
    return np


def to_numpy(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


def poisoned(shape, dtype, xp) -> object:
    """An output buffer full of NaN, so unwritten entries show."""
    return xp.full(shape, np.nan, dtype=dtype)


REAL_MATRICES = datasets.real_matrix_names()
requires_matrices = pytest.mark.skipif(not REAL_MATRICES, reason="real matrices not found (set SPARSEGPU_MATRICES)")
