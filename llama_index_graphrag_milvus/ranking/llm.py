"""`LLMRanker`: an LLM picks relations among the best of a graph ranking; its pick joins the fusion."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Set, Tuple

import numpy as np
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate

from llama_index_graphrag_milvus.ranking.picks import confirmed_chain, related_picks
from llama_index_graphrag_milvus.llm.guard import run_sync
from llama_index_graphrag_milvus.llm.prompts import RERANK_PROMPT
from llama_index_graphrag_milvus.llm.rerank import llm_rerank
from llama_index_graphrag_milvus.ranking.base import Ranker, Ranking, RankTask, Scored, arank, fuse
from llama_index_graphrag_milvus.ranking.fused import FusedRanker
from llama_index_graphrag_milvus.ranking.offer import offered_relations
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
      Euler" for "Euler"; else the nearest) and walks away from it, each next pick sharing a specific
      entity (not a question entity, not a hub) with the last (`graph.chains.confirmed_chain`). The
      other picks vote if the graph relates them to the question or to another pick (they name a
      question entity, or share a specific entity with another pick: `graph.chains.related_picks`);
      an isolated pick, what most random picks are, is ignored.
    - "always": every pick's passages first, in the LLM's order.
    - "vote": every pick only votes.

    To vote is to join the graph rankings' fusion as one more ranking, with `weight` (1: as much as each
    of the others), beside them (`replaces` names rankings the vote would take the place of: none by
    default). Then a random pick cannot push the best-ranked passages far down, while a chain the graph
    confirms lifts the passage that answers to the top. Measured with scripted LLMs on the dev sets
    (`benchmarks/llm_trust.py`): see `docs/studies/llm_trust.md` and `docs/guides/llm.md`.

    The candidates offered are those of the base ranking's top `max_offered_passages` passages, breadth
    first (each one's first relation in the ranking's order, then each one's second, ...), a passage's
    statements before its topic links (`ranking.offer`), at most `max_offered` lines and
    `max_offered_chars` characters. When the LLM fails or its answer names none of the offered
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
    max_offered_passages: int = 15
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
        return offered_relations(task, base, self.max_offered_passages, self.max_offered, self.max_offered_chars)

    def _merge(self, task: RankTask, picked, base: Ranking) -> Ranking:
        if not picked.relations:
            return base
        hood = task.neighbourhood
        passages_of = dict(zip(hood.relation_ids(), hood.candidate_passages))
        picks = [(r.id, r.score) for r in picked.relations]  # picks are offered candidates
        leading, voters, decision = self._judged(task, [r for r, _ in picks])
        chosen = _passages([p for p in picks if p[0] in voters], passages_of)  # the voting passages, in its order
        parts = base.parts or [(base.name, [pid for pid, _ in base.passages], 1.0)]
        kept = [(ids, w) for name, ids, w in parts if name not in self.replaces] or [(ids, w) for _, ids, w in parts]
        fused = fuse([*kept, (list(chosen), self.weight)] if chosen else kept, base.k)
        lead = _passages([p for p in picks if p[0] in set(leading)], passages_of, order=leading)
        top = fused[0][1] if fused else 0.0
        ranking = [(pid, top + (len(lead) - i) / len(lead)) for i, pid in enumerate(lead)]
        ranking += [(pid, score) for pid, score in fused if pid not in lead]
        via = {pid: lead.get(pid) or chosen.get(pid) or base.via.get(pid, []) for pid, _ in ranking}
        return Ranking(self.name, ranking, via, picks, picked.thought_process, decision=decision)

    def _judged(self, task: RankTask, picks: List[int]) -> Tuple[List[int], Set[int], str]:
        """The picks that go first, those that vote, and why (the rule `trust` names)."""
        if self.trust == "always":
            return picks, set(), f"led: llm_trust='always' puts the LLM's {len(picks)} picks first"
        if self.trust == "vote":
            return [], set(picks), "voted: llm_trust='vote' fuses the LLM's picks with the graph rankings"
        hood, ids_at = task.neighbourhood, task.neighbourhood.cache.relations.ids_at
        positions = hood.cache.relations.lookup(np.array(picks, dtype=np.int64))
        positions = positions[positions >= 0]
        question = hood.cache.entities.lookup(np.array(_named(task), dtype=np.int64))
        question = question[question >= 0]
        chain = ids_at(np.array(confirmed_chain(hood.graph, positions, question, hood.hub_passages), dtype=np.int64))
        related = ids_at(np.array(related_picks(hood.graph, positions, question, hood.hub_passages), dtype=np.int64))
        voters = set(related) - set(chain)
        ignored = len(set(picks) - set(chain) - voters)
        if not chain and not voters:
            return [], voters, f"ignored: the graph ties none of the {len(picks)} picks to the question or to another pick"
        aside = f"; {ignored} of the {len(picks)} picks, tied to neither the question nor another pick, are ignored"
        aside = aside if ignored else ""
        if chain:
            return chain, voters, f"led: {len(chain)} of the {len(picks)} picks chain from the question's entities{aside}"
        return [], voters, f"voted: no two picks chain away from the question's entities, so the graph cannot confirm them{aside}"


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
