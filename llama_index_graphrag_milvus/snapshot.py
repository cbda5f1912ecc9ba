"""The columns the in-memory caches are built from, and a local file that keeps them between runs.

Opening a store rebuilds its adjacency, entity names and vector cache from a few columns of its three
collections (`Columns`). Milvus Lite hands rows back at a few thousand per second, so reading them
dominates opening a large store (minutes at 10^6 relations). A Lite store therefore saves its columns
to a `.npz` file when it closes and, on the next open, builds from the file instead of re-reading Milvus
(10^6 relations in about a second).

The file is a cache of Milvus, never a source: a store deletes it before its first write, and only
trusts it while Milvus still counts the rows that it counted when the file was saved (counted while
the file is read, so the check costs no time).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

logger = logging.getLogger(__name__)

FORMAT = 2


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
    synonyms: np.ndarray  # int64 (S, 2): pairs of indices into entity_ids (no id lookups to load them)
    relation_vectors: Optional[np.ndarray] = None  # float32 (R, dim), when the store keeps a vector cache
    passage_vectors: Optional[np.ndarray] = None  # float32 (P, dim)
    entity_vectors: Optional[np.ndarray] = None  # float32 (E, dim)

    @property
    def has_vectors(self) -> bool:
        return self.relation_vectors is not None


def save(path: Path, columns: Columns, meta: Dict[str, Any], counts: Dict[str, int]) -> None:
    """Write `columns`, the `meta` they were built under and the row `counts` Milvus gave when they were
    saved to `path`, atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
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
    arrays["counts"] = np.array([json.dumps(counts, sort_keys=True)])
    partial = path.with_name(path.name + f".{os.getpid()}.partial")
    with open(partial, "wb") as file:
        np.savez(file, **arrays)
    os.replace(partial, path)


def load(path: Path, meta: Dict[str, Any]) -> Optional[Tuple[Columns, Dict[str, int]]]:
    """The columns saved at `path` and the row counts saved with them, if the file exists and was saved
    under exactly this `meta`. Whether Milvus still counts those rows is the caller's check."""
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
    """Delete the file at `path`, if any."""
    try:
        path.unlink()
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
