"""The adjacency's memory: ids, edges, entity names and the sparse snapshot stay under 100 bytes a relation."""

import gc
import tracemalloc

import numpy as np

from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.schema import passage_id


def test_the_adjacency_of_200k_relations_takes_under_100_bytes_a_relation():
    rng = np.random.default_rng(0)
    relations, entities, passages = 200_000, 80_000, 200_000 // 6  # the shape of the scale benchmark's corpora
    relation_ids = rng.choice(2**62, size=relations, replace=False) - 2**61
    entity_ids = rng.choice(2**62, size=entities, replace=False) - 2**61
    ends = entity_ids[rng.integers(0, entities, size=(relations, 2))]
    owner = np.sort(np.concatenate([np.arange(passages), rng.integers(0, passages, relations + relations // 10 - passages)]))
    stated = np.concatenate([relation_ids, relation_ids[rng.integers(0, relations, len(owner) - relations)]])
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=passages))])
    names = [f"Entity Name {i}" for i in range(entities)]
    passage_ids = [passage_id("doc", str(p)) for p in range(passages)]

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        cache = GraphCache()
        cache.add_relations(np.column_stack([relation_ids, ends]))
        cache.add_passage_columns(passage_ids, offsets, stated[rng.permutation(len(stated))])
        cache.name_entities(entity_ids, names)
        cache.compact()
        graph = cache.snapshot()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()

    used = len(np.unique(ends))  # entities that are the end of some relation
    assert graph.shape == (used, relations, passages)
    assert cache.counts() == {"entities": used, "relations": relations, "passages": passages}
    assert cache.entity_name(cache.entities.position(int(entity_ids[5]))) == "Entity Name 5"
    assert held / relations < 100, f"{held / relations:.1f} bytes a relation"
