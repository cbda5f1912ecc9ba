"""The in-memory vector cache: exact below its limits, a faiss index above, through its public methods."""

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from llama_index_graphrag_milvus.milvus import vectors as vectors_module
from llama_index_graphrag_milvus.milvus.vectors import VectorCache


@pytest.fixture
def small_limits(monkeypatch):
    """Searches over more than 2,000 rows of 32 values go through the index, so that tests stay small."""
    monkeypatch.setattr(vectors_module, "EXACT_SEARCH_MAX_VALUES", 2_000 * 32)
    monkeypatch.setattr(vectors_module, "EXACT_WITHIN_MAX_VALUES", 2_000 * 32)


def clustered(n, dim=32, seed=4):
    """Unit vectors around 60 centres, like embeddings, and 50 queries near some of them."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((60, dim))
    vectors = centres[rng.integers(60, size=n)] + 0.6 * rng.standard_normal((n, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = vectors[rng.integers(n, size=50)] + 0.3 * rng.standard_normal((50, dim)) / np.sqrt(dim) * 4
    return vectors, queries / np.linalg.norm(queries, axis=1, keepdims=True)


def exact_top(vectors, alive, query, k):
    return [p for p in np.argsort(-(vectors @ query), kind="stable").tolist() if alive[p]][:k]


def recall(cache, vectors, queries, alive, k=10):
    hits = 0
    for query, (positions, scores) in zip(queries, cache.top_k_many(queries, k, alive)):
        assert alive[positions].all() and (positions < len(alive)).all()
        assert np.all(np.diff(scores) <= 0)
        assert scores == pytest.approx(vectors[positions] @ query, abs=1e-5)  # exact cosines, always
        hits += len(set(positions.tolist()) & set(exact_top(vectors, alive, query, k)))
    return hits / (k * len(queries))


def test_search_below_the_limit_is_exact_and_respects_the_live_mask():
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((500, 16))
    cache = VectorCache(16)
    cache.put(range(300), vectors[:300])
    cache.put(range(300, 500), vectors[300:])  # grows
    alive = np.ones(500, dtype=bool)
    alive[::2] = False
    query = rng.standard_normal(16)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    positions, scores = cache.top_k(query, 7, alive)
    assert positions.tolist() == exact_top(unit, alive, query / np.linalg.norm(query), 7)
    assert np.all(np.diff(scores) <= 0)
    assert cache.similarity(query, positions) == pytest.approx(scores, abs=1e-5)
    assert cache.similarity(query, np.array([10_000])).tolist() == [0.0]
    assert cache.has(np.array([0, 499, 500])).tolist() == [True, True, False]
    assert cache.rows(np.array([1, 10_000]))[1].tolist() == [0.0] * 16


def test_a_row_scores_the_same_whatever_the_rows_scored_with_it():
    """Both backends score the same relations in other batches (the cache by positions, Milvus mode by
    lookups): a row's cosine must not depend on its batch, or exact ties order otherwise. Integer-valued
    vectors, like the hash embedding's, tie often."""
    rng = np.random.default_rng(0)
    vectors = rng.integers(-2, 3, size=(20_000, 32)).astype(np.float32)
    query = rng.integers(-2, 3, size=32).astype(np.float32)
    cache = VectorCache(32)
    cache.put(range(len(vectors)), vectors)
    whole = cache.similarity(query, np.arange(len(vectors)))
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    expected = vectors_module.cosines(vectors_module.unit_rows(vectors), vectors_module.unit_rows(query[None])[0])
    assert whole.tolist() == expected.tolist() and whole == pytest.approx(unit @ (query / np.linalg.norm(query)), abs=1e-6)
    for size in (1, 3, 7, 1_000, 4_999):
        batch = np.sort(rng.choice(len(vectors), size=size, replace=False))
        assert cache.similarity(query, batch).tolist() == whole[batch].tolist()


def test_the_index_is_built_on_the_first_search_above_the_limit(small_limits):
    vectors, queries = clustered(1_500)
    cache = VectorCache(32)
    cache.put(range(1_500), vectors)
    plain = cache.nbytes
    cache.top_k(queries[0], 10, np.ones(1_500, dtype=bool))
    assert cache.nbytes == plain  # exact: no index
    cache.put(range(1_500, 3_000), clustered(1_500, seed=6)[0])
    cache.top_k(queries[0], 10, np.ones(3_000, dtype=bool))
    assert cache.nbytes > plain + 3_000 * 32  # now an index holds a code for each row


def test_above_the_limit_search_finds_nearly_every_true_neighbour_and_never_a_dead_row(small_limits):
    vectors, queries = clustered(20_000)
    cache = VectorCache(32)
    cache.put(range(20_000), vectors)
    alive = np.ones(20_000, dtype=bool)
    alive[::3] = False
    assert recall(cache, vectors, queries, alive) >= 0.9
    dead = np.flatnonzero(~alive)[:20]
    for position, (positions, _) in zip(dead, cache.top_k_many(vectors[dead], 5, alive)):
        assert position not in positions.tolist() and alive[positions].all()
    everything = np.ones(20_000, dtype=bool)
    for position, (positions, scores) in zip(dead, cache.top_k_many(vectors[dead], 5, everything)):
        assert positions[0] == position and scores[0] == pytest.approx(1.0, abs=1e-5)
    short = alive[:10_000]  # a mask shorter than the cache: rows past it are not searched
    assert recall(cache, vectors[:10_000], queries, short) >= 0.9


def test_rows_appended_or_rewritten_after_the_index_was_built_are_found(small_limits):
    vectors, queries = clustered(20_000)
    cache = VectorCache(32)
    cache.put(range(15_000), vectors[:15_000])
    alive = np.ones(20_000, dtype=bool)
    assert recall(cache, vectors[:15_000], queries, alive[:15_000]) >= 0.9  # builds the index
    cache.put(range(15_000, 20_000), vectors[15_000:])
    assert recall(cache, vectors, queries, alive) >= 0.9
    positions, scores = cache.top_k(vectors[19_999], 1, alive)
    assert positions.tolist() == [19_999] and scores[0] == pytest.approx(1.0, abs=1e-5)

    moved = -vectors[7]  # position 7 now holds another vector: found by it, not by the old one
    cache.put([7], [moved])
    positions, _ = cache.top_k(moved, 1, alive)
    assert positions.tolist() == [7]
    assert 7 not in cache.top_k(vectors[7], 10, alive)[0].tolist()
    gap = VectorCache(32)  # a position left empty when the index was built, filled later
    gap.put(range(1, 5_000), vectors[1:5_000])
    gap.top_k(queries[0], 1, alive[:5_000])
    gap.put([0], [vectors[0]])
    assert gap.top_k(vectors[0], 1, alive[:5_000])[0].tolist() == [0]


@pytest.mark.parametrize("approximate", [False, True])
def test_threshold_search_finds_planted_near_duplicates_and_nothing_below_the_threshold(monkeypatch, approximate):
    monkeypatch.setattr(vectors_module, "EXACT_WITHIN_MAX_VALUES", 10**9)
    if approximate:
        monkeypatch.setattr(vectors_module, "EXACT_WITHIN_MAX_VALUES", 1_000 * 32)
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((8_000, 32))
    cache = VectorCache(32)
    cache.put(range(8_000), vectors)
    alive = np.ones(8_000, dtype=bool)
    alive[7] = False
    queries = vectors[:20] + 0.05 * rng.standard_normal((20, 32))  # near duplicates of rows 0..19
    found = cache.within(queries, 0.9, 3, alive)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for i, (positions, scores) in enumerate(found):
        q = queries[i] / np.linalg.norm(queries[i])
        expected = [p for p in exact_top(unit, alive, q, 3) if unit[p] @ q >= 0.9]
        assert positions.tolist() == expected
        assert (scores >= 0.9).all() and scores == pytest.approx(unit[positions] @ q, abs=1e-5)
        assert (i in positions.tolist()) == (i != 7)


def test_threshold_search_above_the_limit_on_clustered_rows(small_limits):
    vectors, _ = clustered(20_000)
    rng = np.random.default_rng(8)
    planted = rng.choice(20_000, size=200, replace=False)
    queries = vectors[planted] + 0.02 * rng.standard_normal((200, 32))
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    cache = VectorCache(32)
    cache.put(range(20_000), vectors)
    alive = np.ones(20_000, dtype=bool)
    alive[planted[:10]] = False
    found = cache.within(queries, 0.95, 4, alive)
    for i, (position, query, (positions, scores)) in enumerate(zip(planted, queries, found)):
        assert (position in positions.tolist()) == (i >= 10)
        assert alive[positions].all() and (scores >= 0.95).all() and len(positions) <= 4
        assert scores == pytest.approx(vectors[positions] @ query, abs=1e-5)


def test_concurrent_searches_give_the_sequential_results_and_leave_the_blas_threads_alone(small_limits):
    blas_threads = {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
    vectors, queries = clustered(10_000)
    cache = VectorCache(32)
    cache.put(range(10_000), vectors)
    alive = np.ones(10_000, dtype=bool)
    alive[::5] = False
    start = threading.Barrier(2)
    results = [None, None]

    def search(slot):
        start.wait()  # both race to build the index, then search side by side
        results[slot] = [
            [cache.top_k_many(queries, 10, alive), cache.within(queries, 0.8, 5, alive)] for _ in range(5)
        ]

    threads = [threading.Thread(target=search, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sequential = [cache.top_k_many(queries, 10, alive), cache.within(queries, 0.8, 5, alive)]
    for rounds in results:
        for round_ in rounds:
            for got, expected in zip(round_, sequential):
                assert [p.tolist() for p, _ in got] == [p.tolist() for p, _ in expected]
    after = {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
    assert after == blas_threads
