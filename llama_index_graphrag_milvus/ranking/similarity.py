"""`SimilarityRanker`: the notebook's order, the passages of the relations most similar to the question."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

from llama_index_graphrag_milvus.ranking.base import Ranking, RankTask, Scored, chosen_relations


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
