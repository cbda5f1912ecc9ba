"""The scale benchmark's raw insert writes the rows the transform writes, and its table reads the results
file."""

import json
from pathlib import Path

import numpy as np

from benchmarks.scale.__main__ import table
from benchmarks.scale.corpus import make_corpus
from benchmarks.scale.writes import Target, ingest, raw_insert, raw_rows

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "scale.json"


def _comparable(kind, row):
    row = dict(row)
    embedding = np.round(np.asarray(row.pop("embedding"), dtype=np.float32), 5).tolist()
    lists = {k: sorted(map(str, v)) for k, v in row.items() if isinstance(v, list)}
    return {**row, **lists, "embedding": embedding}


def test_the_raw_insert_writes_the_rows_the_transform_writes(tmp_path):
    corpus = make_corpus(300)
    target = Target(str(tmp_path), True)
    links = ingest(target, "s", corpus, node_batch=20, batch_size=64)["link_rows"]
    built = raw_rows([corpus.node(p) for p in range(corpus.n_passages)], 64, links)
    assert raw_insert(target, "raw", corpus, 64, links)["rows"] == {kind: len(rows) for kind, rows in built.items()}
    store = target.store("s")
    try:
        for kind in built:
            stored = [row for page in store.collections.pages(kind, ["*"]) for row in page]
            stored = {r["id"]: _comparable(kind, r) for r in stored}
            assert stored == {r["id"]: _comparable(kind, r) for r in built[kind]}, kind
    finally:
        store.close()


def test_the_table_reads_the_results_file():
    sizes = json.loads(RESULTS.read_text())["sizes"]
    text = table(sizes)
    assert text.count("\n") == len(sizes) + 1
