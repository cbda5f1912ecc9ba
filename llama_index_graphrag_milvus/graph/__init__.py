"""The adjacency in memory, with no Milvus in sight: the immutable sparse `Graph` and the pure functions
that walk and score it (`sparse`), the mutable cache that maps Milvus ids to positions and builds
snapshots (`cache`), and its id registry (`ids`).

May import: numpy, scipy; nothing else of the package.
"""

from llama_index_graphrag_milvus.graph.sparse import Graph

__all__ = ["Graph"]
