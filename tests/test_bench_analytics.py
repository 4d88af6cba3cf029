"""The analytics benchmark on the CPU: every function checked against its baselines."""

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu.bench import analytics

pytest.importorskip("networkx")


def test_every_function_agrees_with_its_baselines_on_a_small_graph():
    out = analytics.bench_analytics(["kron:8"], "cpu", repeat=1, seconds_per_case=0.05)
    assert [r["function"] for r in out["results"]] == list(analytics.FUNCTIONS)
    for row in out["results"]:
        statuses = {impl: o["status"] for impl, o in row["outcomes"].items()}
        assert statuses["sparsegpu"] == "ok", (row["function"], row["outcomes"]["sparsegpu"])
        assert not {"wrong", "error"} & set(statuses.values()), (row["function"], row["outcomes"])
        assert statuses["networkx"] == "ok"
    pagerank = out["results"][0]
    assert pagerank["iterations"] > 1 and pagerank["outcomes"]["sparsegpu"]["spmv_s"] > 0
    louvain = next(r for r in out["results"] if r["function"] == "louvain")
    assert set(louvain["modularity"]) >= {"sparsegpu", "networkx"}
    assert analytics.failures(out) == []
    assert len(analytics.analytics_lines(out)) == len(analytics.FUNCTIONS)


def test_scipy_jaccard_matches_a_direct_count(rng):
    S = sp.random_array((60, 60), density=0.1, random_state=int(rng.integers(1 << 31)), format="csr")
    S = sp.csr_array(((S + S.T) > 0).astype(float))
    S.setdiag(0)
    S.eliminate_zeros()
    S.sort_indices()
    dense = S.toarray() > 0
    rows, cols = np.nonzero(np.triu(dense, 1))
    expected = [(dense[u] & dense[v]).sum() / (dense[u] | dense[v]).sum() for u, v in zip(rows, cols)]
    np.testing.assert_array_equal(analytics.scipy_jaccard(S), expected)


def test_a_wrong_result_is_reported():
    graph = analytics.build_graph("kron:6")
    expected = analytics.reference(graph, "triangles")
    assert analytics.check(graph, "triangles", "x", expected["triangles"] + 1, expected) is not None
    expected = analytics.reference(graph, "pagerank")
    assert analytics.check(graph, "pagerank", "x", expected["pagerank"] * 1.01, expected) is not None


def test_unknown_functions_are_refused():
    with pytest.raises(ValueError, match="unknown function"):
        analytics.resolve_functions(["pagerank,nope"])
