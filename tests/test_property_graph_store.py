"""MilvusPropertyGraphStore's interface directly: a slice of LlamaIndex's own property graph store tests,
and the objects PGI's API lets a user write by hand (standalone entities, relations with no chunk,
chunk nodes)."""

from __future__ import annotations

import pytest
from llama_index.core.graph_stores.types import ChunkNode, EntityNode, Relation
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from llama_index_graphrag_milvus import GraphStoreError, MilvusPropertyGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    store = MilvusPropertyGraphStore(uri=str(tmp_path_factory.mktemp("pgstore") / "g.db"), embed_model=HashEmbedding(dim=64))
    yield store
    store.close()


@pytest.fixture
def g(shared):
    """An empty store (one store for the module, cleared before each test: creating collections costs
    seconds on Milvus Lite)."""
    shared.clear()
    assert shared.get() == [] and shared.graph_store.count() == {"entities": 0, "relations": 0, "passages": 0}
    return shared


def nearest(g: MilvusPropertyGraphStore, text: str, k: int = 1):
    nodes, scores = g.vector_query(VectorStoreQuery(query_embedding=HashEmbedding(dim=64).get_query_embedding(text),
                                                    similarity_top_k=k))
    return [n.name for n in nodes], scores


def upsert_triplets(g: MilvusPropertyGraphStore, triplets) -> None:
    """What `upsert_triplets` of newer LlamaIndex does: the nodes, then the relations."""
    g.upsert_nodes([n for s, _, o in triplets for n in (s, o)])
    g.upsert_relations([r for _, r, _ in triplets])


# The tests below are adapted from LlamaIndex's own
# llama-index-core/tests/graph_stores/test_simple_lpg.py (run-llama/llama_index, MIT licence), run on
# MilvusPropertyGraphStore instead of SimplePropertyGraphStore. Changes: counts are read through the
# interface (`get`, `get_triplets`) instead of the in-memory `graph`, and `get_triplets()` with no filter
# returns [] (as the installed SimplePropertyGraphStore does).
def test_add(g):
    e1, e2 = EntityNode(name="e1"), EntityNode(name="e2")
    r = Relation(label="r", source_id=e1.id, target_id=e2.id)
    upsert_triplets(g, [(e1, r, e2)])
    assert len(g.get_triplets(entity_names=["e1"])) == 1


def test_delete(g):
    e1, e2 = EntityNode(name="e1"), EntityNode(name="e2")
    r = Relation(label="r", source_id=e1.id, target_id=e2.id)
    upsert_triplets(g, [(e1, r, e2)])
    g.delete(ids=[e1.id])
    assert g.get_triplets(entity_names=["e1", "e2"]) == [] and g.get_triplets(relation_names=["r"]) == []


def test_get(g):
    e1, e2 = EntityNode(name="e1"), EntityNode(name="e2", properties={"key": "value"})
    r = Relation(label="r", source_id=e1.id, target_id=e2.id)
    upsert_triplets(g, [(e1, r, e2)])
    assert g.get_triplets() == []
    assert g.get_triplets(entity_names=["e1"]) == [(e1, r, e2)]
    assert g.get_triplets(entity_names=["e2"]) == [(e1, r, e2)]
    assert g.get_triplets(relation_names=["r"]) == [(e1, r, e2)]
    assert g.get_triplets(properties={"key": "value"}) == [(e1, r, e2)]


def test_add_node(g):
    g.upsert_llama_nodes([TextNode(id_="n1", text="n1"), TextNode(id_="n2", text="n2")])
    assert len(g.get()) == 2


def test_delete_node_by_node_ids(g):
    g.upsert_llama_nodes([TextNode(id_="n1", text="n1"), TextNode(id_="n2", text="n2")])
    g.delete_llama_nodes(node_ids=["n1"])
    assert [n.id for n in g.get()] == ["n2"]


def test_delete_node_by_ref_doc_ids(g):
    n1 = TextNode(id_="n1", text="n1", relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="n2")})
    g.upsert_llama_nodes([n1, TextNode(id_="n2", text="n2")])
    g.delete_llama_nodes(ref_doc_ids=["n2"])
    assert g.get() == []
    n1 = TextNode(id_="n1", text="n1", relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="n3")})
    g.upsert_llama_nodes([n1, TextNode(id_="n2", text="n2")])
    g.delete_llama_nodes(ref_doc_ids=["n3"])
    assert [n.id for n in g.get()] == ["n2"]


def test_get_nodes(g):
    n1, n2 = TextNode(id_="n1", text="n1"), TextNode(id_="n2", text="n2")
    g.upsert_llama_nodes([n1, n2])
    assert g.get_llama_nodes(["n1", "n2"]) == [n1, n2]
# (end of the adapted slice)


def test_standalone_entities_are_found_by_vector_and_by_id(g):
    g.upsert_nodes([EntityNode(name="Ada Lovelace", label="PERSON", properties={"born": 1815}),
                    EntityNode(name="Analytical Engine", label="MACHINE")])
    names, scores = nearest(g, "Ada Lovelace")
    assert names == ["Ada Lovelace"] and scores[0] == pytest.approx(1.0, abs=1e-5)
    [ada] = g.get(ids=["ada  LOVELACE"])  # ids match as names do: case and spaces aside
    assert ada.label == "PERSON" and ada.properties == {"born": 1815}
    assert [n.name for n in g.get(properties={"born": 1815})] == ["Ada Lovelace"]
    assert g.get_schema()["entity_labels"] == ["MACHINE", "PERSON", "entity"]


def test_upserts_merge_properties_and_keep_labels(g):
    g.upsert_nodes([EntityNode(name="Ada", label="PERSON", properties={"a": 1})])
    g.upsert_nodes([EntityNode(name="Ada", label="PERSON", properties={"b": "two"})])
    assert g.get(ids=["Ada"])[0].properties == {"a": 1, "b": "two"}
    r = Relation(label="wrote about", source_id="Ada", target_id="Engine", properties={"year": 1843})
    g.upsert_relations([r])
    [(s, rel, o)] = g.get_triplets(entity_names=["Engine"])
    assert (s.name, rel.label, rel.properties, o.name) == ("Ada", "wrote about", {"year": 1843}, "Engine")
    assert [n.name for n in g.get(ids=["Engine"])] == ["Engine"]  # the relation's end is a node, as in Simple


def test_a_relation_with_its_chunk_is_a_graph_relation_graphrag_retrieves(g):
    from llama_index_graphrag_milvus import GraphRAGRetriever

    chunk = ChunkNode(text="Ada Lovelace wrote the first program for the Analytical Engine.", id_="c1",
                      properties={"topic": "computing"})
    g.upsert_nodes([chunk, EntityNode(name="Ada Lovelace", properties={"triplet_source_id": "c1"})])
    g.upsert_relations([Relation(label="wrote program for", source_id="Ada Lovelace", target_id="Analytical Engine",
                                 properties={"triplet_source_id": "c1"})])
    assert g.graph_store.count() == {"entities": 2, "relations": 1, "passages": 1}
    [(s, r, o)] = g.get_rel_map(g.get(ids=["Analytical Engine"]), depth=1)
    assert s.properties["triplet_source_id"] == "c1" and r.label == "wrote program for"
    hits = GraphRAGRetriever(store=g.graph_store, similarity_top_k=1, llm=None).retrieve("Who programmed the Analytical Engine?")
    assert hits[0].node.node_id == "c1" and hits[0].node.metadata["topic"] == "computing"
    assert g.get(ids=["c1"])[0].text == chunk.text


def test_an_entity_that_loses_its_last_relation_stays_and_becomes_searchable(g):
    g.upsert_llama_nodes([TextNode(id_="c1", text="Ada met Babbage.")])
    g.upsert_nodes([EntityNode(name="Ada", properties={"triplet_source_id": "c1"}),
                    EntityNode(name="Babbage", properties={"triplet_source_id": "c1"})])
    g.upsert_relations([Relation(label="met", source_id="Ada", target_id="Babbage", properties={"triplet_source_id": "c1"})])
    g.delete(relation_names=["met"])
    assert g.graph_store.backend.counts() == {"entities": 0, "relations": 0, "passages": 1}
    assert sorted(n.name for n in g.get(ids=["Ada", "Babbage"])) == ["Ada", "Babbage"]  # as Simple keeps them
    assert nearest(g, "Babbage")[0] == ["Babbage"]
    g.delete(ids=["c1"])  # their chunk goes: so do they
    assert g.get(ids=["Ada", "Babbage"]) == [] and nearest(g, "Babbage")[0] == []


def test_malformed_input_is_refused_or_skipped(g, caplog):
    g.upsert_nodes([EntityNode(name="x" * 600)])
    g.upsert_relations([Relation(label="", source_id="a", target_id="b")])
    assert g.get() == [] and "malformed" in caplog.text
    with pytest.raises(GraphStoreError, match="shorter id_"):
        g.upsert_llama_nodes([TextNode(id_="c" * 3000, text="long id")])
    with pytest.raises(ValueError, match="query_embedding"):
        g.vector_query(VectorStoreQuery(query_embedding=None))
    with pytest.raises(GraphStoreError, match="64-dimensional"):
        g.vector_query(VectorStoreQuery(query_embedding=[1.0, 0.0]))
