"""The writes of the property graph store: chunks, entities and relations in, matching data out.

Chunks and the relations they state go through the graph store's own `add` and `delete`, so that
they are the rows `GraphRAGTransform` writes (passages with the ids of the relations they state,
entities and relations embedded by the store's embed model, ids from normalized names): a chunk is a
passage, and a relation whose source chunk (`triplet_source_id`) is stored is written with that
passage. The side collection (`rows.py`) gets what our rows lack, after the graph store's write: labels
and properties, the chunk id PGI knows a passage by, entities that no stored relation names, and
relations with no source chunk or with a chunk as an end.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Sequence

from llama_index.core.graph_stores.types import TRIPLET_SOURCE_KEY, ChunkNode, LabelledNode, Relation
from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from llama_index_graphrag_milvus.property_graph.reads import Reader
from llama_index_graphrag_milvus.property_graph.rows import (
    CHUNK, ENTITY, ENTITY_EDGES_MARK, NODE, RELATION, Rows, check_chunk_id, key_of, properties_json, side_id,
)
from llama_index_graphrag_milvus.property_graph.view import chunk_key, entity_key
from llama_index_graphrag_milvus.schema import Triplet, entity_id, parse_triplet, passage_id, relation_id

logger = logging.getLogger(__name__)


def as_llama_node(chunk: ChunkNode) -> BaseNode:
    """The LlamaIndex node a `ChunkNode` stands for (its properties are a node's metadata dict when
    `upsert_llama_nodes` made it, else plain metadata)."""
    if "_node_content" in chunk.properties:
        node = metadata_dict_to_node(chunk.properties, text=chunk.text)
        node = node.model_copy(update={"id_": chunk.id})
    else:
        node = TextNode(id_=chunk.id, text=chunk.text, metadata=dict(chunk.properties))
    node.embedding = chunk.embedding
    return node


def _source(item: Any) -> Optional[str]:
    source = item.properties.get(TRIPLET_SOURCE_KEY)
    return str(source) if source is not None else None


class Writer:
    """Upserts and deletes, through the graph store where it can and the side rows where it must."""

    def __init__(self, rows: Rows, reader: Reader) -> None:
        self.rows, self.reader, self.view = rows, reader, reader.view
        self.store = rows.store

    # chunks -------------------------------------------------------------------------------------
    def upsert_llama_nodes(self, nodes: Sequence[BaseNode]) -> None:
        """Store nodes as passages (with the relations they already state, if stored), and the chunk
        id each is known by."""
        nodes = [n for n in nodes if check_chunk_id(n.node_id)]
        pids = [passage_id(n.ref_doc_id or n.node_id, n.get_content(MetadataMode.NONE)) for n in nodes]
        stated = self.stated(pids)
        written = set(self.store.add(nodes, [stated.get(pid, []) for pid in pids]))
        self.rows.put([{"id": chunk_key(n.node_id), "kind": CHUNK, "passage_id": pid}
                       for n, pid in zip(nodes, pids) if pid in written])

    def stated(self, pids: Sequence[str]) -> Dict[str, List[Triplet]]:
        """The triplets each stored passage states."""
        rows = self.rows.passages(pids)
        described = self.store.describe([r for row in rows.values() for r in row["relation_ids"]])
        return {pid: [described[r] for r in row["relation_ids"] if r in described] for pid, row in rows.items()}

    def rewrite(self, changes: Dict[str, List[Triplet]]) -> None:
        """Store passages again with new triplet lists (their embeddings kept)."""
        if not changes:
            return
        rows = self.rows.passages(list(changes))
        nodes = self.store.get_passages(list(changes))
        todo = [pid for pid in changes if pid in nodes and pid in rows]
        for pid in todo:
            nodes[pid].embedding = [float(x) for x in rows[pid]["embedding"]]
        self.store.add([nodes[pid] for pid in todo], [changes[pid] for pid in todo])

    # entities -----------------------------------------------------------------------------------
    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        """Chunks as passages; entities as side rows (label, properties, sources), and standalone while no
        stored relation names them (so that `vector_query` finds them)."""
        chunks = [n for n in nodes if isinstance(n, ChunkNode)]
        if chunks:
            self.upsert_llama_nodes([as_llama_node(c) for c in chunks])
        merged: Dict[str, Dict[str, Any]] = {}
        for node in nodes:
            if isinstance(node, ChunkNode):
                continue
            name = getattr(node, "name", None) or node.id
            if parse_triplet([name, "is", "entity"]) is None:
                logger.warning("Skipped an entity with a malformed name (empty or over 512 characters): %r", name[:80])
                continue
            sid = entity_key(node.id)
            row = merged.setdefault(sid, {"id": sid, "kind": ENTITY, "name": name, "properties": {}, "sources": []})
            row["label"] = node.label
            row["properties"].update(properties_json(node.properties, f"entity {name!r}"))
            source = _source(node)
            row["sources"] += [check_chunk_id(source)] if source else []
        self._put_entities(list(merged.values()))

    def _put_entities(self, rows: List[Dict[str, Any]]) -> None:
        """Merge entity side rows into the stored ones."""
        old = self.rows.side([r["id"] for r in rows])
        for row in rows:
            before = old.get(row["id"])
            if before:
                row["properties"] = {**before["properties"], **row["properties"]}
                row["sources"] = list(before["sources"]) + row["sources"]
        self.rows.put(rows)
        self.sync_standalone({int(key_of(r["id"])): r["name"] for r in rows})

    def sync_standalone(self, names: Dict[int, str]) -> None:
        """Of these entities (with side rows), those with no entity row are standalone: `vector_query`
        finds them by their name's embedding in the standalone collection. Those with one are not."""
        if not names:
            return
        ids = list(names)
        stored = self.store.has_entities(ids)
        already = self.rows.standalone(ids)
        added = [e for e, has in zip(ids, stored) if not has and e not in already]
        if added:
            vectors = self.store.embed_model.get_text_embedding_batch([names[e] for e in added])
            self.rows.put_standalone(added, vectors)
        self.rows.drop_standalone([e for e, has in zip(ids, stored) if has and e in already])

    # relations ----------------------------------------------------------------------------------
    def upsert_relations(self, relations: Sequence[Relation]) -> None:
        """Relations whose source chunk is stored and whose ends are entities are written with that
        chunk's passage; the others go to the side collection only. Every relation's label, properties
        and sources go to its side row."""
        ends = list({i for r in relations for i in (r.source_id, r.target_id)} | {s for r in relations if (s := _source(r))})
        resolved = {r.id: r for r in self.view.resolve(ends)}
        names = {k: row["name"] for k, row in self.rows.side([entity_key(i) for i in ends]).items()}
        stated: Dict[str, List[Triplet]] = {}
        side: Dict[str, Dict[str, Any]] = {}
        for relation in relations:
            keys = [resolved[i].key for i in (relation.source_id, relation.target_id)]
            if any(k.startswith(CHUNK) for k in keys):  # node ids at both ends (a chunk and its document)
                keys = [k if k.startswith(CHUNK) else side_id(NODE, i) for k, i in zip(keys, (relation.source_id, relation.target_id))]
            labels = [_name(names.get(k), i) for k, i in zip(keys, (relation.source_id, relation.target_id))]
            triplet = parse_triplet([labels[0], relation.label, labels[1]])
            if triplet is None:
                logger.warning("Skipped a malformed relation (an empty or over-long name or label): %s", relation)
                continue
            source = _source(relation)
            chunk = resolved.get(source) if source else None
            on_graph = chunk is not None and chunk.kind == CHUNK and chunk.stored and all(k.startswith(ENTITY) for k in keys)
            if on_graph:
                stated.setdefault(chunk.passage_id, []).append(triplet)
            sid = side_id(RELATION, triplet.id if on_graph else relation_id(relation.source_id, relation.label, relation.target_id))
            row = side.setdefault(sid, {"id": sid, "kind": RELATION, "properties": {}, "sources": [], "stated": False})
            row.update(label=relation.label, subject=relation.source_id, object=relation.target_id,
                       source_key=keys[0], target_key=keys[1])
            row["stated"] = row["stated"] or on_graph
            row["properties"].update(properties_json(relation.properties, f"relation {relation}"))
            row["sources"] += [check_chunk_id(source)] if source else []
        current = self.stated(list(stated))
        self.rewrite({pid: _union(current.get(pid, []), ts) for pid, ts in stated.items()
                       if {t.id for t in ts} - {t.id for t in current.get(pid, [])}})
        self._put_relations(list(side.values()))
        self._add_missing_ends([r for r in side.values() if not r["stated"]])
        ends = {k: row[f] for row in side.values() for k, f in ((row["source_key"], "subject"), (row["target_key"], "object"))}
        known = self.rows.side([k for k in ends if k.startswith(ENTITY)])
        self.sync_standalone({int(key_of(k)): row["name"] for k, row in known.items()})  # now stated: not standalone

    def _put_relations(self, rows: List[Dict[str, Any]]) -> None:
        old = self.rows.side([r["id"] for r in rows])
        for row in rows:
            before = old.get(row["id"])
            if before:
                row["properties"] = {**before["properties"], **row["properties"]}
                row["sources"] = list(before["sources"]) + row["sources"]
                row["stated"] = row["stated"] or bool(before["stated"])
        if any(not r["stated"] and r["source_key"].startswith(ENTITY) and r["target_key"].startswith(ENTITY) for r in rows):
            rows = rows + [{"id": ENTITY_EDGES_MARK, "kind": "meta"}]
        self.rows.put(rows)

    def _add_missing_ends(self, rows: List[Dict[str, Any]]) -> None:
        """Entities at the ends of side-only relations between entities, which are nodes of the graph as
        in `SimplePropertyGraphStore` (chunk-ended relations' other ends, e.g. a document id, are not)."""
        wanted = {}
        for row in rows:
            ends = (row["source_key"], row["target_key"])
            if all(k.startswith(ENTITY) for k in ends):
                wanted.update({k: n for k, n in zip(ends, (row["subject"], row["object"]))})
        known = self.rows.side(list(wanted))
        stored = self.store.has_entities([int(key_of(k)) for k in wanted]) if wanted else []
        missing = [k for k, has in zip(wanted, stored) if not has and k not in known]
        self._put_entities([{"id": k, "kind": ENTITY, "name": wanted[k], "label": "entity", "properties": {}, "sources": []}
                            for k in missing])

def _name(stored: Optional[str], pgi_id: str) -> str:
    """The name to store for a relation's end: the entity's name when it has the id's identity (a name
    with double quotes does not: PGI's id replaces them), else the id."""
    return stored if stored is not None and entity_id(stored) == entity_id(pgi_id) else pgi_id


def _union(current: List[Triplet], added: List[Triplet]) -> List[Triplet]:
    found: Dict[int, Triplet] = {t.id: t for t in current}
    for t in added:
        found.setdefault(t.id, t)
    return list(found.values())
