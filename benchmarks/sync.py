"""What `store.sync()` costs, on MuSiQue with its triples in Milvus Lite (hash embedding, dim 64).

- `sync()` when nothing changed: one read of the write generation.
- `sync()` after another store wrote one document: the caches built again from Milvus, as an open does.
  The other store is simulated as in `tests/test_sync.py` (Milvus Lite lets one store open a path): a
  writer on the same collections with caches of its own.
- For comparison, closing the store and opening it again without its snapshot (caches built), and the two log rows
  (`begin`, `end`) that every write adds around its rows.

    GRAPHRAG_DATA=$DATA python -m benchmarks.sync [--rounds 5]   # -> benchmarks/results/sync.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, List

from llama_index.core.schema import TextNode

from llama_index_graphrag_milvus import GraphRAGIndex, MilvusGraphStore
from llama_index_graphrag_milvus.backends.choice import open_backend
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.ingest.rows import checked
from llama_index_graphrag_milvus.ingest.writes import Writer

from benchmarks.devsets import RESULTS, data_dirs, write_result
from benchmarks.refresh import documents


def seconds(call: Callable[[], object], rounds: int) -> List[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


def measure(data: Path, db: Path, rounds: int) -> dict:
    open_store = lambda: MilvusGraphStore(uri=str(db), embed_model=HashEmbedding(dim=64), snapshot=False)  # noqa: E731
    store = open_store()
    GraphRAGIndex.from_documents(documents(data), store=store)
    graph, search = open_backend(store.collections, "memory", None, False, False)
    graph.ready()  # the other store's caches, built before its timed writes
    other = Writer(store.collections, graph, search, store.embed_model, 64, store.batch_size, store.synonym_threshold)
    unchanged = seconds(store.sync, rounds * 4)
    rebuilt, adds = [], []
    for i in range(rounds):
        node = TextNode(id_=f"new{i}", text=f"Visitor {i} went to Orsk.",
                        metadata={"triplets": [[f"Visitor {i}", "went to", "Orsk"]]})
        adds += seconds(lambda node=node: other.add(*checked([node], None)), 1)
        start = time.perf_counter()
        synced = store.sync()
        rebuilt.append(time.perf_counter() - start)
        if not synced:
            raise RuntimeError("sync() found nothing to catch up with after another store's write")
        assert store.backend.counts() == store.count()
    log_rows = seconds(lambda: store.collections.end(store.collections.begin()), rounds * 4)
    if not store.sync():  # the log rows just written are another store's to this one: caught up, then pruned
        raise RuntimeError("sync() missed the log rows written beside it")
    counts = store.count()
    reopen = []
    for _ in range(rounds):
        store.close()
        start = time.perf_counter()
        store = open_store()
        store.backend.ready()  # the caches are built when first used: the open's cost is there
        reopen.append(time.perf_counter() - start)
    store.close()
    ms = lambda xs: round(1000 * statistics.median(xs), 1)  # noqa: E731
    return {
        "rows": counts, "rounds": rounds,
        "sync_unchanged_ms_median": ms(unchanged),
        "sync_rebuild_ms_median": ms(rebuilt), "sync_rebuild_ms": [round(1000 * s, 1) for s in rebuilt],
        "reopen_without_snapshot_ms_median": ms(reopen), "reopen_ms": [round(1000 * s, 1) for s in reopen],
        "one_document_add_ms_median": ms(adds), "log_begin_end_ms_median": ms(log_rows),
        "sync_rebuild_over_reopen": round(statistics.median(rebuilt) / statistics.median(reopen), 2),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="the MuSiQue directory (default: $GRAPHRAG_DATA/musique)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=str(RESULTS / "sync.json"))
    args = parser.parse_args(argv)
    data = data_dirs([args.data] if args.data else None, names=("musique",))[0]
    with tempfile.TemporaryDirectory(prefix="graphrag-sync-") as tmp:
        result = measure(data, Path(tmp) / "sync.db", args.rounds)
    write_result(args.out, result)
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
