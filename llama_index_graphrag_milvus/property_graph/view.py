"""Our rows as property graph objects: which PGI id names what, and the `EntityNode`s, `ChunkNode`s and
triplets built from the rows (`rows.py`).

An id PGI passes names a chunk when a chunk was written under it (or it is a passage row's id: passages
that `GraphRAGTransform` wrote are chunks under their passage id), else an entity: the entity whose id
is `entity_id(id)`, so that ids match as entity names do in the rest of the store (case-insensitive,
whitespace collapsed). A relation is an `Edge`: its ends are entity or chunk keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from llama_index.core.graph_stores.types import TRIPLET_SOURCE_KEY, ChunkNode, EntityNode, LabelledNode, Relation
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.utils import node_to_metadata_dict

from llama_index_graphrag_milvus.milvus.filters import literal_list
from llama_index_graphrag_milvus.property_graph.rows import CHUNK, ENTITY, RELATION, Rows, key_of, side_id, spellings
from llama_index_graphrag_milvus.schema import entity_id

PGTriplet = Tuple[LabelledNode, Relation, LabelledNode]


def entity_key(name_or_id: str) -> str:
    """The key of the entity a PGI id or a name denotes."""
    return side_id(ENTITY, entity_id(name_or_id))


def chunk_key(chunk_id: str) -> str:
    return side_id(CHUNK, chunk_id)


def matches(properties: Dict[str, Any], sources: Sequence[str], wanted: Dict[str, Any]) -> bool:
    """Whether any wanted property holds (as `SimplePropertyGraphStore.get` matches): `triplet_source_id`
    holds for each chunk that asserted the thing."""
    return any(
        properties.get(k) == v or (k == TRIPLET_SOURCE_KEY and v in sources) for k, v in wanted.items()
    )


@dataclass
class Edge:
    """A relation of the property graph: stated in the relations collection or kept in the side
    collection only (no source chunk, or an end that is a chunk)."""

    sid: str
    label: str
    ends: Tuple[str, str]
    names: Tuple[str, str]
    properties: Dict[str, Any] = field(default_factory=dict)
    sources: List[str] = field(default_factory=list)
    stated: bool = False

    @classmethod
    def of_relation(cls, row: Dict[str, Any], side: Optional[Dict[str, Any]]) -> "Edge":
        """From a relations collection row, with its side row's properties and sources if it has one."""
        return cls(
            sid=side_id(RELATION, row["id"]), label=row["predicate"],
            ends=(side_id(ENTITY, row["subject_id"]), side_id(ENTITY, row["object_id"])),
            names=(row["subject"], row["object"]), stated=True,
            properties=dict(side["properties"]) if side else {}, sources=list(side["sources"]) if side else [],
        )

    @classmethod
    def of_side(cls, row: Dict[str, Any]) -> "Edge":
        return cls(sid=row["id"], label=row["label"], ends=(row["source_key"], row["target_key"]), names=(row["subject"], row["object"]),
                   properties=dict(row["properties"]), sources=list(row["sources"]), stated=bool(row["stated"]))


@dataclass
class Resolved:
    """What a PGI id names: a chunk (with its passage id; `stored` when the passage still exists) or an
    entity (`stored` when it has an entity row or a side row)."""

    id: str
    kind: str
    key: str
    passage_id: Optional[str] = None
    stored: bool = False


class View:
    """Builds property graph objects from rows."""

    def __init__(self, rows: Rows) -> None:
        self.rows = rows

    # ids ----------------------------------------------------------------------------------------
    def resolve(self, ids: Sequence[str]) -> List[Resolved]:
        """What each id names (three queries for the lot)."""
        ids = list(dict.fromkeys(str(i) for i in ids))
        side = self.rows.side([chunk_key(i) for i in ids] + [entity_key(i) for i in ids])
        passages = self.rows.passages([i for i in ids if chunk_key(i) not in side])
        aliased = {side[chunk_key(i)]["passage_id"] for i in ids if chunk_key(i) in side}
        present = set(passages) | set(self.rows.passages(list(aliased)))
        named = self.rows.entity_names([entity_id(i) for i in ids])
        found = []
        for i in ids:
            if chunk_key(i) in side:
                pid = side[chunk_key(i)]["passage_id"]
                found.append(Resolved(i, CHUNK, chunk_key(i), pid, pid in present))
            elif i in passages:
                found.append(Resolved(i, CHUNK, chunk_key(i), i, True))
            else:
                stored = entity_id(i) in named or entity_key(i) in side
                found.append(Resolved(i, ENTITY, entity_key(i), None, stored))
        return found

    def chunk_ids(self, passage_ids: Sequence[str]) -> Dict[str, str]:
        """The chunk id each passage is known by: the one PGI wrote it under, else its passage id."""
        aliases = self.rows.chunks_of_passages(passage_ids)
        return {pid: (aliases.get(pid) or [pid])[0] for pid in passage_ids}

    # nodes --------------------------------------------------------------------------------------
    def llama_nodes(self, chunks: Dict[str, str]) -> Dict[str, BaseNode]:
        """The ingested nodes of chunks ({chunk id: passage id}), each under its chunk id."""
        stored = self.rows.store.get_passages(list(set(chunks.values())))
        found: Dict[str, BaseNode] = {}
        for chunk_id, pid in chunks.items():
            node = stored.get(pid)
            if node is not None:
                found[chunk_id] = node if node.node_id == chunk_id else node.model_copy(update={"id_": chunk_id})
        return found

    def chunk_nodes(self, chunks: Dict[str, str]) -> Dict[str, ChunkNode]:
        """`ChunkNode`s of chunks ({chunk id: passage id}); their properties are the node's metadata dict,
        as `PropertyGraphStore.upsert_llama_nodes` keeps them."""
        return {
            chunk_id: ChunkNode(text=node.get_content(MetadataMode.NONE), id_=chunk_id,
                                properties=node_to_metadata_dict(node, remove_text=True, flat_metadata=False))
            for chunk_id, node in self.llama_nodes(chunks).items()
        }

    def entity_nodes(self, entity_ids: Iterable[int], names: Optional[Dict[int, str]] = None) -> Dict[int, EntityNode]:
        """`EntityNode`s of entities with an entity row or a side row: the name as first stored, the label
        and properties of the side row (else "entity" and none)."""
        entity_ids = list(dict.fromkeys(int(e) for e in entity_ids))
        stored = self.rows.entity_names(entity_ids) if names is None else names
        side = self.rows.side([side_id(ENTITY, e) for e in entity_ids])
        found: Dict[int, EntityNode] = {}
        for e in entity_ids:
            row = side.get(side_id(ENTITY, e))
            name = stored.get(e) or (row["name"] if row else None)
            if name is None:
                continue
            found[e] = EntityNode(name=name, label=row["label"] if row else "entity",
                                  properties=dict(row["properties"]) if row else {})
        return found

    # edges --------------------------------------------------------------------------------------
    def decorated(self, relation_rows: List[Dict[str, Any]]) -> List[Edge]:
        """Edges from relations collection rows, with their side rows' properties and sources."""
        side = self.rows.side([side_id(RELATION, r["id"]) for r in relation_rows])
        return [Edge.of_relation(r, side.get(side_id(RELATION, r["id"]))) for r in relation_rows]

    def touching(self, keys: Sequence[str]) -> List[Edge]:
        """Every edge with an end among the entity and chunk keys."""
        entities = [int(key_of(k)) for k in keys if k.startswith(ENTITY + ":")]
        edges = self.decorated(self.rows.relations_touching(entities)) if entities else []
        return edges + [Edge.of_side(row) for row in self.rows.side_touching(keys)]

    def named(self, labels: Sequence[str]) -> List[Edge]:
        """Every edge with one of these labels (as written, or in the usual cases: see `spellings`)."""
        side = self.rows.side_where(f'kind == "{RELATION}" and stated == false and label in {literal_list(spellings(labels))}')
        return self.decorated(self.rows.relations_named(labels)) + [Edge.of_side(row) for row in side]

    def triplets(self, edges: Sequence[Edge]) -> List[PGTriplet]:
        """The triplets of edges. The subject of each carries the triplet's source chunk in its
        `triplet_source_id` (a chunk that states the relation), which PGI's retrievers read to attach
        the source text."""
        edges = list(edges)
        entity_ids = {int(key_of(k)) for e in edges for k in e.ends if k.startswith(ENTITY + ":")}
        entities = self.entity_nodes(entity_ids)
        unsourced = [int(key_of(e.sid)) for e in edges if e.stated and not e.sources]
        stating = self.rows.passages_stating(unsourced) if unsourced else {}
        by_chunk = self.chunk_ids(sorted({ps[0] for ps in stating.values()}))
        chunk_ends = {key_of(k) for e in edges for k in e.ends if k.startswith(CHUNK + ":")}
        chunks = self.chunk_nodes(self._passages_of(chunk_ends)) if chunk_ends else {}
        found: List[PGTriplet] = []
        for edge in edges:
            ends = [self._node(k, name, entities, chunks) for k, name in zip(edge.ends, edge.names)]
            source = edge.sources[0] if edge.sources else None
            if source is None and int(key_of(edge.sid)) in stating:
                source = by_chunk[stating[int(key_of(edge.sid))][0]]
            properties = dict(edge.properties)
            if source is not None:
                properties[TRIPLET_SOURCE_KEY] = source
                ends[0] = ends[0].model_copy(update={"properties": {**ends[0].properties, TRIPLET_SOURCE_KEY: source}})
            relation = Relation(label=edge.label, source_id=ends[0].id, target_id=ends[1].id, properties=properties)
            found.append((ends[0], relation, ends[1]))
        return found

    def _passages_of(self, chunk_ids: Iterable[str]) -> Dict[str, str]:
        return {r.id: r.passage_id for r in self.resolve(list(chunk_ids)) if r.kind == CHUNK and r.stored}

    @staticmethod
    def _node(key: str, name: str, entities: Dict[int, EntityNode], chunks: Dict[str, ChunkNode]) -> LabelledNode:
        if key.startswith(CHUNK + ":"):
            return chunks.get(key_of(key)) or EntityNode(name=name)
        if key.startswith(ENTITY + ":"):
            return entities.get(int(key_of(key))) or EntityNode(name=name)
        return EntityNode(name=name)  # a node id (a document) at the far end of a relation from a chunk
