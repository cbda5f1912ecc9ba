"""The adjacency: entity↔relation and relation→passage incidence as scipy.sparse matrices.

`Graph` is an immutable snapshot that the pure functions below read; `GraphCache` is the mutable cache
the store keeps current on insert and delete and rebuilds from Milvus when it opens. Positions (row and
column numbers) are private to one process; ids are what Milvus stores.

Every walk reads neighbours through CSR `indptr`/`indices`, so its cost follows the subgraph touched,
never the size of the graph: no dense matrix, no matrix power.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

_EMPTY = np.zeros(0, dtype=np.int32)


def _csr(rows: np.ndarray, cols: np.ndarray, shape: Tuple[int, int]) -> sp.csr_matrix:
    """A binary incidence matrix; its data are int8 ones (1 byte per edge), indices int32."""
    data = np.ones(len(rows), dtype=np.int32)
    matrix = sp.csr_matrix((data, (rows, cols)), shape=shape)
    matrix.sum_duplicates()
    return sp.csr_matrix((np.ones(matrix.nnz, dtype=np.int8), matrix.indices, matrix.indptr), shape=shape)


def unique(values: np.ndarray) -> np.ndarray:
    """`np.unique` of integers by sort and compare: numpy 2's hash-based `np.unique` is 4–15× slower
    on the id arrays here."""
    values = np.sort(np.asarray(values).ravel())
    if len(values) < 2:
        return values
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`np.union1d` by `unique`."""
    return unique(np.concatenate([np.asarray(a).ravel(), np.asarray(b).ravel()]))


def neighbours(matrix: sp.csr_matrix, rows: np.ndarray) -> np.ndarray:
    """The column indices of the given rows of a CSR matrix, concatenated (with repeats)."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        return _EMPTY
    starts = matrix.indptr[rows]
    lengths = matrix.indptr[rows + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return _EMPTY
    # positions starts[i] .. starts[i]+lengths[i] for every row, without a Python loop
    offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    return matrix.indices[offsets + np.arange(total)]


@dataclass(frozen=True)
class Graph:
    """An immutable snapshot of the adjacency.

    entity_relation: E×R, 1 where the entity is the subject or the object of the relation.
    relation_entity: R×E, its transpose (CSR, so that a relation's entities are a row slice).
    relation_passage: R×P, 1 where the passage states the relation.
    passage_relation: P×R, its transpose.
    entity_entity: E×E, symmetric, 1 where two entities are synonyms (near-identical embeddings).
    """

    entity_relation: sp.csr_matrix
    relation_entity: sp.csr_matrix
    relation_passage: sp.csr_matrix
    passage_relation: sp.csr_matrix
    entity_entity: sp.csr_matrix

    @cached_property
    def passage_counts(self) -> np.ndarray:
        """For each entity, the number of passages stating one of its relations."""
        mentions = (self.entity_relation.astype(np.int32) @ self.relation_passage.astype(np.int32)).tocsr()
        return np.diff(mentions.indptr)

    @property
    def shape(self) -> Tuple[int, int, int]:
        """(entities, relations, passages): the sizes of the position spaces."""
        return (self.entity_relation.shape[0], self.entity_relation.shape[1], self.relation_passage.shape[1])

    def relations_of_entities(self, entities: np.ndarray) -> np.ndarray:
        return unique(neighbours(self.entity_relation, entities))

    def entities_of_relations(self, relations: np.ndarray) -> np.ndarray:
        return unique(neighbours(self.relation_entity, relations))

    def relations_of_passages(self, passages: np.ndarray) -> np.ndarray:
        return unique(neighbours(self.passage_relation, passages))

    def passages_of_relation(self, relation: int) -> np.ndarray:
        matrix = self.relation_passage
        return matrix.indices[matrix.indptr[relation] : matrix.indptr[relation + 1]]


def expand_from_entities(
    graph: Graph, entities: Sequence[int], degree: int, through: Optional[np.ndarray] = None
) -> np.ndarray:
    """Relations reached from seed entities: the nonzero columns of the seeds' rows of (A·Aᵀ)^degree·A.

    Degree 1 gives the seeds' own relations plus the relations of every entity sharing one with a seed.
    `through`, a boolean mask over entities, limits which entities the walk continues from (e.g. not
    from hubs); a seed outside it still gives its own relations.
    """
    seeds = unique(np.asarray(entities, dtype=np.int64))
    walk = seeds if through is None else seeds[through[seeds]]
    for _ in range(degree):
        reached = graph.entities_of_relations(graph.relations_of_entities(walk))
        walk = union(walk, reached if through is None else reached[through[reached]])
    return graph.relations_of_entities(union(seeds, walk))


def expand_from_relations(
    graph: Graph, relations: Sequence[int], degree: int, through: Optional[np.ndarray] = None
) -> np.ndarray:
    """Relations reached from seed relations: the nonzero columns of the seeds' rows of (Aᵀ·A)^degree.

    Degree 1 gives the seeds plus every relation sharing an entity with a seed (an entity in `through`,
    when given).
    """
    frontier = unique(np.asarray(relations, dtype=np.int64))
    for _ in range(degree):
        ends = graph.entities_of_relations(frontier)
        frontier = union(frontier, graph.relations_of_entities(ends if through is None else ends[through[ends]]))
    return frontier


class _IntIds:
    """A growable bijection between int64 ids and dense positions, in ~21 bytes an id: ids in a growable
    array, found through a sorted copy (binary search) plus a dict of the ids added since that copy was
    made. A removed id keeps its position, dead, and gets a new one if it comes back."""

    def __init__(self) -> None:
        self._ids = np.zeros(1024, dtype=np.int64)
        self._n = 0
        self.live = bytearray()
        self._keys = np.zeros(0, dtype=np.int64)  # live ids sorted, for positions < self._indexed
        self._at = np.zeros(0, dtype=np.int32)
        self._indexed = 0
        self._recent: Dict[int, int] = {}
        self.ids = _IdView(self)
        self.position = _PositionView(self)

    def __len__(self) -> int:
        return self._n

    def _find(self, key: int) -> int:
        pos = self._recent.get(key)
        if pos is not None:
            return pos
        i = int(np.searchsorted(self._keys, key))
        if i < len(self._keys) and self._keys[i] == key:
            pos = int(self._at[i])
            if self.live[pos]:
                return pos
        return -1

    # how keys are held: int64 here, bytes in `_StrIds`
    def _key(self, key: Any) -> Any:
        return int(key)

    def _keys_array(self, keys: Any) -> np.ndarray:
        return np.asarray(keys, dtype=np.int64)

    def _out(self, value: Any) -> Any:
        return int(value)

    def add(self, key: Any) -> int:
        pos = self._find(self._key(key))
        if pos >= 0:
            return pos
        return int(self.add_new(self._keys_array([key]))[0])

    def add_new(self, keys: Any) -> np.ndarray:
        """Append ids known to be absent and distinct; return their positions."""
        keys = self._keys_array(keys)
        start, end = self._n, self._n + len(keys)
        if end > len(self._ids) or keys.dtype.itemsize > self._ids.dtype.itemsize:
            grown = np.zeros(max(end, 2 * len(self._ids)), dtype=np.promote_types(self._ids.dtype, keys.dtype))
            grown[: self._n] = self._ids[: self._n]
            self._ids = grown
        self._ids[start:end] = keys
        self.live.extend(b"\x01" * len(keys))
        self._n = end
        if len(keys) > 4096 or len(self._recent) + len(keys) > max(4096, self._n // 8):
            self._reindex()
        else:
            self._recent.update(zip(keys.tolist(), range(start, end)))
        return np.arange(start, end, dtype=np.int64)

    def ids_at(self, positions: np.ndarray) -> list:
        """The ids at many positions at once."""
        return [self._out(v) for v in self._ids[np.asarray(positions, dtype=np.int64)].tolist()]

    def lookup(self, keys: Any) -> np.ndarray:
        """Positions of many ids at once; -1 where an id is not stored."""
        keys = self._keys_array(keys)
        out = np.full(len(keys), -1, dtype=np.int64)
        if len(self._keys):
            i = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
            hit = self._keys[i] == keys
            pos = self._at[i[hit]].astype(np.int64)
            alive = np.frombuffer(bytes(self.live), dtype=np.uint8)[pos].astype(bool)
            idx = np.flatnonzero(hit)[alive]
            out[idx] = pos[alive]
        if self._recent:
            for j in np.flatnonzero(out < 0).tolist():
                out[j] = self._recent.get(self._key(keys[j]), -1)
        return out

    def _reindex(self) -> None:
        live = np.flatnonzero(np.frombuffer(bytes(self.live), dtype=np.uint8)[: self._n])
        order = np.argsort(self._ids[live], kind="stable")
        self._keys = self._ids[live][order]
        self._at = live[order].astype(np.int32)
        self._indexed = self._n
        self._recent = {}

    def shrink(self) -> None:
        self._ids = self._ids[: max(self._n, 1)].copy()

    def remove(self, key: Any) -> None:
        key = self._key(key)
        pos = self._find(key)
        if pos >= 0:
            self.live[pos] = 0
            self._recent.pop(key, None)

    def mask(self) -> np.ndarray:
        return np.frombuffer(bytes(self.live), dtype=np.uint8).astype(bool)

    @property
    def nbytes(self) -> int:
        return int(self._ids.nbytes + len(self.live) + self._keys.nbytes + self._at.nbytes + 100 * len(self._recent))


class _StrIds(_IntIds):
    """`_IntIds` for string ids (passage ids), held as fixed-width UTF-8 bytes in numpy arrays (the width
    grows with the longest id): ~2.2× the id length a passage, against ~180 bytes for a dict and a list
    of str. Ids must not end with NUL characters."""

    def __init__(self) -> None:
        super().__init__()
        self._ids = np.zeros(1024, dtype="S1")
        self._keys = np.zeros(0, dtype="S1")

    def _key(self, key: Any) -> Any:
        return key.encode("utf-8") if isinstance(key, str) else bytes(key)

    def _keys_array(self, keys: Any) -> np.ndarray:
        if isinstance(keys, np.ndarray) and keys.dtype.kind == "S":
            return keys
        return np.array([self._key(k) for k in keys], dtype=bytes) if len(keys) else np.zeros(0, dtype="S1")

    def _out(self, value: Any) -> Any:
        return bytes(value).decode("utf-8")


class _Growable:
    """A growable integer array (int32 unless told)."""

    def __init__(self, dtype: type = np.int32) -> None:
        self._data = np.zeros(1024, dtype=dtype)
        self._n = 0

    def shrink(self) -> None:
        self._data = self._data[: max(self._n, 1)].copy()

    def extend(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=self._data.dtype)
        end = self._n + len(values)
        if end > len(self._data):
            grown = np.zeros(max(end, 2 * len(self._data)), dtype=self._data.dtype)
            grown[: self._n] = self._data[: self._n]
            self._data = grown
        self._data[self._n : end] = values
        self._n = end

    def __getitem__(self, pos: int) -> int:
        return int(self._data[pos])

    def __len__(self) -> int:
        return self._n

    def array(self) -> np.ndarray:
        return self._data[: self._n]

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)


class _Names:
    """Strings by position in ~(length + 12) bytes each: UTF-8 in one buffer, with an offset and a
    length per position (a dict of str would take ~150 bytes an entry)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._start = _Growable(np.int64)
        self._length = _Growable()

    def set(self, positions: np.ndarray, names: Sequence[str]) -> None:
        """Name the positions that have no name yet (the first name written wins)."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return
        needed = int(positions.max()) + 1
        if needed > len(self._length):
            self._start.extend(np.zeros(needed - len(self._start), dtype=np.int64))
            self._length.extend(np.full(needed - len(self._length), -1, dtype=np.int32))
        starts, lengths = self._start.array(), self._length.array()
        for pos, name in zip(positions.tolist(), names):
            if lengths[pos] < 0:
                encoded = name.encode("utf-8")
                starts[pos], lengths[pos] = len(self._buffer), len(encoded)
                self._buffer += encoded

    def get(self, pos: int) -> str:
        if pos >= len(self._length) or self._length[pos] < 0:
            return ""
        start = self._start[pos]
        return self._buffer[start : start + self._length[pos]].decode("utf-8")

    def shrink(self) -> None:
        self._start.shrink()
        self._length.shrink()

    @property
    def nbytes(self) -> int:
        return len(self._buffer) + self._start.nbytes + self._length.nbytes


class _IdView:
    def __init__(self, owner: "_IntIds") -> None:
        self._owner = owner

    def __getitem__(self, pos: int) -> Any:
        if pos >= self._owner._n:
            raise IndexError(pos)
        return self._owner._out(self._owner._ids[pos])

    def __len__(self) -> int:
        return self._owner._n

    def __iter__(self):
        return map(self._owner._out, self._owner._ids[: self._owner._n].tolist())


class _PositionView:
    """Read-only mapping id -> position of the live ids."""

    def __init__(self, owner: "_IntIds") -> None:
        self._owner = owner

    def __getitem__(self, key: int) -> int:
        pos = self._owner._find(self._owner._key(key))
        if pos < 0:
            raise KeyError(key)
        return pos

    def __contains__(self, key) -> bool:
        return self._owner._find(self._owner._key(key)) >= 0

    def get(self, key, default=None):
        pos = self._owner._find(self._owner._key(key))
        return default if pos < 0 else pos

    def __len__(self) -> int:
        return int(np.frombuffer(bytes(self._owner.live), dtype=np.uint8).sum())


class GraphCache:
    """The in-memory adjacency, kept current by the store; a cache of what Milvus holds.

    Writers call `add_relations`, `add_passages` and `remove_passages`; readers take `snapshot()`, an
    immutable `Graph` rebuilt lazily after a change. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entities = _IntIds()
        self.relations = _IntIds()
        self.passages = _StrIds()
        # relation position r -> its subject and object entity positions at 2r, 2r + 1: with every
        # relation live, the snapshot's relation×entity matrix uses this array as its indices
        self._ends = _Growable()
        # passage -> relation edges (relation positions), appended in passage position order: passage
        # p's are _edge_relation[_first[p] : _first[p] + _count[p]] (so no passage is stored per edge)
        self._edge_relation = _Growable()
        self._first, self._count = _Growable(), _Growable()
        self._names = _Names()  # entity position -> its name as first written
        self._synonym_a, self._synonym_b = _Growable(), _Growable()  # pairs of entity positions
        self._snapshot: Graph | None = None

    # writes -------------------------------------------------------------------------------------
    def add_relations(self, rows: Iterable[Tuple[int, int, int]]) -> None:
        """Record relations as (relation id, subject entity id, object entity id); vectorized, so that a
        store opens at the speed Milvus reads rows."""
        table = (rows if isinstance(rows, np.ndarray) else np.array(list(rows))).astype(np.int64).reshape(-1, 3)
        if len(table) == 0:
            return
        with self._lock:
            _, first = np.unique(table[:, 0], return_index=True)
            table = table[np.sort(first)]
            table = table[self.relations.lookup(table[:, 0]) < 0]  # a deleted relation stored again is new
            if len(table) == 0:
                return
            ends = table[:, 1:].ravel()
            positions = self.entities.lookup(ends)
            missing = positions < 0
            if missing.any():
                new, first, inverse = np.unique(ends[missing], return_index=True, return_inverse=True)
                order = np.argsort(first, kind="stable")  # new entities in order of appearance
                rank = np.empty(len(order), dtype=np.int64)
                rank[order] = np.arange(len(order))
                positions[missing] = self.entities.add_new(new[order])[rank[inverse.ravel()]]
            self.relations.add_new(table[:, 0])
            self._ends.extend(positions)  # subject, object, subject, object, ...
            self._snapshot = None

    def name_entities(self, entity_ids: Sequence[int], names: Sequence[str]) -> None:
        """Record entity names (as first written); names of unknown entities are ignored."""
        with self._lock:
            positions = self.entities.lookup(np.asarray(entity_ids, dtype=np.int64))
            known = np.flatnonzero(positions >= 0)
            self._names.set(positions[known], [names[i] for i in known.tolist()])

    def entity_name(self, position: int) -> str:
        """The name of the entity at a position ("" if it has none)."""
        return self._names.get(position)

    def add_synonyms(self, pairs: Iterable[Tuple[int, int]]) -> None:
        """Record synonym links as (entity id, entity id); links to unknown entities are ignored."""
        pairs = np.asarray(pairs if isinstance(pairs, np.ndarray) else list(pairs), dtype=np.int64).reshape(-1, 2)
        if len(pairs) == 0:
            return
        self.add_synonym_positions(self.entities.lookup(pairs[:, 0]), self.entities.lookup(pairs[:, 1]))

    def add_synonym_positions(self, a: np.ndarray, b: np.ndarray) -> None:
        """`add_synonyms` by entity positions (-1: unknown, ignored)."""
        with self._lock:
            keep = (a >= 0) & (b >= 0) & (a != b)
            self._synonym_a.extend(a[keep])
            self._synonym_b.extend(b[keep])
            self._snapshot = None

    def add_passages(self, rows: Iterable[Tuple[str, Sequence[int]]]) -> None:
        """Record passages as (passage id, relation ids it states); unknown relations are ignored.
        A passage stored again replaces its relations."""
        latest = dict(rows)  # one row per passage: the last wins
        lengths = np.fromiter((len(r) for r in latest.values()), dtype=np.int64, count=len(latest))
        flat = np.fromiter((r for rels in latest.values() for r in rels), dtype=np.int64, count=int(lengths.sum()))
        self.add_passage_columns(list(latest), np.concatenate([[0], np.cumsum(lengths)]), flat)

    def add_passage_columns(self, passage_ids: List[str], offsets: np.ndarray, relation_ids: np.ndarray) -> None:
        """`add_passages` for distinct passage ids, column by column: passage i states
        relation_ids[offsets[i]:offsets[i + 1]]."""
        if not passage_ids:
            return
        lengths = np.diff(np.asarray(offsets, dtype=np.int64))
        with self._lock:
            keys = self.passages._keys_array(passage_ids)
            for key in keys[self.passages.lookup(keys) >= 0].tolist():  # stored again: replaced
                self.passages.remove(key)
            positions = self.passages.add_new(keys)
            found = self.relations.lookup(relation_ids)
            owner = np.repeat(np.arange(len(positions), dtype=np.int64), lengths)
            keep = found >= 0
            width = max(len(self.relations), 1)
            pairs = unique(owner[keep] * width + found[keep])  # by passage, then relation; no repeats
            owner, relation = pairs // width, pairs % width
            counts = np.bincount(owner, minlength=len(positions))
            starts = len(self._edge_relation) + np.concatenate([[0], np.cumsum(counts)[:-1]])
            self._first.extend(starts)
            self._count.extend(counts)
            self._edge_relation.extend(relation)
            self._snapshot = None

    def compact(self) -> None:
        """Release the spare capacity of the growable arrays (after a bulk load)."""
        with self._lock:
            for array in (self._ends, self._edge_relation, self._first, self._count,
                          self._synonym_a, self._synonym_b):
                array.shrink()
            self.entities.shrink()
            self.relations.shrink()
            self._names.shrink()

    def remove_passages(self, passage_ids: Iterable[str]) -> Tuple[List[int], List[int]]:
        """Forget passages; return the ids of the relations and the entities they leave unsupported.

        Works on the neighbourhood of the removed passages only.
        """
        with self._lock:
            graph = self._snapshot or self._build()
            removed = set()
            for pid in passage_ids:
                pos = self.passages.position.get(pid)
                if pos is not None:
                    self.passages.remove(pid)
                    removed.add(pos)
            if not removed:
                return [], []
            self._snapshot = None
            touched = unique(neighbours(graph.passage_relation, np.fromiter(removed, dtype=np.int64)))
            orphans = [
                int(r) for r in touched if removed.issuperset(graph.passages_of_relation(int(r)).tolist())
            ]
            orphan_set = set(orphans)
            dropped = [
                int(e)
                for e in graph.entities_of_relations(np.array(orphans, dtype=np.int64))
                if orphan_set.issuperset(neighbours(graph.entity_relation, np.array([e])).tolist())
            ]
            relation_ids = [self.relations.ids[p] for p in orphans]
            entity_ids = [self.entities.ids[p] for p in dropped]
            for pos in orphans:
                self.relations.remove(self.relations.ids[pos])
            for pos in dropped:
                self.entities.remove(self.entities.ids[pos])
            return relation_ids, entity_ids

    # reads --------------------------------------------------------------------------------------
    def snapshot(self) -> Graph:
        with self._lock:
            if self._snapshot is None:
                self._snapshot = self._build()
            return self._snapshot

    def _build(self) -> Graph:
        n_ent, n_rel, n_pas = len(self.entities), len(self.relations), len(self.passages)
        alive = self.relations.mask()
        rels = np.flatnonzero(alive).astype(np.int32)
        ends = self._ends.array().reshape(-1, 2)
        ent_rows = np.concatenate([ends[rels, 0], ends[rels, 1]])
        rel_cols = np.concatenate([rels, rels])
        entity_relation = _csr(ent_rows, rel_cols, (n_ent, n_rel))
        if alive.all():  # two entities a relation, in order: share the array instead of a copy
            indptr = np.arange(0, 2 * n_rel + 1, 2, dtype=np.int32)
            relation_entity = sp.csr_matrix(
                (np.ones(2 * n_rel, dtype=np.int8), self._ends.array(), indptr), shape=(n_rel, n_ent), copy=False
            )
        else:
            relation_entity = entity_relation.T.tocsr()
        rel = self._edge_relation.array()
        pas = np.repeat(np.arange(len(self._count), dtype=np.int32), self._count.array())
        live = self.passages.mask()[pas] if len(pas) else np.zeros(0, dtype=bool)
        pas, rel = pas[live], rel[live]
        passage_relation = _csr(pas, rel, (n_pas, n_rel))
        relation_passage = passage_relation.T.tocsr()
        pairs = np.stack([self._synonym_a.array(), self._synonym_b.array()], axis=1)
        entity_entity = _csr(
            np.concatenate([pairs[:, 0], pairs[:, 1]]), np.concatenate([pairs[:, 1], pairs[:, 0]]), (n_ent, n_ent)
        )
        return Graph(entity_relation, relation_entity, relation_passage, passage_relation, entity_entity)

    def export(self) -> Dict[str, np.ndarray]:
        """The live content, as ids, with the positions each row came from (to gather vectors by):
        entity_ids, entity_names, entity_positions; relation_ids, relation_ends (R×2 entity ids), relation_positions; passage_ids, passage_offsets,
        passage_relations (relation ids), passage_positions; synonyms (S×2 indices into entity_ids)."""
        with self._lock:
            entity_ids = self.entities._ids[: len(self.entities)]
            relation_ids = self.relations._ids[: len(self.relations)]
            rels = np.flatnonzero(self.relations.mask())
            ends = entity_ids[self._ends.array().reshape(-1, 2)[rels]]
            passages = np.flatnonzero(self.passages.mask())
            first, count = self._first.array()[passages], self._count.array()[passages]
            lengths = count.astype(np.int64)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            edges = np.repeat(first - offsets[:-1], lengths) + np.arange(int(lengths.sum()))
            edge_relations = self._edge_relation.array()[edges]
            alive = self.relations.mask()[edge_relations] if len(edge_relations) else np.zeros(0, dtype=bool)
            if not alive.all():  # drop edges to removed relations, keep the offsets right
                owner = np.repeat(np.arange(len(passages)), lengths)[alive]
                offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=len(passages)))]).astype(np.int64)
                edge_relations = edge_relations[alive]
            pairs = np.stack([self._synonym_a.array(), self._synonym_b.array()], axis=1).astype(np.int64)
            entity_alive = self.entities.mask()
            pairs = pairs[entity_alive[pairs[:, 0]] & entity_alive[pairs[:, 1]]] if len(pairs) else pairs
            entities = np.flatnonzero(entity_alive)
            synonyms = np.searchsorted(entities, pairs)  # as indices into entity_ids
            return {
                "entity_ids": entity_ids[entities].copy(),
                "entity_names": [self._names.get(p) for p in entities.tolist()],
                "entity_positions": entities,
                "relation_ids": relation_ids[rels].copy(),
                "relation_ends": ends,
                "relation_positions": rels,
                "passage_ids": self.passage_ids(passages),
                "passage_offsets": offsets,
                "passage_relations": relation_ids[edge_relations],
                "passage_positions": passages,
                "synonyms": synonyms,
            }

    def has_entity(self, entity_id: int) -> bool:
        return entity_id in self.entities.position

    def has_relation(self, relation_id: int) -> bool:
        return relation_id in self.relations.position

    def has_passage(self, passage_id: str) -> bool:
        return passage_id in self.passages.position

    def passage_relations(self, passage_id: str):
        """The relation ids a stored passage states, or None if the passage is not stored."""
        pos = self.passages.position.get(passage_id)
        if pos is None:
            return None
        start = self._first[pos]
        rels = self._edge_relation.array()[start : start + self._count[pos]]
        return {self.relations.ids[r] for r in rels.tolist()}

    def passages_of_relation(self, relation_id: int) -> List[str]:
        """The ids of the passages stating a relation, in the order they were stored."""
        pos = self.relations.position.get(relation_id)
        if pos is None:
            return []
        return self.passage_ids(self.snapshot().passages_of_relation(pos))

    def passage_ids(self, positions: np.ndarray) -> List[str]:
        """The ids of the passages at `positions` (one gather)."""
        return self.passages.ids_at(positions)

    def synonym_count(self) -> int:
        return len(self._synonym_a)

    def counts(self) -> Dict[str, int]:
        with self._lock:
            return {
                "entities": len(self.entities.position),
                "relations": len(self.relations.position),
                "passages": len(self.passages.position),
            }


@dataclass(frozen=True)
class Subgraph:
    """A local entity–relation–passage graph: node k of `adjacency` is entity `entities[k]` for
    k < len(entities), then relation `relations[k - len(entities)]`, then the passages."""

    adjacency: sp.csr_matrix
    entities: np.ndarray
    relations: np.ndarray
    passages: np.ndarray

    def slices(self) -> Tuple[slice, slice, slice]:
        e, r = len(self.entities), len(self.relations)
        return slice(0, e), slice(e, e + r), slice(e + r, e + r + len(self.passages))


def local_subgraph(
    graph: Graph, relations: np.ndarray, relation_weights: np.ndarray, passages: Sequence[int] = ()
) -> Subgraph:
    """The subgraph around candidate `relations`: their entities, themselves and their passages (plus the
    given `passages`). Each relation's edges carry its weight (e.g. its similarity to the question), so
    a walk prefers relevant relations. Its size follows the candidates, never the whole graph."""
    relations = np.asarray(relations, dtype=np.int64)
    entities = graph.entities_of_relations(relations)
    passages = union(unique(neighbours(graph.relation_passage, relations)), np.asarray(passages, dtype=np.int64))
    weights = sp.diags(np.asarray(relation_weights, dtype=np.float64))
    er = graph.entity_relation[entities][:, relations] @ weights
    rp = weights @ graph.relation_passage[relations][:, passages]
    adjacency = sp.bmat([[None, er, None], [er.T, None, rp], [None, rp.T, None]], format="csr")
    return Subgraph(adjacency.astype(np.float64), entities, relations, passages)


def personalized_pagerank(
    adjacency: sp.csr_matrix, personalization: np.ndarray, damping: float = 0.5, iterations: int = 50, tol: float = 1e-9
) -> np.ndarray:
    """Personalized PageRank by power iteration on a small symmetric weighted adjacency.

    `damping` is the probability of following an edge (1 - damping restarts at the personalization).
    Returns a distribution over the nodes; zeros if the personalization is all zero.
    """
    total = personalization.sum()
    if total <= 0:
        return np.zeros_like(personalization, dtype=np.float64)
    restart = personalization / total
    out_weight = np.asarray(adjacency.sum(axis=1)).ravel()
    inverse = np.divide(1.0, out_weight, out=np.zeros_like(out_weight), where=out_weight > 0)
    transition = (sp.diags(inverse) @ adjacency).T.tocsr()  # column-stochastic where edges exist
    dangling = out_weight == 0
    rank = restart.copy()
    for _ in range(iterations):
        step = transition @ rank + rank[dangling].sum() * restart  # dangling mass restarts
        new = (1 - damping) * restart + damping * step
        if np.abs(new - rank).sum() < tol:
            return new
        rank = new
    return rank


def specificity(graph: Graph, entities: np.ndarray) -> np.ndarray:
    """1 / the number of passages each entity appears in (HippoRAG's node specificity)."""
    return 1.0 / np.maximum(1, graph.passage_counts[np.asarray(entities, dtype=np.int64)])


def chain_scores(
    graph: Graph, relations: np.ndarray, similarities: np.ndarray, hub_passages: float, synonyms: bool = True
) -> Tuple[np.ndarray, np.ndarray]:
    """Score candidate relations as two-step chains: s(r) = sim(r) + max sim(r') over the candidates r'
    that share an entity with r, or a synonym of one. Entities stated in more than `hub_passages`
    passages ("United States", "2014") link too much to mean anything and do not chain.

    Returns the scores and, for each relation, the candidate index of its best neighbour (-1 if none).
    The cost follows the candidates: a |candidates|×|candidates| sparse product.
    """
    relations = np.asarray(relations, dtype=np.int64)
    similarities = np.clip(np.asarray(similarities, dtype=np.float64), 0.0, None)
    if len(relations) == 0:
        return similarities, np.zeros(0, dtype=np.int64)
    incidence = graph.relation_entity[relations]  # C×E
    keep = np.asarray(graph.passage_counts[incidence.indices] <= hub_passages, dtype=np.float64)
    incidence = sp.csr_matrix((incidence.data * keep, incidence.indices, incidence.indptr), shape=incidence.shape)
    incidence.eliminate_zeros()
    # renumber the entities touched (the candidates' and their synonyms) 0..L-1, so that no product
    # below allocates anything the size of the whole graph
    ends = unique(incidence.indices)
    linked = graph.entity_entity[ends] if synonyms else None  # rows: ends; columns: their synonyms
    local = ends if linked is None else union(ends, linked.indices)
    incidence = sp.csr_matrix(
        (incidence.data, np.searchsorted(local, incidence.indices), incidence.indptr), shape=(len(relations), len(local))
    )
    with_synonyms = incidence
    if linked is not None:  # entity -> its synonyms, as L×L (the rows of `ends` at their local numbers)
        counts = np.zeros(len(local), dtype=np.int64)
        counts[np.searchsorted(local, ends)] = np.diff(linked.indptr)
        indptr = np.concatenate([[0], np.cumsum(counts)])
        synonyms_of = sp.csr_matrix((linked.data, np.searchsorted(local, linked.indices), indptr), shape=(len(local),) * 2)
        with_synonyms = incidence + incidence @ synonyms_of
    adjacency = (incidence @ with_synonyms.T).tocsr()
    adjacency = (adjacency + adjacency.T).tocsr()
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    best = np.full(len(relations), -1, dtype=np.int64)
    neighbour_score = np.zeros(len(relations))
    for i in range(len(relations)):  # rows are short: the candidates' local neighbourhoods
        row = adjacency.indices[adjacency.indptr[i] : adjacency.indptr[i + 1]]
        if len(row):
            j = row[np.argmax(similarities[row])]
            best[i], neighbour_score[i] = j, similarities[j]
    return similarities + neighbour_score, best


def passage_scores(
    graph: Graph, relations: np.ndarray, relation_scores: np.ndarray
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every passage stating one of `relations`: its best relation score and which relation (candidate
    index) gave it. Returns (passage positions, scores, best relation index)."""
    relations = np.asarray(relations, dtype=np.int64)
    block = graph.relation_passage[relations].tocoo()  # C×P
    if block.nnz == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=np.int64)
    scores = np.asarray(relation_scores, dtype=np.float64)[block.row]
    order = np.lexsort((-scores, block.col))  # by passage, best score first
    cols, first = np.unique(block.col[order], return_index=True)
    winners = order[first]
    return cols.astype(np.int64), scores[winners], block.row[winners].astype(np.int64)
