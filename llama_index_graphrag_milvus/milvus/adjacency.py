"""The adjacency index: the graph's reverse edges as rows of their own collection, addressed by primary
key, so that every hop of a walk in Milvus is a lookup by id, never a filter that scans a collection.

- An entity's row (`e<id>`) holds its relations, the passages stating one of them (their number is
  `passage_count`, which the hub rule reads) and its synonyms, both ways.
- A relation's row (`r<id>`) holds its subject and object, and the passages stating it.

A list longer than `BUCKET` ids continues in further rows (`e<id>.1`, `e<id>.2`, ...); the first row
says how many (`buckets`). The index is derived data: the entity, relation and passage rows are the
truth, and `from_columns` rebuilds the index from them. Writes keep it current (`ingest/adjacency.py`)
and write it before the passages it indexes, so a write interrupted midway and run again converges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Sequence, Set, Tuple

import numpy as np

from llama_index_graphrag_milvus.milvus.collections import ADJACENCY, BUCKET, Collections
from llama_index_graphrag_milvus.schema import chunked

_LISTS = ("relation_ids", "synonym_ids", "passage_ids")
#: A row with nothing in it (every field Milvus needs; 2-d dummy vector).
EMPTY_ROW: Dict[str, Any] = {
    "buckets": 0, "passage_count": 0, "subject_id": 0, "object_id": 0, **{name: [] for name in _LISTS},
    "embedding": [0.0, 0.0],
}


@dataclass
class EntityRow:
    """An entity's adjacency: its relations, the passages stating one of them (how many: `passage_count`),
    its synonyms. Read with `whole=False`, the lists hold the first bucket only."""

    relations: Set[int] = field(default_factory=set)
    passages: Set[str] = field(default_factory=set)
    synonyms: Set[int] = field(default_factory=set)
    buckets: int = 0  # rows it is stored in (0: not stored)
    passage_count: int = 0

    def copy(self) -> "EntityRow":
        """A copy whose lists can change without changing this row's (30x faster than `copy.deepcopy`)."""
        return EntityRow(set(self.relations), set(self.passages), set(self.synonyms), self.buckets, self.passage_count)


@dataclass
class RelationRow:
    """A relation's adjacency: its two entities and the passages stating it."""

    subject: int
    object: int
    passages: Set[str] = field(default_factory=set)
    buckets: int = 0

    def copy(self) -> "RelationRow":
        """A copy whose passages can change without changing this row's."""
        return RelationRow(self.subject, self.object, set(self.passages), self.buckets)


def entity_key(entity: int, bucket: int = 0) -> str:
    return f"e{entity}" if bucket == 0 else f"e{entity}.{bucket}"


def relation_key(relation: int, bucket: int = 0) -> str:
    return f"r{relation}" if bucket == 0 else f"r{relation}.{bucket}"


class AdjacencyIndex:
    """Reads and writes the adjacency rows of one store, a batch of ids at a time."""

    def __init__(self, collections: Collections) -> None:
        self.collections = collections
        self.lookups = 0  # queries made (for the benchmark's "queries per retrieval")

    # reading ------------------------------------------------------------------------------------
    def _rows(self, keys: Sequence[str], fields: Sequence[str]) -> Dict[str, Dict[str, Any]]:
        rows: Dict[str, Dict[str, Any]] = {}
        for batch in chunked(list(dict.fromkeys(keys)), 1000):
            self.lookups += 1
            rows.update((row["id"], row) for row in self.collections.get(ADJACENCY, batch, ["id", "buckets", *fields]))
        return rows

    def _all_buckets(self, first: Dict[str, Dict[str, Any]], key_of, ids: Iterable[int], fields: Sequence[str], whole: bool):
        """Each id's rows (first bucket first); with `whole`, the further buckets, read in one more lookup."""
        rows = {i: [first[key_of(i)]] for i in ids if key_of(i) in first}
        more = [key_of(i, b) for i, found in rows.items() for b in range(1, int(found[0]["buckets"]))] if whole else []
        if more:
            extra = self._rows(more, fields)
            for i, found in rows.items():
                found += [extra[key_of(i, b)] for b in range(1, int(found[0]["buckets"])) if key_of(i, b) in extra]
        return rows

    def entities(
        self, ids: Iterable[int], fields: Sequence[str] = ("relation_ids", "synonym_ids", "passage_ids"), whole: bool = True
    ) -> Dict[int, EntityRow]:
        """The stored entities' rows, with the lists named in `fields` (whole, or the first bucket only)."""
        ids = list(dict.fromkeys(int(i) for i in ids))
        fields = ["passage_count", *fields]
        first = self._rows([entity_key(i) for i in ids], fields)
        found: Dict[int, EntityRow] = {}
        for i, rows in self._all_buckets(first, entity_key, ids, fields, whole).items():
            found[i] = EntityRow(
                {r for row in rows for r in row.get("relation_ids") or []},
                {p for row in rows for p in row.get("passage_ids") or []},
                {s for row in rows for s in row.get("synonym_ids") or []},
                int(rows[0]["buckets"]), int(rows[0]["passage_count"]),
            )
        return found

    def relations(self, ids: Iterable[int]) -> Dict[int, RelationRow]:
        """The stored relations' rows, with their passages (whole)."""
        ids = list(dict.fromkeys(int(i) for i in ids))
        fields = ["subject_id", "object_id", "passage_ids"]
        first = self._rows([relation_key(i) for i in ids], fields)
        found: Dict[int, RelationRow] = {}
        for i, rows in self._all_buckets(first, relation_key, ids, fields, True).items():
            found[i] = RelationRow(
                int(rows[0]["subject_id"]), int(rows[0]["object_id"]),
                {p for row in rows for p in row.get("passage_ids") or []}, int(rows[0]["buckets"]),
            )
        return found

    # writing ------------------------------------------------------------------------------------
    def write(
        self, entities: Dict[int, EntityRow], relations: Dict[int, RelationRow], batch_size: int = 512,
        fresh: bool = False,
    ) -> None:
        """Store these rows as they are now: rows with nothing left are deleted, the others rewritten in
        as many buckets as their lists need (the surplus buckets of a list that shrank are deleted).
        `fresh`: none of them is stored yet (a bulk load), so they are inserted."""
        rows: List[Dict[str, Any]] = []
        gone: List[str] = []
        for eid, row in entities.items():
            lists = (sorted(row.relations), sorted(row.synonyms), sorted(row.passages))
            _bucketed(rows, gone, entity_key, eid, row.buckets, lists, len(row.passages), (0, 0), bool(row.relations))
        for rid, rel in relations.items():
            lists = ([], [], sorted(rel.passages))
            _bucketed(rows, gone, relation_key, rid, rel.buckets, lists, len(rel.passages), (rel.subject, rel.object),
                      bool(rel.passages))
        for batch in chunked(rows, batch_size):
            (self.collections.insert if fresh else self.collections.upsert)(ADJACENCY, batch)
        self.collections.delete(ADJACENCY, gone)


def _bucketed(
    rows: List[Dict[str, Any]], gone: List[str], key_of, key: int, had: int, lists: Tuple[List, List, List],
    count: int, ends: Tuple[int, int], keep: bool,
) -> None:
    """The rows of one entity or relation, each list cut into `BUCKET`-long slices (none unless `keep`);
    the keys of the buckets it no longer needs go to `gone`."""
    needed = max(1, *(-(-len(values) // BUCKET) for values in lists)) if keep else 0
    for b in range(needed):
        rows.append({
            **EMPTY_ROW, "id": key_of(key, b), "buckets": needed, "passage_count": count, "subject_id": ends[0],
            "object_id": ends[1], **{name: values[b * BUCKET : (b + 1) * BUCKET] for name, values in zip(_LISTS, lists)},
        })
    gone.extend(key_of(key, b) for b in range(needed, had))


def from_columns(
    relation_ids: np.ndarray, relation_ends: np.ndarray, passage_ids: Sequence[str], passage_offsets: np.ndarray,
    passage_relations: np.ndarray, synonym_pairs: Iterable[Tuple[int, int]],
) -> Tuple[Dict[int, EntityRow], Dict[int, RelationRow]]:
    """The whole index, derived from the stored rows' columns (as `snapshot.read_columns` reads them):
    for a store written before the index existed, or to check it."""
    relations = {int(r): RelationRow(int(s), int(o)) for r, (s, o) in zip(relation_ids.tolist(), relation_ends.tolist())}
    entities: Dict[int, EntityRow] = {}
    for rid, rel in relations.items():
        for end in (rel.subject, rel.object):
            entities.setdefault(end, EntityRow()).relations.add(rid)
    for i, pid in enumerate(passage_ids):
        for rid in passage_relations[passage_offsets[i] : passage_offsets[i + 1]].tolist():
            rel = relations.get(rid)
            if rel is not None:
                rel.passages.add(pid)
                entities[rel.subject].passages.add(pid)
                entities[rel.object].passages.add(pid)
    for a, b in synonym_pairs:
        if a in entities and b in entities and a != b:
            entities[a].synonyms.add(b)
            entities[b].synonyms.add(a)
    return entities, relations
