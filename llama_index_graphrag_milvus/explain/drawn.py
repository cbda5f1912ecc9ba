"""What the picture of an `Explanation` shows, decided next to the text it must agree with: the relations
drawn by kind, the entities (synonyms and short forms of a name as one), and the relations linked to each
passage. `drawing` places and draws it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Protocol, Sequence, Set, Tuple

from llama_index.core.schema import NodeWithScore

from llama_index_graphrag_milvus.schema import ScoredEntity, ScoredRelation, normalize_name

__all__ = ["CANDIDATE", "CHOSEN", "MAX_DRAWN_RELATIONS", "SEED", "VIA", "Drawn", "Explained", "drawn", "drawn_relations"]

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


class Explained(Protocol):
    """What a drawing reads of an `Explanation`."""

    query: str
    chosen_by: str
    llm_decision: Optional[str]
    chosen: List[ScoredRelation]
    passages: List[NodeWithScore]
    seed_relations: List[ScoredRelation]
    seed_entities: List[ScoredEntity]
    candidates: List[ScoredRelation]
    synonyms: List[Tuple[str, str]]

    def relations_of(self, passage: NodeWithScore) -> List[ScoredRelation]:
        ...


def drawn_relations(explanation: Explained, max_relations: int = MAX_DRAWN_RELATIONS) -> List[ScoredRelation]:
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


def drawn(explanation: Explained, max_relations: int = MAX_DRAWN_RELATIONS) -> Drawn:
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


def _entities(explanation: Explained, relations: List[ScoredRelation]) -> Tuple[Dict[str, str], Dict[str, str], Set[str]]:
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
