"""An LLM outage costs seconds and loses no graph, and the ingest calls no LLM unless asked, through the
real OpenAI client pointed at a local OpenAI-compatible stub whose chat endpoint answers 500 until the
test brings it back.

Calls are counted at the stub; the circuit breaker's cooldown runs on a fake clock, so nothing sleeps.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Dict, List, Optional

import pytest
from llama_index.core import Settings
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import Document, MetadataMode, TextNode
from llama_index.llms.openai import OpenAI

from llama_index_graphrag_milvus import (
    CooccurrenceExtractor,
    GraphRAGIndex,
    GraphRAGRetriever,
    GraphRAGTransform,
    LLMTripletExtractor,
    MilvusGraphStore,
    cli,
)
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents
from llama_index_graphrag_milvus.ingest.extract.given import PENDING_KEY
from llama_index_graphrag_milvus.llm.guard import LLMGuard, guard_of, set_guard
from llama_index_graphrag_milvus.schema import passage_id
from llama_index_graphrag_milvus.transform import count_pending

from conftest import offered_lines

LOGGER = "llama_index_graphrag_milvus"


def kind_of(prompt: str) -> str:
    """Which of the package's prompts this is (see llm/prompts.py)."""
    if '"triplets"' in prompt:
        return "extraction"
    if '"named_entities"' in prompt:
        return "ner"
    return "rerank" if '"useful_relationships"' in prompt else "other"


def llm_triplets(prompt: str) -> List[List[str]]:
    """The stub's extraction: the passage's first two words, "as the LLM read", and "LLM fact"."""
    words = prompt.split("Passage:\n", 1)[1].split()
    return [[" ".join(words[:2]), "as the LLM read", "LLM fact"]]


def answer(kind: str, prompt: str) -> str:
    if kind == "extraction":
        return json.dumps({"triplets": llm_triplets(prompt)})
    if kind == "ner":
        return json.dumps({"named_entities": ["Euler"]})
    picked = [line for line in offered_lines(prompt) if "taught" in line or "son of" in line]
    return json.dumps({"thought_process": "Euler's teacher, then his son.", "useful_relationships": picked})


class ChatStub:
    """An OpenAI-compatible chat endpoint on 127.0.0.1. `up` False: every request gets a 500; else
    `answer(kind, prompt)`, or a 500 where `fails(kind, prompt)`. `calls` lists the prompt kinds asked."""

    def __init__(self) -> None:
        self.up = False
        self.answer: Callable[[str, str], str] = answer
        self.fails: Callable[[str, str], bool] = lambda kind, prompt: False
        self.calls: List[str] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1"

    def count(self, kind: str) -> int:
        return self.calls.count(kind)

    def reply(self, body: Dict) -> tuple:
        prompt = "\n".join(str(m.get("content")) for m in body.get("messages", []))
        kind = kind_of(prompt)
        with self._lock:
            self.calls.append(kind)
        if not self.up or self.fails(kind, prompt):
            return 500, {"error": {"message": "the chat endpoint is down", "type": "server_error"}}
        message = {"role": "assistant", "content": self.answer(kind, prompt)}
        return 200, {
            "id": "stub", "object": "chat.completion", "created": 0, "model": body.get("model", "stub"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def _handler(self) -> type:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                status, payload = stub.reply(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


class Clock:
    """A fake monotonic clock for the breaker's cooldown."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def stub():
    server = ChatStub()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def clock():
    return Clock()


def openai(stub: ChatStub, guard: Optional[LLMGuard] = None, max_retries: int = 0) -> OpenAI:
    """The real OpenAI client on the stub (gpt-3.5-turbo: its tokenizer ships offline); with
    `max_retries=0` a failed call is one request, so the stub counts calls exactly."""
    _warm_up(stub)
    llm = OpenAI(model="gpt-3.5-turbo", api_key="sk-test", api_base=stub.url, max_retries=max_retries, temperature=0)
    if guard is not None:
        set_guard(llm, guard)
    return llm


def _warm_up(stub: ChatStub) -> None:
    """Once a process, one answered request by a throwaway client: the client imports most of itself and
    loads its tokenizer on its first call (~1.5 s in a fresh process), which would otherwise count
    against the deadlines under test. The stub forgets the request."""
    if getattr(_warm_up, "done", False):
        return
    up, stub.up = stub.up, True
    client = OpenAI(model="gpt-3.5-turbo", api_key="sk-test", api_base=stub.url, max_retries=0)
    asyncio.run(client.acomplete("warm up"))
    stub.up = up
    stub.calls.clear()
    _warm_up.done = True


def ranked(run) -> tuple:
    """What a retrieval returned and why: mentions, ranker, chosen relations, passages with scores."""
    return (
        run.mentions, run.reranker, [r.id for r in run.chosen],
        [(n.node.node_id, round(n.score, 9)) for n in run.nodes],
    )


@pytest.fixture
def bernoulli_store(make_store):
    store = make_store()
    GraphRAGTransform(store=store)(bernoulli_documents())  # triplets given: no LLM call
    return store


# retrieval ------------------------------------------------------------------------------------
def test_a_retrieval_with_the_llm_down_falls_back_to_exactly_the_no_llm_ranking(bernoulli_store, stub, clock, caplog):
    store = bernoulli_store
    baseline = ranked(GraphRAGRetriever(store=store, llm=None, similarity_top_k=2).trace(EULER_QUESTION))
    llm = openai(stub, LLMGuard(failures=1, cooldown=30, clock=clock))
    retriever = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=2)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert ranked(retriever.trace(EULER_QUESTION)) == baseline
    assert stub.calls == ["ner"]  # the failed NER call skipped the rerank call
    assert "LLM NER gave no answer" in caplog.text and "no OpenAI call for the next 30 s" in caplog.text

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert ranked(retriever.trace(EULER_QUESTION)) == baseline
    assert stub.calls == ["ner"]  # the breaker is open: no call at all
    assert "OpenAI ner skipped: the circuit breaker is open" in caplog.text

    stub.up = True
    clock.now += 29
    retriever.trace(EULER_QUESTION)
    assert stub.calls == ["ner"]  # still open until the cooldown passes
    clock.now += 2
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        run = retriever.trace(EULER_QUESTION)
    assert stub.calls == ["ner", "ner", "rerank"]  # the trial call succeeded: NER and rerank again
    assert "OpenAI answered again (ner): LLM calls resume" in caplog.text
    assert run.thought_process == "Euler's teacher, then his son." and run.reranker == "llm"


def test_async_retrievals_count_failures_and_open_after_three(bernoulli_store, stub, clock, caplog):
    store = bernoulli_store
    baseline = ranked(GraphRAGRetriever(store=store, llm=None, similarity_top_k=2).trace(EULER_QUESTION))
    llm = openai(stub, LLMGuard(clock=clock))  # the defaults: open after 3 failed calls in a row
    # a retriever per question, as index.as_retriever() per request does: the breaker is the LLM's
    retrievers = [GraphRAGRetriever(store=store, llm=llm, similarity_top_k=2) for _ in range(5)]

    async def retrieve_all():
        return [ranked(await r.atrace(EULER_QUESTION)) for r in retrievers]

    stub.up = True  # it answered once: a later failure may be a blip, so one failure does not open it
    asyncio.run(retrievers[0].atrace(EULER_QUESTION))
    stub.up, stub.calls[:] = False, []
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert asyncio.run(retrieve_all()) == [baseline] * 5
    assert stub.calls == ["ner"] * 3  # then the breaker opened: the 4th and 5th made no call
    assert guard_of(llm).is_open and "3 failed call(s) in a row" in caplog.text


def test_a_deadline_bounds_the_wait_on_a_client_that_retries(bernoulli_store, stub, clock, caplog):
    """With the client's default retries, one failing call takes ~14 s (12 requests with backoff); the
    NER deadline gives up earlier and, as the wait cost the whole deadline, opens the breaker at once."""
    store = bernoulli_store
    baseline = ranked(GraphRAGRetriever(store=store, llm=None, similarity_top_k=2).trace(EULER_QUESTION))
    llm = openai(stub, LLMGuard(deadlines={"ner": 0.3}, clock=clock), max_retries=3)
    retriever = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=2)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert ranked(asyncio.run(retriever.atrace(EULER_QUESTION))) == baseline
        assert "no answer within 0.3 s" in caplog.text and guard_of(llm).is_open
        asked = len(stub.calls)
        assert ranked(asyncio.run(retriever.atrace(EULER_QUESTION))) == baseline
    # at most 2 requests before the deadline (none, when a loaded machine is slow to send the first one;
    # without the deadline the client's retries send 12), and none once the breaker is open
    assert asked <= 2 and len(stub.calls) == asked and "rerank" not in stub.calls


# ingest ---------------------------------------------------------------------------------------
PEOPLE = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Emmy Noether", "Niels Bohr", "Marie Curie",
          "Carl Gauss", "Lise Meitner"]
CITIES = ["London", "Manchester", "New York", "Erlangen", "Copenhagen", "Warsaw", "Brunswick", "Vienna"]


def raw_documents() -> List[Document]:
    return [
        Document(id_=f"doc-{i}", text=f"{name} was born in {city}. {name} corresponded with {PEOPLE[i - 1]} in Paris.")
        for i, (name, city) in enumerate(zip(PEOPLE, CITIES))
    ]


def stored(store: MilvusGraphStore, documents: List[Document]) -> Dict[str, dict]:
    """Each document's passage, as stored: its pending mark and its triplets (metadata and relations)."""
    pids = {doc.doc_id: passage_id(doc.doc_id, doc.text) for doc in documents}
    nodes = store.get_passages(list(pids.values()))
    relations = store.backend.passage_relations(list(pids.values()))
    texts = store.describe([r for rs in relations.values() for r in rs])
    return {
        doc: {
            "pending": nodes[pid].metadata.get(PENDING_KEY, False),
            "triplets": sorted(nodes[pid].metadata["triplets"]),
            "relations": sorted([texts[r].subject, texts[r].predicate, texts[r].object] for r in relations[pid]),
        }
        for doc, pid in pids.items()
    }


def cooccurrence(document: Document) -> List[List[str]]:
    return sorted([t.subject, t.predicate, t.object] for t in CooccurrenceExtractor().extract(document.text))


def by_llm(document: Document) -> List[List[str]]:
    return llm_triplets("Passage:\n" + document.text)


def with_text_links(document: Document) -> List[List[str]]:
    """What the store holds for a passage the LLM extracted: its triplets and its text's own links."""
    return sorted(by_llm(document) + [t for t in cooccurrence(document) if t not in by_llm(document)])


def extracting(store: MilvusGraphStore, llm: OpenAI) -> GraphRAGTransform:
    """The graph step, extracting with the LLM one call at a time (so that calls come in order)."""
    return GraphRAGTransform(store=store, extractor=LLMTripletExtractor(llm=llm, num_workers=1))


def steps(store: MilvusGraphStore, llm: OpenAI) -> list:
    return [SentenceSplitter(), extracting(store, llm)]


def index_on(store: MilvusGraphStore, llm: OpenAI, documents: Optional[List[Document]] = None) -> GraphRAGIndex:
    """An index on the store, one extraction call at a time (so that calls come in order); with
    `documents`, built from them (`from_documents`)."""
    if documents is None:
        return GraphRAGIndex(store=store, llm=llm, transformations=steps(store, llm))
    return GraphRAGIndex.from_documents(documents, store=store, llm=llm, transformations=steps(store, llm))


def stats(uri: str, capsys) -> dict:
    """`graphrag-milvus stats` (its note on stderr is left to read)."""
    capsys.readouterr()
    cli.main(["stats", "--uri", uri])
    out = capsys.readouterr()
    print(out.err, file=sys.stderr)
    return json.loads(out.out)


def test_an_ingest_with_the_llm_down_builds_the_no_llm_graph_and_a_refresh_completes_it(
    make_store, tmp_path, stub, clock, caplog, capsys
):
    documents, uri = raw_documents(), str(tmp_path / "outage.db")
    stub.up = True
    stub.fails = lambda kind, prompt: "Grace Hopper" in prompt or "Emmy Noether" in prompt or "Niels Bohr" in prompt
    llm = openai(stub, LLMGuard(failures=3, cooldown=30, clock=clock))
    store = make_store(uri=uri)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        index_on(store, llm, documents)
    # 2 answered; 3 failed in a row, which opened the breaker: the last 3 were never asked
    assert stub.calls == ["extraction"] * 5
    graph = stored(store, documents)
    for i, doc in enumerate(documents):
        if i < 2:
            assert graph[doc.doc_id] == {"pending": False, "triplets": by_llm(doc), "relations": with_text_links(doc)}
        else:
            assert graph[doc.doc_id] == {"pending": True, "triplets": cooccurrence(doc), "relations": cooccurrence(doc)}
        assert cooccurrence(doc), "every passage has a no-LLM graph"
    assert count_pending(store) == 6
    assert "the LLM call failed for 6, kept pending" in caplog.text
    store.close()

    # back up: a new store and index (as a new process) see the pending passages in Milvus
    stub.fails = lambda kind, prompt: False
    clock.now += 31
    store = make_store(uri=uri)
    assert count_pending(store) == 6
    index = index_on(store, llm)
    assert index.refresh_ref_docs(documents) == [False, False] + [True] * 6
    assert stub.calls == ["extraction"] * 11  # exactly the 6 pending passages
    graph = stored(store, documents)
    for doc in documents:
        assert graph[doc.doc_id] == {"pending": False, "triplets": by_llm(doc), "relations": with_text_links(doc)}
    assert count_pending(store) == 0 and store.count()["relations"] == sum(len(with_text_links(d)) for d in documents)
    assert index.refresh_ref_docs(documents) == [False] * 8 and len(stub.calls) == 11  # nothing left to do
    store.close()
    assert "pending_extraction" not in stats(uri, capsys)


def test_stats_says_how_many_passages_are_pending(make_store, tmp_path, stub, clock, capsys):
    uri = str(tmp_path / "stats.db")
    store = make_store(uri=uri)
    extracting(store, openai(stub, LLMGuard(clock=clock)))([TextNode(id_=d.doc_id, text=d.text) for d in raw_documents()[:2]])
    expected = {**store.count(), "pending_extraction": 2}
    store.close()
    assert stats(uri, capsys) == expected
    assert "2 passages hold co-occurrence triplets because their LLM extraction failed" in capsys.readouterr().err


@pytest.mark.parametrize("run", ["sync", "async"])
def test_ingesting_the_same_nodes_again_extracts_only_the_pending_ones(make_store, stub, clock, run):
    documents = raw_documents()[:4]
    nodes = [TextNode(id_=d.doc_id, text=d.text) for d in documents]
    llm = openai(stub, LLMGuard(failures=2, cooldown=30, clock=clock))
    store = make_store()
    transform = extracting(store, llm)

    def ingest(batch):
        return transform(batch) if run == "sync" else asyncio.run(transform.acall(batch))

    stub.up, stub.fails = True, (lambda kind, prompt: "Ada Lovelace was born" not in prompt)
    ingest(nodes)
    assert stub.calls == ["extraction"] * 3  # 1 answered, 2 failed: the breaker stopped the 4th call
    assert [n.metadata.get(PENDING_KEY, False) for n in nodes] == [False, True, True, True]
    assert count_pending(store) == 3
    assert transform.built["CooccurrenceExtractor"] == {"passages": 3, "triplets": sum(len(cooccurrence(d)) for d in documents[1:])}

    stub.fails = lambda kind, prompt: False
    clock.now += 31
    ingest(nodes)
    assert stub.calls == ["extraction"] * 6  # the 3 pending nodes only
    assert count_pending(store) == 0 and all(n.metadata[PENDING_KEY] is False for n in nodes)
    graph = stored(store, documents)
    assert all(graph[d.doc_id]["relations"] == with_text_links(d) for d in documents)
    ingest(nodes)
    assert len(stub.calls) == 6  # they carry the LLM's triplets now


def test_an_answer_with_no_triplets_is_not_pending_and_a_failure_is(make_store, stub, clock):
    documents = [
        Document(id_="none", text="Ada Lovelace wrote notes on the engine."),
        Document(id_="nameless", text="the weather was mild all week and nothing happened."),
    ]
    llm = openai(stub, LLMGuard(clock=clock))
    store = make_store()
    stub.up, stub.answer = True, (lambda kind, prompt: json.dumps({"triplets": []}))
    index = index_on(store, llm, documents[:1])
    assert stored(store, documents[:1])["none"] == {"pending": False, "triplets": [], "relations": []}
    assert count_pending(store) == 0
    assert index.refresh_ref_docs(documents[:1]) == [False] and stub.calls == ["extraction"]

    # a failed call on a passage the no-LLM extractor finds nothing in: pending, with no relations
    stub.up = False
    index.insert(documents[1])
    assert stored(store, documents[1:])["nameless"] == {"pending": True, "triplets": [], "relations": []}
    # back, answering no triplets: the relations stay the same (none), and the pending mark still goes
    stub.up = True
    assert index.refresh_ref_docs(documents) == [False, True]
    assert stub.calls == ["extraction"] * 3 and count_pending(store) == 0
    assert stored(store, documents)["nameless"] == {"pending": False, "triplets": [], "relations": []}
    # the passage comes again as a new node (insert) while the LLM is down: its stored extraction
    # (the same input, prompt and model) stands, with no call, and it does not become pending
    stub.up = False
    index.insert(documents[1])
    assert count_pending(store) == 0 and stub.calls == ["extraction"] * 3
    assert stored(store, documents)["nameless"] == {"pending": False, "triplets": [], "relations": []}
    # a passage first inserted during the outage is pending, and the next insert of it (a new node,
    # not marked) asks the LLM again: a pending row holds no extraction to reuse
    late = Document(id_="late", text="the rain was steady all month and nobody went out.")
    index.insert(late)
    assert count_pending(store) == 1 and stub.calls == ["extraction"] * 4
    stub.up = True
    index.insert(late)
    assert count_pending(store) == 0 and stub.calls == ["extraction"] * 5


def test_an_unusable_extraction_answer_gets_the_no_llm_graph_but_is_not_pending(make_store, stub, clock):
    document = Document(id_="garbled", text=raw_documents()[0].text)
    llm = openai(stub, LLMGuard(clock=clock))
    store = make_store()
    stub.up, stub.answer = True, (lambda kind, prompt: "Sure! Here are the triplets: Ada -> London")
    index_on(store, llm, [document])
    assert stored(store, [document])["garbled"] == {
        "pending": False, "triplets": cooccurrence(document), "relations": cooccurrence(document)
    }
    assert not guard_of(llm).is_open  # the LLM answered: no failure counted


def test_pending_is_kept_out_of_the_embedded_text_and_the_llm_context(make_store, stub, clock):
    node = TextNode(id_="n", text=raw_documents()[0].text)
    store = make_store()
    extracting(store, openai(stub, LLMGuard(clock=clock)))([node])
    assert node.metadata[PENDING_KEY] is True
    assert PENDING_KEY not in node.get_content(MetadataMode.EMBED)
    assert PENDING_KEY not in node.get_content(MetadataMode.LLM)


def test_the_llm_back_within_a_second_one_refresh_extracts_every_pending_passage(make_store, stub, clock):
    """The breaker opened at the ingest (cooldown 30 s, on a clock that does not move): the refresh, an
    explicit ingest, lets its first call through as a probe; a retrieval in between does not probe."""
    documents, store = raw_documents(), make_store()
    llm = openai(stub, LLMGuard(clock=clock))
    index = index_on(store, llm, documents)
    assert stub.calls == ["extraction"] and count_pending(store) == 8  # the first call failed: no other
    assert guard_of(llm).is_open

    stub.up = True
    GraphRAGRetriever(store=store, llm=llm).trace(EULER_QUESTION)
    assert stub.calls == ["extraction"]  # a retrieval waits out the cooldown: no call
    assert index.refresh_ref_docs(documents) == [True] * 8
    assert stub.calls == ["extraction"] * 9 and count_pending(store) == 0
    assert all(graph["pending"] is False and graph["triplets"] == by_llm(doc)
               for doc, graph in zip(documents, stored(store, documents).values()))
    assert guard_of(llm).answering


# the ingest calls no LLM unless asked ---------------------------------------------------------
def test_with_an_openai_key_the_ingest_makes_no_chat_call_unless_llm_extraction_is_asked(make_store, tmp_path, stub, monkeypatch):
    _warm_up(stub)
    stub.up = True
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the default LLM: OpenAI, the real client, on the stub
    monkeypatch.setenv("OPENAI_API_BASE", stub.url)
    saved, Settings._llm = Settings._llm, None
    try:
        documents = raw_documents()[:4] + bernoulli_documents()[:2]  # 4 raw texts, 2 carrying triplets
        index = GraphRAGIndex.from_documents(documents, store=make_store())
        assert isinstance(index.llm, OpenAI) and stub.calls == []  # the free graph
        assert index.store.count()["relations"] > 0
        index.as_retriever().retrieve(EULER_QUESTION)
        assert stub.calls == ["ner", "rerank"]  # the LLM keeps its query-time jobs

        stub.calls.clear()
        store = make_store(uri=str(tmp_path / "extracted.db"))
        GraphRAGIndex.from_documents(documents, store=store, extractor=LLMTripletExtractor())
        assert stub.calls == ["extraction"] * 4  # one per chunk without triplets
    finally:
        Settings._llm = saved
