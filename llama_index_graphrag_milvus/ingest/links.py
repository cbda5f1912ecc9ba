"""The links of a write's new entities: every entity, stored or new, whose embedding is at least the
store's `synonym_threshold` alike (cosine). A link is a fact about two names, written once by whichever
write holds the second of them; which links are synonyms is derived by readers (`graph.cache.synonym_pairs`).

Its cosine is computed the same way whichever write finds it, from the two unit vectors (`unit_rows` of
the embeddings as stored, multiplied in float64 and summed in a fixed order, rounded to float32), so
that two writers write the same row.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from llama_index_graphrag_milvus.milvus.collections import CONSTANT
from llama_index_graphrag_milvus.milvus.vectors import unit_rows
from llama_index_graphrag_milvus.schema import link_id

#: The most links a write looks for a new entity (on the dev sets no entity has more than 16 at 0.9).
LINK_SEARCH = 64


def link_row(a: int, b: int, score: float) -> Dict[str, Any]:
    a, b = sorted((int(a), int(b)))
    return {"id": link_id(a, b), "a": a, "b": b, "score": score, "embedding": CONSTANT}


def scored(pairs: Iterable[Tuple[int, int]], vectors: Dict[int, np.ndarray], threshold: float) -> List[Dict[str, Any]]:
    """The link rows of `pairs` (entity ids) whose cosine, from `vectors` (unit vectors by id), is at
    least `threshold`; each pair once."""
    rows: Dict[int, Dict[str, Any]] = {}
    for a, b in pairs:
        low, high = sorted((int(a), int(b)))
        if low == high or low not in vectors or high not in vectors or link_id(low, high) in rows:
            continue
        score = float(np.float32(np.multiply(vectors[low], vectors[high], dtype=np.float64).sum()))
        if score >= threshold:
            rows[link_id(low, high)] = link_row(low, high, score)
    return list(rows.values())


def new_links(search: Any, threshold: Optional[float], ids: List[int], vectors: np.ndarray,
              consistency: Optional[str] = None, known: Iterable[int] = ()) -> List[Dict[str, Any]]:
    """The links of new entities `ids` (with their embeddings `vectors`): to the stored entities the
    store's vector search finds (`consistency`, for a search that must see other writers' rows), and
    among themselves; at most `LINK_SEARCH` an entity. Links in `known` (ids) are left out."""
    if threshold is None or not ids:
        return []
    unit = unit_rows(np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1))
    kwargs = {"consistency": consistency} if consistency else {}
    hits = search.similar_entities(unit, threshold - 1e-4, LINK_SEARCH + 1, **kwargs)
    pairs = [(e, other) for e, found in zip(ids, hits) for other in found]
    for start in range(0, len(ids), 1024):  # among the new entities, block by block
        rows, cols = np.nonzero(unit[start : start + 1024] @ unit.T >= threshold - 1e-4)
        pairs += [(ids[start + i], ids[j]) for i, j in zip(rows.tolist(), cols.tolist())]
    known = set(known)
    pairs = [(a, b) for a, b in pairs if a != b and link_id(a, b) not in known]
    own = dict(zip(ids, unit))
    others = sorted({b for _, b in pairs} - own.keys())
    stored = {e: np.asarray(v, dtype=np.float32) for e, v in search.entity_vectors(others, **kwargs).items()} if others else {}
    return _capped(scored(pairs, {**stored, **own}, threshold), set(ids))


def _capped(rows: List[Dict[str, Any]], new: set) -> List[Dict[str, Any]]:
    """At most `LINK_SEARCH` links a new entity: its best (the other end's cap is its own write's)."""
    by_entity: Dict[int, List[Dict[str, Any]]] = {}
    for row in rows:
        for end in (row["a"], row["b"]):
            if end in new:
                by_entity.setdefault(end, []).append(row)
    kept: Dict[int, Dict[str, Any]] = {}
    for found in by_entity.values():
        for row in sorted(found, key=lambda r: (-r["score"], r["id"]))[:LINK_SEARCH]:
            kept[row["id"]] = row
    return list(kept.values())
