"""`ChainRanker`: dense similarity plus the best two-step chain of candidate relations through a passage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np
import scipy.sparse as sp

from llama_index_graphrag_milvus.graph.sparse import Graph, union, unique
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


def chain_scores(
    graph: Graph, relations: np.ndarray, similarities: np.ndarray, hub_passages: float, synonyms: bool = True
) -> Tuple[np.ndarray, np.ndarray]:
    """Score candidate relations as two-step chains: s(r) = sim(r) + max sim(r') over the candidates r'
    that share an entity with r, or a synonym of one. Entities stated in more than `hub_passages`
    passages ("United States", "2014") link too much to mean anything and do not chain.

    Returns the scores and, for each relation, the candidate index of its best neighbour (-1 if none).
    The products are |candidates|×|candidates|; the entities' passage counts (`Graph.passage_counts`)
    are computed over the whole graph once per snapshot.
    """
    relations = np.asarray(relations, dtype=np.int64)
    similarities = np.clip(np.asarray(similarities, dtype=np.float64), 0.0, None)
    if len(relations) == 0:
        return similarities, np.zeros(0, dtype=np.int64)
    incidence = graph.relation_entity[relations]  # C×E
    keep = np.asarray(graph.passage_counts[incidence.indices] <= hub_passages, dtype=np.float64)
    incidence = sp.csr_matrix((incidence.data * keep, incidence.indices, incidence.indptr), shape=incidence.shape)
    incidence.eliminate_zeros()
    # renumber the entities touched (the candidates' and their synonyms) 0..L-1, so that no product
    # below allocates anything the size of the whole graph
    ends = unique(incidence.indices)
    linked = graph.entity_entity[ends] if synonyms else None  # rows: ends; columns: their synonyms
    local = ends if linked is None else union(ends, linked.indices)
    incidence = sp.csr_matrix(
        (incidence.data, np.searchsorted(local, incidence.indices), incidence.indptr), shape=(len(relations), len(local))
    )
    with_synonyms = incidence
    if linked is not None:  # entity -> its synonyms, as L×L (the rows of `ends` at their local numbers)
        counts = np.zeros(len(local), dtype=np.int64)
        counts[np.searchsorted(local, ends)] = np.diff(linked.indptr)
        indptr = np.concatenate([[0], np.cumsum(counts)])
        synonyms_of = sp.csr_matrix((linked.data, np.searchsorted(local, linked.indices), indptr), shape=(len(local),) * 2)
        with_synonyms = incidence + incidence @ synonyms_of
    adjacency = (incidence @ with_synonyms.T).tocsr()
    adjacency = (adjacency + adjacency.T).tocsr()
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    best = np.full(len(relations), -1, dtype=np.int64)
    neighbour_score = np.zeros(len(relations))
    for i in range(len(relations)):  # rows are short: the candidates' local neighbourhoods
        row = adjacency.indices[adjacency.indptr[i] : adjacency.indptr[i + 1]]
        if len(row):
            j = row[np.argmax(similarities[row])]
            best[i], neighbour_score[i] = j, similarities[j]
    return similarities + neighbour_score, best


def passage_scores(
    graph: Graph, relations: np.ndarray, relation_scores: np.ndarray
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every passage stating one of `relations`: its best relation score and which relation (candidate
    index) gave it. Returns (passage positions, scores, best relation index)."""
    relations = np.asarray(relations, dtype=np.int64)
    block = graph.relation_passage[relations].tocoo()  # C×P
    if block.nnz == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=np.int64)
    scores = np.asarray(relation_scores, dtype=np.float64)[block.row]
    order = np.lexsort((-scores, block.col))  # by passage, best score first
    cols, first = np.unique(block.col[order], return_index=True)
    winners = order[first]
    return cols.astype(np.int64), scores[winners], block.row[winners].astype(np.int64)
