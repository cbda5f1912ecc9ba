"""`LLMRanker`: an LLM picks relations among the best of a graph ranking; its pick joins the fusion."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate

from llama_index_graphrag_milvus.llm.prompts import RERANK_PROMPT
from llama_index_graphrag_milvus.llm.rerank import allm_rerank, llm_rerank
from llama_index_graphrag_milvus.ranking.base import MAX_NAME, Ranker, Ranking, RankTask, Scored, arank, fuse
from llama_index_graphrag_milvus.ranking.fused import FusedRanker
from llama_index_graphrag_milvus.schema import ScoredRelation


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
