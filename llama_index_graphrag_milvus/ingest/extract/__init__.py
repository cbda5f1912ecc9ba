"""Where a passage's triplets come from: its metadata or a KG extractor (`given`), co-occurring names in
raw text with no LLM at all (`cooccurrence`, the default), or an LLM, when asked for (`llm`)."""

from llama_index_graphrag_milvus.ingest.extract.cooccurrence import CooccurrenceExtractor
from llama_index_graphrag_milvus.ingest.extract.given import (
    TRIPLETS_KEY,
    ExcludeTriplets,
    as_metadata,
    exclude_from_content,
    given_triplets,
)
from llama_index_graphrag_milvus.ingest.extract.llm import LLMTripletExtractor, parse_extraction

__all__ = [
    "TRIPLETS_KEY",
    "CooccurrenceExtractor",
    "ExcludeTriplets",
    "LLMTripletExtractor",
    "as_metadata",
    "exclude_from_content",
    "given_triplets",
    "parse_extraction",
]
