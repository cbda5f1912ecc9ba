"""The cost benchmark counts what the package sends: one extraction call per passage with the package's
prompt over `title\\ntext`, output only where real LLM output exists, and the NER, rerank and answer calls
of a question through the query engine."""

import json
import shutil
from pathlib import Path

import pytest

import llama_index_graphrag_milvus.bench as bench
from benchmarks.cost import ingest_cost, query_cost
from llama_index_graphrag_milvus import GraphRAGTransform
from llama_index_graphrag_milvus.bench.evaluation import load_dataset
from llama_index_graphrag_milvus.bench.tokens import encoding, request_tokens
from llama_index_graphrag_milvus.llm.prompts import TRIPLET_EXTRACT_PROMPT

SAMPLE = Path(bench.__file__).parent / "data" / "musique_sample"


@pytest.fixture(scope="module")
def enc():
    return encoding()


def rows(path: Path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_a_chat_request_is_counted_as_openai_counts_it(enc):
    # 3 a message + "user" (1) + "hello world" (2), and 3 priming the reply
    assert request_tokens([("user", "hello world")]) == 9
    assert request_tokens([("system", "hello world"), ("user", "hello world")]) == 15


def test_ingest_counts_one_extraction_call_per_passage_with_the_package_prompt(enc, tmp_path):
    corpus = rows(SAMPLE / "corpus.jsonl")
    report = ingest_cost(SAMPLE, enc)
    assert report["calls"] == report["chunks"] == report["passages"] == len(corpus)
    expected = sum(len(enc.encode(TRIPLET_EXTRACT_PROMPT.format(text=f"{r['title']}\n{r['text']}", max_triplets=20))) + 7
                   for r in corpus)
    assert report["input_tokens"] == expected
    triples = rows(SAMPLE / "triples.jsonl")
    assert report["output_tokens"] == sum(len(enc.encode(json.dumps({"triplets": r["triples"]}))) for r in triples)


def test_a_passage_longer_than_a_chunk_costs_a_call_per_chunk(enc, tmp_path):
    long = " ".join(f"Sentence {i} names Paris and Rome." for i in range(400))  # ~3,600 tokens
    rows_ = [{"id": "a", "title": "Long", "text": long}, {"id": "b", "title": "Short", "text": "Rome is in Italy."}]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows_), encoding="utf-8")
    shutil.copy(SAMPLE / "questions.jsonl", tmp_path / "questions.jsonl")
    report = ingest_cost(tmp_path, enc)
    assert report["passages"] == 2 and report["chunks"] == report["calls"] >= 5  # 1024-token chunks, 200 overlap
    assert "output_tokens" not in report  # no LLM output to measure: none is made up


def test_a_question_costs_a_ner_a_rerank_and_an_answer_call(enc, make_store):
    dataset = load_dataset(SAMPLE, triples=False, limit=3)
    store = make_store()
    GraphRAGTransform(store=store, llm=None)(dataset.nodes)
    report = query_cost(dataset, store, enc)
    assert report["questions"] == 3
    for step in ("ner", "rerank", "answer"):
        assert report[step]["calls_per_question"] == 1.0
    assert report["rerank"]["offered_lines_median"] > 3
    assert report["rerank"]["input_tokens_mean"] > report["ner"]["input_tokens_mean"] + 300  # example + lines
    answers = [len(enc.encode(q["answer"])) for q in dataset.questions]
    assert report["answer"]["output_tokens_mean"] == round(sum(answers) / 3, 1)
