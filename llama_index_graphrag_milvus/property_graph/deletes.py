"""The deletes of the property graph store: chunks, entities and relations out, leaving no orphan.

A chunk's passage goes through the graph store (with the relations only it states and the entities
left with none); an entity goes with every relation that names it, and a relation out of every passage
that states it (those passages are written again without it, their embeddings kept). Then the side
rows follow: those of what was deleted, and of what only deleted chunks asserted.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from llama_index_graphrag_milvus.property_graph.reads import side_property_filter
from llama_index_graphrag_milvus.property_graph.rows import CHUNK, ENTITY, key_of
from llama_index_graphrag_milvus.property_graph.view import chunk_key, entity_key, matches
from llama_index_graphrag_milvus.property_graph.writes import Writer


class Deleter:
    """Deletes matching data, through the graph store and then the side rows."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self.rows, self.reader, self.view, self.store = writer.rows, writer.reader, writer.view, writer.store

    # deleting -----------------------------------------------------------------------------------
    def delete(
        self,
        entity_names: Optional[List[str]] = None,
        relation_names: Optional[List[str]] = None,
        properties: Optional[dict] = None,
        ids: Optional[List[str]] = None,
    ) -> None:
        """Delete matching chunks, entities and relations: each chunk's passage (and the relations only
        it states, and the entities left with none), each entity with every relation that names it,
        and each relation from every passage that states it; the side rows follow."""
        if not (entity_names or relation_names or properties or ids):
            return
        chunks, entities = self._targets(entity_names or [], properties or {}, ids or [])
        edges = self.view.touching(sorted(entities)) if entities else []
        if relation_names:
            edges += self.view.named(relation_names)
        if properties:
            edges += [e for e in self.reader.edges_with(properties) if matches(e.properties, e.sources, properties)]
        doomed = {pid for pid in chunks.values() if pid}
        touched = {k for e in edges for k in e.ends}
        touched |= {entity_key(n) for ts in self.writer.stated(sorted(doomed)).values() for t in ts for n in (t.subject, t.object)}
        self._unstate({int(key_of(e.sid)) for e in edges if e.stated}, doomed)
        self._delete_passages(sorted(doomed))
        self._clean_side(chunks, entities, {e.sid for e in edges}, touched - entities)

    def _targets(self, names: List[str], properties: Dict[str, Any], ids: List[str]) -> Tuple[Dict[str, Optional[str]], Set[str]]:
        """The chunks ({chunk id: passage id}) and entity keys to delete."""
        chunks: Dict[str, Optional[str]] = {}
        entities = {entity_key(n) for n in names}
        for r in self.view.resolve(ids):
            if r.kind == CHUNK:
                chunks[r.id] = r.passage_id
            elif r.stored:
                entities.add(r.key)
        if properties:
            passages = [pid for k, v in properties.items() for pid in self.rows.passage_ids_where(k, v)]
            for chunk_id, pid in self.reader.chunk_map(passages).items():
                chunks.setdefault(chunk_id, pid)
            rows = self.rows.side_where(side_property_filter(ENTITY, properties))
            entities |= {r["id"] for r in rows if matches(r["properties"], r["sources"], properties)}
        aliases = self.rows.chunks_of_passages([p for p in chunks.values() if p])
        for pid, chunk_ids in aliases.items():
            chunks.update({c: pid for c in chunk_ids})
        return chunks, entities

    def _unstate(self, relation_ids: Set[int], doomed: Set[str]) -> None:
        """Take relations out of every passage that states them (passages about to go aside)."""
        if not relation_ids:
            return
        stating = self.rows.passages_stating(sorted(relation_ids))
        pids = sorted({p for ps in stating.values() for p in ps} - doomed)
        current = self.writer.stated(pids)
        self.writer.rewrite({pid: [t for t in current[pid] if t.id not in relation_ids] for pid in pids if pid in current})

    def _delete_passages(self, pids: List[str]) -> None:
        """Delete passages one by one, through the graph store."""
        if not pids:
            return
        delete_passages = getattr(self.store, "delete_passages", None)
        if delete_passages is not None:  # the graph store deletes single passages itself
            delete_passages(pids)
            return
        doomed = set(pids)
        docs = {row["doc_id"] for row in self.rows.passages(pids).values()}
        for doc in sorted(docs):
            kept = [p for p in self.store.passage_ids(doc) if p not in doomed]
            triplets = self.writer.stated(kept)
            rows = self.rows.passages(kept)
            nodes = self.store.get_passages(kept)
            for pid in kept:
                nodes[pid].embedding = [float(x) for x in rows[pid]["embedding"]]
            self.store.delete(doc)
            self.store.add([nodes[p] for p in kept], [triplets.get(p, []) for p in kept])

    def _clean_side(self, chunks: Dict[str, Optional[str]], entities: Set[str], relations: Set[str], touched: Set[str]) -> None:
        """Drop the side rows of what was deleted, and of what only deleted chunks asserted; entities
        that lost their last stored relation but keep their side row become standalone."""
        drop = {chunk_key(c) for c in chunks} | set(entities) | set(relations)
        gone = set(chunks)
        keep: List[Dict[str, Any]] = []
        for row in self.rows.side_with_source(sorted(gone)):
            if row["id"] in drop:
                continue
            ends_gone = row["source_key"] in drop or row["target_key"] in drop
            sources = [s for s in row["sources"] if s not in gone]
            if ends_gone or (row["sources"] and not sources):
                drop.add(row["id"])
            else:
                keep.append({**row, "sources": sources})
        for edge in self.view.touching(sorted(entities)) if entities else []:
            if not edge.stated:
                drop.add(edge.sid)
        self.rows.drop(sorted(drop))
        self.rows.put(keep)
        self.rows.drop_standalone([int(key_of(k)) for k in drop if k.startswith(ENTITY + ":")])
        survivors = self.rows.side(sorted((touched | {r["id"] for r in keep}) - drop))
        self.writer.sync_standalone({int(key_of(k)): r["name"] for k, r in survivors.items() if r["kind"] == ENTITY})
