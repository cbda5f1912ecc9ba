"""adjacency="milvus": no adjacency in memory; writes, deletes and retrieval load what they touch."""

import numpy as np
import pytest
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform
from llama_index_graphrag_milvus.backends.memory import MemoryGraph
from llama_index_graphrag_milvus.backends.milvus import MilvusGraph
from llama_index_graphrag_milvus.bench.demo import load_sample
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents

from conftest import graph_llm

QUESTIONS = [EULER_QUESTION, "Who taught Leonhard Euler?", "What did Jakob Bernoulli discover?", "Where is Basel?"]


def pair(make_store, tmp_path):
    memory = make_store(uri=str(tmp_path / "memory.db"))
    milvus = make_store(uri=str(tmp_path / "milvus.db"), adjacency="milvus")
    for store in (memory, milvus):
        GraphRAGTransform(store=store)(bernoulli_documents())
    return memory, milvus


def test_nothing_is_held_in_memory_and_writes_are_the_same(make_store, tmp_path):
    memory, milvus = pair(make_store, tmp_path)
    assert isinstance(milvus.backend, MilvusGraph) and isinstance(memory.backend, MemoryGraph)
    # 22 given triplets and 27 links of the passages' text and titles, between 27 names
    assert milvus.count() == memory.count() == {"entities": 27, "relations": 49, "passages": 5}
    IngestionPipeline(transformations=[SentenceSplitter(), GraphRAGTransform(store=milvus)]).run(documents=bernoulli_documents())
    assert milvus.count() == memory.count()  # idempotent without the adjacency too
    for store in (memory, milvus):
        store.delete("bernoulli-daniel")
        store.compact()
    assert milvus.count() == memory.count() == {"entities": 20, "relations": 39, "passages": 4}
    assert milvus.count()["relations"] == len(milvus.client.query(milvus.relations_collection, filter="", output_fields=["id"]))


@pytest.mark.parametrize("degree", [1, 2])
def test_the_same_candidates_as_the_in_memory_adjacency(make_store, tmp_path, degree):
    memory, milvus = pair(make_store, tmp_path)
    llm = graph_llm(mentions=["Euler", "Jakob Bernoulli"], chosen=["studied under"])  # the same seeds for both
    for question in QUESTIONS:
        runs = [
            GraphRAGRetriever(store=s, llm=llm, expansion_degree=degree, similarity_top_k=3).trace(question)
            for s in (memory, milvus)
        ]
        assert runs[0].candidates
        by_id = [{r.id: r for r in run.candidates} for run in runs]
        assert set(by_id[0]) == set(by_id[1])  # the same candidates (ties may come in another order)
        for rid, relation in by_id[0].items():
            assert relation.score == pytest.approx(by_id[1][rid].score, abs=1e-4)
            assert sorted(relation.passage_ids) == sorted(by_id[1][rid].passage_ids)
        assert {n.node.node_id for n in runs[0].nodes} == {n.node.node_id for n in runs[1].nodes}


def test_the_chain_reranker_runs_on_the_loaded_neighbourhood(make_store, tmp_path):
    _, milvus = pair(make_store, tmp_path)
    run = GraphRAGRetriever(store=milvus, similarity_top_k=2).trace("Who was the teacher of Leonhard Euler?")
    assert {n.node.node_id for n in run.nodes} == {"euler", "bernoulli-johann"}
    assert all(n.node.metadata["graphrag_relations"] for n in run.nodes)


CONFIGS = [{}, {"expansion_degree": 2}, {"ranker": "chain"}, {"ranker": "ppr"}, {"hub_fraction": 0.2}]


def _top10(store, questions):
    found = []
    for options in CONFIGS:
        retriever = GraphRAGRetriever(store=store, similarity_top_k=10, llm=None, **options)
        found.append([[h.node.node_id for h in retriever.retrieve(q["question"])] for q in questions])
    return found


def test_both_modes_give_the_same_top_10_on_a_dev_slice_question_by_question(make_store, tmp_path, spread_embed):
    """The bundled MuSiQue sample (162 passages with their triplets, 15 questions), in one database,
    opened in each mode: the same top 10 for every question and configuration, also after deletes and a
    re-ingest by the Milvus-mode store."""
    sample = load_sample()
    uri = str(tmp_path / "slice.db")
    memory = make_store(uri=uri, embed_model=spread_embed)
    GraphRAGTransform(store=memory, llm=None)(sample.nodes)
    for round in range(2):
        expected = _top10(memory, sample.questions)
        memory.close()
        milvus = make_store(uri=uri, embed_model=spread_embed, adjacency="milvus")
        got = _top10(milvus, sample.questions)
        for options, want, have in zip(CONFIGS, expected, got):
            differ = [i for i, (a, b) in enumerate(zip(want, have)) if a != b]
            assert not differ, f"round {round}, {options}: questions {differ} differ"
        if round == 0:  # delete three documents, ingest one of them again, then compare again
            gone = [n.node_id for n in sample.nodes[:3]]
            for doc in gone:
                milvus.delete(doc)
            GraphRAGTransform(store=milvus, llm=None)([n for n in sample.nodes if n.node_id == gone[0]])
            milvus.close()
            memory = make_store(uri=uri, embed_model=spread_embed)
            assert memory.count()["passages"] == len(sample.nodes) - 2


def test_a_retrieval_reads_each_relation_once_with_its_ends_and_vector(make_store, tmp_path, monkeypatch):
    """Milvus mode reads a relation's two entities with its vector, from the relation's own row, once a
    retrieval; the statements by relation are read only for the candidates' passages."""
    _, milvus = pair(make_store, tmp_path)
    reads, tests = [], []
    get, where = milvus.collections.get, milvus.collections.where

    def logged(kind, ids, fields, **kwargs):
        reads.append((kind, list(ids), tuple(fields)))
        return get(kind, ids, fields, **kwargs)

    def filtered(kind, by, fields):
        by = list(by)
        tests.extend(by)
        return where(kind, by, fields)

    monkeypatch.setattr(milvus.collections, "get", logged)
    monkeypatch.setattr(milvus.collections, "where", filtered)
    run = GraphRAGRetriever(store=milvus, llm=None, expansion_degree=2, similarity_top_k=3).trace(EULER_QUESTION)
    walked = [i for kind, ids, fields in reads if kind == "relations" and "subject_id" in fields for i in ids]
    assert len(walked) > 10 and len(walked) == len(set(walked))
    assert {c.id for c in run.candidates} <= set(walked)
    by_relation = [test for test in tests if test.startswith("relation_id in")]
    stated = {int(i) for test in by_relation for i in test.split("[", 1)[1].rstrip("]").split(",")}
    assert stated == {c.id for c in run.candidates}


def test_scoring_many_relations_reads_every_vector_and_gives_the_cached_numbers(make_store, tmp_path, monkeypatch):
    """A cut over 2,500 relations, read 1,000 ids a query: each is scored, with the cosine the in-process
    cache computes, to the bit, and without a filtered search (on a server's graph index such a search
    can leave out some of the ids it is given)."""
    from llama_index.core.schema import TextNode

    from llama_index_graphrag_milvus.milvus import search as milvus_search
    from llama_index_graphrag_milvus.milvus.search import similarities

    nodes = [
        TextNode(id_=f"p{p}", text=f"passage {p}", metadata={"triplets": [[f"E{p}", f"links{k}", f"F{(p * 7 + k) % 500}"] for k in range(25)]})
        for p in range(100)
    ]
    store = make_store(uri=str(tmp_path / "many.db"))
    GraphRAGTransform(store=store, llm=None)(nodes)
    cache, search = store.backend.ready(), store.backend.search
    positions = np.flatnonzero(cache.relations.mask())
    ids = list(cache.relations.ids_at(positions))
    assert len(ids) == 2500
    vector = store.embed_model.get_query_embedding("who links E3?")
    monkeypatch.setattr(milvus_search, "VECTOR_BATCH", 1000)  # so that the batches are exercised
    store.collections.calls.clear()
    scored = similarities(store.collections, "relations", vector, ids)
    assert set(scored) == set(ids)
    assert dict(store.collections.calls) == {"query relations": 3}  # three lookups, no search
    expected = search.vectors["relations"].similarity(vector, positions)
    assert [scored[i] for i in ids] == expected.astype(np.float64).tolist()


def test_a_seed_search_is_one_milvus_call_and_gives_the_cached_search_numbers(make_store, tmp_path):
    """Milvus mode's seed searches settle ties by the exact cosines computed from the vectors the search
    returns: one call each, the same hits and numbers as the in-process search of the default mode."""
    from llama_index_graphrag_milvus.milvus.search import MilvusSearch

    memory, _ = pair(make_store, tmp_path)
    remote = MilvusSearch(memory.collections)
    vector = memory.embed_model.get_query_embedding(EULER_QUESTION)
    memory.collections.calls.clear()
    found = {kind: getattr(remote, kind)(vector, 5) for kind in ("relations", "passages")}
    entities = remote.entities([vector], 5)[0]
    assert dict(memory.collections.calls) == {"search relations": 1, "search passages": 1, "search entities": 1}
    assert found["relations"] == memory.backend.search.relations(vector, 5)
    assert found["passages"] == memory.backend.search.passages(vector, 5)
    assert entities == memory.backend.search.entities([vector], 5)[0]


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_names_the_store_holds_take_their_stored_vectors(make_store, tmp_path, monkeypatch, adjacency):
    """A question's known names search with their entity's stored vector: the model embeds only names
    the store does not hold, and the named entity is found at cosine 1."""
    from llama_index.core.schema import QueryBundle

    from llama_index_graphrag_milvus.embeddings import HashEmbedding
    from llama_index_graphrag_milvus.schema import entity_id

    store = make_store(uri=str(tmp_path / f"{adjacency}.db"), adjacency=adjacency)
    GraphRAGTransform(store=store)(bernoulli_documents())
    embedded = []
    original = HashEmbedding._get_text_embeddings
    monkeypatch.setattr(HashEmbedding, "_get_text_embeddings", lambda self, texts: embedded.extend(texts) or original(self, texts))
    vector = store.embed_model.get_query_embedding(EULER_QUESTION)
    run = GraphRAGRetriever(store=store, llm=None).trace(QueryBundle(EULER_QUESTION, embedding=vector))
    assert run.mentions and embedded == []
    named = {entity_id(m) for m in run.mentions}
    assert any(e.id in named and e.score == pytest.approx(1.0, abs=1e-6) for e in run.seed_entities)
    import asyncio

    from llama_index_graphrag_milvus.retriever import _mention_vectors

    vectors = asyncio.run(_mention_vectors(store, [run.mentions[0], "Nobody At All", run.mentions[0].upper()]))
    assert embedded == ["Nobody At All"]
    assert vectors[0] == vectors[2] and vectors[1] == original(store.embed_model, ["Nobody At All"])[0]
