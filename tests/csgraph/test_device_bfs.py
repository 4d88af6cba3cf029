"""Breadth-first search: the NumPy reference against SciPy on the CPU; the persistent GPU kernel
against the reference (bit for bit: levels and smallest-parent predecessors are unique) and SciPy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from sparsegpu import datasets
from sparsegpu.reference import graph_bfs as reference
from tests.conftest import REAL_MATRICES, requires_gpu, requires_matrices

REAL_GRAPHS = [name for name in ("as-caida", "ego-Facebook", "email-Enron", "cit-HepPh", "bio-dmela", "tech-WHOIS",
                                 "luxembourg_osm", "ct2010", "bcspwr10", "west0067") if name in REAL_MATRICES]


def canonical(A: sp.sparray, index: type = np.int32) -> sp.csr_array:
    """The structure of ``A`` as a canonical CSR with unit weights and ``index`` indices."""
    A = sp.csr_array(A, copy=True)
    A.data = np.ones_like(A.data, dtype=np.float64)
    A.sum_duplicates()
    A.sort_indices()
    A.eliminate_zeros()
    return sp.csr_array((A.data, A.indices.astype(index), A.indptr.astype(index)), shape=A.shape)


def symmetric(A: sp.sparray, index: type = np.int32) -> sp.csr_array:
    A = sp.csr_array(A)
    return canonical(A + A.T, index)


def real_graph(name: str) -> sp.csr_array:
    A = datasets.load_matrix(name)
    n = min(A.shape)
    return canonical(sp.csr_array(A)[:n, :n])


def random_directed(rng: np.random.Generator, n: int, density: float, index: type = np.int32) -> sp.csr_array:
    A = sp.random_array((n, n), density=density, rng=rng, format="csr")
    return canonical(A, index)


def with_isolated(rng: np.random.Generator, A: sp.csr_array, extra: int) -> sp.csr_array:
    """``A`` relabelled into a larger vertex set, ``extra`` vertices left with no edges."""
    n = A.shape[0] + extra
    labels = rng.permutation(n)[: A.shape[0]]
    C = A.tocoo()
    return canonical(sp.coo_array((C.data, (labels[C.row], labels[C.col])), shape=(n, n)), A.indices.dtype.type)


def generated_graphs(rng: np.random.Generator) -> dict[str, tuple[sp.csr_array, bool]]:
    """name -> (graph, symmetric) over the generators, random directed graphs and edge cases."""
    seed = int(rng.integers(1 << 30))
    loops = random_directed(rng, 300, 0.01)
    loops = canonical(loops + sp.eye_array(300, format="csr"))
    return {
        "kron": (canonical(datasets.kronecker(10, 8, seed=seed)), True),
        "grid": (canonical(datasets.grid_graph(int(rng.integers(5, 40)), int(rng.integers(5, 40)), seed=seed)), True),
        "road": (canonical(datasets.road_like(int(rng.integers(10, 40)), seed=seed)), True),
        "directed": (random_directed(rng, int(rng.integers(50, 800)), 0.005), False),
        "directed_int64": (random_directed(rng, int(rng.integers(50, 800)), 0.01, np.int64), False),
        "isolated": (with_isolated(rng, symmetric(random_directed(rng, 200, 0.01)), 150), True),
        "self_loops": (loops, False),
        "pieces": (canonical(sp.block_diag([datasets.grid_graph(4, 5, seed=seed), sp.csr_array((3, 3)),
                                             datasets.kronecker(6, 4, seed=seed)])), True),
        "one": (canonical(sp.csr_array((1, 1))), True),
        "one_loop": (canonical(sp.csr_array(np.ones((1, 1)))), True),
    }


def scipy_levels(A: sp.csr_array, source: int) -> np.ndarray:
    """Levels implied by SciPy's BFS order and predecessors (-1 unreached)."""
    order, preds = breadth_first_order(A, source, directed=True, return_predecessors=True)
    levels = np.full(A.shape[0], -1, dtype=np.int32)
    levels[order[0]] = 0
    for v in order[1:]:
        levels[v] = levels[preds[v]] + 1
    return levels


def check_bfs(A: sp.csr_array, source: int, levels: np.ndarray, preds: np.ndarray | None) -> None:
    """Levels equal SciPy's; predecessors are the smallest in-neighbour one level up."""
    expected = scipy_levels(A, source)
    np.testing.assert_array_equal(levels, expected)
    if preds is None:
        return
    assert preds.dtype == A.indices.dtype
    C = A.tocoo()
    tree = (levels[C.row] >= 0) & (levels[C.col] == levels[C.row] + 1)
    smallest = np.full(A.shape[0], np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(smallest, C.col[tree], C.row[tree].astype(np.int64))
    want = np.where(levels > 0, smallest, -9999)
    np.testing.assert_array_equal(preds.astype(np.int64), want)


def sources_for(rng: np.random.Generator, A: sp.csr_array, count: int = 3) -> list[int]:
    """Random sources, the first of them one with edges when there is one."""
    n = A.shape[0]
    with_edges = np.flatnonzero(np.diff(A.indptr))
    picks = [int(rng.choice(with_edges))] if with_edges.size else []
    return picks + [int(s) for s in rng.integers(0, n, size=count - len(picks))]


def in_edges(A: sp.csr_array) -> sp.csr_array:
    return canonical(A.T, A.indices.dtype.type)


# --------------------------------------------------------------------------- reference (CPU)


def test_reference_matches_scipy_on_generated_graphs(rng):
    for name, (A, _) in generated_graphs(rng).items():
        for source in sources_for(rng, A):
            levels, preds = reference.bfs(A.indptr, A.indices, np.array([source]))
            check_bfs(A, source, levels, preds)
            order = reference.bfs_order(levels)
            scipy_order = breadth_first_order(A, source, directed=True, return_predecessors=False)
            assert sorted(order.tolist()) == sorted(scipy_order.tolist()), name
            assert np.all(np.diff(levels[order]) >= 0) and order.dtype == np.int32


@requires_matrices
@pytest.mark.parametrize("name", REAL_GRAPHS)
def test_reference_matches_scipy_on_real_graphs(rng, name):
    A = real_graph(name)
    for source in sources_for(rng, A, 2):
        levels, preds = reference.bfs(A.indptr, A.indices, np.array([source]))
        check_bfs(A, source, levels, preds)


def test_reference_edge_cases():
    empty = sp.csr_array((0, 0))
    levels, preds = reference.bfs(empty.indptr, empty.indices.astype(np.int32), np.array([], dtype=np.int32))
    assert levels.size == 0 and preds.size == 0
    assert reference.bfs_order(np.array([], dtype=np.int32)).size == 0
    levels, preds = reference.bfs(np.array([0, 0]), np.array([], dtype=np.int64), np.array([0]), predecessors=False)
    assert levels.tolist() == [0] and preds is None


def test_reference_parents_one_level_up_are_the_predecessors(rng):
    """The rule of the single-block levels' predecessors (the smallest in-neighbour one level up)
    gives the same predecessors as the level-synchronous reference."""
    for name, (A, _) in generated_graphs(rng).items():
        T = in_edges(A)
        for source in sources_for(rng, A, 2):
            levels, preds = reference.bfs(A.indptr, A.indices, np.array([source]))
            reached = rng.permutation(np.flatnonzero(levels > 0))
            parents = reference.parents_one_level_up(T.indptr, T.indices, levels, reached)
            np.testing.assert_array_equal(parents, preds[reached], err_msg=name)
            assert parents.dtype == A.indices.dtype


def test_reference_multi_source_levels_are_distances_to_the_nearest(rng):
    A = canonical(datasets.grid_graph(9, 11, seed=1))
    sources = rng.choice(A.shape[0], size=4, replace=False)
    levels, _ = reference.bfs(A.indptr, A.indices, sources)
    nearest = np.min([scipy_levels(A, int(s)) for s in sources], axis=0)
    np.testing.assert_array_equal(levels, nearest)


class FakeWord:
    def __init__(self, value: int) -> None:
        self.value = value

    def get(self) -> np.ndarray:
        return np.asarray(self.value)


class FakeKernels:
    """Launches of the two BFS kernels, the persistent one finishing after ``pairs`` launches."""

    def __init__(self, pairs: int | None) -> None:
        self.pairs, self.launches, self.finished = pairs, [], 0

    def single(self, grid, block, args, shared_mem=0):
        assert grid == (1,) and shared_mem == 64
        self.launches.append("single")

    def persistent(self, args, index, n):
        self.launches.append("persistent")
        if self.pairs is not None and self.launches.count("persistent") >= self.pairs:
            self.finished = 1

    def __getitem__(self, word: int) -> FakeWord:  # the control words
        from sparsegpu.csgraph import _device_bfs

        return FakeWord(self.finished if word == _device_bfs.BFS_FINISHED_WORD else 0)


@pytest.mark.parametrize("pairs, first, queued", [(1, 2, 2), (2, 2, 2), (3, 2, 4), (5, 2, 8), (9, 1, 16), (1, 1, 1)])
def test_alternation_reads_the_finished_word_as_the_pairs_double(monkeypatch, pairs, first, queued):
    """The host queues [single-block, persistent] pairs, reading the finished word after
    FIRST_PAIRS and then whenever the pairs queued have doubled, and stops once it is set."""
    from sparsegpu.csgraph import _device_bfs

    fake = FakeKernels(pairs)
    monkeypatch.setattr(_device_bfs, "FIRST_PAIRS", first)
    monkeypatch.setattr(_device_bfs, "allow_dynamic_shared", lambda kernel, nbytes, what: kernel)
    monkeypatch.setattr(_device_bfs, "_launch_persistent", fake.persistent)
    _device_bfs._alternate(fake.single, (np.zeros(1, dtype=np.int32),), 64, (), fake, 100)
    assert fake.launches == ["single", "persistent"] * queued


def test_alternation_that_never_finishes_raises(monkeypatch):
    from sparsegpu.csgraph import _device_bfs

    fake = FakeKernels(None)
    monkeypatch.setattr(_device_bfs, "allow_dynamic_shared", lambda kernel, nbytes, what: kernel)
    monkeypatch.setattr(_device_bfs, "_launch_persistent", fake.persistent)
    with pytest.raises(RuntimeError, match="did not finish"):
        _device_bfs._alternate(fake.single, (np.zeros(1, dtype=np.int32),), 64, (), fake, 10)
    assert 11 < fake.launches.count("persistent") <= 2 * 12


# --------------------------------------------------------------------------- GPU


def poison_pool(cupy, nbytes: int = 1 << 26) -> None:
    """Leave the memory pool's free blocks full of garbage, so unwritten outputs show."""
    junk = cupy.full(nbytes // 8, 0x5A5A5A5A5A5A5A5A, dtype=np.uint64)
    del junk


def device_bfs(A: sp.csr_array, source: int, symmetric_graph: bool, predecessors: bool = True):
    import cupy

    from sparsegpu.csgraph import _device_bfs

    poison_pool(cupy)
    indptr, indices = cupy.asarray(A.indptr), cupy.asarray(A.indices)
    extra = {}
    if not symmetric_graph:
        T = in_edges(A)
        extra = {"in_indptr": cupy.asarray(T.indptr), "in_indices": cupy.asarray(T.indices)}
    levels, preds = _device_bfs.bfs(indptr, indices, source, predecessors=predecessors, **extra)
    order = _device_bfs.bfs_order(levels)
    return levels.get(), (None if preds is None else preds.get()), order.get()


def check_device(A: sp.csr_array, source: int, symmetric_graph: bool) -> None:
    levels, preds, order = device_bfs(A, source, symmetric_graph)
    assert levels.dtype == np.int32 and order.dtype == np.int32
    ref_levels, ref_preds = reference.bfs(A.indptr, A.indices, np.array([source]))
    np.testing.assert_array_equal(levels, ref_levels)
    np.testing.assert_array_equal(preds, ref_preds)
    np.testing.assert_array_equal(order, reference.bfs_order(ref_levels))
    check_bfs(A, source, levels, preds)
    again_levels, again_preds, _ = device_bfs(A, source, symmetric_graph)
    assert again_levels.tobytes() == levels.tobytes() and again_preds.tobytes() == preds.tobytes()
    no_preds = device_bfs(A, source, symmetric_graph, predecessors=False)
    assert no_preds[1] is None
    np.testing.assert_array_equal(no_preds[0], levels)


@requires_gpu
@pytest.mark.gpu
def test_device_matches_reference_on_generated_graphs(rng):
    for name, (A, is_symmetric) in generated_graphs(rng).items():
        for source in sources_for(rng, A, 2):
            check_device(A, source, is_symmetric)


@requires_gpu
@pytest.mark.gpu
@requires_matrices
@pytest.mark.parametrize("name", REAL_GRAPHS)
def test_device_matches_reference_on_real_graphs(rng, name):
    A = real_graph(name)
    is_symmetric = (A != A.T).nnz == 0
    for source in sources_for(rng, A, 2):
        check_device(A, source, is_symmetric)


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_device_large_graphs_both_directions(rng, index):
    """Kronecker graphs switch to pull and back; the road-like one runs hundreds of small levels."""
    seed = int(rng.integers(1 << 30))
    for A in (canonical(datasets.kronecker(15, 16, seed=seed), index),
              canonical(datasets.road_like(300, seed=seed), index)):
        check_device(A, sources_for(rng, A, 1)[0], True)
    D = random_directed(rng, 200_000, 8 / 200_000, index)
    check_device(D, sources_for(rng, D, 1)[0], False)


@requires_gpu
@pytest.mark.gpu
def test_device_edge_cases():
    import cupy

    from sparsegpu.csgraph import _device_bfs

    levels, preds = _device_bfs.bfs(cupy.zeros(1, dtype=np.int32), cupy.zeros(0, dtype=np.int32), 0)
    assert levels.size == 0 and preds.size == 0 and _device_bfs.bfs_order(levels).size == 0
    levels, preds = _device_bfs.bfs(cupy.zeros(2, dtype=np.int64), cupy.zeros(0, dtype=np.int64), 0)
    assert levels.get().tolist() == [0] and preds.get().tolist() == [-9999] and preds.dtype == np.int64
    assert _device_bfs.bfs_order(levels).get().tolist() == [0]


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("small, per_sm", [(0, 2), (0, 1), (256, 1)])
def test_device_launch_shapes_agree(rng, monkeypatch, small, per_sm):
    """The persistent kernel alone: grid levels only, one block per multiprocessor, or short runs
    of block 0's levels: same bits."""
    from sparsegpu.csgraph import _device_bfs

    monkeypatch.setattr(_device_bfs, "SINGLE_BLOCK", False)
    monkeypatch.setattr(_device_bfs, "SMALL_FRONTIER", small)
    monkeypatch.setattr(_device_bfs, "BFS_BLOCKS_PER_SM", per_sm)
    seed = int(rng.integers(1 << 30))
    for A, is_symmetric in ((canonical(datasets.road_like(120, seed=seed)), True),
                            (canonical(datasets.kronecker(13, 16, seed=seed)), True),
                            (random_directed(rng, 20_000, 4 / 20_000), False)):
        check_device(A, sources_for(rng, A, 1)[0], is_symmetric)


def count_alternations(monkeypatch, _device_bfs) -> list[int]:
    """Record each call of the single-block / persistent alternation (one entry per call)."""
    calls: list[int] = []
    alternate = _device_bfs._alternate

    def recorded(*args, **kwargs):
        calls.append(1)
        return alternate(*args, **kwargs)

    monkeypatch.setattr(_device_bfs, "_alternate", recorded)
    return calls


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("frontier, first_pairs, per_sm", [(1024, 2, 2), (64, 1, 2), (1, 1, 1), (300, 3, 1)])
def test_device_single_block_shapes_agree(rng, monkeypatch, frontier, first_pairs, per_sm):
    """The single-block kernel alternating with the persistent one, handing over at various
    frontier sizes (1: nearly every level changes kernel) and reading the finished word after
    various numbers of pairs: the reference's bits."""
    from sparsegpu.csgraph import _device_bfs

    monkeypatch.setattr(_device_bfs, "SINGLE_BLOCK", True)
    monkeypatch.setattr(_device_bfs, "SINGLE_BLOCK_FRONTIER", frontier)
    monkeypatch.setattr(_device_bfs, "FIRST_PAIRS", first_pairs)
    monkeypatch.setattr(_device_bfs, "BFS_BLOCKS_PER_SM", per_sm)
    calls = count_alternations(monkeypatch, _device_bfs)
    seed = int(rng.integers(1 << 30))
    graphs = [(canonical(datasets.road_like(120, seed=seed)), True),
              (canonical(datasets.kronecker(13, 16, seed=seed)), True),
              (canonical(datasets.kronecker(12, 8, seed=seed), np.int64), True),
              (random_directed(rng, 20_000, 4 / 20_000), False),
              (with_isolated(rng, canonical(datasets.grid_graph(30, 40, seed=seed)), 500), True)]
    for A, is_symmetric in graphs:
        check_device(A, sources_for(rng, A, 1)[0], is_symmetric)
    assert len(calls) == 3 * len(graphs)  # check_device runs three searches a graph


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("single_block, bitmap_fits", [(True, True), (False, True), (True, False)])
def test_device_many_sources(rng, monkeypatch, single_block, bitmap_fits):
    """More sources than the single-block queue holds (handed over at level 0) and a few: the
    reference's levels and predecessors, with the single-block kernel, without it, and where its
    bitmap would not fit shared memory (the persistent kernel alone)."""
    import cupy

    from sparsegpu.csgraph import _device_bfs

    monkeypatch.setattr(_device_bfs, "SINGLE_BLOCK", single_block)
    if not bitmap_fits:
        monkeypatch.setattr(_device_bfs, "_bitmap_fits", lambda kernel, nbytes: False)
    calls = count_alternations(monkeypatch, _device_bfs)
    A = canonical(datasets.road_like(int(rng.integers(60, 90)), seed=int(rng.integers(1 << 30))))
    n = A.shape[0]
    for count in (3, 2_000):
        sources = np.sort(rng.choice(n, size=count, replace=False)).astype(A.indices.dtype)
        poison_pool(cupy)
        levels, preds = _device_bfs.multi_source_bfs(cupy.asarray(A.indptr), cupy.asarray(A.indices),
                                                      cupy.asarray(sources))
        ref_levels, ref_preds = reference.bfs(A.indptr, A.indices, sources)
        np.testing.assert_array_equal(levels.get(), ref_levels)
        np.testing.assert_array_equal(preds.get(), ref_preds)
    assert len(calls) == (2 if single_block and bitmap_fits else 0)
