"""Triplets an LLM extracts from a passage, with the transform's extraction prompt."""

from __future__ import annotations

import logging
from typing import List

from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_graphrag_milvus.llm.parsing import parse_json_object
from llama_index_graphrag_milvus.schema import Triplet, parse_triplets

logger = logging.getLogger(__name__)


def parse_extraction(answer: str, max_triplets: int) -> List[Triplet]:
    """Triplets from an extraction answer `{"triplets": [[s, p, o], ...]}`. Raises `ValueError`."""
    value = parse_json_object(answer).get("triplets")
    if not isinstance(value, list):
        raise ValueError(f'expected {{"triplets": [...]}}, got {answer!r:.200}')
    triplets, _ = parse_triplets(value)
    return triplets[:max_triplets]


async def aextract_triplets(
    llm: LLM, prompt: PromptTemplate, node: BaseNode, max_triplets: int, raise_on_error: bool = False
) -> List[Triplet]:
    """Triplets an LLM extracts from a passage. A failed call or a malformed answer is logged and gives
    no triplets, unless `raise_on_error`."""
    text = node.get_content(metadata_mode=MetadataMode.LLM)
    try:
        answer = await llm.apredict(prompt, text=text, max_triplets=max_triplets)
        return parse_extraction(answer, max_triplets)
    except Exception as exc:
        if raise_on_error:
            raise
        logger.warning("Node %s: triplet extraction failed, no triplets kept: %s", node.node_id, exc)
        return []
