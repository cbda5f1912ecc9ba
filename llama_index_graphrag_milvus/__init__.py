"""Multi-hop Graph RAG for LlamaIndex on Milvus alone: no graph database."""

import os as _os

# gRPC's C core reads its log level once, when grpc is first imported (by pymilvus, just below). Its
# lines against Milvus Lite ("Received a GOAWAY ... too_many_pings" when a keepalive ping comes early)
# are harmless and look like failures; real failures reach the client as exceptions. Set
# GRPC_VERBOSITY yourself (ERROR, INFO, DEBUG) before importing this package to see them.
_os.environ.setdefault("GRPC_VERBOSITY", "NONE")

from llama_index_graphrag_milvus.explain import Explanation
from llama_index_graphrag_milvus.ingest.extract import CooccurrenceExtractor, LLMTripletExtractor
from llama_index_graphrag_milvus.index import GraphRAGIndex
from llama_index_graphrag_milvus.property_graph import GraphRAGSubRetriever, MilvusPropertyGraphStore
from llama_index_graphrag_milvus.retriever import GraphRAGRetriever, Retrieval
from llama_index_graphrag_milvus.schema import ScoredRelation, Triplet
from llama_index_graphrag_milvus.store import GraphStoreError, MilvusGraphStore
from llama_index_graphrag_milvus.transform import GraphRAGTransform

__all__ = [
    "CooccurrenceExtractor",
    "Explanation",
    "GraphRAGIndex",
    "GraphRAGRetriever",
    "GraphRAGSubRetriever",
    "GraphRAGTransform",
    "GraphStoreError",
    "LLMTripletExtractor",
    "MilvusGraphStore",
    "MilvusPropertyGraphStore",
    "Retrieval",
    "ScoredRelation",
    "Triplet",
]
