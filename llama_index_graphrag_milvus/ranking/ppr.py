"""`PPRRanker`: HippoRAG 2's personalized PageRank on the candidates' entity–passage subgraph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np
import scipy.sparse as sp

from llama_index_graphrag_milvus.graph.sparse import Graph, unique
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


@dataclass(frozen=True)
class Subgraph:
    """A local entity–relation–passage graph: node k of `adjacency` is entity `entities[k]` for
    k < len(entities), then relation `relations[k - len(entities)]`, then the passages."""

    adjacency: sp.csr_matrix
    entities: np.ndarray
    relations: np.ndarray
    passages: np.ndarray

    def slices(self) -> Tuple[slice, slice, slice]:
        e, r = len(self.entities), len(self.relations)
        return slice(0, e), slice(e, e + r), slice(e + r, e + r + len(self.passages))


def entity_passage_subgraph(graph: Graph, relations: np.ndarray) -> Subgraph:
    """HippoRAG 2's graph, around candidate `relations`: their entities and their passages, an entity linked
    to a passage when the passage states a candidate relation of that entity (no relation nodes, so one
    hop is one step). Only the candidates' rows are read: its cost follows the candidates, whatever the
    degree of their entities."""
    relations = np.asarray(relations, dtype=np.int64)
    re = graph.relation_entity[relations]  # C×E, the candidates' rows only
    rp = graph.relation_passage[relations]  # C×P
    entities, passages = unique(re.indices), unique(rp.indices)
    re = sp.csr_matrix((np.ones(re.nnz), np.searchsorted(entities, re.indices), re.indptr), shape=(len(relations), len(entities)))
    rp = sp.csr_matrix((np.ones(rp.nnz), np.searchsorted(passages, rp.indices), rp.indptr), shape=(len(relations), len(passages)))
    ep = (re.T @ rp).tocsr()
    ep.data[:] = 1.0
    adjacency = sp.bmat([[None, ep], [ep.T, None]], format="csr")
    return Subgraph(adjacency.astype(np.float64), entities, np.zeros(0, dtype=np.int64), passages)


def personalized_pagerank(
    adjacency: sp.csr_matrix, personalization: np.ndarray, damping: float = 0.5, iterations: int = 50, tol: float = 1e-9
) -> np.ndarray:
    """Personalized PageRank by power iteration on a small symmetric weighted adjacency.

    `damping` is the probability of following an edge (1 - damping restarts at the personalization).
    Returns a distribution over the nodes; zeros if the personalization is all zero.
    """
    total = personalization.sum()
    if total <= 0:
        return np.zeros_like(personalization, dtype=np.float64)
    restart = personalization / total
    out_weight = np.asarray(adjacency.sum(axis=1)).ravel()
    inverse = np.divide(1.0, out_weight, out=np.zeros_like(out_weight), where=out_weight > 0)
    transition = (sp.diags(inverse) @ adjacency).T.tocsr()  # column-stochastic where edges exist
    dangling = out_weight == 0
    rank = restart.copy()
    for _ in range(iterations):
        step = transition @ rank + rank[dangling].sum() * restart  # dangling mass restarts
        new = (1 - damping) * restart + damping * step
        if np.abs(new - rank).sum() < tol:
            return new
        rank = new
    return rank


def specificity(passage_counts: np.ndarray) -> np.ndarray:
    """1 / the number of passages each entity appears in (HippoRAG's node specificity)."""
    return 1.0 / np.maximum(1, np.asarray(passage_counts))
