"""Rankers: how the candidate relations of a retrieval order its passages, behind one protocol.

- `ChainRanker`: each candidate scores its similarity plus that of its best
  neighbouring candidate (sharing an entity or a synonym), so two-step chains count; a passage scores
  its dense similarity plus `graph_weight` times its best relation's chain score.
- `PPRRanker`: HippoRAG 2's personalized PageRank on the candidates' entity–passage subgraph, restarting
  at the entities of the relations most similar to the question and at the passages, by dense similarity.
- `HopRanker`: the top dense passage, then the passages about the entities it names: a bridge
  question's second hop.
- `FusedRanker` (the default): reciprocal rank fusion of PPR, chain and hop.
- `SimilarityRanker`: the notebook's order: the passages of the most similar relations, then dense.
- `LLMRanker`: an LLM picks relations among the best of another ranker (`base`, default fused), in a
  one-shot chain-of-thought prompt answered in JSON; its pick joins the fusion in the hop's place. An
  unusable answer gives exactly the base ranking.

A user can pass any object with `name`, `needs_context` and `rank` (and optionally `arank`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Dict, List, Optional, Protocol, Sequence, Tuple

import numpy as np
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate

from llama_index_graphrag_milvus.backends import Neighbourhood
from llama_index_graphrag_milvus.graph import (
    chain_scores,
    entity_passage_subgraph,
    passage_scores,
    personalized_pagerank,
    specificity,
)
from llama_index_graphrag_milvus.prompts import RERANK_PROMPT
from llama_index_graphrag_milvus.rerank import allm_rerank, llm_rerank
from llama_index_graphrag_milvus.schema import ScoredEntity, ScoredRelation

if TYPE_CHECKING:
    from llama_index_graphrag_milvus.store import MilvusGraphStore

#: Characters of a subject, predicate or object shown to the LLM (a name from ingested text can be long).
MAX_NAME = 100

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
    dense_seed_k: int  # top dense passages whose relations joined the candidates
    store: "MilvusGraphStore"
    hub_fraction: float = 0.02  # the retriever's: entities in more of the passages are hubs
    _cosines: Dict[str, float] = field(default_factory=dict, compare=False, repr=False)

    def candidates(self) -> List[Scored]:
        """The candidates as (relation id, cosine), best first."""
        return list(self._candidates)

    @cached_property
    def _candidates(self) -> List[Scored]:
        hood = self.neighbourhood
        return list(zip(hood.relation_ids(), hood.similarities.tolist()))

    @cached_property
    def passage_relations(self) -> Dict[str, List[Scored]]:
        """Each candidate passage's own candidate relations, best first (read once per retrieval)."""
        via: Dict[str, List[Scored]] = {}
        for relation, passages in zip(self._candidates, self.neighbourhood.candidate_passages):
            for pid in passages:
                via.setdefault(pid, []).append(relation)
        return via

    @cached_property
    def own_relation(self) -> Dict[str, List[Scored]]:
        """Each candidate passage's most similar candidate relation (as a one-item list): the reason a
        ranking that does not chain gives for it."""
        return {pid: relations[:1] for pid, relations in self.passage_relations.items()}

    def passage_cosines(self, passage_ids: Sequence[str]) -> Dict[str, float]:
        """The question's cosine to each passage (dense retrieval's, else asked once per retrieval)."""
        if not self._cosines:
            self._cosines.update(self.dense)
        missing = [p for p in passage_ids if p not in self._cosines]
        if missing:
            self._cosines.update(self.store.passage_similarities(self.vector, missing))
        return {p: self._cosines[p] for p in passage_ids if p in self._cosines}


@dataclass
class Ranking:
    """Passages best first, with the relations that selected each (a passage's own relation first), and
    the relations chosen: the chain followed, from the question's side."""

    name: str
    passages: List[Tuple[str, float]]
    via: Dict[str, List[Scored]] = field(default_factory=dict)
    chosen: List[Scored] = field(default_factory=list)
    thought_process: Optional[str] = None
    #: For a fusion: the rankings fused as (name, passage ids, weight), and the fusion's k (an LLM's
    #: choice joins them).
    parts: Optional[List[Tuple[str, List[str], float]]] = None
    k: int = 5


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
        hood = task.neighbourhood
        candidates = task.candidates()
        chain, best = chain_scores(hood.graph, hood.relations, hood.similarities, hood.hub_passages, synonyms=self.synonyms)
        passages, scores, via = passage_scores(hood.graph, hood.relations, chain)
        pids = hood.passage_ids(passages)
        dense = task.passage_cosines([*pids, *(p for p, _ in task.dense)])
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
    """HippoRAG 2's personalized PageRank on the candidates' entity–passage subgraph.

    The walk restarts at the entities of the `facts` relations most similar to the question (each
    weighted by its min-max normalised similarity, averaged over its facts, divided by the number of
    passages stating the entity) and at every passage, by its min-max normalised dense similarity times
    `passage_weight`. Passages are ranked by their PageRank, then the dense passages it did not reach.
    The defaults are HippoRAG 2's (damping 0.5, passage weight 0.05, 5 facts).
    """

    facts: int = 5
    passage_weight: float = 0.05
    damping: float = 0.5
    name: str = "ppr"
    needs_context: bool = True

    def rank(self, task: RankTask) -> Ranking:
        hood = task.neighbourhood
        candidates = task.candidates()
        via = task.own_relation
        if not candidates:
            return Ranking(self.name, list(task.dense), via, [])
        sub = entity_passage_subgraph(hood.graph, hood.relations)
        passages = slice(len(sub.entities), len(sub.entities) + len(sub.passages))
        restart = np.zeros(sub.adjacency.shape[0])
        top = np.argsort(-hood.similarities, kind="stable")[: self.facts]
        weights = _min_max(hood.similarities[top])
        votes: Dict[int, List[float]] = {}  # local entity index -> the weights of its facts
        for c, w in zip(top.tolist(), weights.tolist()):
            ends = hood.graph.entities_of_relations(hood.relations[c : c + 1])
            for i in np.searchsorted(sub.entities, ends).tolist():  # sub.entities is sorted
                votes.setdefault(i, []).append(w)
        for i, ws in votes.items():
            restart[i] = float(np.mean(ws)) * specificity(hood.graph, sub.entities[i : i + 1])[0]
        pids = hood.passage_ids(sub.passages)
        cosines = task.passage_cosines(pids)
        restart[passages] = _min_max(np.array([cosines.get(p, 0.0) for p in pids])) * self.passage_weight
        rank = personalized_pagerank(sub.adjacency, restart, damping=self.damping)[passages]
        ranking = [(pids[i], float(rank[i])) for i in np.argsort(-rank, kind="stable")]
        reached = set(pids)
        ranking += [(pid, 0.0) for pid, _ in task.dense if pid not in reached]
        return Ranking(self.name, ranking, via, chosen_relations(via, ranking, task.top_n))


@dataclass
class HopRanker:
    """The second hop of a bridge question: the top dense passage, then the passages about an entity it
    names (`MilvusGraphStore.linked_passages`: at least half of their relations name it; hubs not
    followed), by dense similarity. Only those passages are ranked: it is meant to be fused. With no
    passage to hop to, the ranking is the top passage alone, which then counts once more in the fusion."""

    name: str = "hop"
    needs_context: bool = True

    def rank(self, task: RankTask) -> Ranking:
        if not task.dense:
            return Ranking(self.name, [])
        anchor = task.dense[0][0]
        linked = task.store.linked_passages(anchor, task.hub_fraction)
        cosines = task.passage_cosines(linked)
        ranking = [task.dense[0]] + sorted(((p, cosines.get(p, 0.0)) for p in linked), key=lambda kv: -kv[1])
        via = task.own_relation
        return Ranking(self.name, ranking, via, chosen_relations(via, ranking, task.top_n))


@dataclass
class FusedRanker:
    """Reciprocal rank fusion of several rankings: a passage scores the sum over the rankings of
    weight / (k + its rank). The default without an LLM fuses HippoRAG 2's PPR, the chain ranking (each
    of which already holds dense similarity) and the hop from the top dense passage; with k = 5 the top
    of each ranking counts most.

    Args:
        rankers: The rankings fused (default: `PPRRanker()`, `ChainRanker()` and `HopRanker()`).
        weights: One per ranker (default: 1 each).
        k: The rank offset of the fusion.
    """

    rankers: Sequence[Ranker] = field(default_factory=lambda: (PPRRanker(), ChainRanker(), HopRanker()))
    weights: Optional[Sequence[float]] = None
    k: int = 5
    name: str = "fused"

    def __post_init__(self) -> None:
        if not self.rankers:
            raise ValueError("FusedRanker needs at least one ranker")
        if self.weights is not None and len(self.weights) != len(self.rankers):
            raise ValueError(f"FusedRanker: {len(self.weights)} weights for {len(self.rankers)} rankers; give one each")

    @property
    def needs_context(self) -> bool:
        return any(r.needs_context for r in self.rankers)

    def rank(self, task: RankTask) -> Ranking:
        return self._fuse(task, [r.rank(task) for r in self.rankers])

    async def arank(self, task: RankTask) -> Ranking:
        return self._fuse(task, [await arank(r, task) for r in self.rankers])

    def _fuse(self, task: RankTask, rankings: List[Ranking]) -> Ranking:
        weights = list(self.weights) if self.weights is not None else [1.0] * len(rankings)
        parts = [(r.name, [pid for pid, _ in r.passages], w) for r, w in zip(rankings, weights)]
        fused = fuse([(ids, w) for _, ids, w in parts], self.k)
        # a passage's reasons: those of the ranking that put it highest (on a tie, the longer chain)
        via: Dict[str, List[Scored]] = {}
        best: Dict[str, Tuple[int, int]] = {}
        for ranking in rankings:
            for rank, (pid, _) in enumerate(ranking.passages):
                reasons = ranking.via.get(pid)
                if reasons and (pid not in best or (rank, -len(reasons)) < best[pid]):
                    best[pid], via[pid] = (rank, -len(reasons)), reasons
        return Ranking(self.name, fused, via, chosen_relations(via, fused, task.top_n), parts=parts, k=self.k)


def fuse(parts: Sequence[Tuple[Sequence[str], float]], k: int) -> List[Tuple[str, float]]:
    """Reciprocal rank fusion: (passage id, sum of weight / (k + rank)), best first (ties: first seen)."""
    scores: Dict[str, float] = {}
    for ranked, weight in parts:
        for rank, pid in enumerate(ranked, start=1):
            scores[pid] = scores.get(pid, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])


def _min_max(values: np.ndarray) -> np.ndarray:
    """Values scaled to [0, 1] (all ones when they are all equal)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return values
    low, high = values.min(), values.max()
    return (values - low) / (high - low) if high > low else np.ones_like(values)


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
    """An LLM picks the useful relations among the candidates, and its pick joins the graph ranking as one
    more ranking in the fusion, with `weight` (against the base's own weights: 1 each by default): a passage the LLM
    chose rises, but a weak or random choice cannot push the best-ranked passages far down.

    The candidates offered are the best by the base ranking, not only by similarity: the most similar
    relation of each of its passages in its order (then the second of each, ...), at most `max_offered`
    lines and `max_offered_chars` characters.
    When the LLM fails or its answer names none of the offered relations, the ranking is exactly the
    base's.

    The pick takes the place of the base's fused rankings whose `name` is in `replaces` (the hop from
    the top passage: both say which passage comes next, and the LLM reads the relations to say it); if
    that would leave none of the base's rankings, they all stay. Measured offline on
    the 60 dev questions of each set: with an oracle's or a half-right pick this ranks better at R@2
    (+.03 to +.07 on MuSiQue) than adding the pick beside the hop; with 3 random picks, worse.
    """

    llm: LLM
    base: Ranker = field(default_factory=FusedRanker)
    prompt: PromptTemplate = field(default_factory=lambda: RERANK_PROMPT)
    weight: float = 0.6
    replaces: Tuple[str, ...] = ("hop",)
    max_offered: int = 40
    max_offered_chars: int = 6000
    name: str = "llm"

    @property
    def needs_context(self) -> bool:
        return self.base.needs_context

    def rank(self, task: RankTask) -> Ranking:
        base = self.base.rank(task)
        offered = self._offered(task, base)
        return self._merge(task, llm_rerank(self.llm, self.prompt, task.query, offered, task.top_n), base)

    async def arank(self, task: RankTask) -> Ranking:
        base = await arank(self.base, task)
        offered = await asyncio.to_thread(self._offered, task, base)
        picked = await allm_rerank(self.llm, self.prompt, task.query, offered, task.top_n)
        return self._merge(task, picked, base)

    def _offered(self, task: RankTask, base: Ranking) -> List[ScoredRelation]:
        """Breadth first down the base ranking: the most similar candidate relation of each passage, in
        the ranking's order, then the second of each, and so on, up to the caps."""
        own = task.passage_relations
        rows = [own[pid] for pid, _ in base.passages if pid in own]
        picked: Dict[int, float] = {}
        for depth in range(max((len(r) for r in rows), default=0)):
            for relations in rows:
                if depth < len(relations) and len(picked) < self.max_offered:
                    picked.setdefault(*relations[depth])
        texts = task.store.describe(list(picked))
        offered, chars = [], 0
        for r, score in picked.items():
            if r in texts:
                t = texts[r]
                relation = ScoredRelation(r, t.subject[:MAX_NAME], t.predicate[:MAX_NAME], t.object[:MAX_NAME], score)
                chars += len(relation.text) + 8
                if offered and chars > self.max_offered_chars:
                    break
                offered.append(relation)
        return offered

    def _merge(self, task: RankTask, picked, base: Ranking) -> Ranking:
        if not picked.by_llm:
            return base
        passages_of = dict(zip(task.neighbourhood.relation_ids(), task.neighbourhood.candidate_passages))
        chosen: Dict[str, List[Scored]] = {}  # the LLM's passages, in its order
        for relation in picked.relations:  # picks are offered candidates
            for pid in passages_of.get(relation.id, []):
                chosen.setdefault(pid, []).append((relation.id, relation.score))
        parts = base.parts or [(base.name, [pid for pid, _ in base.passages], 1.0)]
        kept = [(ids, w) for name, ids, w in parts if name not in self.replaces] or [(ids, w) for _, ids, w in parts]
        fused = fuse([*kept, (list(chosen), self.weight)], base.k)
        via = {pid: chosen.get(pid) or base.via.get(pid, []) for pid, _ in fused}
        picks = [(r.id, r.score) for r in picked.relations]
        return Ranking(self.name, fused, via, picks, picked.thought_process)


def ranker_named(name: str, graph_weight: float = 0.3, synonyms: bool = True) -> Ranker:
    """The ranker a string names: "fused" (PPR, chain and hop), "chain", "ppr" or "similarity"."""
    if name == "fused":
        return FusedRanker((PPRRanker(), ChainRanker(graph_weight=graph_weight, synonyms=synonyms), HopRanker()))
    if name == "chain":
        return ChainRanker(graph_weight=graph_weight, synonyms=synonyms)
    if name == "ppr":
        return PPRRanker()
    if name == "similarity":
        return SimilarityRanker()
    raise ValueError(f"reranker must be one of fused, chain, ppr, similarity, or a Ranker; got {name!r}")
