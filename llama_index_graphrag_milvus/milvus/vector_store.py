"""`PassageVectorStore`: the passages collection as a standard LlamaIndex `MilvusVectorStore`."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, List, Optional, Tuple

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import MetadataFilters, VectorStoreQuery
from llama_index.core.vector_stores.utils import metadata_dict_to_node
from llama_index.vector_stores.milvus import MilvusVectorStore

from llama_index_graphrag_milvus.milvus.filters import PassageFilter, id_filter


class PassageVectorStore(MilvusVectorStore):
    """The passages collection as a standard `MilvusVectorStore` (`store.vector_store`), for plain vector
    RAG and for `IngestionPipeline(vector_store=...)`: its writes and deletes go through the graph store,
    so deleting a document also removes the relations and entities only it supported and the adjacency
    follows. Queries are MilvusVectorStore's own, except that their metadata `filters` (`PassageFilter`),
    `doc_ids` and `node_ids` are compiled here from escaped literals (upstream pastes keys, values and ids
    into the expression as they are), and `milvus_scalar_filters` are refused for the same reason."""

    _graph_store: Any = PrivateAttr(default=None)

    def add(self, nodes: List[BaseNode], **add_kwargs: Any) -> List[str]:
        self._graph_store.add(nodes)
        return [n.node_id for n in nodes]

    async def async_add(self, nodes: List[BaseNode], **add_kwargs: Any) -> List[str]:
        await asyncio.to_thread(self._graph_store.add, nodes)
        return [n.node_id for n in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        self._graph_store.delete(ref_doc_id)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self._graph_store.delete, ref_doc_id)

    def delete_nodes(self, node_ids: Optional[List[str]] = None, filters: Any = None, **kwargs: Any) -> None:
        raise NotImplementedError("Delete passages by document: MilvusGraphStore.delete(ref_doc_id).")

    async def adelete_nodes(self, node_ids: Optional[List[str]] = None, filters: Any = None, **kwargs: Any) -> None:
        self.delete_nodes(node_ids, filters)

    def clear(self) -> None:
        self._graph_store.clear()

    async def aclear(self) -> None:
        await asyncio.to_thread(self._graph_store.clear)

    def get_nodes(
        self, node_ids: Optional[List[str]] = None, filters: Optional[MetadataFilters] = None, **kwargs: Any
    ) -> List[BaseNode]:
        """Passages by id (the store's passage ids) and metadata filters, escaped."""
        if node_ids is None and filters is None:
            raise ValueError("Either node_ids or filters must be provided.")
        if node_ids is not None and not node_ids:
            return []
        rows = self.client.query(
            self.collection_name, filter=_expression(filters, node_ids), partition_names=kwargs.get("milvus_partition_names")
        )
        nodes = []
        for row in rows:
            node = metadata_dict_to_node(row, text=row.get(self.text_key))
            node.embedding = row.get(self.embedding_field)
            nodes.append(node)
        return nodes

    async def aget_nodes(
        self, node_ids: Optional[List[str]] = None, filters: Optional[MetadataFilters] = None, **kwargs: Any
    ) -> List[BaseNode]:
        return await asyncio.to_thread(self.get_nodes, node_ids, filters, **kwargs)

    def _prepare_before_search(self, query: VectorStoreQuery, **kwargs: Any) -> Tuple[str, List[str]]:
        if "milvus_scalar_filters" in kwargs:
            raise ValueError(
                "milvus_scalar_filters are not supported here (MilvusVectorStore pastes them into the filter "
                "unescaped): give filters=MetadataFilters(...) with CONTAINS, ANY or ALL instead"
            )
        expression = _expression(query.filters, query.node_ids)
        if query.doc_ids:
            expression = " and ".join(e for e in [expression, f"({id_filter(query.doc_ids, self.doc_id_field)})"] if e)
        query = copy.copy(query)
        query.filters, query.doc_ids, query.node_ids = None, None, None
        _, output_fields = super()._prepare_before_search(query, **kwargs)
        return expression, output_fields


def _expression(filters: Optional[MetadataFilters], ids: Optional[List[str]]) -> str:
    """The expression of the passages with these ids (if given) that pass the filters (if any), escaped."""
    parts = [id_filter(ids)] if ids else []
    compiled = PassageFilter.of(filters)
    if compiled is not None:
        parts.append(compiled.expr)
    return " and ".join(f"({p})" for p in parts)
