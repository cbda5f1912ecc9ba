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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from llama_index.core.schema import NodeWithScore

from llama_index_graphrag_milvus.filters import id_filter
from llama_index_graphrag_milvus.schema import Retrieval, ScoredRelation, entity_id, normalize_name

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from llama_index_graphrag_milvus.store import MilvusGraphStore

__all__ = ["MAX_DRAWN_RELATIONS", "Drawn", "Explanation", "drawn", "drawn_relations"]

_ID_BATCH = 1000  # ids per synonym query

#: Relations drawn at most (the chosen ones, those behind the passages and the seeds always are).
MAX_DRAWN_RELATIONS = 30

#: How a drawn relation is drawn: chosen by the rerank (red), behind a returned passage but not chosen
#: (green), a seed (dashed orange), another candidate (grey).
CHOSEN, VIA, SEED, CANDIDATE = "chosen", "via", "seed", "candidate"


@dataclass
class Drawn:
    """What a drawing of an `Explanation` shows.

    Attributes:
        relations: The relations drawn (`drawn_relations`).
        kinds: Each drawn relation's id -> CHOSEN (red: the text's "Chosen by ..." list), VIA (green: behind
            a returned passage, not chosen), SEED or CANDIDATE.
        entities: The entity nodes, key -> label. Entities linked as synonyms in the store are one node,
            labelled with the longest name and the others in brackets: "Leonhard Euler (Euler)".
        node_of: Each drawn entity's normalized name -> the key of its node.
        seeds: The keys of the nodes that hold a seed entity.
        links: Passage rank (from 1) -> the relations behind it (the text's "via" lines), dotted to its box.
    """

    relations: List[ScoredRelation]
    kinds: Dict[int, str]
    entities: Dict[str, str]
    node_of: Dict[str, str]
    seeds: Set[str]
    links: Dict[int, List[ScoredRelation]]

    def of_kind(self, kind: str) -> List[ScoredRelation]:
        """The drawn relations of one kind (CHOSEN, VIA, SEED or CANDIDATE)."""
        return [r for r in self.relations if self.kinds[r.id] == kind]


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
        from llama_index_graphrag_milvus.drawing import draw

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
    """The synonym links (entity rows' `synonym_ids`) between the entities `run` names, as pairs of names."""
    names: Dict[int, str] = {eid: name for eid, name, _ in run.seed_entities if name}
    relations: Iterable[ScoredRelation] = [*candidates, *run.seed_relations, *run.chosen,
                                           *(r for via in run.via.values() for r in via)]
    for relation in relations:
        for name in (relation.subject, relation.object):
            if name:
                names.setdefault(entity_id(name), name)
    ids = sorted(names)
    pairs: Dict[Tuple[int, int], Tuple[str, str]] = {}
    for start in range(0, len(ids), _ID_BATCH):
        rows = store.client.query(store.entities_collection, filter=id_filter(ids[start : start + _ID_BATCH]),
                                  output_fields=["id", "synonym_ids"])
        for row in rows:
            for other in row.get("synonym_ids") or []:
                a, b = sorted((int(row["id"]), int(other)))
                if a != b and a in names and b in names:
                    pairs.setdefault((a, b), tuple(sorted((names[a], names[b]))))  # type: ignore[arg-type]
    return sorted(pairs.values())


# what a drawing shows ----------------------------------------------------------------------------
def drawn_relations(explanation: Explanation, max_relations: int = MAX_DRAWN_RELATIONS) -> List[ScoredRelation]:
    """The relations a drawing shows: chosen, behind a passage, seeds, then the best candidates, up to
    `max_relations` (the first three kinds always), without repeats."""
    picked: Dict[int, ScoredRelation] = {}
    always = [*explanation.chosen]
    for hit in explanation.passages:
        always += explanation.relations_of(hit)
    always += explanation.seed_relations
    for relation in always:
        picked.setdefault(relation.id, relation)
    for relation in explanation.candidates:
        if len(picked) >= max_relations:
            break
        picked.setdefault(relation.id, relation)
    return list(picked.values())


def drawn(explanation: Explanation, max_relations: int = MAX_DRAWN_RELATIONS) -> Drawn:
    """What `explanation.figure(max_relations)` draws."""
    relations = drawn_relations(explanation, max_relations)
    chosen = {r.id for r in explanation.chosen}
    via = {r.id for hit in explanation.passages for r in explanation.relations_of(hit)}
    seeds = {r.id for r in explanation.seed_relations}
    kinds = {
        r.id: CHOSEN if r.id in chosen else VIA if r.id in via else SEED if r.id in seeds else CANDIDATE
        for r in relations
    }
    links = {
        rank: list({r.id: r for r in explanation.relations_of(hit) if r.id in kinds}.values())
        for rank, hit in enumerate(explanation.passages, start=1)
    }
    return Drawn(relations, kinds, *_entities(explanation, relations), links)


def _entities(explanation: Explanation, relations: List[ScoredRelation]) -> Tuple[Dict[str, str], Dict[str, str], Set[str]]:
    """The entity nodes (key -> label), the node of each normalized name and the seeds' nodes: the ten
    best seeds and the ends of the relations, synonyms merged."""
    names: Dict[str, str] = {}  # normalized name (as the store identifies entities) -> as first written
    seeds = sorted(explanation.seed_entities, key=lambda e: -e[2])
    for _, name, _ in seeds[:10]:
        if name:
            names.setdefault(normalize_name(name), name)
    for relation in relations:
        names.setdefault(normalize_name(relation.subject), relation.subject)
        names.setdefault(normalize_name(relation.object), relation.object)
    node_of = _merged(list(names), [*explanation.synonyms, *_short_forms(names)])
    members: Dict[str, List[str]] = {}
    for key, node in node_of.items():
        members.setdefault(node, []).append(names[key])
    entities = {node: _merged_label(group) for node, group in members.items()}
    seed_nodes = {node_of[k] for k in (normalize_name(name) for _, name, _ in seeds if name) if k in node_of}
    return entities, node_of, seed_nodes


def _merged(keys: List[str], synonyms: Sequence[Tuple[str, str]]) -> Dict[str, str]:
    """Each key -> the key of its group: keys linked by `synonyms` (pairs of names), transitively, are one
    group, named by its smallest key."""
    parent = {key: key for key in keys}

    def root(key: str) -> str:
        while parent[key] != key:
            parent[key] = key = parent[parent[key]]
        return key

    for a, b in synonyms:
        a, b = normalize_name(a), normalize_name(b)
        if a in parent and b in parent:
            ra, rb = root(a), root(b)
            parent[max(ra, rb)] = min(ra, rb)
    return {key: root(key) for key in keys}


_CONNECTORS = frozenset("of the and for in on at to from by with".split())


def _short_forms(names: Dict[str, str]) -> List[Tuple[str, str]]:
    """Pairs (short, full) where a drawn name is the last word of exactly one other drawn name of 2-4
    words with no connector ("Euler" and "Leonhard Euler", not "Basel" and "University of Basel"): the
    picture draws them as one entity, labelled with both."""
    full = [w for w in names.values() if 2 <= len(w.split()) <= 4 and not _CONNECTORS & set(normalize_name(w).split())]
    pairs = []
    for key, written in names.items():
        if " " in key:
            continue
        matches = [f for f in full if normalize_name(f.split()[-1]) == key and normalize_name(f) != key]
        if len(matches) == 1:
            pairs.append((written, matches[0]))
    return pairs


def _merged_label(names: List[str]) -> str:
    """The longest name, then the others in brackets: "Leonhard Euler (Euler)"."""
    first, *others = sorted(names, key=lambda n: (-len(n), n))
    return f"{first} ({', '.join(others)})" if others else first
