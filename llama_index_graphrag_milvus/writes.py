"""Writing a store: passages with their triplets in, documents out.

Writes go entities, then relations, then passages (each passage written with the ids of the relations
it states), so that an interrupted call never leaves a passage pointing at a relation that is not
stored; running it again completes it. The adjacency a write touches (`GraphBackend.scope`) is updated
with it, and so is the vector search.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.utils import node_to_metadata_dict

from llama_index_graphrag_milvus.adjacency import GraphCache
from llama_index_graphrag_milvus.backends import GraphBackend
from llama_index_graphrag_milvus.filters import id_filter
from llama_index_graphrag_milvus.extract import given_triplets
from llama_index_graphrag_milvus.milvus import ENTITIES, MAX_SYNONYMS, PASSAGES, RELATIONS, Collections, GraphStoreError
from llama_index_graphrag_milvus.schema import Triplet, chunked, passage_id
from llama_index_graphrag_milvus.search import VectorSearch

logger = logging.getLogger(__name__)

#: The longest passage text a row holds (a Milvus VARCHAR).
MAX_PASSAGE_BYTES = 65_535


def checked(
    nodes: Sequence[BaseNode], triplets: Optional[Sequence[Sequence[Triplet]]]
) -> Tuple[List[BaseNode], List[Sequence[Triplet]]]:
    """The nodes to write and their triplets (by default those in their metadata), checked before anything
    is written: a passage too long for a row is refused with an error naming the fix; empty nodes are
    skipped with a warning."""
    if triplets is None:
        triplets = [given_triplets(node) or [] for node in nodes]
    if len(nodes) != len(triplets):
        raise ValueError(f"got {len(nodes)} nodes but {len(triplets)} triplet lists")
    for node in nodes:
        size = len(node.get_content(MetadataMode.NONE).encode("utf-8"))
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


@dataclass
class Writer:
    """Adds and deletes rows of one store, keeping its adjacency and vector search current."""

    collections: Collections
    graph: GraphBackend
    search: VectorSearch
    embed_model: BaseEmbedding
    dim: int
    batch_size: int
    synonym_threshold: Optional[float]

    def add(self, nodes: Sequence[BaseNode], triplets: Sequence[Sequence[Triplet]]) -> List[str]:
        """Store checked nodes with their triplets; return the passage ids (see `MilvusGraphStore.add`)."""
        pids = [passage_id(n.ref_doc_id or n.node_id, n.get_content(MetadataMode.NONE)) for n in nodes]
        cache = self.graph.scope(
            passage_ids=pids,
            relation_ids=[t.id for ts in triplets for t in ts],
            entity_ids=[e for ts in triplets for t in ts for e in (t.subject_id, t.object_id)],
        )
        todo: Dict[str, Tuple[BaseNode, List[Triplet]]] = {}
        for pid, node, node_triplets in zip(pids, nodes, triplets):
            if cache.passage_relations(pid) == {t.id for t in node_triplets}:
                continue  # stored already, with the same relations
            todo[pid] = (node, list(node_triplets))
        if not todo:
            return pids
        self.graph.writing()
        replaced = [pid for pid in todo if cache.has_passage(pid)]
        orphans = cache.remove_passages(replaced) if replaced else ([], [])
        entities: Dict[int, str] = {}
        relations: Dict[int, Triplet] = {}
        for _, node_triplets in todo.values():
            for t in node_triplets:
                relations.setdefault(t.id, t)
                entities.setdefault(t.subject_id, t.subject)
                entities.setdefault(t.object_id, t.object)
        written = self._write_entities({e: n for e, n in entities.items() if not cache.has_entity(e)})
        self._write_relations(cache, {r: t for r, t in relations.items() if not cache.has_relation(r)})
        self._record_entities(cache, *written)  # the adjacency knows entities once their relations are in
        self._write_passages(cache, todo)
        self._delete_orphans(cache, *orphans)
        return pids

    def delete(self, ref_doc_id: str) -> None:
        """Delete a document: its passages, the relations no other passage states, and the entities left
        with no relation."""
        pids = self.passages_of(ref_doc_id)
        if not pids:
            return
        self.graph.writing()
        cache = self.graph.scope(passage_ids=pids)
        orphans = cache.remove_passages(pids)
        self.collections.delete(PASSAGES, pids)
        self._delete_orphans(cache, *orphans)

    def passages_of(self, ref_doc_id: str) -> List[str]:
        """The ids of a document's stored passages."""
        return [r["id"] for r in self.collections.query(PASSAGES, id_filter([ref_doc_id], "doc_id"), ["id"])]

    # the three writes -------------------------------------------------------------------------
    def _write_entities(self, new: Dict[int, str]) -> Tuple[List[int], List[str], np.ndarray, Dict[int, List[int]]]:
        """Embed and write new entities with their synonym links; return what the adjacency records."""
        ids, names = list(new), list(new.values())
        vectors = np.asarray(self._embed(names), dtype=np.float32).reshape(len(ids), self.dim)
        synonyms = self._synonyms(ids, vectors)
        rows = [
            {"id": e, "name": name, "embedding": vector.tolist(), "synonym_ids": synonyms.get(e, [])}
            for e, name, vector in zip(ids, names, vectors)
        ]
        for batch in chunked(rows, self.batch_size):
            self.collections.upsert(ENTITIES, batch)
        return ids, names, vectors, synonyms

    def _record_entities(
        self, cache: GraphCache, ids: List[int], names: List[str], vectors: np.ndarray, synonyms: Dict[int, List[int]]
    ) -> None:
        cache.add_synonyms((a, b) for a, linked in synonyms.items() for b in linked)
        cache.name_entities(ids, names)
        self.search.put(ENTITIES, ids, vectors)

    def _write_relations(self, cache: GraphCache, new: Dict[int, Triplet]) -> None:
        rows = [
            {
                "id": rid, "subject_id": t.subject_id, "object_id": t.object_id,
                "entity_ids": [t.subject_id, t.object_id], "subject": t.subject, "predicate": t.predicate,
                "object": t.object,
            }
            for rid, t in new.items()
        ]
        vectors: List[List[float]] = []
        for row_batch, text_batch in zip(chunked(rows, self.batch_size), chunked([t.text for t in new.values()], self.batch_size)):
            embedded = self.embed_model.get_text_embedding_batch(list(text_batch))
            for row, vector in zip(row_batch, embedded):
                row["embedding"] = vector
            self.collections.upsert(RELATIONS, row_batch)
            vectors += embedded
        cache.add_relations((r["id"], r["subject_id"], r["object_id"]) for r in rows)
        self.search.put(RELATIONS, [r["id"] for r in rows], vectors)

    def _write_passages(self, cache: GraphCache, todo: Dict[str, Tuple[BaseNode, List[Triplet]]]) -> None:
        items = list(todo.items())
        missing = [i for i, (_, (node, _)) in enumerate(items) if node.embedding is None]
        texts = [items[i][1][0].get_content(metadata_mode=MetadataMode.EMBED) for i in missing]
        vectors = dict(zip(missing, self._embed(texts)))
        rows = []
        for i, (pid, (node, node_triplets)) in enumerate(items):
            row = node_to_metadata_dict(node, remove_text=True, flat_metadata=False)
            document = node.ref_doc_id or node.node_id  # a Document ingested as is is its own document
            row.update(
                id=pid,
                doc_id=document,
                ref_doc_id=document,
                document_id=document,
                text=node.get_content(MetadataMode.NONE),
                embedding=vectors.get(i, node.embedding),
                relation_ids=[t.id for t in node_triplets],
            )
            rows.append(row)
        for batch in chunked(rows, self.batch_size):
            self.collections.upsert(PASSAGES, batch)
            cache.add_passages((r["id"], r["relation_ids"]) for r in batch)
            self.search.put(PASSAGES, [r["id"] for r in batch], [r["embedding"] for r in batch])

    def _delete_orphans(self, cache: GraphCache, relation_ids: List[int], entity_ids: List[int]) -> None:
        self.collections.delete(RELATIONS, [r for r in relation_ids if not cache.has_relation(r)])
        self.collections.delete(ENTITIES, [e for e in entity_ids if not cache.has_entity(e)])

    # helpers ----------------------------------------------------------------------------------
    def _embed(self, texts: List[str]) -> List[List[float]]:
        vectors: List[List[float]] = []
        for batch in chunked(texts, self.batch_size):
            vectors.extend(self.embed_model.get_text_embedding_batch(list(batch)))
        return vectors

    def _synonyms(self, entity_ids: List[int], vectors: np.ndarray) -> Dict[int, List[int]]:
        """Links from new entities to the entities, stored or new, whose embedding is within
        `synonym_threshold` (cosine): "Leonhard Euler" ~ "leonhard euler" ~ "L. Euler"."""
        if self.synonym_threshold is None or len(entity_ids) == 0:
            return {}
        threshold = self.synonym_threshold
        found: Dict[int, Dict[int, float]] = {e: {} for e in entity_ids}
        for eid, hits in zip(entity_ids, self.search.similar_entities(vectors, threshold, MAX_SYNONYMS + 1)):
            found[eid].update((other, score) for other, score in hits.items() if other != eid)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = vectors / np.where(norms == 0, 1, norms)
        for start in range(0, len(entity_ids), 1024):  # among the new entities, block by block
            sims = unit[start : start + 1024] @ unit.T
            rows, cols = np.nonzero(sims >= threshold)
            for i, j in zip(rows.tolist(), cols.tolist()):
                if start + i != j:
                    found[entity_ids[start + i]][entity_ids[j]] = float(sims[i, j])
        return {
            e: [other for other, _ in sorted(links.items(), key=lambda kv: -kv[1])[:MAX_SYNONYMS]]
            for e, links in found.items()
            if links
        }
