"""The candidate rankers of issue 21 as `Ranker` objects for `GraphRAGRetriever(reranker=...)`, so that the
offline figures of `benchmarks/r2_variants.py` can be checked through the public API (`benchmarks/r2_api.py`)
without touching the package.

`TopicRanker`: the passages *about* an entity the question names. The question's seed entities matched at
cosine >= `min_score` (without an LLM, the known names found verbatim in the question match themselves at
1.0), then every passage at least half of whose relations name one of them (the hop's "about", as
`graph.sparse.topic_links` reads it), by dense cosine. In a comparison ("Which film came out first, X or
Y?") these are X's and Y's own passages; in a bridge question, the first hop's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llama_index_graphrag_milvus.graph.sparse import ABOUT_SHARE, neighbours, unique
from llama_index_graphrag_milvus.ranking import ChainRanker, FusedRanker, HopRanker, PPRRanker, Ranking, RankTask
from llama_index_graphrag_milvus.ranking.base import chosen_relations


@dataclass
class TopicRanker:
    min_score: float = 0.99
    share: float = ABOUT_SHARE
    name: str = "topic"
    needs_context: bool = True

    def rank(self, task: RankTask) -> Ranking:
        hood = task.neighbourhood
        graph, cache = hood.graph, hood.cache
        ids = [e.id for e in task.seed_entities if e.score >= self.min_score]
        if not ids:
            return Ranking(self.name, [])
        positions = cache.entities.lookup(np.asarray(ids, dtype=np.int64))
        indptr = graph.passage_relation.indptr
        found = []
        for entity in unique(positions[positions >= 0]).tolist():
            stating = neighbours(graph.relation_passage, neighbours(graph.entity_relation, np.array([entity])))
            if len(stating) == 0:
                continue
            passages, counts = np.unique(stating, return_counts=True)
            found.append(passages[counts >= self.share * (indptr[passages + 1] - indptr[passages])])
        if not found:
            return Ranking(self.name, [])
        pids = cache.passage_ids(unique(np.concatenate(found)))
        cosines = task.passage_cosines(pids)
        ranking = sorted(((p, cosines.get(p, 0.0)) for p in pids), key=lambda kv: -kv[1])
        via = task.own_relation
        return Ranking(self.name, ranking, via, chosen_relations(via, ranking, task.top_n))


def ranker(name: str) -> FusedRanker:
    """The candidates by name: "default", "topic", "topic_ppr07" (topic, PPR damping .7), "topic_chain05"."""
    ppr = PPRRanker(damping=0.7) if name == "topic_ppr07" else PPRRanker()
    chain = ChainRanker(graph_weight=0.5) if name == "topic_chain05" else ChainRanker()
    parts = [ppr, chain, HopRanker()]
    if name != "default":
        parts.append(TopicRanker())
    return FusedRanker(tuple(parts), name=name)
