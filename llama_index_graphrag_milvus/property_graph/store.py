"""MilvusPropertyGraphStore: LlamaIndex's `PropertyGraphStore` on the collections of a `MilvusGraphStore`."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.graph_stores.types import LabelledNode, PropertyGraphStore, Relation
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from llama_index_graphrag_milvus.property_graph.deletes import Deleter
from llama_index_graphrag_milvus.property_graph.reads import Reader
from llama_index_graphrag_milvus.property_graph.rows import Rows
from llama_index_graphrag_milvus.property_graph.view import PGTriplet
from llama_index_graphrag_milvus.property_graph.writes import Writer
from llama_index_graphrag_milvus.store import DEFAULT_URI, MilvusGraphStore


class MilvusPropertyGraphStore(PropertyGraphStore):
    """A property graph store for `PropertyGraphIndex` on Milvus alone, on the very rows of a
    `MilvusGraphStore`: what PGI writes, `GraphRAGRetriever` reads, and the other way round.

    A chunk is a passage row, an entity an entity row, and a relation whose source chunk
    (`triplet_source_id`) is stored a relation row stated by that chunk's passage; all are written
    through the graph store, so ids, embeddings (of entity names, of "subject predicate object", of
    passages) and deletes are the graph store's. Labels, properties, PGI's chunk ids, entities that no
    stored relation names, and relations with no source chunk or with a chunk as an end are kept in a
    side collection, `{prefix}_properties` (and the name embeddings of those entities in
    `{prefix}_standalone`), that writes and deletes keep consistent.

    `vector_query` searches the entities by the embedding of their name (the store's embed model, which
    must be PGI's `embed_model` too); the embeddings PGI computes for `EntityNode`s (of `str(node)`, with
    its properties) are not stored. There is no query language: `structured_query` raises.

    Args:
        uri: As `MilvusGraphStore`: a Milvus Lite path by default, or a server's URI.
        token: As `MilvusGraphStore`: a server's token.
        embed_model: As `MilvusGraphStore`; PGI's `embed_model` must be the same.
        collection_prefix: The collections are `{prefix}_entities`, `{prefix}_relations`,
            `{prefix}_passages`, `{prefix}_properties` and `{prefix}_standalone`.
        graph_store: An open `MilvusGraphStore` to sit on instead (the arguments above are then unused,
            and `close()` leaves it open).
        overwrite: Drop the collections first.
        **store_kwargs: Passed to `MilvusGraphStore` (e.g. `dim`, `adjacency`, `synonym_threshold`).
    """

    supports_structured_queries: bool = False
    supports_vector_queries: bool = True

    def __init__(
        self,
        uri: str = DEFAULT_URI,
        token: str = "",
        embed_model: Optional[BaseEmbedding] = None,
        collection_prefix: str = "graphrag",
        *,
        graph_store: Optional[MilvusGraphStore] = None,
        overwrite: bool = False,
        **store_kwargs: Any,
    ) -> None:
        self._owns_store = graph_store is None
        if graph_store is None:
            graph_store = MilvusGraphStore(uri, token, embed_model, collection_prefix, overwrite=overwrite, **store_kwargs)
        self.graph_store = graph_store
        try:
            self._rows = Rows(graph_store, overwrite=overwrite)
        except BaseException:
            if self._owns_store:
                graph_store.close()
            raise
        self._reader = Reader(self._rows)
        self._writer = Writer(self._rows, self._reader)
        self._deleter = Deleter(self._writer)
        self._write_lock = threading.Lock()  # a write is several steps: one at a time

    @property
    def client(self) -> Any:
        """The `MilvusClient`."""
        return self.graph_store.client

    @property
    def properties_collection(self) -> str:
        """The side collection: labels, properties, chunk ids, standalone entities and side relations."""
        return self._rows.name

    # reads ----------------------------------------------------------------------------------------
    def get(self, properties: Optional[dict] = None, ids: Optional[List[str]] = None) -> List[LabelledNode]:
        """Entity and chunk nodes by id, by properties (any holds), or both; all nodes with neither."""
        self._rows.sealed()
        return self._reader.get(properties, ids)

    def get_llama_nodes(self, node_ids: List[str]) -> List[BaseNode]:
        """The ingested nodes of chunks, as they were written."""
        self._rows.sealed()
        return self._reader.llama_nodes(node_ids)

    def get_triplets(
        self,
        entity_names: Optional[List[str]] = None,
        relation_names: Optional[List[str]] = None,
        properties: Optional[dict] = None,
        ids: Optional[List[str]] = None,
    ) -> List[PGTriplet]:
        """Triplets meeting every filter given (none without a filter)."""
        self._rows.sealed()
        return self._reader.get_triplets(entity_names, relation_names, properties, ids)

    def get_rel_map(
        self, graph_nodes: List[LabelledNode], depth: int = 2, limit: int = 30, ignore_rels: Optional[List[str]] = None
    ) -> List[PGTriplet]:
        """The triplets within `depth` hops of the nodes, nearest first, at most `limit`."""
        self._rows.sealed()
        return self._reader.rel_map(graph_nodes, depth, limit, ignore_rels)

    def vector_query(self, query: VectorStoreQuery, **kwargs: Any) -> Tuple[List[LabelledNode], List[float]]:
        """The entities nearest to `query.query_embedding`, with their cosines."""
        self._rows.sealed()
        return self._reader.vector_query(query)

    def structured_query(self, query: str, param_map: Optional[Dict[str, Any]] = None) -> Any:
        raise NotImplementedError(
            "MilvusPropertyGraphStore has no query language (no Cypher): use get_triplets, get_rel_map or "
            "vector_query, PGI's VectorContextRetriever or LLMSynonymRetriever, or GraphRAGSubRetriever "
            "(TextToCypherRetriever and CypherTemplateRetriever need a graph database)."
        )

    def get_schema(self, refresh: bool = False) -> Dict[str, Any]:
        """The entity and relation labels in use."""
        self._rows.sealed()
        return self._reader.schema()

    # writes ---------------------------------------------------------------------------------------
    def upsert_llama_nodes(self, llama_nodes: List[BaseNode]) -> None:
        """Store LlamaIndex nodes as passages (chunks), as `GraphRAGTransform` stores them."""
        with self._write_lock:
            self._writer.upsert_llama_nodes(llama_nodes)

    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        """Store chunk and entity nodes."""
        with self._write_lock:
            self._writer.upsert_nodes(nodes)

    def upsert_relations(self, relations: List[Relation]) -> None:
        """Store relations (after their nodes)."""
        with self._write_lock:
            self._writer.upsert_relations(relations)

    def delete(
        self,
        entity_names: Optional[List[str]] = None,
        relation_names: Optional[List[str]] = None,
        properties: Optional[dict] = None,
        ids: Optional[List[str]] = None,
    ) -> None:
        """Delete matching chunks, entities and relations, leaving no orphan."""
        with self._write_lock:
            self._deleter.delete(entity_names, relation_names, properties, ids)

    def clear(self) -> None:
        """Delete every chunk, entity and relation of this store (the collections stay)."""
        with self._write_lock:
            self.graph_store.clear()
            self._rows.clear()

    # async: the same work, off the event loop ----------------------------------------------------
    async def aget(self, properties: Optional[dict] = None, ids: Optional[List[str]] = None) -> List[LabelledNode]:
        return await asyncio.to_thread(self.get, properties, ids)

    async def aget_llama_nodes(self, node_ids: List[str]) -> List[BaseNode]:
        return await asyncio.to_thread(self.get_llama_nodes, node_ids)

    async def aget_triplets(self, entity_names=None, relation_names=None, properties=None, ids=None) -> List[PGTriplet]:
        return await asyncio.to_thread(self.get_triplets, entity_names, relation_names, properties, ids)

    async def aget_rel_map(self, graph_nodes, depth=2, limit=30, ignore_rels=None) -> List[PGTriplet]:
        return await asyncio.to_thread(self.get_rel_map, graph_nodes, depth, limit, ignore_rels)

    async def avector_query(self, query: VectorStoreQuery, **kwargs: Any) -> Tuple[List[LabelledNode], List[float]]:
        return await asyncio.to_thread(self.vector_query, query)

    async def astructured_query(self, query: str, param_map: Optional[Dict[str, Any]] = None) -> Any:
        return self.structured_query(query, param_map)

    async def aupsert_nodes(self, nodes: List[LabelledNode]) -> None:
        await asyncio.to_thread(self.upsert_nodes, nodes)

    async def aupsert_relations(self, relations: List[Relation]) -> None:
        await asyncio.to_thread(self.upsert_relations, relations)

    async def adelete(self, entity_names=None, relation_names=None, properties=None, ids=None) -> None:
        await asyncio.to_thread(self.delete, entity_names, relation_names, properties, ids)

    # closing --------------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the database (when this store opened it), so that another process can open it."""
        if self._owns_store:
            self.graph_store.close()

    def __enter__(self) -> "MilvusPropertyGraphStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MilvusPropertyGraphStore(uri={self.graph_store.uri!r}, collection_prefix={self.graph_store.collection_prefix!r})"
