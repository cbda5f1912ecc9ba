"""`LLMRanker`: an LLM picks relations among the best of a graph ranking; its pick joins the fusion."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import numpy as np
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate

from llama_index_graphrag_milvus.graph.chains import confirmed_chain
from llama_index_graphrag_milvus.llm.guard import run_sync
from llama_index_graphrag_milvus.llm.prompts import RERANK_PROMPT
from llama_index_graphrag_milvus.llm.rerank import llm_rerank
from llama_index_graphrag_milvus.ranking.base import MAX_NAME, Ranker, Ranking, RankTask, Scored, arank, fuse
from llama_index_graphrag_milvus.ranking.fused import FusedRanker
from llama_index_graphrag_milvus.schema import ScoredRelation, normalize_name


#: How far the LLM's pick is trusted: its passages always first; first when the graph confirms them as a
#: chain from the question (else a vote); or only a vote in the fusion.
TRUST = ("always", "confirmed", "vote")
#: A seed entity at least this close to a mention is one the question names (the same name).
NAMED = 0.99


@dataclass
class LLMRanker:
    """An LLM picks the useful relations among the candidates, and the graph decides how far to trust the
    pick (`trust`):

    - "confirmed" (the default): the picks the graph confirms as a chain from the question go first,
      their passages in the LLM's order: a chain of at least two picks that starts at an entity the
      question names (a seed entity matching a mention exactly, or holding it as a word: "Leonhard
      Euler" for "Euler"; else the nearest) and walks away from it, each next pick sharing a specific entity (not a question
      entity, not a hub) with the last (`graph.chains.confirmed_chain`). The other picks only vote.
    - "always": every pick's passages first, in the LLM's order.
    - "vote": the pick only votes.

    To vote is to join the graph rankings' fusion as one more ranking, with `weight` (1: as much as each
    of the others), beside them (`replaces` names rankings the vote would take the place of: none by
    default). Then a random pick cannot push the best-ranked passages far down, while a chain the graph
    confirms lifts the passage that answers to the top. Measured with scripted LLMs on the dev sets
    (`benchmarks/llm_trust.py`): see `docs/studies/llm_trust.md` and `docs/guides/llm.md`.

    The candidates offered are the best by the base ranking, not only by similarity: the most similar
    relation of each of its passages in its order (then the second of each, ...), at most `max_offered`
    lines and `max_offered_chars` characters. When the LLM fails or its answer names none of the offered
    relations, the ranking is exactly the base's.
    """

    llm: LLM
    base: Ranker = field(default_factory=FusedRanker)
    prompt: PromptTemplate = field(default_factory=lambda: RERANK_PROMPT)
    weight: float = 1.0
    replaces: Tuple[str, ...] = ()
    trust: str = "confirmed"
    max_offered: int = 40
    max_offered_chars: int = 6000
    name: str = "llm"

    def __post_init__(self) -> None:
        check_trust(self.trust)

    @property
    def needs_context(self) -> bool:
        return self.base.needs_context

    def rank(self, task: RankTask) -> Ranking:
        return run_sync(self.arank(task))

    async def arank(self, task: RankTask) -> Ranking:
        base = await arank(self.base, task)
        offered = self._offered(task, base)
        picked = await llm_rerank(self.llm, self.prompt, task.query, offered, task.top_n)
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
        if not picked.relations:
            return base
        hood = task.neighbourhood
        passages_of = dict(zip(hood.relation_ids(), hood.candidate_passages))
        picks = [(r.id, r.score) for r in picked.relations]  # picks are offered candidates
        leading, decision = self._leading(task, [r for r, _ in picks])
        voting = [p for p in picks if p[0] not in set(leading)]
        chosen = _passages(voting, passages_of)  # the LLM's other passages, in its order
        parts = base.parts or [(base.name, [pid for pid, _ in base.passages], 1.0)]
        kept = [(ids, w) for name, ids, w in parts if name not in self.replaces] or [(ids, w) for _, ids, w in parts]
        fused = fuse([*kept, (list(chosen), self.weight)] if chosen else kept, base.k)
        lead = _passages([p for p in picks if p[0] in set(leading)], passages_of, order=leading)
        top = fused[0][1] if fused else 0.0
        ranking = [(pid, top + (len(lead) - i) / len(lead)) for i, pid in enumerate(lead)]
        ranking += [(pid, score) for pid, score in fused if pid not in lead]
        via = {pid: lead.get(pid) or chosen.get(pid) or base.via.get(pid, []) for pid, _ in ranking}
        return Ranking(self.name, ranking, via, picks, picked.thought_process, decision=decision)

    def _leading(self, task: RankTask, picks: List[int]) -> Tuple[List[int], str]:
        """The picks that go first, and why (the rule `trust` names)."""
        if self.trust == "always":
            return picks, f"led: llm_trust='always' puts the LLM's {len(picks)} picks first"
        if self.trust == "vote":
            return [], "voted: llm_trust='vote' fuses the LLM's picks with the graph rankings"
        hood = task.neighbourhood
        positions = hood.cache.relations.lookup(np.array(picks, dtype=np.int64))
        question = hood.cache.entities.lookup(np.array(_named(task), dtype=np.int64))
        chain = confirmed_chain(hood.graph, positions[positions >= 0], question[question >= 0], hood.hub_passages)
        if not chain:
            return [], "voted: no two picks chain away from the question's entities, so the graph cannot confirm them"
        ids = hood.cache.relations.ids_at(np.array(chain, dtype=np.int64))
        return ids, f"led: {len(ids)} of the {len(picks)} picks chain from the question's entities"


def check_trust(trust: str) -> None:
    """Raise a ValueError naming the allowed values unless `trust` is one of `TRUST`."""
    if trust not in TRUST:
        raise ValueError(f"llm_trust must be one of {', '.join(TRUST)}; got {trust!r}")


def _named(task: RankTask) -> List[int]:
    """The entities the question names: the seed entities matching a mention exactly (cosine ≥ .99), and
    those whose name holds such a name as a word ("Leonhard Euler" for "Euler"); else the seed nearest
    to a mention."""
    exact = [e for e in task.seed_entities if e.score >= NAMED]
    if not exact:
        return [max(task.seed_entities, key=lambda e: e.score).id] if task.seed_entities else []
    words = [re.compile(rf"(?<!\w){re.escape(normalize_name(e.name))}(?!\w)") for e in exact if e.name]
    return [e.id for e in task.seed_entities if e.score >= NAMED or any(w.search(normalize_name(e.name)) for w in words)]


def _passages(picks, passages_of, order=None) -> Dict[str, List[Scored]]:
    """The passages stating the picks, each with the picks it states, in the order of `order` (relation
    ids; default: the picks' own)."""
    score = dict(picks)
    found: Dict[str, List[Scored]] = {}
    for rid in order if order is not None else [r for r, _ in picks]:
        for pid in passages_of.get(rid, []):
            found.setdefault(pid, []).append((rid, score[rid]))
    return found
