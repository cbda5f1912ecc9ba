"""Expansion over the sparse adjacency, against graphs computed by hand and the notebook's matrix formula."""

import numpy as np
import pytest
import scipy.sparse as sp

from llama_index_graphrag_milvus.schema import entity_id as e
from llama_index_graphrag_milvus.graph import GraphCache, expand_from_entities, expand_from_relations


def chain_graph():
    """A path a —r1— b —r2— c —r3— d —r4— e, with passages p1: r1, p2: r2 r3, p3: r4."""
    cache = GraphCache()
    cache.add_relations([(1, e("a"), e("b")), (2, e("b"), e("c")), (3, e("c"), e("d")), (4, e("d"), e("e"))])
    cache.add_passages([("p1", [1]), ("p2", [2, 3]), ("p3", [4])])
    return cache


def rel_ids(cache, positions):
    return sorted(cache.relations.ids[p] for p in positions)


def ent(cache, name):
    return cache.entities.position[e(name)]


def test_expansion_from_an_entity_by_hand():
    cache = chain_graph()
    graph = cache.snapshot()
    # degree 0: a's own relation; 1: + relations of b (shares r1 with a); 2: + relations of c
    assert rel_ids(cache, expand_from_entities(graph, [ent(cache, "a")], 0)) == [1]
    assert rel_ids(cache, expand_from_entities(graph, [ent(cache, "a")], 1)) == [1, 2]
    assert rel_ids(cache, expand_from_entities(graph, [ent(cache, "a")], 2)) == [1, 2, 3]
    assert rel_ids(cache, expand_from_entities(graph, [ent(cache, "c")], 1)) == [1, 2, 3, 4]


def test_a_walk_does_not_continue_through_entities_outside_the_through_mask():
    cache = chain_graph()
    graph = cache.snapshot()
    through = np.ones(graph.shape[0], dtype=bool)
    through[ent(cache, "b")] = False  # b is a hub
    a, b = ent(cache, "a"), ent(cache, "b")
    assert rel_ids(cache, expand_from_entities(graph, [a], 2, through)) == [1]  # stops at b
    assert rel_ids(cache, expand_from_entities(graph, [b], 1, through)) == [1, 2]  # a seed hub: its own only
    assert rel_ids(cache, expand_from_entities(graph, [b], 1)) == [1, 2, 3]
    r1 = cache.relations.position[1]
    assert rel_ids(cache, expand_from_relations(graph, [r1], 1, through)) == [1]
    assert rel_ids(cache, expand_from_relations(graph, [r1], 1)) == [1, 2]


def test_expansion_from_a_relation_by_hand():
    cache = chain_graph()
    graph = cache.snapshot()
    r1 = cache.relations.position[1]
    assert rel_ids(cache, expand_from_relations(graph, [r1], 0)) == [1]
    assert rel_ids(cache, expand_from_relations(graph, [r1], 1)) == [1, 2]
    assert rel_ids(cache, expand_from_relations(graph, [r1], 2)) == [1, 2, 3]


@pytest.mark.parametrize("degree", [1, 2])
def test_expansion_matches_the_notebooks_matrix_powers(degree):
    rng = np.random.default_rng(7)
    cache = GraphCache()
    cache.add_relations((r, e(f"e{rng.integers(40)}"), e(f"e{rng.integers(40)}")) for r in range(120))
    graph = cache.snapshot()
    a = graph.entity_relation.toarray() > 0  # the notebook's dense E×R incidence, small enough here
    e_adj = (a.astype(int) @ a.T.astype(int)) > 0
    r_adj = (a.T.astype(int) @ a.astype(int)) > 0
    e_power = np.linalg.matrix_power(e_adj.astype(int), degree) > 0
    r_power = np.linalg.matrix_power(r_adj.astype(int), degree) > 0
    for seed in range(0, graph.shape[0], 7):
        expected = np.flatnonzero((e_power[seed].astype(int) @ a.astype(int)) > 0)
        assert expand_from_entities(graph, [seed], degree).tolist() == expected.tolist()
    for seed in range(0, graph.shape[1], 11):
        expected = np.flatnonzero(r_power[seed])
        assert expand_from_relations(graph, [seed], degree).tolist() == expected.tolist()


def test_removing_a_passage_reports_only_relations_and_entities_left_unsupported():
    cache = chain_graph()
    cache.add_passages([("p4", [3])])  # r3 is also stated by p4
    relations, entities = cache.remove_passages(["p2"])
    assert relations == [2]  # r3 survives through p4
    assert entities == []  # b still has r1, c still has r3
    relations, entities = cache.remove_passages(["p4", "p1"])
    assert sorted(relations) == [1, 3]
    assert sorted(entities) == sorted(e(x) for x in "abc")  # d keeps r4
    assert cache.counts() == {"entities": 2, "relations": 1, "passages": 1}
    graph = cache.snapshot()
    assert rel_ids(cache, expand_from_entities(graph, [ent(cache, "d")], 2)) == [4]


def test_snapshot_is_sparse():
    cache = chain_graph()
    graph = cache.snapshot()
    for matrix in (graph.entity_relation, graph.relation_entity, graph.relation_passage, graph.passage_relation):
        assert sp.issparse(matrix)
