"""LlamaIndex's property graph on our collections: `MilvusPropertyGraphStore` (a `PropertyGraphStore`
for `PropertyGraphIndex`), `GraphRAGSubRetriever` (our retrieval as a PGI sub-retriever), the mapping of
PGI's objects to our rows (`view`), the reads and writes, and every direct row access (`rows`: the side
collections `{prefix}_properties` and `{prefix}_standalone`, and reads of the graph store's rows).

May import: `errors`, `schema`, `milvus` (filters, collection constants), `store`, `retriever`.
"""

from llama_index_graphrag_milvus.property_graph.retriever import GraphRAGSubRetriever
from llama_index_graphrag_milvus.property_graph.store import MilvusPropertyGraphStore

__all__ = ["GraphRAGSubRetriever", "MilvusPropertyGraphStore"]
