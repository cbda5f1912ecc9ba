"""Candidate recall, measured with no LLM: the gold relations (the gold passages' given triplets where the
data gives them, else all they state), whether the relations offered to the LLM hold them, and the rerank
prompt's tokens, shown by `graphrag-milvus eval`."""

import pytest

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.bench.candidates import candidate_recall
from llama_index_graphrag_milvus.bench.evaluation import load_dataset
from llama_index_graphrag_milvus.bench.report import format_table
from llama_index_graphrag_milvus.bench.scripted import gold_relations, stored_ids
from llama_index_graphrag_milvus.bench.tokens import prompt_tokens, request_tokens
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.llm.prompts import RERANK_PROMPT
from llama_index_graphrag_milvus.schema import parse_triplets

from conftest import graph_llm
from test_retrieval_modes import write_musique_like


@pytest.fixture
def musique_like(tmp_path):
    write_musique_like(tmp_path)
    return tmp_path


def stated(store, passage_ids):
    """The relations each stored passage states."""
    return {row["id"]: set(row["relation_ids"]) for row in store.collections.get("passages", passage_ids, ["id", "relation_ids"])}


def ingested(directory, tmp_path, **options):
    dataset = load_dataset(directory, **options)
    store = MilvusGraphStore(uri=str(tmp_path / f"{dataset.name}.db"), embed_model=HashEmbedding(dim=64))
    GraphRAGTransform(store=store)(dataset.nodes)  # with triplets: the given ones and the text's links
    return dataset, store


def test_gold_relations_are_the_given_triplets_where_the_data_gives_them(musique_like, tmp_path):
    dataset, store = ingested(musique_like, tmp_path)
    try:
        assert dataset.given_triplets
        gold = gold_relations(store, dataset)
        given = {n.node_id: {t.id for t in parse_triplets(n.metadata["triplets"])[0]} for n in dataset.nodes}
        question = dataset.questions[1]  # "Who taught Euler?": the passages of Euler and of Johann
        assert set(gold[question["question"]]) == given["euler"] | given["bernoulli-johann"]
        stored = stored_ids(dataset)
        assert {p for ps in gold[question["question"]].values() for p in ps} == {stored["euler"], stored["bernoulli-johann"]}
        assert given["euler"] < stated(store, [stored["euler"]])[stored["euler"]]  # the text's links: stored, not gold
    finally:
        store.close()


def test_without_given_triplets_every_relation_of_a_gold_passage_is_gold(musique_like, tmp_path):
    dataset, store = ingested(musique_like, tmp_path, triples=False)
    try:
        assert not dataset.given_triplets
        stored = stored_ids(dataset)
        gold = gold_relations(store, dataset)[dataset.questions[1]["question"]]
        rows = stated(store, [stored["euler"], stored["bernoulli-johann"]])
        assert set(gold) == rows[stored["euler"]] | rows[stored["bernoulli-johann"]]
    finally:
        store.close()


def test_candidate_recall_reads_what_the_retriever_offers_and_counts_the_prompt(musique_like, tmp_path):
    dataset, store = ingested(musique_like, tmp_path)
    try:
        vectors = [store.embed_model.get_query_embedding(q["question"]) for q in dataset.questions]
        found = candidate_recall(store, dataset, vectors)
        # what the retriever really sends, recorded by a scripted LLM
        llm = graph_llm(mentions=[], chosen=[])
        GraphRAGRetriever(store=store, llm=llm, similarity_top_k=10).retrieve(dataset.questions[0]["question"])
        first = found["per_question"][0]
        assert first["prompt_tokens"] == request_tokens([("user", llm.prompts[-1])])
        assert first["offered"] == llm.prompts[-1].split("Now the real task.")[1].count("\n[")
        assert first["any_gold_offered"] and first["gold_relations_offered"] >= 1
        assert 0 < found["gold_passages_offered"] <= found["gold_passages_among_candidates"] <= 1
    finally:
        store.close()


def test_prompt_tokens_are_those_of_the_rerank_request():
    text = RERANK_PROMPT.format(query_str="Who taught Euler?", relationships="", top_n=3)
    assert prompt_tokens("Who taught Euler?", []) == request_tokens([("user", text)]) > 300


def test_the_eval_table_shows_the_candidates_beside_recall():
    report = {"dataset": "musique", "questions": 2, "passages": 5, "ingest_s": 1.0,
              "methods": {"graphrag": {"recall@2": .5, "recall@5": 1.0, "recall@10": 1.0, "p50_ms": 3, "p95_ms": 4}},
              "candidates": {"any_gold_offered": 1.0, "gold_passages_offered": .8, "gold_relations_offered": 3.5,
                             "offered": 12.0, "prompt_tokens": 612.0, "gold_passages_among_candidates": 1.0}}
    table = format_table(report)
    assert "| musique | 100.0% | 80.0% | 3.50 | 12.0 | 612 | 100.0% |" in table
    assert table.index("| graphrag |") < table.index("rerank prompt tokens")
