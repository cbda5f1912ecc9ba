"""The columns the in-memory caches are built from, and a local file that keeps them between runs.

A store builds its adjacency, entity names and vector cache from a few columns of its facts (`Columns`,
`read_columns`). Milvus Lite hands rows back slowly, so reading them dominates building a large store's
caches. A Lite store therefore saves its columns to a `.npz` file when it closes and builds from the file
the next time instead of re-reading Milvus.

The file is a cache of Milvus, never a source: it records the log ids of the state it holds
(`Collections.log_ids`: every write adds one), and is trusted only while Milvus' log holds exactly those.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import numpy as np

from llama_index_graphrag_milvus.milvus.collections import ENTITIES, LINKS, PASSAGES, RELATIONS

if TYPE_CHECKING:
    from llama_index_graphrag_milvus.milvus.collections import Collections

logger = logging.getLogger(__name__)

FORMAT = 4


@dataclass
class Columns:
    """What the caches need from the three collections, column by column."""

    relation_ids: np.ndarray  # int64 (R,)
    relation_ends: np.ndarray  # int64 (R, 2): subject and object entity ids
    passage_ids: List[str]  # (P,)
    passage_offsets: np.ndarray  # int64 (P + 1,): passage i states passage_relations[offsets[i]:offsets[i + 1]]
    passage_relations: np.ndarray  # int64
    entity_ids: np.ndarray  # int64 (E,)
    entity_names: List[str]  # (E,) as first written
    links: np.ndarray  # int64 (L, 2): pairs of indices into entity_ids (no id lookups to load them)
    link_scores: np.ndarray  # float32 (L,): their cosines
    relation_vectors: Optional[np.ndarray] = None  # float32 (R, dim), when the store keeps a vector cache
    passage_vectors: Optional[np.ndarray] = None  # float32 (P, dim)
    entity_vectors: Optional[np.ndarray] = None  # float32 (E, dim)

    @property
    def has_vectors(self) -> bool:
        return self.relation_vectors is not None


#: The columns of the adjacency (the rest are vectors).
ADJACENCY_COLUMNS = (
    "relation_ids", "relation_ends", "passage_ids", "passage_offsets", "passage_relations", "entity_ids",
    "entity_names", "links", "link_scores",
)


def read_columns(collections: "Collections", with_vectors: bool) -> Columns:
    """The columns the caches are built from, read page by page from the collections of facts."""
    vectors = ["embedding"] if with_vectors else []
    dim = collections.dim
    ids, ends, relation_vectors = [], [], []
    for page in collections.pages(RELATIONS, ["id", "subject_id", "object_id", *vectors]):
        ids.append(np.fromiter((r["id"] for r in page), np.int64, len(page)))
        ends.append(np.array([(r["subject_id"], r["object_id"]) for r in page], dtype=np.int64).reshape(-1, 2))
        relation_vectors += [_float32([r["embedding"] for r in page], dim)] if vectors else []
    passage_ids: List[str] = []
    lengths, flat, passage_vectors = [], [], []
    for page in collections.pages(PASSAGES, ["id", "relation_ids", *vectors]):
        passage_ids += [r["id"] for r in page]
        lengths += [len(r.get("relation_ids") or []) for r in page]
        flat += [rel for r in page for rel in r.get("relation_ids") or []]
        passage_vectors += [_float32([r["embedding"] for r in page], dim)] if vectors else []
    entity_ids: List[int] = []
    names: List[str] = []
    entity_vectors = []
    for page in collections.pages(ENTITIES, ["id", "name", *vectors]):
        entity_ids += [r["id"] for r in page]
        names += [r["name"] for r in page]
        entity_vectors += [_float32([r["embedding"] for r in page], dim)] if vectors else []
    links = [(r["a"], r["b"], r["score"]) for page in collections.pages(LINKS, ["a", "b", "score"]) for r in page]
    entities = np.array(entity_ids, dtype=np.int64)
    pairs, kept = _indices(entities, np.array([(a, b) for a, b, _ in links], dtype=np.int64).reshape(-1, 2))
    return Columns(
        relation_ids=np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64),
        relation_ends=np.concatenate(ends) if ends else np.zeros((0, 2), dtype=np.int64),
        passage_ids=passage_ids,
        passage_offsets=np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64),
        passage_relations=np.array(flat, dtype=np.int64),
        entity_ids=entities,
        entity_names=names,
        links=pairs,
        link_scores=np.array([score for _, _, score in links], dtype=np.float32)[kept],
        relation_vectors=_stack(relation_vectors, dim) if vectors else None,
        passage_vectors=_stack(passage_vectors, dim) if vectors else None,
        entity_vectors=_stack(entity_vectors, dim) if vectors else None,
    )


def _float32(rows: List[Any], dim: int) -> np.ndarray:
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), dim)


def _stack(parts: List[np.ndarray], dim: int) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros((0, dim), dtype=np.float32)


def _indices(ids: np.ndarray, pairs: np.ndarray) -> tuple:
    """Pairs of ids as pairs of indices into `ids`, and which pairs those are (pairs naming an id not in
    `ids` are dropped)."""
    order = np.argsort(ids, kind="stable")
    at = np.minimum(np.searchsorted(ids[order], pairs), max(len(ids) - 1, 0))
    found = (ids[order][at] == pairs).all(axis=1) if len(ids) else np.zeros(len(pairs), dtype=bool)
    return order[at[found]].reshape(-1, 2), found


def save(path: Path, columns: Columns, meta: Dict[str, Any], state: Dict[str, Any]) -> None:
    """Write `columns`, the `meta` they were built under and the `state` of Milvus they hold (its log
    ids) to `path`, atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_partials(path)
    arrays: Dict[str, np.ndarray] = {}
    for f in fields(Columns):
        value = getattr(columns, f.name)
        if value is None:
            continue
        if f.name in ("passage_ids", "entity_names"):
            arrays[f.name + "_utf8"], arrays[f.name + "_ends"] = _pack(value)
        else:
            arrays[f.name] = np.asarray(value)
    arrays["meta"] = np.array([_describe(meta)])
    arrays["counts"] = np.array([json.dumps(state, sort_keys=True)])
    partial = path.with_name(path.name + f".{os.getpid()}.partial")
    with open(partial, "wb") as file:
        np.savez(file, **arrays)
    os.replace(partial, path)


def load(path: Path, meta: Dict[str, Any]) -> Optional[Tuple[Columns, Dict[str, Any]]]:
    """The columns saved at `path` and the state saved with them, if the file exists and was saved under
    exactly this `meta`. Whether Milvus is still in that state is the caller's check."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["meta"][0]) != _describe(meta):
                logger.info("Snapshot %s was saved with other settings; rebuilding from Milvus.", path)
                return None
            values: Dict[str, Any] = {}
            for f in fields(Columns):
                if f.name in ("passage_ids", "entity_names"):
                    values[f.name] = _unpack(data[f.name + "_utf8"], data[f.name + "_ends"])
                elif f.name in data.files:
                    values[f.name] = data[f.name]
            return Columns(**values), json.loads(str(data["counts"][0]))
    except FileNotFoundError:
        return None
    except Exception as exc:  # a damaged or foreign file is only a cache miss
        logger.warning("Ignoring unreadable snapshot %s (%s); rebuilding from Milvus.", path, exc)
        return None


def _describe(meta: Dict[str, Any]) -> str:
    return json.dumps({"format": FORMAT} | meta, sort_keys=True)


def discard(path: Path) -> None:
    """Delete the file at `path`, if any, and any half-written copy a killed save left."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    _remove_partials(path)


def _remove_partials(path: Path) -> None:
    for partial in path.parent.glob(path.name + ".*.partial") if path.parent.exists() else ():
        try:
            partial.unlink()
        except FileNotFoundError:
            pass


def _pack(strings: List[str]) -> tuple:
    """Strings as one UTF-8 buffer and the end offset of each."""
    encoded = [s.encode("utf-8") for s in strings]
    ends = np.cumsum([len(b) for b in encoded], dtype=np.int64) if encoded else np.zeros(0, dtype=np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), ends


def _unpack(buffer: np.ndarray, ends: np.ndarray) -> List[str]:
    raw = buffer.tobytes()
    starts = [0, *ends[:-1].tolist()]
    return [raw[a:b].decode("utf-8") for a, b in zip(starts, ends.tolist())]
