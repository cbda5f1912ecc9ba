"""Expansion inside Milvus, with no in-memory adjacency: for graphs larger than one process's memory.

Each hop is a batched query: the relations touching a set of entities (`array_contains_any` on the
relation rows' `entity_ids` ARRAY field) or the entities of a set of relations (`id in [...]`). The
walk has the same meaning as `graph.expand_from_entities` / `expand_from_relations`, so on the same
data it gives the same candidates; its cost is one round trip per hop and per 1,000 frontier ids.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from llama_index_graphrag_milvus.schema import chunked

#: Ids per `in [...]` / `array_contains_any` filter: one query per batch.
BATCH = 1000

#: Given relation ids (sorted, distinct), the ones a walk may continue from.
IdCut = Callable[[np.ndarray], Iterable[int]]


def _ints(values: Iterable[int]) -> str:
    return "[" + ",".join(str(int(v)) for v in values) + "]"


class MilvusExpander:
    """Walks the entity–relation graph by querying the relations collection of a store."""

    def __init__(self, client, relations_collection: str, limit: int = 16384) -> None:
        self.client = client
        self.collection = relations_collection
        self.limit = limit  # rows per query at most (Milvus caps a query's window at 16,384)
        self.queries = 0

    def _query(self, filter_: str, fields: List[str]) -> List[Dict]:
        self.queries += 1
        return self.client.query(self.collection, filter=filter_, output_fields=fields, limit=self.limit)

    def relations_of_entities(self, entities: Iterable[int]) -> Dict[int, Tuple[int, int]]:
        """The relations touching any of `entities`, as {relation id: (subject id, object id)}."""
        found: Dict[int, Tuple[int, int]] = {}
        for batch in chunked(sorted(set(entities)), BATCH):
            for row in self._query(
                f"array_contains_any(entity_ids, {_ints(batch)})", ["id", "subject_id", "object_id"]
            ):
                found[row["id"]] = (row["subject_id"], row["object_id"])
        return found

    def entities_of_relations(self, relations: Iterable[int]) -> Set[int]:
        found: Set[int] = set()
        for batch in chunked(sorted(set(relations)), BATCH):
            for row in self._query(f"id in {_ints(batch)}", ["subject_id", "object_id"]):
                found.update((row["subject_id"], row["object_id"]))
        return found

    def from_entities(self, entities: Sequence[int], degree: int, cut: Optional[IdCut] = None) -> Set[int]:
        """Relations reached from seed entities: as `graph.expand_from_entities`, by queries, with the same
        `cut` semantics on relation ids: hop k ≥ 2 walks on only from the relations `cut` keeps of the
        ones hop k-1's new entities reached first (passed to `cut` as sorted ids; not called when there
        are none); hop 1 is never cut; the result holds every relation of the seeds and of the entities
        walked, dropped ones included. Each hop queries only the entities it has not queried before."""
        seeds = set(entities)
        fresh, walked, reached = set(seeds), set(seeds), set()  # fresh: the entities the last hop added
        for hop in range(degree):
            found = self.relations_of_entities(fresh)
            new = {r: ends for r, ends in found.items() if r not in reached}
            reached.update(new)
            start = _kept(cut, new) if hop > 0 and cut is not None else set(new)
            fresh = {e for r in start for e in new[r]} - walked
            walked |= fresh
        return reached | set(self.relations_of_entities(fresh))

    def from_relations(self, relations: Sequence[int], degree: int, cut: Optional[IdCut] = None) -> Set[int]:
        """Relations reached from seed relations: as `graph.expand_from_relations`, by queries, with the
        same `cut` semantics on relation ids: hop 1 walks from the seeds, hop k ≥ 2 only from the relations
        `cut` keeps of the ones hop k-1 reached first (passed as sorted ids; not called when there are
        none); the result holds every relation reached, dropped ones included."""
        fresh = set(relations)  # the relations the last hop reached first
        reached, walked = set(fresh), set()  # walked: the entities walked through
        for hop in range(degree):
            start = _kept(cut, fresh) if hop > 0 and cut is not None else fresh
            ends = self.entities_of_relations(start) - walked
            walked |= ends
            fresh = set(self.relations_of_entities(ends)) - reached
            reached |= fresh
        return reached


def _kept(cut: IdCut, relations: Iterable[int]) -> Set[int]:
    """The relation ids of `relations` that `cut` keeps; ids it returns from outside `relations` are ignored."""
    relations = set(relations)
    if not relations:
        return relations
    return {int(r) for r in cut(np.array(sorted(relations), dtype=np.int64))} & relations
