"""`store.bulk_load`: `add` a chunk at a time, so a big load leaves the rows, the caches and the answers
that the ingest of the same nodes leaves; a load stopped midway is completed by running it again. And
`graphrag-milvus bulk-load`."""

import json

import pytest

from llama_index_graphrag_milvus import GraphRAGTransform, GraphStoreError
from llama_index_graphrag_milvus.bench.demo import load_sample
from llama_index_graphrag_milvus.cli import main
from llama_index_graphrag_milvus.milvus.collections import LINKS, PASSAGES
from llama_index_graphrag_milvus.schema import chunked

from facts import answers, content, rows
from test_cli import passages  # noqa: F401  (a fixture)

CHUNK = 40
#: Low enough that the embedding links some names (SpreadEmbedding: no tied cosines).
THRESHOLD = 0.5
QUESTIONS = [q["question"] for q in load_sample().questions]


def nodes():
    return load_sample().nodes


def test_a_bulk_load_leaves_what_the_ingest_of_the_same_nodes_leaves(make_store, spread_embed, tmp_path):
    ingested = make_store(spread_embed, str(tmp_path / "ingest.db"), synonym_threshold=THRESHOLD)
    transform = GraphRAGTransform(store=ingested)
    for batch in chunked(nodes(), CHUNK):
        transform(list(batch))
    loaded = make_store(spread_embed, str(tmp_path / "bulk.db"), synonym_threshold=THRESHOLD)

    counts = loaded.bulk_load(iter(nodes()), GraphRAGTransform(store=loaded), chunk_size=CHUNK, show_progress=True)

    assert counts == ingested.count() == loaded.count()
    expected, got = rows(ingested), rows(loaded)
    assert got[LINKS]  # the links are compared too
    assert got == expected
    assert content(loaded) == content(ingested)
    assert answers(loaded, QUESTIONS) == answers(ingested, QUESTIONS)
    loaded.close()  # the caches are saved, and the next build reads them
    reopened = make_store(spread_embed, str(tmp_path / "bulk.db"), synonym_threshold=THRESHOLD)
    assert content(reopened) == content(ingested) and reopened.backend.snapshot_used


def test_a_load_stopped_midway_is_completed_by_running_it_again(make_store, tmp_path, monkeypatch):
    complete = make_store(uri=str(tmp_path / "complete.db"))
    complete.bulk_load(nodes(), chunk_size=CHUNK)
    store = make_store(uri=str(tmp_path / "stopped.db"))
    upsert, calls = store.collections.upsert, []

    def refusing(kind, batch):
        calls.append(kind)
        if calls.count(PASSAGES) == 3:
            raise RuntimeError("Milvus refused the rows")
        upsert(kind, batch)

    monkeypatch.setattr(store.collections, "upsert", refusing)
    with pytest.raises(GraphStoreError, match="midway: 0 of its 40 passages were written"):
        store.bulk_load(nodes(), chunk_size=CHUNK)
    monkeypatch.undo()
    assert store.count()[PASSAGES] == 80  # two chunks, then the third refused
    store.bulk_load(nodes(), chunk_size=CHUNK)  # the stored passages are skipped, the rest written
    assert rows(store) == rows(complete)
    assert answers(store, QUESTIONS) == answers(complete, QUESTIONS)


def test_the_bulk_load_command_loads_what_ingest_loads(passages, tmp_path, capsys):  # noqa: F811
    main(["ingest", str(passages), "--uri", str(tmp_path / "ingest.db")])
    ingested = json.loads(capsys.readouterr().out)
    main(["bulk-load", str(passages), "--uri", str(tmp_path / "bulk.db")])
    out, err = capsys.readouterr()
    assert json.loads(out) == ingested
    assert "Bulk load" in err
