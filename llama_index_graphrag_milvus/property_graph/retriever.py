"""GraphRAGSubRetriever: our `GraphRAGRetriever` as a PGI sub-retriever, to fuse with PGI's own in a
`PGRetriever` (or `PropertyGraphIndex.as_retriever(sub_retrievers=[...])`)."""

from __future__ import annotations

from typing import Any, List, Optional

from llama_index.core.indices.property_graph.sub_retrievers.base import BasePGRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_graphrag_milvus.property_graph.store import MilvusPropertyGraphStore
from llama_index_graphrag_milvus.retriever import GraphRAGRetriever


class GraphRAGSubRetriever(BasePGRetriever):
    """Multi-hop Graph RAG (`GraphRAGRetriever`) over a `MilvusPropertyGraphStore`, as a sub-retriever.

    It returns passages (the chunks as they were ingested, each with the relations that selected it in
    `metadata["graphrag_relations"]`), not triplets, so no source text is looked up for them.

    Args:
        graph_store: The property graph store.
        retriever: A `GraphRAGRetriever` to use; by default one is made on the store's graph store with
            `**retriever_kwargs` (e.g. `similarity_top_k=5, llm=None`).
    """

    def __init__(
        self,
        graph_store: MilvusPropertyGraphStore,
        retriever: Optional[GraphRAGRetriever] = None,
        **retriever_kwargs: Any,
    ) -> None:
        if not isinstance(graph_store, MilvusPropertyGraphStore):
            raise TypeError(
                f"GraphRAGSubRetriever needs a MilvusPropertyGraphStore, got {type(graph_store).__name__}: "
                "build the PropertyGraphIndex with property_graph_store=MilvusPropertyGraphStore(...)."
            )
        callback_manager = retriever_kwargs.get("callback_manager")
        self.retriever = retriever or GraphRAGRetriever(store=graph_store.graph_store, **retriever_kwargs)
        super().__init__(graph_store=graph_store, include_text=False, callback_manager=callback_manager)

    def retrieve_from_graph(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return self.retriever.retrieve(query_bundle)

    async def aretrieve_from_graph(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return await self.retriever.aretrieve(query_bundle)
