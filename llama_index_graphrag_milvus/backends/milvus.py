"""`MilvusGraph`: no adjacency in memory; every operation loads the neighbourhood it touches from Milvus.

For graphs larger than one process's memory. Each hop of a walk is a batched query: the relations
touching a set of entities (`array_contains_any` on the relation rows' `entity_ids`) or the entities of
a set of relations (`id in [...]`); the walk means what `graph.expand_from_entities` /
`expand_from_relations` mean, so on the same data it gives the same candidates. Writes and deletes run on
a `GraphCache` of the neighbourhood they touch, loaded the same way, so they behave as with the whole
adjacency in memory. Its cost follows what is touched: one round trip a hop and a 1,000-id batch.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.backends.base import Expansion, Neighbourhood, hub_limit, hub_passages
from llama_index_graphrag_milvus.milvus.collections import (
    ENTITIES,
    ID_BATCH,
    PASSAGES,
    QUERY_LIMIT,
    RELATIONS,
    Collections,
)
from llama_index_graphrag_milvus.milvus.filters import id_filter, literal_list
from llama_index_graphrag_milvus.graph.sparse import ABOUT_SHARE
from llama_index_graphrag_milvus.schema import chunked

#: Cuts a frontier of relation ids (sorted int64) to the ones a walk continues from.
IdCut = Callable[[np.ndarray], np.ndarray]


class MilvusExpander:
    """Walks the entity–relation graph by querying the relations collection."""

    def __init__(self, collections: Collections) -> None:
        self.collections = collections
        self.queries = 0

    def _query(self, filter_: str, fields: List[str]) -> List[Dict]:
        self.queries += 1
        return self.collections.query(RELATIONS, filter_, fields, limit=QUERY_LIMIT)

    def relations_of_entities(self, entities: Iterable[int]) -> Dict[int, Tuple[int, int]]:
        """The relations touching any of `entities`, as {relation id: (subject id, object id)}."""
        found: Dict[int, Tuple[int, int]] = {}
        for batch in chunked(sorted(set(entities)), ID_BATCH):
            for row in self._query(f"array_contains_any(entity_ids, {literal_list(batch)})", ["id", "subject_id", "object_id"]):
                found[row["id"]] = (row["subject_id"], row["object_id"])
        return found

    def entities_of_relations(self, relations: Iterable[int]) -> Set[int]:
        found: Set[int] = set()
        for batch in chunked(sorted(set(relations)), ID_BATCH):
            for row in self._query(id_filter(batch), ["subject_id", "object_id"]):
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


class MilvusGraph:
    """The `GraphBackend` that keeps no adjacency: it queries Milvus for what each operation touches."""

    def __init__(self, collections: Collections) -> None:
        self.collections = collections

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def reset(self) -> None:
        pass

    def writing(self) -> None:
        pass

    def written(self, generation: str) -> None:
        pass

    def counts(self) -> Dict[str, int]:
        return self.collections.counts()

    def linked_passages(self, passage_id: str, hub_fraction: float) -> List[str]:
        """As `graph.topic_links`, by queries: the passage's relations and their entities, then every
        relation of those and every passage stating one (with its relation ids that are stored): one query
        each when under Milvus' result limit, else asked again entity by entity, so that a hub costs
        bounded reads and is skipped. An entity in more relations than one query returns (16,383) is
        taken for a hub without counting its passages; above that many passages a hub may have, some of
        an entity's passages can be missed."""
        hubs = int(hub_limit(self.collections.count(PASSAGES), hub_fraction))
        own = {r for row in self.collections.get(PASSAGES, [passage_id], ["relation_ids"]) for r in row.get("relation_ids") or []}
        named = sorted({e for row in self.collections.get(RELATIONS, sorted(own), ["subject_id", "object_id"])
                        for e in (row["subject_id"], row["object_id"])})
        of_entity = {e: rels for e, rels in self._relations_of(named).items() if rels}
        stating = self._passages_stating(of_entity, hubs)
        stored = {row["id"] for row in self.collections.get(RELATIONS, sorted(set().union(*stating.values())), ["id"])} if stating else set()
        linked: Set[str] = set()
        for relations in of_entity.values():
            mine = {pid: rels & stored for pid, rels in stating.items() if rels & relations}
            if len(mine) <= hubs:
                linked.update(pid for pid, rels in mine.items() if len(rels & relations) >= ABOUT_SHARE * len(rels))
        linked.discard(passage_id)
        return sorted(linked)

    def _relations_of(self, entities: List[int]) -> Dict[int, Set[int]]:
        """Each entity's relation ids; one that has more than a query returns maps to none (a hub)."""
        if not entities:
            return {}
        rows = self.collections.query(RELATIONS, f"array_contains_any(entity_ids, {literal_list(entities)})",
                                      ["id", "subject_id", "object_id"], limit=QUERY_LIMIT)
        if len(rows) >= QUERY_LIMIT:
            if len(entities) > 1:
                return {e: rels for entity in entities for e, rels in self._relations_of([entity]).items()}
            return {entities[0]: set()}
        found: Dict[int, Set[int]] = {e: set() for e in entities}
        for row in rows:
            for e in {row["subject_id"], row["object_id"]} & found.keys():
                found[e].add(row["id"])
        return found

    def _passages_stating(self, of_entity: Dict[int, Set[int]], hubs: int) -> Dict[str, Set[int]]:
        """The passages stating a relation of the entities, with their distinct relation ids; past
        `hubs` passages an entity's are cut (it is a hub, which the caller skips)."""
        relations = sorted(set().union(*of_entity.values())) if of_entity else []
        limit = min(hubs * len(of_entity) + 1, QUERY_LIMIT)
        stating: Dict[str, Set[int]] = {}
        for batch in chunked(relations, ID_BATCH):
            filter_ = f"json_contains_any(relation_ids, {literal_list(batch)})"
            for row in self.collections.query(PASSAGES, filter_, ["id", "relation_ids"], limit=limit):
                stating[row["id"]] = set(row.get("relation_ids") or [])
        if len(stating) >= limit and len(of_entity) > 1:  # one of them may be a hub: ask for each alone
            stating = {}
            for entity, rels in of_entity.items():
                stating.update(self._passages_stating({entity: rels}, hubs))
        return stating

    def has_entities(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        stored = {row["id"] for row in self.collections.get(ENTITIES, sorted(set(ids.tolist())), ["id"])}
        return np.fromiter((i in stored for i in ids.tolist()), dtype=bool, count=len(ids))

    def scope(
        self,
        passage_ids: Sequence[str] = (),
        relation_ids: Sequence[int] = (),
        entity_ids: Sequence[int] = (),
        with_entity_relations: bool = True,
    ) -> GraphCache:
        """A `GraphCache` of the part of the stored graph touched, loaded with batched queries (see the
        protocol); with `with_entity_relations=False`, without the other relations of the entities."""
        local = GraphCache()
        rows: Dict[str, List[int]] = {}
        for row in self.collections.get(PASSAGES, list(dict.fromkeys(passage_ids)), ["id", "relation_ids"]):
            rows[row["id"]] = row.get("relation_ids") or []
        relations = set(relation_ids) | {r for rels in rows.values() for r in rels}
        for batch in chunked(sorted(relations), ID_BATCH):
            filter_ = f"json_contains_any(relation_ids, {literal_list(batch)})"
            for row in self.collections.query(PASSAGES, filter_, ["id", "relation_ids"], limit=QUERY_LIMIT):
                rows[row["id"]] = row.get("relation_ids") or []
        ends = set(entity_ids)
        found = self.collections.get(RELATIONS, sorted(relations), ["id", "subject_id", "object_id"])
        local.add_relations((row["id"], row["subject_id"], row["object_id"]) for row in found)
        ends.update(e for row in found for e in (row["subject_id"], row["object_id"]))
        if with_entity_relations:
            expander = MilvusExpander(self.collections)
            local.add_relations((r, s, o) for r, (s, o) in expander.relations_of_entities(ends).items())
        local.add_passages(rows.items())
        synonyms = [
            (row["id"], other)
            for row in self.collections.get(ENTITIES, sorted(ends), ["id", "synonym_ids"])
            for other in row.get("synonym_ids") or []
        ]
        local.add_synonyms(synonyms)
        return local

    def expand(self, request: Expansion) -> Neighbourhood:
        """The walk by batched queries; then the candidates' neighbourhood (their entities, passages and
        synonym links) is loaded for the ranking. Synonyms link candidates but add none."""
        collections, vector = self.collections, request.vector

        def best(ids: Iterable[int]) -> List[int]:
            return [i for i, _, _ in collections.search(RELATIONS, [vector], request.cap, among=sorted(ids))[0]]

        def cut(ids: np.ndarray) -> np.ndarray:
            return np.array(best(ids.tolist()), dtype=np.int64)

        expander = MilvusExpander(collections)
        reached = expander.from_entities(list(request.entities), request.degree, cut)
        reached |= expander.from_relations(list(request.relations), request.degree, cut)
        touched = len(reached)
        if request.with_context:
            passages = collections.get(PASSAGES, list(request.passages), ["relation_ids"])
            reached = set(best(reached)) | {r for row in passages for r in row.get("relation_ids") or []}
        hits = collections.search(RELATIONS, [vector], request.cap, among=sorted(reached))[0]
        local = self.scope(relation_ids=[i for i, _, _ in hits], with_entity_relations=False)
        positions = local.relations.lookup(np.array([i for i, _, _ in hits], dtype=np.int64))
        similarities = np.array([s for _, s, _ in hits])
        graph = local.snapshot()
        kept = positions >= 0
        return Neighbourhood(
            graph, local, positions[kept], similarities[kept], hub_passages(graph, request.hub_fraction), touched
        )
