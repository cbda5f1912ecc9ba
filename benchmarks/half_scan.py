"""The vector cache's half-precision scan against the float32 product it replaces (session 35).

Exact top-k searches over 2^21 values or more (rows × dim: 2Wiki's 27,935 entities and 38,104 relations,
MuSiQue's, HotpotQA's larger kinds) scan a half-precision copy with faiss and rescore exactly the rows its
bounded rounding could misplace (`milvus/vectors.py`). This runs the default retriever over every dev
question with the scan off (`HALF_SCAN_MIN_VALUES` out of reach: numpy's product, as before) and on,
alternated for `--rounds` rounds in one process, and checks that every top 10 (ids and scores) is the
same. With `--busy`, a busy loop holds the other core meanwhile.

    python -m benchmarks.half_scan --stores DIR [--rounds 3] [--busy]   # DIR/{musique,...,wiki2}.db
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.candidates import DATA, SETS  # noqa: E402
from benchmarks.raw_text import CACHE, RESULTS  # noqa: E402
from llama_index.core.schema import QueryBundle  # noqa: E402
from llama_index_graphrag_milvus import GraphRAGRetriever, MilvusGraphStore  # noqa: E402
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding, load_dataset  # noqa: E402
from llama_index_graphrag_milvus.embeddings import local_embed_model  # noqa: E402
from llama_index_graphrag_milvus.milvus import vectors  # noqa: E402

ON = vectors.HALF_SCAN_MIN_VALUES


def spin() -> None:
    while True:
        pass


def run(stores: Path, rounds: int) -> dict:
    embed = CachedEmbedding(local_embed_model(), CACHE / "embeddings.sqlite")
    out = {}
    for name, (directory, kwargs) in SETS.items():
        questions = load_dataset(DATA / directory, **kwargs).questions
        bundles = [QueryBundle(q["question"], embedding=embed.get_query_embedding(q["question"])) for q in questions]
        store = MilvusGraphStore(uri=str(stores / f"{name}.db"), embed_model=embed, collection_prefix="bench")
        try:
            retriever = GraphRAGRetriever(store=store, similarity_top_k=10, llm=None)
            p50s, tops = {"float32": [], "half": []}, {}
            for _ in range(rounds):
                for mode in p50s:
                    vectors.HALF_SCAN_MIN_VALUES = ON if mode == "half" else 1 << 62
                    retriever.retrieve(bundles[0])  # builds the half copy (or not) outside the timing
                    ms, tops[mode] = [], []
                    for bundle in bundles:
                        start = time.perf_counter()
                        nodes = retriever.retrieve(bundle)
                        ms.append((time.perf_counter() - start) * 1000)
                        tops[mode].append([(n.node.node_id, n.score) for n in nodes])
                    p50s[mode].append(round(statistics.median(ms), 1))
            differ = sum(a != b for a, b in zip(tops["float32"], tops["half"]))
            out[name] = {"p50_ms_per_round": p50s, "top10_differ": differ, "questions": len(bundles)}
            print(name, out[name], flush=True)
        finally:
            vectors.HALF_SCAN_MIN_VALUES = ON
            store.close()
    return out


if __name__ == "__main__":
    stores = Path(sys.argv[sys.argv.index("--stores") + 1])
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    busy = "--busy" in sys.argv
    spinner = multiprocessing.Process(target=spin, daemon=True) if busy else None
    if spinner:
        spinner.start()
    try:
        result = run(stores, rounds)
    finally:
        if spinner:
            spinner.kill()
    path = RESULTS / f"half_scan{'_busy' if busy else ''}.json"
    path.write_text(json.dumps({"rounds": rounds, "busy_core": busy, "sets": result}, indent=1))
