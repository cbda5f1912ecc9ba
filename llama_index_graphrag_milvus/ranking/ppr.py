"""`PPRRanker`: HippoRAG 2's personalized PageRank on the candidates' entity–passage subgraph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

import numpy as np

from llama_index_graphrag_milvus.graph.sparse import entity_passage_subgraph, personalized_pagerank, specificity
from llama_index_graphrag_milvus.ranking.base import Ranking, RankTask, chosen_relations


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
            restart[i] = float(np.mean(ws)) * specificity(hood.passage_counts(sub.entities[i : i + 1]))[0]
        pids = hood.passage_ids(sub.passages)
        cosines = task.passage_cosines(pids)
        restart[passages] = _min_max(np.array([cosines.get(p, 0.0) for p in pids])) * self.passage_weight
        rank = personalized_pagerank(sub.adjacency, restart, damping=self.damping)[passages]
        ranking = [(pids[i], float(rank[i])) for i in np.lexsort((np.array(pids), -rank))]  # ties by passage id
        reached = set(pids)
        ranking += [(pid, 0.0) for pid, _ in task.dense if pid not in reached]
        return Ranking(self.name, ranking, via, chosen_relations(via, ranking, task.top_n))


def _min_max(values: np.ndarray) -> np.ndarray:
    """Values scaled to [0, 1] (all ones when they are all equal)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return values
    low, high = values.min(), values.max()
    return (values - low) / (high - low) if high > low else np.ones_like(values)
