"""Reranking candidate relations: with an LLM (one-shot chain of thought, JSON) or by similarity.

LLM output is untrusted: it is parsed strictly, only ids that were offered are kept, and an unusable
answer chooses nothing (`by_llm` False), with a warning: the ranking without the LLM then stands.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import List, Optional, Sequence

from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate

from llama_index_graphrag_milvus.parsing import offered_ids, parse_json_object, string_list
from llama_index_graphrag_milvus.schema import ScoredRelation

logger = logging.getLogger(__name__)


@dataclass
class RerankResult:
    """The chosen relations, best first, and the model's reasoning when an LLM chose them."""

    relations: List[ScoredRelation]
    thought_process: Optional[str] = None
    by_llm: bool = False


def format_candidates(candidates: Sequence[ScoredRelation]) -> str:
    """The candidates as prompt lines `[n] relation text`, numbered from 1."""
    return "\n".join(f"[{n}] {' '.join(c.text.split())}" for n, c in enumerate(candidates, start=1))


def by_similarity(candidates: Sequence[ScoredRelation], top_n: int) -> RerankResult:
    """The `top_n` candidates by cosine similarity to the question."""
    return RerankResult(sorted(candidates, key=lambda c: -c.score)[:top_n])


def parse_rerank_answer(answer: str, candidates: Sequence[ScoredRelation], top_n: int) -> RerankResult:
    """Read `{"thought_process": ..., "useful_relationships": ["[n] ...", ...]}`. Raises `ValueError`
    if it is not that, or names none of the offered relations."""
    value = parse_json_object(answer)
    chosen = offered_ids(string_list(value, "useful_relationships"), len(candidates))
    if not chosen:
        raise ValueError("it names none of the offered relationships")
    thought = value.get("thought_process")
    relations = [candidates[n - 1] for n in chosen]
    # keep the LLM's choice first; fill up to top_n with the next most similar candidates
    chosen_ids = {r.id for r in relations}
    relations += [c for c in by_similarity(candidates, len(candidates)).relations if c.id not in chosen_ids]
    ranked = [replace(relation, score=1.0 / (1 + rank)) for rank, relation in enumerate(relations[:top_n])]
    return RerankResult(ranked, thought if isinstance(thought, str) else None, by_llm=True)


def _fallback(exc: Exception, answer: object, candidates: Sequence[ScoredRelation], top_n: int) -> RerankResult:
    logger.warning("LLM rerank unusable (%s); the ranking without it stands. Answer: %.300r", exc, answer)
    return RerankResult([])


def llm_rerank(
    llm: LLM, prompt: PromptTemplate, query: str, candidates: Sequence[ScoredRelation], top_n: int
) -> RerankResult:
    """Rerank with the one-shot chain-of-thought prompt."""
    if not candidates:
        return RerankResult([])
    answer: object = None
    try:
        answer = llm.predict(prompt, query_str=query, relationships=format_candidates(candidates), top_n=top_n)
        return parse_rerank_answer(answer, candidates, top_n)  # type: ignore[arg-type]
    except Exception as exc:  # a failing or garbled LLM must not fail retrieval
        return _fallback(exc, answer, candidates, top_n)


async def allm_rerank(
    llm: LLM, prompt: PromptTemplate, query: str, candidates: Sequence[ScoredRelation], top_n: int
) -> RerankResult:
    """Async `llm_rerank`."""
    if not candidates:
        return RerankResult([])
    answer: object = None
    try:
        answer = await llm.apredict(
            prompt, query_str=query, relationships=format_candidates(candidates), top_n=top_n
        )
        return parse_rerank_answer(answer, candidates, top_n)  # type: ignore[arg-type]
    except Exception as exc:
        return _fallback(exc, answer, candidates, top_n)
