"""LlamaIndex instrumentation: one span and one event per retrieval step, sync and async."""

from typing import Any, List

import pytest
from llama_index.core.bridge.pydantic import Field
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent, RetrievalStartEvent
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform
from llama_index_graphrag_milvus.events import GraphRAGRerankEvent, GraphRAGStepEvent
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents

from conftest import graph_llm

STEPS = [
    "GraphRAGEntitySearchEvent",
    "GraphRAGRelationSearchEvent",
    "GraphRAGDenseSearchEvent",
    "GraphRAGExpansionEvent",
    "GraphRAGRerankEvent",
    "GraphRAGPassagesEvent",
]
# the span of each step, by method name: the same from `retrieve` and `aretrieve` (each step is written
# once; the sync retrieval runs the async one)
SPANS = ["atrace", "_entity_search", "_relation_search", "_dense_search", "_expand", "_rerank", "_map_passages"]


class Collect(BaseEventHandler):
    events: List[BaseEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Collect"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.events.append(event)


@pytest.fixture
def handlers():
    """An event handler and a span handler on the root dispatcher, removed afterwards."""
    root = get_dispatcher()
    events, spans = Collect(), SimpleSpanHandler()
    root.add_event_handler(events)
    root.add_span_handler(spans)
    try:
        yield events, spans
    finally:
        root.event_handlers.remove(events)
        root.span_handlers.remove(spans)


@pytest.fixture
def store(make_store):
    store = make_store()
    IngestionPipeline(transformations=[GraphRAGTransform(store=store)]).run(documents=bernoulli_documents())
    return store


def steps(collected: Collect) -> List[GraphRAGStepEvent]:
    return [e for e in collected.events if isinstance(e, GraphRAGStepEvent)]


def span_names(spans: SimpleSpanHandler):
    """{span id: method name} of the completed spans, and {span id: parent id}."""
    names = {s.id_: s.id_.rsplit("-", 5)[0].split(".")[-1] for s in spans.completed_spans}
    parents = {s.id_: s.parent_id for s in spans.completed_spans}
    return names, parents


def check_spans(spans: SimpleSpanHandler, events: List[GraphRAGStepEvent], expected: List[str]) -> None:
    names, parents = span_names(spans)
    ours = {i: n for i, n in names.items() if n in expected}
    assert sorted(ours.values()) == sorted(expected)  # one span per step, none dropped
    assert not spans.dropped_spans
    (top,) = [i for i, n in ours.items() if n == expected[0]]
    for span_id, name in ours.items():
        if name != expected[0]:
            assert parents[span_id] == top, name  # every step is a child of trace/atrace
    # each event was sent from inside its step's span, in step order
    assert [names[e.span_id] for e in events] == expected[1:]


def test_one_retrieval_sends_one_event_per_step_in_order(store, handlers):
    collected, spans = handlers
    retriever = GraphRAGRetriever(store=store, similarity_top_k=2)

    nodes = retriever.retrieve(EULER_QUESTION)

    kinds = [type(e) for e in collected.events]
    assert kinds[0] is RetrievalStartEvent and kinds[-1] is RetrievalEndEvent  # ours come in between
    events = steps(collected)
    assert [e.class_name() for e in events] == STEPS
    assert all(e.duration_ms >= 0 and e.query == EULER_QUESTION for e in events)
    entity, relation, dense, expansion, rerank, passages = events
    assert "euler" in entity.mentions and entity.entities and not entity.by_llm
    assert len(relation.relation_ids) == len(relation.scores) == retriever.relation_top_k
    assert dense.passage_ids and expansion.candidates > 0 and expansion.reached > 0
    assert rerank.reranker == "fused" and rerank.thought_process is None
    check_spans(spans, events, SPANS)
    run = retriever.trace(EULER_QUESTION)
    assert rerank.chosen == [str(r) for r in run.chosen] and rerank.chosen
    assert all("—[" in r and "]→" in r for r in rerank.chosen)  # text, not ids
    assert passages.relations == [n.node.metadata["graphrag_relations"] for n in nodes]
    assert len(passages.passage_ids) == len(nodes) == 2


async def test_async_retrieval_with_an_llm_sends_the_same_events(store, handlers):
    collected, spans = handlers
    llm = graph_llm(mentions=["Euler"], chosen=["leonhard Euler studied under Johann Bernoulli", "Daniel Bernoulli son of Johann Bernoulli"])
    retriever = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=2)

    run = await retriever.atrace(EULER_QUESTION)

    events = steps(collected)
    assert [e.class_name() for e in events] == STEPS
    assert all(e.duration_ms >= 0 for e in events)
    assert events[0].mentions == ["Euler"] and events[0].by_llm
    (rerank,) = [e for e in events if isinstance(e, GraphRAGRerankEvent)]
    assert rerank.reranker == "llm" and rerank.thought_process == "follow the chain"
    assert rerank.chosen[:2] == [
        "leonhard Euler —[studied under]→ Johann Bernoulli",
        "Daniel Bernoulli —[son of]→ Johann Bernoulli",
    ]
    assert rerank.chosen == [str(r) for r in run.chosen]
    check_spans(spans, events, SPANS)


def test_events_serialize_with_their_class_name(store, handlers):
    collected, _ = handlers
    GraphRAGRetriever(store=store).trace(EULER_QUESTION)
    dumped = [e.model_dump() for e in steps(collected)]
    assert [d["class_name"] for d in dumped] == STEPS
    assert all(isinstance(d["duration_ms"], float) for d in dumped)
