"""The walk read from the statements in Milvus reaches what the walk over the in-memory adjacency reaches;
a write or delete that Milvus refuses midway leaves true rows, and run again, the rows of one that was
not refused; a crowded name passes no synonym link in either backend."""

import numpy as np
import pytest
from llama_index.core.schema import TextNode

from llama_index_graphrag_milvus import GraphRAGTransform, GraphStoreError
from llama_index_graphrag_milvus.backends.milvus import MilvusAdjacency
from llama_index_graphrag_milvus.graph import walk
from llama_index_graphrag_milvus.graph.walk import GraphAdjacency
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, LINKS, PASSAGES, RELATIONS, STATEMENTS
from llama_index_graphrag_milvus.schema import MAX_SYNONYMS, entity_id

from facts import answers, rows


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
def test_the_walk_by_filtered_reads_matches_the_in_memory_one(make_store, degree, keep):
    store = make_store()
    nodes = random_corpus()
    GraphRAGTransform(store=store)(nodes)
    store.delete("p3")  # what only it stated is not live: neither walk may reach it
    cache = store.backend.ready()
    graph = cache.snapshot()
    hubs = 6.0  # some entities are hubs at this limit: the walks must agree on which
    in_memory = GraphAdjacency(graph, hubs)
    assert not in_memory.through.all()
    rng = np.random.default_rng(degree)
    entity_ids = cache.entities.ids_at(np.flatnonzero(graph.live_entities))
    relation_ids = cache.relations.ids_at(np.flatnonzero(graph.live_relations))
    cut = None if keep is None else smallest_ids(keep)
    local_cut = None if cut is None else on_positions(cut, cache)
    shortened, calls = 0, sum(store.collections.calls.values())
    for _ in range(5):
        by_reads = MilvusAdjacency(store.collections, hubs)
        seeds_e = list(rng.choice(entity_ids, 3, replace=False))
        seeds_r = list(rng.choice(relation_ids, 3, replace=False))
        local_e = walk.expand_from_entities(in_memory, cache.entities.lookup(seeds_e), degree, local_cut)
        local_r = walk.expand_from_relations(in_memory, cache.relations.lookup(seeds_r), degree, local_cut)
        remote_e = walk.expand_from_entities(by_reads, seeds_e, degree, cut)
        remote_r = walk.expand_from_relations(by_reads, seeds_r, degree, cut)
        assert set(remote_e.tolist()) == set(cache.relations.ids_at(local_e))
        assert set(remote_r.tolist()) == set(cache.relations.ids_at(local_r))
        if cut is not None:
            uncut = walk.expand_from_entities(in_memory, cache.entities.lookup(seeds_e), degree)
            shortened += len(local_e) < len(uncut)
    assert sum(store.collections.calls.values()) > calls
    assert shortened > 0 if cut is not None and degree >= 2 else shortened == 0  # the cut did cut


def refuse_once(store, monkeypatch, method, kind, nth=1):
    """Milvus refuses the `nth` `method` ("upsert" or "delete") call on `kind`, then works again."""
    original = getattr(store.collections, method)
    refused = []

    def refusing(k, rows, *args, **kwargs):
        if k == kind and len(refused) < nth:
            refused.append(k)
            if len(refused) == nth:
                raise RuntimeError("disk full")
        return original(k, rows, *args, **kwargs)

    monkeypatch.setattr(store.collections, method, refusing)
    return refused


def no_dangling_passage(store):
    found = rows(store, [RELATIONS, PASSAGES, STATEMENTS])
    stated = {int(r) for row in found[PASSAGES].values() for r in row["relation_ids"]}
    assert stated <= set(found[RELATIONS]), "a stored passage names a relation that is not stored"
    made = {(s["passage_id"], s["relation_id"]) for s in found[STATEMENTS].values()}
    assert {(p, int(r)) for p, row in found[PASSAGES].items() for r in row["relation_ids"]} <= made


#: A write that adds new names, restates a stored relation and rewrites a stored passage.
TOUCHING = [
    TextNode(id_="q1", text="q 1", metadata={"triplets": [["e1", "r0", "e2"], ["e1", "r9", "brand new"]]}),
    TextNode(id_="p5", text="passage 5", metadata={"triplets": [["e3", "r9", "e4"], ["Ann Bo", "r1", "Ann Bo Cy"]]}),
]


@pytest.mark.parametrize("kind", [LINKS, ENTITIES, RELATIONS, STATEMENTS, PASSAGES])
@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_a_write_refused_midway_leaves_true_rows_and_run_again_completes(make_store, spread_embed, tmp_path, monkeypatch,
                                                                         kind, adjacency):
    settings = dict(embed_model=spread_embed, synonym_threshold=0.3, adjacency=adjacency)  # no tied cosines
    reference = make_store(uri=str(tmp_path / "reference.db"), **settings)
    store = make_store(uri=str(tmp_path / "refused.db"), **settings)
    for s in (reference, store):
        GraphRAGTransform(store=s)(random_corpus())
    reference.add(TOUCHING)
    refuse_once(store, monkeypatch, "upsert", kind)
    with pytest.raises(GraphStoreError, match="disk full.*midway.*run the call again"):
        store.add(TOUCHING)
    no_dangling_passage(store)
    answers(store, ["e1 r9 brand new"])  # a retrieval reads the rows written (the caches were renewed)
    monkeypatch.undo()
    store.add(TOUCHING)
    assert rows(store) == rows(reference)
    assert answers(store, ["e1 r9 brand new", "Ann Bo"]) == answers(reference, ["e1 r9 brand new", "Ann Bo"])


@pytest.mark.parametrize("kind", [STATEMENTS, PASSAGES])
def test_a_delete_refused_midway_run_again_leaves_the_rows_of_one_that_was_not(make_store, tmp_path, monkeypatch, kind):
    reference, store = make_store(uri=str(tmp_path / "reference.db")), make_store(uri=str(tmp_path / "refused.db"))
    for s in (reference, store):
        GraphRAGTransform(store=s)(random_corpus())
    reference.delete("p7")
    refuse_once(store, monkeypatch, "delete", kind)
    with pytest.raises(GraphStoreError, match="disk full.*midway"):
        store.delete("p7")
    monkeypatch.undo()
    store.delete("p7")
    assert rows(store) == rows(reference)


def test_a_metadata_rewrite_refused_says_so_and_runs_again(make_store, monkeypatch):
    store = make_store()
    stated = {"triplets": [["e1", "r1", "e2"]]}
    [pid] = store.add([TextNode(id_="m", text="m 1", metadata={**stated, "v": 1})])
    count = store.count()
    refuse_once(store, monkeypatch, "upsert", "passages")
    renewed = TextNode(id_="m", text="m 1", metadata={**stated, "v": 2})
    with pytest.raises(GraphStoreError, match="disk full.*midway: 0 of its 1 passages were written"):
        store.add([renewed])
    assert store.get_passages([pid])[pid].metadata["v"] == 1 and store.count() == count
    store.add([renewed])
    assert store.get_passages([pid])[pid].metadata["v"] == 2 and store.count() == count


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_a_crowded_name_passes_no_synonym_link_in_either_backend(make_store, adjacency):
    """An entity with more than MAX_SYNONYMS synonyms is a crowded region of the embedding space: the
    walk's synonym step follows none of its links, in memory and by filtered reads alike, and follows
    them again once deletes leave it with MAX_SYNONYMS or fewer."""
    from llama_index_graphrag_milvus.embeddings import HashEmbedding

    # "Ann X" ~ "Ann Y": cosine 0.5 (dim 1024: no two words share a slot)
    store = make_store(embed_model=HashEmbedding(1024), synonym_threshold=0.3, adjacency=adjacency)
    crowd = [f"Ann {w}" for w in ("Bo", "Cy", "Di", "Ed", "Fay", "Gus", "Hal", "Ivo", "Jo", "Kit")]
    nodes = [TextNode(id_=f"c{i}", text=name, metadata={"triplets": [[name, "lives in", f"Town{i}"]]}) for i, name in enumerate(crowd)]
    nodes.append(TextNode(id_="pair", text="Lee Orr", metadata={"triplets": [["Lee Orr", "wrote", "Dawn"], ["Orr Lee", "born in", "Orsk"]]}))
    GraphRAGTransform(store=store)(nodes)

    def followed(names):
        ids = np.array(sorted(entity_id(n) for n in names), dtype=np.int64)
        remote = set(MilvusAdjacency(store.collections, float("inf")).synonyms_of(ids).tolist())
        if adjacency == "memory":
            cache = store.backend.ready()
            local = GraphAdjacency(cache.snapshot()).synonyms_of(cache.entities.lookup(ids))
            assert set(cache.entities.ids_at(local)) == remote
        return store.synonyms_of([entity_id(n) for n in names]), remote

    links, remote = followed([crowd[0], "Lee Orr"])
    assert len(links[entity_id(crowd[0])]) > MAX_SYNONYMS and links[entity_id("Lee Orr")] == {entity_id("Orr Lee")}
    assert remote == {entity_id("Orr Lee")}  # the crowded name's links are not followed
    for i in range(2, len(crowd)):  # leaves "Ann Bo" linked to "Ann Cy" alone
        store.delete(f"c{i}")
    links, remote = followed([crowd[0], "Lee Orr"])
    assert links[entity_id(crowd[0])] == {entity_id(crowd[1])}
    assert remote == {entity_id("Orr Lee"), entity_id(crowd[1])}
