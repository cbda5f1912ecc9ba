"""What a refresh of documents writes (`GraphRAGIndex.refresh_ref_docs`): the documents that are new or
changed against their stored passages, the stored passages they no longer give, and the passages of
unchanged documents that await LLM extraction (pending)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Optional, Protocol, Sequence, Set

from llama_index.core.schema import BaseNode, Document, MetadataMode

from llama_index_graphrag_milvus.ingest.extract.given import is_pending, mark_pending
from llama_index_graphrag_milvus.schema import passage_id


class StoredPassages(Protocol):
    """The reads a refresh makes (`MilvusGraphStore` has them)."""

    def documents_passage_ids(self, ref_doc_ids: Sequence[str]) -> Dict[str, List[str]]: ...

    def get_passages(self, passage_ids: Sequence[str]) -> Dict[str, BaseNode]: ...


@dataclass
class Refresh:
    """The nodes to write (every node of the new or changed documents, then the pending passages' nodes,
    marked pending so that the LLM is asked again), the stored passages to delete after the write, and,
    for each document, whether any of it is written."""

    nodes: List[BaseNode]
    gone: List[str]
    refreshed: List[bool]


def plan_refresh(
    store: StoredPassages, documents: Sequence[Document], nodes: Sequence[BaseNode], retry_pending: bool
) -> Refresh:
    """The refresh of `documents`, split into `nodes` by the steps before the graph write.

    A document is unchanged when its split gives exactly the passages stored for it
    (`passage_id(ref_doc_id, text)`) and every stored passage records the document's current hash
    (`source_node.hash`, so that metadata changes, triplets included, count too). Of an unchanged
    document only the pending passages are written again, and only with `retry_pending` (the graph step
    extracts with an LLM)."""
    nodes_of: Dict[str, List[BaseNode]] = defaultdict(list)
    for node in nodes:
        nodes_of[node.ref_doc_id or node.node_id].append(node)  # a Document ingested as is is its own
    stored = _stored(store, [doc.doc_id for doc in documents])
    plan, retried = Refresh([], [], []), []
    for doc in documents:
        split, old = nodes_of.get(doc.doc_id, []), stored.get(doc.doc_id, {})
        pending = _unchanged_pending(doc, split, old)
        if pending is None:  # new or changed: all of it; the passages it no longer gives go after
            plan.nodes += split
            plan.gone += sorted(set(old) - _passage_ids(doc, split))
            plan.refreshed.append(True)
            continue
        again = [n for n in split if passage_id(doc.doc_id, n.get_content(MetadataMode.NONE)) in pending]
        retried += again if retry_pending else []
        plan.refreshed.append(bool(again) and retry_pending)
    plan.nodes += [mark_pending(node) for node in retried]  # so that the graph step asks the LLM again
    return plan


def _stored(store: StoredPassages, document_ids: Sequence[str]) -> Dict[str, Dict[str, BaseNode]]:
    """The documents' stored passages as nodes, by document id, then passage id (batched reads)."""
    pids = store.documents_passage_ids(document_ids)
    nodes = store.get_passages([p for found in pids.values() for p in found])
    return {doc: {p: nodes[p] for p in found if p in nodes} for doc, found in pids.items()}


def _unchanged_pending(document: Document, split: Sequence[BaseNode], stored: Dict[str, BaseNode]) -> Optional[Set[str]]:
    """None when the document is new or changed; else the ids of its pending passages."""
    if not stored or set(stored) != _passage_ids(document, split):
        return None
    pending = set()
    for pid, node in stored.items():
        source = node.source_node
        if source is not None and source.hash and source.hash != document.hash:
            return None
        if is_pending(node):
            pending.add(pid)
    return pending


def _passage_ids(document: Document, nodes: Sequence[BaseNode]) -> Set[str]:
    """The ids of the passages a document's split (`nodes`) gives (the store skips nodes with no text)."""
    texts = [node.get_content(MetadataMode.NONE) for node in nodes]
    return {passage_id(document.doc_id, text) for text in texts if text.strip()}
