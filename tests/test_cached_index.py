"""In memory mode a write plans its change to the adjacency index from the cache, which the index mirrors:
the rows the cache gives are the rows Milvus holds, after adds, rewrites and deletes, and a write reads
no index row back."""

import numpy as np

from llama_index_graphrag_milvus.bench.demo import load_sample
from llama_index_graphrag_milvus.ingest.adjacency import CachedIndex, planner
from llama_index_graphrag_milvus.milvus.adjacency import AdjacencyIndex
from llama_index_graphrag_milvus.milvus.collections import ADJACENCY
from llama_index_graphrag_milvus.schema import chunked


def assert_mirrors(store):
    index = AdjacencyIndex(store.collections)
    cached = CachedIndex(index, store.backend.cache)
    columns = store.backend.columns()
    entities = columns.entity_ids.tolist() + [123456789]  # and one not stored
    relations = columns.relation_ids.tolist() + [987654321]
    assert cached.entities(entities) == index.entities(entities)
    stored = index.relations(relations)
    assert {r: row for r, row in cached.relations(relations).items() if row.passages} == stored
    assert np.all([not row.passages and not row.buckets for r, row in cached.relations(relations).items() if r not in stored])


def test_the_cache_gives_the_index_rows_milvus_holds(make_store, spread_embed):
    store = make_store(spread_embed, synonym_threshold=0.5)
    nodes = load_sample().nodes
    for batch in chunked(nodes, 50):
        store.add(list(batch))
    assert_mirrors(store)
    assert isinstance(planner(AdjacencyIndex(store.collections), store.backend), CachedIndex)
    moved = nodes[0].model_copy()
    moved.metadata = {**moved.metadata, "triplets": moved.metadata["triplets"][:1]}  # restated with fewer
    store.add([moved])
    store.delete(nodes[1].ref_doc_id)
    store.delete(nodes[2].ref_doc_id)
    assert_mirrors(store)


def test_a_write_in_memory_mode_reads_no_index_row(make_store):
    store = make_store()
    nodes = load_sample().nodes
    store.add(nodes[:40])
    before = store.collections.ids_read[ADJACENCY]
    store.add(nodes[40:80])
    store.delete(nodes[3].ref_doc_id)
    assert store.collections.ids_read[ADJACENCY] == before
