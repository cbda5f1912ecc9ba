"""Untrusted LLM output: fenced JSON, invalid JSON, ids never offered, answers of the wrong shape."""

import asyncio
import json
import logging

import pytest

from llama_index_graphrag_milvus.ingest.extract import parse_extraction
from llama_index_graphrag_milvus.llm.parsing import parse_json_object
from llama_index_graphrag_milvus.llm.prompts import RERANK_PROMPT
from llama_index_graphrag_milvus.llm.rerank import llm_rerank, parse_rerank_answer
from llama_index_graphrag_milvus.schema import ScoredRelation

from conftest import ScriptedLLM


def candidates():
    return [
        ScoredRelation(id=10 + i, subject=s, predicate="p", object="o", score=score)
        for i, (s, score) in enumerate([("a", 0.2), ("b", 0.9), ("c", 0.5), ("d", 0.1)])
    ]


def answer(lines, thought="t"):
    return json.dumps({"thought_process": thought, "useful_relationships": lines})


def test_fenced_json_is_read():
    assert parse_json_object('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_object('```\n{"a": [1, 2]}\n```') == {"a": [1, 2]}
    assert parse_json_object('{"a": 1} trailing') == {"a": 1}  # prose around the object is skipped


@pytest.mark.parametrize("text", ["not json", "{'a': 1}", "[1, 2]", '"a string"', ""])
def test_anything_but_a_json_object_is_rejected(text):
    with pytest.raises(ValueError):
        parse_json_object(text)


def test_rerank_keeps_the_llms_order_and_only_offered_ids():
    result = parse_rerank_answer(answer(["[3] c p o", "[99] invented", "[0] zero", "[1] a p o", "[3] again"]), candidates())
    assert [r.subject for r in result.relations] == ["c", "a"]  # offered ids, LLM order, deduplicated, no fill
    assert result.thought_process == "t"


@pytest.mark.parametrize(
    "bad",
    [
        "I think [2] is best",  # not JSON
        '```json\n{"useful_relationships": "[2] b p o"}\n```',  # a string, not a list
        json.dumps({"useful_relationships": [True, 2.5, None]}),  # neither ids nor strings
        json.dumps({"thought_process": "x"}),  # missing
        answer(["[7] not offered", "[42] neither"]),  # ids never offered
        json.dumps(["[2] b p o"]),  # a list, not an object
    ],
)
def test_unusable_rerank_answers_choose_nothing_with_a_warning(bad, caplog):
    llm = ScriptedLLM(script=lambda prompt: bad, prompts=[])
    with caplog.at_level(logging.WARNING):
        result = asyncio.run(llm_rerank(llm, RERANK_PROMPT, "q", candidates(), 2))
    assert result.relations == []  # the ranking without the LLM stands
    assert "the ranking without it stands" in caplog.text


def test_an_llm_that_raises_chooses_nothing_too(caplog):
    def boom(prompt):
        raise TimeoutError("LLM timed out")

    with caplog.at_level(logging.WARNING):
        result = asyncio.run(llm_rerank(ScriptedLLM(script=boom, prompts=[]), RERANK_PROMPT, "q", candidates(), 1))
    assert result.relations == []
    assert "LLM timed out" in caplog.text


def test_the_prompt_offers_numbered_lines_and_the_question():
    llm = ScriptedLLM(script=lambda prompt: answer(["[2] b p o"]), prompts=[])
    asyncio.run(llm_rerank(llm, RERANK_PROMPT, "who is b?", candidates(), 1))
    task = llm.prompts[0].split("Now the real task.")[1]
    assert "Question: who is b?" in task
    assert "[1] a p o\n[2] b p o\n[3] c p o\n[4] d p o" in task


def test_extraction_answers_are_parsed_strictly():
    triplets = parse_extraction('```json\n{"triplets": [["A", "knows", "B"], ["bad"], [1, 2, 3], ["A", "", "C"]]}\n```', 10)
    assert [(t.subject, t.predicate, t.object) for t in triplets] == [("A", "knows", "B")]
    for bad in ['{"triplets": "A knows B"}', "[]", "nope"]:
        with pytest.raises(ValueError):
            parse_extraction(bad, 10)


def test_the_prompts_show_the_model_the_json_they_ask_for():
    """LlamaIndex formats prompts with a formatter that leaves `{{`/`}}` as they are: a template written
    for `str.format` would show the model doubled braces."""
    from llama_index_graphrag_milvus.llm.prompts import NER_PROMPT, TRIPLET_EXTRACT_PROMPT

    shown = [
        TRIPLET_EXTRACT_PROMPT.format(text="Euler studied in Basel.", max_triplets=5),
        NER_PROMPT.format(query_str="Who taught Euler?"),
        RERANK_PROMPT.format(query_str="Who taught Euler?", relationships="[1] Johann Bernoulli taught Euler", top_n=3),
    ]
    for prompt in shown:
        assert "{{" not in prompt and "}}" not in prompt
    assert '{"triplets": []}' in shown[0] and '{"named_entities": [' in shown[1] and '{"thought_process": ' in shown[2]
    assert "Who taught Euler?" in shown[2] and "[1] Johann Bernoulli taught Euler" in shown[2]
