"""The links of a write's new entities: every entity, stored or new, whose embedding is at least the
store's `synonym_threshold` alike (cosine). A link is a fact about two names, written once by whichever
write holds the second of them; which links are synonyms is derived by readers (`graph.cache.synonym_pairs`).

Its cosine is computed the same way whichever write finds it, from the two unit vectors (`unit_rows` of
the embeddings as stored, multiplied in float64 and summed in a fixed order, rounded to float32), so
that two writers write the same row.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional

import numpy as np

from llama_index_graphrag_milvus.milvus.collections import CONSTANT
from llama_index_graphrag_milvus.milvus.vectors import unit_rows
from llama_index_graphrag_milvus.schema import link_id

#: The most links a write keeps for a new entity, its best: on the dev sets no entity has more than 16
#: neighbours at 0.9, and each keeps 8 as synonyms. A bound on the rows a crowded region of the embedding
#: space writes, and on the hits a server returns a search (its cost grows with them).
LINK_SEARCH = 16


def new_links(search: Any, threshold: Optional[float], ids: List[int], vectors: np.ndarray,
              consistency: Optional[str] = None, known: Iterable[int] = ()) -> List[Dict[str, Any]]:
    """The link rows of new entities `ids` (with their embeddings `vectors`): to the stored entities the
    store's vector search finds (`consistency`, for a search that must see other writers' rows), and
    among themselves; at most `LINK_SEARCH` an entity. Links in `known` (ids) are left out."""
    if threshold is None or not ids:
        return []
    new = np.asarray(ids, dtype=np.int64)
    unit = unit_rows(np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1))
    kwargs = {"consistency": consistency} if consistency else {}
    hits = search.similar_entities(unit, threshold - 1e-4, LINK_SEARCH + 1, **kwargs)
    a = [np.repeat(new, [len(found) for found in hits]), np.array([o for found in hits for o in found], dtype=np.int64)]
    for start in range(0, len(ids), 1024):  # among the new entities, block by block
        rows, cols = np.nonzero(unit[start : start + 1024] @ unit.T >= threshold - 1e-4)
        a = [np.concatenate([a[0], new[start + rows]]), np.concatenate([a[1], new[cols]])]
    pairs = np.unique(np.sort(np.stack(a, axis=1), axis=1), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    others = np.setdiff1d(pairs.ravel(), new)
    stored = search.entity_vectors(others.tolist(), **kwargs) if len(others) else {}
    table = np.concatenate([new, np.fromiter(stored, np.int64, len(stored))])
    matrix = np.concatenate([unit, np.asarray(list(stored.values()), dtype=np.float32).reshape(len(stored), unit.shape[1])])
    order = np.argsort(table)
    at = order[np.searchsorted(table[order], pairs)]
    found = (table[at] == pairs).all(axis=1)  # a stored entity deleted meanwhile has no vector
    pairs, at = pairs[found], at[found]
    scores = np.multiply(matrix[at[:, 0]].astype(np.float64), matrix[at[:, 1]].astype(np.float64)).sum(axis=1).astype(np.float32)
    pairs, scores = pairs[scores >= threshold], scores[scores >= threshold]
    pairs, scores = _capped(pairs, scores, new)
    rows = [{"id": link_id(low, high), "a": low, "b": high, "score": float(score), "embedding": CONSTANT}
            for (low, high), score in zip(pairs.tolist(), scores.tolist())]
    known = set(known)
    return [row for row in rows if row["id"] not in known] if known else rows


def _capped(pairs: np.ndarray, scores: np.ndarray, new: np.ndarray) -> tuple:
    """The pairs kept: each new entity's `LINK_SEARCH` best (by cosine, then the other's id); a pair stays
    when either of its new ends keeps it (a stored end's cap was its own write's)."""
    ends = np.concatenate([pairs[:, 0], pairs[:, 1]])
    other = np.concatenate([pairs[:, 1], pairs[:, 0]])
    which = np.tile(np.arange(len(pairs)), 2)
    mine = np.isin(ends, new)
    ends, other, which = ends[mine], other[mine], which[mine]
    order = np.lexsort((other, -scores[which], ends))
    ends, which = ends[order], which[order]
    starts = np.flatnonzero(np.r_[True, ends[1:] != ends[:-1]]) if len(ends) else ends
    rank = np.arange(len(ends)) - np.repeat(starts, np.diff(np.r_[starts, len(ends)]))
    kept = np.unique(which[rank < LINK_SEARCH])
    return pairs[kept], scores[kept]
