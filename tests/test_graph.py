"""Expansion over the sparse adjacency, against graphs computed by hand and the notebook's matrix formula."""

import numpy as np
import pytest
import scipy.sparse as sp

from llama_index_graphrag_milvus.schema import entity_id as e
from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.graph import walk
from llama_index_graphrag_milvus.graph.walk import GraphAdjacency


def expand_from_entities(graph, entities, degree, through=None, cut=None):
    """The walk from entities on a snapshot, continuing only through `through` (all when None)."""
    return walk.expand_from_entities(GraphAdjacency(graph, through=through), entities, degree, cut)


def expand_from_relations(graph, relations, degree, through=None, cut=None):
    return walk.expand_from_relations(GraphAdjacency(graph, through=through), relations, degree, cut)


def chain_graph():
    """A path a —r1— b —r2— c —r3— d —r4— e, with passages p1: r1, p2: r2 r3, p3: r4."""
    cache = GraphCache()
    cache.add_relations([(1, e("a"), e("b")), (2, e("b"), e("c")), (3, e("c"), e("d")), (4, e("d"), e("e"))])
    cache.add_passages([("p1", [1]), ("p2", [2, 3]), ("p3", [4])])
    return cache


def rel_ids(cache, positions):
    return sorted(cache.relations.ids_at([p])[0] for p in positions)


def ent(cache, name):
    return cache.entities.position(e(name))


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
    r1 = cache.relations.position(1)
    assert rel_ids(cache, expand_from_relations(graph, [r1], 1, through)) == [1]
    assert rel_ids(cache, expand_from_relations(graph, [r1], 1)) == [1, 2]


def test_expansion_from_a_relation_by_hand():
    cache = chain_graph()
    graph = cache.snapshot()
    r1 = cache.relations.position(1)
    assert rel_ids(cache, expand_from_relations(graph, [r1], 0)) == [1]
    assert rel_ids(cache, expand_from_relations(graph, [r1], 1)) == [1, 2]
    assert rel_ids(cache, expand_from_relations(graph, [r1], 2)) == [1, 2, 3]


@pytest.mark.parametrize("degree", [1, 2])
def test_expansion_matches_the_notebooks_matrix_powers(degree):
    rng = np.random.default_rng(7)
    cache = GraphCache()
    cache.add_relations((r, e(f"e{rng.integers(40)}"), e(f"e{rng.integers(40)}")) for r in range(120))
    cache.add_passages((f"p{r}", [r]) for r in range(120))  # every relation stated: all live
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


def test_what_no_stored_passage_states_leaves_the_walk():
    cache = chain_graph()
    cache.remove(passages=["p1", "p2"])  # r1, r2 and r3 are stated no more; a, b and c name none that is
    assert cache.counts() == {"entities": 2, "relations": 1, "passages": 1}
    graph = cache.snapshot()
    assert graph.live_relations.tolist() == [False, False, False, True]
    assert rel_ids(cache, expand_from_entities(graph, [ent(cache, "d")], 2)) == [4]
    assert rel_ids(cache, expand_from_entities(graph, [ent(cache, "b")], 2)) == []
    cache.add_passages([("p2", [2])])  # stated again: live again
    assert rel_ids(cache, expand_from_entities(cache.snapshot(), [ent(cache, "b")], 0)) == [2]


def test_snapshot_is_sparse():
    cache = chain_graph()
    graph = cache.snapshot()
    for matrix in (graph.entity_relation, graph.relation_entity, graph.relation_passage, graph.passage_relation):
        assert sp.issparse(matrix)


def _old_expand_from_entities(graph, entities, degree, through=None):
    """The walk as it was before `cut`: every hop recomputes from the whole walked set."""
    seeds = np.unique(np.asarray(entities, dtype=np.int64))
    walk = seeds if through is None else seeds[through[seeds]]
    for _ in range(degree):
        reached = graph.entities_of_relations(graph.relations_of_entities(walk))
        walk = np.union1d(walk, reached if through is None else reached[through[reached]])
    return graph.relations_of_entities(np.union1d(seeds, walk))


def _old_expand_from_relations(graph, relations, degree, through=None):
    frontier = np.unique(np.asarray(relations, dtype=np.int64))
    for _ in range(degree):
        ends = graph.entities_of_relations(frontier)
        frontier = np.union1d(frontier, graph.relations_of_entities(ends if through is None else ends[through[ends]]))
    return frontier


def random_cache(seed=3, relations=300, entities=120):
    rng = np.random.default_rng(seed)
    cache = GraphCache()
    cache.add_relations((r, e(f"e{rng.integers(entities)}"), e(f"e{rng.integers(entities)}")) for r in range(relations))
    cache.add_passages((f"p{r}", [r]) for r in range(relations))  # every relation stated: all live
    return cache


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_without_a_cut_the_walks_give_what_they_gave_before(degree):
    graph = random_cache().snapshot()
    rng = np.random.default_rng(degree)
    for trial in range(12):
        through = rng.random(graph.shape[0]) > 0.2 if trial % 2 else None
        seeds_e = rng.choice(graph.shape[0], 3, replace=False)
        seeds_r = rng.choice(graph.shape[1], 3, replace=False)
        assert (
            expand_from_entities(graph, seeds_e, degree, through).tolist()
            == _old_expand_from_entities(graph, seeds_e, degree, through).tolist()
        )
        assert (
            expand_from_relations(graph, seeds_r, degree, through).tolist()
            == _old_expand_from_relations(graph, seeds_r, degree, through).tolist()
        )


@pytest.mark.parametrize("keep", [0, 1, 5])
def test_at_degree_one_the_cut_changes_nothing(keep):
    graph = random_cache().snapshot()
    rng = np.random.default_rng(keep)
    calls = []

    def cut(relations):
        calls.append(relations)
        return relations[:keep]

    for _ in range(10):
        seeds_e = rng.choice(graph.shape[0], 3, replace=False)
        seeds_r = rng.choice(graph.shape[1], 3, replace=False)
        for degree in (0, 1):
            assert expand_from_entities(graph, seeds_e, degree, cut=cut).tolist() == (
                expand_from_entities(graph, seeds_e, degree).tolist()
            )
            assert expand_from_relations(graph, seeds_r, degree, cut=cut).tolist() == (
                expand_from_relations(graph, seeds_r, degree).tolist()
            )
    assert calls == []  # hop 1 is never cut


def branch_graph():
    """The chain a —r1— b —r2— c —r3— d, with a branch at b: b —r5— x —r6— y."""
    cache = GraphCache()
    cache.add_relations(
        [(1, e("a"), e("b")), (2, e("b"), e("c")), (3, e("c"), e("d")), (5, e("b"), e("x")), (6, e("x"), e("y"))]
    )
    cache.add_passages([("p1", [1, 2, 3]), ("p2", [5, 6])])
    return cache


def test_a_cut_walk_does_not_continue_from_the_relations_it_drops():
    cache = branch_graph()
    graph = cache.snapshot()
    r = cache.relations.position
    seen = []

    def keep_r2(relations):
        seen.append(rel_ids(cache, relations))
        return relations[relations == r(2)]

    # from a: hop 1 reaches r1 (a's own) and b; hop 2 reaches r2, r5 (new), keeps r2, walks on to c
    assert rel_ids(cache, expand_from_entities(graph, [ent(cache, "a")], 2)) == [1, 2, 3, 5, 6]
    assert rel_ids(cache, expand_from_entities(graph, [ent(cache, "a")], 2, cut=keep_r2)) == [1, 2, 3, 5]
    assert seen == [[2, 5]]  # r5 is in the result, but x's relation r6 is not: r5 was not walked from
    seen.clear()
    assert rel_ids(cache, expand_from_relations(graph, [r(1)], 2)) == [1, 2, 3, 5, 6]
    assert rel_ids(cache, expand_from_relations(graph, [r(1)], 2, cut=keep_r2)) == [1, 2, 3, 5]
    assert seen == [[2, 5]]
    # degree 3: r3 is new at hop 3, cut away; r5, dropped at hop 2, is not offered again nor walked
    seen.clear()
    assert rel_ids(cache, expand_from_relations(graph, [r(1)], 3, cut=keep_r2)) == [1, 2, 3, 5]
    assert seen == [[2, 5], [3]]


class RecordingCut:
    """Keeps `k` relations at random of those offered, and records what it was offered and kept."""

    def __init__(self, rng, k):
        self.rng, self.k, self.offered, self.kept = rng, k, [], []

    def __call__(self, relations):
        choice = self.rng.choice(relations, min(self.k, len(relations)), replace=False)
        self.offered.append(relations)
        self.kept.append(choice)
        return choice

    def walked_from(self, degree):
        assert 0 < len(self.offered) <= degree - 1  # once a hop, from hop 2 on
        assert all((np.diff(a) > 0).all() for a in self.offered)  # sorted, distinct
        everything = np.concatenate(self.offered)
        assert len(everything) == len(np.unique(everything))  # no relation is offered twice
        return np.concatenate(self.kept)


@pytest.mark.parametrize("degree", [2, 3])
def test_a_cut_walk_continues_only_from_the_relations_the_cut_keeps(degree):
    graph = random_cache(relations=600, entities=150).snapshot()
    rng = np.random.default_rng(degree)
    for trial in range(10):
        through = rng.random(graph.shape[0]) > 0.2 if trial % 2 else np.ones(graph.shape[0], dtype=bool)

        def ends(relations, through=through):
            found = graph.entities_of_relations(np.asarray(relations, dtype=np.int64))
            return found[through[found]]

        seeds = rng.choice(graph.shape[0], 2, replace=False)
        through[seeds] = True
        cut = RecordingCut(rng, 4)
        result = expand_from_entities(graph, seeds, degree, through, cut)
        # the entities walked: the seeds, their relations' entities (hop 1, not cut) and the entities of
        # the relations the cut kept; the result: every relation of those
        walked = np.union1d(np.union1d(seeds, ends(graph.relations_of_entities(seeds))), ends(cut.walked_from(degree)))
        assert result.tolist() == graph.relations_of_entities(walked).tolist()
        assert len(result) < len(expand_from_entities(graph, seeds, degree, through))

        seeds = rng.choice(graph.shape[1], 2, replace=False)
        cut = RecordingCut(rng, 4)
        result = expand_from_relations(graph, seeds, degree, through, cut)
        walked = np.union1d(ends(seeds), ends(cut.walked_from(degree)))
        assert result.tolist() == np.union1d(seeds, graph.relations_of_entities(walked)).tolist()
        assert len(result) < len(expand_from_relations(graph, seeds, degree, through))


def test_the_live_mask_is_a_read_only_view_and_counts_are_kept():
    cache = chain_graph()
    relations = cache.relations
    mask = relations.mask()
    assert mask.tolist() == [True] * 4
    with pytest.raises(ValueError):
        mask[0] = False
    cache.remove(passages=["p1"], relations=[1])  # r1 loses its only passage
    assert mask.tolist() == [False, True, True, True]  # a view: shows the removal
    assert relations.live_count() == 3 and len(relations) == 4
    assert relations.lookup(np.array([1, 2, 99])).tolist() == [-1, relations.position(2), -1]
    assert relations.ids_array().tolist() == [1, 2, 3, 4]
    cache.add_relations([(1, e("a"), e("b"))])  # back, at a new position
    assert relations.live_count() == 4 and relations.position(1) == 4
