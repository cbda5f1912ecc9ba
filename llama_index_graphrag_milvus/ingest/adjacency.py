"""How a write changes the adjacency index (`milvus/adjacency.py`), and what it leaves orphaned.

Planned from the rows it touches before anything is written: in memory mode from the cache, which the
index mirrors (`CachedIndex`: nothing is read back), else read from Milvus by primary key. The passages
written, rewritten or deleted (each with the relations it stated before and states after), the new
relations and the new entities' synonym links make the change. Every change is a set operation, so
planning the same write again over rows that already hold it gives the same rows: an interrupted write,
run again, converges. The orphans are the relations no passage states any more and the entities left with no
relation; the writer deletes them after the passages.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Sequence, Set, Tuple

import numpy as np

from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.milvus.adjacency import EMPTY_ROW, AdjacencyIndex, EntityRow, RelationRow, from_columns
from llama_index_graphrag_milvus.milvus.collections import ADJACENCY, BUCKET, PASSAGES, RELATIONS, Collections
from llama_index_graphrag_milvus.milvus.snapshot import read_columns

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassageChange:
    """One passage of a write: the relations it stated before (none if new) and states after (none if
    deleted)."""

    passage_id: str
    before: Set[int]
    after: Set[int]


@dataclass
class AdjacencyChange:
    """The rows a write leaves (`entities`, `relations`: the touched ones, in their new state), the same
    rows before it (to roll back), and what it orphans."""

    entities: Dict[int, EntityRow]
    relations: Dict[int, RelationRow]
    before_entities: Dict[int, EntityRow]
    before_relations: Dict[int, RelationRow]
    orphan_relations: List[int] = field(default_factory=list)
    orphan_entities: List[int] = field(default_factory=list)
    #: Surviving entity -> the orphaned entities it was linked to as synonyms.
    unlinked: Dict[int, Set[int]] = field(default_factory=dict)

    def rolled_back(self) -> Tuple[Dict[int, EntityRow], Dict[int, RelationRow]]:
        """The rows as they were, with the bucket counts they may have been written with since, so that
        writing them restores the index (rows that did not exist are deleted)."""
        entities = {k: _widened(row, self.entities.get(k)) for k, row in self.before_entities.items()}
        relations = {k: _widened(row, self.relations.get(k)) for k, row in self.before_relations.items()}
        return entities, relations

    def still_orphaned(self, fix: "AdjacencyChange") -> "AdjacencyChange":
        """What to delete once `fix` has moved the index from this change to what the passages state:
        this change's orphans that `fix` does not revive, and `fix`'s own."""
        relations = {r for r, row in fix.relations.items() if row.passages}
        entities = {e for e, row in fix.entities.items() if row.relations}
        dead = set(self.orphan_entities) - entities | set(fix.orphan_entities)
        unlinked = {s: gone - entities for s, gone in self.unlinked.items()}
        for s, gone in fix.unlinked.items():
            unlinked[s] = unlinked.get(s, set()) | gone
        for e in set(self.orphan_entities) & entities:  # revived: its own row's links to what stays dead
            unlinked[e] = unlinked.get(e, set()) | (self.entities[e].synonyms & dead)
        return AdjacencyChange(
            {}, {}, {}, {}, sorted(set(self.orphan_relations) - relations | set(fix.orphan_relations)),
            sorted(dead), unlinked,
        )


def _widened(before, after):
    row = before.copy()
    row.buckets = max(before.buckets, _needed(after) if after is not None else 0)
    return row


def _needed(row) -> int:
    lists = [row.passages, *([row.relations, row.synonyms] if isinstance(row, EntityRow) else [])]
    return max(1, *(-(-len(values) // BUCKET) for values in lists))


def plan_adjacency(
    index: AdjacencyIndex,
    changes: Sequence[PassageChange],
    new_relations: Dict[int, Tuple[int, int]] = None,
    new_links: Dict[int, Iterable[int]] = None,
) -> AdjacencyChange:
    """The adjacency after `changes`, `new_relations` (relation id -> (subject id, object id)) and the new
    entities' synonym links (entity id -> the entities it is linked to), read from `index` and not
    written."""
    new_relations, new_links = dict(new_relations or {}), {e: set(o) for e, o in (new_links or {}).items()}
    touched = {r for c in changes for r in (*c.before, *c.after)} | set(new_relations)
    relations = _relation_rows(index, touched, new_relations)
    ends = {e for r in relations.values() for e in (r.subject, r.object)}
    linked = set(new_links) | {o for others in new_links.values() for o in others}
    entities = index.entities(ends | linked)
    for e in ends | linked:
        entities.setdefault(e, EntityRow())
    before = _copied(entities), _copied(relations)
    for change in changes:
        _move_passage(change, relations, entities)
    for e, others in new_links.items():
        for other in others - {e}:
            entities[e].synonyms.add(other)
            entities[other].synonyms.add(e)
    plan = AdjacencyChange(entities, relations, *before)
    _orphans(index, plan, touched)
    return plan


def _copied(rows: Dict[int, Any]) -> Dict[int, Any]:
    return {key: row.copy() for key, row in rows.items()}


def _relation_rows(index: AdjacencyIndex, ids: Set[int], new: Dict[int, Tuple[int, int]]) -> Dict[int, RelationRow]:
    """The rows of `ids`: stored ones as stored, new ones empty; a stored relation missing from the
    index (written before it existed) gets its ends from the relations collection."""
    rows = index.relations(ids)
    missing = sorted(ids - rows.keys() - new.keys())
    for row in index.collections.get(RELATIONS, missing, ["id", "subject_id", "object_id"]) if missing else []:
        rows[row["id"]] = RelationRow(int(row["subject_id"]), int(row["object_id"]))
    for rid, (s, o) in new.items():
        rows.setdefault(rid, RelationRow(s, o))
    return rows


def _move_passage(change: PassageChange, relations: Dict[int, RelationRow], entities: Dict[int, EntityRow]) -> None:
    """A passage leaves the relations it no longer states and joins those it states, and so for their
    entities: an entity lists a passage while the passage states one of its relations, and lists every
    relation a passage states."""
    pid = change.passage_id
    known_before = [relations[r] for r in change.before if r in relations]
    known_after = {r: relations[r] for r in change.after if r in relations}
    for r in change.before - change.after:
        if r in relations:
            relations[r].passages.discard(pid)
    for r, row in known_after.items():  # a relation stated is on both its entities (a repair if it was not)
        row.passages.add(pid)
        entities[row.subject].relations.add(r)
        entities[row.object].relations.add(r)
    ends_after = {e for row in known_after.values() for e in (row.subject, row.object)}
    for e in {e for row in known_before for e in (row.subject, row.object)} - ends_after:
        entities[e].passages.discard(pid)
    for e in ends_after:
        entities[e].passages.add(pid)


def _orphans(index: AdjacencyIndex, plan: AdjacencyChange, touched: Set[int]) -> None:
    """The relations no passage states any more, the entities of the index left with no relation, and
    the synonym links to those entities, dropped from the entities that survive them."""
    plan.orphan_relations = sorted(r for r in touched if not plan.relations[r].passages)
    for rid in plan.orphan_relations:
        row = plan.relations[rid]
        for e in (row.subject, row.object):
            plan.entities[e].relations.discard(rid)
    plan.orphan_entities = sorted(e for e, row in plan.entities.items() if not row.relations and plan.before_entities[e].buckets)
    gone = set(plan.orphan_entities)
    survivors = {s for e in gone for s in plan.entities[e].synonyms} - gone
    unloaded = survivors - plan.entities.keys()
    if unloaded:
        extra = index.entities(unloaded)
        plan.entities.update(extra)
        plan.before_entities.update(_copied(extra))
    for s in survivors:
        if s in plan.entities:
            dropped = plan.entities[s].synonyms & gone
            plan.entities[s].synonyms -= gone
            plan.unlinked[s] = dropped


class CachedIndex:
    """The adjacency index's rows as the memory backend's cache holds them, for planning a write with no
    read from Milvus: the index mirrors the cache (both follow every write), so an entity's row is its
    live relations, the passages stating one of them and its synonyms, and a relation's row its ends and
    the passages stating it, each in as many buckets as its lists need. Reads what `plan_adjacency` reads
    of an `AdjacencyIndex`."""

    def __init__(self, index: AdjacencyIndex, cache: GraphCache) -> None:
        self.collections, self.cache = index.collections, cache

    def entities(self, ids: Iterable[int], fields: Sequence[str] = (), whole: bool = True) -> Dict[int, EntityRow]:
        ids = np.fromiter(dict.fromkeys(int(i) for i in ids), np.int64)
        graph = self.cache.snapshot()
        positions = self.cache.entities.lookup(ids)
        known = (positions >= 0) & (positions < graph.shape[0])
        ids, positions = ids[known], positions[known]
        relations = graph.entity_relation[positions]  # the rows of all of them at once
        held = np.diff(relations.indptr) > 0  # an entity with no relation has no row in the index
        ids, positions, relations = ids[held], positions[held], relations[held]
        passages = (relations.astype(np.int32) @ graph.relation_passage).tocsr()  # the passages of their relations
        synonyms = graph.entity_entity[positions]
        rel_ids = self.cache.relations.ids_array()[relations.indices].tolist()
        pas_ids = self.cache.passage_ids(passages.indices)
        syn_ids = self.cache.entities.ids_array()[synonyms.indices].tolist()
        r, p, s = relations.indptr.tolist(), passages.indptr.tolist(), synonyms.indptr.tolist()
        found = {}
        for i, eid in enumerate(ids.tolist()):
            row = EntityRow(set(rel_ids[r[i] : r[i + 1]]), set(pas_ids[p[i] : p[i + 1]]), set(syn_ids[s[i] : s[i + 1]]))
            row.passage_count, row.buckets = len(row.passages), _needed(row)
            found[eid] = row
        return found

    def relations(self, ids: Iterable[int]) -> Dict[int, RelationRow]:
        ids = list(dict.fromkeys(int(i) for i in ids))
        positions = self.cache.relations.lookup(np.asarray(ids, dtype=np.int64))
        known = positions >= 0
        graph, found = self.cache.snapshot(), {}
        ends = self.cache.relation_ends(positions[known]).tolist()
        for rid, position, (subject, object_) in zip(np.asarray(ids)[known].tolist(), positions[known].tolist(), ends):
            passages = set(self.cache.passage_ids(_row(graph.relation_passage, position))) if position < graph.shape[1] else set()
            found[rid] = RelationRow(subject, object_, passages, _needed_passages(passages))  # none: no row
        return found


def planner(index: AdjacencyIndex, graph: Any) -> Any:
    """Where a write reads the index rows it changes: the memory backend's cache, which the index mirrors
    (no read from Milvus), unless another store wrote since the cache was built; else the index."""
    cache = getattr(graph, "cache", None)
    return CachedIndex(index, cache) if isinstance(cache, GraphCache) and not graph.behind() else index


def _row(matrix, position: int) -> np.ndarray:
    return matrix.indices[matrix.indptr[position] : matrix.indptr[position + 1]]


def _needed_passages(passages: Set[str]) -> int:
    return -(-len(passages) // BUCKET) if passages else 0


#: The row that says the index is complete (written last when a store's index is built).
BUILT = "built"


def ensure_index(index: AdjacencyIndex) -> None:
    """Build the adjacency index of a store written before it existed (or whose build was interrupted),
    from the stored rows: once, on open."""
    collections = index.collections
    if collections.get(ADJACENCY, [BUILT], ["id"]):
        return
    if collections.count(RELATIONS) or collections.count(PASSAGES):
        logger.warning("Building the adjacency index of %s from its rows (a store written by an older version).",
                       collections.names[ADJACENCY])
        columns = read_columns(collections, with_vectors=False)
        pairs = [(int(columns.entity_ids[a]), int(columns.entity_ids[b])) for a, b in columns.synonyms.tolist()]
        index.write(*from_columns(columns.relation_ids, columns.relation_ends, columns.passage_ids,
                                  columns.passage_offsets, columns.passage_relations, pairs))
    mark_built(collections)


def mark_built(collections: Collections) -> None:
    """Say that the store's adjacency index is whole."""
    collections.upsert(ADJACENCY, [{**EMPTY_ROW, "id": BUILT}])
