"""Triplets a passage already carries: its metadata, or the output of a LlamaIndex KG extractor."""

from __future__ import annotations

import logging
from typing import List, Optional

from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY
from llama_index.core.schema import BaseNode

from llama_index_graphrag_milvus.schema import Triplet, parse_triplets

logger = logging.getLogger(__name__)

#: The node metadata key holding `[[subject, predicate, object], ...]`.
TRIPLETS_KEY = "triplets"


def given_triplets(node: BaseNode, key: str = TRIPLETS_KEY) -> Optional[List[Triplet]]:
    """The triplets a node carries, or None if it carries none.

    They come from `metadata[key]` and from the output of a LlamaIndex KG extractor placed before
    (`KG_NODES_KEY` / `KG_RELATIONS_KEY`; popped, as `PropertyGraphIndex` does, and kept in
    `metadata[key]` instead).
    """
    metadata = node.metadata
    raw = metadata.get(key)
    if KG_RELATIONS_KEY in metadata or KG_NODES_KEY in metadata:
        kg_nodes = metadata.pop(KG_NODES_KEY, None) or []
        kg_relations = metadata.pop(KG_RELATIONS_KEY, None) or []
        names = {getattr(n, "id", None): getattr(n, "name", None) for n in kg_nodes}
        raw = list(raw) if isinstance(raw, (list, tuple)) else []
        raw += [
            [names.get(r.source_id) or r.source_id, r.label, names.get(r.target_id) or r.target_id]
            for r in kg_relations
        ]
        triplets, skipped = parse_triplets(raw)
        metadata[key] = as_metadata(triplets)
    elif key in metadata:
        triplets, skipped = parse_triplets(raw)
    else:
        return None
    _log_skipped(node, skipped)
    return triplets


def _log_skipped(node: BaseNode, skipped: int) -> None:
    if skipped:
        logger.warning(
            "Node %s: skipped %d malformed triplet(s); each must be [subject, predicate, object], three "
            "non-empty strings of at most 512 characters.",
            node.node_id,
            skipped,
        )


def exclude_from_content(node: BaseNode, key: str) -> None:
    """Keep metadata `key` out of the node's embedded text and its LLM context."""
    for excluded in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
        if key not in excluded:
            excluded.append(key)


def as_metadata(triplets: List[Triplet]) -> List[List[str]]:
    return [[t.subject, t.predicate, t.object] for t in triplets]

