"""Reranking candidate relations with an LLM (one-shot chain of thought, JSON). Its answer is untrusted:
only ids that were offered are kept, and an unusable answer, or none, chooses nothing."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import List, Optional, Sequence

from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate

from llama_index_graphrag_milvus.llm.guard import ask
from llama_index_graphrag_milvus.llm.parsing import offered_ids, parse_json_object
from llama_index_graphrag_milvus.schema import ScoredRelation


@dataclass
class RerankResult:
    """The chosen relations, best first (none: the LLM chose none), and the model's reasoning."""

    relations: List[ScoredRelation]
    thought_process: Optional[str] = None


def format_candidates(candidates: Sequence[ScoredRelation]) -> str:
    """The candidates as prompt lines `[n] relation text`, numbered from 1."""
    return "\n".join(f"[{n}] {' '.join(c.text.split())}" for n, c in enumerate(candidates, start=1))


def parse_rerank_answer(answer: str, candidates: Sequence[ScoredRelation]) -> RerankResult:
    """Read `{"thought_process": ..., "useful_relationships": ["[n] ...", ...], "ids": [n, ...]}`, where
    either list may be missing. Every offered relation the answer names is kept, in the LLM's order
    (`useful_relationships` first, then `ids`), scored 1 / (1 + rank), even beyond the prompt's `top_n`.
    Raises `ValueError` if neither is a list, or they name none of the offered relations."""
    value = parse_json_object(answer)
    lists = [value[key] for key in ("useful_relationships", "ids") if isinstance(value.get(key), list)]
    if not lists:
        raise ValueError(f"expected 'useful_relationships' or 'ids' to be a list, got {value!r:.200}")
    chosen = offered_ids([item for items in lists for item in items], len(candidates))
    if not chosen:
        raise ValueError("it names none of the offered relationships")
    thought = value.get("thought_process")
    ranked = [replace(candidates[n - 1], score=1.0 / (1 + rank)) for rank, n in enumerate(chosen)]
    return RerankResult(ranked, thought if isinstance(thought, str) else None)


async def llm_rerank(
    llm: LLM, prompt: PromptTemplate, query: str, candidates: Sequence[ScoredRelation], top_n: int
) -> RerankResult:
    """Rerank with the one-shot chain-of-thought prompt; an unusable answer or none chooses nothing."""
    if not candidates:
        return RerankResult([])
    read = functools.partial(parse_rerank_answer, candidates=candidates)
    values = {"query_str": query, "relationships": format_candidates(candidates), "top_n": top_n}
    picked, _ = await ask(llm, "rerank", read, "the ranking without it stands", prompt, **values)
    return picked or RerankResult([])
