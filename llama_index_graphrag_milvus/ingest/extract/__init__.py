"""Where a passage's triplets come from: its metadata or a KG extractor (`given`), an LLM (`llm`), or
co-occurring names in raw text with no LLM at all (`cooccurrence`)."""

from llama_index_graphrag_milvus.ingest.extract.cooccurrence import CooccurrenceExtractor
from llama_index_graphrag_milvus.ingest.extract.given import (
    TRIPLETS_KEY,
    ExcludeTriplets,
    as_metadata,
    exclude_from_content,
    given_triplets,
)
from llama_index_graphrag_milvus.ingest.extract.llm import aextract_triplets, parse_extraction

__all__ = [
    "TRIPLETS_KEY",
    "CooccurrenceExtractor",
    "ExcludeTriplets",
    "aextract_triplets",
    "as_metadata",
    "exclude_from_content",
    "given_triplets",
    "parse_extraction",
]
