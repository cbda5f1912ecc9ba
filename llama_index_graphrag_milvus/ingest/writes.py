"""Writing a store: passages with their triplets in, documents out.

A write is planned whole first: every row built and checked, every embedding computed and checked
(`rows.py`), so that bad input is refused before anything is written. Then it advances the store's
generation in Milvus and writes entities, then relations, then passages (each passage with the ids of
the relations it states), so that an interrupted call never leaves a passage pointing at a relation that
is not stored; running it again completes it. If Milvus refuses a row midway, what the call wrote is
deleted again. The adjacency a write touches (`GraphBackend.scope`) is updated with it, and so is the
vector search.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.backends.base import GraphBackend
from llama_index_graphrag_milvus.milvus.filters import id_filter, literal_list
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, MAX_SYNONYMS, PASSAGES, RELATIONS, Collections, GraphStoreError
from llama_index_graphrag_milvus.ingest.rows import checked_vectors, embed, passage_row
from llama_index_graphrag_milvus.schema import Triplet, chunked, passage_id
from llama_index_graphrag_milvus.milvus.search import VectorSearch
from llama_index_graphrag_milvus.milvus.vectors import unit_rows

logger = logging.getLogger(__name__)


@dataclass
class _Plan:
    """Everything one `add` writes, built and embedded before the first write."""

    entities: List[Dict[str, Any]] = field(default_factory=list)  # rows, with embeddings and synonym links
    relations: List[Dict[str, Any]] = field(default_factory=list)
    passages: List[Dict[str, Any]] = field(default_factory=list)
    replaced: List[str] = field(default_factory=list)  # passages stored before, written again


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
        if todo:
            plan = self._plan(cache, todo)
            self.graph.writing()
            generation = self.collections.advance()
            try:
                self._write(cache, plan)
            except Exception as exc:
                self._roll_back(plan, exc)
            self.graph.written(generation)
        return pids

    def delete(self, ref_doc_id: str) -> None:
        """Delete a document: its passages, the relations no other passage states, and the entities left
        with no relation."""
        pids = self.passages_of(ref_doc_id)
        if not pids:
            return
        self.graph.writing()
        generation = self.collections.advance()
        cache = self.graph.scope(passage_ids=pids)
        orphans = cache.remove_passages(pids)
        self.collections.delete(PASSAGES, pids)
        self._delete_orphans(cache, *orphans)
        self.graph.written(generation)

    def clear(self) -> None:
        """Delete every row (the collections stay, so that concurrent readers see an empty store)."""
        self.graph.writing()
        generation = self.collections.advance()
        self.collections.delete_all()
        self.graph.reset()
        self.graph.written(generation)

    def passages_of(self, ref_doc_id: str) -> List[str]:
        """The ids of a document's stored passages."""
        return [r["id"] for r in self.collections.query(PASSAGES, id_filter([ref_doc_id], "doc_id"), ["id"])]

    # planning ---------------------------------------------------------------------------------
    def _plan(self, cache: GraphCache, todo: Dict[str, Tuple[BaseNode, List[Triplet]]]) -> _Plan:
        """Build, embed and check every row of the write; nothing is written."""
        plan = _Plan(passages=[passage_row(pid, node, ts) for pid, (node, ts) in todo.items()])
        plan.replaced = [pid for pid in todo if cache.has_passage(pid)]
        entities: Dict[int, str] = {}
        relations: Dict[int, Triplet] = {}
        for _, node_triplets in todo.values():
            for t in node_triplets:
                relations.setdefault(t.id, t)
                entities.setdefault(t.subject_id, t.subject)
                entities.setdefault(t.object_id, t.object)
        new_entities = {e: n for e, n in entities.items() if not cache.has_entity(e)}
        new_relations = [t for r, t in relations.items() if not cache.has_relation(r)]
        vectors = self._embed(list(new_entities.values()), "entity names")
        synonyms = self._synonyms(list(new_entities), vectors)
        plan.entities = [
            {"id": e, "name": name, "embedding": vector.tolist(), "synonym_ids": synonyms.get(e, [])}
            for (e, name), vector in zip(new_entities.items(), vectors)
        ]
        relation_vectors = self._embed([t.text for t in new_relations], "relations")
        plan.relations = [
            {
                "id": t.id, "subject_id": t.subject_id, "object_id": t.object_id,
                "entity_ids": [t.subject_id, t.object_id], "subject": t.subject, "predicate": t.predicate,
                "object": t.object, "embedding": vector.tolist(),
            }
            for t, vector in zip(new_relations, relation_vectors)
        ]
        nodes = [node for node, _ in todo.values()]
        missing = [i for i, node in enumerate(nodes) if node.embedding is None]
        embedded = dict(zip(missing, self._embed([nodes[i].get_content(MetadataMode.EMBED) for i in missing], "passages")))
        given = [nodes[i].embedding for i in range(len(nodes)) if i not in embedded]
        checked_vectors(given, len(given), self.dim, "passages (node.embedding)", self.embed_model)
        for i, row in enumerate(plan.passages):
            row["embedding"] = embedded[i].tolist() if i in embedded else list(nodes[i].embedding)
        return plan

    # writing ----------------------------------------------------------------------------------
    def _write(self, cache: GraphCache, plan: _Plan) -> None:
        orphans = cache.remove_passages(plan.replaced) if plan.replaced else ([], [])
        for kind, rows in ((ENTITIES, plan.entities), (RELATIONS, plan.relations)):
            for batch in chunked(rows, self.batch_size):
                self.collections.upsert(kind, batch)
        cache.add_relations((r["id"], r["subject_id"], r["object_id"]) for r in plan.relations)
        self.search.put(RELATIONS, [r["id"] for r in plan.relations], [r["embedding"] for r in plan.relations])
        # the adjacency knows entities once their relations are in
        cache.add_synonyms((r["id"], other) for r in plan.entities for other in r["synonym_ids"])
        cache.name_entities([r["id"] for r in plan.entities], [r["name"] for r in plan.entities])
        self.search.put(ENTITIES, [r["id"] for r in plan.entities], [r["embedding"] for r in plan.entities])
        for batch in chunked(plan.passages, self.batch_size):
            self.collections.upsert(PASSAGES, batch)
            cache.add_passages((r["id"], r["relation_ids"]) for r in batch)
            self.search.put(PASSAGES, [r["id"] for r in batch], [r["embedding"] for r in batch])
        self._delete_orphans(cache, *orphans)

    def _roll_back(self, plan: _Plan, exc: Exception) -> None:
        """Milvus refused a write midway: delete what this call added, rebuild the adjacency from Milvus,
        and raise an error that says so."""
        replaced = set(plan.replaced)
        # a rewritten passage may already hold its new version: keep the new relations it states
        kept = {r for row in plan.passages if row["id"] in replaced for r in row["relation_ids"]}
        relations = [r for r in plan.relations if r["id"] not in kept]
        ends = {e for r in plan.relations if r["id"] in kept for e in (r["subject_id"], r["object_id"])}
        try:
            self.collections.delete(PASSAGES, [r["id"] for r in plan.passages if r["id"] not in replaced])
            self.collections.delete(RELATIONS, [r["id"] for r in relations])
            self.collections.delete(ENTITIES, [r["id"] for r in plan.entities if r["id"] not in ends])
            self.graph.reset()
            self.graph.open()
        except Exception as again:  # pragma: no cover - Milvus unreachable
            logger.error("Rolling back a failed write failed too (%s); re-run the ingest to complete it.", again)
        raise GraphStoreError(
            f"Milvus refused the write ({exc}); what this call added was deleted again (passages that were "
            "being rewritten may keep their new version). Fix the cause and run the ingest again."
        ) from exc

    def _delete_orphans(self, cache: GraphCache, relation_ids: List[int], entity_ids: List[int]) -> None:
        gone = [e for e in entity_ids if not cache.has_entity(e)]
        self.collections.delete(RELATIONS, [r for r in relation_ids if not cache.has_relation(r)])
        self.collections.delete(ENTITIES, gone)
        self._unlink_synonyms(gone)

    def _unlink_synonyms(self, gone: List[int]) -> None:
        """Drop deleted entities from the synonym links of the entities that survive them."""
        if not gone:
            return
        gone_set = set(gone)
        for batch in chunked(gone, 1000):
            rows = self.collections.query(
                ENTITIES, f"array_contains_any(synonym_ids, {literal_list(batch)})", ["id", "name", "synonym_ids", "embedding"]
            )
            for row in rows:
                row["synonym_ids"] = [s for s in row["synonym_ids"] if s not in gone_set]
            self.collections.upsert(ENTITIES, rows)

    # helpers ----------------------------------------------------------------------------------
    def _embed(self, texts: List[str], what: str) -> np.ndarray:
        return embed(self.embed_model, texts, self.dim, self.batch_size, what)

    def _synonyms(self, entity_ids: List[int], vectors: np.ndarray) -> Dict[int, List[int]]:
        """Links from new entities to the entities, stored or new, whose embedding is within
        `synonym_threshold` (cosine): "Leonhard Euler" ~ "leonhard euler" ~ "L. Euler"."""
        if self.synonym_threshold is None or len(entity_ids) == 0:
            return {}
        threshold = self.synonym_threshold
        found: Dict[int, Dict[int, float]] = {e: {} for e in entity_ids}
        for eid, hits in zip(entity_ids, self.search.similar_entities(vectors, threshold, MAX_SYNONYMS + 1)):
            found[eid].update((other, score) for other, score in hits.items() if other != eid)
        unit = unit_rows(vectors)
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
