"""Expansion inside Milvus gives the same candidates as the in-memory adjacency."""

import numpy as np
import pytest
from llama_index.core.schema import TextNode

from llama_index_graphrag_milvus import GraphRAGTransform
from llama_index_graphrag_milvus.graph.sparse import expand_from_entities, expand_from_relations
from llama_index_graphrag_milvus.backends.milvus import MilvusExpander


def random_corpus(seed=5, passages=60, entities=40):
    rng = np.random.default_rng(seed)
    nodes = []
    for p in range(passages):
        triplets = [[f"e{rng.integers(entities)}", f"r{rng.integers(5)}", f"e{rng.integers(entities)}"] for _ in range(rng.integers(1, 5))]
        nodes.append(TextNode(id_=f"p{p}", text=f"passage {p}", metadata={"triplets": triplets}))
    return nodes


def smallest_ids(k):
    """A cut on relation ids that keeps the `k` smallest (a function of the set, as a similarity top-k is)."""
    return lambda ids: np.sort(np.asarray(ids, dtype=np.int64))[:k]


def on_positions(cut, cache):
    """The same cut on relation positions: to ids, cut, back to positions."""
    def by_position(positions):
        ids = np.array(cache.relations.ids_at(positions), dtype=np.int64)
        return cache.relations.lookup(np.asarray(cut(ids), dtype=np.int64))
    return by_position


@pytest.mark.parametrize("keep", [None, 2])
@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_milvus_expansion_matches_the_in_memory_one(make_store, degree, keep):
    store = make_store()
    GraphRAGTransform(store=store)(random_corpus())
    cache = store.backend.cache
    graph = cache.snapshot()
    expander = MilvusExpander(store.collections)
    rng = np.random.default_rng(degree)
    entity_ids = [e for e in cache.entities.ids if cache.has_entity(e)]
    relation_ids = [r for r in cache.relations.ids if cache.has_relation(r)]
    cut = None if keep is None else smallest_ids(keep)
    local_cut = None if cut is None else on_positions(cut, cache)
    for _ in range(5):
        seeds_e = list(rng.choice(entity_ids, 3, replace=False))
        seeds_r = list(rng.choice(relation_ids, 3, replace=False))
        local_e = expand_from_entities(graph, [cache.entities.position[e] for e in seeds_e], degree, cut=local_cut)
        local_r = expand_from_relations(graph, [cache.relations.position[r] for r in seeds_r], degree, cut=local_cut)
        assert expander.from_entities(seeds_e, degree, cut) == {cache.relations.ids[p] for p in local_e.tolist()}
        assert expander.from_relations(seeds_r, degree, cut) == {cache.relations.ids[p] for p in local_r.tolist()}
        if cut is not None and degree >= 2:  # the cut did cut
            assert len(local_e) < len(expand_from_entities(graph, [cache.entities.position[e] for e in seeds_e], degree))
    assert expander.queries > 0
