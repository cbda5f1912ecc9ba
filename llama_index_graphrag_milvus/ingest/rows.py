"""The rows a write stores, built and checked before anything is written.

A write is checked whole first: passage text and document ids that fit their fields, metadata that is
JSON Milvus accepts, and embeddings of the declared dimension with finite values. Anything else is
refused here with an error that names the node and the fix, and nothing is written.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from llama_index_graphrag_milvus.errors import GraphStoreError
from llama_index_graphrag_milvus.ingest.extract import given_triplets
from llama_index_graphrag_milvus.milvus.collections import CONSTANT
from llama_index_graphrag_milvus.schema import Triplet, chunked, slot, statement_id

logger = logging.getLogger(__name__)

#: The longest passage text a row holds (a Milvus VARCHAR).
MAX_PASSAGE_BYTES = 65_535
#: The longest document id (the `doc_id` VARCHAR), in UTF-8 bytes.
MAX_DOC_ID_BYTES = 65_535
#: The fields of a passage row that give back its node.
PASSAGE_FIELDS = ["id", "text", "_node_content", "_node_type"]
#: What a stored node holds that is not compared (relationships: only the source one is, in `_content`).
_NOT_CONTENT = ("id_", "embedding", "relationships")
_SOURCE = NodeRelationship.SOURCE.value  # the one relationship compared (it records the document's hash)


def checked(
    nodes: Sequence[BaseNode], triplets: Optional[Sequence[Sequence[Triplet]]]
) -> Tuple[List[BaseNode], List[Sequence[Triplet]]]:
    """The nodes to write and their triplets (by default those in their metadata): a passage too long
    for a row is refused with an error naming the fix; empty nodes are skipped with a warning."""
    if triplets is None:
        triplets = [given_triplets(node) or [] for node in nodes]
    if len(nodes) != len(triplets):
        raise ValueError(f"got {len(nodes)} nodes but {len(triplets)} triplet lists")
    for node in nodes:
        size = len(node.get_content(MetadataMode.NONE).encode("utf-8", "surrogatepass"))
        if size > MAX_PASSAGE_BYTES:
            raise GraphStoreError(
                f"Node {node.node_id} holds {size:,} bytes of text; a passage holds at most "
                f"{MAX_PASSAGE_BYTES:,}. Split it first, e.g. with SentenceSplitter(chunk_size=1024) "
                "before GraphRAGTransform. Nothing was written."
            )
    kept = [(n, t) for n, t in zip(nodes, triplets) if n.get_content(MetadataMode.NONE).strip()]
    if len(kept) < len(nodes):
        empty = [n.node_id for n in nodes if not n.get_content(MetadataMode.NONE).strip()]
        logger.warning("Skipped %d node(s) with no text: %s", len(empty), ", ".join(empty[:10]))
    return [n for n, _ in kept], [t for _, t in kept]


def passage_row(pid: str, node: BaseNode, triplets: Sequence[Triplet]) -> Dict[str, Any]:
    """The row of a passage (without its embedding), refused with an error naming the fix if Milvus
    would refuse it."""
    document = node.ref_doc_id or node.node_id  # a Document ingested as is is its own document
    _check_text(node, "document id", document)
    if len(document.encode("utf-8")) > MAX_DOC_ID_BYTES:
        raise _refused(node, f"its document id is {len(document.encode('utf-8')):,} bytes long (at most {MAX_DOC_ID_BYTES:,})",
                       "give the document a shorter id (Document(id_=...))")
    for key in node.metadata:
        if not isinstance(key, str) or key.startswith("$"):
            raise _refused(node, f"metadata key {key!r} is reserved by Milvus", "rename that metadata key")
    try:
        row = node_to_metadata_dict(node, remove_text=True, flat_metadata=False)
    except (TypeError, ValueError) as exc:
        raise _refused(node, f"its metadata is not JSON ({exc})", "keep metadata values to strings, numbers, lists and dicts") from None
    row.update(id=pid, doc_id=document, ref_doc_id=document, document_id=document,
               text=node.get_content(MetadataMode.NONE), relation_ids=[t.id for t in triplets])
    try:
        json.dumps(row, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        raise _refused(node, "its text or metadata holds a lone surrogate (not valid Unicode)",
                       "clean the text, e.g. text.encode('utf-8', 'replace').decode()") from None
    except ValueError as exc:
        raise _refused(node, f"its metadata is not JSON ({exc})", "replace NaN/Infinity values") from None
    return row


def statement_rows(pid: str, triplets: Sequence[Triplet]) -> List[Dict[str, Any]]:
    """The statement rows of a passage: one per relation it states, each with the relation's two
    entities, their slots, and for each (passage, entity) one row marked first (the relation of least id
    naming it), so that counting an entity's first rows counts its passages."""
    ordered = sorted({t.id: t for t in triplets}.values(), key=lambda t: t.id)
    first: Dict[int, int] = {}
    for t in ordered:
        first.setdefault(t.subject_id, t.id)
        first.setdefault(t.object_id, t.id)
    return [
        {"id": statement_id(pid, t.id), "passage_id": pid, "relation_id": t.id, "subject_id": t.subject_id,
         "object_id": t.object_id, "subject_slot": slot(pid, t.subject_id), "object_slot": slot(pid, t.object_id),
         "subject_first": first[t.subject_id] == t.id,
         "object_first": first[t.object_id] == t.id and t.object_id != t.subject_id,
         "relation_count": len(ordered), "embedding": CONSTANT}
        for t in ordered
    ]


def needs_rewrite(row: Dict[str, Any], stored: Optional[Dict[str, Any]], embedding: Optional[List[float]]) -> bool:
    """Whether a passage given again with the relations stored for it must be written again: its new row
    (`passage_row`) differs from the `stored` one (None: not stored) in metadata, in its source document
    (and that document's hash), or in anything else its node renders its text with (templates, excluded
    keys, node type); or its node carries an `embedding` other than the stored one. Node ids and the
    links to other chunks are not compared (a splitter draws new ones on every run)."""
    if stored is None:
        return True
    if embedding is not None:
        old, new = np.asarray(stored["embedding"], np.float32), np.asarray(embedding, np.float32)
        if old.shape != new.shape or not np.allclose(old, new, rtol=0, atol=1e-6):
            return True  # (a wrong dimension is then refused with the embeddings' check)
    return _content(row) != _content(stored)


def embedded_text(stored: Dict[str, Any]) -> str:
    """The text a stored passage row's embedding is of (the text and metadata its node embeds)."""
    return metadata_dict_to_node(stored, text=stored["text"]).get_content(MetadataMode.EMBED)


def dropped_keys(row: Dict[str, Any], stored: Optional[Dict[str, Any]]) -> Dict[str, None]:
    """The metadata keys the `stored` row of a passage has and its new `row` lacks, as None: Milvus keeps
    a dynamic field an upsert leaves out, so a key dropped from a node's metadata would still match filters."""
    if stored is None:
        return {}
    return {key: None for key in json.loads(stored["_node_content"]).get("metadata") or {} if key not in row}


def _content(row: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
    node = json.loads(row["_node_content"])
    content = {key: value for key, value in node.items() if key not in _NOT_CONTENT}
    content["source"] = (node.get("relationships") or {}).get(_SOURCE)
    return row.get("_node_type"), content


def _check_text(node: BaseNode, what: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _refused(node, f"its {what} holds a lone surrogate (not valid Unicode)", "clean it") from None


def _refused(node: BaseNode, why: str, fix: str) -> GraphStoreError:
    return GraphStoreError(f"Node {node.node_id!r} cannot be stored: {why}. Fix: {fix}. Nothing was written.")


def embed(model: BaseEmbedding, texts: List[str], dim: int, batch_size: int, what: str) -> np.ndarray:
    """The embeddings of `texts` as a float32 matrix, checked: `dim` values each, all finite.

    The texts are embedded shortest first, so that each batch holds texts of about one length: a local
    model pads a batch to its longest text (MiniLM on MuSiQue: passages 1.9× faster, relations 1.3×)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors: List[List[float]] = []
    for batch in chunked([texts[i] for i in order], batch_size):
        vectors.extend(model.get_text_embedding_batch(list(batch)))
    matrix = checked_vectors(vectors, len(texts), dim, what, model)
    unsorted = np.empty_like(matrix)
    unsorted[order] = matrix
    return unsorted


def checked_vectors(vectors: Sequence[Sequence[float]], n: int, dim: int, what: str, model: Any) -> np.ndarray:
    """`vectors` as an (n, dim) float32 matrix; an error naming the fix if they are not that, or not finite."""
    if len(vectors) != n or any(len(v) != dim for v in vectors):
        sizes = sorted({len(v) for v in vectors})
        raise GraphStoreError(
            f"The embed model {getattr(model, 'model_name', model)!r} gave {len(vectors)} vectors of "
            f"dimension {sizes} for {n} {what}; the store holds {dim}-dimensional vectors. Use the model "
            "the store was built with, or pass the right dim= (or another collection_prefix). Nothing was written."
        )
    matrix = np.asarray(vectors, dtype=np.float32).reshape(n, dim)
    if not np.isfinite(matrix).all():
        bad = int((~np.isfinite(matrix).all(axis=1)).sum())
        raise GraphStoreError(
            f"The embed model gave {bad} vector(s) with NaN or infinite values for {what}. Check the model "
            "(and its inputs); nothing was written."
        )
    return matrix
