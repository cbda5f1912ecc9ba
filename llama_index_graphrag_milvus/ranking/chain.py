"""`ChainRanker`: dense similarity plus the best two-step chain of candidate relations through a passage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

from llama_index_graphrag_milvus.graph.sparse import chain_scores, passage_scores
from llama_index_graphrag_milvus.ranking.base import Ranking, RankTask, Scored, chosen_relations


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
        ranking = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))  # ties by passage id
        # a passage's own relation first, then the neighbour it chained with
        stated = {pid: chain[::-1] for pid, chain in chains.items()}
        return Ranking(self.name, ranking, stated, chosen_relations(chains, ranking, task.top_n))
