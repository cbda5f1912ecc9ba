"""`TopicRanker`: the passages about an entity the question names (its own passage, in a comparison)."""

from __future__ import annotations

from dataclasses import dataclass

from llama_index_graphrag_milvus.ranking.base import Ranking, RankTask, chosen_relations


@dataclass
class TopicRanker:
    """The passages about an entity the question names, by dense similarity: the seed entities found for
    a mention at cosine ≥ `min_score` (without an LLM, the known names the question states verbatim),
    then every passage at least half of whose relations name one of them (the hop's "about",
    `Neighbourhood.passages_about`). In "Which film came out first, X or Y?" these are X's and Y's own
    passages, which a look-alike of the first can push below rank 2; in a bridge question, the first
    hop's. Only those passages are ranked: it is meant to be fused (the default fusion's fourth ranking).

    Chosen by cross-validation over the three dev sets pooled (`docs/studies/ranking.md`):
    +.042 / +.047 R@2 held out on HotpotQA / 2Wiki, within a question on MuSiQue; `min_score` .9 or .99
    give the same figures but for one question."""

    min_score: float = 0.99
    name: str = "topic"
    needs_context: bool = True

    def rank(self, task: RankTask) -> Ranking:
        named = sorted({e.id for e in task.seed_entities if e.score >= self.min_score})
        pids = task.neighbourhood.passages_about(named)
        cosines = task.passage_cosines(pids)
        ranking = sorted(((p, cosines.get(p, 0.0)) for p in pids), key=lambda kv: (-kv[1], kv[0]))
        via = task.own_relation
        return Ranking(self.name, ranking, via, chosen_relations(via, ranking, task.top_n))
