"""GraphRAGIndex where LlamaIndex code expects an index: a `BaseIndex`, a chat engine over two turns, a
`QueryEngineTool`, async inserts and deletes inside a running loop, `ref_doc_info` read from Milvus."""

import json
from typing import List

import pytest
from llama_index.core import Settings
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine, SimpleChatEngine
from llama_index.core.indices.base import BaseIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import Document
from llama_index.core.tools import QueryEngineTool

from llama_index_graphrag_milvus import GraphRAGIndex
from llama_index_graphrag_milvus.examples import ANSWER_DOC_ID, bernoulli_documents
from llama_index_graphrag_milvus.retriever import RELATIONS_KEY

from conftest import ScriptedLLM, offered_lines


@pytest.fixture(autouse=True)
def no_settings_llm():
    assert Settings._llm is None, "a test left Settings.llm set: the offline path would not be tested"


@pytest.fixture
def index(make_store):
    return GraphRAGIndex.from_documents(bernoulli_documents(), store=make_store(), llm=None)


def chat_llm() -> ScriptedLLM:
    """An LLM for the graph steps and a chat: it names the question's people (NER), picks the relations
    naming them (rerank), rewrites "his son" from the conversation (condense), and answers from the
    passages in its context: who taught Euler, what Daniel Bernoulli wrote, else "I don't know"."""

    def script(prompt: str) -> str:
        if '"named_entities"' in prompt:
            question = prompt.rsplit("Question:", 1)[-1]
            return json.dumps({"named_entities": [n for n in ("Euler", "Daniel Bernoulli") if n in question]})
        if '"useful_relationships"' in prompt:
            picked = [line for line in offered_lines(prompt) if "Euler" in line or "Daniel" in line]
            return json.dumps({"thought_process": "the people asked about", "useful_relationships": picked[:2]})
        if "Follow Up Input:" in prompt:  # condense the conversation into a standalone question
            assert "Johann Bernoulli" in prompt.split("Follow Up Input:")[0]  # the first turn's answer
            return "What did Daniel Bernoulli, the son of Johann Bernoulli, write?"
        context = prompt.rsplit("Here are the relevant documents for the context:", 1)[-1]
        asked = prompt.rsplit("user:", 1)[-1]  # the last question (a chat prompt holds the whole conversation)
        if ("What did Daniel Bernoulli" in asked or "his son" in asked) and "Hydrodynamica" in context:
            return "Hydrodynamica."
        if "Who taught Leonhard Euler" in asked and "taught Leonhard Euler" in context:
            return "Johann Bernoulli."
        return "I don't know."

    return ScriptedLLM(script=script, prompts=[])


def test_it_is_a_llamaindex_index(index):
    assert isinstance(index, BaseIndex)
    assert index.index_struct is not None and index.index_id
    assert index.docstore.docs == {}  # no copy of the passages: Milvus holds them


def test_a_chat_engine_answers_over_two_turns_from_the_graphs_passages(index):
    llm = chat_llm()
    chat = index.as_chat_engine(llm=llm, similarity_top_k=2)
    assert isinstance(chat, CondensePlusContextChatEngine)

    first = chat.chat("Who taught Leonhard Euler?")
    assert str(first) == "Johann Bernoulli."
    assert "bernoulli-johann" in [n.node.ref_doc_id for n in first.source_nodes]
    second = chat.chat("What did his son write?")  # condensed with the first turn, then retrieved
    assert str(second) == "Hydrodynamica."
    assert [n.node.ref_doc_id for n in second.source_nodes][0] == ANSWER_DOC_ID
    assert all(RELATIONS_KEY in n.node.metadata for n in second.source_nodes)  # graph-retrieved
    # the retriever searched with the condensed question, its NER by the chat's LLM
    assert any('"named_entities"' in p and "Daniel Bernoulli, the son of Johann Bernoulli" in p for p in llm.prompts)
    assert len(chat.chat_history) == 4


def test_chat_modes_and_a_chat_without_an_llm(index):
    llm = chat_llm()
    assert isinstance(index.as_chat_engine(chat_mode="context", llm=llm), ContextChatEngine)
    assert isinstance(index.as_chat_engine(chat_mode="simple", llm=llm), SimpleChatEngine)
    assert str(index.as_chat_engine(chat_mode="condense_question", llm=llm).chat("Who taught Leonhard Euler?"))
    with pytest.raises(ValueError, match="needs an LLM to answer"):
        index.as_chat_engine()
    with pytest.raises(ValueError, match="not offered"):
        index.as_chat_engine(chat_mode="react", llm=llm)


def test_a_query_engine_tool_answers_with_the_graph(index):
    tool = QueryEngineTool.from_defaults(
        index.as_query_engine(llm=chat_llm(), similarity_top_k=2), name="bernoulli", description="The Bernoulli family."
    )
    output = tool.call("What did Daniel Bernoulli write?")
    assert output.content == "Hydrodynamica." and output.tool_name == "bernoulli"
    assert ANSWER_DOC_ID in [n.node.ref_doc_id for n in output.raw_output.source_nodes]


async def test_async_inserts_refresh_and_delete_inside_a_running_loop(make_store):
    store = make_store()
    docs = bernoulli_documents()
    index = GraphRAGIndex(store=store, llm=None)
    await index.ainsert(docs[0])
    await index.ainsert_nodes(SentenceSplitter()(docs[1:3]))
    assert sorted(index.ref_doc_info) == ["bernoulli-daniel", "bernoulli-jakob", "bernoulli-johann"]
    assert await index.arefresh_ref_docs(docs) == [False, False, False, True, True]
    await index.adelete_ref_doc("basel")
    assert not store.passage_ids("basel") and store.count()["passages"] == 4
    hits = await index.as_retriever(similarity_top_k=1).aretrieve("What did Daniel Bernoulli write?")
    assert hits[0].node.ref_doc_id == ANSWER_DOC_ID


def test_ref_doc_info_is_read_from_milvus(make_store, tmp_path):
    store = make_store()
    two = Document(id_="two", text="Ada Lovelace wrote notes.\n\n\nAlan Turing broke a code.", metadata={"kind": "essay"})
    GraphRAGIndex.from_documents([two, *bernoulli_documents()], store=store,
                                 transformations=[SentenceSplitter(chunk_size=12, chunk_overlap=0)])
    store.close()

    reopened = GraphRAGIndex.from_existing(store=make_store(uri=str(tmp_path / "graph.db")))  # no state but Milvus
    info = reopened.ref_doc_info
    assert sorted(info) == sorted(["two", *(d.doc_id for d in bernoulli_documents())])
    nodes: List = list(reopened.store.get_passages(reopened.store.passage_ids("two")).values())
    assert sorted(info["two"].node_ids) == sorted(n.node_id for n in nodes) and len(nodes) == 2
    assert info["two"].metadata["kind"] == "essay"
    reopened.delete_ref_doc("two")
    assert "two" not in reopened.ref_doc_info
    with pytest.raises(NotImplementedError, match="delete_ref_doc"):
        reopened.delete_nodes(info[ANSWER_DOC_ID].node_ids)
