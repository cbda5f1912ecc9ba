"""Multi-hop Graph RAG for LlamaIndex on Milvus alone: no graph database."""

from llama_index_graphrag_milvus.explain import Explanation
from llama_index_graphrag_milvus.extract import CooccurrenceExtractor
from llama_index_graphrag_milvus.graph import Graph
from llama_index_graphrag_milvus.index import GraphRAGIndex
from llama_index_graphrag_milvus.retriever import GraphRAGRetriever, Retrieval
from llama_index_graphrag_milvus.schema import ScoredRelation, Triplet
from llama_index_graphrag_milvus.store import GraphStoreError, MilvusGraphStore
from llama_index_graphrag_milvus.transform import GraphRAGTransform

__all__ = [
    "CooccurrenceExtractor",
    "Explanation",
    "Graph",
    "GraphRAGIndex",
    "GraphRAGRetriever",
    "GraphRAGTransform",
    "GraphStoreError",
    "MilvusGraphStore",
    "Retrieval",
    "ScoredRelation",
    "Triplet",
]
