"""The scripted LLMs read the rerank prompt as the package writes it, and the benchmark measures them
against the retriever without an LLM, with what the LLM is offered."""

import json

from llama_index_graphrag_milvus.bench.benchmark import run_benchmark
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.llm.prompts import RERANK_PROMPT
from llama_index_graphrag_milvus.llm.rerank import format_candidates, parse_rerank_answer
from llama_index_graphrag_milvus.schema import ScoredRelation
from llama_index_graphrag_milvus.bench.scripted import garbage_llm, oracle_llm, random_llm, read_rerank_prompt

from test_retrieval_modes import write_musique_like

OFFERED = [
    ScoredRelation(11, "Johann Bernoulli", "taught", "Leonhard Euler", 0.9),
    ScoredRelation(12, "Daniel Bernoulli", "son of", "Johann Bernoulli", 0.5),
    ScoredRelation(13, "Basel", "lies on", "Rhine", 0.4),
    ScoredRelation(14, "Jakob Bernoulli", "discovered", "constant e", 0.3),
]
QUESTION = "What did the son of Euler's teacher contribute?"


def prompt() -> str:
    return RERANK_PROMPT.format(query_str=QUESTION, relationships=format_candidates(OFFERED), top_n=3)


def test_the_prompt_is_read_after_its_example():
    question, lines = read_rerank_prompt(prompt())
    assert question == QUESTION
    assert lines == [(1, "Johann Bernoulli taught Leonhard Euler"), (2, "Daniel Bernoulli son of Johann Bernoulli"),
                     (3, "Basel lies on Rhine"), (4, "Jakob Bernoulli discovered constant e")]


def test_the_oracle_picks_exactly_the_gold_relations_and_the_package_reads_its_answer():
    llm = oracle_llm({QUESTION: {"daniel bernoulli son of johann bernoulli", "Johann Bernoulli taught Leonhard Euler"}})
    answer = llm.complete(prompt()).text
    assert json.loads(answer)["ids"] == [1, 2]
    assert [r.id for r in parse_rerank_answer(answer, OFFERED).relations] == [11, 12]


def test_random_picks_are_three_offered_ones_and_repeat():
    first, again = (json.loads(random_llm(3).complete(prompt()).text)["ids"] for _ in range(2))
    assert first == again and len(set(first)) == 3 and set(first) <= {1, 2, 3, 4}


def test_garbage_is_not_json():
    assert "{" not in garbage_llm().complete(prompt()).text


def test_the_benchmark_reports_the_scripted_llms_against_no_llm_and_the_candidates(tmp_path):
    write_musique_like(tmp_path)
    report = run_benchmark(tmp_path, tmp_path / "r.json", methods={}, embed_model=HashEmbedding(dim=64),
                           cache_dir=tmp_path / "cache", log=lambda s: None, chart=False, scripted_llms=True)
    assert {"llm_oracle", "llm_random3", "llm_garbage"} <= set(report["methods"])
    assert set(report["vs_graphrag"]) == {"llm_oracle", "llm_half_right", "llm_random3", "llm_garbage"}
    # garbage gives exactly the ranking without the LLM
    assert report["per_question"]["llm_garbage"] == report["per_question"]["graphrag"]
    assert report["vs_graphrag"]["llm_garbage"]["recall@5"]["diff"] == 0
    candidates = report["candidates"]
    assert 0 < candidates["gold_passages_offered"] <= candidates["gold_passages_among_candidates"] <= 1
    assert candidates["prompt_tokens"] > 300 and candidates["offered"] >= 1
