"""`PassageVectorStore`: the passages collection as a standard LlamaIndex `MilvusVectorStore`."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, List, Optional, Tuple

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.vector_stores.milvus import MilvusVectorStore

from llama_index_graphrag_milvus.milvus.filters import id_filter


class PassageVectorStore(MilvusVectorStore):
    """The passages collection as a standard `MilvusVectorStore` (`store.vector_store`), for plain vector
    RAG and for `IngestionPipeline(vector_store=...)`: its writes and deletes go through the graph store,
    so deleting a document also removes the relations and entities only it supported and the adjacency
    follows. Queries are MilvusVectorStore's own, except that `doc_ids` and `node_ids` filters are
    escaped here (upstream pastes them into the expression as they are)."""

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

    def _prepare_before_search(self, query: VectorStoreQuery, **kwargs: Any) -> Tuple[str, List[str]]:
        escaped = []
        if query.doc_ids:
            escaped.append(id_filter(query.doc_ids, self.doc_id_field))
        if query.node_ids:
            escaped.append(id_filter(query.node_ids))
        if escaped:
            query = copy.copy(query)
            query.doc_ids, query.node_ids = None, None
        expression, output_fields = super()._prepare_before_search(query, **kwargs)
        return " and ".join([e for e in [expression, *escaped] if e]), output_fields
