"""A first load into an empty store, at Milvus' insert rate: `MilvusGraphStore.bulk_load`.

The nodes are read a chunk at a time. Each chunk's rows are planned as `add` plans them (the same rows,
embeddings and synonym links, `Writer._plan`), then inserted, not upserted: the store was empty, so
there is nothing to read back or merge. The caches follow each chunk as they follow a write. What
stays in memory across chunks is what the adjacency index is built from: the ids of the entities,
relations and passages written, each relation's two entities, each passage's relations and the synonym
links (a few dozen bytes a stated triplet). The index is written once, after the last chunk, from
those columns (`from_columns`, as a store written before the index had it built), and only then marked
whole: a load stopped midway leaves passages whose relations and entities are stored, and the index is
rebuilt from the rows when the store next opens.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any, Dict, Iterable, Iterator, List, Sequence, Set, Tuple

import numpy as np
from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_graphrag_milvus.backends.base import Written
from llama_index_graphrag_milvus.errors import GraphStoreError
from llama_index_graphrag_milvus.ingest.adjacency import BUILT, ensure_index, mark_built
from llama_index_graphrag_milvus.ingest.rows import checked, passage_row
from llama_index_graphrag_milvus.ingest.writes import Writer
from llama_index_graphrag_milvus.llm.guard import run_sync
from llama_index_graphrag_milvus.milvus.adjacency import from_columns
from llama_index_graphrag_milvus.milvus.collections import ADJACENCY, ENTITIES, KINDS, PASSAGES, RELATIONS
from llama_index_graphrag_milvus.schema import Triplet, chunked, passage_id

logger = logging.getLogger(__name__)


class _Seen:
    """The entities and relations this load wrote, answering `Writer._plan`'s questions without a read."""

    def __init__(self) -> None:
        self.entities: Set[int] = set()
        self.relations: Dict[int, Tuple[int, int]] = {}

    def has_entities(self, ids: np.ndarray) -> np.ndarray:
        return np.fromiter((int(i) in self.entities for i in ids), bool, len(ids))

    def has_relations(self, ids: np.ndarray) -> np.ndarray:
        return np.fromiter((int(i) in self.relations for i in ids), bool, len(ids))


def refuse_unless_empty(writer: Writer) -> None:
    """A bulk load writes into an empty store only: else an error naming the fix."""
    counts = writer.collections.counts()
    if any(counts[kind] for kind in KINDS):
        names = writer.collections.names
        raise GraphStoreError(
            f"bulk_load needs an empty store, and {names[ENTITIES]}, {names[RELATIONS]} and {names[PASSAGES]} "
            f"hold {counts}. Add to a store that holds rows with store.add or GraphRAGTransform, or start "
            "over with MilvusGraphStore(..., overwrite=True) (or store.clear()) and bulk_load again."
        )


def bulk_load(
    writer: Writer, nodes: Iterable[BaseNode], transform: Any = None, chunk_size: int = 1000, show_progress: bool = False
) -> Dict[str, int]:
    """Write `nodes` (through `transform`'s extraction, if given) into the writer's empty store; the rows
    written, by collection (see `MilvusGraphStore.bulk_load`)."""
    from tqdm.auto import tqdm

    refuse_unless_empty(writer)
    load = _Load(writer)
    behind, start = writer._begin()
    writer.collections.delete(ADJACENCY, [BUILT])  # not whole until the load ends
    total = len(nodes) if hasattr(nodes, "__len__") else None
    try:
        with tqdm(total=total, desc="Bulk load", unit="passage", disable=not show_progress) as bar:
            for chunk in _chunks(nodes, chunk_size):
                load.chunk(*checked(chunk, _triplets(chunk, transform)))
                bar.update(len(chunk))
            bar.set_postfix_str("adjacency index")
            load.index()
    except Exception as exc:
        _stopped(writer, load, exc)
    mark_built(writer.collections)
    writer._end(behind, start)
    return load.counts()


def _chunks(nodes: Iterable[BaseNode], size: int) -> Iterator[List[BaseNode]]:
    it = iter(nodes)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _triplets(chunk: List[BaseNode], transform: Any) -> Any:
    """The chunk's triplets through `transform`'s extraction (nothing written), else None: those in their metadata."""
    return None if transform is None else run_sync(transform._atriplets(chunk))


def _stopped(writer: Writer, load: "_Load", exc: Exception) -> None:
    """A load refused midway: the passages written stand (with their relations and entities); the index
    is built from the rows now if Milvus answers, else when the store next opens. The error says so."""
    try:
        ensure_index(writer.index)
        writer.collections.advance()
        writer.graph.reset()
        writer.graph.open()
    except Exception as again:  # pragma: no cover - Milvus unreachable
        logger.error("Building the adjacency index after a stopped bulk load failed too (%s); it is built "
                     "when the store next opens.", again)
    raise GraphStoreError(
        f"bulk_load stopped ({exc}) after {load.passages_written} passages, which stand with their relations "
        "and entities. Fix the cause, then add the rest with store.add or GraphRAGTransform (the passages "
        "stored are skipped), or start over with MilvusGraphStore(..., overwrite=True)."
    ) from exc


class _Load:
    """One bulk load's state: what was written, and the columns the adjacency index is built from."""

    def __init__(self, writer: Writer) -> None:
        self.writer, self.seen = writer, _Seen()
        self.passages: Dict[str, List[int]] = {}  # passage id -> the relations it states
        self.synonyms: List[Tuple[int, int]] = []
        self.passages_written = 0

    def chunk(self, nodes: List[BaseNode], triplets: List[Sequence[Triplet]]) -> None:
        """Plan the chunk's rows as `add` would on the store this load has written so far, and insert them."""
        given: Dict[str, Tuple[BaseNode, Dict[int, Triplet]]] = {}
        for node, node_triplets in zip(nodes, triplets):  # one passage given twice states both's
            pid = passage_id(node.ref_doc_id or node.node_id, node.get_content(MetadataMode.NONE))
            given.setdefault(pid, (node, {}))[1].update((t.id, t) for t in node_triplets)
        todo = {}
        for pid, (node, ts) in given.items():
            if pid not in self.passages:
                todo[pid] = (node, list(ts.values()))
            elif set(self.passages[pid]) != ts.keys():
                raise GraphStoreError(
                    f"passage {pid} (node {node.node_id!r}) was given again with other triplets: a bulk load "
                    "writes each passage once. Give its triplets together, or add it afterwards with store.add"
                )
        if not todo:
            return
        rows = {pid: passage_row(pid, node, ts) for pid, (node, ts) in todo.items()}
        writer, graph = self.writer, self.writer.graph
        plan = writer._plan(todo, {}, {}, rows, known=self.seen)  # stored: what this load wrote
        for kind, kind_rows in ((ENTITIES, plan.entities), (RELATIONS, plan.relations), (PASSAGES, plan.passages)):
            for batch in chunked(kind_rows, writer.batch_size):
                writer.collections.insert(kind, batch)
        self.seen.entities.update(r["id"] for r in plan.entities)
        self.seen.relations.update((r["id"], (r["subject_id"], r["object_id"])) for r in plan.relations)
        self.synonyms += [(r["id"], other) for r in plan.entities for other in r["synonym_ids"]]
        self.passages.update((r["id"], list(r["relation_ids"])) for r in plan.passages)
        self.passages_written += len(plan.passages)
        graph.apply(Written(plan.entities, plan.relations, plan.passages))

    def index(self) -> None:
        """Write the adjacency index of everything loaded (inserted: the store had none)."""
        relations = self.seen.relations
        pids = list(self.passages)
        stated = [r for pid in pids for r in self.passages[pid]]
        offsets = np.cumsum([0] + [len(self.passages[pid]) for pid in pids])
        entities, rows = from_columns(
            np.fromiter(relations, np.int64, len(relations)),
            np.array(list(relations.values()), dtype=np.int64).reshape(-1, 2),
            pids, offsets, np.array(stated, dtype=np.int64), self.synonyms,
        )
        self.writer.index.write(entities, rows, fresh=True)

    def counts(self) -> Dict[str, int]:
        return {ENTITIES: len(self.seen.entities), RELATIONS: len(self.seen.relations), PASSAGES: len(self.passages)}
