"""GraphRAGRetriever: multi-hop retrieval by entity and relation search, graph expansion and a ranker."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_graphrag_milvus.backends.base import Expansion, Neighbourhood
from llama_index_graphrag_milvus.events import (
    GraphRAGDenseSearchEvent,
    GraphRAGEntitySearchEvent,
    GraphRAGExpansionEvent,
    GraphRAGPassagesEvent,
    GraphRAGRelationSearchEvent,
    GraphRAGRerankEvent,
)
from llama_index_graphrag_milvus.ingest.extract import exclude_from_content
from llama_index_graphrag_milvus.llm.guard import run_sync
from llama_index_graphrag_milvus.llm.resolve import DEFAULT, LLMType, resolve_llm
from llama_index_graphrag_milvus.llm.mentions import question_mentions
from llama_index_graphrag_milvus.llm.prompts import NER_PROMPT, RERANK_PROMPT
from llama_index_graphrag_milvus.milvus.search import PassageCheck
from llama_index_graphrag_milvus.ranking import LLMRanker, Ranker, Ranking, RankTask, Scored, arank, ranker_named
from llama_index_graphrag_milvus.schema import Retrieval, ScoredRelation, Triplet, entity_id
from llama_index_graphrag_milvus.store import MilvusGraphStore

if TYPE_CHECKING:
    from llama_index_graphrag_milvus.explain import Explanation

#: Spans (one per step) and `events` of every retrieval go through this LlamaIndex dispatcher.
dispatcher = get_dispatcher(__name__)

#: Metadata key of a returned passage: the relations that selected it, as printable strings.
RELATIONS_KEY = "graphrag_relations"


class GraphRAGRetriever(BaseRetriever):
    """Graph RAG over a `MilvusGraphStore`, as a drop-in LlamaIndex retriever.

    1. The question's entities (LLM NER with `llm`, else the known entity names in it), and the nearest
       entities to each; the relations and the passages nearest to the whole question.
    2. Expansion of these seeds over the adjacency (`store.expand`): never through hub entities, every
       step cut to the relations most similar to the question.
    3. A ranker (`ranking`) orders the passages: by default the reciprocal-rank fusion of HippoRAG 2's
       PageRank, the chain ranking, the hop and the topic ranking (`ranking.FusedRanker`); with `llm`,
       the relations the LLM picks among the best candidates lift their passages within that ranking.
    4. The top `similarity_top_k` passages as the ingested nodes, each with the relations that selected
       it in `metadata["graphrag_relations"]`.

    Args:
        store: The store ingested by `GraphRAGTransform`.
        llm: For NER and rerank (2 LLM calls a question). By default `Settings.llm` when it is set, else
            OpenAI when OPENAI_API_KEY is set, else none; `llm=None` retrieves with no LLM call at all.
        similarity_top_k: Passages returned.
        ranker: How the passages are ranked: "fused" (the default), "chain", "ppr", "similarity", "hop",
            "topic" (those two each alone, then dense retrieval's passages), or a ranker object
            (`ranking`: `ChainRanker(graph_weight=...)`, `FusedRanker(rankers, weights, k)`, your own).
            With `llm`, the LLM's pick lifts passages within it (`ranking.LLMRanker`; given as the
            ranker, an `LLMRanker` is used as it is).
        llm_trust: How far the LLM's pick is trusted: "confirmed" (the default) puts its passages first
            when the graph confirms the picks as a chain from the question's entities, and else lets it
            vote in the fusion; "always" puts them first; "vote" only votes.
        entity_top_k: Entities found per mention.
        relation_top_k: Relations found for the question.
        expansion_degree: Degrees of expansion (1 or 2 is enough).
        filters: LlamaIndex `MetadataFilters` on the passages' metadata (EQ, NE, GT, GTE, LT, LTE, IN,
            NIN, CONTAINS, ANY, ALL; AND, OR, NOT, nested): only passages that pass are seeds, ranked and
            returned, while the walk still crosses every entity and relation. An operator or value that
            cannot be honoured raises here, before any search (`milvus.filters.PassageFilter`).

    Fine settings (chosen on the dev sets; they shape the expansion, which every ranker reads):
        max_candidate_relations: Cap on the candidates (and on each hop's frontier), by similarity.
        rerank_top_n: Relations the LLM is asked to choose at most; relations listed as the chain followed.
        dense_seed_k: Top dense passages whose relations join the candidates (graph rankers).
        hub_fraction: Entities stated in more than this fraction of the passages (at least 20 passages,
            at most 200: `hub_limit`) are hubs: walks and chains do not continue through them.
        use_synonyms: Follow the store's synonym links between entities (expansion and "chain").
        ner_prompt, rerank_prompt: Replace the prompts (also with `update_prompts`).

    Deprecated, still accepted for one release with a FutureWarning: `reranker=` (now `ranker=`),
    `graph_weight=` (now `ranker=ChainRanker(graph_weight=...)`, or a `FusedRanker` holding one).
    """

    def __init__(
        self,
        store: MilvusGraphStore,
        llm: LLMType = DEFAULT,
        similarity_top_k: int = 2,
        *,
        ranker: Union[str, Ranker, None] = None,
        llm_trust: str = "confirmed",
        entity_top_k: int = 3,
        relation_top_k: int = 5,
        expansion_degree: int = 1,
        filters: Optional[MetadataFilters] = None,
        max_candidate_relations: int = 300,
        rerank_top_n: int = 3,
        dense_seed_k: int = 3,
        hub_fraction: float = 0.02,
        use_synonyms: bool = True,
        ner_prompt: Optional[PromptTemplate] = None,
        rerank_prompt: Optional[PromptTemplate] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
        **moved: Any,
    ) -> None:
        _at_least(0, expansion_degree=expansion_degree)
        _at_least(
            1, similarity_top_k=similarity_top_k, entity_top_k=entity_top_k, relation_top_k=relation_top_k,
            max_candidate_relations=max_candidate_relations, rerank_top_n=rerank_top_n,
        )
        llm = resolve_llm(llm)
        ranker, graph_weight = _moved_arguments(ranker, moved)
        ranker = "fused" if ranker is None else ranker
        base = ranker_named(ranker, graph_weight, use_synonyms) if isinstance(ranker, str) else ranker
        self.store, self.llm = store, llm
        self.filters, self._only = filters, PassageCheck.of(store.collections, filters)
        self.similarity_top_k, self.entity_top_k, self.relation_top_k = similarity_top_k, entity_top_k, relation_top_k
        self.expansion_degree, self.max_candidate_relations = expansion_degree, max_candidate_relations
        self.rerank_top_n, self.dense_seed_k = rerank_top_n, dense_seed_k
        self.hub_fraction, self.use_synonyms = hub_fraction, use_synonyms
        self.ner_prompt = ner_prompt or NER_PROMPT
        if llm is not None and not isinstance(base, LLMRanker):
            base = LLMRanker(llm, base, rerank_prompt or RERANK_PROMPT, trust=llm_trust)
        self.ranker: Ranker = base
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    # prompts ------------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        prompts: PromptDictType = {"ner_prompt": self.ner_prompt}
        if isinstance(self.ranker, LLMRanker):
            prompts["rerank_prompt"] = self.ranker.prompt
        return prompts

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "ner_prompt" in prompts:
            self.ner_prompt = prompts["ner_prompt"]
        if "rerank_prompt" in prompts and isinstance(self.ranker, LLMRanker):
            self.ranker.prompt = prompts["rerank_prompt"]

    # retrieval ----------------------------------------------------------------------------------
    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return self.trace(query_bundle).nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return (await self.atrace(query_bundle)).nodes

    def trace(self, query: QueryBundle | str) -> Retrieval:
        """Retrieve, and return every step: mentions, seeds, candidates, chosen relations, passages."""
        return run_sync(self.atrace(query))

    @dispatcher.span
    async def atrace(self, query: QueryBundle | str) -> Retrieval:
        """Async `trace`. The steps run here, on the event loop: they are Python and numpy work under the
        GIL, which threads would not speed up. The waits are awaited: the LLM's and the embedding model's
        blocking calls, each in a thread (as in `llm.guard`: an async client would be bound to one loop)."""
        bundle = QueryBundle(query) if isinstance(query, str) else query
        run = Retrieval(query=bundle.query_str)
        llm_failed = await self._entity_search(run)
        vector = bundle.embedding or await asyncio.to_thread(self.store.embed_model.get_query_embedding, run.query)
        seeds = self._relation_search(run, vector)
        self._dense_search(run, vector)
        hood = self._expand(run, vector, seeds)
        ranking, texts = await self._rerank(run, vector, seeds, hood, llm_failed)
        self._map_passages(run, hood, ranking, texts)
        return run

    def explain(self, query: QueryBundle | str) -> "Explanation":
        """Retrieve, and return an `Explanation`: seeds, candidates, chosen relations and passages, printable
        and drawable (`.to_png(path)`, inline in a notebook)."""
        return run_sync(self.aexplain(query))

    async def aexplain(self, query: QueryBundle | str) -> "Explanation":
        """Async `explain`."""
        from llama_index_graphrag_milvus.explain import Explanation

        return Explanation.of(await self.atrace(query), self.store)

    # steps --------------------------------------------------------------------------------------
    @dispatcher.span
    async def _entity_search(self, run: Retrieval) -> bool:
        """The entities the question names (LLM NER or known names), and the nearest entities to each;
        return whether the LLM's NER call failed (its rerank is then skipped)."""
        start = time.perf_counter()
        run.mentions, llm_failed = await question_mentions(run.query, self.store.has_entities, self.llm, self.ner_prompt)
        vectors = await _mention_vectors(self.store, run.mentions) if run.mentions else []
        for hits in self.store.search_entities(vectors, self.entity_top_k):
            run.seed_entities.extend(hits)
        entities = [f"{e.name} ({e.score:.3f})" for e in run.seed_entities]
        _emit(GraphRAGEntitySearchEvent, run, start, mentions=list(run.mentions), entities=entities, by_llm=self.llm is not None)
        return llm_failed

    @dispatcher.span
    def _relation_search(self, run: Retrieval, vector: List[float]) -> List[Scored]:
        start = time.perf_counter()
        seeds = self.store.search_relations(vector, self.relation_top_k)
        _emit(GraphRAGRelationSearchEvent, run, start, relation_ids=[r for r, _ in seeds], scores=[s for _, s in seeds])
        return seeds

    @dispatcher.span
    def _dense_search(self, run: Retrieval, vector: List[float]) -> None:
        start = time.perf_counter()
        run.dense = self.store.search_passage_ids(vector, max(self.similarity_top_k, self.dense_seed_k), self._only)
        _emit(GraphRAGDenseSearchEvent, run, start, passage_ids=[p for p, _ in run.dense], scores=[s for _, s in run.dense])

    @dispatcher.span
    def _expand(self, run: Retrieval, vector: List[float], seeds: List[Scored]) -> Neighbourhood:
        """Expand the seeds over the graph; keep the candidates most similar to the question."""
        start = time.perf_counter()
        hood = self.store.expand(
            Expansion(
                vector=vector,
                entities=[e.id for e in run.seed_entities],
                relations=[r for r, _ in seeds],
                passages=[p for p, _ in run.dense[: self.dense_seed_k]],
                degree=self.expansion_degree,
                cap=self.max_candidate_relations,
                with_context=self.ranker.needs_context,
                synonyms=self.use_synonyms,
                hub_fraction=self.hub_fraction,
            )
        )
        if self._only is not None:  # the rankers see only the passages that pass
            hood = hood.restricted(self._only)
        run.reached = hood.reached
        run.candidates = hood.candidates()
        _emit(GraphRAGExpansionEvent, run, start, expansion_degree=self.expansion_degree, reached=hood.reached,
              candidates=len(run.candidates))
        return hood

    def _task(self, run: Retrieval, vector: List[float], seeds: List[Scored], hood: Neighbourhood) -> RankTask:
        return RankTask(
            query=run.query, vector=vector, neighbourhood=hood, dense=run.dense, seed_entities=run.seed_entities,
            seed_relations=seeds, top_n=self.rerank_top_n,
            dense_seed_k=self.dense_seed_k, store=self.store, hub_fraction=self.hub_fraction,
        )

    def _ranker_for(self, llm_failed: bool) -> Ranker:
        """The ranker of one question: when its NER call to the LLM failed, the LLM's base ranking, with no
        rerank call (it would wait out the same outage), exactly the ranking of `llm=None`."""
        return self.ranker.base if llm_failed and isinstance(self.ranker, LLMRanker) else self.ranker

    @dispatcher.span
    async def _rerank(
        self, run: Retrieval, vector: List[float], seeds: List[Scored], hood: Neighbourhood, llm_failed: bool = False
    ) -> _Ranked:
        """Order the passages with the ranker; record the ranking in `run`, with the texts of the relations
        it shows (seeds, chosen, those behind the top passages), read in one query."""
        start = time.perf_counter()
        ranking = await arank(self._ranker_for(llm_failed), self._task(run, vector, seeds, hood))
        top = ranking.passages[: self.similarity_top_k]
        shown = [*seeds, *ranking.chosen, *(r for pid, _ in top for r in ranking.via.get(pid, []))]
        texts = self.store.describe([r for r, _ in shown])
        run.seed_relations, run.chosen = _described(seeds, texts, hood), _described(ranking.chosen, texts, hood)
        run.reranker, run.thought_process, run.llm_decision = ranking.name, ranking.thought_process, ranking.decision
        _emit(GraphRAGRerankEvent, run, start, reranker=run.reranker, chosen=[str(r) for r in run.chosen],
              thought_process=run.thought_process)
        return ranking, texts

    @dispatcher.span
    def _map_passages(self, run: Retrieval, hood: Neighbourhood, ranking: Ranking, texts: _Texts) -> None:
        """The top passages as the ingested nodes (those still stored), each with the relations that
        selected it in its metadata."""
        start = time.perf_counter()
        top = ranking.passages[: self.similarity_top_k]
        nodes = self.store.get_passages([pid for pid, _ in top])
        for pid, score in top:
            if pid in nodes:
                node = nodes[pid]
                run.via[node.node_id] = via = _described(ranking.via.get(pid, []), texts, hood)
                node.metadata[RELATIONS_KEY] = [str(r) for r in via]
                exclude_from_content(node, RELATIONS_KEY)
                run.nodes.append(NodeWithScore(node=node, score=score))
        _emit(GraphRAGPassagesEvent, run, start, passage_ids=[pid for pid, _ in top if pid in nodes],
              relations=[n.node.metadata[RELATIONS_KEY] for n in run.nodes])


#: The texts of the relations a retrieval shows, by id.
_Texts = Dict[int, Triplet]
#: A ranking and the texts of the relations it shows.
_Ranked = Tuple[Ranking, _Texts]


async def _mention_vectors(store: MilvusGraphStore, mentions: Sequence[str]) -> List[List[float]]:
    """A vector for each name of the question: a stored entity's own when the name is one (by its id),
    else the embedding model's (one batch for the rest)."""
    ids = [entity_id(m) for m in mentions]
    stored = store.entity_vectors(ids)
    rest = [m for m, i in zip(mentions, ids) if i not in stored]
    embedded = iter(await asyncio.to_thread(store.embed_model.get_text_embedding_batch, rest) if rest else [])
    return [stored[i] if i in stored else next(embedded) for i in ids]


#: Arguments that moved, accepted for one release with a FutureWarning: what to write instead.
MOVED_ARGUMENTS = {
    "reranker": "ranker=",
    "graph_weight": "ranker=ChainRanker(graph_weight=...), or a FusedRanker holding one",
}


def _moved_arguments(ranker: Union[str, Ranker, None], moved: Dict[str, Any]) -> Tuple[Union[str, Ranker, None], float]:
    """The ranker and the chain's graph weight, reading the arguments that moved (each with a FutureWarning)."""
    unknown = sorted(set(moved) - set(MOVED_ARGUMENTS))
    if unknown:
        raise TypeError(f"GraphRAGRetriever got unexpected keyword argument(s): {', '.join(unknown)}")
    for name in moved:
        warnings.warn(
            f"GraphRAGRetriever({name}=...) is deprecated and will be removed in the next release: use "
            f"{MOVED_ARGUMENTS[name]}", FutureWarning, stacklevel=3,
        )
    if "reranker" in moved:
        if ranker is not None:
            raise TypeError("pass ranker= alone: reranker= is its old name")
        ranker = moved["reranker"]
    return ranker, moved.get("graph_weight", 0.3)


def _at_least(minimum: int, **values: int) -> None:
    for name, value in values.items():
        if value < minimum:
            raise ValueError(f"{name} must be at least {minimum}, got {value}")


def _described(relations: Sequence[Scored], texts: _Texts, hood: Neighbourhood) -> List[ScoredRelation]:
    """(id, score) pairs as `ScoredRelation`s with their texts and passages; those not stored are left out."""
    return [
        ScoredRelation(r, texts[r].subject, texts[r].predicate, texts[r].object, s, hood.passages_of(r))
        for r, s in relations
        if r in texts
    ]

def _emit(event: type, run: Retrieval, start: float, **fields: Any) -> None:
    """Send a step's instrumentation event: the question, the step's milliseconds since `start` (a
    `time.perf_counter()`), what it found."""
    dispatcher.event(event(query=run.query, duration_ms=(time.perf_counter() - start) * 1000.0, **fields))

