"""Where a batch of the ingest goes, step by step, batch after batch (session 36).

Ingests the scale benchmark's synthetic corpus (`benchmarks/scale/corpus.py`, the default shape, hash
embedding of dim 32) into a fresh Milvus Lite store, 1,000 TextNodes a `GraphRAGTransform` call, and times
each batch whole and its steps: building and embedding the rows (`Writer._plan`), planning the adjacency
index's change (`plan_adjacency`: reading the touched rows, copying them, changing them), writing it
(`AdjacencyIndex.write`) and every write (`Writer._written`: index, passages, orphans). It also counts the index rows a batch writes
and the ids in them, to tell a cost per row from a cost per id (a hub rewritten whole every batch).

`--variants copy deepcopy` alternates the planner's row copies with `copy.deepcopy` of the same rows, as
they were before session 36, one whole ingest each, in one process.

    python -m benchmarks.ingest_steps --size 1e5 --db /tmp/steps.db [--variants copy deepcopy] [--rounds 2]
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

from benchmarks.scale.common import open_store, remove_db
from benchmarks.scale.corpus import make_corpus
from llama_index_graphrag_milvus import GraphRAGTransform
from llama_index_graphrag_milvus.ingest import adjacency as planner
from llama_index_graphrag_milvus.ingest import writes
from llama_index_graphrag_milvus.milvus import adjacency as index

RESULTS = Path(__file__).parent / "results"
COPIES: Dict[str, Callable[[Dict[int, Any]], Dict[int, Any]]] = {
    "copy": planner._copied,
    "deepcopy": copy.deepcopy,
}


class _Timer:
    """Wraps functions to add their wall time (and the index rows and ids written) to counters."""

    def __init__(self) -> None:
        self.seconds: collections.Counter = collections.Counter()
        self.counts: collections.Counter = collections.Counter()
        self._undo: List[Callable[[], None]] = []

    def wrap(self, owner: Any, name: str, key: str) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[key] += time.perf_counter() - start

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, original))

    def count_rows(self) -> None:
        original = index._bucketed

        def counted(rows, gone, key_of, key, had, lists, *rest):
            self.counts["index rows"] += 1
            self.counts["index ids"] += sum(len(values) for values in lists)
            return original(rows, gone, key_of, key, had, lists, *rest)

        index._bucketed = counted
        self._undo.append(lambda: setattr(index, "_bucketed", original))

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


def ingest(size: int, db: Path, variant: str, node_batch: int = 1000) -> Dict[str, Any]:
    """One whole ingest into a fresh store; each batch's seconds, step seconds and index rows."""
    corpus = make_corpus(size)
    timer = _Timer()
    timer.wrap(writes, "plan_adjacency", "plan_adjacency")
    timer.wrap(index.AdjacencyIndex, "write", "index.write")
    timer.wrap(writes.Writer, "_plan", "rows and embeddings")
    timer.wrap(writes.Writer, "_written", "all writes")
    timer.count_rows()
    original_copy, planner._copied = planner._copied, COPIES[variant]
    remove_db(db)
    store = open_store(db, overwrite=True, batch_size=256)
    batches = []
    try:
        transform = GraphRAGTransform(store=store, text_links=False)
        for start in range(0, corpus.n_passages, node_batch):
            stop = min(start + node_batch, corpus.n_passages)
            nodes = [corpus.node(p) for p in range(start, stop)]
            timer.seconds.clear()
            timer.counts.clear()
            began = time.perf_counter()
            transform(nodes)
            batches.append({
                "seconds": round(time.perf_counter() - began, 3),
                "relations": corpus.relations_stated_by(stop) - corpus.relations_stated_by(start),
                **{k: round(v, 3) for k, v in timer.seconds.items()}, **timer.counts,
            })
    finally:
        store.close()
        planner._copied = original_copy
        timer.undo()
        remove_db(db)
    total = sum(b["seconds"] for b in batches)
    steps = {k: round(sum(b.get(k, 0) for b in batches), 2) for k in ("plan_adjacency", "index.write", "rows and embeddings", "all writes")}
    return {"variant": variant, "size": size, "seconds": round(total, 2), "relations_per_s": round(size / total),
            "step_seconds": steps, "batches": batches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=1e5)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--variants", nargs="+", default=["copy"], choices=sorted(COPIES))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "ingest_steps.json")
    args = parser.parse_args()
    runs = []
    for _ in range(args.rounds):
        for variant in args.variants:
            runs.append(ingest(int(args.size), args.db, variant))
            print(json.dumps({k: v for k, v in runs[-1].items() if k != "batches"}), flush=True)
    args.out.write_text(json.dumps(runs, indent=1) + "\n")


if __name__ == "__main__":
    main()
