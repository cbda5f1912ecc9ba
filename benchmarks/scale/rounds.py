"""Retrieval latency alone, on a store a scale run kept (`--keep-db`), with the questions of that run.

    python -m benchmarks.scale.rounds SIZE DB_PATH SHAPE DEGREE     # prints one JSON line

For comparing code versions (or sizes) under a shared machine's load: run it in alternation, old and
new, small and large, a few rounds, and compare the medians and the per-round ratios. Run from a
directory holding `benchmarks/` and the package version to measure.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

import llama_index_graphrag_milvus as package  # noqa: E402
from benchmarks.scale import measure  # noqa: E402
from benchmarks.scale.common import open_store  # noqa: E402
from benchmarks.scale.corpus import make_corpus, query_seeds  # noqa: E402


def main(argv: list) -> None:
    size, path, shape, degree = int(float(argv[0])), Path(argv[1]), argv[2], int(argv[3])
    logging.getLogger("llama_index_graphrag_milvus").setLevel(logging.WARNING)
    logging.getLogger("pymilvus").setLevel(logging.ERROR)
    corpus = make_corpus(size, 0, shape)
    store = open_store(path)
    try:
        rng = np.random.default_rng([0, size, 1])  # as the run: expansion seeds first, then questions
        query_seeds(corpus, rng, 200)
        found = measure.retrieval_latency(store, corpus, rng, 100, degree)
    finally:
        store.close()
    keys = ("ms", "mean_ms_by_step", "relations_reached", "candidates_kept")
    print(json.dumps({"package": package.__file__, "size": size, "shape": shape, "degree": degree,
                      **{k: found[k] for k in keys}, "at": time.strftime("%H:%M:%S")}))


if __name__ == "__main__":
    main(sys.argv[1:])
