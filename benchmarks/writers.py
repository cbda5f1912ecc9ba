"""Parallel writers on a Milvus 2.3.5 server: N = 1, 2, 4 processes open one new store at once and each
writes its share of MuSiQue with its triples (the corpus split by document, the entities shared), as
`tests/milvus_server.py`'s `writers_scenario` does on the bundled sample, here on the whole dev set.

    GRAPHRAG_DATA=$DATA python -m benchmarks.writers [--counts 1,2,4]   # -> benchmarks/results/writers.json

Runs inside a private network namespace on a fresh server (`benchmarks/server.py`). The embedding is the
tests' `SpreadEmbedding` (dim 64, hashed words without tied cosines) and the index FLAT, so that two
stores with the same rows give the same answers. For each N: whether every process exited cleanly, the
rows of every fact collection against the one-writer store's (names compared case-folded: which spelling
of a shared name lands first is a race), every question's top 10 (the default retriever, no LLM) against
the one-writer store's, and the throughput, relations and documents a second, from the moment the
processes are released at once (each ready, its data loaded) until the last has closed its store (the
opening of the new store, which creates its collections, included; also given without it, from the
last open to the last close). Then
`IngestionPipeline(transformations=[GraphRAGTransform(store)]).run(num_workers=2)` against
`num_workers=1`: the same rows and answers, and the seconds of each. The machine is shared: compare the
throughputs of one run, not across runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

from benchmarks import server as milvus_server  # puts tests/ on sys.path
from benchmarks.devsets import RESULTS, data_dirs, write_result

from conftest import SpreadEmbedding  # noqa: E402  (tests/conftest.py: the embedding the writer tests use)
from facts import FACTS, answers, rows  # noqa: E402  (tests/facts.py: what the tests compare stores by)

DIM = 64


def open_store(uri: str, prefix: str) -> Any:
    """The store as `writers_scenario` opens it: SpreadEmbedding (dim 64), FLAT."""
    from llama_index_graphrag_milvus import MilvusGraphStore

    return MilvusGraphStore(uri=uri, embed_model=SpreadEmbedding(dim=DIM), collection_prefix=prefix,
                            index_config={"index_type": "FLAT"})


def load(data: Path) -> Any:
    from llama_index_graphrag_milvus.bench.evaluation import load_dataset

    return load_dataset(data)


# a writer process ---------------------------------------------------------------------------------
def writer(part: int, parts: int, prefix: str, uri: str, data: str, chunk: int, go: str) -> None:
    """Write documents `part::parts` through `GraphRAGTransform`, `chunk` a call, once `go` exists."""
    from llama_index_graphrag_milvus import GraphRAGTransform
    from llama_index_graphrag_milvus.schema import chunked

    nodes = load(Path(data)).nodes[part::parts]
    print("READY", flush=True)
    while not os.path.exists(go):
        time.sleep(0.005)
    start = time.time()
    store = open_store(uri, prefix)
    opened = time.time()
    transform = GraphRAGTransform(store=store)
    for batch in chunked(nodes, chunk):
        transform(list(batch))
    store.close()
    end = time.time()
    print("RESULT " + json.dumps({"part": part, "documents": len(nodes), "start": start, "opened": opened,
                                 "end": end}), flush=True)


def write(parts: int, prefix: str, uri: str, data: Path, chunk: int, timeout: float) -> Dict[str, Any]:
    """`parts` writer processes released at once; each one's exit code and times, and the wall time."""
    with tempfile.TemporaryDirectory(prefix="graphrag-writers-") as scratch:
        go = Path(scratch) / "go"
        procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.writers", "--writer", str(i), str(parts), prefix, uri,
                                   str(data), str(chunk), str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, stdin=subprocess.DEVNULL) for i in range(parts)]
        for proc in procs:  # every process has loaded its share
            line = proc.stdout.readline()
            if not line.startswith("READY"):
                break
        go.touch()
        runs = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=timeout)
            lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
            runs.append({"exit": proc.returncode,
                         **(json.loads(lines[-1][7:]) if lines else {"error": stderr[-3000:]})})
    clean = all(r["exit"] == 0 and "error" not in r for r in runs)
    wall = max(r["end"] for r in runs) - min(r["start"] for r in runs) if clean else None
    writing = max(r["end"] for r in runs) - max(r["opened"] for r in runs) if clean else None
    for r in runs:
        if "start" in r:
            r["open_s"] = round(r["opened"] - r["start"], 2)
            r["seconds"] = round(r.pop("end") - r.pop("start"), 2)
            r.pop("opened")
    return {"processes": parts, "all_exited_cleanly": clean, "wall_s": round(wall, 2) if wall else None,
            "after_open_s": round(writing, 2) if writing else None, "runs": runs}


def seen(uri: str, prefix: str, questions: List[str]) -> tuple:
    """The store's fact rows (names case-folded, as `writers_scenario` compares them) and top-10 answers."""
    store = open_store(uri, prefix)
    try:
        found = rows(store, FACTS)
        for kind in ("entities", "relations"):  # which spelling of a name lands first is a race
            for row in found[kind].values():
                for name in ("name", "subject", "predicate", "object"):
                    if name in row:
                        row[name] = row[name].casefold()
        return found, answers(store, questions, top_k=10), store.count()
    finally:
        store.close()


def compare(found: tuple, reference: tuple) -> Dict[str, Any]:
    rows_now, answers_now, counts = found
    rows_ref, answers_ref, _ = reference
    return {
        "row_counts": {kind: len(v) for kind, v in rows_now.items()},
        "row_counts_equal": {kind: len(v) == len(rows_ref[kind]) for kind, v in rows_now.items()},
        "rows_equal": rows_now == rows_ref,
        "rows_differing": {kind: len(set(v) ^ set(rows_ref[kind]))
                           + sum(v[i] != rows_ref[kind][i] for i in set(v) & set(rows_ref[kind]))
                           for kind, v in rows_now.items()},
        "top10_equal": f"{sum(a == b for a, b in zip(answers_now, answers_ref))} of {len(answers_ref)}",
        "all_top10_equal": answers_now == answers_ref,
        "count": counts,
    }


def pipeline(uri: str, prefix: str, nodes: List[Any], workers: int) -> float:
    from llama_index.core.ingestion import IngestionPipeline

    from llama_index_graphrag_milvus import GraphRAGTransform

    store = open_store(uri, prefix)
    try:
        start = time.perf_counter()
        IngestionPipeline(transformations=[GraphRAGTransform(store=store)]).run(nodes=nodes, num_workers=workers)
        return round(time.perf_counter() - start, 2)
    finally:
        store.close()


def measure(uri: str, data: Path, counts: List[int], chunk: int, timeout: float) -> Dict[str, Any]:
    dataset = load(data)
    questions = [q["question"] for q in dataset.questions]
    report: Dict[str, Any] = {
        "dataset": dataset.name, "documents": len(dataset.nodes), "questions": len(questions),
        "where": "Milvus 2.3.5 standalone", "embedding": f"SpreadEmbedding(dim={DIM}), FLAT",
        "documents_per_transform_call": chunk, "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus (shared: compare within one run)",
    }
    reference, runs = None, {}
    for n in sorted(set(counts) | {1}):
        prefix = f"w{n}"
        run = write(n, prefix, uri, data, chunk, timeout)
        found = seen(uri, prefix, questions)
        if reference is None:
            reference = found
        relations = found[2]["relations"]
        run.update(compare(found, reference))
        if run["wall_s"]:
            run["relations_per_s"] = round(relations / run["wall_s"], 1)
            run["documents_per_s"] = round(len(dataset.nodes) / run["wall_s"], 1)
            run["relations_per_s_after_open"] = round(relations / run["after_open_s"], 1)
        runs[str(n)] = run
        print(f"{n} writer(s): clean {run['all_exited_cleanly']}, {run['wall_s']} s, {run.get('relations_per_s')} rel/s, "
              f"rows equal {run['rows_equal']}, top 10 equal {run['top10_equal']}", file=sys.stderr, flush=True)
    report["writers"] = runs
    one = runs["1"].get("relations_per_s")
    report["throughput_over_one_writer"] = {n: round(r["relations_per_s"] / one, 2) for n, r in runs.items()
                                           if one and r.get("relations_per_s")}
    piped = {}
    for workers in (1, 2):
        seconds = pipeline(uri, f"p{workers}", dataset.nodes, workers)
        piped[workers] = (seconds, seen(uri, f"p{workers}", questions))
    report["pipeline"] = {
        "num_workers_1_s": piped[1][0], "num_workers_2_s": piped[2][0],
        "num_workers_2_over_1": round(piped[2][0] / piped[1][0], 2),
        **{k: v for k, v in compare(piped[2][1], piped[1][1]).items() if k != "count"},
        "rows_equal_to_writers_1": compare(piped[1][1], reference)["rows_equal"],
    }
    print(f"pipeline: num_workers=1 {piped[1][0]} s, 2 {piped[2][0]} s, rows equal {report['pipeline']['rows_equal']}, "
          f"top 10 equal {report['pipeline']['top10_equal']}", file=sys.stderr, flush=True)
    return report


def main(argv: List[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="the MuSiQue directory (default: $GRAPHRAG_DATA/musique)")
    parser.add_argument("--counts", default="1,2,4", help="numbers of writer processes")
    parser.add_argument("--chunk", type=int, default=100, help="documents a transform call")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--out", default=str(RESULTS / "writers.json"))
    parser.add_argument("--writer", nargs=7, help=argparse.SUPPRESS)  # PART PARTS PREFIX URI DATA CHUNK GO
    args = parser.parse_args(argv)
    logging.getLogger("pymilvus").setLevel(logging.ERROR)  # "failed to get mvccTs" on 2.3.x servers
    if args.writer:
        part, parts, prefix, uri, data, chunk, go = args.writer
        writer(int(part), int(parts), prefix, uri, data, int(chunk), go)
        return
    data = data_dirs([args.data] if args.data else None, names=("musique",))[0]
    if not milvus_server.inside():
        sys.exit(milvus_server.rerun_inside(["-m", "benchmarks.writers", *(argv if argv is not None else sys.argv[1:])]))
    with milvus_server.server() as uri:
        report = measure(uri, data, [int(n) for n in args.counts.split(",")], args.chunk, args.timeout)
    report["command"] = "python -m benchmarks.writers" + (f" --counts {args.counts}" if args.counts != "1,2,4" else "")
    write_result(args.out, report)
    print(json.dumps({k: v for k, v in report.items()}, indent=1))


if __name__ == "__main__":
    main()
