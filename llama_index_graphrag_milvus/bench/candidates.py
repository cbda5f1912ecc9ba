"""Candidate recall: whether the relations the retriever offers the LLM hold the gold relations, and what
the rerank prompt costs, measured with no LLM (a scripted one records the prompt and never answers, so the
ranking is exactly the one without an LLM)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Set

import numpy as np
from llama_index.core.llms import CompletionResponse
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import QueryBundle

from llama_index_graphrag_milvus.bench.evaluation import Dataset
from llama_index_graphrag_milvus.bench.scripted import (
    ScriptedLLM, gold_relations, normalized, read_rerank_prompt, stored_ids,
)
from llama_index_graphrag_milvus.bench.tokens import request_tokens


class RecordingLLM(ScriptedLLM):
    """Records every prompt and never answers a rerank prompt usably (its ranking is the no-LLM one)."""

    choose: Any = lambda question, offered: None
    prompts: List[str] = []

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return super().complete(prompt, formatted, **kwargs)


def candidate_recall(
    store: Any, dataset: Dataset, vectors: Sequence[List[float]], **retriever_kwargs: Any
) -> Dict[str, Any]:
    """Per question, with the retriever's defaults (or `retriever_kwargs`): whether a gold relation
    (`bench.scripted.gold_relations`) is among the relations offered to the LLM, the share of the gold
    passages with one offered, the gold relations offered, the lines offered and the rerank prompt's
    input tokens (`bench.tokens`); and the share of the gold passages with a gold relation among all the
    candidates (what any offer could hold). Returns the means and the per-question figures."""
    from llama_index_graphrag_milvus import GraphRAGRetriever

    recorder = RecordingLLM(prompts=[])
    retriever = GraphRAGRetriever(store=store, **{"similarity_top_k": 10, **retriever_kwargs, "llm": recorder})
    gold, stored = gold_relations(store, dataset), stored_ids(dataset)
    texts = store.describe(sorted({r for relations in gold.values() for r in relations}))
    rows = []
    for question, vector in zip(dataset.questions, vectors):
        recorder.prompts.clear()
        run = retriever.trace(QueryBundle(query_str=question["question"], embedding=vector))
        rerank = [p for p in recorder.prompts if '"useful_relationships"' in p]
        passages = [stored[g] for g in question["gold_ids"] if g in stored]
        rows.append(_row(gold[question["question"]], passages, texts, rerank[-1] if rerank else None, run.candidates))
    return {**_means(rows), "per_question": rows}


def _row(
    gold: Dict[int, List[str]], passages: List[str], texts: Dict[int, Any], prompt: Optional[str], candidates: Sequence[Any]
) -> Dict[str, Any]:
    """One question's figures; the gold relations offered are read back from the prompt's lines by their text."""
    lines = read_rerank_prompt(prompt)[1] if prompt else []
    shown = {normalized(text) for _, text in lines}
    offered = {r for r in gold if r in texts and normalized(texts[r].text) in shown}
    among = {c.id for c in candidates} & set(gold)

    def covered(relations: Set[int]) -> float:
        return float(np.mean([any(p in gold[r] for r in relations) for p in passages])) if passages else 0.0

    return {
        "any_gold_offered": bool(offered), "gold_passages_offered": covered(offered),
        "gold_relations_offered": len(offered), "offered": len(lines),
        "prompt_tokens": request_tokens([("user", prompt)]) if prompt else 0,
        "gold_passages_among_candidates": covered(among),
    }


def _means(rows: List[Dict[str, Any]]) -> Dict[str, float]:
    keys = rows[0] if rows else {}
    return {key: round(float(np.mean([row[key] for row in rows])), 4) for key in keys}
