"""An in-memory copy of entity, relation and passage vectors, for local scoring on Milvus Lite.

Milvus Lite answers every call in tens of milliseconds, whatever is asked; a query touches a few hundred
known candidates whose similarity to the question is a gather and a dot product. Like the adjacency,
this copy is a cache: rebuilt from Milvus on open, kept current on every write, aligned with the
`GraphCache` positions. On a Milvus server the store leaves it off and asks Milvus instead.

Scoring given positions is always exact. A top-k search over the whole cache is exact up to
`EXACT_SEARCH_MAX_ROWS` rows; above that it probes an inverted-file index (`_Lists`: spherical k-means
centroids, rows grouped by nearest centroid), so that its cost grows with the square root of the rows,
not with the rows: at 10^6 relations a seed search scores ~2 % of them.
"""

from __future__ import annotations

import threading
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
from threadpoolctl import ThreadpoolController

_controller: Optional[ThreadpoolController] = None

#: Above this many rows, whole-cache top-k searches are approximate (inverted lists); below, exact.
EXACT_SEARCH_MAX_ROWS = 200_000
#: The same for threshold searches (`within`: synonym links, near duplicates that the lists never miss).
EXACT_WITHIN_MAX_ROWS = 50_000


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
        self._lists: Optional[_Lists] = None

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
        if n > EXACT_SEARCH_MAX_ROWS and len(queries) and k > 0:
            lists = self._index(vectors, n)
            found = []
            for query in queries:
                candidates = lists.probe(_unit(query), n)
                candidates = candidates[alive[candidates] & known[candidates]]
                found.append(_top(candidates, self.similarity(query, candidates), k))
            return found
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

    def within(
        self, queries: np.ndarray, threshold: float, k: int, alive: np.ndarray
    ) -> List[Tuple[np.ndarray, np.ndarray]]:
        """For each query, the (at most `k`) `alive` rows with cosine ≥ `threshold`, best first: a
        threshold instead of a top-k, so that a batch of queries costs a matrix product and a compare."""
        size = self._size
        vectors, known = self._vectors, self._known
        n = min(size, len(alive))
        queries = np.asarray(queries, dtype=np.float32).reshape(len(queries), -1)
        norms = np.linalg.norm(queries, axis=1, keepdims=True)
        unit = queries / np.where(norms == 0, 1, norms)
        live = alive[:n] & known[:n]
        if n <= EXACT_WITHIN_MAX_ROWS:
            hits = []
            for start in range(0, len(unit), 256):  # 256 queries × n scores at a time
                with _one_blas_thread():
                    scores = unit[start : start + 256] @ vectors[:n].T
                query, rows = np.nonzero((scores >= threshold) & live)
                hits.append((query + start, rows, scores[query, rows]))
        else:  # list by list: each list's rows against the queries that probe it
            lists = self._index(vectors, n)
            hits = []
            with _one_blas_thread():
                probed = np.argpartition(-(unit @ lists.centroids.T), lists.nprobe - 1, axis=1)[:, : lists.nprobe]
                by_list = np.argsort(probed.ravel(), kind="stable")
                bounds = np.searchsorted(probed.ravel()[by_list], np.arange(len(lists.centroids) + 1))
                tail = np.arange(len(lists.assignment), n)
                groups = [(np.arange(len(unit)), tail)] + [
                    (by_list[a:b] // lists.nprobe, lists.order[lists.starts[c] : lists.starts[c + 1]])
                    for c, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))
                    if b > a
                ]
                for queries_of, rows in groups:
                    rows = rows[live[rows]]
                    scores = unit[queries_of] @ vectors[rows].T
                    q, r = np.nonzero(scores >= threshold)
                    hits.append((queries_of[q], rows[r], scores[q, r]))
        query = np.concatenate([h[0] for h in hits])
        rows = np.concatenate([h[1] for h in hits])
        scores = np.concatenate([h[2] for h in hits])
        order = np.argsort(query, kind="stable")
        query, rows, scores = query[order], rows[order], scores[order]
        split = np.searchsorted(query, np.arange(len(unit) + 1))
        return [_top(rows[a:b], scores[a:b], k) for a, b in zip(split[:-1], split[1:])]

    def _index(self, vectors: np.ndarray, n: int) -> "_Lists":
        with self._lock:
            if self._lists is None or n >= 2 * self._lists.trained_on:
                self._lists = _Lists.train(vectors[:n])
            self._lists.cover(vectors, n)
            return self._lists

    @property
    def nbytes(self) -> int:
        lists = self._lists.nbytes if self._lists is not None else 0
        return int(self._vectors.nbytes + self._known.nbytes + lists)


class _Lists:
    """An inverted-file index over the first rows of a vector matrix: about sqrt(rows) spherical k-means
    centroids and the row positions grouped by nearest centroid. Rows appended after the last `cover`
    (the tail) are scanned exactly until they are many; then they are assigned to lists. Positions are
    never reused, so an assignment stays valid; deleted rows are filtered by the caller's mask."""

    NPROBE = 16  # lists probed per search: candidates grow as 16·sqrt(rows)

    def __init__(self, centroids: np.ndarray, trained_on: int) -> None:
        self.centroids = centroids
        self.trained_on = trained_on
        self.assignment = np.zeros(0, dtype=np.int32)  # row position -> list
        self.order = np.zeros(0, dtype=np.int64)  # positions grouped by list
        self.starts = np.zeros(len(centroids) + 1, dtype=np.int64)
        self.nprobe = min(self.NPROBE, len(centroids))

    @classmethod
    def train(cls, rows: np.ndarray, iterations: int = 8, seed: int = 0) -> "_Lists":
        n = len(rows)
        nlist = max(16, int(np.sqrt(n)))
        rng = np.random.default_rng(seed)
        sample = rows[np.sort(rng.choice(n, size=min(n, 40 * nlist), replace=False))]
        centroids = sample[rng.choice(len(sample), size=nlist, replace=False)].copy()
        for _ in range(iterations):
            nearest = _nearest(sample, centroids)
            sums = np.zeros_like(centroids)
            np.add.at(sums, nearest, sample)
            empty = np.bincount(nearest, minlength=nlist) == 0
            sums[empty] = sample[rng.choice(len(sample), size=int(empty.sum()))]  # restart empty lists
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            centroids = (sums / np.where(norms == 0, 1, norms)).astype(np.float32)
        return cls(centroids, trained_on=n)

    def cover(self, vectors: np.ndarray, n: int) -> None:
        """Assign rows up to `n` to lists, once the unassigned tail is a quarter of what is assigned."""
        done = len(self.assignment)
        if n - done <= max(10_000, done // 4):
            return
        self.assignment = np.concatenate([self.assignment, _nearest(vectors[done:n], self.centroids)])
        self.order = np.argsort(self.assignment, kind="stable").astype(np.int64)
        self.starts = np.searchsorted(self.assignment[self.order], np.arange(len(self.centroids) + 1))

    def probe(self, query: np.ndarray, n: int) -> np.ndarray:
        """Candidate positions for `query`: the rows of its `nprobe` nearest lists, and the tail."""
        with _one_blas_thread():
            scores = self.centroids @ query
        nearest = np.argpartition(-scores, self.nprobe - 1)[: self.nprobe]
        parts = [self.order[self.starts[c] : self.starts[c + 1]] for c in nearest.tolist()]
        parts.append(np.arange(len(self.assignment), n, dtype=np.int64))
        return np.concatenate(parts)

    @property
    def nbytes(self) -> int:
        return int(self.centroids.nbytes + self.assignment.nbytes + self.order.nbytes + self.starts.nbytes)


def _nearest(rows: np.ndarray, centroids: np.ndarray, block: int = 65_536) -> np.ndarray:
    """The index of the nearest centroid (largest dot product) of each row."""
    out = np.empty(len(rows), dtype=np.int32)
    for start in range(0, len(rows), block):
        out[start : start + block] = np.argmax(rows[start : start + block] @ centroids.T, axis=1)
    return out


def _top(positions: np.ndarray, scores: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """The `k` best (position, score) pairs, best first."""
    if len(positions) > k:
        keep = np.argpartition(-scores, k - 1)[:k]
        positions, scores = positions[keep], scores[keep]
    order = np.argsort(-scores, kind="stable")
    return positions[order].astype(np.int64), scores[order].astype(np.float64)


def _unit(vector: Sequence[float]) -> np.ndarray:
    q = np.asarray(vector, dtype=np.float32)
    norm = np.linalg.norm(q)
    return q / norm if norm else q
