"""Tolerant but strict parsing of LLM answers: fences and prose around JSON, rerank ids in every form."""

import asyncio
import builtins
import json
import time

import pytest

from llama_index_graphrag_milvus.llm.mentions import read_mentions
from llama_index_graphrag_milvus.llm.parsing import MAX_OBJECT_STARTS, parse_json_object
from llama_index_graphrag_milvus.llm.prompts import RERANK_PROMPT
from llama_index_graphrag_milvus.llm.rerank import llm_rerank, parse_rerank_answer
from llama_index_graphrag_milvus.schema import ScoredRelation

from conftest import ScriptedLLM


def candidates(n=4):
    return [ScoredRelation(id=10 + i, subject=chr(ord("a") + i), predicate="p", object="o", score=0.1 * i) for i in range(n)]


def subjects(result):
    return [r.subject for r in result.relations]


# parse_json_object


def test_a_fence_with_prose_around_it_is_read():
    text = 'Sure! Here is the answer:\n```json\n{"a": 1, "b": "x"}\n```\nLet me know if you need more.'
    assert parse_json_object(text) == {"a": 1, "b": "x"}
    assert parse_json_object('Answer: ```{"a": [1, 2]}``` done') == {"a": [1, 2]}


@pytest.mark.parametrize(
    "text",
    [
        'Here is my answer: {"a": 1}',
        '{"a": 1}\nI chose these because they follow the chain.',
        'Thinking {not json} and {\'a\': 2} then {"a": 1} and {"b": 2} after',
        '```json\n{"a": 1}',  # an unclosed fence (a truncated answer)
    ],
)
def test_prose_before_or_after_the_object_is_skipped(text):
    assert parse_json_object(text) == {"a": 1}


@pytest.mark.parametrize(
    "text",
    [
        '[{"a": 1}]',  # a list alone, even of objects
        '```json\n[{"a": 1}]\n```',  # a fenced list
        '"a string"',
        "42",
        "null",
    ],
)
def test_a_json_value_other_than_an_object_is_rejected(text):
    with pytest.raises(ValueError, match="expected a JSON object"):
        parse_json_object(text)


@pytest.mark.parametrize(
    "text",
    ["", "garbage", "{'a': 1}", "{a: 1}", "{" * 100_000, "[" * 100_000, '{"a": ' * 100_000, "x{" * 200_000],
)
def test_garbage_is_rejected_cheaply(text):
    start = time.perf_counter()
    with pytest.raises(ValueError):
        parse_json_object(text)
    assert time.perf_counter() - start < 2.0


def test_only_the_first_object_starts_are_tried():
    assert parse_json_object("{x " * (MAX_OBJECT_STARTS - 1) + '{"a": 1}') == {"a": 1}
    with pytest.raises(ValueError, match="no JSON object"):
        parse_json_object("{x " * MAX_OBJECT_STARTS + '{"a": 1}')


@pytest.mark.parametrize(
    "payload",
    [
        "__import__('pathlib').Path({path!r}).touch()",
        '{{"useful_relationships": __import__("pathlib").Path({path!r}).touch()}}',
        "```python\n__import__('pathlib').Path({path!r}).touch()\n```",
    ],
)
def test_python_in_an_answer_is_never_evaluated(payload, tmp_path, monkeypatch):
    sentinel = tmp_path / "pwned"

    def forbidden(*args, **kwargs):
        raise AssertionError("an LLM answer reached eval/exec")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    text = payload.format(path=str(sentinel))
    with pytest.raises(ValueError):
        parse_json_object(text)
    with pytest.raises(ValueError):
        parse_rerank_answer(text, candidates())
    assert not sentinel.exists()


# parse_rerank_answer


def test_ids_alone_are_read_ints_and_strings_but_not_bools_or_ids_never_offered():
    result = parse_rerank_answer(json.dumps({"ids": [2, "3", "[4]", 99, True, 0, -1, 2.0, None]}), candidates())
    assert subjects(result) == ["b", "c", "d"]
    assert result.relations and result.thought_process is None


def test_useful_relationships_may_name_an_id_without_text():
    answer = json.dumps({"thought_process": "t", "useful_relationships": ["[3]", "1", " [ 2 ] b p o", "4 is wrong"]})
    result = parse_rerank_answer(answer, candidates())
    assert subjects(result) == ["c", "a", "b"]  # "4 is wrong" is text, not an id
    assert result.thought_process == "t"


def test_both_lists_are_merged_in_order_without_duplicates():
    answer = json.dumps({"useful_relationships": ["[3] c p o", {"id": 1}, "[7] invented"], "ids": [3, "1", 2, "[9]"]})
    result = parse_rerank_answer(answer, candidates())
    assert subjects(result) == ["c", "a", "b"]


def test_every_chosen_relation_is_kept_in_the_llms_order_even_beyond_top_n():
    answer = json.dumps({"useful_relationships": ["[4] d p o", "[1] a p o", "[3] c p o"], "ids": [2]})
    result = parse_rerank_answer(answer, candidates())
    assert subjects(result) == ["d", "a", "c", "b"]  # not truncated to top_n
    assert [r.score for r in result.relations] == [1.0, 1 / 2, 1 / 3, 1 / 4]


def test_nothing_is_filled_in_by_similarity():
    result = parse_rerank_answer(json.dumps({"useful_relationships": ["[1] a p o"]}), candidates())
    assert subjects(result) == ["a"]  # "d", the most similar, is not added


def test_a_rerank_answer_wrapped_in_prose_and_a_fence_is_used():
    answer = 'Let me think.\n```json\n{"thought_process": "b then c", "useful_relationships": ["[2] b p o", "[3] c p o"]}\n```\nDone.'
    llm = ScriptedLLM(script=lambda prompt: answer, prompts=[])
    result = asyncio.run(llm_rerank(llm, RERANK_PROMPT, "q", candidates(), 2))
    assert subjects(result) == ["b", "c"] and result.thought_process == "b then c"


@pytest.mark.parametrize(
    "answer, message",
    [
        ({"thought_process": "x"}, "'useful_relationships' or 'ids'"),
        ({"useful_relationships": "[2] b p o", "ids": "2"}, "'useful_relationships' or 'ids'"),
        ({"ids": [99, 0, True, "[5]"]}, "names none of the offered"),
        ({"useful_relationships": [None, 1.5, ["[1]"]]}, "names none of the offered"),
    ],
)
def test_rerank_answers_naming_no_offered_relation_are_rejected(answer, message):
    with pytest.raises(ValueError, match=message):
        parse_rerank_answer(json.dumps(answer), candidates())


def test_a_top_level_list_is_not_a_rerank_answer():
    with pytest.raises(ValueError):
        parse_rerank_answer(json.dumps(["[1] a p o"]), candidates())
    with pytest.raises(ValueError):
        parse_rerank_answer(json.dumps([{"ids": [1]}]), candidates())


# read_mentions


def test_ner_answers_in_a_fence_or_with_prose_are_read():
    assert read_mentions('Entities:\n```json\n{"named_entities": ["Thomas Mann", " Lübeck "]}\n```') == ["Thomas Mann", "Lübeck"]
    assert read_mentions('The entities are {"named_entities": ["Trave"]} as asked.') == ["Trave"]


def test_ner_answers_keep_only_their_strings():
    assert read_mentions(json.dumps({"named_entities": ["A", 1, None, ["B"], "", "A", "C"]})) == ["A", "C"]


@pytest.mark.parametrize("answer", ['{"entities": ["A"]}', '{"named_entities": "A"}', '["A"]', "A, B"])
def test_ner_answers_without_a_named_entities_list_are_rejected(answer):
    with pytest.raises(ValueError):
        read_mentions(answer)


def test_a_fence_inside_a_json_string_or_before_the_json_does_not_hide_it():
    assert parse_json_object('{"thought_process": "see ```x```", "ids": [1]}')["ids"] == [1]
    assert parse_json_object('Like this:\n```python\nprint(1)\n```\nAnswer: {"ids": [2]}')["ids"] == [2]
