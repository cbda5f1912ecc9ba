"""An in-memory copy of relation and passage vectors, for exact local scoring on Milvus Lite.

Milvus Lite answers every call in tens of milliseconds, whatever is asked; a query touches a few hundred
known candidates whose similarity to the question is a gather and a dot product. Like the adjacency,
this copy is a cache: rebuilt from Milvus on open, kept current on every write, aligned with the
`GraphCache` positions. On a Milvus server the store leaves it off and asks Milvus instead.
"""

from __future__ import annotations

import threading
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
from threadpoolctl import ThreadpoolController

_controller: Optional[ThreadpoolController] = None


def _one_blas_thread() -> Any:
    """A context in which BLAS runs on one thread: for products this small, waking a second thread
    costs more than it saves (5× slower when the other core is busy, measured here)."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")


class VectorCache:
    """Unit vectors by position, in a growable float32 matrix. Which positions are live is the
    adjacency's business: searches take its mask."""

    def __init__(self, dim: int) -> None:
        self._lock = threading.Lock()
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._known = np.zeros(0, dtype=bool)
        self._size = 0

    def put(self, positions: Sequence[int], vectors: Sequence[Sequence[float]]) -> None:
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return
        rows = np.asarray(vectors, dtype=np.float32).reshape(len(positions), -1)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        rows = rows / np.where(norms == 0, 1, norms)
        with self._lock:
            needed = int(positions.max()) + 1
            if needed > len(self._vectors):
                capacity = max(needed, 2 * len(self._vectors), 1024)
                grown = np.zeros((capacity, self._vectors.shape[1]), dtype=np.float32)
                grown[: self._size] = self._vectors[: self._size]
                known = np.zeros(capacity, dtype=bool)
                known[: self._size] = self._known[: self._size]
                self._vectors, self._known = grown, known
            self._vectors[positions] = rows
            self._known[positions] = True
            self._size = max(self._size, needed)

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """The unit vectors at `positions` (zeros where none is cached)."""
        positions = np.asarray(positions, dtype=np.int64)
        out = np.zeros((len(positions), self._vectors.shape[1]), dtype=np.float32)
        found = self.has(positions)
        out[found] = self._vectors[positions[found]]
        return out

    def has(self, positions: np.ndarray) -> np.ndarray:
        size, known = self._size, self._known  # size first: arrays only ever grow after it
        positions = np.asarray(positions, dtype=np.int64)
        inside = positions < size
        found = np.zeros(len(positions), dtype=bool)
        found[inside] = known[positions[inside]]
        return found

    def similarity(self, query: Sequence[float], positions: np.ndarray) -> np.ndarray:
        """Cosine of `query` with the rows at `positions` (0 for rows not cached)."""
        positions = np.asarray(positions, dtype=np.int64)
        q = _unit(query)
        found = self.has(positions)
        out = np.zeros(len(positions), dtype=np.float64)
        with _one_blas_thread():
            out[found] = np.dot(self._vectors[positions[found]], q)
        return out

    def top_k(self, query: Sequence[float], k: int, alive: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Positions and cosines of the `k` rows nearest to `query` among the `alive` ones, best first
        (exact)."""
        return self.top_k_many([query], k, alive)[0]

    def top_k_many(
        self, queries: Sequence[Sequence[float]], k: int, alive: np.ndarray
    ) -> List[Tuple[np.ndarray, np.ndarray]]:
        """`top_k` for several queries with one matrix product."""
        size = self._size  # first: the arrays read next are at least this large
        vectors, known = self._vectors, self._known
        n = min(size, len(alive))
        live = alive[:n] & known[:n]
        k = min(k, int(live.sum()))
        if k <= 0 or not len(queries):
            return [(np.zeros(0, dtype=np.int64), np.zeros(0)) for _ in queries]
        with _one_blas_thread():
            scores = np.dot(np.stack([_unit(q) for q in queries]), vectors[:n].T)
        scores[:, ~live] = -np.inf
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        found = []
        for row, cols in zip(scores, top):
            cols = cols[np.argsort(-row[cols], kind="stable")]
            found.append((cols.astype(np.int64), row[cols].astype(np.float64)))
        return found

    @property
    def nbytes(self) -> int:
        return int(self._vectors.nbytes + self._known.nbytes)


def _unit(vector: Sequence[float]) -> np.ndarray:
    q = np.asarray(vector, dtype=np.float32)
    norm = np.linalg.norm(q)
    return q / norm if norm else q
