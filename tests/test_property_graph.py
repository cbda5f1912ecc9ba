"""MilvusPropertyGraphStore through PropertyGraphIndex itself: kg extractors in, PGI's sub-retrievers,
query engine, insert and delete out, our GraphRAGRetriever on the same rows, and a reopen in a new
process. Offline: HashEmbedding(dim=64) and scripted LLMs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from typing import List

import pytest
from llama_index.core import PropertyGraphIndex, Settings
from llama_index.core.graph_stores.types import KG_SOURCE_REL, EntityNode
from llama_index.core.indices.property_graph import (
    ImplicitPathExtractor,
    LLMSynonymRetriever,
    PGRetriever,
    SimpleLLMPathExtractor,
    VectorContextRetriever,
)
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import Document
from llama_index.core.vector_stores.types import VectorStoreQuery

from conftest import ScriptedLLM
from llama_index_graphrag_milvus import GraphRAGRetriever, MilvusPropertyGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.examples import ANSWER_DOC_ID, EULER_QUESTION, bernoulli_documents
from llama_index_graphrag_milvus.property_graph import GraphRAGSubRetriever

#: Each passage's triplets, as the scripted extraction LLM answers them for the passage in its prompt.
TRIPLETS = {doc.id_: doc.metadata["triplets"] for doc in bernoulli_documents()}


def documents() -> List[Document]:
    """The Bernoulli corpus as a user has it: text and a title, no triplets."""
    return [Document(id_=d.id_, text=d.text, metadata={"title": d.id_}) for d in bernoulli_documents()]


def extraction_llm() -> ScriptedLLM:
    """Answers SimpleLLMPathExtractor's prompt with the triplets of the passage it was given, and
    anything else with a canned answer."""
    texts = {d.id_: d.text for d in bernoulli_documents()}

    def script(prompt: str) -> str:
        for doc_id, text in texts.items():
            if text[:60] in prompt:
                return "\n".join(f"({s}, {p}, {o})" for s, p, o in TRIPLETS[doc_id])
        return "Daniel Bernoulli founded fluid dynamics."

    return ScriptedLLM(script=script, prompts=[])


def synonym_llm(keywords: str) -> ScriptedLLM:
    return ScriptedLLM(script=lambda prompt: keywords, prompts=[])


def build(store: MilvusPropertyGraphStore, docs: List[Document] | None = None) -> PropertyGraphIndex:
    return PropertyGraphIndex.from_documents(
        docs or documents(),
        property_graph_store=store,
        kg_extractors=[SimpleLLMPathExtractor(llm=extraction_llm(), num_workers=1), ImplicitPathExtractor()],
        embed_model=HashEmbedding(dim=64),
        transformations=[SentenceSplitter(chunk_size=512)],
        use_async=False,
    )


@pytest.fixture(autouse=True)
def no_settings_llm():
    assert Settings._llm is None, "a test left Settings.llm set"


@pytest.fixture(scope="module")
def lite_uri(tmp_path_factory):
    """One Milvus Lite database for the module's stores (each test its own collection prefix): one
    embedded server to start instead of one a test."""
    return str(tmp_path_factory.mktemp("pg") / "g.db")


@pytest.fixture(scope="module")
def built(lite_uri):
    """The Bernoulli corpus through PropertyGraphIndex on our store, shared read-only."""
    store = MilvusPropertyGraphStore(uri=lite_uri, embed_model=HashEmbedding(dim=64), collection_prefix="built")
    index = build(store)
    yield index
    store.close()


@pytest.fixture(scope="module")
def fresh_store(lite_uri):
    store = MilvusPropertyGraphStore(uri=lite_uri, embed_model=HashEmbedding(dim=64), collection_prefix="fresh")
    yield store
    store.close()


@pytest.fixture
def fresh(fresh_store):
    """An empty store (one for the module, cleared before each test: creating collections costs seconds
    on Milvus Lite)."""
    fresh_store.clear()
    assert fresh_store.get() == [] and fresh_store.graph_store.count()["relations"] == 0
    return fresh_store


def chunk_doc(index: PropertyGraphIndex, chunk_id: str) -> str:
    """The document id of a chunk."""
    return index.property_graph_store.get_llama_nodes([chunk_id])[0].ref_doc_id


def source_docs(index: PropertyGraphIndex, results) -> List[str]:
    """The document of each PGI result node (a source chunk with the triplets on top)."""
    return [n.node.ref_doc_id for n in results]


def triples(results) -> List[str]:
    """The `subject -> predicate -> object` lines of PGI result nodes, lower-cased."""
    return [line.lower() for n in results for line in n.node.get_content().splitlines() if " -> " in line]


# building -------------------------------------------------------------------------------------------
def test_from_documents_writes_our_rows_chunks_as_passages(built):
    store = built.property_graph_store
    counts = store.graph_store.count()
    assert counts["passages"] == 5
    assert counts["relations"] == sum(len(t) for t in TRIPLETS.values())  # all distinct
    # the extractor's names are capitalized ("Leonhard euler"): one entity with our "leonhard Euler"
    assert [n.name for n in store.get(ids=["LEONHARD EULER"])] == ["Leonhard euler"]
    chunk = store.get(properties={"ref_doc_id": ANSWER_DOC_ID})
    assert len(chunk) == 1 and chunk[0].label == "text_chunk" and chunk[0].text.startswith("Daniel Bernoulli (1700")


def test_implicit_path_relations_end_at_chunks_and_stay_out_of_our_relations(built):
    store = built.property_graph_store
    chunk_id = store.get(properties={"ref_doc_id": "euler"})[0].id
    source = store.get_triplets(ids=[chunk_id], relation_names=[KG_SOURCE_REL])
    assert len(source) == 1 and source[0][0].id == chunk_id and source[0][2].name == "euler"
    assert all("SOURCE" not in p for p in store.get_schema()["relation_labels"] if p != "SOURCE")
    assert store.graph_store.count()["relations"] == 22  # the SOURCE edges are side rows only


def test_the_same_documents_again_write_nothing_new(built, tmp_path):
    store = built.property_graph_store
    before = (store.graph_store.count(), store.graph_store.generation)
    built.insert(documents()[2])  # same id, same text: the same passage and relations
    assert store.graph_store.count() == before[0]
    assert len(store.get(properties={"ref_doc_id": ANSWER_DOC_ID})) == 1


# PGI's retrievers -----------------------------------------------------------------------------------
def vector_retriever(index, depth: int) -> PGRetriever:
    sub = VectorContextRetriever(index.property_graph_store, embed_model=HashEmbedding(dim=64),
                                 similarity_top_k=1, path_depth=depth)
    return index.as_retriever(sub_retrievers=[sub], use_async=False)


def test_vector_context_depth_one_gives_the_seed_entity_triplets_with_their_source_text(built):
    results = vector_retriever(built, 1).retrieve("Daniel Bernoulli")
    lines = triples(results)
    assert "daniel bernoulli -> wrote -> hydrodynamica" in lines and "daniel bernoulli -> son of -> johann bernoulli" in lines
    assert not any("taught" in line for line in lines)  # two hops away
    assert source_docs(built, results) == [ANSWER_DOC_ID]
    text = results[0].node.get_content()
    assert text.startswith("Here are some facts") and "In Hydrodynamica he stated" in text


def test_vector_context_depth_two_reaches_the_second_hop(built):
    results = vector_retriever(built, 2).retrieve("Daniel Bernoulli")
    assert "johann bernoulli -> taught -> leonhard euler" in triples(results)
    assert source_docs(built, results)[0] == ANSWER_DOC_ID and "bernoulli-johann" in source_docs(built, results)


def test_llm_synonym_retriever_finds_the_entities_the_llm_names(built):
    sub = LLMSynonymRetriever(built.property_graph_store, llm=synonym_llm("leonhard euler^EULER^nobody"))
    results = built.as_retriever(sub_retrievers=[sub], use_async=False).retrieve("Who taught Euler?")
    lines = triples(results)
    assert "leonhard euler -> studied under -> johann bernoulli" in lines
    assert "euler -> made contributions to -> graph theory" in lines
    assert "johann bernoulli -> taught -> leonhard euler" in lines
    assert set(source_docs(built, results)) == {"euler", "bernoulli-johann"}  # each triplet's own passage


def test_the_default_sub_retrievers_async_and_the_query_engine(built):
    llm = ScriptedLLM(script=lambda p: "Daniel Bernoulli" if "KEYWORDS" in p else "He founded fluid dynamics.", prompts=[])
    retriever = PropertyGraphIndex.from_existing(built.property_graph_store, llm=llm, embed_model=HashEmbedding(dim=64)).as_retriever()
    assert [type(s).__name__ for s in retriever.sub_retrievers] == ["LLMSynonymRetriever", "VectorContextRetriever"]
    results = retriever.retrieve("What did Daniel Bernoulli write?")  # use_async=True: PGI's async path
    assert ANSWER_DOC_ID in source_docs(built, results)
    engine = built.as_query_engine(llm=llm, sub_retrievers=[VectorContextRetriever(
        built.property_graph_store, embed_model=HashEmbedding(dim=64), similarity_top_k=1)])
    response = engine.query("Daniel Bernoulli")
    assert str(response) == "He founded fluid dynamics."
    assert "Daniel Bernoulli (1700-1782)" in llm.prompts[-1]  # the source passage reached the LLM


def test_get_rel_map_depth_limit_and_ignored_relations(built):
    store = built.property_graph_store
    johann = store.get(ids=["Johann Bernoulli"])
    one = store.get_rel_map(johann, depth=1, limit=100)
    labels = sorted(r.label.lower() for _, r, _ in one)
    assert labels == ["developed", "elder brother of", "professor at", "son of", "studied under", "taught", "younger brother of"]
    two = store.get_rel_map(johann, depth=2, limit=100)
    assert len(two) > len(one) and [t[1].label for t in two[: len(one)]] == [t[1].label for t in one]  # nearest first
    assert len(store.get_rel_map(johann, depth=2, limit=3)) == 3
    kept = store.get_rel_map(johann, depth=1, limit=100, ignore_rels=["Taught", "son of"])
    assert sorted(r.label.lower() for _, r, _ in kept) == [x for x in labels if x not in ("taught", "son of")]


def test_async_variants_give_the_sync_answers(built):
    store = built.property_graph_store
    vector = HashEmbedding(dim=64).get_query_embedding("Basel")
    query = VectorStoreQuery(query_embedding=vector, similarity_top_k=2)

    async def run():
        return await asyncio.gather(store.aget(ids=["Basel"]), store.aget_triplets(entity_names=["Basel"]),
                                    store.avector_query(query), store.aget_rel_map(store.get(ids=["Basel"]), depth=1))

    got, triplets, (nodes, scores), rel_map = asyncio.run(run())
    assert got == store.get(ids=["Basel"]) and triplets == store.get_triplets(entity_names=["Basel"])
    assert nodes[0].name == "Basel" and scores == sorted(scores, reverse=True)
    assert rel_map == store.get_rel_map(store.get(ids=["Basel"]), depth=1)


def test_structured_queries_are_refused_with_the_way_out(built):
    store = built.property_graph_store
    assert store.supports_vector_queries and not store.supports_structured_queries
    with pytest.raises(NotImplementedError, match="no Cypher"):
        store.structured_query("MATCH (n) RETURN n")


# our retrieval on PGI's graph, and PGI's on ours -------------------------------------------------------
def test_graphrag_retriever_runs_on_the_graph_pgi_built(built):
    retriever = GraphRAGRetriever(store=built.property_graph_store.graph_store, similarity_top_k=2, llm=None)
    hits = retriever.retrieve(EULER_QUESTION)
    assert ANSWER_DOC_ID in [h.node.ref_doc_id for h in hits]


def test_graphrag_sub_retriever_fuses_with_pgi_sub_retrievers(built):
    store = built.property_graph_store
    ours = GraphRAGSubRetriever(store, similarity_top_k=2, llm=None)
    vector = VectorContextRetriever(store, embed_model=HashEmbedding(dim=64), similarity_top_k=1)
    results = PGRetriever([ours, vector], use_async=False).retrieve(EULER_QUESTION)
    passages = [n for n in results if "graphrag_relations" in n.node.metadata]
    assert ANSWER_DOC_ID in [n.node.ref_doc_id for n in passages] and len(results) > len(passages)
    async_results = asyncio.run(PGRetriever([ours, vector], use_async=True).aretrieve(EULER_QUESTION))
    assert {n.node.node_id for n in async_results} == {n.node.node_id for n in results}
    with pytest.raises(TypeError, match="MilvusPropertyGraphStore"):
        GraphRAGSubRetriever(object())


def test_pgi_reads_a_graph_graphrag_transform_wrote(lite_uri):
    from llama_index_graphrag_milvus import GraphRAGIndex, MilvusGraphStore

    graph_store = MilvusGraphStore(uri=lite_uri, embed_model=HashEmbedding(dim=64), collection_prefix="transform")
    GraphRAGIndex.from_documents(bernoulli_documents(), store=graph_store)
    store = MilvusPropertyGraphStore(graph_store=graph_store)
    results = vector_retriever(PropertyGraphIndex.from_existing(store, embed_model=HashEmbedding(dim=64), kg_extractors=[ImplicitPathExtractor()]), 1).retrieve("Daniel Bernoulli")
    assert "daniel bernoulli -> wrote -> hydrodynamica" in triples(results)
    assert source_docs(None, results) == [ANSWER_DOC_ID]  # the stating passage, by its passage id
    assert "In Hydrodynamica he stated" in results[0].node.get_content()
    store.close()  # not the graph store's owner: it stays open
    assert graph_store.count()["passages"] == 5
    graph_store.close()


# deleting ---------------------------------------------------------------------------------------------
def test_delete_ref_doc_removes_the_passage_its_relations_and_orphans_only(fresh):
    index = build(fresh)
    before = fresh.graph_store.backend.counts()
    index.delete_ref_doc(ANSWER_DOC_ID)
    after = fresh.graph_store.backend.counts()  # the live rows (the others wait for compact())
    assert after["passages"] == before["passages"] - 1
    assert after["relations"] == before["relations"] - len(TRIPLETS[ANSWER_DOC_ID])
    assert fresh.get(ids=["Hydrodynamica"]) == [] and fresh.get(properties={"ref_doc_id": ANSWER_DOC_ID}) == []
    assert fresh.get_triplets(entity_names=["Daniel Bernoulli"]) == []
    assert [n.name for n in fresh.get(ids=["Johann Bernoulli"])] == ["Johann bernoulli"]  # others state it
    side = fresh.client.query(fresh.properties_collection, filter='kind != ""', output_fields=["id", "sources", "ends"], limit=1000)
    chunk_ids = {r["id"].split(":", 1)[1] for r in side if r["id"].startswith("chunk:")}
    assert all(set(r["sources"]) <= chunk_ids for r in side)  # no side row names a deleted chunk
    assert len(chunk_ids) == 4


def test_delete_by_entity_relation_and_properties(fresh):
    build(fresh)
    fresh.delete(entity_names=["Basel"])
    assert fresh.get(ids=["Basel"]) == [] and fresh.get_triplets(relation_names=["lies on"]) == []
    assert [n.name for n in fresh.get(ids=["University of Basel"])]  # still named by other relations
    fresh.delete(relation_names=["Taught"])
    assert fresh.get_triplets(relation_names=["taught"]) == []
    assert fresh.get_triplets(entity_names=["Johann Bernoulli"], relation_names=["developed"])  # the rest stays
    fresh.delete(properties={"ref_doc_id": "euler"})
    assert fresh.get(properties={"ref_doc_id": "euler"}) == [] and fresh.graph_store.count()["passages"] == 4
    assert fresh.get_triplets(entity_names=["Euler"]) == []


def test_delete_llama_nodes_by_ref_doc_id(fresh):
    index = build(fresh)
    fresh.delete_llama_nodes(ref_doc_ids=["basel"])
    assert fresh.get(properties={"ref_doc_id": "basel"}) == []
    assert fresh.get_triplets(entity_names=["Rhine"]) == []
    hits = GraphRAGRetriever(store=fresh.graph_store, similarity_top_k=2, llm=None).retrieve("Basel Rhine")
    assert "basel" not in [h.node.ref_doc_id for h in hits]
    assert len(index.property_graph_store.get_llama_nodes([n.node.node_id for n in hits])) == len(hits)


# the store's guarantees -------------------------------------------------------------------------------
def test_values_with_quotes_and_backslashes_are_literals_never_filters(fresh):
    tricky = 'x" or kind != "'
    fresh.upsert_nodes([EntityNode(name='Ab"c\\d', properties={"k": tricky}), EntityNode(name="plain", properties={"k": "v"})])
    assert [n.properties["k"] for n in fresh.get(properties={"k": tricky})] == [tricky]
    assert fresh.get(properties={"k": 'v" or k != "'}) == []
    assert fresh.get(properties={'k"] == "v" or properties["k': "v"}) == []
    assert fresh.get(ids=['") or id != ("']) == []
    assert fresh.get_triplets(relation_names=['r"] or label != ["']) == []


def test_non_json_properties_are_refused_before_anything_is_written(fresh):
    from llama_index_graphrag_milvus import GraphStoreError

    with pytest.raises(GraphStoreError, match="not JSON"):
        fresh.upsert_nodes([EntityNode(name="fine"), EntityNode(name="bad", properties={"when": object()})])
    assert fresh.get(ids=["fine", "bad"]) == []


def test_collection_prefixes_are_tenants(built, fresh):
    assert fresh.get(ids=["Daniel Bernoulli"]) == [] and fresh.get_triplets(entity_names=["Daniel Bernoulli"]) == []
    build(fresh, documents()[:1])
    fresh.delete(entity_names=["Johann Bernoulli"])
    assert fresh.get(ids=["Jakob Bernoulli"]) and fresh.get(ids=["Johann Bernoulli"]) == []
    assert built.property_graph_store.get(ids=["Johann Bernoulli"])  # the other tenant's rows are untouched
    assert (fresh.properties_collection, built.property_graph_store.properties_collection) == ("fresh_properties", "built_properties")


REOPEN = textwrap.dedent(
    """
    import json, sys
    from llama_index.core import PropertyGraphIndex
    from llama_index.core.indices.property_graph import ImplicitPathExtractor, VectorContextRetriever
    from llama_index_graphrag_milvus import MilvusPropertyGraphStore
    from llama_index_graphrag_milvus.embeddings import HashEmbedding

    with MilvusPropertyGraphStore(uri=sys.argv[1], embed_model=HashEmbedding(dim=64)) as store:
        index = PropertyGraphIndex.from_existing(store, embed_model=HashEmbedding(dim=64), kg_extractors=[ImplicitPathExtractor()])
        sub = VectorContextRetriever(store, embed_model=HashEmbedding(dim=64), similarity_top_k=1)
        results = index.as_retriever(sub_retrievers=[sub], use_async=False).retrieve("Daniel Bernoulli")
        store.delete_llama_nodes(ref_doc_ids=["basel"])
        print(json.dumps({"docs": [n.node.ref_doc_id for n in results], "counts": store.graph_store.count(),
                          "labels": store.get_schema()["entity_labels"]}))
    """
)


def test_reopen_in_a_new_process(tmp_path):
    uri = str(tmp_path / "g.db")
    store = MilvusPropertyGraphStore(uri=uri, embed_model=HashEmbedding(dim=64))
    build(store)
    store.close()  # a Milvus Lite database is open in one process at a time
    out = subprocess.run([sys.executable, "-c", REOPEN, uri], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["docs"] == [ANSWER_DOC_ID] and seen["counts"]["passages"] == 4
    with MilvusPropertyGraphStore(uri=uri, embed_model=HashEmbedding(dim=64)) as again:  # the delete held
        assert again.get(properties={"ref_doc_id": "basel"}) == [] and again.get(ids=["Daniel Bernoulli"])
