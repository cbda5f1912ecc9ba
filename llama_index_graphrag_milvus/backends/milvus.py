"""`MilvusGraph`: no adjacency in memory; a retrieval reads what it touches from the statements, by their
indexed fields (`docs/design/adjacency.md`).

For graphs larger than one process's memory. The walk is `graph.walk`'s, over ids: `MilvusAdjacency`
reads each entity's statements once per retrieval (`StatementReads`: its relations, its passages, and its
passage count for the hub rule, a hub at a bounded cost), each relation's row once (`RelationRows`: its
two entities and its vector, so every cut by similarity scores only the relations not read yet), and the
links of the entities whose synonyms it follows (`synonyms`, derived as in memory). The neighbourhood the
rankers read is built from the candidates' statements, with the store's own passage counts, so that every
ranking means what it means in memory.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from llama_index_graphrag_milvus.backends.base import (
    HUB_CAP, Expansion, Neighbourhood, Written, hub_limit, passages_in_milvus, stored_in_milvus,
)
from llama_index_graphrag_milvus.graph.cache import GraphCache, synonym_pairs
from llama_index_graphrag_milvus.graph.sparse import ABOUT_SHARE, binary_csr
from llama_index_graphrag_milvus.graph.walk import walk
from llama_index_graphrag_milvus.milvus.collections import (
    ENTITIES, ID_BATCH, LINKS, PASSAGES, RELATIONS, STATEMENTS, VECTOR_BATCH, Collections,
)
from llama_index_graphrag_milvus.milvus.filters import literal_list
from llama_index_graphrag_milvus.milvus.search import best_first, cosines_to
from llama_index_graphrag_milvus.schema import MAX_SYNONYMS, SLOTS, chunked

#: The slots an entity's passages are counted on, round by round: a hub is found on the first slices.
ROUNDS = (64, 256, SLOTS)
_FIELDS = ["passage_id", "relation_id", "subject_id", "object_id", "subject_slot", "object_slot",
           "subject_first", "object_first", "relation_count"]


def _ids(values: Iterable[int]) -> np.ndarray:
    return np.array(sorted(set(values)), dtype=np.int64)


def _tests(template: str, ids: Iterable) -> Iterator[str]:
    """`template` with `{ids}` as each batch of `ids`, escaped."""
    for batch in chunked(list(dict.fromkeys(ids)), ID_BATCH):
        yield template.format(ids=literal_list(batch))


def _of_entities(first: bool, low: int = 0, high: int = SLOTS) -> str:
    """The statements naming one of `{ids}` (with `first`, one per passage) in slots [low, high)."""
    tests = [f"{end}_id in {{ids}}" + (f" and {end}_first == true" if first else "")
             + (f" and {end}_slot >= {low} and {end}_slot < {high}" if (low, high) != (0, SLOTS) else "")
             for end in ("subject", "object")]
    return " or ".join(f"({t})" for t in tests)


class StatementReads:
    """The statements one retrieval reads, each entity's once: whole for the entities a walk goes through
    (their relations and passages), and for the hub rule every entity's passage count, or that it is a
    hub (more than `HUB_CAP`): counted on a slice of the slots first, so a hub costs a bounded read."""

    def __init__(self, collections: Collections) -> None:
        self.collections = collections
        self.whole: Dict[int, Dict[str, Set[int]]] = {}  # entity -> passage -> its relations naming the entity
        self.seen: Dict[int, Set[str]] = {}  # entity -> its passages in the slots read so far
        self.read_to: Dict[int, int] = {}  # entity -> the slots read so far
        self.relation_count: Dict[str, int] = {}  # passage -> how many relations it states

    def count(self, entity: int) -> Optional[int]:
        """The entity's passage count, once settled; None for a hub."""
        if entity in self.whole:
            return len(self.whole[entity])
        return None if len(self.seen.get(entity, ())) > HUB_CAP else len(self.seen.get(entity, ()))

    def settle(self, entities: Iterable[int]) -> None:
        """Count the passages of every entity not counted yet: on the first slots, then (whole) for
        those few there, then on more slots until a hub shows or every slot is read."""
        todo = [e for e in dict.fromkeys(int(e) for e in entities) if self._open(e)]
        for low, high in zip((0, *ROUNDS[:-1]), ROUNDS):
            ready = [e for e in todo if self.read_to.get(e, 0) == low]
            if ready:
                asked = set(ready)
                for row in self.collections.where(STATEMENTS, _tests(_of_entities(True, low, high), ready), _FIELDS):
                    for end in ("subject", "object"):
                        if row[f"{end}_first"] and row[f"{end}_id"] in asked:
                            self.seen[row[f"{end}_id"]].add(row["passage_id"])
                for e in ready:
                    self.read_to[e] = high
            if low == 0:  # few passages in the first slots: read whole
                self.read_whole([e for e in todo if len(self.seen[e]) * SLOTS <= 2 * HUB_CAP * ROUNDS[0]])
            todo = [e for e in todo if self._open(e)]

    def _open(self, entity: int) -> bool:
        self.seen.setdefault(entity, set())
        unread = entity not in self.whole and self.read_to.get(entity, 0) < SLOTS
        return unread and len(self.seen[entity]) <= HUB_CAP

    def read_whole(self, entities: Iterable[int]) -> None:
        """Read every statement of the entities not read whole yet."""
        todo = [e for e in dict.fromkeys(int(e) for e in entities) if e not in self.whole]
        if not todo:
            return
        for e in todo:
            self.whole[e] = {}
        for row in self.collections.where(STATEMENTS, _tests(_of_entities(False), todo), _FIELDS):
            self.relation_count[row["passage_id"]] = row["relation_count"]
            for end in {row["subject_id"], row["object_id"]} & self.whole.keys():
                self.whole[end].setdefault(row["passage_id"], set()).add(row["relation_id"])
        for e in todo:
            self.seen[e], self.read_to[e] = set(self.whole[e]), SLOTS

    def exact(self, entity: int) -> int:
        """The passage count of an entity, hubs counted too (one count query each)."""
        known = self.count(entity)
        if known is not None:
            return known
        test = _of_entities(True).format(ids=literal_list([entity]))
        return int(self.collections.query(STATEMENTS, test, ["count(*)"])[0]["count(*)"])


class RelationRows:
    """The relations one retrieval touches, each row read from the relations collection once: its two
    entities, and its cosine to the question when there is one (computed here as the in-process cache
    computes it: float32 unit vectors, so both backends give the same numbers). A cut scores the
    relations not read yet, then keeps the best."""

    def __init__(self, collections: Collections, vector: Optional[Sequence[float]] = None) -> None:
        self.collections, self.vector = collections, vector
        self.asked: Set[int] = set()
        self.ends: Dict[int, Tuple[int, int]] = {}
        self.scores: Dict[int, float] = {}

    def read(self, ids: np.ndarray) -> None:
        missing = [i for i in np.asarray(ids).tolist() if i not in self.asked]
        if not missing:
            return
        self.asked.update(missing)
        scored = self.vector is not None
        fields = ["id", "subject_id", "object_id", *(["embedding"] if scored else [])]
        rows = self.collections.get(RELATIONS, missing, fields, batch_size=VECTOR_BATCH if scored else ID_BATCH)
        self.ends.update((row["id"], (int(row["subject_id"]), int(row["object_id"]))) for row in rows)
        if scored:
            self.scores.update(zip((row["id"] for row in rows), cosines_to(self.vector, [row["embedding"] for row in rows])))

    def best(self, ids: np.ndarray, top_k: int) -> Tuple[np.ndarray, np.ndarray]:
        self.read(ids)
        kept = np.array([i for i in ids.tolist() if i in self.scores], dtype=np.int64)
        return best_first(kept, np.array([self.scores[i] for i in kept.tolist()]), top_k, kept)


def synonyms(collections: Collections, statements: StatementReads, entities: Iterable[int]) -> Dict[int, Set[int]]:
    """The synonyms of each entity, derived from the live links as in memory (`synonym_pairs`): its own
    links, and those of its partners (whom each keeps), the liveness of all read from the statements."""
    entities = list(dict.fromkeys(int(e) for e in entities))
    test = "a in {ids} or b in {ids}"
    first = collections.where(LINKS, _tests(test, entities), ["a", "b", "score"])
    partners = {e for row in first for e in (row["a"], row["b"])} - set(entities)
    facts = {row["id"]: row for row in first}
    facts.update((row["id"], row) for row in collections.where(LINKS, _tests(test, partners), ["a", "b", "score"]))
    named = sorted({e for row in facts.values() for e in (row["a"], row["b"])})
    statements.settle(named)
    live = {e for e in named if statements.count(e) != 0}
    rows = [row for row in facts.values() if row["a"] in live and row["b"] in live]
    local = np.array(named, dtype=np.int64)
    a, b = (np.searchsorted(local, [row[end] for row in rows]).astype(np.int64) for end in ("a", "b"))
    source, other = synonym_pairs(a, b, np.array([row["score"] for row in rows], dtype=np.float32), local)
    complete = set(entities) | partners  # whose every link was read: their choices are right
    found: Dict[int, Set[int]] = {}
    for s, o in zip(local[source].tolist(), local[other].tolist()):
        if s in complete:
            found.setdefault(s, set()).add(o)
            found.setdefault(o, set()).add(s)
    return {e: found[e] for e in entities if e in found}


class MilvusAdjacency:
    """`graph.walk.Adjacency` over ids, from the statements (each entity's once per retrieval), the
    relation rows (`relations`) and the passage rows."""

    def __init__(self, collections: Collections, hub_passages: float, relations: Optional[RelationRows] = None) -> None:
        self.collections, self.hub_passages = collections, hub_passages
        self.relations = relations if relations is not None else RelationRows(collections)
        self.statements = StatementReads(collections)
        self.passages: Dict[str, Set[int]] = {}  # passage id -> the relations it states
        self.links: Dict[int, Set[int]] = {}  # entity -> its synonyms, for those asked

    def relations_of_entities(self, entities: np.ndarray) -> np.ndarray:
        self.statements.read_whole(entities.tolist())
        whole = self.statements.whole
        return _ids(r for e in entities.tolist() for rs in whole[e].values() for r in rs)

    def entities_of_relations(self, relations: np.ndarray) -> np.ndarray:
        self.relations.read(relations)
        ends = self.relations.ends
        return _ids(e for r in relations.tolist() if r in ends for e in ends[r])

    def walkable(self, entities: np.ndarray) -> np.ndarray:
        self.statements.settle(entities.tolist())
        counts = [self.statements.count(e) for e in entities.tolist()]
        return np.array([c is not None and c <= self.hub_passages for c in counts], dtype=bool)

    def passage_relations(self, passages: Sequence[str]) -> Dict[str, Set[int]]:
        """The relations each stored passage states."""
        missing = [p for p in dict.fromkeys(passages) if p not in self.passages]
        if missing:
            self.passages.update(passages_in_milvus(self.collections, missing))
        return {p: self.passages[p] for p in passages if p in self.passages}

    def relations_of_passages(self, passages: Sequence[str]) -> np.ndarray:
        return _ids(r for relations in self.passage_relations(passages).values() for r in relations)

    def synonyms(self, entities: Iterable[int]) -> Dict[int, Set[int]]:
        missing = [e for e in entities if e not in self.links]
        if missing:
            found = synonyms(self.collections, self.statements, missing)
            self.links.update((e, found.get(e, set())) for e in missing)
        return {e: self.links[e] for e in entities}

    def synonyms_of(self, entities: np.ndarray) -> np.ndarray:
        linked = self.synonyms(entities.tolist())
        return _ids(s for others in linked.values() if len(others) <= MAX_SYNONYMS for s in others)


class MilvusTopics:
    """`Topics` from the statements, read once per retrieval and entity (with `adjacency`'s)."""

    def __init__(self, adjacency: MilvusAdjacency) -> None:
        self.adjacency = adjacency

    def linked(self, passage_id: str) -> List[str]:
        adjacency = self.adjacency
        named = adjacency.entities_of_relations(adjacency.relations_of_passages([passage_id])).tolist()
        adjacency.statements.settle(named)
        walkable = [e for e in named if (adjacency.statements.count(e) or 0) <= adjacency.hub_passages
                    and adjacency.statements.count(e) is not None]
        return [p for p in self.about(walkable) if p != passage_id]

    def about(self, entity_ids: Sequence[int]) -> List[str]:
        """As `graph.about`: the passages stating a relation of an entity, at least half of whose
        relations name it."""
        reads = self.adjacency.statements
        reads.read_whole(entity_ids)
        return sorted({pid for e in entity_ids for pid, named in reads.whole[int(e)].items()
                       if len(named) >= ABOUT_SHARE * reads.relation_count[pid]})


class MilvusGraph:
    """The `GraphBackend` that keeps no adjacency: it reads Milvus for what each operation touches."""

    def __init__(self, collections: Collections) -> None:
        self.collections = collections

    def behind(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def reset(self) -> None:
        pass

    def apply(self, written: Written, log: Sequence[str] = ()) -> None:
        return None

    def counts(self) -> Dict[str, int]:
        return self.collections.counts()

    def hub_passages(self, fraction: float) -> float:
        return hub_limit(self.collections.count(PASSAGES), fraction)

    def stored(self, kind: str, ids: np.ndarray) -> np.ndarray:
        return stored_in_milvus(self.collections, kind, ids)

    def passage_relations(self, passage_ids: Sequence[str]) -> Dict[str, Set[int]]:
        return passages_in_milvus(self.collections, passage_ids)

    def live(self, kind: str, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if kind == ENTITIES:
            reads = StatementReads(self.collections)
            reads.settle(ids.tolist())
            return np.array([reads.count(e) != 0 for e in ids.tolist()], dtype=bool)
        stated = {row["relation_id"] for row in self.collections.where(
            STATEMENTS, _tests("relation_id in {ids}", ids.tolist()), ["relation_id"])}
        return np.fromiter((i in stated for i in ids.tolist()), dtype=bool, count=len(ids))

    def linked_passages(self, passage_id: str, hub_fraction: float) -> List[str]:
        return MilvusTopics(MilvusAdjacency(self.collections, self.hub_passages(hub_fraction))).linked(passage_id)

    def synonyms_of(self, entity_ids: Sequence[int]) -> Dict[int, Set[int]]:
        return synonyms(self.collections, StatementReads(self.collections), entity_ids)

    def relations_of(self, entity_ids: Sequence[int]) -> Dict[int, Set[int]]:
        reads = StatementReads(self.collections)
        reads.read_whole(entity_ids)
        found = {e: {r for rs in by_passage.values() for r in rs} for e, by_passage in reads.whole.items()}
        return {e: rs for e, rs in found.items() if rs}

    def passages_stating(self, relation_ids: Sequence[int]) -> Dict[int, Set[str]]:
        found: Dict[int, Set[str]] = {}
        for row in self.collections.where(STATEMENTS, _tests("relation_id in {ids}", relation_ids), ["relation_id", "passage_id"]):
            found.setdefault(row["relation_id"], set()).add(row["passage_id"])
        return found

    def expand(self, request: Expansion) -> Neighbourhood:
        """The walk (`graph.walk`) by filtered reads, every step cut by the similarity of the relations'
        vectors (read by key, `RelationRows`); then the candidates' neighbourhood as the rankers read it."""
        hubs = self.hub_passages(request.hub_fraction)
        relations = RelationRows(self.collections, request.vector)
        adjacency = MilvusAdjacency(self.collections, hubs, relations)
        # the relations both walks start from (the seeds and the seed entities' own), read in one lookup
        relations.read(np.union1d(_ids(request.relations), adjacency.relations_of_entities(_ids(request.entities))))
        reached, touched = walk(
            adjacency, list(request.entities), list(request.relations), list(request.passages), request.degree,
            lambda ids: relations.best(ids, request.cap)[0], request.with_context, request.synonyms, relations.read,
        )
        ids, similarities = relations.best(reached, request.cap)
        local = self._neighbourhood(adjacency, ids)
        entities = local.entities.ids_array().tolist()
        adjacency.statements.settle(entities)
        counts = [adjacency.statements.count(e) for e in entities]  # None: a hub, counted when PPR asks
        pairs = [(i, j) for i, e in enumerate(entities) for j in local.entities.lookup(
            np.array(sorted(adjacency.synonyms([e])[e]), dtype=np.int64)).tolist() if j >= 0]
        rows, columns = np.array([i for i, _ in pairs], dtype=np.int64), np.array([j for _, j in pairs], dtype=np.int64)
        graph = dataclasses.replace(
            local.snapshot(), entity_entity=binary_csr(rows, columns, (len(entities), len(entities))),
            counts=np.array([HUB_CAP + 1 if c is None else c for c in counts], dtype=np.int64),
        )
        positions = local.relations.lookup(ids)
        kept = positions >= 0

        def exact(positions: np.ndarray) -> np.ndarray:
            return np.array([adjacency.statements.exact(entities[p]) for p in positions.tolist()], dtype=np.int64)

        return Neighbourhood(graph, local, positions[kept], similarities[kept], hubs, touched, MilvusTopics(adjacency),
                             counter=exact)

    def _neighbourhood(self, adjacency: MilvusAdjacency, candidates: np.ndarray) -> GraphCache:
        """A `GraphCache` of the candidates: their entities and the passages stating them (and their
        entities' synonyms, read). (A statement of a passage an interrupted write did not store is left out
        when the passages are read: the write, run again, stores it.)"""
        local = GraphCache()
        adjacency.relations.read(candidates)
        ends = adjacency.relations.ends
        local.add_relations((r, *ends[r]) for r in candidates.tolist() if r in ends)
        stating: Dict[str, List[int]] = {}
        rows = self.collections.where(STATEMENTS, _tests("relation_id in {ids}", candidates.tolist()), ["relation_id", "passage_id"])
        for row in sorted(rows, key=lambda row: (row["passage_id"], row["relation_id"])):
            stating.setdefault(row["passage_id"], []).append(row["relation_id"])
        local.add_passages(stating.items())
        adjacency.synonyms(local.entities.ids_array().tolist())  # read together; `expand` lays them out
        return local
