"""Where the adjacency lives: one protocol (`base`), two backends, picked once when a store opens
(`choice`).

- `memory.MemoryGraph` (`adjacency="memory"`, the default): the sparse adjacency is a cache in this
  process, built when first used (from a snapshot file when it is current, else from Milvus' rows)
  and kept current on this store's writes.
- `milvus.MilvusGraph` (`adjacency="milvus"`): no adjacency in memory; writes, deletes and retrieval
  load the neighbourhood they touch from Milvus.

May import: `graph` (the pure adjacency), `milvus` (the collections, vector search, snapshot), `schema`.
"""

from llama_index_graphrag_milvus.backends.base import Expansion, GraphBackend, Neighbourhood, Written, hub_limit

__all__ = ["Expansion", "GraphBackend", "Neighbourhood", "Written", "hub_limit"]
