"""`FusedRanker`, the default ranking (PPR, chain, hop and topic, fused), and the rankers named by a string."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from llama_index_graphrag_milvus.ranking.base import Ranker, Ranking, RankTask, Scored, chosen_relations, fuse
from llama_index_graphrag_milvus.ranking.chain import ChainRanker
from llama_index_graphrag_milvus.ranking.hop import HopRanker
from llama_index_graphrag_milvus.ranking.ppr import PPRRanker
from llama_index_graphrag_milvus.ranking.similarity import SimilarityRanker
from llama_index_graphrag_milvus.ranking.topic import TopicRanker


@dataclass
class FusedRanker:
    """Reciprocal rank fusion of several rankings: a passage scores the sum over the rankings of
    weight / (k + its rank). The default without an LLM fuses HippoRAG 2's PPR, the chain ranking (each
    of which already holds dense similarity), the hop from the top dense passage and the passages about
    the names the question states (topic); with k = 5 the top of each ranking counts most.

    Args:
        rankers: The rankings fused (default: `PPRRanker()`, `ChainRanker()`, `HopRanker()` and
            `TopicRanker()`).
        weights: One per ranker (default: 1 each).
        k: The rank offset of the fusion.
    """

    rankers: Sequence[Ranker] = field(default_factory=lambda: (PPRRanker(), ChainRanker(), HopRanker(), TopicRanker()))
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
        rankings = [r.rank(task) for r in self.rankers]
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


@dataclass
class ThenDense:
    """A ranker that orders only some passages (`HopRanker`, `TopicRanker`), then dense retrieval's order
    for the rest: how such a ranker is used alone (`ranker="hop"` is `ThenDense(HopRanker())`).

    Attributes:
        ranker: The ranker whose passages come first.
    """

    ranker: Ranker

    @property
    def name(self) -> str:
        return self.ranker.name

    @property
    def needs_context(self) -> bool:
        return self.ranker.needs_context

    def rank(self, task: RankTask) -> Ranking:
        ranking = self.ranker.rank(task)
        seen = {pid for pid, _ in ranking.passages}
        ranking.passages = ranking.passages + [(p, s) for p, s in task.dense if p not in seen]
        return ranking


def ranker_named(name: str, graph_weight: float = 0.3, synonyms: bool = True) -> Ranker:
    """The ranker a string names: "fused" (PPR, chain, hop and topic: the default), "chain", "ppr",
    "similarity", or "hop" / "topic" (each alone, then dense retrieval's passages)."""
    chain = ChainRanker(graph_weight=graph_weight, synonyms=synonyms)
    named = {
        "fused": lambda: FusedRanker((PPRRanker(), chain, HopRanker(), TopicRanker())),
        "chain": lambda: chain,
        "ppr": PPRRanker,
        "similarity": SimilarityRanker,
        "hop": lambda: ThenDense(HopRanker()),
        "topic": lambda: ThenDense(TopicRanker()),
    }
    if name not in named:
        raise ValueError(f"ranker must be one of {', '.join(named)}, or a Ranker; got {name!r}")
    return named[name]()
