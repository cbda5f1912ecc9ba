"""What one retrieval did, for people: the `Explanation` text (`explanation`), what its picture shows
(`drawn`) and the picture itself (`drawing`, the `viz` extra).

May import: `schema`, `milvus.filters`; it reads a store it is given.
"""

from llama_index_graphrag_milvus.explain.drawn import CANDIDATE, CHOSEN, MAX_DRAWN_RELATIONS, SEED, VIA, Drawn, drawn, drawn_relations
from llama_index_graphrag_milvus.explain.explanation import Explanation

__all__ = ["CANDIDATE", "CHOSEN", "MAX_DRAWN_RELATIONS", "SEED", "VIA", "Drawn", "Explanation", "drawn", "drawn_relations"]
