"""What every part of the benchmark shares: the store it opens, timers, percentiles, logging."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence

import numpy as np
from llama_index.core.bridge.pydantic import PrivateAttr

from llama_index_graphrag_milvus import MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding

DIM = 32

#: Extra MilvusGraphStore arguments for every store opened (set from the command line).
STORE_KWARGS: Dict[str, Any] = {}


class Stopwatch:
    """Accumulated seconds and call counts by name."""

    def __init__(self) -> None:
        self.seconds: Dict[str, float] = defaultdict(float)
        self.calls: Dict[str, int] = defaultdict(int)

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1

        return timed


class TimedHashEmbedding(HashEmbedding):
    """The benchmark's embedder, timing `get_text_embedding_batch` (what the store calls) as "embed"."""

    _watch: Stopwatch = PrivateAttr(default_factory=Stopwatch)

    def __init__(self, watch: Stopwatch, dim: int = DIM) -> None:
        super().__init__(dim=dim)
        self._watch = watch

    def get_text_embedding_batch(self, texts: List[str], **kwargs: Any) -> List[List[float]]:
        return self._watch.wrap("embed", super().get_text_embedding_batch)(texts, **kwargs)


def open_store(
    path: Path, cls: type = MilvusGraphStore, embed_model: Any = None, **kwargs: Any
) -> MilvusGraphStore:
    """A store on the Milvus Lite file `path` with the benchmark's embedder and the command line's settings."""
    return cls(
        uri=str(path), embed_model=embed_model or HashEmbedding(dim=DIM), dim=DIM, **STORE_KWARGS, **kwargs
    )


def query_embedding(text: str) -> List[float]:
    return HashEmbedding(dim=DIM).get_query_embedding(text)


def seconds(fn: Callable[[], Any]) -> float:
    """Wall seconds of one call."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def percentiles(values: Sequence[float], scale: float = 1.0, digits: int = 3) -> Dict[str, float]:
    arr = np.asarray(values, dtype=np.float64) * scale
    return {
        "p50": round(float(np.percentile(arr, 50)), digits),
        "p95": round(float(np.percentile(arr, 95)), digits),
        "mean": round(float(arr.mean()), digits),
        "max": round(float(arr.max()), digits),
    }


def fmt_size(n: int) -> str:
    exp = int(round(math.log10(n)))
    return f"1e{exp}" if 10**exp == n else str(n)


def remove_db(path: Path) -> None:
    """A Milvus Lite database file and its directories, if any."""
    import shutil

    for p in (path, path.parent / f"{path.name}.graphrag-cache"):
        shutil.rmtree(p, ignore_errors=True)
        if p.exists():
            p.unlink()


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)
