"""Expansion inside Milvus, with no in-memory adjacency: for graphs larger than one process's memory.

Each hop is a batched query: the relations touching a set of entities (`array_contains_any` on the
relation rows' `entity_ids` ARRAY field) or the entities of a set of relations (`id in [...]`). The
walk has the same meaning as `graph.expand_from_entities` / `expand_from_relations`, so on the same
data it gives the same candidates; its cost is one round trip per hop and per 1,000 frontier ids.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Sequence, Set, Tuple

from llama_index_graphrag_milvus.schema import chunked

#: Ids per `in [...]` / `array_contains_any` filter: one query per batch.
BATCH = 1000


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

    def from_entities(self, entities: Sequence[int], degree: int) -> Set[int]:
        """Relations reached from seed entities: as `graph.expand_from_entities`, by queries."""
        frontier = set(entities)
        for _ in range(degree):
            reached = self.relations_of_entities(frontier)
            frontier |= {e for pair in reached.values() for e in pair}
        return set(self.relations_of_entities(frontier))

    def from_relations(self, relations: Sequence[int], degree: int) -> Set[int]:
        """Relations reached from seed relations: as `graph.expand_from_relations`, by queries."""
        frontier = set(relations)
        for _ in range(degree):
            frontier |= set(self.relations_of_entities(self.entities_of_relations(frontier)))
        return frontier
