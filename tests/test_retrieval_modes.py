"""The no-LLM retrievers on the store: the vector cache and Milvus agree; synonyms persist; eval and CLI."""

import json
import subprocess
import sys

import pytest

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.bench.benchmark import run_benchmark
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents

QUESTIONS = [EULER_QUESTION, "Who taught Leonhard Euler?", "What did Jakob Bernoulli discover?", "Where is Basel?"]


@pytest.mark.parametrize("reranker", ["fused", "chain", "ppr", "similarity"])
def test_vector_cache_and_milvus_search_give_the_same_passages(make_store, tmp_path, reranker):
    cached = make_store(uri=str(tmp_path / "a.db"), vector_cache=True)
    direct = make_store(uri=str(tmp_path / "b.db"), vector_cache=False)
    for store in (cached, direct):
        GraphRAGTransform(store=store)(bernoulli_documents())
    for question in QUESTIONS:
        runs = [GraphRAGRetriever(store=s, similarity_top_k=3, ranker=reranker).trace(question) for s in (cached, direct)]
        assert [n.node.node_id for n in runs[0].nodes] == [n.node.node_id for n in runs[1].nodes]
        assert [n.score for n in runs[0].nodes] == pytest.approx([n.score for n in runs[1].nodes], abs=1e-4)
        assert [str(r) for r in runs[0].chosen] == [str(r) for r in runs[1].chosen]


def test_the_default_retriever_returns_passages_with_the_chain_that_chose_them(make_store, minilm):
    store = make_store(embed_model=minilm)
    GraphRAGTransform(store=store)(bernoulli_documents())
    run = GraphRAGRetriever(store=store, similarity_top_k=2).trace("Who was the teacher of Leonhard Euler?")
    assert {n.node.node_id for n in run.nodes} == {"euler", "bernoulli-johann"}
    for hit in run.nodes:
        assert hit.node.metadata["graphrag_relations"], "every graph passage says which relations chose it"
    assert any("Johann Bernoulli" in str(r) for r in run.chosen)


def test_synonym_links_are_stored_and_reloaded(make_store, tmp_path):
    from llama_index.core.schema import TextNode

    from llama_index_graphrag_milvus.schema import entity_id

    uri = str(tmp_path / "syn.db")
    store = make_store(uri=uri, embed_model=HashEmbedding(dim=64))
    nodes = [
        TextNode(id_="1", text="Ann Lee wrote Dawn.", metadata={"triplets": [["Ann Lee", "wrote", "Dawn"]]}),
        TextNode(id_="2", text="Lee Ann was born in Orsk.", metadata={"triplets": [["Lee Ann", "born in", "Orsk"]]}),
    ]
    GraphRAGTransform(store=store)(nodes[:1])
    GraphRAGTransform(store=store)(nodes[1:])  # the link to a stored entity is found by search
    ann, lee = entity_id("Ann Lee"), entity_id("Lee Ann")
    assert store.synonyms_of([ann, lee]) == {ann: {lee}, lee: {ann}}  # same words, same hash vector
    store.close()
    reopened = make_store(uri=uri, embed_model=HashEmbedding(dim=64))
    assert reopened.synonyms_of([ann, lee]) == {ann: {lee}, lee: {ann}}
    assert reopened.backend.ready().snapshot().entity_entity.nnz == 2  # symmetric


def test_no_synonym_links_when_disabled(make_store):
    from llama_index.core.schema import TextNode

    store = make_store(synonym_threshold=None)
    GraphRAGTransform(store=store)(
        [TextNode(text="x", metadata={"triplets": [["Ann Lee", "wrote", "Dawn"], ["Lee Ann", "born in", "Orsk"]]})]
    )
    assert store.collections.count("links") == 0 and store.backend.ready().snapshot().entity_entity.nnz == 0


def write_musique_like(directory):
    docs = bernoulli_documents()
    with open(directory / "corpus.jsonl", "w") as f:
        for d in docs:
            f.write(json.dumps({"id": d.doc_id, "title": d.metadata["title"], "text": d.text}) + "\n")
    with open(directory / "triples.jsonl", "w") as f:
        for d in docs:
            f.write(json.dumps({"id": d.doc_id, "triples": d.metadata["triplets"]}) + "\n")
    with open(directory / "questions.jsonl", "w") as f:
        f.write(json.dumps({"id": "3hop1__1", "question": EULER_QUESTION, "gold_ids": ["euler", "bernoulli-johann", "bernoulli-daniel"]}) + "\n")
        f.write(json.dumps({"id": "2hop__2", "question": "Who taught Euler?", "gold_ids": ["euler", "bernoulli-johann"]}) + "\n")


def test_the_benchmark_reports_recall_latency_json_and_chart(tmp_path):
    write_musique_like(tmp_path)
    out = tmp_path / "out" / "report.json"
    report = run_benchmark(tmp_path, out, embed_model=HashEmbedding(dim=64), cache_dir=tmp_path / "cache", log=lambda s: None)
    saved = json.loads(out.read_text())
    assert saved == json.loads(json.dumps(report))
    assert set(saved["methods"]) == {
        "dense", "graphrag", "graphrag_chain", "graphrag_no_synonyms", "graphrag_ppr", "graphrag_similarity",
        "graphrag_hop", "graphrag_topic",
    }
    dense = saved["methods"]["dense"]
    assert dense["recall@10"] == 1.0  # 5 passages: everything is in the top 10
    assert 0 < dense["recall@2"] < 1 and dense["p50_ms"] > 0
    assert set(dense["by_hops"]) == {"2", "3"}
    assert out.with_suffix(".png").stat().st_size > 10_000


def test_cached_embeddings_are_not_computed_twice(tmp_path):
    class Counting(HashEmbedding):
        calls: int = 0

        def _get_text_embeddings(self, texts):
            self.calls += len(texts)
            return super()._get_text_embeddings(texts)

    inner = Counting(dim=8)
    first = CachedEmbedding(inner, tmp_path / "e.sqlite")
    a = first.get_text_embedding_batch(["x", "y"])
    again = CachedEmbedding(inner, tmp_path / "e.sqlite").get_text_embedding_batch(["y", "x", "z"])
    assert inner.calls == 3
    assert again[0] == pytest.approx(a[1]) and again[1] == pytest.approx(a[0])


def test_cli_stats_and_a_one_line_error(tmp_path):
    uri = str(tmp_path / "cli.db")
    jsonl = tmp_path / "passages.jsonl"
    jsonl.write_text(json.dumps({"id": "p1", "text": "Ann wrote Dawn.", "triplets": [["Ann", "wrote", "Dawn"]]}) + "\n")
    cli = [sys.executable, "-m", "llama_index_graphrag_milvus.cli"]
    ok = subprocess.run(cli + ["ingest", str(jsonl), "--uri", uri], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert json.loads(ok.stdout.strip().splitlines()[-1]) == {"entities": 2, "relations": 1, "passages": 1}
    stats = subprocess.run(cli + ["stats", "--uri", uri], capture_output=True, text=True, timeout=300)
    assert json.loads(stats.stdout) == {"entities": 2, "relations": 1, "passages": 1}
    bad = subprocess.run(cli + ["ingest", str(tmp_path / "missing.txt"), "--uri", uri], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1] == f"graphrag-milvus ingest: error: {tmp_path / 'missing.txt'}: no such file"
    assert "Traceback" not in bad.stderr
