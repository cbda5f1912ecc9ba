"""`Explanation`: what one Graph RAG retrieval did, printable and drawable.

    explanation = retriever.explain("What contribution did the son of Euler's teacher make?")
    print(explanation)                 # seeds, candidates, chosen relations (and the LLM's reasoning), passages
    explanation.to_png("subgraph.png")  # the subgraph (`drawing.py`); a notebook shows it inline
    explanation.drawn()                # what the picture shows, in the text's terms (`Drawn`)

Drawing needs the `viz` extra (networkx and matplotlib): ``pip install 'llama-index-graphrag-milvus[viz]'``.
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from llama_index.core.schema import NodeWithScore

from llama_index_graphrag_milvus.explain.drawn import MAX_DRAWN_RELATIONS, Drawn, drawn
from llama_index_graphrag_milvus.schema import Retrieval, ScoredRelation, entity_id

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from llama_index_graphrag_milvus.store import MilvusGraphStore

__all__ = ["Explanation"]


class Explanation:
    """One retrieval, step by step: from the question's entities to the passages returned.

    It shows a `Retrieval` (the record `GraphRAGRetriever.trace` returns), with the texts of its
    candidate relations read from the store.

    Attributes:
        retrieval: The `Retrieval` this explains; its fields are also readable here (`query`,
            `mentions`, `seed_entities`, `seed_relations`, `chosen`, `thought_process`, `reranker`).
        candidates: The relations reached by expanding the seeds, with their texts, best first (cosine to
            the question).
        passages: The passages returned; `relations_of(passage)` gives the relations that chose each.
        synonyms: Pairs of entity names linked as synonyms in the store, among the entities this
            explanation names; the drawing shows each linked group as one entity.
    """

    def __init__(
        self, retrieval: Retrieval, candidates: List[ScoredRelation], synonyms: Sequence[Tuple[str, str]] = ()
    ) -> None:
        self.retrieval = retrieval
        self.candidates = sorted(candidates, key=lambda r: -r.score)
        self.synonyms = list(synonyms)

    @classmethod
    def of(cls, run: Retrieval, store: "MilvusGraphStore") -> "Explanation":
        """Explain `run`, reading the texts of its candidates and the synonym links of the entities it
        names from `store`."""
        texts = store.describe([c.id for c in run.candidates])
        candidates = [
            ScoredRelation(c.id, texts[c.id].subject, texts[c.id].predicate, texts[c.id].object, c.score, c.passage_ids)
            for c in run.candidates
            if c.id in texts
        ]
        return cls(run, candidates, _synonyms(store, run, candidates))

    query = property(lambda self: self.retrieval.query)
    mentions = property(lambda self: self.retrieval.mentions)
    seed_entities = property(lambda self: self.retrieval.seed_entities)
    seed_relations = property(lambda self: self.retrieval.seed_relations)
    chosen = property(lambda self: self.retrieval.chosen)
    thought_process = property(lambda self: self.retrieval.thought_process)
    reranker = property(lambda self: self.retrieval.reranker)
    llm_decision = property(lambda self: self.retrieval.llm_decision)
    passages = property(lambda self: self.retrieval.nodes)

    @property
    def by_llm(self) -> bool:
        """Whether an LLM chose the relations."""
        return self.reranker == "llm"

    @property
    def chosen_by(self) -> str:
        """Who chose the relations, in the words of the text and of the picture's legend: "the LLM
        rerank" or "the graph rerank, chain"."""
        return "the LLM rerank" if self.by_llm else f"the graph rerank, {self.reranker or 'none'}"

    def relations_of(self, passage: NodeWithScore) -> List[ScoredRelation]:
        """The relations that chose a returned passage."""
        return list(self.retrieval.via.get(passage.node.node_id, []))

    # text ---------------------------------------------------------------------------------------
    def to_text(self, max_candidates: int = 10, width: int = 100) -> str:
        """The explanation as compact text, one section per step."""
        lines = [f"Question: {self.query}", ""]
        lines.append("Mentions: " + (", ".join(self.mentions) or "(none)"))
        seeds = sorted(self.seed_entities, key=lambda e: -e[2])
        lines.append(
            f"Seed entities ({len(seeds)}): "
            + (", ".join(f"{name or eid} {score:.2f}" for eid, name, score in seeds) or "(none)")
        )
        merged = [label for label in self.drawn().entities.values() if label.endswith(")")]
        if merged:  # synonym links in the store, and short forms of a name ("Euler", "Leonhard Euler")
            lines.append("Drawn as one entity: " + "; ".join(merged))
        lines.append(f"Seed relations ({len(self.seed_relations)}, nearest to the question):")
        lines += [f"  {r.score:.3f}  {r}" for r in self.seed_relations]
        shown = self.candidates[:max_candidates]
        order = "the LLM's order" if self.by_llm else "cosine to the question"
        lines.append(f"Candidates after expansion: {len(self.candidates)}; the best {len(shown)} ({order}):")
        lines += [f"  {r.score:.3f}  {r}" for r in shown]
        lines.append(f"Chosen by {self.chosen_by} ({len(self.chosen)}):")
        lines += [f"  {n}. {r}" for n, r in enumerate(self.chosen, start=1)]
        if self.llm_decision:
            lines.append(f"The LLM's pick {self.llm_decision}")
        if self.thought_process:
            lines.append("Reasoning:")
            lines += textwrap.wrap(" ".join(self.thought_process.split()), width, initial_indent="  ",
                                   subsequent_indent="  ")
        lines.append(f"Passages ({len(self.passages)}), each with the relations behind it (via):")
        for rank, hit in enumerate(self.passages, start=1):
            text = textwrap.shorten(hit.node.get_content(), max(40, width - 30), placeholder=" ...")
            score = "" if hit.score is None else f" {hit.score:.3f}"
            lines.append(f"  {rank}. [{_doc(hit)}]{score}  {text}")
            lines += [f"       via {relation}" for relation in self.relations_of(hit)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return (
            f"Explanation(query={self.query!r}, seed_entities={len(self.seed_entities)}, "
            f"candidates={len(self.candidates)}, chosen={len(self.chosen)}, passages={len(self.passages)}, "
            f"reranker={self.reranker!r})"
        )

    # drawing ------------------------------------------------------------------------------------
    def drawn(self, max_relations: int = MAX_DRAWN_RELATIONS) -> Drawn:
        """What `figure(max_relations)` draws: the relations by kind, the entities (synonyms as one) and
        the relations linked to each passage."""
        return drawn(self, max_relations)

    def figure(self, max_relations: int = MAX_DRAWN_RELATIONS) -> "Figure":
        """The subgraph as a matplotlib `Figure` (not attached to pyplot): entities, the relations drawn
        (chosen, behind the passages, seeds, then the best candidates up to `max_relations`) and the
        passages returned, linked to the relations behind them (see `drawn`)."""
        from llama_index_graphrag_milvus.explain.drawing import draw

        return draw(self, max_relations)

    def to_png(self, path: Union[str, Path], max_relations: int = MAX_DRAWN_RELATIONS, dpi: int = 150) -> Path:
        """Draw the subgraph (see `figure`) into a PNG file; returns its path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.figure(max_relations).savefig(path, dpi=dpi, facecolor="white")
        return path

    def _repr_png_(self) -> Optional[bytes]:
        """Inline display in Jupyter (nothing when networkx or matplotlib are missing: the text shows)."""
        try:
            figure = self.figure()
        except ImportError:
            return None
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100, facecolor="white")
        return buffer.getvalue()


def _doc(hit: NodeWithScore) -> str:
    return str(hit.node.ref_doc_id or hit.node.node_id)




def _synonyms(store: "MilvusGraphStore", run: Retrieval, candidates: List[ScoredRelation]) -> List[Tuple[str, str]]:
    """The synonyms (`store.synonyms_of`) among the entities `run` names, as pairs of names."""
    names: Dict[int, str] = {eid: name for eid, name, _ in run.seed_entities if name}
    relations: Iterable[ScoredRelation] = [*candidates, *run.seed_relations, *run.chosen,
                                           *(r for via in run.via.values() for r in via)]
    for relation in relations:
        for name in (relation.subject, relation.object):
            if name:
                names.setdefault(entity_id(name), name)
    pairs = {tuple(sorted((a, b))) for a, others in store.synonyms_of(sorted(names)).items() for b in others if b in names}
    return sorted({tuple(sorted((names[a], names[b]))) for a, b in pairs if a != b})  # type: ignore[misc]
