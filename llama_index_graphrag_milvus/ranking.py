"""Rankers: how the candidate relations of a retrieval order its passages, behind one protocol.

- `ChainRanker` (the default without an LLM): each candidate scores its similarity plus that of its best
  neighbouring candidate (sharing an entity or a synonym), so two-step chains count; a passage scores
  its dense similarity plus `graph_weight` times its best relation's chain score.
- `PPRRanker`: personalized PageRank on the candidates' entity–relation–passage subgraph, seeded by the
  question's entities (weighted by specificity), its top relations and its top passages, rank-fused with
  dense retrieval.
- `SimilarityRanker`: the notebook's order: the passages of the most similar relations, then dense.
- `LLMRanker`: an LLM picks relations (one-shot chain-of-thought prompt, JSON); their passages come
  first, then those of another ranker (`base`). An unusable answer gives exactly the base ranking.

A user can pass any object with `name`, `needs_context` and `rank` (and optionally `arank`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Protocol, Sequence, Tuple

import numpy as np
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate

from llama_index_graphrag_milvus.backends import Neighbourhood
from llama_index_graphrag_milvus.graph import chain_scores, local_subgraph, passage_scores, personalized_pagerank, specificity
from llama_index_graphrag_milvus.prompts import RERANK_PROMPT
from llama_index_graphrag_milvus.rerank import allm_rerank, llm_rerank
from llama_index_graphrag_milvus.schema import ScoredEntity, ScoredRelation

if TYPE_CHECKING:
    from llama_index_graphrag_milvus.store import MilvusGraphStore

#: A relation as a ranking names it: (relation id, score).
Scored = Tuple[int, float]


@dataclass(frozen=True)
class RankTask:
    """What a ranker reads: the question, its candidates and the adjacency around them."""

    query: str
    vector: Sequence[float]
    neighbourhood: Neighbourhood
    dense: List[Tuple[str, float]]  # dense retrieval's (passage id, cosine), best first
    seed_entities: List[ScoredEntity]
    seed_relations: List[Scored]
    top_n: int  # relations to name as chosen
    dense_seed_k: int  # top dense passages that count as seeds
    store: "MilvusGraphStore"

    def candidates(self) -> List[Scored]:
        """The candidates as (relation id, cosine), best first."""
        hood = self.neighbourhood
        return list(zip(hood.relation_ids(), hood.similarities.tolist()))


@dataclass
class Ranking:
    """Passages best first, with the relations that selected each (a passage's own relation first), and
    the relations chosen: the chain followed, from the question's side."""

    name: str
    passages: List[Tuple[str, float]]
    via: Dict[str, List[Scored]] = field(default_factory=dict)
    chosen: List[Scored] = field(default_factory=list)
    thought_process: Optional[str] = None


class Ranker(Protocol):
    """Orders the passages of a retrieval from its candidate relations."""

    name: str
    #: Whether the expansion should add the relations of the top dense passages and of the candidates'
    #: synonyms (graph rankings use them; the similarity order does not).
    needs_context: bool

    def rank(self, task: RankTask) -> Ranking:
        ...


async def arank(ranker: Ranker, task: RankTask) -> Ranking:
    """`ranker.arank(task)` if it has one, else `rank` off the event loop."""
    if hasattr(ranker, "arank"):
        return await ranker.arank(task)  # type: ignore[attr-defined]
    return await asyncio.to_thread(ranker.rank, task)


def chosen_relations(via: Dict[str, List[Scored]], passages: List[Tuple[str, float]], n: int) -> List[Scored]:
    """The relations behind the top passages, in ranking order, without repeats: the chain followed."""
    seen: Dict[int, Scored] = {}
    for pid, _ in passages:
        for relation in via.get(pid, []):
            seen.setdefault(relation[0], relation)
        if len(seen) >= n:
            break
    return list(seen.values())


@dataclass
class ChainRanker:
    """Dense similarity plus `graph_weight` times the best two-step chain through the passage.

    Args:
        graph_weight: Weight of the chain score against dense similarity.
        synonyms: Chains continue across synonym links.
    """

    graph_weight: float = 0.3
    synonyms: bool = True
    name: str = "chain"
    needs_context: bool = True

    def rank(self, task: RankTask) -> Ranking:
        hood, store = task.neighbourhood, task.store
        candidates = task.candidates()
        chain, best = chain_scores(hood.graph, hood.relations, hood.similarities, hood.hub_passages, synonyms=self.synonyms)
        passages, scores, via = passage_scores(hood.graph, hood.relations, chain)
        pids = hood.passage_ids(passages)
        dense = dict(task.dense)
        dense.update(store.passage_similarities(task.vector, [p for p in pids if p not in dense]))
        total = {pid: dense.get(pid, 0.0) for pid, _ in task.dense}
        chains: Dict[str, List[Scored]] = {}  # the chain that reached each passage, from the question's side
        for pid, score, i in zip(pids, scores.tolist(), via.tolist()):
            total[pid] = dense.get(pid, 0.0) + self.graph_weight * score
            chains[pid] = [candidates[best[i]], candidates[i]] if best[i] >= 0 else [candidates[i]]
        ranking = sorted(total.items(), key=lambda kv: -kv[1])
        # a passage's own relation first, then the neighbour it chained with
        stated = {pid: chain[::-1] for pid, chain in chains.items()}
        return Ranking(self.name, ranking, stated, chosen_relations(chains, ranking, task.top_n))


@dataclass
class PPRRanker:
    """Personalized PageRank on the candidates' subgraph, rank-fused (RRF, k=60) with dense retrieval."""

    name: str = "ppr"
    needs_context: bool = True

    def rank(self, task: RankTask) -> Ranking:
        hood = task.neighbourhood
        candidates = task.candidates()
        weights = np.clip(hood.similarities, 1e-3, None) if len(candidates) else np.zeros(0)
        top = hood.passage_positions([p for p, _ in task.dense[: task.dense_seed_k]])
        sub = local_subgraph(hood.graph, hood.relations, weights, top)
        _, rels, pas = sub.slices()
        restart = np.zeros(sub.adjacency.shape[0])
        cache = hood.cache
        entity_ids = [e.id for e in task.seed_entities]
        seeds = cache.entities.lookup(np.asarray(entity_ids, dtype=np.int64))
        weight = specificity(hood.graph, sub.entities)
        scores = [max(e.score, 0.0) * w for e, w in zip(task.seed_entities, _at(weight, sub.entities, seeds))]
        _restart_at(restart, 0, sub.entities, seeds, scores)
        relations = cache.relations.lookup(np.asarray([r for r, _ in task.seed_relations], dtype=np.int64))
        _restart_at(restart, rels.start, sub.relations, relations, [s for _, s in task.seed_relations])
        dense_top = task.dense[: task.dense_seed_k]
        passages = cache.passages.lookup([p for p, _ in dense_top]) if dense_top else np.zeros(0, dtype=np.int64)
        _restart_at(restart, pas.start, sub.passages, passages, [s for _, s in dense_top])
        rank = personalized_pagerank(sub.adjacency, restart)[pas]
        order = [int(i) for i in np.argsort(-rank) if rank[i] > 0]
        graph_pids = hood.passage_ids(sub.passages[order]) if order else []
        fused: Dict[str, float] = {}
        for ranked in (graph_pids, [pid for pid, _ in task.dense]):
            for r, pid in enumerate(ranked):
                fused[pid] = fused.get(pid, 0.0) + 1.0 / (60 + r + 1)
        chains: Dict[str, List[Scored]] = {}
        for relation in candidates:  # best first
            for pid in hood.passages_of(relation[0]):
                chains.setdefault(pid, [relation])
        ranking = sorted(fused.items(), key=lambda kv: -kv[1])
        return Ranking(self.name, ranking, chains, chosen_relations(chains, ranking, task.top_n))


def _at(values: np.ndarray, nodes: np.ndarray, positions: np.ndarray) -> List[float]:
    """`values[i]` for the node i at each adjacency position (0 where it is not a node)."""
    index = {p: i for i, p in enumerate(nodes.tolist())}
    return [float(values[index[p]]) if p in index else 0.0 for p in positions.tolist()]


def _restart_at(restart: np.ndarray, offset: int, nodes: np.ndarray, positions: np.ndarray, scores: List[float]) -> None:
    """Add each score to the restart weight of the subgraph node at that adjacency position (-1, or a
    position outside the subgraph: skipped)."""
    index = {p: i for i, p in enumerate(nodes.tolist())}
    for position, score in zip(positions.tolist(), scores):
        i = index.get(position)
        if i is not None:
            restart[offset + i] += max(score, 0.0)


@dataclass
class SimilarityRanker:
    """The notebook's order: the passages of the `top_n` relations most similar to the question, then
    dense retrieval's passages."""

    name: str = "similarity"
    needs_context: bool = False

    def rank(self, task: RankTask) -> Ranking:
        candidates = sorted(task.candidates(), key=lambda c: -c[1])[: task.top_n]
        ranking: List[Tuple[str, float]] = []
        chains: Dict[str, List[Scored]] = {}
        for relation in candidates:
            for pid in task.neighbourhood.passages_of(relation[0]):
                if pid not in chains:
                    ranking.append((pid, relation[1]))
                chains.setdefault(pid, []).append(relation)
        ranking += [(pid, score) for pid, score in task.dense if pid not in chains]
        return Ranking(self.name, ranking, chains, chosen_relations(chains, ranking, task.top_n))


@dataclass
class LLMRanker:
    """An LLM picks the useful relations among the candidates (offered best first with their text); their
    passages come first, in the LLM's order, then the passages of `base`'s ranking. When the LLM fails
    or its answer names none of the offered relations, the ranking is exactly `base`'s."""

    llm: LLM
    base: Ranker = field(default_factory=SimilarityRanker)
    prompt: PromptTemplate = field(default_factory=lambda: RERANK_PROMPT)
    name: str = "llm"

    @property
    def needs_context(self) -> bool:
        return self.base.needs_context

    def rank(self, task: RankTask) -> Ranking:
        offered = self._offered(task)
        return self._merge(task, llm_rerank(self.llm, self.prompt, task.query, offered, task.top_n), self.base.rank(task))

    async def arank(self, task: RankTask) -> Ranking:
        offered = await asyncio.to_thread(self._offered, task)
        picked = await allm_rerank(self.llm, self.prompt, task.query, offered, task.top_n)
        return self._merge(task, picked, await arank(self.base, task))

    def _offered(self, task: RankTask) -> List[ScoredRelation]:
        candidates = task.candidates()
        texts = task.store.describe([r for r, _ in candidates])
        return [
            ScoredRelation(r, texts[r].subject, texts[r].predicate, texts[r].object, score)
            for r, score in candidates
            if r in texts
        ]

    def _merge(self, task: RankTask, picked, base: Ranking) -> Ranking:
        if not picked.by_llm:
            return base
        scored: Dict[str, float] = {}
        via: Dict[str, List[Scored]] = {}
        for relation in picked.relations:
            for pid in task.neighbourhood.passages_of(relation.id):
                via.setdefault(pid, []).append((relation.id, relation.score))
                scored.setdefault(pid, relation.score)
        for pid, score in base.passages:
            if pid not in scored:
                scored[pid] = score
                via[pid] = base.via.get(pid, [])
        chosen = [(r.id, r.score) for r in picked.relations]
        return Ranking(self.name, list(scored.items()), via, chosen, picked.thought_process)


def ranker_named(name: str, graph_weight: float = 0.3, synonyms: bool = True) -> Ranker:
    """The ranker a string names: "chain", "ppr" or "similarity"."""
    if name == "chain":
        return ChainRanker(graph_weight=graph_weight, synonyms=synonyms)
    if name == "ppr":
        return PPRRanker()
    if name == "similarity":
        return SimilarityRanker()
    raise ValueError(f"reranker must be one of chain, ppr, similarity, or a Ranker; got {name!r}")
