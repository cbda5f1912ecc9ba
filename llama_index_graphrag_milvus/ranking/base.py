"""The ranking protocol: what a ranker reads (`RankTask`), what it returns (`Ranking`), the `Ranker`
protocol itself, and the reciprocal rank fusion that combines rankings (`fuse`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Dict, List, Optional, Protocol, Sequence, Tuple

from llama_index_graphrag_milvus.backends.base import Neighbourhood
from llama_index_graphrag_milvus.schema import ScoredEntity

if TYPE_CHECKING:
    from llama_index_graphrag_milvus.store import MilvusGraphStore

#: Characters of a subject, predicate or object shown to the LLM (a name from ingested text can be long).
MAX_NAME = 100

#: A relation as a ranking names it: (relation id, score).
Scored = Tuple[int, float]


@dataclass(frozen=True)
class RankTask:
    """What a ranker reads: the question, its candidates and the adjacency around them."""

    query: str
    vector: Sequence[float]
    neighbourhood: Neighbourhood
    dense: List[Tuple[str, float]]  # dense retrieval's (passage id, cosine), best first
    seed_entities: List[ScoredEntity]
    seed_relations: List[Scored]
    top_n: int  # relations to name as chosen
    dense_seed_k: int  # top dense passages whose relations joined the candidates
    store: "MilvusGraphStore"
    hub_fraction: float = 0.02  # the retriever's: entities in more of the passages are hubs
    _cosines: Dict[str, float] = field(default_factory=dict, compare=False, repr=False)

    def candidates(self) -> List[Scored]:
        """The candidates as (relation id, cosine), best first."""
        return list(self._candidates)

    @cached_property
    def _candidates(self) -> List[Scored]:
        hood = self.neighbourhood
        return list(zip(hood.relation_ids(), hood.similarities.tolist()))

    @cached_property
    def passage_relations(self) -> Dict[str, List[Scored]]:
        """Each candidate passage's own candidate relations, best first (read once per retrieval)."""
        via: Dict[str, List[Scored]] = {}
        for relation, passages in zip(self._candidates, self.neighbourhood.candidate_passages):
            for pid in passages:
                via.setdefault(pid, []).append(relation)
        return via

    @cached_property
    def own_relation(self) -> Dict[str, List[Scored]]:
        """Each candidate passage's most similar candidate relation (as a one-item list): the reason a
        ranking that does not chain gives for it."""
        return {pid: relations[:1] for pid, relations in self.passage_relations.items()}

    def passage_cosines(self, passage_ids: Sequence[str]) -> Dict[str, float]:
        """The question's cosine to each passage (dense retrieval's, else asked once per retrieval)."""
        if not self._cosines:
            self._cosines.update(self.dense)
        missing = [p for p in passage_ids if p not in self._cosines]
        if missing:
            self._cosines.update(self.store.search.passage_similarities(self.vector, missing))
        return {p: self._cosines[p] for p in passage_ids if p in self._cosines}


@dataclass
class Ranking:
    """Passages best first, with the relations that selected each (a passage's own relation first), and
    the relations chosen: the chain followed, from the question's side."""

    name: str
    passages: List[Tuple[str, float]]
    via: Dict[str, List[Scored]] = field(default_factory=dict)
    chosen: List[Scored] = field(default_factory=list)
    thought_process: Optional[str] = None
    #: For a fusion: the rankings fused as (name, passage ids, weight), and the fusion's k (an LLM's
    #: choice joins them).
    parts: Optional[List[Tuple[str, List[str], float]]] = None
    k: int = 5
    #: With an LLM: whether its pick led the ranking or only voted in the fusion, and why.
    decision: Optional[str] = None


class Ranker(Protocol):
    """Orders the passages of a retrieval from its candidate relations."""

    name: str
    #: Whether the expansion should add the relations of the top dense passages and of the candidates'
    #: synonyms (graph rankings use them; the similarity order does not).
    needs_context: bool

    def rank(self, task: RankTask) -> Ranking:
        ...


async def arank(ranker: Ranker, task: RankTask) -> Ranking:
    """`ranker.arank(task)` if it has one (a ranker that waits on an LLM), else `ranker.rank(task)`, here: a
    graph ranking is Python and numpy work under the GIL, which a thread would not speed up (measured in
    `benchmarks/serving.py`)."""
    if hasattr(ranker, "arank"):
        return await ranker.arank(task)  # type: ignore[attr-defined]
    return ranker.rank(task)


def chosen_relations(via: Dict[str, List[Scored]], passages: List[Tuple[str, float]], n: int) -> List[Scored]:
    """The relations behind the top passages, in ranking order, without repeats: the chain followed."""
    seen: Dict[int, Scored] = {}
    for pid, _ in passages:
        for relation in via.get(pid, []):
            seen.setdefault(relation[0], relation)
        if len(seen) >= n:
            break
    return list(seen.values())


def fuse(parts: Sequence[Tuple[Sequence[str], float]], k: int) -> List[Tuple[str, float]]:
    """Reciprocal rank fusion: (passage id, sum of weight / (k + rank)), best first (ties: first seen)."""
    scores: Dict[str, float] = {}
    for ranked, weight in parts:
        for rank, pid in enumerate(ranked, start=1):
            scores[pid] = scores.get(pid, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])
