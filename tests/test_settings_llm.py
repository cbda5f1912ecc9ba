"""`llm=` follows LlamaIndex's conventions: the LLM given, else `Settings.llm` (or OpenAI with a key), and
`llm=None` for no LLM; it works at query time, and the ingest calls it only when `LLMTripletExtractor` is
asked for. A scripted LLM stands in for `Settings.llm`; OpenAI is only ever built, never called."""

import json
import pickle
import re
import warnings
from typing import List

import pytest
from llama_index.core import Settings
from llama_index.core.schema import Document, TextNode

from llama_index_graphrag_milvus import GraphRAGIndex, GraphRAGTransform, LLMTripletExtractor, Triplet
from llama_index_graphrag_milvus.examples import bernoulli_documents
from llama_index_graphrag_milvus.llm.resolve import DEFAULT, resolve_llm

from conftest import ScriptedLLM, offered_lines


def script(prompt: str) -> str:
    """Extraction: the passage's first two words "appear in" Basel; NER: Basel; rerank: the first
    offered relation; anything else (an answer): "scripted answer"."""
    if '"triplets"' in prompt:
        passage = prompt.split("Passage:\n", 1)[1].split()
        return json.dumps({"triplets": [[" ".join(passage[:2]), "appears in", "Basel"]]})
    if '"named_entities"' in prompt:
        return json.dumps({"named_entities": ["Basel"]})
    if '"useful_relationships"' in prompt:
        return json.dumps({"thought_process": "t", "useful_relationships": offered_lines(prompt)[:1]})
    return "scripted answer"


def kinds(prompts: List[str]) -> List[str]:
    return [
        "extract" if '"triplets"' in p else "ner" if '"named_entities"' in p
        else "rerank" if '"useful_relationships"' in p else "answer"
        for p in prompts
    ]


def plain_documents() -> List[Document]:
    """The Bernoulli corpus without its triplets: every node needs extraction."""
    return [Document(id_=d.id_, text=d.text) for d in bernoulli_documents()]


@pytest.fixture(autouse=True)
def clean_settings(monkeypatch):
    """No OPENAI_API_KEY, and Settings.llm as it was before the test (unset: tests/test_index.py checks)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("IS_TESTING", raising=False)  # LlamaIndex's own switch to a MockLLM default
    saved = Settings._llm
    yield
    Settings._llm = saved


@pytest.fixture
def settings_llm():
    llm = ScriptedLLM(script=script, prompts=[])
    Settings.llm = llm
    return llm


def test_settings_llm_works_at_query_time_and_the_ingest_calls_no_llm(settings_llm, make_store):
    assert resolve_llm() is settings_llm and resolve_llm(DEFAULT) is settings_llm
    store = make_store()

    index = GraphRAGIndex.from_documents(plain_documents(), store=store)

    assert index.llm is settings_llm and settings_llm.prompts == []  # the free graph, whatever LLM is set
    assert set(index.transform.built) == {"CooccurrenceExtractor"} and store.count()["relations"] > 0
    assert index.as_retriever().llm is settings_llm
    index.as_retriever(similarity_top_k=2).retrieve("What did Daniel Bernoulli write in Basel?")
    assert kinds(settings_llm.prompts) == ["ner", "rerank"]  # 2 LLM calls per query


def test_llm_extraction_is_asked_for_and_follows_settings_llm(settings_llm, make_store):
    store = make_store()

    index = GraphRAGIndex.from_documents(plain_documents(), store=store, extractor=LLMTripletExtractor())

    assert kinds(settings_llm.prompts) == ["extract"] * 5  # one call per node without triplets
    assert index.transform.extractor.llm is settings_llm
    assert store.describe([Triplet("Daniel Bernoulli", "appears in", "Basel").id])
    built = index.transform.built
    assert built["LLMTripletExtractor"] == {"passages": 5, "triplets": 5} and set(built) == {"LLMTripletExtractor", "text links"}
    assert store.count()["relations"] == 5 + built["text links"]["triplets"]  # and the text's own links


def test_the_transform_alone_extracts_with_an_llm_only_when_asked_and_skips_empty_nodes(settings_llm, make_store):
    store = make_store()
    given = TextNode(id_="given", text="Ann met Bo.", metadata={"triplets": [["Ann", "met", "Bo"]]})
    GraphRAGTransform(store=store)([TextNode(id_="free", text="Dora Maar lived here.")])
    assert settings_llm.prompts == []

    transform = GraphRAGTransform(store=store, extractor=LLMTripletExtractor(llm=settings_llm))
    transform([given, TextNode(id_="empty", text="  "), TextNode(id_="plain", text="Carl Zeiss lived here.")])

    assert kinds(settings_llm.prompts) == ["extract"]  # neither the given triplets nor the empty node
    assert store.describe([Triplet("Carl Zeiss", "appears in", "Basel").id])
    # the LLM stays out of the cache key and the transform still refuses worker processes
    assert "llm" not in transform.to_dict()
    with pytest.raises(TypeError, match="num_workers=1"):
        pickle.dumps(transform)


def test_the_transforms_old_llm_argument_still_extracts_for_one_release_with_a_warning(settings_llm, make_store):
    store = make_store()
    with pytest.warns(FutureWarning, match=r"extractor=LLMTripletExtractor\(llm=\.\.\."):
        transform = GraphRAGTransform(store=store, llm=settings_llm, num_workers=1, max_triplets_per_node=5)
    assert isinstance(transform.extractor, LLMTripletExtractor) and transform.extractor.llm is settings_llm
    assert (transform.extractor.num_workers, transform.extractor.max_triplets_per_node) == (1, 5)
    transform([TextNode(id_="plain", text="Carl Zeiss lived here.")])
    assert kinds(settings_llm.prompts) == ["extract"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert GraphRAGTransform(store=store, llm=None).extractor is None  # the default: no warning


def test_llm_none_makes_no_llm_call_with_settings_llm_set(settings_llm, make_store):
    store = make_store()

    index = GraphRAGIndex.from_documents(plain_documents(), store=store, llm=None)
    assert index.llm is None
    assert "CooccurrenceExtractor" in index.transform.built
    retriever = index.as_retriever()
    assert retriever.llm is None
    retriever.retrieve("What did Daniel Bernoulli write?")
    offline = index.as_query_engine(llm=None).query("What did Daniel Bernoulli write?")

    assert settings_llm.prompts == []
    assert offline.source_nodes and str(offline).startswith("Daniel Bernoulli")  # the passages, no answer

    # the answer alone still follows Settings.llm when the query engine is not told otherwise
    answered = index.as_query_engine().query("What did Daniel Bernoulli write?")
    assert str(answered) == "scripted answer" and kinds(settings_llm.prompts) == ["answer"]


def test_settings_llm_none_is_no_llm(make_store):
    Settings.llm = None  # LlamaIndex makes it a MockLLM
    assert Settings._llm is not None
    assert resolve_llm() is None
    assert GraphRAGIndex(store=make_store()).llm is None
    with pytest.raises(ValueError, match="LLMTripletExtractor needs an LLM"):
        LLMTripletExtractor()


def test_no_settings_and_no_key_is_no_llm_and_builds_nothing(make_store):
    Settings._llm = None
    assert resolve_llm() is None and resolve_llm(None) is None
    assert GraphRAGIndex(store=make_store()).llm is None
    assert Settings._llm is None  # Settings.llm (OpenAI) was never resolved


def test_an_openai_key_resolves_openai_without_calling_it(monkeypatch):
    from llama_index.llms.openai import OpenAI

    Settings._llm = None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    assert isinstance(resolve_llm(), OpenAI)


def test_an_llm_instance_is_used_as_given(settings_llm):
    other = ScriptedLLM(script=script, prompts=[])
    assert resolve_llm(other) is other


def test_a_model_name_or_a_class_is_refused_with_the_fix(make_store):
    from llama_index.llms.openai import OpenAI

    with pytest.raises(TypeError, match=re.escape("pass an LLM object, e.g. llm=OpenAI(model='gpt-4o')")) as name:
        resolve_llm("gpt-4o")
    assert "llm=None for no LLM" in str(name.value)
    with pytest.raises(TypeError, match=re.escape("got the class OpenAI: create one, e.g. llm=OpenAI(model=...)")):
        resolve_llm(OpenAI)
    with pytest.raises(TypeError, match="LlamaIndex LLM"):
        resolve_llm(42)
    store = make_store()
    with pytest.raises(TypeError, match="pass an LLM object"):
        GraphRAGTransform(store=store, llm="gpt-4o")
    with pytest.raises(TypeError, match="pass an LLM object"):
        LLMTripletExtractor(llm="gpt-4o")
    with pytest.raises(TypeError, match="pass an LLM object"):
        GraphRAGIndex(store=store, llm="gpt-4o")


def test_a_users_mockllm_subclass_set_as_settings_llm_is_used():
    from llama_index.core.llms import MockLLM

    class Scripted(MockLLM):
        pass

    llm = Scripted()
    Settings.llm = llm
    assert resolve_llm() is llm


def test_the_benchmark_never_calls_an_llm_even_with_a_key_set(monkeypatch, tmp_path):
    from llama_index_graphrag_milvus.bench.benchmark import run_benchmark
    from llama_index_graphrag_milvus.embeddings import HashEmbedding

    from test_retrieval_modes import write_musique_like

    Settings._llm = None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")  # OpenAI would be built, and fail to connect
    write_musique_like(tmp_path)
    (tmp_path / "triples.jsonl").unlink()  # raw text: the ingest extracts triplets
    report = run_benchmark(tmp_path, tmp_path / "r.json", methods={"graphrag": {}}, embed_model=HashEmbedding(dim=64),
                           cache_dir=tmp_path / "cache", log=lambda s: None, chart=False)
    assert "CooccurrenceExtractor" in report["graph_built_from"]
