"""GraphRAGRetriever: multi-hop retrieval by entity and relation search, graph expansion and rerank."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_graphrag_milvus.graph import expand_from_entities, expand_from_relations
from llama_index_graphrag_milvus.parsing import parse_json_object, string_list
from llama_index_graphrag_milvus.prompts import NER_PROMPT, RERANK_PROMPT
from llama_index_graphrag_milvus.rerank import RerankResult, allm_rerank, by_similarity, llm_rerank
from llama_index_graphrag_milvus.schema import ScoredRelation
from llama_index_graphrag_milvus.store import MilvusGraphStore

logger = logging.getLogger(__name__)

#: Metadata key of a returned passage: the relations that selected it, as printable strings.
RELATIONS_KEY = "graphrag_relations"


@dataclass
class Retrieval:
    """What one retrieval did, step by step."""

    query: str
    mentions: List[str] = field(default_factory=list)
    seed_entities: List[tuple] = field(default_factory=list)  # (entity id, name, cosine)
    seed_relations: List[ScoredRelation] = field(default_factory=list)
    candidates: List[ScoredRelation] = field(default_factory=list)
    chosen: List[ScoredRelation] = field(default_factory=list)
    thought_process: Optional[str] = None
    nodes: List[NodeWithScore] = field(default_factory=list)


class GraphRAGRetriever(BaseRetriever):
    """Graph RAG over a `MilvusGraphStore`, as a drop-in LlamaIndex retriever.

    1. Entities named in the question: with `llm`, a NER prompt answering JSON; without, the known entity
       names that occur in the question.
    2. Entity vector search (`entity_top_k` per mention) and relation vector search on the whole
       question (`relation_top_k`).
    3. Expansion of both seed sets by `expansion_degree` over the adjacency, keeping the
       `max_candidate_relations` candidates most similar to the question.
    4. Rerank: with `llm`, the one-shot chain-of-thought prompt; without, similarity order.
    5. The passages behind the top `rerank_top_n` relations, in relation order, deduplicated, cut to
       `similarity_top_k`; each carries the relations that selected it in `metadata["graphrag_relations"]`.
       If the relations lead to fewer passages, the most similar passages fill the rest.

    Args:
        store: The store ingested by `GraphRAGTransform`.
        llm: For NER and rerank. None (the default) retrieves with no LLM call at all.
        similarity_top_k: Passages returned.
        entity_top_k: Entities found per mention.
        relation_top_k: Relations found for the question.
        expansion_degree: Degrees of expansion (1 or 2 is enough).
        max_candidate_relations: Cap on the candidates, by similarity to the question.
        rerank_top_n: Relations kept after rerank.
        ner_prompt, rerank_prompt: Replace the prompts (also with `update_prompts`).
    """

    def __init__(
        self,
        store: MilvusGraphStore,
        llm: Optional[LLM] = None,
        similarity_top_k: int = 2,
        entity_top_k: int = 3,
        relation_top_k: int = 3,
        expansion_degree: int = 1,
        max_candidate_relations: int = 100,
        rerank_top_n: int = 3,
        ner_prompt: Optional[PromptTemplate] = None,
        rerank_prompt: Optional[PromptTemplate] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        if expansion_degree < 0:
            raise ValueError(f"expansion_degree must be 0 or more, got {expansion_degree}")
        for name, value in (
            ("similarity_top_k", similarity_top_k),
            ("entity_top_k", entity_top_k),
            ("relation_top_k", relation_top_k),
            ("max_candidate_relations", max_candidate_relations),
            ("rerank_top_n", rerank_top_n),
        ):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        self.store = store
        self.llm = llm
        self.similarity_top_k = similarity_top_k
        self.entity_top_k = entity_top_k
        self.relation_top_k = relation_top_k
        self.expansion_degree = expansion_degree
        self.max_candidate_relations = max_candidate_relations
        self.rerank_top_n = rerank_top_n
        self.ner_prompt = ner_prompt or NER_PROMPT
        self.rerank_prompt = rerank_prompt or RERANK_PROMPT
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    # prompts ------------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {"ner_prompt": self.ner_prompt, "rerank_prompt": self.rerank_prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "ner_prompt" in prompts:
            self.ner_prompt = prompts["ner_prompt"]
        if "rerank_prompt" in prompts:
            self.rerank_prompt = prompts["rerank_prompt"]

    # retrieval ----------------------------------------------------------------------------------
    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return self.trace(query_bundle).nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return (await self.atrace(query_bundle)).nodes

    def trace(self, query: QueryBundle | str) -> Retrieval:
        """Retrieve, and return every step: mentions, seeds, candidates, chosen relations, passages."""
        bundle = QueryBundle(query) if isinstance(query, str) else query
        embed = self.store.embed_model
        run = Retrieval(query=bundle.query_str)
        run.mentions = self._mentions_from_llm(bundle.query_str) if self.llm else self._matched(bundle)
        vector = bundle.embedding or embed.get_query_embedding(bundle.query_str)
        mention_vectors = embed.get_text_embedding_batch(run.mentions) if run.mentions else []
        self._candidates(run, vector, mention_vectors)
        if self.llm is not None:
            ranked = llm_rerank(self.llm, self.rerank_prompt, run.query, run.candidates, self.rerank_top_n)
        else:
            ranked = by_similarity(run.candidates, self.rerank_top_n)
        self._passages(run, ranked, vector)
        return run

    async def atrace(self, query: QueryBundle | str) -> Retrieval:
        """Async `trace`: LLM and embedding calls are awaited, Milvus calls run off the event loop."""
        bundle = QueryBundle(query) if isinstance(query, str) else query
        embed = self.store.embed_model
        run = Retrieval(query=bundle.query_str)
        run.mentions = await self._amentions_from_llm(bundle.query_str) if self.llm else self._matched(bundle)
        vector = bundle.embedding or await embed.aget_query_embedding(bundle.query_str)
        mention_vectors = await embed.aget_text_embedding_batch(run.mentions) if run.mentions else []
        await asyncio.to_thread(self._candidates, run, vector, mention_vectors)
        if self.llm is not None:
            ranked = await allm_rerank(
                self.llm, self.rerank_prompt, run.query, run.candidates, self.rerank_top_n
            )
        else:
            ranked = by_similarity(run.candidates, self.rerank_top_n)
        await asyncio.to_thread(self._passages, run, ranked, vector)
        return run

    # steps --------------------------------------------------------------------------------------
    def _matched(self, bundle: QueryBundle) -> List[str]:
        return self.store.match_entities(bundle.query_str)

    def _mentions_from_llm(self, query: str) -> List[str]:
        answer: Any = None
        try:
            answer = self.llm.predict(self.ner_prompt, query_str=query)  # type: ignore[union-attr]
            return _read_mentions(answer)
        except Exception as exc:
            return self._ner_fallback(query, exc, answer)

    async def _amentions_from_llm(self, query: str) -> List[str]:
        answer: Any = None
        try:
            answer = await self.llm.apredict(self.ner_prompt, query_str=query)  # type: ignore[union-attr]
            return _read_mentions(answer)
        except Exception as exc:
            return self._ner_fallback(query, exc, answer)

    def _ner_fallback(self, query: str, exc: Exception, answer: Any) -> List[str]:
        logger.warning("LLM NER unusable (%s); matching known entity names instead. Answer: %.300r", exc, answer)
        return self.store.match_entities(query)

    def _candidates(self, run: Retrieval, vector: List[float], mention_vectors: List[List[float]]) -> None:
        store, cache = self.store, self.store.cache
        graph = store.graph
        for hits in store.search_entities(mention_vectors, self.entity_top_k):
            run.seed_entities.extend(hits)
        run.seed_relations = store.search_relations(vector, self.relation_top_k)
        entities = [cache.entities.position[e] for e, _, _ in run.seed_entities if cache.has_entity(e)]
        relations = [cache.relations.position[r.id] for r in run.seed_relations if cache.has_relation(r.id)]
        reached = np.union1d(
            expand_from_entities(graph, entities, self.expansion_degree),
            expand_from_relations(graph, relations, self.expansion_degree),
        )
        ids = [cache.relations.ids[p] for p in reached.tolist()]
        run.candidates = store.search_relations(vector, self.max_candidate_relations, among=ids)

    def _passages(self, run: Retrieval, ranked: RerankResult, vector: List[float]) -> None:
        run.chosen, run.thought_process = ranked.relations, ranked.thought_process
        order: Dict[str, List[ScoredRelation]] = {}
        for relation in run.chosen:
            for pid in relation.passage_ids:
                order.setdefault(pid, []).append(relation)
        pids = list(order)[: self.similarity_top_k]
        nodes = self.store.get_passages(pids)
        for pid in pids:
            if pid not in nodes:  # deleted since the adjacency was read
                continue
            node, relations = nodes[pid], order[pid]
            node.metadata[RELATIONS_KEY] = [str(r) for r in relations]
            for excluded in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
                if RELATIONS_KEY not in excluded:
                    excluded.append(RELATIONS_KEY)
            run.nodes.append(NodeWithScore(node=node, score=relations[0].score))
        if len(run.nodes) < self.similarity_top_k:
            have = {n.node.node_id for n in run.nodes}
            for hit in self.store.search_passages(vector, self.similarity_top_k + len(have)):
                if hit.node.node_id not in have and len(run.nodes) < self.similarity_top_k:
                    hit.node.metadata[RELATIONS_KEY] = []
                    run.nodes.append(hit)


def _read_mentions(answer: str) -> List[str]:
    mentions = string_list(parse_json_object(answer), "named_entities")
    return list(dict.fromkeys(m.strip() for m in mentions if m.strip()))[:20]
