"""GraphRAGRetriever: multi-hop retrieval by entity and relation search, graph expansion and a ranker."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_graphrag_milvus import events as ev
from llama_index_graphrag_milvus.backends.base import Expansion, Neighbourhood
from llama_index_graphrag_milvus.explain import Explanation
from llama_index_graphrag_milvus.ingest.extract import exclude_from_content
from llama_index_graphrag_milvus.llm.guard import run_sync
from llama_index_graphrag_milvus.llm.mentions import question_mentions
from llama_index_graphrag_milvus.llm.prompts import NER_PROMPT, RERANK_PROMPT
from llama_index_graphrag_milvus.llm.resolve import DEFAULT, LLMType, resolve_llm
from llama_index_graphrag_milvus.milvus.search import PassageCheck
from llama_index_graphrag_milvus.ranking import LLMRanker, Ranker, RankTask, Scored, arank, ranker_named
from llama_index_graphrag_milvus.ranking.llm import check_trust
from llama_index_graphrag_milvus.schema import Retrieval, ScoredRelation, Triplet, entity_id
from llama_index_graphrag_milvus.store import MilvusGraphStore

#: Spans (one per step) and `events` of every retrieval go through this LlamaIndex dispatcher.
dispatcher = get_dispatcher(__name__)

#: Metadata key of a returned passage: the relations that selected it, as printable strings.
RELATIONS_KEY = "graphrag_relations"

#: Arguments that moved, accepted for one release with a FutureWarning: what to write instead.
MOVED_ARGUMENTS = {
    "reranker": "ranker=",
    "graph_weight": "ranker=ChainRanker(graph_weight=...), or a FusedRanker holding one",
}

#: The top passages of a ranking: (passage id, score, the relations that selected it).
_Top = List[Tuple[str, float, List[ScoredRelation]]]


class GraphRAGRetriever(BaseRetriever):
    """Graph RAG over a `MilvusGraphStore`, as a drop-in LlamaIndex retriever.

    1. Seeds: the entities nearest to each name in the question (LLM NER with `llm`, else the known names
       it holds); the relations and the passages nearest to the whole question.
    2. Expansion of the seeds over the graph (`store.backend.expand`), never through hub entities, each step cut
       to the relations most similar to the question.
    3. A ranker orders the passages (by default `ranking.FusedRanker`); with `llm`, the relations the LLM
       picks among the best candidates lift their passages within that ranking.
    4. The top `similarity_top_k` passages as the ingested nodes, each with the relations that selected
       it in `metadata["graphrag_relations"]`.

    The settings after `filters` were chosen on the dev sets; they shape the expansion every ranker reads.

    Args:
        store: The store ingested by `GraphRAGTransform`.
        llm: For NER and rerank (2 LLM calls a question). By default `Settings.llm` when it is set, else
            OpenAI when OPENAI_API_KEY is set, else none; `llm=None` retrieves with no LLM call at all.
        similarity_top_k: Passages returned.
        ranker: How the passages are ranked: "fused" (the default), "chain", "ppr", "similarity", "hop",
            "topic" (those two each alone, then dense retrieval's passages), or a ranker object (`ranking`,
            or your own). With `llm`, an `LLMRanker` wraps it (one given as the ranker is used as it is).
        llm_trust: How far the LLM's pick is trusted: "confirmed" (the default) puts its passages first
            when the graph confirms the picks as a chain from the question's entities, and else lets it
            vote in the fusion; "always" puts them first; "vote" only votes. Checked even without an LLM.
        entity_top_k: Entities found per mention.
        relation_top_k: Relations found for the question.
        expansion_degree: Degrees of expansion (1 or 2 is enough).
        filters: LlamaIndex `MetadataFilters` on the passages' metadata (EQ, NE, GT, GTE, LT, LTE, IN, NIN,
            CONTAINS, ANY, ALL; AND, OR, NOT, nested): only passages that pass are seeds, ranked and returned;
            the walk still crosses every entity and relation. What cannot be honoured raises here.
        max_candidate_relations: Cap on the candidates (and on each hop's frontier), by similarity.
        rerank_top_n: Relations the LLM is asked to choose at most; relations listed as the chain followed.
        dense_seed_k: Top dense passages whose relations join the candidates (graph rankers).
        hub_fraction: Entities stated in more than this fraction of the passages (at least 20 passages,
            at most 200: `hub_limit`) are hubs: walks and chains do not continue through them.
        use_synonyms: Follow the store's synonym links between entities (expansion and "chain").
        ner_prompt: Replaces the NER prompt (also with `update_prompts`).
        rerank_prompt: Replaces the rerank prompt (also with `update_prompts`).
        callback_manager: LlamaIndex's callback manager, as for any retriever.
        verbose: LlamaIndex's verbose flag, as for any retriever.
        **moved: Deprecated, accepted for one release with a FutureWarning: `reranker=` (now `ranker=`),
            `graph_weight=` (now `ranker=ChainRanker(graph_weight=...)`, or a `FusedRanker` holding one).

    Raises:
        ValueError: A count below its minimum, or an unknown `llm_trust`.
        TypeError: An unknown keyword argument, or both `ranker=` and `reranker=`.
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
        _at_least(1, similarity_top_k=similarity_top_k, entity_top_k=entity_top_k, rerank_top_n=rerank_top_n)
        _at_least(1, relation_top_k=relation_top_k, max_candidate_relations=max_candidate_relations)
        check_trust(llm_trust)
        self.store, self.llm = store, resolve_llm(llm)
        ranker, graph_weight = _moved_arguments(ranker, moved)
        ranker = "fused" if ranker is None else ranker
        if isinstance(ranker, str):
            ranker = ranker_named(ranker, graph_weight, use_synonyms)
        if self.llm is not None and not isinstance(ranker, LLMRanker):
            ranker = LLMRanker(self.llm, ranker, rerank_prompt or RERANK_PROMPT, trust=llm_trust)
        self.ranker: Ranker = ranker
        self.filters, self._only = filters, PassageCheck.of(store.collections, filters)
        self.similarity_top_k, self.entity_top_k = similarity_top_k, entity_top_k
        self.relation_top_k, self.expansion_degree = relation_top_k, expansion_degree
        self.max_candidate_relations, self.rerank_top_n = max_candidate_relations, rerank_top_n
        self.dense_seed_k, self.hub_fraction, self.use_synonyms = dense_seed_k, hub_fraction, use_synonyms
        self.ner_prompt = ner_prompt or NER_PROMPT
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _get_prompts(self) -> PromptDictType:
        rerank = {"rerank_prompt": self.ranker.prompt} if isinstance(self.ranker, LLMRanker) else {}
        return {"ner_prompt": self.ner_prompt, **rerank}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        self.ner_prompt = prompts.get("ner_prompt", self.ner_prompt)
        if "rerank_prompt" in prompts and isinstance(self.ranker, LLMRanker):
            self.ranker.prompt = prompts["rerank_prompt"]

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return self.trace(query_bundle).nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return (await self.atrace(query_bundle)).nodes

    def trace(self, query: QueryBundle | str) -> Retrieval:
        """Retrieve, and return the record of every step: mentions, seeds, candidates, chosen relations,
        passages (`nodes`, what `retrieve` returns).

        Args:
            query: The question, as text or a `QueryBundle` (whose embedding is used when it has one).
        """
        return run_sync(self.atrace(query))

    @dispatcher.span
    async def atrace(self, query: QueryBundle | str) -> Retrieval:
        """Async `trace`. The steps run on the event loop (Python and numpy work under the GIL); the LLM's
        and the embedding model's blocking calls are awaited in threads (see `llm.guard`)."""
        bundle = QueryBundle(query) if isinstance(query, str) else query
        run = Retrieval(query=bundle.query_str)
        llm_failed = await self._entity_search(run)
        embed = self.store.embed_model.get_query_embedding
        vector = bundle.embedding or await asyncio.to_thread(embed, run.query)
        seeds = self._relation_search(run, vector)
        self._dense_search(run, vector)
        task = self._expand(run, vector, seeds)
        self._map_passages(run, await self._rerank(run, task, llm_failed))
        return run

    def explain(self, query: QueryBundle | str) -> Explanation:
        """Retrieve, and return an `Explanation`: seeds, candidates, chosen relations and passages, printable
        and drawable (`.to_png(path)`, inline in a notebook).

        Args:
            query: The question, as text or a `QueryBundle`.
        """
        return run_sync(self.aexplain(query))

    async def aexplain(self, query: QueryBundle | str) -> Explanation:
        """Async `explain`."""
        return Explanation.of(await self.atrace(query), self.store)

    @dispatcher.span
    async def _entity_search(self, run: Retrieval) -> bool:
        """The question's named entities and the entities nearest each; return whether its LLM NER failed."""
        t0, store, llm = time.perf_counter(), self.store, self.llm
        run.mentions, failed = await question_mentions(run.query, store.has_entities, llm, self.ner_prompt)
        vectors = await _mention_vectors(store, run.mentions) if run.mentions else []
        run.seed_entities = [e for hits in store.search.entities(vectors, self.entity_top_k) for e in hits]
        names, by_llm = [f"{e.name} ({e.score:.3f})" for e in run.seed_entities], llm is not None
        _emit(ev.GraphRAGEntitySearchEvent, run, t0, mentions=[*run.mentions], entities=names, by_llm=by_llm)
        return failed

    @dispatcher.span
    def _relation_search(self, run: Retrieval, vector: List[float]) -> List[Scored]:
        t0 = time.perf_counter()
        seeds = self.store.search.relations(vector, self.relation_top_k)
        _emit(ev.GraphRAGRelationSearchEvent, run, t0, relation_ids=_ids(seeds), scores=[s for _, s in seeds])
        return seeds

    @dispatcher.span
    def _dense_search(self, run: Retrieval, vector: List[float]) -> None:
        t0, top_k = time.perf_counter(), max(self.similarity_top_k, self.dense_seed_k)
        run.dense = self.store.search.passages(vector, top_k, self._only)
        scores = [s for _, s in run.dense]
        _emit(ev.GraphRAGDenseSearchEvent, run, t0, passage_ids=_ids(run.dense), scores=scores)

    @dispatcher.span
    def _expand(self, run: Retrieval, vector: List[float], seeds: List[Scored]) -> RankTask:
        """Expand the seeds over the graph (only passages passing `filters`); return what the ranker reads."""
        t0 = time.perf_counter()
        hood = self.store.backend.expand(
            Expansion(
                vector=vector,
                entities=[e.id for e in run.seed_entities],
                relations=_ids(seeds),
                passages=_ids(run.dense[: self.dense_seed_k]),
                degree=self.expansion_degree,
                cap=self.max_candidate_relations,
                with_context=self.ranker.needs_context,
                synonyms=self.use_synonyms,
                hub_fraction=self.hub_fraction,
            )
        )
        hood = hood if self._only is None else hood.restricted(self._only)
        run.reached, run.candidates = hood.reached, hood.candidates()
        n, degree = len(run.candidates), self.expansion_degree
        _emit(ev.GraphRAGExpansionEvent, run, t0, expansion_degree=degree, reached=hood.reached, candidates=n)
        return RankTask(
            query=run.query,
            vector=vector,
            neighbourhood=hood,
            dense=run.dense,
            seed_entities=run.seed_entities,
            seed_relations=seeds,
            top_n=self.rerank_top_n,
            dense_seed_k=self.dense_seed_k,
            store=self.store,
            hub_fraction=self.hub_fraction,
        )

    @dispatcher.span
    async def _rerank(self, run: Retrieval, task: RankTask, llm_failed: bool) -> _Top:
        """Order the passages with the ranker, or with its base alone when the LLM's NER call failed (exactly
        the ranking of `llm=None`); record the seeds and the chosen relations in `run`, described at once."""
        t0, ranker, seeds, hood = time.perf_counter(), self.ranker, task.seed_relations, task.neighbourhood
        ranking = await arank(ranker.base if llm_failed and isinstance(ranker, LLMRanker) else ranker, task)
        top, via = ranking.passages[: self.similarity_top_k], ranking.via
        shown = [*seeds, *ranking.chosen, *(r for pid, _ in top for r in via.get(pid, []))]
        texts = self.store.describe(_ids(shown))
        run.seed_relations = _described(seeds, texts, hood)
        run.chosen = _described(ranking.chosen, texts, hood)
        run.reranker, run.thought_process = ranking.name, ranking.thought_process
        run.llm_decision = ranking.decision
        chosen, thought = [str(r) for r in run.chosen], run.thought_process
        _emit(ev.GraphRAGRerankEvent, run, t0, reranker=ranking.name, chosen=chosen, thought_process=thought)
        return [(pid, score, _described(via.get(pid, []), texts, hood)) for pid, score in top]

    @dispatcher.span
    def _map_passages(self, run: Retrieval, top: _Top) -> None:
        """The top passages as the ingested nodes still stored, with the relations that selected each."""
        t0 = time.perf_counter()
        nodes = self.store.get_passages([pid for pid, _, _ in top])
        for pid, score, via in top:
            if (node := nodes.get(pid)) is not None:
                run.via[node.node_id] = via
                node.metadata[RELATIONS_KEY] = [str(r) for r in via]
                exclude_from_content(node, RELATIONS_KEY)
                run.nodes.append(NodeWithScore(node=node, score=score))
        shown = [pid for pid, _, _ in top if pid in nodes]
        relations = [n.node.metadata[RELATIONS_KEY] for n in run.nodes]
        _emit(ev.GraphRAGPassagesEvent, run, t0, passage_ids=shown, relations=relations)


async def _mention_vectors(store: MilvusGraphStore, mentions: Sequence[str]) -> List[List[float]]:
    """A vector for each name of the question: a stored entity's own when the name is one (by its id),
    else the embedding model's (one batch for the rest)."""
    ids = [entity_id(m) for m in mentions]
    stored = store.entity_vectors(ids)
    rest = [m for m, i in zip(mentions, ids) if i not in stored]
    embedded = iter(await asyncio.to_thread(store.embed_model.get_text_embedding_batch, rest) if rest else [])
    return [stored[i] if i in stored else next(embedded) for i in ids]


def _moved_arguments(ranker: Union[str, Ranker, None], moved: Dict[str, Any]) -> Tuple[Any, float]:
    """The ranker and the chain's graph weight, from the arguments that moved (each with a FutureWarning)."""
    if unknown := sorted(set(moved) - set(MOVED_ARGUMENTS)):
        raise TypeError(f"GraphRAGRetriever got unexpected keyword argument(s): {', '.join(unknown)}")
    for name in moved:
        message = f"GraphRAGRetriever({name}=...) is deprecated and will be removed in the next release: "
        warnings.warn(message + f"use {MOVED_ARGUMENTS[name]}", FutureWarning, stacklevel=3)
    if "reranker" in moved and ranker is not None:
        raise TypeError("pass ranker= alone: reranker= is its old name")
    return moved.get("reranker", ranker), moved.get("graph_weight", 0.3)


def _at_least(minimum: int, **values: int) -> None:
    for name, value in values.items():
        if value < minimum:
            raise ValueError(f"{name} must be at least {minimum}, got {value}")


def _ids(pairs: Sequence[Tuple[Any, float]]) -> List[Any]:
    return [i for i, _ in pairs]


def _described(
    relations: Sequence[Scored], texts: Dict[int, Triplet], hood: Neighbourhood
) -> List[ScoredRelation]:
    """(id, score) pairs as `ScoredRelation`s with their texts and passages; those not stored are left out."""
    return [
        ScoredRelation(r, texts[r].subject, texts[r].predicate, texts[r].object, s, hood.passages_of(r))
        for r, s in relations
        if r in texts
    ]


def _emit(event: type, run: Retrieval, start: float, **fields: Any) -> None:
    """Send a step's event: the question, the step's milliseconds since `start`, what it found."""
    dispatcher.event(event(query=run.query, duration_ms=(time.perf_counter() - start) * 1000.0, **fields))
