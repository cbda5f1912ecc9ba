"""GraphRAGRetriever: multi-hop retrieval by entity and relation search, graph expansion and rerank."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_graphrag_milvus.events import (
    GraphRAGDenseSearchEvent,
    GraphRAGEntitySearchEvent,
    GraphRAGExpansionEvent,
    GraphRAGPassagesEvent,
    GraphRAGRelationSearchEvent,
    GraphRAGRerankEvent,
)
from llama_index_graphrag_milvus.graph import (
    Graph,
    chain_scores,
    expand_from_entities,
    expand_from_relations,
    local_subgraph,
    neighbours,
    passage_scores,
    personalized_pagerank,
    specificity,
    union,
    unique,
)
from llama_index_graphrag_milvus.parsing import parse_json_object, string_list
from llama_index_graphrag_milvus.prompts import NER_PROMPT, RERANK_PROMPT
from llama_index_graphrag_milvus.remote import MilvusExpander
from llama_index_graphrag_milvus.rerank import RerankResult, allm_rerank, by_similarity, llm_rerank
from llama_index_graphrag_milvus.schema import ScoredRelation
from llama_index_graphrag_milvus.store import MilvusGraphStore

if TYPE_CHECKING:
    from llama_index_graphrag_milvus.explain import Explanation

logger = logging.getLogger(__name__)
#: Spans (one per step) and `events` of every retrieval go through this LlamaIndex dispatcher.
dispatcher = get_dispatcher(__name__)

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
    dense: List[tuple] = field(default_factory=list)  # (passage id, cosine), dense retrieval's order
    thought_process: Optional[str] = None
    nodes: List[NodeWithScore] = field(default_factory=list)
    reranker: Optional[str] = None  # "llm", or the graph ranking used: "chain", "ppr", "similarity"
    # the adjacency the ranking reads: the store's, or (adjacency="milvus") the neighbourhood loaded
    cache: Any = field(default=None, repr=False)


class GraphRAGRetriever(BaseRetriever):
    """Graph RAG over a `MilvusGraphStore`, as a drop-in LlamaIndex retriever.

    1. Entities named in the question: with `llm`, a NER prompt answering JSON; without, the known entity
       names that occur in the question.
    2. Entity vector search (`entity_top_k` per mention), relation vector search on the whole question
       (`relation_top_k`) and dense passage search.
    3. Expansion of the seeds by `expansion_degree` over the adjacency (plus the relations of the top
       `dense_seed_k` passages and of the synonyms of the entities reached), keeping the
       `max_candidate_relations` candidates most similar to the question.
    4. Rerank. With `llm`: the one-shot chain-of-thought prompt picks `rerank_top_n` relations, and
       their passages come first, in relation order. Without: `reranker` ranks passages from the graph:
       - "chain" (default): each candidate relation scores its similarity plus that of its best
         neighbour (sharing an entity or a synonym), so two-step chains count; a passage scores its
         dense similarity plus `graph_weight` times its best relation's chain score;
       - "ppr": personalized PageRank on the candidates' entity–relation–passage subgraph, seeded by the
         question's entities (weighted by specificity), its top relations and its top passages, then
         rank-fused with dense retrieval;
       - "similarity": the notebook's order, the passages of the most similar relations first.
    5. The top `similarity_top_k` passages as the ingested nodes, each with the relations that selected
       it in `metadata["graphrag_relations"]`.

    Args:
        store: The store ingested by `GraphRAGTransform`.
        llm: For NER and rerank. None (the default) retrieves with no LLM call at all.
        similarity_top_k: Passages returned.
        entity_top_k: Entities found per mention.
        relation_top_k: Relations found for the question.
        expansion_degree: Degrees of expansion (1 or 2 is enough).
        max_candidate_relations: Cap on the candidates, by similarity to the question.
        rerank_top_n: Relations the LLM keeps; relations listed as the chain followed.
        reranker: The no-LLM ranking: "chain", "ppr" or "similarity".
        dense_seed_k: Top dense passages whose relations join the candidates.
        graph_weight: Weight of the chain score against dense similarity ("chain").
        hub_fraction: Entities stated in more than this fraction of the passages (and in more than 20)
            are hubs: they do not chain relations ("chain").
        use_synonyms: Follow the store's synonym links between entities (expansion and "chain").
        ner_prompt, rerank_prompt: Replace the prompts (also with `update_prompts`).
    """

    def __init__(
        self,
        store: MilvusGraphStore,
        llm: Optional[LLM] = None,
        similarity_top_k: int = 2,
        entity_top_k: int = 3,
        relation_top_k: int = 5,
        expansion_degree: int = 1,
        max_candidate_relations: int = 300,
        rerank_top_n: int = 3,
        reranker: str = "chain",
        dense_seed_k: int = 5,
        graph_weight: float = 0.3,
        hub_fraction: float = 0.02,
        use_synonyms: bool = True,
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
        if reranker not in RERANKERS:
            raise ValueError(f"reranker must be one of {', '.join(RERANKERS)}; got {reranker!r}")
        self.store = store
        self.llm = llm
        self.similarity_top_k = similarity_top_k
        self.entity_top_k = entity_top_k
        self.relation_top_k = relation_top_k
        self.expansion_degree = expansion_degree
        self.max_candidate_relations = max_candidate_relations
        self.rerank_top_n = rerank_top_n
        self.reranker = reranker
        self.dense_seed_k = dense_seed_k
        self.graph_weight = graph_weight
        self.hub_fraction = hub_fraction
        self.use_synonyms = use_synonyms
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

    @dispatcher.span
    def trace(self, query: QueryBundle | str) -> Retrieval:
        """Retrieve, and return every step: mentions, seeds, candidates, chosen relations, passages."""
        bundle = QueryBundle(query) if isinstance(query, str) else query
        run = Retrieval(query=bundle.query_str)
        self._entity_search(run)
        vector = bundle.embedding or self.store.embed_model.get_query_embedding(bundle.query_str)
        self._gather(run, vector)
        self._map_passages(run, *self._rerank(run, vector))
        return run

    @dispatcher.span
    async def atrace(self, query: QueryBundle | str) -> Retrieval:
        """Async `trace`: LLM and embedding calls are awaited, Milvus calls run off the event loop."""
        bundle = QueryBundle(query) if isinstance(query, str) else query
        run = Retrieval(query=bundle.query_str)
        await self._aentity_search(run)
        vector = bundle.embedding or await self.store.embed_model.aget_query_embedding(bundle.query_str)
        await asyncio.to_thread(self._gather, run, vector)
        ranked = await self._arerank(run, vector)
        await asyncio.to_thread(self._map_passages, run, *ranked)
        return run

    def explain(self, query: QueryBundle | str) -> "Explanation":
        """Retrieve, and return an `Explanation`: seeds, candidates, chosen relations and passages, printable
        and drawable (`.to_png(path)`, inline in a notebook)."""
        from llama_index_graphrag_milvus.explain import Explanation

        return Explanation.from_retrieval(self.trace(query), self.store)

    async def aexplain(self, query: QueryBundle | str) -> "Explanation":
        """Async `explain`."""
        from llama_index_graphrag_milvus.explain import Explanation

        run = await self.atrace(query)
        return await asyncio.to_thread(Explanation.from_retrieval, run, self.store)

    # steps --------------------------------------------------------------------------------------
    @dispatcher.span
    def _entity_search(self, run: Retrieval) -> None:
        """The entities the question names (LLM NER or known names), and the nearest entities to each."""
        start = time.perf_counter()
        run.mentions = self._mentions_from_llm(run.query) if self.llm else self.store.match_entities(run.query)
        vectors = self.store.embed_model.get_text_embedding_batch(run.mentions) if run.mentions else []
        self._search_entities(run, vectors)
        self._entities_found(run, start)

    @dispatcher.span
    async def _aentity_search(self, run: Retrieval) -> None:
        start = time.perf_counter()
        if self.llm:
            run.mentions = await self._amentions_from_llm(run.query)
        else:
            run.mentions = self.store.match_entities(run.query)
        vectors = await self.store.embed_model.aget_text_embedding_batch(run.mentions) if run.mentions else []
        await asyncio.to_thread(self._search_entities, run, vectors)
        self._entities_found(run, start)

    def _search_entities(self, run: Retrieval, mention_vectors: List[List[float]]) -> None:
        for hits in self.store.search_entities(mention_vectors, self.entity_top_k):
            run.seed_entities.extend(hits)

    def _entities_found(self, run: Retrieval, start: float) -> None:
        dispatcher.event(
            GraphRAGEntitySearchEvent(
                query=run.query,
                duration_ms=_ms(start),
                mentions=list(run.mentions),
                entities=[f"{name} ({score:.3f})" for _, name, score in run.seed_entities],
                by_llm=self.llm is not None,
            )
        )

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

    def _gather(self, run: Retrieval, vector: List[float]) -> None:
        """Seed relations, dense passages and the candidate relations, with their similarity to the question."""
        self._relation_search(run, vector)
        self._dense_search(run, vector)
        self._expand(run, vector)

    @dispatcher.span
    def _relation_search(self, run: Retrieval, vector: List[float]) -> None:
        start = time.perf_counter()
        run.seed_relations = self.store.search_relations(vector, self.relation_top_k, with_text=False)
        dispatcher.event(
            GraphRAGRelationSearchEvent(
                query=run.query,
                duration_ms=_ms(start),
                relation_ids=[r.id for r in run.seed_relations],
                scores=[r.score for r in run.seed_relations],
            )
        )

    @dispatcher.span
    def _dense_search(self, run: Retrieval, vector: List[float]) -> None:
        start = time.perf_counter()
        run.dense = self.store.search_passage_ids(vector, max(self.similarity_top_k, self.dense_seed_k))
        dispatcher.event(
            GraphRAGDenseSearchEvent(
                query=run.query,
                duration_ms=_ms(start),
                passage_ids=[p for p, _ in run.dense],
                scores=[score for _, score in run.dense],
            )
        )

    @dispatcher.span
    def _expand(self, run: Retrieval, vector: List[float]) -> None:
        """Expand the seeds over the graph; keep the candidates most similar to the question."""
        start = time.perf_counter()
        if self.store.adjacency == "milvus":
            touched = self._expand_in_milvus(run, vector)
        else:
            touched = self._expand_in_memory(run, vector)
        dispatcher.event(
            GraphRAGExpansionEvent(
                query=run.query,
                duration_ms=_ms(start),
                expansion_degree=self.expansion_degree,
                reached=touched,
                candidates=len(run.candidates),
            )
        )

    def _expand_in_milvus(self, run: Retrieval, vector: List[float]) -> int:
        """The same walk by batched Milvus queries; then the candidates' neighbourhood is loaded (their
        entities, passages and synonym links) for the ranking. Synonyms link candidates but add none."""
        store = self.store
        expander = MilvusExpander(store.client, store.relations_collection)
        reached = expander.from_entities([e for e, _, _ in run.seed_entities], self.expansion_degree)
        reached |= expander.from_relations([r.id for r in run.seed_relations], self.expansion_degree)
        touched = len(reached)
        if self.llm is None and self.reranker != "similarity":
            capped = store.search_relations(vector, self.max_candidate_relations, among=sorted(reached), with_text=False)
            reached = {r.id for r in capped} | set(store.relations_of_passages([p for p, _ in run.dense[: self.dense_seed_k]]))
        run.candidates = store.search_relations(
            vector, self.max_candidate_relations, among=sorted(reached), with_text=self.llm is not None
        )
        run.cache = store.neighbourhood(relation_ids=[r.id for r in run.candidates], with_entity_relations=False)
        for relation in run.candidates:
            relation.passage_ids = run.cache.passages_of_relation(relation.id)
        return touched

    def _expand_in_memory(self, run: Retrieval, vector: List[float]) -> int:
        store, cache = self.store, self.store.cache
        graph = store.graph
        entities = _positions(cache.entities.position, [e for e, _, _ in run.seed_entities])
        relations = _positions(cache.relations.position, [r.id for r in run.seed_relations])
        through = graph.passage_counts <= self._hub_passages(graph)  # a walk does not continue through hubs
        reached = union(
            expand_from_entities(graph, entities, self.expansion_degree, through),
            expand_from_relations(graph, relations, self.expansion_degree, through),
        )
        touched = len(reached)
        with_text = self.llm is not None
        cap = self.max_candidate_relations
        if self.llm is None and self.reranker != "similarity":
            # the capped candidates, the relations of the top dense passages, and the best relations of
            # the synonyms of their entities: every step is cut by similarity, so a hub costs one pass
            ranked, _ = store.rank_positions(vector, reached, cap)
            top_passages = _positions(cache.passages.position, [p for p, _ in run.dense[: self.dense_seed_k]])
            from_passages = graph.relations_of_passages(top_passages)
            reached = union(ranked, from_passages)
            if self.use_synonyms:  # from the entities of the best candidates only
                sources = union(ranked[:_SYNONYM_SOURCES], from_passages)
                synonyms = unique(neighbours(graph.entity_entity, graph.entities_of_relations(sources)))
                synonyms = synonyms[through[synonyms]]
                extra = graph.relations_of_entities(synonyms)
                touched += len(extra)
                extra, _ = store.rank_positions(vector, extra, cap)
                reached = union(reached, extra)
        run.candidates = store.rank_relations(vector, reached, cap, with_text=with_text)
        return touched

    @dispatcher.span
    def _rerank(self, run: Retrieval, vector: List[float]) -> "_Ranked":
        """Rerank the candidates (LLM or graph) and order the passages."""
        start = time.perf_counter()
        picked = None
        if self.llm is not None:
            picked = llm_rerank(self.llm, self.rerank_prompt, run.query, run.candidates, self.rerank_top_n)
        ranked = self._rank(run, vector, picked)
        self._reranked(run, start)
        return ranked

    @dispatcher.span
    async def _arerank(self, run: Retrieval, vector: List[float]) -> "_Ranked":
        start = time.perf_counter()
        picked = None
        if self.llm is not None:
            picked = await allm_rerank(self.llm, self.rerank_prompt, run.query, run.candidates, self.rerank_top_n)
        ranked = await asyncio.to_thread(self._rank, run, vector, picked)
        self._reranked(run, start)
        return ranked

    def _reranked(self, run: Retrieval, start: float) -> None:
        dispatcher.event(
            GraphRAGRerankEvent(
                query=run.query,
                duration_ms=_ms(start),
                reranker=run.reranker or "",
                chosen=[str(r) for r in run.chosen],
                thought_process=run.thought_process,
            )
        )

    def _rank(self, run: Retrieval, vector: List[float], picked: Optional[RerankResult]) -> "_Ranked":
        """Order the passages: the top `similarity_top_k` passage ids, their scores and their relations
        (described: seeds, chosen and those behind the top passages)."""
        scored: Dict[str, float] = {}
        why: Dict[str, List[ScoredRelation]] = {}
        if picked is not None:  # the LLM's relations first, in its order
            run.chosen, run.thought_process = picked.relations, picked.thought_process
            run.reranker = "llm" if picked.by_llm else "similarity"  # "similarity": the LLM's answer was unusable
            for relation in picked.relations:
                for pid in relation.passage_ids:
                    why.setdefault(pid, []).append(relation)
                    scored.setdefault(pid, relation.score)
        if self.reranker == "chain" and self.llm is None:
            ranking, chains = self._chain_ranking(run, vector)
        elif self.reranker == "ppr" and self.llm is None:
            ranking, chains = self._ppr_ranking(run, vector)
        else:
            ranking, chains = self._similarity_ranking(run)
        if picked is None:
            run.reranker = self.reranker
            run.chosen = _unique_relations(chains, ranking, self.rerank_top_n)
        for pid, score in ranking:
            if len(scored) >= self.similarity_top_k:
                break
            if pid not in scored:
                scored[pid] = score
                why[pid] = chains.get(pid, [])
        pids = list(scored)[: self.similarity_top_k]
        shown = {r.id: r for r in [*run.seed_relations, *run.chosen, *(r for p in pids for r in why.get(p, []))]}
        self.store.describe(list(shown.values()))
        return pids, scored, why

    @dispatcher.span
    def _map_passages(
        self, run: Retrieval, pids: List[str], scored: Dict[str, float], why: Dict[str, List[ScoredRelation]]
    ) -> None:
        """Fetch the top passages as the ingested nodes and attach the relations that selected each."""
        start = time.perf_counter()
        nodes = self.store.get_passages(pids)
        mapped = []
        for pid in pids:
            if pid not in nodes:  # deleted since the adjacency was read
                continue
            node = nodes[pid]
            node.metadata[RELATIONS_KEY] = [str(r) for r in why.get(pid, [])]
            for excluded in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
                if RELATIONS_KEY not in excluded:
                    excluded.append(RELATIONS_KEY)
            run.nodes.append(NodeWithScore(node=node, score=scored[pid]))
            mapped.append(pid)
        dispatcher.event(
            GraphRAGPassagesEvent(
                query=run.query,
                duration_ms=_ms(start),
                passage_ids=mapped,
                relations=[[str(r) for r in why.get(pid, [])] for pid in mapped],
            )
        )

    def _similarity_ranking(self, run: Retrieval):
        """The notebook's order: passages of the most similar relations, then dense passages."""
        ranking: List = []
        chains: Dict[str, List[ScoredRelation]] = {}
        for relation in by_similarity(run.candidates, self.rerank_top_n).relations:
            for pid in relation.passage_ids:
                if pid not in chains:
                    ranking.append((pid, relation.score))
                chains.setdefault(pid, []).append(relation)
        ranking += [(pid, score) for pid, score in run.dense if pid not in chains]
        return ranking, chains

    def _hub_passages(self, graph: Graph) -> float:
        """Entities stated in more passages than this are hubs."""
        return max(20.0, self.hub_fraction * graph.shape[2])

    def _chain_ranking(self, run: Retrieval, vector: List[float]):
        """Dense similarity plus `graph_weight` times the best two-step chain through the passage."""
        cache = run.cache or self.store.cache
        graph = cache.snapshot()
        candidates, positions = _located(run.candidates, cache)
        similarities = np.array([c.score for c in candidates])
        chain, best = chain_scores(graph, positions, similarities, self._hub_passages(graph), synonyms=self.use_synonyms)
        passages, scores, via = passage_scores(graph, positions, chain)
        pids = cache.passage_ids(passages)
        dense = dict(run.dense)
        dense.update(self.store.passage_similarities(vector, [p for p in pids if p not in dense]))
        total = {pid: dense.get(pid, 0.0) for pid, _ in run.dense}
        chains: Dict[str, List[ScoredRelation]] = {}
        for pid, score, i in zip(pids, scores.tolist(), via.tolist()):
            total[pid] = dense.get(pid, 0.0) + self.graph_weight * score
            chains[pid] = [candidates[best[i]], candidates[i]] if best[i] >= 0 else [candidates[i]]
        ranking = sorted(total.items(), key=lambda kv: -kv[1])
        return ranking, chains

    def _ppr_ranking(self, run: Retrieval, vector: List[float]):
        """Personalized PageRank on the candidates' subgraph, rank-fused with dense retrieval."""
        cache = run.cache or self.store.cache
        graph = cache.snapshot()
        candidates, positions = _located(run.candidates, cache)
        weights = np.clip([c.score for c in candidates], 1e-3, None) if candidates else np.zeros(0)
        top = _positions(cache.passages.position, [p for p, _ in run.dense[: self.dense_seed_k]])
        sub = local_subgraph(graph, positions, weights, top)
        ents, rels, pas = sub.slices()
        restart = np.zeros(sub.adjacency.shape[0])
        index = {e: i for i, e in enumerate(sub.entities.tolist())}
        weight = specificity(graph, sub.entities)
        for eid, _, sim in run.seed_entities:
            i = index.get(cache.entities.position.get(eid, -1))
            if i is not None:
                restart[i] += max(sim, 0.0) * weight[i]
        local = {r: i for i, r in enumerate(sub.relations.tolist())}
        for relation in run.seed_relations:
            i = local.get(cache.relations.position.get(relation.id, -1))
            if i is not None:
                restart[rels.start + i] += max(relation.score, 0.0)
        where = {p: i for i, p in enumerate(sub.passages.tolist())}
        for pid, sim in run.dense[: self.dense_seed_k]:
            i = where.get(cache.passages.position.get(pid, -1))
            if i is not None:
                restart[pas.start + i] += max(sim, 0.0)
        rank = personalized_pagerank(sub.adjacency, restart)[pas]
        order = [int(i) for i in np.argsort(-rank) if rank[i] > 0]
        graph_pids = [cache.passages.ids[int(sub.passages[i])] for i in order]
        fused: Dict[str, float] = {}
        for ranked in (graph_pids, [pid for pid, _ in run.dense]):
            for r, pid in enumerate(ranked):
                fused[pid] = fused.get(pid, 0.0) + 1.0 / (60 + r + 1)
        chains: Dict[str, List[ScoredRelation]] = {}
        for c in sorted(candidates, key=lambda c: -c.score):
            for pid in c.passage_ids:
                chains.setdefault(pid, [c])
        return sorted(fused.items(), key=lambda kv: -kv[1]), chains


_SYNONYM_SOURCES = 50  # candidates (best first) whose entities' synonyms add relations

RERANKERS = ("chain", "ppr", "similarity")

#: The passage ids in order, their scores, and the relations that selected each.
_Ranked = Tuple[List[str], Dict[str, float], Dict[str, List[ScoredRelation]]]


def _ms(start: float) -> float:
    """Milliseconds since `start` (a `time.perf_counter()`)."""
    return (time.perf_counter() - start) * 1000.0


def _located(relations: List[ScoredRelation], cache) -> "tuple[List[ScoredRelation], np.ndarray]":
    """The relations still stored, and their adjacency positions (one vectorized lookup)."""
    found = cache.relations.lookup(np.array([r.id for r in relations], dtype=np.int64))
    return [r for r, p in zip(relations, found.tolist()) if p >= 0], found[found >= 0]


def _positions(index: Dict, ids: Sequence) -> np.ndarray:
    return np.array([index[i] for i in ids if i in index], dtype=np.int64)


def _unique_relations(chains: Dict[str, List[ScoredRelation]], ranking: List, n: int) -> List[ScoredRelation]:
    """The relations behind the top passages, in ranking order, without repeats: the chain followed."""
    seen: Dict[int, ScoredRelation] = {}
    for pid, _ in ranking:
        for relation in chains.get(pid, []):
            seen.setdefault(relation.id, relation)
        if len(seen) >= n:
            break
    return list(seen.values())


def _read_mentions(answer: str) -> List[str]:
    mentions = string_list(parse_json_object(answer), "named_entities")
    return list(dict.fromkeys(m.strip() for m in mentions if m.strip()))[:20]
