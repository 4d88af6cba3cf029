"""Reverse Cuthill-McKee: the NumPy reference against SciPy on the CPU (a valid permutation, bandwidth
never above SciPy's, SciPy's own permutation from SciPy's start vertices); the GPU driver against
the reference, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee as scipy_rcm

from sparsegpu import datasets
from sparsegpu.reference import graph_rcm as reference
from tests.conftest import REAL_MATRICES, requires_gpu, requires_matrices
from tests.csgraph.test_device_bfs import canonical, poison_pool, random_directed, symmetric, with_isolated

REAL_STRUCTURES = [name for name in ("1138_bus", "bcspwr10", "ct2010", "as-caida", "ego-Facebook", "luxembourg_osm",
                                     "crack", "fe_4elt2", "add32", "bcsstk13", "email-Enron", "bio-dmela",
                                     "tech-WHOIS", "young1c", "mhd1280b", "west0067") if name in REAL_MATRICES]


def real_structure(name: str) -> sp.csr_array:
    A = sp.csr_array(datasets.load_matrix(name))
    n = min(A.shape)
    return symmetric(A[:n, :n])


def generated_structures(rng: np.random.Generator) -> dict[str, sp.csr_array]:
    seed = int(rng.integers(1 << 30))
    n = int(rng.integers(20, 2000))
    return {
        "kron": canonical(datasets.kronecker(11, 8, seed=seed)),
        "grid": canonical(datasets.grid_graph(int(rng.integers(3, 50)), int(rng.integers(3, 50)), seed=seed)),
        "road": canonical(datasets.road_like(int(rng.integers(10, 60)), seed=seed)),
        "random": symmetric(random_directed(rng, n, float(rng.uniform(0.5, 4)) / n)),
        "random_int64": symmetric(random_directed(rng, n, 2.0 / n), np.int64),
        "isolated": with_isolated(rng, symmetric(random_directed(rng, 300, 0.01)), 100),
        "self_loops": symmetric(random_directed(rng, 200, 0.02) + sp.eye_array(200, format="csr")),
        "shuffled_mesh": shuffled(rng, canonical(datasets.poisson2d(int(rng.integers(5, 40))))),
        "one": canonical(sp.csr_array((1, 1))),
        "one_loop": canonical(sp.csr_array(np.ones((1, 1)))),
    }


def shuffled(rng: np.random.Generator, A: sp.csr_array) -> sp.csr_array:
    p = rng.permutation(A.shape[0])
    return canonical(A[p][:, p], A.indices.dtype.type)


def check_against_scipy(A: sp.csr_array, perm: np.ndarray) -> None:
    n = A.shape[0]
    assert perm.dtype == np.int32 and np.array_equal(np.sort(perm), np.arange(n))
    expected = scipy_rcm(A, symmetric_mode=True)
    assert reference.bandwidth(A.indptr, A.indices, perm) <= reference.bandwidth(A.indptr, A.indices, expected)


def scipy_start_permutation(A: sp.csr_array) -> np.ndarray:
    """The level-synchronous Cuthill-McKee from SciPy's start vertices, reversed."""
    degree = reference.node_degrees(A.indptr, A.indices)
    inds, rank = reference.degree_ranks(degree)
    labels = reference.component_labels(A.indptr, A.indices)
    starts, roots = reference.scipy_starts(labels, inds, rank)
    position = np.empty(A.shape[0], dtype=np.int64)
    position[roots] = np.arange(roots.size)
    key, _ = reference.cuthill_mckee_keys(A.indptr, A.indices, degree, starts)
    return np.argsort(key + position[labels] * A.shape[0])[::-1]


def test_reference_never_wider_than_scipy_and_reproduces_it(rng):
    for name, A in generated_structures(rng).items():
        check_against_scipy(A, reference.reverse_cuthill_mckee(A.indptr, A.indices))
        np.testing.assert_array_equal(scipy_start_permutation(A), scipy_rcm(A, symmetric_mode=True), err_msg=name)


@requires_matrices
@pytest.mark.parametrize("name", REAL_STRUCTURES)
def test_reference_on_real_graphs(name):
    A = real_structure(name)
    check_against_scipy(A, reference.reverse_cuthill_mckee(A.indptr, A.indices))
    np.testing.assert_array_equal(scipy_start_permutation(A), scipy_rcm(A, symmetric_mode=True))


def test_reference_edge_cases():
    assert reference.reverse_cuthill_mckee(np.array([0]), np.array([], dtype=np.int32)).size == 0
    assert reference.reverse_cuthill_mckee(np.array([0, 0, 0]), np.array([], dtype=np.int32)).tolist() == [1, 0]
    assert reference.bandwidth(np.array([0, 0]), np.array([], dtype=np.int32), np.array([0])) == 0


def test_reference_component_labels_are_smallest_vertices(rng):
    A = with_isolated(rng, symmetric(random_directed(rng, 100, 0.02)), 20)
    labels = reference.component_labels(A.indptr, A.indices)
    assert np.all(labels <= np.arange(A.shape[0])) and np.all(labels[labels] == labels)
    C = A.tocoo()
    assert np.all(labels[C.row] == labels[C.col])


# --------------------------------------------------------------------------- GPU


def device_rcm(A: sp.csr_array) -> np.ndarray:
    import cupy

    from sparsegpu.csgraph import _device_rcm

    poison_pool(cupy)
    return _device_rcm.reverse_cuthill_mckee(cupy.asarray(A.indptr), cupy.asarray(A.indices)).get()


def check_device(A: sp.csr_array) -> None:
    perm = device_rcm(A)
    np.testing.assert_array_equal(perm, reference.reverse_cuthill_mckee(A.indptr, A.indices))
    check_against_scipy(A, perm)
    assert device_rcm(A).tobytes() == perm.tobytes()


@requires_gpu
@pytest.mark.gpu
def test_device_matches_reference_on_generated_graphs(rng):
    for A in generated_structures(rng).values():
        check_device(A)


@requires_gpu
@pytest.mark.gpu
@requires_matrices
@pytest.mark.parametrize("name", REAL_STRUCTURES)
def test_device_matches_reference_on_real_graphs(name):
    check_device(real_structure(name))


@requires_gpu
@pytest.mark.gpu
def test_device_large_levels_and_components(rng):
    """Levels above one block's size take the sorting path; many components at once."""
    seed = int(rng.integers(1 << 30))
    check_device(canonical(datasets.kronecker(14, 8, seed=seed)))
    check_device(canonical(datasets.road_like(200, seed=seed, keep=0.55)))


def broom(rng: np.random.Generator, handle: int, bristles: int) -> sp.csr_array:
    """A path whose end has ``bristles`` leaves, each leaf tied to a random other leaf: a level of
    many siblings of one parent, degrees tied, vertices shuffled."""
    n = handle + bristles
    rows = list(range(handle - 1)) + [handle - 1] * bristles
    cols = list(range(1, handle)) + list(range(handle, n))
    leaves = rng.permutation(np.arange(handle, n))
    rows += leaves[: bristles // 2].tolist()
    cols += leaves[bristles // 2 : 2 * (bristles // 2)].tolist()
    A = sp.csr_array((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    p = rng.permutation(n)
    return shuffled(rng, symmetric(A[p][:, p]))


@requires_gpu
@pytest.mark.gpu
def test_device_levels_grouped_by_parent(rng):
    """Levels of 129 to 1024 vertices rank each vertex among its siblings only (kernels/graph_rcm.cu
    CM_PAIRWISE); a small level after one above a block's size ranks pairwise."""
    seed = int(rng.integers(1 << 30))
    check_device(shuffled(rng, canonical(datasets.grid_graph(int(rng.integers(150, 400)), 300, seed=seed))))
    check_device(canonical(datasets.road_like(int(rng.integers(300, 500)), seed=seed)))
    check_device(broom(rng, int(rng.integers(2, 50)), int(rng.integers(129, 1025))))
    check_device(broom(rng, 3, 1500))


@requires_gpu
@pytest.mark.gpu
def test_device_edge_cases():
    import cupy

    from sparsegpu.csgraph import _device_rcm

    assert _device_rcm.reverse_cuthill_mckee(cupy.zeros(1, dtype=np.int32), cupy.zeros(0, dtype=np.int32)).size == 0
    perm = _device_rcm.reverse_cuthill_mckee(cupy.zeros(3, dtype=np.int64), cupy.zeros(0, dtype=np.int64))
    assert perm.get().tolist() == [1, 0] and perm.dtype == np.int32
