"""The walk read from the adjacency index in Milvus reaches what the walk over the in-memory adjacency
reaches, and a write keeps the index equal to what the stored rows say."""

import numpy as np
import pytest
from llama_index.core.schema import TextNode

from llama_index_graphrag_milvus import GraphRAGTransform, GraphStoreError
from llama_index_graphrag_milvus.backends.milvus import MilvusAdjacency
from llama_index_graphrag_milvus.graph import walk
from llama_index_graphrag_milvus.graph.walk import GraphAdjacency
from llama_index_graphrag_milvus.milvus.adjacency import AdjacencyIndex, from_columns
from llama_index_graphrag_milvus.milvus.snapshot import read_columns


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
def test_the_walk_by_lookups_matches_the_in_memory_one(make_store, degree, keep):
    store = make_store()
    GraphRAGTransform(store=store)(random_corpus())
    cache = store.backend.cache
    graph = cache.snapshot()
    hubs = 6.0  # some entities are hubs at this limit: the walks must agree on which
    index = AdjacencyIndex(store.collections)
    in_memory = GraphAdjacency(graph, hubs)
    assert not in_memory.through.all()
    rng = np.random.default_rng(degree)
    entity_ids = [e for e in cache.entities.ids if cache.has_entity(e)]
    relation_ids = [r for r in cache.relations.ids if cache.has_relation(r)]
    cut = None if keep is None else smallest_ids(keep)
    local_cut = None if cut is None else on_positions(cut, cache)
    shortened = 0
    for _ in range(5):
        by_lookups = MilvusAdjacency(index, store.collections, hubs)
        seeds_e = list(rng.choice(entity_ids, 3, replace=False))
        seeds_r = list(rng.choice(relation_ids, 3, replace=False))
        local_e = walk.expand_from_entities(in_memory, [cache.entities.position[e] for e in seeds_e], degree, local_cut)
        local_r = walk.expand_from_relations(in_memory, [cache.relations.position[r] for r in seeds_r], degree, local_cut)
        remote_e = walk.expand_from_entities(by_lookups, seeds_e, degree, cut)
        remote_r = walk.expand_from_relations(by_lookups, seeds_r, degree, cut)
        assert set(remote_e.tolist()) == {cache.relations.ids[p] for p in local_e.tolist()}
        assert set(remote_r.tolist()) == {cache.relations.ids[p] for p in local_r.tolist()}
        if cut is not None:
            uncut = walk.expand_from_entities(in_memory, [cache.entities.position[e] for e in seeds_e], degree)
            shortened += len(local_e) < len(uncut)
    assert index.lookups > 0
    assert shortened > 0 if cut is not None and degree >= 2 else shortened == 0  # the cut did cut


def _index_as_derived(store):
    """The adjacency index as the stored rows say it should be, and as it is."""
    columns = read_columns(store.collections, with_vectors=False)
    pairs = [(int(columns.entity_ids[a]), int(columns.entity_ids[b])) for a, b in columns.synonyms.tolist()]
    entities, relations = from_columns(columns.relation_ids, columns.relation_ends, columns.passage_ids,
                                       columns.passage_offsets, columns.passage_relations, pairs)
    index = AdjacencyIndex(store.collections)
    stored_entities = index.entities(list(entities) + [int(i) for i in columns.entity_ids])
    stored_relations = index.relations(list(relations))
    return (_entity_sets(entities), _relation_sets(relations)), (_entity_sets(stored_entities), _relation_sets(stored_relations))


def _entity_sets(rows):
    return {k: (sorted(v.relations), sorted(v.passages), sorted(v.synonyms)) for k, v in rows.items()}


def _relation_sets(rows):
    return {k: (v.subject, v.object, sorted(v.passages)) for k, v in rows.items()}


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_writes_and_deletes_keep_the_index_equal_to_the_rows(make_store, adjacency):
    store = make_store(adjacency=adjacency)
    nodes = random_corpus()
    GraphRAGTransform(store=store)(nodes)
    derived, stored = _index_as_derived(store)
    assert derived == stored
    # rewrite a passage with other triplets (keeping one), delete two documents, re-ingest one
    kept = nodes[3].metadata["triplets"][0]
    store.add([TextNode(id_="p3", text="passage 3", metadata={"triplets": [kept, ["x", "y", "e1"]]})])
    store.delete("p7")
    store.delete("p8")
    store.add([nodes[7]])
    derived, stored = _index_as_derived(store)
    assert derived == stored
    counts = store.count()
    assert counts["passages"] == 59 and counts["relations"] == len(derived[1])


def refuse_once(store, monkeypatch, method, kind, nth=1):
    """Milvus refuses the `nth` `method` ("upsert" or "delete") call on `kind`, then works again."""
    original = getattr(store.collections, method)
    refused = []

    def refusing(k, rows):
        if k == kind and len(refused) < nth:
            refused.append(k)
            if len(refused) == nth:
                raise RuntimeError("disk full")
        return original(k, rows)

    monkeypatch.setattr(store.collections, method, refusing)
    return refused


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_a_metadata_rewrite_refused_says_so_and_runs_again(make_store, monkeypatch, adjacency):
    store = make_store(adjacency=adjacency)
    stated = {"triplets": [["e1", "r1", "e2"]]}
    [pid] = store.add([TextNode(id_="m", text="m 1", metadata={**stated, "v": 1})])
    count = store.count()
    refuse_once(store, monkeypatch, "upsert", "passages")
    renewed = TextNode(id_="m", text="m 1", metadata={**stated, "v": 2})
    with pytest.raises(GraphStoreError, match="disk full.*midway: the graph is as it was; passages written again for new metadata alone \\(1\\) may hold"):
        store.add([renewed])
    assert store.get_passages([pid])[pid].metadata["v"] == 1 and store.count() == count
    store.add([renewed])
    assert store.get_passages([pid])[pid].metadata["v"] == 2 and store.count() == count


def _entity_names(store):
    return {row["name"] for row in store.collections.query("entities", "", ["name"])}


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_a_rewrite_refused_at_its_passage_leaves_the_index_true_and_runs_again_whole(make_store, adjacency, monkeypatch):
    """The passages Milvus holds stand; the index and the rows agree with them, and the same call run
    again completes: a relation written before the refusal is linked to its entities again."""
    store = make_store(adjacency=adjacency)
    nodes = random_corpus()
    GraphRAGTransform(store=store)(nodes)
    before, count = _index_as_derived(store)[1], store.count()
    touching = [  # a stored relation stated again, stored entities with a new relation, a rewrite
        TextNode(id_="q1", text="q 1", metadata={"triplets": [nodes[0].metadata["triplets"][0], ["e1", "r9", "e2"]]}),
        TextNode(id_="p5", text="passage 5", metadata={"triplets": [["e3", "r9", "e4"]]}),
    ]
    refuse_once(store, monkeypatch, "upsert", "passages")
    with pytest.raises(GraphStoreError, match="disk full.*midway: 0 of its 2 passages"):
        store.add(touching)
    derived, stored = _index_as_derived(store)
    assert stored == before == derived and store.count() == count
    store.add(touching)
    derived, stored = _index_as_derived(store)
    assert stored == derived and store.count()["passages"] == count["passages"] + 1
    assert {"e1", "e2", "e3", "e4"} <= _entity_names(store)


@pytest.mark.parametrize("one_call", [True, False])
def test_a_rewrite_refused_at_its_passage_keeps_the_synonym_links_of_what_the_old_version_states(make_store, monkeypatch, one_call):
    """The write had orphaned the old version's entities (and unlinked their synonyms in the index); the
    old version stands, so they are linked again as the index had them, both ways (entities added in
    two calls keep the link on the later one's row only)."""
    from llama_index_graphrag_milvus.embeddings import HashEmbedding

    store = make_store(embed_model=HashEmbedding(1024), synonym_threshold=0.3)  # "Ann Bo" ~ "Ann Cy": 0.5
    p = TextNode(id_="p", text="p", metadata={"triplets": [["Ann Bo", "met", "Zed"]]})
    q = TextNode(id_="q", text="q", metadata={"triplets": [["Ann Cy", "met", "Yul"]]})
    for nodes in ([p, q],) if one_call else ([p], [q]):
        store.add(nodes)
    before = _index_as_derived(store)[1]
    assert any(synonyms for _, _, synonyms in before[0].values())
    refuse_once(store, monkeypatch, "upsert", "passages")
    with pytest.raises(GraphStoreError, match="disk full"):
        store.add([TextNode(id_="p", text="p", metadata={"triplets": [["Kim", "met", "Lou"]]})])
    derived, stored = _index_as_derived(store)
    assert stored == before == derived
    assert _entity_names(store) == {"Ann Bo", "Zed", "Ann Cy", "Yul"}


def test_an_entity_a_refused_rewrite_revives_drops_its_links_to_what_stays_deleted(make_store, monkeypatch):
    from llama_index_graphrag_milvus.embeddings import HashEmbedding

    store = make_store(embed_model=HashEmbedding(1024), synonym_threshold=0.3, batch_size=1)
    store.add([TextNode(id_="p", text="p", metadata={"triplets": [["Ann Cy", "met", "Yul"]]}),
               TextNode(id_="q", text="q", metadata={"triplets": [["Zed", "met", "Ann Bo"]]})])  # Ann Bo ~ Ann Cy
    refuse_once(store, monkeypatch, "upsert", "passages", nth=2)  # q's new version is written, p's is not
    with pytest.raises(GraphStoreError, match="1 of its 2 passages"):
        store.add([TextNode(id_="q", text="q", metadata={"triplets": [["Kim", "met", "Lou"]]}),
                   TextNode(id_="p", text="p", metadata={"triplets": [["Kim", "met", "Uma"]]})])
    rows = store.collections.query("entities", "", ["id", "name", "synonym_ids"])
    assert {r["name"] for r in rows} == {"Ann Cy", "Yul", "Kim", "Lou"}  # Ann Bo and Zed went with q's old version
    assert all(not r["synonym_ids"] for r in rows)  # Ann Cy no longer names Ann Bo
    derived, stored = _index_as_derived(store)
    assert stored == derived


def test_an_entity_a_refused_rewrite_revives_keeps_the_link_the_write_gave_it_to_a_new_entity(make_store, monkeypatch):
    from llama_index_graphrag_milvus.embeddings import HashEmbedding

    store = make_store(embed_model=HashEmbedding(1024), synonym_threshold=0.3, batch_size=1)
    store.add([TextNode(id_="p", text="p", metadata={"triplets": [["Ann Di", "met", "Zed"]]})])
    refuse_once(store, monkeypatch, "upsert", "passages", nth=2)  # q is written, p's new version is not
    with pytest.raises(GraphStoreError, match="1 of its 2 passages"):
        store.add([TextNode(id_="q", text="q", metadata={"triplets": [["Ann Bo", "met", "Kim"]]}),  # Ann Bo ~ Ann Di
                   TextNode(id_="p", text="p", metadata={"triplets": [["Lou", "met", "Uma"]]})])
    derived, stored = _index_as_derived(store)
    assert stored == derived and any(synonyms for _, _, synonyms in stored[0].values())


def test_a_write_refused_before_its_passages_is_undone(make_store, monkeypatch):
    store = make_store()
    GraphRAGTransform(store=store)(random_corpus())
    before, count = _index_as_derived(store)[1], store.count()
    refuse_once(store, monkeypatch, "upsert", "adjacency")
    with pytest.raises(GraphStoreError, match="disk full.*before any passage.*deleted again"):
        store.add([TextNode(id_="q1", text="q 1", metadata={"triplets": [["e1", "r9", "new one"]]})])
    assert _index_as_derived(store)[1] == before and store.count() == count
    assert "new one" not in _entity_names(store)


def test_a_delete_refused_after_its_passages_leaves_no_orphan(make_store, monkeypatch):
    """The passages were deleted when Milvus refused the orphans' delete: the orphans go anyway, and the
    index agrees (running the delete again would find nothing to delete)."""
    store = make_store()
    GraphRAGTransform(store=store)([TextNode(id_=f"d{i}", text=f"d {i}", metadata={"triplets": [[f"x{i}", "r", f"y{i}"]]}) for i in range(3)])
    refuse_once(store, monkeypatch, "delete", "entities")
    with pytest.raises(GraphStoreError, match="disk full.*midway: 1 of its 1 passages"):
        store.delete("d1")
    derived, stored = _index_as_derived(store)
    assert stored == derived
    assert _entity_names(store) == {"x0", "y0", "x2", "y2"}
    assert store.count() == {"entities": 4, "relations": 2, "passages": 2} == store.backend.counts()


def test_clearing_a_store_keeps_its_index_marked_whole(make_store, tmp_path, caplog):
    uri = str(tmp_path / "c.db")
    store = make_store(uri=uri)
    store.add([TextNode(id_="a", text="a", metadata={"triplets": [["Ann", "met", "Bo"]]})])
    store.clear()
    store.add([TextNode(id_="b", text="b", metadata={"triplets": [["Cy", "met", "Di"]]})])
    store.close()
    with caplog.at_level("WARNING"):
        again = make_store(uri=uri)
    assert "Building the adjacency index" not in caplog.text
    assert again.count()["relations"] == 1


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_a_crowded_name_passes_no_synonym_link_in_either_backend(make_store, adjacency):
    """An entity linked to more than MAX_SYNONYMS others is a crowded region of the embedding space: the
    walk's synonym step follows none of its links, in memory and by lookups alike, and follows them
    again once deletes leave it with MAX_SYNONYMS or fewer."""
    from llama_index_graphrag_milvus.embeddings import HashEmbedding
    from llama_index_graphrag_milvus.schema import MAX_SYNONYMS, entity_id

    # "Ann X" ~ "Ann Y": cosine 0.5 (dim 1024: no two words share a slot)
    store = make_store(embed_model=HashEmbedding(1024), synonym_threshold=0.3, adjacency=adjacency)
    crowd = [f"Ann {w}" for w in ("Bo", "Cy", "Di", "Ed", "Fay", "Gus", "Hal", "Ivo", "Jo", "Kit")]
    nodes = [TextNode(id_=f"c{i}", text=name, metadata={"triplets": [[name, "lives in", f"Town{i}"]]}) for i, name in enumerate(crowd)]
    nodes.append(TextNode(id_="pair", text="Lee Orr", metadata={"triplets": [["Lee Orr", "wrote", "Dawn"], ["Orr Lee", "born in", "Orsk"]]}))
    GraphRAGTransform(store=store)(nodes)

    def synonyms(names):
        index = AdjacencyIndex(store.collections)
        links = {name: index.entities([entity_id(name)])[entity_id(name)].synonyms for name in names}
        by_lookups = MilvusAdjacency(index, store.collections, float("inf"))
        ids = np.array(sorted(entity_id(n) for n in names), dtype=np.int64)
        remote = set(by_lookups.synonyms_of(ids).tolist())
        if adjacency == "memory":
            cache = store.backend.cache
            local = GraphAdjacency(cache.snapshot()).synonyms_of(cache.entities.lookup(ids))
            assert {cache.entities.ids[p] for p in local.tolist()} == remote
        return links, remote

    links, followed = synonyms([crowd[0], "Lee Orr"])
    assert len(links[crowd[0]]) > MAX_SYNONYMS and links["Lee Orr"] == {entity_id("Orr Lee")}
    assert followed == {entity_id("Orr Lee")}  # the crowded name's links are not followed
    for i in range(2, len(crowd)):  # leaves "Ann Bo" linked to "Ann Cy" alone
        store.delete(f"c{i}")
    links, followed = synonyms([crowd[0], "Lee Orr"])
    assert links[crowd[0]] == {entity_id(crowd[1])}
    assert followed == {entity_id("Orr Lee"), entity_id(crowd[1])}
