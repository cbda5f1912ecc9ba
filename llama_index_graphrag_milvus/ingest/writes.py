"""Writing a store: passages with their triplets in, documents out.

A write is planned whole first: every row built and checked, every embedding computed and checked
(`rows.py`), and the change to the adjacency index computed from the rows it touches (`adjacency.py`),
so that bad input is refused before anything is written. Then it advances the store's generation in
Milvus and writes entities, then relations, then the adjacency index, then passages (each passage with
the ids of the relations it states), then deletes what the write orphaned. So an interrupted call never
leaves a passage pointing at a relation that is not stored, and running it again completes it. If Milvus
refuses a row midway, what the call wrote is deleted again and the index restored. The graph backend
mirrors each write that completed (`GraphBackend.apply`), and so does the vector search.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_graphrag_milvus.backends.base import GraphBackend, Written
from llama_index_graphrag_milvus.errors import GraphStoreError
from llama_index_graphrag_milvus.ingest.adjacency import AdjacencyChange, PassageChange, plan_adjacency
from llama_index_graphrag_milvus.ingest.rows import checked_vectors, embed, passage_row
from llama_index_graphrag_milvus.milvus.adjacency import AdjacencyIndex
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, PASSAGES, RELATIONS, Collections
from llama_index_graphrag_milvus.milvus.filters import id_filter
from llama_index_graphrag_milvus.milvus.search import VectorSearch
from llama_index_graphrag_milvus.milvus.vectors import unit_rows
from llama_index_graphrag_milvus.schema import MAX_SYNONYMS, Triplet, chunked, passage_id

logger = logging.getLogger(__name__)


@dataclass
class _Plan:
    """Everything one `add` writes, built and embedded before the first write."""

    entities: List[Dict[str, Any]] = field(default_factory=list)  # rows, with embeddings and synonym links
    relations: List[Dict[str, Any]] = field(default_factory=list)
    passages: List[Dict[str, Any]] = field(default_factory=list)
    replaced: List[str] = field(default_factory=list)  # passages stored before, written again
    changes: List[PassageChange] = field(default_factory=list)


@dataclass
class Writer:
    """Adds and deletes rows of one store, keeping its adjacency index, graph backend and vector search
    current."""

    collections: Collections
    graph: GraphBackend
    search: VectorSearch
    embed_model: BaseEmbedding
    dim: int
    batch_size: int
    synonym_threshold: Optional[float]

    def __post_init__(self) -> None:
        self.index = AdjacencyIndex(self.collections)

    def add(self, nodes: Sequence[BaseNode], triplets: Sequence[Sequence[Triplet]]) -> List[str]:
        """Store checked nodes with their triplets; return the passage ids (see `MilvusGraphStore.add`)."""
        pids = [passage_id(n.ref_doc_id or n.node_id, n.get_content(MetadataMode.NONE)) for n in nodes]
        stored = self.graph.passage_relations(pids)
        todo: Dict[str, Tuple[BaseNode, List[Triplet]]] = {}
        for pid, node, node_triplets in zip(pids, nodes, triplets):
            if stored.get(pid) == {t.id for t in node_triplets}:
                continue  # stored already, with the same relations
            todo[pid] = (node, list(node_triplets))
        if todo:
            plan = self._plan(todo, stored)
            links = {r["id"]: r["synonym_ids"] for r in plan.entities if r["synonym_ids"]}
            ends = {r["id"]: (r["subject_id"], r["object_id"]) for r in plan.relations}
            change = plan_adjacency(self.index, plan.changes, ends, links)
            self._written(lambda: self._write(plan, change), plan, change)
        return pids

    def delete(self, ref_doc_id: str) -> None:
        """Delete a document: its passages, the relations no other passage states, and the entities left
        with no relation."""
        self.delete_passages(self.passages_of(ref_doc_id))

    def delete_passages(self, pids: Sequence[str]) -> None:
        """Delete passages by id, and what only they supported."""
        pids = list(dict.fromkeys(pids))
        if not pids:
            return
        stored = self.graph.passage_relations(pids)
        pids = [p for p in pids if p in stored]
        if not pids:
            return
        change = plan_adjacency(self.index, [PassageChange(p, stored[p], set()) for p in pids])

        def write() -> Written:
            self.index.write(change.entities, change.relations)
            self.collections.delete(PASSAGES, pids)
            self._delete_orphans(change)
            return Written(deleted_passages=pids, orphan_relations=change.orphan_relations,
                           orphan_entities=change.orphan_entities)

        self._written(write, None, change)

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

    def _written(self, write, plan: Optional[_Plan], change: AdjacencyChange) -> None:
        """Run a planned write under a new generation; the backend mirrors it once it is whole."""
        self.graph.writing()
        generation = self.collections.advance()
        try:
            done = write()
        except Exception as exc:
            self._roll_back(plan, change, exc)
        self.graph.apply(done)
        self.graph.written(generation)

    # planning ---------------------------------------------------------------------------------
    def _plan(self, todo: Dict[str, Tuple[BaseNode, List[Triplet]]], stored: Dict[str, Optional[Set[int]]]) -> _Plan:
        """Build, embed and check every row of the write; nothing is written."""
        plan = _Plan(passages=[passage_row(pid, node, ts) for pid, (node, ts) in todo.items()])
        plan.replaced = [pid for pid in todo if stored.get(pid) is not None]
        plan.changes = [PassageChange(pid, stored.get(pid) or set(), {t.id for t in ts}) for pid, (_, ts) in todo.items()]
        entities: Dict[int, str] = {}
        relations: Dict[int, Triplet] = {}
        for _, node_triplets in todo.values():
            for t in node_triplets:
                relations.setdefault(t.id, t)
                entities.setdefault(t.subject_id, t.subject)
                entities.setdefault(t.object_id, t.object)
        known_entities = self.graph.has_entities(np.fromiter(entities, np.int64, len(entities)))
        known_relations = self.graph.has_relations(np.fromiter(relations, np.int64, len(relations)))
        new_entities = {e: n for (e, n), known in zip(entities.items(), known_entities) if not known}
        new_relations = [t for t, known in zip(relations.values(), known_relations) if not known]
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
    def _write(self, plan: _Plan, change: AdjacencyChange) -> Written:
        for kind, rows in ((ENTITIES, plan.entities), (RELATIONS, plan.relations)):
            for batch in chunked(rows, self.batch_size):
                self.collections.upsert(kind, batch)
        self.index.write(change.entities, change.relations)  # before the passages it indexes
        for batch in chunked(plan.passages, self.batch_size):
            self.collections.upsert(PASSAGES, batch)
        self._delete_orphans(change)
        return Written(plan.entities, plan.relations, plan.passages, [], change.orphan_relations, change.orphan_entities)

    def _roll_back(self, plan: Optional[_Plan], change: AdjacencyChange, exc: Exception) -> None:
        """Milvus refused a write midway: restore the index, delete what this call added, rebuild the
        backend from Milvus, and raise an error that says so."""
        try:
            self.index.write(*change.rolled_back())
            if plan is not None:
                replaced = set(plan.replaced)
                # a rewritten passage may already hold its new version: keep the new relations it states
                kept = {r for row in plan.passages if row["id"] in replaced for r in row["relation_ids"]}
                relations = [r for r in plan.relations if r["id"] not in kept]
                ends = {e for r in plan.relations if r["id"] in kept for e in (r["subject_id"], r["object_id"])}
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

    def _delete_orphans(self, change: AdjacencyChange) -> None:
        self.collections.delete(RELATIONS, change.orphan_relations)
        self.collections.delete(ENTITIES, change.orphan_entities)
        self._unlink_synonyms(change.unlinked)

    def _unlink_synonyms(self, unlinked: Dict[int, Set[int]]) -> None:
        """Drop deleted entities from the synonym links kept on the entity rows that survive them."""
        survivors = [e for e, gone in unlinked.items() if gone]
        for batch in chunked(survivors, 1000):
            rows = self.collections.get(ENTITIES, batch, ["id", "name", "synonym_ids", "embedding"])
            changed = []
            for row in rows:
                kept = [s for s in row["synonym_ids"] if s not in unlinked[row["id"]]]
                if len(kept) < len(row["synonym_ids"]):
                    changed.append({**row, "synonym_ids": kept})
            self.collections.upsert(ENTITIES, changed)

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
