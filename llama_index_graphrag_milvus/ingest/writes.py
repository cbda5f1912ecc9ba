"""Writing a store: passages with their triplets in, documents out.

A write is planned whole first: every row built and checked, every embedding computed and checked
(`rows.py`), and the change to the adjacency index computed from the rows it touches (`adjacency.py`),
so that bad input is refused before anything is written. Then it advances the store's generation in
Milvus and writes entities, then relations, then the adjacency index, then passages (each passage with
the ids of the relations it states), then deletes what the write orphaned, and advances the generation
again (a store that read the rows in between can tell that it missed some: `MilvusGraphStore.sync`).
So an interrupted call never leaves a passage pointing at a relation that is not stored, and running it
again writes what it had not (if neither the call nor its recovery below could finish, the rows it
orphaned may stay: entities and relations that no passage states, which no retrieval returns). If Milvus
refuses a row before the first passage is written (or deleted), the index is restored and what the call
added deleted again: nothing of it stays. If it refuses one after, the passages written stand, and the
index and the orphans are made to agree with the passages Milvus holds (`_reconcile`). The graph backend
mirrors each write that completed (`GraphBackend.apply`), and so does the vector search.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_graphrag_milvus.backends.base import GraphBackend, Written
from llama_index_graphrag_milvus.errors import GraphStoreError
from llama_index_graphrag_milvus.ingest.adjacency import AdjacencyChange, PassageChange, mark_built, plan_adjacency, planner
from llama_index_graphrag_milvus.ingest.rows import PASSAGE_FIELDS, checked_vectors, dropped_keys, embed, embedded_text, needs_rewrite, passage_row
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
    changes: List[PassageChange] = field(default_factory=list)


def passages_of(collections: Collections, ref_doc_ids: Sequence[str]) -> Dict[str, List[str]]:
    """The ids of the documents' stored passages, by document id (one query per 100 documents)."""
    found: Dict[str, List[str]] = {}
    for batch in chunked(list(dict.fromkeys(ref_doc_ids)), 100):
        for row in collections.query(PASSAGES, id_filter(batch, "doc_id"), ["id", "doc_id"]):
            found.setdefault(row["doc_id"], []).append(row["id"])
    return found


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
        given: Dict[str, Tuple[BaseNode, Dict[int, Triplet]]] = {}
        for pid, node, node_triplets in zip(pids, nodes, triplets):  # one passage given twice states both's
            given.setdefault(pid, (node, {}))[1].update((t.id, t) for t in node_triplets)
        held = self._held([pid for pid in given if pid in stored])
        rows = {pid: passage_row(pid, node, list(ts.values())) for pid, (node, ts) in given.items()}
        todo = {  # not those stored already as given: the same relations, metadata and carried embedding
            pid: (node, list(ts.values())) for pid, (node, ts) in given.items()
            if stored.get(pid) != ts.keys() or needs_rewrite(rows[pid], held.get(pid), node.embedding)
        }
        if todo:
            plan = self._plan(todo, stored, held, rows)
            links = {r["id"]: r["synonym_ids"] for r in plan.entities if r["synonym_ids"]}
            ends = {r["id"]: (r["subject_id"], r["object_id"]) for r in plan.relations}
            change = plan_adjacency(planner(self.index, self.graph), plan.changes, ends, links)
            self._written(lambda: self._write_index(plan, change), lambda: self._write_passages(plan, change),
                          plan, plan.changes, change)
        return pids

    def delete(self, ref_doc_id: str) -> None:
        """Delete a document: its passages, the relations no other passage states, and the entities left
        with no relation."""
        self.delete_passages(passages_of(self.collections, [ref_doc_id]).get(ref_doc_id, []))

    def delete_passages(self, pids: Sequence[str]) -> None:
        """Delete passages by id, and what only they supported."""
        pids = list(dict.fromkeys(pids))
        if not pids:
            return
        stored = self.graph.passage_relations(pids)
        pids = [p for p in pids if p in stored]
        if not pids:
            return
        changes = [PassageChange(p, stored[p], set()) for p in pids]
        change = plan_adjacency(planner(self.index, self.graph), changes)

        def delete() -> Written:
            self.collections.delete(PASSAGES, pids)
            self._delete_orphans(change)
            return Written(deleted_passages=pids, orphan_relations=change.orphan_relations,
                           orphan_entities=change.orphan_entities)

        self._written(lambda: self.index.write(change.entities, change.relations), delete, None, changes, change)

    def clear(self) -> None:
        """Delete every row (the collections stay, so that concurrent readers see an empty store)."""
        _, start = self._begin()
        self.collections.delete_all()
        mark_built(self.collections)  # the empty index is whole
        self.graph.reset()
        self._end(False, start)

    def _written(
        self, before_passages: Callable[[], None], passages: Callable[[], Written], plan: Optional[_Plan],
        changes: List[PassageChange], change: AdjacencyChange,
    ) -> None:
        """Run a planned write between two new generations: what comes before the passages, then the
        passages and what follows them. The backend mirrors it once it is whole."""
        behind, start = self._begin()
        try:
            before_passages()
        except Exception as exc:
            self._roll_back(plan, change, exc)
        try:
            done = passages()
        except Exception as exc:
            self._reconcile(changes, change, exc, len(plan.passages) - len(changes) if plan else 0)
        self.graph.apply(done)
        self._end(behind, start)

    def _begin(self) -> Tuple[bool, str]:
        """Before a write's first row: whether another store wrote since the backend's caches were built
        (the write was planned on them), and the generation token that marks the write's start."""
        behind = self.graph.behind()
        self.graph.writing()
        return behind, self.collections.advance()

    def _end(self, behind: bool, start: str) -> None:
        """After a write's last row, a second token (a store that read the rows meanwhile can tell). The
        backend holds it only if no other store wrote before or during the write: else it is `behind`."""
        behind = behind or self.graph.behind(start)
        end = self.collections.advance()
        self.graph.written(None if behind else end)

    # planning ---------------------------------------------------------------------------------
    def _held(self, pids: List[str]) -> Dict[str, Dict[str, Any]]:
        """The stored rows of passages given again, with their embeddings (one batched read)."""
        return {r["id"]: r for r in self.collections.get(PASSAGES, pids, [*PASSAGE_FIELDS, "embedding"])} if pids else {}

    def _plan(
        self, todo: Dict[str, Tuple[BaseNode, List[Triplet]]], stored: Dict[str, Set[int]],
        held: Dict[str, Dict[str, Any]], rows: Dict[str, Dict[str, Any]], known: Any = None,
    ) -> _Plan:
        """Build, embed and check every row of the write (`held`: the stored rows of the passages written
        again; `rows`: the passages' rows, checked, without embeddings; `known`: what tells the entities and
        relations stored, by default the graph backend); nothing is written."""
        known = known or self.graph
        plan = _Plan(passages=[rows[pid] for pid in todo])
        for row in plan.passages:
            row.update(dropped_keys(row, held.get(row["id"])))
        moves = [PassageChange(pid, stored.get(pid) or set(), {t.id for t in ts}) for pid, (_, ts) in todo.items()]
        plan.changes = [c for c in moves if c.before != c.after]  # not those only written for their metadata
        entities: Dict[int, str] = {}
        relations: Dict[int, Triplet] = {}
        for _, node_triplets in todo.values():
            for t in node_triplets:
                relations.setdefault(t.id, t)
                entities.setdefault(t.subject_id, t.subject)
                entities.setdefault(t.object_id, t.object)
        known_entities = known.has_entities(np.fromiter(entities, np.int64, len(entities)))
        known_relations = known.has_relations(np.fromiter(relations, np.int64, len(relations)))
        new_entities = {e: n for (e, n), known in zip(entities.items(), known_entities) if not known}
        new_relations = [t for t, known in zip(relations.values(), known_relations) if not known]
        vectors = self._embed(list(new_entities.values()), "entity names")
        synonyms = synonym_links(self.search, self.synonym_threshold, list(new_entities), vectors)
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
        nodes, olds = [node for node, _ in todo.values()], [held.get(pid) for pid in todo]
        kept = {i: olds[i]["embedding"] for i, node in enumerate(nodes)  # stored for the text it would embed
                if node.embedding is None and olds[i] is not None and embedded_text(olds[i]) == node.get_content(MetadataMode.EMBED)}
        missing = [i for i, node in enumerate(nodes) if node.embedding is None and i not in kept]
        embedded = dict(zip(missing, self._embed([nodes[i].get_content(MetadataMode.EMBED) for i in missing], "passages")))
        given = [node.embedding for node in nodes if node.embedding is not None]
        checked_vectors(given, len(given), self.dim, "passages (node.embedding)", self.embed_model)
        for i, row in enumerate(plan.passages):
            row["embedding"] = embedded[i].tolist() if i in embedded else list(kept.get(i, nodes[i].embedding))
        return plan

    # writing ----------------------------------------------------------------------------------
    def _write_index(self, plan: _Plan, change: AdjacencyChange) -> None:
        for kind, rows in ((ENTITIES, plan.entities), (RELATIONS, plan.relations)):
            for batch in chunked(rows, self.batch_size):
                self.collections.upsert(kind, batch)
        self.index.write(change.entities, change.relations)  # before the passages it indexes

    def _write_passages(self, plan: _Plan, change: AdjacencyChange) -> Written:
        for batch in chunked(plan.passages, self.batch_size):
            self.collections.upsert(PASSAGES, batch)
        self._delete_orphans(change)
        return Written(plan.entities, plan.relations, plan.passages, [], change.orphan_relations, change.orphan_entities)

    def _roll_back(self, plan: Optional[_Plan], change: AdjacencyChange, exc: Exception) -> None:
        """Milvus refused a write before its first passage: restore the index, delete the entities and
        relations this call added, rebuild the backend from Milvus, and raise an error that says so."""

        def restore() -> None:
            self.index.write(*change.rolled_back())
            if plan is not None:
                self.collections.delete(RELATIONS, [r["id"] for r in plan.relations])
                self.collections.delete(ENTITIES, [r["id"] for r in plan.entities])

        self._repaired(restore, "Rolling back")
        raise GraphStoreError(
            f"Milvus refused the write ({exc}) before any passage was written; what this call added was "
            "deleted again and the store is as it was. Fix the cause and run the call again."
        ) from exc

    def _reconcile(self, changes: List[PassageChange], change: AdjacencyChange, exc: Exception, restated: int) -> None:
        """Milvus refused a write after the index, once passages may have been written or deleted: the
        passages Milvus holds stand. The index is moved from what the write planned to what they state,
        the rows no passage states any more are deleted, the backend is rebuilt, and the error says so
        (and that the `restated` passages, written again for their metadata alone, may be old or new)."""

        def repair() -> int:
            pids = [c.passage_id for c in changes]
            held = {r["id"]: set(r["relation_ids"]) for r in self.collections.get(PASSAGES, pids, ["id", "relation_ids"])}
            moved = [PassageChange(c.passage_id, c.after, held.get(c.passage_id, set())) for c in changes]
            moved = [c for c in moved if c.before != c.after]
            # the write's orphans that a passage held states again get back the synonym links its plan gave
            # them (stored and new ones); links to what stays orphaned are dropped as the fix plans it
            stated = {e for c in moved for r in c.after if r in change.relations
                      for e in (change.relations[r].subject, change.relations[r].object)}
            revived = set(change.orphan_entities) & stated
            links = {e: change.entities[e].synonyms - (set(change.orphan_entities) - revived) for e in revived}
            fix = plan_adjacency(self.index, moved, new_links={e: others for e, others in links.items() if others})
            self.index.write(fix.entities, fix.relations)
            self._delete_orphans(change.still_orphaned(fix))
            return len(changes) - len(moved)

        done = self._repaired(repair, "Reconciling")
        said = (f"{'some' if done is None else done} of its {len(changes)} passages were written (or deleted) as "
                "asked and stand, and the store agrees with them; the others are as they were") if changes else "the graph is as it was"
        if restated:
            said += f"; passages written again for new metadata alone ({restated}) may hold the old or the new"
        raise GraphStoreError(f"Milvus refused the write ({exc}) midway: {said}. Fix the cause and run the call again to complete it.") from exc

    def _repaired(self, repair: Callable[[], Any], what: str) -> Any:
        """Run `repair` after a refused write, then rebuild the backend from Milvus, and return what
        `repair` returned; if Milvus refuses that too, log it and return None (the caller raises the
        write's error)."""
        try:
            done = repair()
            self.collections.advance()  # a state of its own: a store that read the failed write's rows can tell
            self.graph.reset()
            self.graph.open()
            return done
        except Exception as again:  # pragma: no cover - Milvus unreachable
            logger.error("%s a failed write failed too (%s); re-run the call to write what it had not (rows it "
                         "orphaned may stay, stated by no passage).", what, again)

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


def synonym_links(
    search: VectorSearch, threshold: Optional[float], entity_ids: List[int], vectors: np.ndarray
) -> Dict[int, List[int]]:
    """Links from new entities to the entities, stored or new, whose embedding is within
    `threshold` (cosine): "Leonhard Euler" ~ "leonhard euler" ~ "L. Euler"."""
    if threshold is None or len(entity_ids) == 0:
        return {}
    found: Dict[int, Dict[int, float]] = {e: {} for e in entity_ids}
    for eid, hits in zip(entity_ids, search.similar_entities(vectors, threshold, MAX_SYNONYMS + 1)):
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
