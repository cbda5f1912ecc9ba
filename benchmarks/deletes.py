"""Deleting documents, on MuSiQue with its triples in Milvus Lite: a tenth of the documents deleted from
a store answers as a store built without them, in both adjacency modes, and after `store.compact()`
holds its rows; what the deletes and the compaction cost beside building the smaller store.

    GRAPHRAG_DATA=$DATA python -m benchmarks.deletes [--every 10]   # -> benchmarks/results/deletes.json

The full store and the store without every `--every`-th document are built the same way
(`GraphRAGTransform`, 100 documents a call; the tests' `SpreadEmbedding`, dim 64, whose cosines do not
tie). The full store is copied, and each copy opened in one adjacency mode ("memory", "milvus"); there
the documents are deleted one `store.delete(ref_doc_id)` at a time (what `GraphRAGIndex.delete_ref_doc`
calls; on a third copy, memory mode, all their passages in one `store.delete_passages` call), the top 10 of every dev question (the default retriever, no LLM) compared with the smaller
store's in the same mode, then `compact()` run and the rows of every fact collection compared (names
case-folded) with the smaller store's, and the answers again. Times are seconds of one run on a shared
machine: read them as ratios to the build of the smaller store, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

from benchmarks import server as _server  # noqa: F401  (puts tests/ on sys.path)
from benchmarks.devsets import RESULTS, data_dirs, write_result

from conftest import SpreadEmbedding  # noqa: E402  (tests/conftest.py)
from facts import FACTS, answers, rows  # noqa: E402  (tests/facts.py: what the tests compare stores by)

DIM = 64
MODES = ("memory", "milvus")


def open_store(path: Path, adjacency: str = "memory") -> Any:
    from llama_index_graphrag_milvus import MilvusGraphStore

    return MilvusGraphStore(uri=str(path), embed_model=SpreadEmbedding(dim=DIM), collection_prefix="deletes",
                            adjacency=adjacency, snapshot=False)


def build(path: Path, nodes: List[Any], chunk: int) -> float:
    from llama_index_graphrag_milvus import GraphRAGTransform
    from llama_index_graphrag_milvus.schema import chunked

    store = open_store(path)
    try:
        start = time.perf_counter()
        transform = GraphRAGTransform(store=store)
        for batch in chunked(nodes, chunk):
            transform(list(batch))
        store.flush()
        return time.perf_counter() - start
    finally:
        store.close()


def folded(found: Dict[str, Dict[Any, Dict[str, Any]]]) -> Dict[str, Dict[Any, Dict[str, Any]]]:
    """Names case-folded: which spelling of a name is written first depends on the order of the documents."""
    for kind in ("entities", "relations"):
        for row in found[kind].values():
            for name in ("name", "subject", "predicate", "object"):
                if name in row:
                    row[name] = row[name].casefold()
    return found


def differing(a: Dict[str, Dict[Any, Any]], b: Dict[str, Dict[Any, Any]]) -> Dict[str, int]:
    return {kind: len(set(a[kind]) ^ set(b[kind])) + sum(a[kind][i] != b[kind][i] for i in set(a[kind]) & set(b[kind]))
            for kind in a}


def same(x: List[Any], y: List[Any]) -> str:
    return f"{sum(a == b for a, b in zip(x, y))} of {len(y)}"


def measure(data: Path, root: Path, every: int, chunk: int) -> Dict[str, Any]:
    from llama_index_graphrag_milvus.bench.evaluation import load_dataset

    dataset = load_dataset(data)
    questions = [q["question"] for q in dataset.questions]
    gone = sorted({node.ref_doc_id for node in dataset.nodes[::every]})
    kept = [node for node in dataset.nodes if node.ref_doc_id not in set(gone)]
    full, without = root / "full.db", root / "without.db"
    build_full = build(full, dataset.nodes, chunk)
    build_without = build(without, kept, chunk)
    print(f"built: full {build_full:.1f} s, without {build_without:.1f} s", file=sys.stderr, flush=True)
    reference = open_store(without)
    reference_rows, reference_counts = folded(rows(reference, FACTS)), reference.count()
    reference.close()
    report: Dict[str, Any] = {
        "dataset": dataset.name, "documents": len(dataset.nodes), "deleted_documents": len(gone),
        "questions": len(questions), "where": "Milvus Lite", "embedding": f"SpreadEmbedding(dim={DIM})",
        "python": platform.python_version(), "machine": f"{platform.machine()}, {os.cpu_count()} cpus (shared: read ratios)",
        "build_full_s": round(build_full, 1), "build_without_s": round(build_without, 1),
        "counts_without": reference_counts, "modes": {},
    }
    for variant in (*MODES, "memory_one_call"):
        mode, one_call = variant.split("_")[0], variant.endswith("_one_call")
        copy = root / f"full_{variant}.db"
        shutil.copytree(full, copy) if full.is_dir() else shutil.copy2(full, copy)
        reference = open_store(without, mode)
        want = answers(reference, questions, top_k=10)
        reference.close()
        store = open_store(copy, mode)
        try:
            answers(store, questions[:1], top_k=10)  # opened and warm, as a serving store is
            start = time.perf_counter()
            if one_call:  # the documents' passages found in one query, deleted in one call
                store.delete_passages([pid for pids in store.documents_passage_ids(gone).values() for pid in pids])
            else:
                for doc in gone:
                    store.delete(doc)
            delete_s = time.perf_counter() - start
            got = answers(store, questions, top_k=10)
            before = store.count()
            start = time.perf_counter()
            compacted = store.compact()
            compact_s = time.perf_counter() - start
            after = store.count()
            after_rows = folded(rows(store, FACTS))
            got_after = answers(store, questions, top_k=10)
        finally:
            store.close()
        entry = {
            "adjacency": mode, "deleted_by": "store.delete_passages(ids), once" if one_call else "store.delete(ref_doc_id), each",
            "delete_s": round(delete_s, 2), "delete_ms_per_document": round(1000 * delete_s / len(gone), 1),
            "compact_s": round(compact_s, 2),
            "delete_over_build_without": round(delete_s / build_without, 3),
            "compact_over_build_without": round(compact_s / build_without, 3),
            "top10_equal_after_delete": same(got, want), "all_top10_equal_after_delete": got == want,
            "counts_after_delete": before, "compact_deleted": compacted, "counts_after_compact": after,
            "counts_equal_after_compact": after == reference_counts,
            "rows_equal_after_compact": after_rows == reference_rows,
            "rows_differing_after_compact": differing(after_rows, reference_rows),
            "top10_equal_after_compact": same(got_after, want), "all_top10_equal_after_compact": got_after == want,
        }
        report["modes"][variant] = entry
        print(f"{variant}: delete {entry['delete_s']} s ({entry['delete_ms_per_document']} ms a document), compact "
              f"{entry['compact_s']} s; top 10 equal {entry['top10_equal_after_delete']}, after compact "
              f"{entry['top10_equal_after_compact']}; counts equal {entry['counts_equal_after_compact']}, rows equal "
              f"{entry['rows_equal_after_compact']}", file=sys.stderr, flush=True)
    return report


def main(argv: List[str] | None = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="the MuSiQue directory (default: $GRAPHRAG_DATA/musique)")
    parser.add_argument("--every", type=int, default=10, help="delete every N-th document (10: a tenth)")
    parser.add_argument("--chunk", type=int, default=100, help="documents a transform call")
    parser.add_argument("--out", default=str(RESULTS / "deletes.json"))
    args = parser.parse_args(argv)
    data = data_dirs([args.data] if args.data else None, names=("musique",))[0]
    with tempfile.TemporaryDirectory(prefix="graphrag-deletes-") as tmp:
        report = measure(data, Path(tmp), args.every, args.chunk)
    report["command"] = "python -m benchmarks.deletes" + (f" --every {args.every}" if args.every != 10 else "")
    write_result(args.out, report)
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
