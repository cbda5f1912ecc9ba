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
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Dict
from unittest import mock

from benchmarks.scale.common import Stopwatch, open_store, remove_db
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


#: The steps timed: (owner, attribute, name).
STEPS = (
    (writes, "plan_adjacency", "plan_adjacency"),
    (index.AdjacencyIndex, "write", "index.write"),
    (writes.Writer, "_plan", "rows and embeddings"),
    (writes.Writer, "_written", "all writes"),
)


def _instrumented(stack: ExitStack, watch: Stopwatch, counts: collections.Counter, variant: str) -> None:
    """Time the steps into `watch`, count the index rows and ids written into `counts`, and copy the
    planner's rows as `variant` does, until `stack` closes."""
    for owner, attribute, name in STEPS:
        stack.enter_context(mock.patch.object(owner, attribute, watch.wrap(name, getattr(owner, attribute))))
    bucketed = index._bucketed

    def counted(rows, gone, key_of, key, had, lists, *rest):
        counts["index rows"] += 1
        counts["index ids"] += sum(len(values) for values in lists)
        return bucketed(rows, gone, key_of, key, had, lists, *rest)

    stack.enter_context(mock.patch.object(index, "_bucketed", counted))
    stack.enter_context(mock.patch.object(planner, "_copied", COPIES[variant]))


def ingest(size: int, db: Path, variant: str, node_batch: int = 1000) -> Dict[str, Any]:
    """One whole ingest into a fresh store; each batch's seconds, step seconds and index rows."""
    corpus = make_corpus(size)
    batches = []
    remove_db(db)
    with ExitStack() as stack:
        watch, counts = Stopwatch(), collections.Counter()
        _instrumented(stack, watch, counts, variant)
        store = open_store(db, overwrite=True, batch_size=256)
        stack.callback(remove_db, db)
        stack.callback(store.close)
        transform = GraphRAGTransform(store=store, text_links=False)
        for start in range(0, corpus.n_passages, node_batch):
            stop = min(start + node_batch, corpus.n_passages)
            nodes = [corpus.node(p) for p in range(start, stop)]
            watch.seconds.clear()
            counts.clear()
            began = time.perf_counter()
            transform(nodes)
            batches.append({
                "seconds": round(time.perf_counter() - began, 3),
                "relations": corpus.relations_stated_by(stop) - corpus.relations_stated_by(start),
                **{k: round(v, 3) for k, v in watch.seconds.items()}, **counts,
            })
    total = sum(b["seconds"] for b in batches)
    steps = {name: round(sum(b.get(name, 0) for b in batches), 2) for _, _, name in STEPS}
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
