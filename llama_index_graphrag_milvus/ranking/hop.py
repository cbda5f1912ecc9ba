"""`HopRanker`: a bridge question's second hop, from the top dense passage to the passages about a name it states."""

from __future__ import annotations

from dataclasses import dataclass

from llama_index_graphrag_milvus.ranking.base import Ranking, RankTask, chosen_relations


@dataclass
class HopRanker:
    """The second hop of a bridge question: the top dense passage, then the passages about an entity it
    names (`Neighbourhood.linked_passages`, as `MilvusGraphStore.linked_passages`: at least half of their relations name it; hubs not
    followed), by dense similarity. Only those passages are ranked: it is meant to be fused. With no
    passage to hop to, the ranking is the top passage alone, which then counts once more in the fusion."""

    name: str = "hop"
    needs_context: bool = True

    def rank(self, task: RankTask) -> Ranking:
        if not task.dense:
            return Ranking(self.name, [])
        anchor = task.dense[0][0]
        linked = task.neighbourhood.linked_passages(anchor)
        cosines = task.passage_cosines(linked)
        ranking = [task.dense[0]] + sorted(((p, cosines.get(p, 0.0)) for p in linked), key=lambda kv: -kv[1])
        via = task.own_relation
        return Ranking(self.name, ranking, via, chosen_relations(via, ranking, task.top_n))
