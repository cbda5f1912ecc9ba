"""Triplets a passage already carries: its metadata, or the output of a LlamaIndex KG extractor.

Triplets in metadata are data, not text: `ExcludeTriplets` (or `GraphRAGIndex`, which does it for
you) keeps them out of what a splitter measures, what is embedded and what an LLM reads. A splitter
copies a document's metadata to each of its chunks; a chunk then keeps only the document's triplets
that it names (see `given_triplets`). When the text's links join them (`text_links`, the transform's
default), `title_links` ties each name they state to the passage's title, which it stays about.
"""

from __future__ import annotations

import logging
import re
from typing import Any, List, Optional, Sequence

from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, TransformComponent

from llama_index_graphrag_milvus.schema import Triplet, normalize_name, parse_triplets

logger = logging.getLogger(__name__)

#: The node metadata key holding `[[subject, predicate, object], ...]`.
TRIPLETS_KEY = "triplets"
#: The node metadata key (True) of a passage whose LLM extraction failed: it holds the no-LLM
#: extractor's triplets until the next ingest of it or `refresh_ref_docs` extracts it with the LLM. Kept
#: in the passage's row in Milvus, out of its embedded text and LLM context.
PENDING_KEY = "graphrag_pending_extraction"
#: The Milvus filter of the pending passages (their rows keep the node's metadata as dynamic fields).
PENDING_FILTER = f"{PENDING_KEY} == true"
#: The node metadata key of a passage whose triplets the LLM gave: a digest of that call's input
#: (`extract.llm.extraction_digest`). Such triplets are the chunk's own, never narrowed as inherited ones.
EXTRACTION_KEY = "graphrag_llm_extraction"


class ExcludeTriplets(TransformComponent):
    """Keep the triplets key out of each node's embedded text and LLM context; nodes pass unchanged
    otherwise. Put it first in a hand-built pipeline, before the splitter, so that the splitter does
    not count the triplets as metadata text (`Metadata length (...) is longer than chunk size`):

        IngestionPipeline(transformations=[ExcludeTriplets(), SentenceSplitter(), GraphRAGTransform(store=store)])

    The same as `Document(..., excluded_embed_metadata_keys=["triplets"],
    excluded_llm_metadata_keys=["triplets"])`. `GraphRAGIndex` and the package's loaders do it already.
    """

    key: str = TRIPLETS_KEY

    @classmethod
    def class_name(cls) -> str:
        return "ExcludeTriplets"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in nodes:
            exclude_from_content(node, self.key)
        return nodes


def given_triplets(node: BaseNode, key: str = TRIPLETS_KEY) -> Optional[List[Triplet]]:
    """The triplets a node carries, or None if it carries none.

    They come from `metadata[key]` and from the output of a LlamaIndex KG extractor placed before
    (`KG_NODES_KEY` / `KG_RELATIONS_KEY`; popped, as `PropertyGraphIndex` does, and kept in
    `metadata[key]` instead).

    A chunk of a larger document (a node with a PREVIOUS or NEXT relationship, as a splitter leaves
    them) inherits all of its document's triplets in `metadata[key]`; it keeps those whose subject or
    object it names (case-insensitive, whole words), and `metadata[key]` is narrowed to them. A chunk
    that names none of them keeps them all, as before: nothing shows which part of the document
    states them (the triplets may use other names than the text), and dropping them could leave the
    document out of the graph. A node that is a whole document is left as it is.
    """
    metadata = node.metadata
    raw = metadata.get(key)
    if KG_RELATIONS_KEY in metadata or KG_NODES_KEY in metadata:
        kg_nodes = metadata.pop(KG_NODES_KEY, None) or []
        kg_relations = metadata.pop(KG_RELATIONS_KEY, None) or []
        names = {getattr(n, "id", None): getattr(n, "name", None) for n in kg_nodes}
        given, skipped = parse_triplets(raw) if isinstance(raw, (list, tuple)) else ([], 0)
        extracted, also_skipped = parse_triplets(
            [
                [names.get(r.source_id) or r.source_id, r.label, names.get(r.target_id) or r.target_id]
                for r in kg_relations
            ]
        )
        # the extractor read this node's own text: only the triplets it inherited are narrowed
        triplets, _ = parse_triplets(as_metadata(_of_chunk(node, given) + extracted))
        skipped += also_skipped
        metadata[key] = as_metadata(triplets)
    elif key in metadata:
        triplets, skipped = parse_triplets(raw)
        kept = _of_chunk(node, triplets)
        if len(kept) < len(triplets):
            triplets = kept
            metadata[key] = as_metadata(triplets)
    else:
        return None
    _log_skipped(node, skipped)
    return triplets


def title_links(topic: str, triplets: Sequence[Triplet], linked: Sequence[Triplet] = ()) -> List[Triplet]:
    """`[topic, "mentions", name]` for each name `triplets` state (subjects and objects, in order) that no
    triplet of them or of `linked` links to `topic` yet: a passage's triplets tied to what it is about, as
    its title links tie the names of its text."""
    key = normalize_name(topic)
    tied = {key}
    for t in (*triplets, *linked):
        ends = (normalize_name(t.subject), normalize_name(t.object))
        if key in ends:
            tied.update(ends)
    links = []
    for name in (name for t in triplets for name in (t.subject, t.object)):
        if normalize_name(name) not in tied:
            tied.add(normalize_name(name))
            links.append([topic, "mentions", name])
    return parse_triplets(links)[0]


def is_chunk(node: BaseNode) -> bool:
    """Whether the node is one of several chunks of a document (a splitter links them PREVIOUS/NEXT)."""
    relationships = node.relationships
    return NodeRelationship.PREVIOUS in relationships or NodeRelationship.NEXT in relationships


def _of_chunk(node: BaseNode, triplets: List[Triplet]) -> List[Triplet]:
    """The triplets a chunk names, or all of them if it names none (or is not a chunk, or they are the
    LLM's extraction of this very chunk)."""
    if not triplets or not is_chunk(node) or node.metadata.get(EXTRACTION_KEY):
        return triplets
    text = normalize_name(node.get_content(MetadataMode.NONE))
    named = {}
    for name in {normalize_name(x) for t in triplets for x in (t.subject, t.object)}:
        named[name] = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None
    kept = [t for t in triplets if named[normalize_name(t.subject)] or named[normalize_name(t.object)]]
    return kept or triplets


def _log_skipped(node: BaseNode, skipped: int) -> None:
    if skipped:
        logger.warning(
            "Node %s: skipped %d malformed triplet(s); each must be [subject, predicate, object], three "
            "non-empty strings of at most 512 characters.",
            node.node_id,
            skipped,
        )


def exclude_from_content(node: BaseNode, key: str = TRIPLETS_KEY) -> None:
    """Keep metadata `key` out of the node's embedded text and its LLM context."""
    for excluded in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
        if key not in excluded:
            excluded.append(key)


def is_pending(node: BaseNode) -> bool:
    """Whether the node's LLM extraction failed and awaits another try (`PENDING_KEY`)."""
    return node.metadata.get(PENDING_KEY) is True


def mark_pending(node: BaseNode, pending: bool = True) -> BaseNode:
    """Mark the node as awaiting LLM extraction (`PENDING_KEY` True, kept out of its content), or as
    extracted (False). Written either way: Milvus keeps a dynamic field that a row rewritten without it
    held before, so a pending row is only cleared by writing False."""
    node.metadata[PENDING_KEY] = pending
    exclude_from_content(node, PENDING_KEY)
    return node


def as_metadata(triplets: List[Triplet]) -> List[List[str]]:
    return [[t.subject, t.predicate, t.object] for t in triplets]
