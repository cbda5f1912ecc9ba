"""Writing a store: the one write path of `add`, the transform, `bulk_load` and deletes
(`docs/design/consistency.md`).

A write is planned whole first: every row built and checked, every embedding computed and checked
(`rows.py`), the links of its new entities found (`links.py`), so that bad input is refused before
anything is written. Then it upserts facts, each a row written whole with a deterministic id: a `begin`
log row, the links, the new entities and relations, the statements, the passages, an `end` log row. A
passage comes after every fact it points at, so an interrupted write never leaves a passage naming a
relation that is not stored, and running it again writes what it had not. Nothing is read to be changed.
"""

from __future__ import annotations

import itertools
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_graphrag_milvus.backends.base import GraphBackend, Written
from llama_index_graphrag_milvus.errors import GraphStoreError
from llama_index_graphrag_milvus.ingest.links import new_links
from llama_index_graphrag_milvus.ingest.rows import (
    PASSAGE_FIELDS, checked_vectors, dropped_keys, embed, embedded_text, needs_rewrite, passage_row, statement_rows,
)
from llama_index_graphrag_milvus.milvus.collections import (
    ENTITIES, LINKS, PASSAGES, RELATIONS, STATEMENTS, Collections,
)
from llama_index_graphrag_milvus.milvus.filters import id_filter
from llama_index_graphrag_milvus.milvus.search import MilvusSearch, VectorSearch
from llama_index_graphrag_milvus.schema import Triplet, chunked, passage_id, statement_id

logger = logging.getLogger(__name__)

#: Rows an upsert sends at most (but passages, `batch_size` at a time: each may hold 64 KB of text). Each
#: call costs a round trip, ~17 ms on a server: a raw insert sends 1,000 rows a call too.
WRITE_BATCH = 1000


@dataclass
class _Plan:
    """Everything one `add` writes, built, embedded and checked before the first write."""

    written: Written = field(default_factory=Written)
    statements: List[Dict[str, Any]] = field(default_factory=list)
    unstated: List[int] = field(default_factory=list)  # statement ids of relations passages no longer state
    new_vectors: Optional[np.ndarray] = None  # the new entities' embeddings, in `written.entities`' order


def quiet(before: FrozenSet[str], now: FrozenSet[str], token: str) -> bool:
    """Whether no other write ran between two reads of the log, `before` and `now`, around the write
    `token`: none was under way before (a `begin` without its `end`) and none added a row since. A write
    that did leaves a row `now` that `before` lacks, its own or that of the write that deleted it
    (`Collections.prune` keeps its own `end`, and deletes no write under way)."""
    unfinished = any(i.endswith(".begin") and i[:-6] + ".end" not in before for i in before)
    return not unfinished and now - {f"{token}.begin"} <= before


def passages_of(collections: Collections, ref_doc_ids: Sequence[str]) -> Dict[str, List[str]]:
    """The ids of the documents' stored passages, by document id (one query per 100 documents)."""
    found: Dict[str, List[str]] = {}
    for batch in chunked(list(dict.fromkeys(ref_doc_ids)), 100):
        for row in collections.query(PASSAGES, id_filter(batch, "doc_id"), ["id", "doc_id"]):
            found.setdefault(row["doc_id"], []).append(row["id"])
    return found


def add_in_chunks(add: Callable[..., Any], nodes: Iterable[BaseNode], transform: Any, chunk_size: int,
                  show_progress: bool) -> None:
    """`add(chunk, triplets)` for each `chunk_size` nodes of `nodes` (their metadata's triplets, or
    `transform`'s), with a progress bar."""
    from tqdm.auto import tqdm

    from llama_index_graphrag_milvus.llm.guard import run_sync

    it = iter(nodes)
    with tqdm(total=len(nodes) if hasattr(nodes, "__len__") else None, desc="Bulk load", unit="passage",
              disable=not show_progress) as bar:
        while chunk := list(itertools.islice(it, chunk_size)):
            add(chunk, None if transform is None else run_sync(transform._atriplets(chunk)))
            bar.update(len(chunk))


@dataclass
class Writer:
    """Adds and deletes the rows of one store, and tells its graph backend what it wrote."""

    collections: Collections
    graph: GraphBackend
    search: VectorSearch
    embed_model: BaseEmbedding
    dim: int
    batch_size: int
    synonym_threshold: Optional[float]
    failed: Callable[[], None] = lambda: None  # a write failed midway: the store renews its caches
    _log: Optional[FrozenSet[str]] = field(default=None, init=False)  # the log as the last write ended

    def add(self, nodes: Sequence[BaseNode], triplets: Sequence[Sequence[Triplet]]) -> List[str]:
        """Store checked nodes with their triplets; return the passage ids (see `MilvusGraphStore.add`)."""
        pids = [passage_id(n.ref_doc_id or n.node_id, n.get_content(MetadataMode.NONE)) for n in nodes]
        given: Dict[str, Tuple[BaseNode, Dict[int, Triplet]]] = {}
        for pid, node, node_triplets in zip(pids, nodes, triplets):  # one passage given twice states both's
            given.setdefault(pid, (node, {}))[1].update((t.id, t) for t in node_triplets)
        stored = self.graph.passage_relations(list(given))
        held = self._held([pid for pid in given if pid in stored])
        rows = {pid: passage_row(pid, node, list(ts.values())) for pid, (node, ts) in given.items()}
        todo = {  # not those stored already as given: the same relations, metadata and carried embedding
            pid: (node, list(ts.values())) for pid, (node, ts) in given.items()
            if stored.get(pid) != ts.keys() or needs_rewrite(rows[pid], held.get(pid), node.embedding)
        }
        if todo:
            before = self._log_if_shared()  # before the plan's link search: see `_others_links`
            self._write(self._plan(todo, stored, held, rows, shared=before is not None), before)
        return pids

    def delete_passages(self, pids: Sequence[str]) -> None:
        """Delete passages by id, with their statements (what only they stated is left, not live)."""
        pids = list(dict.fromkeys(pids))
        if pids:
            self._logged(lambda token: self._delete(pids), Written(deleted=pids), 0)

    def _delete(self, pids: List[str]) -> None:
        self.collections.delete(STATEMENTS, pids, field="passage_id")  # first: a delete run again finds the passages
        self.collections.delete(PASSAGES, pids)

    def clear(self) -> None:
        """Delete every row (the collections stay, so that concurrent readers see an empty store)."""
        def clear(token: str) -> None:
            self.collections.delete_all()
            self.graph.reset()

        self._logged(clear, Written(), 0)

    # planning ---------------------------------------------------------------------------------
    def _held(self, pids: List[str]) -> Dict[str, Dict[str, Any]]:
        """The stored rows of passages given again, with their embeddings (one batched read)."""
        return {r["id"]: r for r in self.collections.get(PASSAGES, pids, [*PASSAGE_FIELDS, "embedding"])} if pids else {}

    def _plan(
        self, todo: Dict[str, Tuple[BaseNode, List[Triplet]]], stored: Dict[str, Set[int]],
        held: Dict[str, Dict[str, Any]], rows: Dict[str, Dict[str, Any]], shared: bool = False,
    ) -> _Plan:
        """Build, embed and check every row of the write (`held`: the stored rows of the passages written
        again; `rows`: the passages' rows, checked, without embeddings); nothing is written."""
        plan = _Plan()
        plan.written.passages = [rows[pid] for pid in todo]
        for row in plan.written.passages:
            row.update(dropped_keys(row, held.get(row["id"])))
        for pid, (_, ts) in todo.items():
            before, after = stored.get(pid), {t.id for t in ts}
            if before != after:  # not those written again for their metadata alone
                plan.statements += statement_rows(pid, ts)
                plan.unstated += [statement_id(pid, r) for r in (before or set()) - after]
        entities: Dict[int, str] = {}
        relations: Dict[int, Triplet] = {}
        for _, node_triplets in todo.values():
            for t in node_triplets:
                relations.setdefault(t.id, t)
                entities.setdefault(t.subject_id, t.subject)
                entities.setdefault(t.object_id, t.object)
        known = self.graph.stored(ENTITIES, np.fromiter(entities, np.int64, len(entities)))
        new_entities = {e: n for (e, n), k in zip(entities.items(), known) if not k}
        known = self.graph.stored(RELATIONS, np.fromiter(relations, np.int64, len(relations)))
        new_relations = [t for t, k in zip(relations.values(), known) if not k]
        plan.new_vectors = self._embed(list(new_entities.values()), "entity names")
        plan.written.entities = [{"id": e, "name": name, "embedding": vector.tolist()}
                                 for (e, name), vector in zip(new_entities.items(), plan.new_vectors)]
        plan.written.links = new_links(self.search, self.synonym_threshold, list(new_entities), plan.new_vectors,
                                       "Strong" if shared else None)  # shared: sees every write before `before`
        plan.written.relations = [
            {"id": t.id, "subject_id": t.subject_id, "object_id": t.object_id, "subject": t.subject,
             "predicate": t.predicate, "object": t.object, "embedding": vector.tolist()}
            for t, vector in zip(new_relations, self._embed([t.text for t in new_relations], "relations"))
        ]
        self._passage_vectors(plan.written.passages, [node for node, _ in todo.values()], held)
        return plan

    def _passage_vectors(self, passages: List[Dict[str, Any]], nodes: List[BaseNode], held: Dict[str, Dict[str, Any]]) -> None:
        """Each passage row's embedding: the node's own, the stored one when the text it embeds is the
        same, else the embed model's (one batch for all)."""
        olds = [held.get(row["id"]) for row in passages]
        kept = {i: olds[i]["embedding"] for i, node in enumerate(nodes)  # stored for the text it would embed
                if node.embedding is None and olds[i] is not None and embedded_text(olds[i]) == node.get_content(MetadataMode.EMBED)}
        missing = [i for i, node in enumerate(nodes) if node.embedding is None and i not in kept]
        embedded = dict(zip(missing, self._embed([nodes[i].get_content(MetadataMode.EMBED) for i in missing], "passages")))
        given = [node.embedding for node in nodes if node.embedding is not None]
        checked_vectors(given, len(given), self.dim, "passages (node.embedding)", self.embed_model)
        for i, row in enumerate(passages):
            row["embedding"] = embedded[i].tolist() if i in embedded else list(kept.get(i, nodes[i].embedding))

    # writing ----------------------------------------------------------------------------------
    def _write(self, plan: _Plan, before: Optional[FrozenSet[str]]) -> None:
        written, passages = plan.written, plan.written.passages
        done = [0]  # passages written

        def write(token: str) -> None:
            for kind, rows in ((LINKS, written.links), (ENTITIES, written.entities), (RELATIONS, written.relations)):
                self._upsert(kind, rows)
            others = self._others_links(plan, before, token)  # another writer's new names near ours: after ours
            self._upsert(STATEMENTS, plan.statements)
            for batch in chunked(passages, self.batch_size):
                self.collections.upsert(PASSAGES, batch)
                done[0] += len(batch)
            self.collections.delete(STATEMENTS, plan.unstated)  # once no passage row states them
            written.links += others.result() if others is not None else []

        self._logged(write, written, len(passages), done)

    def _log_if_shared(self) -> Optional[FrozenSet[str]]:
        """Where other processes may write at once (a server) and links are made: the log as this store's
        last write ended (any read before the plan's link search will do), or read Strong now."""
        if self.collections.is_lite or self.synonym_threshold is None or not isinstance(self.search, MilvusSearch):
            return None  # (a store searching its own copy of the vectors sees no other writer's entities)
        return self._log if self._log is not None else self.collections.log_ids()

    def _others_links(self, plan: _Plan, before: Optional[FrozenSet[str]], token: str) -> Optional["Future[List[Dict[str, Any]]]"]:
        """On a server, where other processes may write at once: the links of this write's new entities to
        entities written meanwhile, found by a Strong search once ours are stored (so that of two writes
        adding near names at once, the later search sees the other's), in a thread while the passages are
        written; unless the log, read `before` the plan's (Strong) search and now, says no other write ran
        meanwhile (`quiet`). On Milvus Lite one process writes: the planned links are all."""
        if before is None or not plan.written.entities:
            return None
        ids = [row["id"] for row in plan.written.entities]
        known = [row["id"] for row in plan.written.links]
        executor = ThreadPoolExecutor(max_workers=1)
        future = executor.submit(self._linked, before, token, ids, plan.new_vectors, known)
        executor.shutdown(wait=False)
        return future

    def _linked(self, before: FrozenSet[str], token: str, ids: List[int], vectors: np.ndarray,
                known: List[int]) -> List[Dict[str, Any]]:
        if quiet(before, self.collections.log_ids(), token):
            return []
        rows = new_links(self.search, self.synonym_threshold, ids, vectors, "Strong", known)
        self._upsert(LINKS, rows)
        return rows

    def _upsert(self, kind: str, rows: List[Dict[str, Any]]) -> None:
        for batch in chunked(rows, max(self.batch_size, WRITE_BATCH)):
            self.collections.upsert(kind, batch)

    def _logged(self, write: Callable[[str], None], written: Written, passages: int, done: Optional[List[int]] = None) -> None:
        """Run `write` between a `begin` and an `end` log row; then the graph backend takes what it wrote
        and the log keeps the `end` row alone. If Milvus refuses a row midway, what was written stays (it is
        true) and the error says how far it got."""
        token = self.collections.begin()
        try:
            write(token)
            end = self.collections.end(token)
        except Exception as exc:
            self.failed()
            try:  # a store that read the rows meanwhile learns that they changed again
                self.collections.end(token)
            except Exception:  # pragma: no cover - Milvus unreachable: the next write's end tells
                pass
            count = f"{done[0]} of its {passages} passages were written" if done is not None else "some rows were written"
            raise GraphStoreError(
                f"Milvus refused the write ({exc}) midway: {count}, and every row written stands on its own (no "
                "passage names a relation that is not stored). Fix the cause and run the call again to complete it."
            ) from exc
        seen = self.graph.apply(written, (f"{token}.begin", end))
        self._log = self.collections.log_ids() if seen is None else seen
        self.collections.prune(end, self._log)

    def _embed(self, texts: List[str], what: str) -> np.ndarray:
        return embed(self.embed_model, texts, self.dim, self.batch_size, what)
