"""An in-memory copy of entity, relation and passage vectors, for local scoring on Milvus Lite.

Milvus Lite answers every call in tens of milliseconds, whatever is asked; a query touches a few hundred
known candidates whose similarity to the question is a gather and a dot product. Like the adjacency,
this copy is a cache: rebuilt from Milvus on open, kept current on every write, aligned with the
`GraphCache` positions. On a Milvus server the store leaves it off and asks Milvus instead.

Scoring given positions is always exact. A search over the whole cache is exact while rows × dimension
is at most `EXACT_SEARCH_MAX_VALUES` (`top_k`) or `EXACT_WITHIN_MAX_VALUES` (`within`): a numpy matrix
product on one thread. Above the limits it asks a faiss inverted-file index (about sqrt(rows) k-means
lists, 8-bit codes, inner product) for candidates from the lists nearest the query, then scores them
exactly from the float32 copy. The index is built on first use and extended with the rows written since
the last search; its lists are retrained when the rows double.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from threadpoolctl import ThreadpoolController

#: Top-k searches over more than this many values (rows × dimension) are approximate (a faiss index);
#: up to it, exact. An exact search reads every value once; the limit keeps that to a few milliseconds,
#: so that seeds are exact wherever exactness is cheap (an approximate index can miss a seed).
EXACT_SEARCH_MAX_VALUES = 1 << 24
#: The same for threshold searches (`within`, batches of new entities at ingest), lower: their exact
#: product also compares every score.
EXACT_WITHIN_MAX_VALUES = 1 << 23


class VectorCache:
    """Unit vectors by position, in a growable float32 matrix. Which positions are live is the
    adjacency's business: searches take its mask. Safe to search from several threads while another
    writes; rows written after the index was built (appended, or rewritten in place) are searched from
    the next search on."""

    def __init__(self, dim: int) -> None:
        self._lock = threading.Lock()  # the arrays' growth and every change to the index
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._known = np.zeros(0, dtype=bool)
        self._size = 0
        self._index: Optional[_Index] = None  # built on first use

    def put(self, positions: Sequence[int], vectors: Sequence[Sequence[float]], unit: bool = False) -> None:
        """Rows at positions, made unit length (`unit`: they are already, as `rows` gave them)."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return
        rows = np.asarray(vectors, dtype=np.float32).reshape(len(positions), -1)
        rows = rows if unit else unit_rows(rows)
        with self._lock:
            needed = int(positions.max()) + 1
            if needed > len(self._vectors):
                capacity = max(needed, 2 * len(self._vectors), 1024)
                grown = np.zeros((capacity, self._vectors.shape[1]), dtype=np.float32)
                grown[: self._size] = self._vectors[: self._size]
                known = np.zeros(capacity, dtype=bool)
                known[: self._size] = self._known[: self._size]
                self._vectors, self._known = grown, known
            index = self._index
            if index is not None:  # rows the index already covers: re-add the new or changed ones
                below = positions < index.covered
                old = positions[below]
                changed = ~self._known[old] | (self._vectors[old] != rows[below]).any(axis=1)
                index.stale.append(old[changed])
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
        """Cosine of `query` with the rows at `positions` (0 for rows not cached). Always exact."""
        positions = np.asarray(positions, dtype=np.int64)
        q = _unit(query)
        found = self.has(positions)
        out = np.zeros(len(positions), dtype=np.float64)
        out[found] = cosines(self._vectors[positions[found]], q)
        return out

    def top_k(self, query: Sequence[float], k: int, alive: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Positions and cosines of the `k` rows nearest to `query` among the `alive` ones, best first.
        Exact up to `EXACT_SEARCH_MAX_VALUES`; above, the candidates are approximate (a true
        neighbour outside the lists probed can be missed) but the cosines returned are exact."""
        return self.top_k_many([query], k, alive)[0]

    def top_k_many(
        self, queries: Sequence[Sequence[float]], k: int, alive: np.ndarray
    ) -> List[Tuple[np.ndarray, np.ndarray]]:
        """`top_k` for several queries at once."""
        size = self._size  # first: the arrays read next are at least this large
        vectors, known = self._vectors, self._known
        n = min(size, len(alive))
        if k <= 0 or not len(queries):
            return [(np.zeros(0, dtype=np.int64), np.zeros(0)) for _ in queries]
        unit = np.stack([_unit(q) for q in queries])
        if n * vectors.shape[1] > EXACT_SEARCH_MAX_VALUES:
            return self._search(unit, k, None, alive, n)
        live = alive[:n] & known[:n]
        k = min(k, int(live.sum()))
        if k <= 0:
            return [(np.zeros(0, dtype=np.int64), np.zeros(0)) for _ in queries]
        return self._product(unit, k, live, n)

    def _product(self, unit: np.ndarray, k: int, live: np.ndarray, n: int) -> List[Tuple[np.ndarray, np.ndarray]]:
        """The exact `k` best `live` rows among the first `n`, by a float32 product on one thread."""
        vectors = self._vectors  # at least n rows: n was read from the size, which arrays never lag
        with _one_blas_thread():
            scores = np.dot(unit, vectors[:n].T)
        scores[:, ~live] = -np.inf
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        # the matrix product picks the rows; their cosines are `cosines`', which every search returns
        return [_top(cols, cosines(vectors[cols], q), k) for q, cols in zip(unit, top)]

    def within(
        self, queries: np.ndarray, threshold: float, k: int, alive: np.ndarray
    ) -> List[Tuple[np.ndarray, np.ndarray]]:
        """For each query, the (at most `k`) `alive` rows with cosine ≥ `threshold`, best first, with
        exact cosines. Up to `EXACT_WITHIN_MAX_VALUES` every such row is found (a matrix product and
        a compare per batch of queries); above, candidates come from the index as in `top_k`, so a row
        past the threshold can be missed when it falls outside the lists its query probes."""
        size = self._size
        vectors, known = self._vectors, self._known
        n = min(size, len(alive))
        unit = unit_rows(np.asarray(queries, dtype=np.float32).reshape(len(queries), -1))
        if k <= 0 or not len(unit):
            return [(np.zeros(0, dtype=np.int64), np.zeros(0)) for _ in unit]
        if n * vectors.shape[1] > EXACT_WITHIN_MAX_VALUES:
            return self._search(unit, k, threshold, alive, n)
        live = alive[:n] & known[:n]
        hits = []
        for start in range(0, len(unit), 256):  # 256 queries × n scores at a time
            with _one_blas_thread():
                scores = unit[start : start + 256] @ vectors[:n].T
            query, rows = np.nonzero((scores >= threshold) & live)
            hits.append((query + start, rows, scores[query, rows]))
        query = np.concatenate([h[0] for h in hits])
        rows = np.concatenate([h[1] for h in hits])
        scores = np.concatenate([h[2] for h in hits])
        split = np.searchsorted(query, np.arange(len(unit) + 1))  # np.nonzero is row-major: sorted by query
        return [_top(rows[a:b], scores[a:b], k) for a, b in zip(split[:-1], split[1:])]

    def _search(
        self, unit: np.ndarray, k: int, threshold: Optional[float], alive: np.ndarray, n: int
    ) -> List[Tuple[np.ndarray, np.ndarray]]:
        """Candidates from the index among the first `n` rows, rescored exactly: the `k` best, or the
        `k` best at or above `threshold`."""
        index = self._current(n)
        _, candidates = index.search(unit, k + max(k, 16), alive[:n])  # over-fetch: 8-bit codes misorder ties
        found = []
        for start in range(0, len(unit), 256):
            ids = candidates[start : start + 256]
            scores = np.stack([cosines(self._vectors[np.maximum(row, 0)], q) for row, q in zip(ids, unit[start : start + 256])])
            keep = ids >= 0
            if threshold is not None:
                keep &= scores >= threshold
            found.extend(_top(row[ok], score[ok], k) for row, score, ok in zip(ids, scores, keep))
        return found

    def _current(self, n: int) -> "_Index":
        """The index, covering at least the first `n` rows."""
        with self._lock:
            index = self._index
            if index is None or n >= 2 * index.trained_on:  # (re)train on all rows
                index = _Index.train(self._vectors, np.flatnonzero(self._known[: self._size]))
            index.extend(self._vectors, self._known, self._size)
            self._index = index
            return index

    @property
    def nbytes(self) -> int:
        index = self._index.nbytes if self._index is not None else 0
        return int(self._vectors.nbytes + self._known.nbytes + index)


class _Index:
    """A faiss IVF index (inner product, 8-bit scalar-quantized codes) over rows of a `VectorCache`, with
    row positions as ids. Changes (`extend`) exclude searches, searches run concurrently."""

    def __init__(self, index: Any, trained_on: int) -> None:
        self.index = index
        self.trained_on = trained_on
        self.covered = 0  # rows [0, covered) are in the index, but for those in `stale`
        self.stale: List[np.ndarray] = []  # positions below `covered` written since: to (re-)add
        self.nprobe = min(index.nlist, max(16, index.nlist // 32))
        self._readers = 0
        self._changing = threading.Condition()

    @classmethod
    def train(cls, vectors: np.ndarray, positions: np.ndarray, seed: int = 0) -> "_Index":
        """An empty index whose lists are k-means clusters of (a sample of) the rows at `positions`."""
        faiss = _faiss()
        n, dim = len(positions), vectors.shape[1]
        nlist = max(1, min(max(16, int(np.sqrt(n))), n // 39))  # faiss wants 39 training rows a list
        rng = np.random.default_rng(seed)
        sample = vectors[np.sort(rng.choice(positions, size=min(n, 40 * nlist), replace=False))]
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(
            quantizer, dim, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        index.cp.niter, index.cp.seed = 8, seed
        _faiss_threads(len(sample) * nlist * index.cp.niter)
        index.train(sample)
        return cls(index, trained_on=n)

    def extend(self, vectors: np.ndarray, known: np.ndarray, size: int) -> None:
        """Add the known rows in [covered, size) and the stale ones (caller holds the cache's lock)."""
        stale = np.unique(np.concatenate(self.stale)) if self.stale else np.zeros(0, dtype=np.int64)
        fresh = np.flatnonzero(known[self.covered : size]) + self.covered
        if not len(stale) and not len(fresh) and size <= self.covered:
            return
        ids = np.concatenate([stale, fresh]).astype(np.int64)
        faiss = _faiss()
        with self._changing:
            self._changing.wait_for(lambda: self._readers == 0)
            _faiss_threads(len(ids) * self.index.nlist)
            if len(stale):  # absent ids are ignored: a stale row may be new
                self.index.remove_ids(faiss.IDSelectorBatch(len(stale), faiss.swig_ptr(stale)))
            for start in range(0, len(ids), 65_536):  # a bounded copy of the rows at a time
                chunk = ids[start : start + 65_536]
                self.index.add_with_ids(vectors[chunk], chunk)
            self.covered, self.stale = max(self.covered, size), []

    def search(self, unit: np.ndarray, fetch: int, alive: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Up to `fetch` candidates per query, `alive` ones only, from the `nprobe` lists nearest each
        query: their scores in the index, and their positions (-1 pads)."""
        faiss = _faiss()
        bits = None
        if not alive.all():
            bits = np.packbits(alive, bitorder="little")
        with self._changing:
            self._readers += 1
        try:
            params = faiss.SearchParametersIVF(nprobe=self.nprobe)
            if bits is not None:
                params.sel = faiss.IDSelectorBitmap(len(bits), faiss.swig_ptr(bits))
            _faiss_threads(int(len(unit) * self.nprobe / self.index.nlist * self.index.ntotal))
            scores, ids = self.index.search(np.ascontiguousarray(unit, dtype=np.float32), fetch, params=params)
        finally:
            with self._changing:
                self._readers -= 1
                self._changing.notify_all()
        if bits is None:  # every cached row is indexed: those past the caller's mask are not its rows
            ids[ids >= len(alive)] = -1
        return scores, ids

    @property
    def nbytes(self) -> int:
        index = self.index
        lists = index.ntotal * (index.code_size + 8)  # a code and an id per row
        return int(lists + index.nlist * index.d * 4 + 2 * index.d * 4)  # + centroids, quantizer ranges


_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_faiss_module: Any = None


def _faiss() -> Any:
    """faiss, imported on first use: only caches above the exact limits need it."""
    global _faiss_module
    if _faiss_module is None:
        import faiss

        _faiss_module = faiss
    return _faiss_module


def _faiss_threads(work: int) -> None:
    """Set faiss's OpenMP thread count for a call of about `work` dot products."""
    # libgomp keeps the count per calling thread, so it is set before each faiss call, in the thread
    # making it: one thread for a single query or a small add (less work than waking OpenMP workers,
    # which then spin-wait and steal the other core on a small shared machine), every core for bulk
    # work (training, large adds, large batches of queries).
    _faiss().omp_set_num_threads(1 if work < 1 << 20 else _CORES)


_blas_lock = threading.Lock()
_blas_users = 0
_blas_limiter: Any = None
_blas_controller: Optional[ThreadpoolController] = None


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """A context in which numpy's BLAS runs on one thread: for products this small, waking a second
    thread costs more than it saves, worst when the other core is busy. The limit is process-wide, so
    it is reference-counted: set when the first thread enters, restored when the last one leaves."""
    global _blas_users, _blas_limiter, _blas_controller
    with _blas_lock:
        if _blas_users == 0:
            if _blas_controller is None:  # faiss's own BLAS follows its OpenMP count: leave it alone
                blas = ThreadpoolController().select(user_api="blas")
                paths = [lib["filepath"] for lib in blas.info() if "faiss" not in os.path.basename(os.path.dirname(lib["filepath"]))]
                _blas_controller = blas.select(filepath=paths)
            _blas_limiter = _blas_controller.limit(limits=1)
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                _blas_limiter.restore_original_limits()
                _blas_limiter = None


def _top(positions: np.ndarray, scores: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """The `k` best (position, score) pairs, best first."""
    if len(positions) > k:
        keep = np.argpartition(-scores, k - 1)[:k]
        positions, scores = positions[keep], scores[keep]
    order = np.argsort(-scores, kind="stable")
    return positions[order].astype(np.int64), scores[order].astype(np.float64)


def _unit(vector: Sequence[float]) -> np.ndarray:
    return unit_rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]


def cosines(unit: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each unit row's dot product with the unit `query`, the same number for a row whatever the other
    rows scored with it. (BLAS's matrix-vector product is not: a row's last bit depends on its place in
    the batch, and two backends scoring the same rows in other batches then order exact ties otherwise.)"""
    return np.einsum("ij,j->i", unit, query)


def unit_rows(rows: np.ndarray) -> np.ndarray:
    """Each row divided by its length (zero rows stay zero)."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1, norms)
