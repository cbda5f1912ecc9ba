"""Everything that talks to Milvus: the three collections (`collections`), escaped filters (`filters`),
Milvus Lite's specifics (`lite`), the passages as a `MilvusVectorStore` (`vector_store`), vector search in
this process or by Milvus (`search`, over the numpy/faiss index of `vectors`), and the snapshot file of
the in-memory caches (`snapshot`).

May import: `errors`, `schema`, `graph` (the positions the in-process search is aligned with).
"""
