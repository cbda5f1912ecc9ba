"""`MilvusGraph`: no adjacency in memory; a retrieval reads the rows it touches, by primary key.

For graphs larger than one process's memory. The walk is `graph.walk`'s, over ids: `MilvusAdjacency`
reads each entity's row of the adjacency index (`milvus/adjacency.py`) once per retrieval, a batch of
ids a lookup, so a hop costs one lookup of the rows it touches, whatever the size of the collections;
the hub rule reads the entities' passage counts from the same rows. A relation's two entities and its
vector come from its own row, read once (`RelationRows`): every cut by similarity scores the relations
not read yet, and a hop from relations reads the ends of those not read yet. The neighbourhood the rankers
read is built from the candidates' rows, with the store's own passage counts, so that every ranking
means what it means in memory. Writes need nothing of this backend but lookups: the writer plans them
from Milvus' rows.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from llama_index_graphrag_milvus.backends.base import Expansion, Neighbourhood, Written, hub_limit
from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.graph.sparse import ABOUT_SHARE
from llama_index_graphrag_milvus.graph.walk import walk
from llama_index_graphrag_milvus.milvus.adjacency import AdjacencyIndex, EntityRow
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, ID_BATCH, PASSAGES, RELATIONS, VECTOR_BATCH, Collections
from llama_index_graphrag_milvus.milvus.search import best_first, cosines_to
from llama_index_graphrag_milvus.schema import MAX_SYNONYMS

_EMPTY = np.zeros(0, dtype=np.int64)


def _ids(values: Iterable[int]) -> np.ndarray:
    return np.array(sorted(set(values)), dtype=np.int64)


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
        missing = [i for i in ids.tolist() if i not in self.asked]
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


class MilvusAdjacency:
    """`graph.walk.Adjacency` over ids: each entity's row of the adjacency index is read once per
    retrieval (the first bucket; the rest only when a walk needs an entity's every relation), each
    relation's row through `relations`."""

    def __init__(
        self, index: AdjacencyIndex, collections: Collections, hub_passages: float, relations: Optional[RelationRows] = None
    ) -> None:
        self.index, self.collections, self.hub_passages = index, collections, hub_passages
        self.relations = relations if relations is not None else RelationRows(collections)
        self.entities: Dict[int, EntityRow] = {}
        self.whole: Set[int] = set()  # entities whose every bucket is read
        self.passages: Dict[str, Set[int]] = {}  # passage id -> the relations it states

    def entity_rows(self, ids: Iterable[int], whole: bool = False) -> Dict[int, EntityRow]:
        ids = [int(i) for i in ids]
        missing = [i for i in ids if i not in self.entities]
        if missing:
            for i, row in self.index.entities(missing, ("relation_ids", "synonym_ids"), whole=False).items():
                self.entities[i] = row
                if row.buckets <= 1:
                    self.whole.add(i)
        partial = [i for i in ids if whole and i in self.entities and i not in self.whole]
        if partial:
            self.entities.update(self.index.entities(partial, ("relation_ids", "synonym_ids"), whole=True))
            self.whole.update(partial)
        return {i: self.entities[i] for i in ids if i in self.entities}

    def relations_of_entities(self, entities: np.ndarray) -> np.ndarray:
        return _ids(r for row in self.entity_rows(entities.tolist(), whole=True).values() for r in row.relations)

    def entities_of_relations(self, relations: np.ndarray) -> np.ndarray:
        self.relations.read(relations)
        ends = self.relations.ends
        return _ids(e for r in relations.tolist() if r in ends for e in ends[r])

    def walkable(self, entities: np.ndarray) -> np.ndarray:
        rows = self.entity_rows(entities.tolist())
        return np.array([i not in rows or rows[i].passage_count <= self.hub_passages for i in entities.tolist()], dtype=bool)

    def passage_relations(self, passages: Sequence[str]) -> Dict[str, Set[int]]:
        """The relations each stored passage states."""
        missing = [p for p in dict.fromkeys(passages) if p not in self.passages]
        if missing:
            rows = self.collections.get(PASSAGES, missing, ["id", "relation_ids"])
            self.passages.update((row["id"], set(row.get("relation_ids") or [])) for row in rows)
        return {p: self.passages[p] for p in passages if p in self.passages}

    def relations_of_passages(self, passages: Sequence[str]) -> np.ndarray:
        return _ids(r for relations in self.passage_relations(passages).values() for r in relations)

    def synonyms_of(self, entities: np.ndarray) -> np.ndarray:
        # a first bucket's list of at most MAX_SYNONYMS (< BUCKET) ids is the whole list
        rows = self.entity_rows(entities.tolist())
        return _ids(s for row in rows.values() if len(row.synonyms) <= MAX_SYNONYMS for s in row.synonyms)


class MilvusTopics:
    """`Topics` from the adjacency index, reading each row once per retrieval (with `adjacency`'s)."""

    def __init__(self, adjacency: MilvusAdjacency) -> None:
        self.adjacency = adjacency

    def linked(self, passage_id: str) -> List[str]:
        adjacency = self.adjacency
        named = adjacency.entities_of_relations(adjacency.relations_of_passages([passage_id]))
        return [p for p in self._about(named.tolist(), adjacency.hub_passages) if p != passage_id]

    def about(self, entity_ids: Sequence[int]) -> List[str]:
        return self._about(entity_ids, float("inf"))

    def _about(self, entity_ids: Sequence[int], hubs: float) -> List[str]:
        """As `graph.about`: the passages stating a relation of an entity (not a hub), at least half of
        whose relations name it."""
        adjacency, fields = self.adjacency, ("relation_ids", "passage_ids")
        first = adjacency.index.entities(list(entity_ids), fields, whole=False)  # the hub rule needs no more
        rows = {e: row for e, row in first.items() if row.passage_count <= hubs}
        longer = [e for e, row in rows.items() if row.buckets > 1]
        if longer:
            rows.update(adjacency.index.entities(longer, fields, whole=True))
        states = adjacency.passage_relations(sorted({p for row in rows.values() for p in row.passages}))
        return sorted({
            pid for row in rows.values() for pid in row.passages
            if pid in states and len(states[pid] & row.relations) >= ABOUT_SHARE * len(states[pid])
        })


class MilvusGraph:
    """The `GraphBackend` that keeps no adjacency: it reads Milvus for what each operation touches."""

    def __init__(self, collections: Collections) -> None:
        self.collections = collections
        self.index = AdjacencyIndex(collections)

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def reset(self) -> None:
        pass

    def writing(self) -> None:
        pass

    def written(self, generation: Optional[str]) -> None:
        pass

    def behind(self, since: Optional[str] = None) -> bool:
        return False

    def apply(self, written: Written) -> None:
        pass

    def counts(self) -> Dict[str, int]:
        return self.collections.counts()

    def hub_passages(self, fraction: float) -> float:
        return hub_limit(self.collections.count(PASSAGES), fraction)

    def passage_relations(self, passage_ids: Sequence[str]) -> Dict[str, Set[int]]:
        rows = self.collections.get(PASSAGES, list(dict.fromkeys(passage_ids)), ["id", "relation_ids"])
        return {row["id"]: set(row.get("relation_ids") or []) for row in rows}

    def has_entities(self, ids: np.ndarray) -> np.ndarray:
        return self._stored(ENTITIES, ids)

    def has_relations(self, ids: np.ndarray) -> np.ndarray:
        return self._stored(RELATIONS, ids)

    def _stored(self, kind: str, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        stored = {row["id"] for row in self.collections.get(kind, sorted(set(ids.tolist())), ["id"])}
        return np.fromiter((i in stored for i in ids.tolist()), dtype=bool, count=len(ids))

    def linked_passages(self, passage_id: str, hub_fraction: float) -> List[str]:
        adjacency = MilvusAdjacency(self.index, self.collections, self.hub_passages(hub_fraction))
        return MilvusTopics(adjacency).linked(passage_id)

    def expand(self, request: Expansion) -> Neighbourhood:
        """The walk (`graph.walk`) by lookups, every step cut by the similarity of the relations' vectors
        (read by key, `RelationRows`); then the candidates' neighbourhood as the rankers read it."""
        hubs = self.hub_passages(request.hub_fraction)
        relations = RelationRows(self.collections, request.vector)
        adjacency = MilvusAdjacency(self.index, self.collections, hubs, relations)
        # the relations both walks start from (the seeds and the seed entities' own), read in one lookup
        relations.read(np.union1d(_ids(request.relations), adjacency.relations_of_entities(_ids(request.entities))))
        reached, touched = walk(
            adjacency, list(request.entities), list(request.relations), list(request.passages), request.degree,
            lambda ids: relations.best(ids, request.cap)[0], request.with_context, request.synonyms, relations.read,
        )
        ids, similarities = relations.best(reached, request.cap)
        local = self._neighbourhood(adjacency, ids)
        graph = local.snapshot()
        counts = np.zeros(graph.shape[0], dtype=np.int64)
        rows = adjacency.entity_rows(local.entities.ids_array().tolist())
        for position, eid in enumerate(local.entities.ids_array().tolist()):
            counts[position] = rows[eid].passage_count if eid in rows else 0
        graph = dataclasses.replace(graph, counts=counts)
        positions = local.relations.lookup(ids)
        kept = positions >= 0
        return Neighbourhood(graph, local, positions[kept], similarities[kept], hubs, touched, MilvusTopics(adjacency))

    def _neighbourhood(self, adjacency: MilvusAdjacency, candidates: np.ndarray) -> GraphCache:
        """A `GraphCache` of the candidates: their entities, the passages stating them, and the synonym
        links between their entities. (A passage an interrupted write indexed but did not store is left
        out when the passages are read: the write, run again, stores it.)"""
        local = GraphCache()
        rows = self.index.relations(candidates.tolist())
        local.add_relations((r, rows[r].subject, rows[r].object) for r in candidates.tolist() if r in rows)
        stating: Dict[str, List[int]] = {}
        for r in candidates.tolist():
            for pid in sorted(rows[r].passages) if r in rows else []:
                stating.setdefault(pid, []).append(r)
        local.add_passages(stating.items())
        ends = {e for row in rows.values() for e in (row.subject, row.object)}
        entities = adjacency.entity_rows(ends)
        adjacency.entity_rows([e for e, row in entities.items() if row.buckets > 1], whole=True)
        local.add_synonyms((e, s) for e in ends if e in adjacency.entities for s in adjacency.entities[e].synonyms if s in ends)
        return local
