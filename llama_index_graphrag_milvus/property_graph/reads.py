"""The reads of the property graph store: `get`, `get_triplets`, `get_rel_map`, `vector_query` and the
schema, with `SimplePropertyGraphStore`'s semantics where it has them.

Names and relation labels match as the rest of the store matches them: entity ids are those of the
normalized name (case-insensitive, whitespace collapsed), labels are compared normalized too.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from llama_index.core.graph_stores.types import TRIPLET_SOURCE_KEY, ChunkNode, LabelledNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from llama_index_graphrag_milvus.errors import GraphStoreError
from llama_index_graphrag_milvus.milvus.filters import milvus_literal
from llama_index_graphrag_milvus.property_graph.rows import CHUNK, ENTITY, NODE, RELATION, Rows, key_of, property_filter, side_id
from llama_index_graphrag_milvus.property_graph.view import Edge, PGTriplet, View, chunk_key, entity_key, matches
from llama_index_graphrag_milvus.schema import normalize_name


def side_property_filter(kind: str, properties: Dict[str, Any]) -> str:
    """Side rows of `kind` with any of the properties (Milvus cannot compare lists or dicts: rows of the
    kind are then all candidates, checked in Python)."""
    parts = []
    for key, value in properties.items():
        compared = property_filter("properties", key, value)
        if compared is None:
            return f'kind == "{kind}"'
        parts.append(compared)
        if key == TRIPLET_SOURCE_KEY and isinstance(value, str):
            parts.append(f"array_contains(sources, {milvus_literal(value)})")
    return f'kind == "{kind}" and (' + " or ".join(parts) + ")"


class Reader:
    """The reads, over a `View` of the rows."""

    def __init__(self, rows: Rows) -> None:
        self.rows, self.view = rows, View(rows)

    # nodes --------------------------------------------------------------------------------------
    def get(self, properties: Optional[dict] = None, ids: Optional[List[str]] = None) -> List[LabelledNode]:
        """Nodes by id (in the order of `ids`), by properties (any of them holds), or both; every node
        when neither is given."""
        if ids:
            nodes = self._by_ids(ids)
            if properties:
                nodes = [n for n, sources in nodes if matches(n.properties, sources, properties)]
                return nodes
            return [n for n, _ in nodes]
        if properties:
            return self._by_properties(properties)
        entities = self.rows.all_entities()
        side = self.rows.side_where(f'kind == "{ENTITY}"')
        entity_ids = list(entities) + [int(key_of(r["id"])) for r in side]
        nodes: List[LabelledNode] = list(self.view.entity_nodes(entity_ids, names=entities).values())
        passages = self.rows.all_passage_ids()
        return nodes + list(self.view.chunk_nodes(self.chunk_map(passages)).values())

    def _by_ids(self, ids: Sequence[str]) -> List[Tuple[LabelledNode, List[str]]]:
        resolved = [r for r in self.view.resolve(ids) if r.stored]
        chunks = self.view.chunk_nodes({r.id: r.passage_id for r in resolved if r.kind == CHUNK})
        entity_ids = [int(key_of(r.key)) for r in resolved if r.kind == ENTITY]
        entities = self.view.entity_nodes(entity_ids)
        sources = {k: row["sources"] for k, row in self.rows.side([r.key for r in resolved if r.kind == ENTITY]).items()}
        found, seen = [], set()
        for r in resolved:
            node = chunks.get(r.id) if r.kind == CHUNK else entities.get(int(key_of(r.key)))
            if node is not None and (r.kind, node.id) not in seen:
                seen.add((r.kind, node.id))
                found.append((node, sources.get(r.key, [])))
        return found

    def _by_properties(self, properties: Dict[str, Any]) -> List[LabelledNode]:
        rows = [r for r in self.rows.side_where(side_property_filter(ENTITY, properties))
                if matches(r["properties"], r["sources"], properties)]
        nodes: List[LabelledNode] = list(self.view.entity_nodes([int(key_of(r["id"])) for r in rows]).values())
        passages = [pid for k, v in properties.items() for pid in self.rows.passage_ids_where(k, v)]
        chunks = self.view.chunk_nodes(self.chunk_map(list(dict.fromkeys(passages))))
        return nodes + [c for c in chunks.values() if matches(c.properties, [], properties)]

    def chunk_map(self, passage_ids: Sequence[str]) -> Dict[str, str]:
        """{chunk id: passage id} of passages, each under the chunk id it is known by."""
        return {chunk: pid for pid, chunk in self.view.chunk_ids(passage_ids).items()}

    def llama_nodes(self, node_ids: Sequence[str]) -> List[Any]:
        """The ingested nodes of chunks, in the order of `node_ids` (ids that name no chunk are skipped)."""
        chunks = {r.id: r.passage_id for r in self.view.resolve(node_ids) if r.kind == CHUNK and r.stored}
        nodes = self.view.llama_nodes(chunks)
        return [nodes[i] for i in dict.fromkeys(node_ids) if i in nodes]

    # triplets -----------------------------------------------------------------------------------
    def get_triplets(
        self,
        entity_names: Optional[List[str]] = None,
        relation_names: Optional[List[str]] = None,
        properties: Optional[dict] = None,
        ids: Optional[List[str]] = None,
    ) -> List[PGTriplet]:
        """Triplets meeting every filter given: an end named in `entity_names` or `ids`, a label in
        `relation_names`, any of `properties` on the subject, the relation or the object. None without
        a filter, as `SimplePropertyGraphStore`."""
        if not (entity_names or relation_names or properties or ids):
            return []
        name_keys = {entity_key(n) for n in entity_names} if entity_names else None
        id_keys = {k for r in self.view.resolve(ids) for k in (r.key, side_id(NODE, r.id))} if ids else None
        if name_keys or id_keys:
            edges = self.view.touching(sorted((name_keys or set()) | (id_keys or set())))
        elif relation_names:
            edges = self.view.named(relation_names)
        else:
            edges = self.edges_with(properties or {})
        edges = _unique(edges)
        for keys in (name_keys, id_keys):
            if keys is not None:
                edges = [e for e in edges if set(e.ends) & keys]
        if relation_names:
            labels = {normalize_name(r) for r in relation_names}
            edges = [e for e in edges if normalize_name(e.label) in labels]
        triplets = self.view.triplets(edges)
        if properties:
            triplets = [t for t, e in zip(triplets, edges) if _triplet_matches(t, e, properties)]
        return triplets

    def edges_with(self, properties: Dict[str, Any]) -> List[Edge]:
        """Edges whose relation or an end has one of the properties."""
        rows = self.rows.side_where(side_property_filter(RELATION, properties))
        stated = [int(key_of(r["id"])) for r in rows if r["stated"]]
        edges = self.view.decorated(self.rows.relations(stated)) if stated else []
        edges += [Edge.of_side(r) for r in rows if not r["stated"]]
        entities = [r["id"] for r in self.rows.side_where(side_property_filter(ENTITY, properties))]
        return edges + (self.view.touching(entities) if entities else [])

    def rel_map(
        self, graph_nodes: Sequence[LabelledNode], depth: int = 2, limit: int = 30, ignore_rels: Optional[List[str]] = None
    ) -> List[PGTriplet]:
        """The triplets within `depth` hops of the nodes, nearest first (the relations of the first node
        before those of the next at each hop), at most `limit`, never through a relation labelled in
        `ignore_rels`."""
        ignored = {normalize_name(r) for r in ignore_rels or []}
        frontier = list(dict.fromkeys(
            chunk_key(n.id) if isinstance(n, ChunkNode) else entity_key(n.id) for n in graph_nodes
        ))
        visited, found, seen = set(frontier), [], set()
        for _ in range(max(0, depth)):
            if not frontier or len(found) >= limit:
                break
            order = {k: i for i, k in enumerate(frontier)}
            edges = [e for e in _unique(self.view.touching(frontier))
                     if e.sid not in seen and normalize_name(e.label) not in ignored]
            edges.sort(key=lambda e: min(order.get(k, len(order)) for k in e.ends))
            seen.update(e.sid for e in edges)
            found += edges
            frontier = list(dict.fromkeys(k for e in edges for k in e.ends if k not in visited))
            visited.update(frontier)
        return self.view.triplets(found[:limit])

    # vectors ------------------------------------------------------------------------------------
    def vector_query(self, query: VectorStoreQuery) -> Tuple[List[LabelledNode], List[float]]:
        """The entities nearest to the query embedding (the embedding of their names, by the store's
        embed model: the entities collection's and the standalone collection's), best first, with their
        cosines."""
        vector = query.query_embedding
        if vector is None:
            raise ValueError("vector_query needs query.query_embedding (embed the query with the store's embed model).")
        if len(vector) != self.rows.dim:
            raise GraphStoreError(
                f"The query embedding has {len(vector)} values; the store holds {self.rows.dim}-dimensional vectors. "
                "Embed queries with the store's embed model (PropertyGraphIndex(embed_model=...) must be the one "
                "the store was opened with)."
            )
        if query.filters is not None or query.node_ids or query.doc_ids:
            raise NotImplementedError(
                "MilvusPropertyGraphStore.vector_query takes no filters, node_ids or doc_ids; filter the "
                "returned nodes by their properties instead (get(properties=...))."
            )
        top_k = max(1, query.similarity_top_k)
        scores: Dict[int, float] = {}
        for hit in self.rows.store.search.entities([vector], top_k)[0]:
            scores[int(hit.id)] = max(scores.get(int(hit.id), -2.0), float(hit.score))
        for eid, score in self.rows.search_standalone(vector, top_k):
            scores[eid] = max(scores.get(eid, -2.0), score)
        best = sorted(scores.items(), key=lambda kv: -kv[1])[:top_k]
        nodes = self.view.entity_nodes([e for e, _ in best])
        kept = [(nodes[e], s) for e, s in best if e in nodes]
        return [n for n, _ in kept], [s for _, s in kept]

    def schema(self) -> Dict[str, Any]:
        """The labels in use: of entities (and "text_chunk"), and of relations."""
        side = self.rows.side_labels()
        return {
            "entity_labels": sorted({"entity", *(r["label"] for r in side if r["kind"] == ENTITY and r["label"])}),
            "chunk_label": "text_chunk",
            "relation_labels": sorted({*self.rows.predicates(), *(r["label"] for r in side if r["kind"] == RELATION)}),
        }


def _unique(edges: Sequence[Edge]) -> List[Edge]:
    found: Dict[str, Edge] = {}
    for edge in edges:
        found.setdefault(edge.sid, edge)
    return list(found.values())


def _triplet_matches(triplet: PGTriplet, edge: Edge, properties: Dict[str, Any]) -> bool:
    subject, relation, object_ = triplet
    own = {k: v for k, v in subject.properties.items() if k != TRIPLET_SOURCE_KEY}
    return (matches(own, [], properties) or matches(edge.properties, edge.sources, properties)
            or matches(object_.properties, [], properties))
