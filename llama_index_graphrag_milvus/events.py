"""Instrumentation events of one Graph RAG retrieval, one per step, in this order:

entity search → relation search → dense search → expansion → rerank → passages.

Each is a LlamaIndex `BaseEvent` sent by the `llama_index_graphrag_milvus.retriever` dispatcher from
inside the span of its step, with the step's wall time in `duration_ms`. Attach a handler to see them:

    from llama_index.core.instrumentation import get_dispatcher
    get_dispatcher().add_event_handler(my_handler)   # the root dispatcher sees every event
"""

from __future__ import annotations

from typing import List, Optional

from llama_index.core.instrumentation.events import BaseEvent


class GraphRAGStepEvent(BaseEvent):
    """A step of a Graph RAG retrieval ended.

    Attributes:
        query: The question.
        duration_ms: Wall time of the step, in milliseconds.
    """

    query: str
    duration_ms: float

    @classmethod
    def class_name(cls) -> str:
        return "GraphRAGStepEvent"


class GraphRAGEntitySearchEvent(GraphRAGStepEvent):
    """The entities named in the question (LLM NER or known names) and the entities found for them.

    Attributes:
        mentions: The names taken from the question.
        entities: The seed entities found, as "name (cosine)".
        by_llm: Whether an LLM named the mentions.
    """

    mentions: List[str]
    entities: List[str]
    by_llm: bool

    @classmethod
    def class_name(cls) -> str:
        return "GraphRAGEntitySearchEvent"


class GraphRAGRelationSearchEvent(GraphRAGStepEvent):
    """The relations nearest to the question (seed relations).

    Attributes:
        relation_ids: Their ids, best first (their text is looked up later, for the chosen ones only).
        scores: Their cosine similarity to the question.
    """

    relation_ids: List[int]
    scores: List[float]

    @classmethod
    def class_name(cls) -> str:
        return "GraphRAGRelationSearchEvent"


class GraphRAGDenseSearchEvent(GraphRAGStepEvent):
    """The passages nearest to the question (plain dense retrieval, a seed of the graph ranking).

    Attributes:
        passage_ids: Best first.
        scores: Their cosine similarity to the question.
    """

    passage_ids: List[str]
    scores: List[float]

    @classmethod
    def class_name(cls) -> str:
        return "GraphRAGDenseSearchEvent"


class GraphRAGExpansionEvent(GraphRAGStepEvent):
    """The seeds expanded over the graph into candidate relations.

    Attributes:
        expansion_degree: Degrees of expansion.
        reached: Relations reached by the expansion.
        candidates: Candidates kept (the `max_candidate_relations` most similar to the question).
    """

    expansion_degree: int
    reached: int
    candidates: int

    @classmethod
    def class_name(cls) -> str:
        return "GraphRAGExpansionEvent"


class GraphRAGRerankEvent(GraphRAGStepEvent):
    """The candidates reranked and the passages ordered.

    Attributes:
        reranker: "llm", or the graph ranking used without one ("chain", "ppr", "similarity").
        chosen: The chosen relations, best first, as "subject —[predicate]→ object".
        thought_process: The LLM's reasoning, when an LLM reranked and gave one.
    """

    reranker: str
    chosen: List[str]
    thought_process: Optional[str] = None

    @classmethod
    def class_name(cls) -> str:
        return "GraphRAGRerankEvent"


class GraphRAGPassagesEvent(GraphRAGStepEvent):
    """The top passages fetched and mapped to the relations that chose them.

    Attributes:
        passage_ids: The passages returned, in order (store passage ids).
        relations: For each, the relations that selected it.
    """

    passage_ids: List[str]
    relations: List[List[str]]

    @classmethod
    def class_name(cls) -> str:
        return "GraphRAGPassagesEvent"


__all__ = [
    "GraphRAGDenseSearchEvent",
    "GraphRAGEntitySearchEvent",
    "GraphRAGExpansionEvent",
    "GraphRAGPassagesEvent",
    "GraphRAGRelationSearchEvent",
    "GraphRAGRerankEvent",
    "GraphRAGStepEvent",
]
