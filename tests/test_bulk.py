"""`store.bulk_load`: a first load into an empty store leaves the rows, the adjacency index, the caches and
the answers that the ingest of the same nodes leaves; it refuses a store that holds rows; a load stopped
midway leaves a store that the ingest completes. And `graphrag-milvus bulk-load`."""

import json

import numpy as np
import pytest

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, GraphStoreError
from llama_index_graphrag_milvus.bench.demo import load_sample
from llama_index_graphrag_milvus.cli import main
from llama_index_graphrag_milvus.milvus.collections import ADJACENCY, ENTITIES, PASSAGES, RELATIONS
from llama_index_graphrag_milvus.schema import chunked

from test_cli import passages  # noqa: F401  (a fixture)
from test_snapshot import content

CHUNK = 40
#: Low enough that the embedding links some names as synonyms (SpreadEmbedding: no tied cosines).
THRESHOLD = 0.5
_ALL = {ENTITIES: "id >= 0 or id < 0", RELATIONS: "id >= 0 or id < 0", PASSAGES: 'id != ""', ADJACENCY: 'id != ""'}


def rows(store):
    """Every row of the four collections, by collection and id (vectors rounded, lists sorted)."""
    out = {}
    for kind, where in _ALL.items():
        found = {}
        for row in store.collections.query(kind, where, ["*"]):
            row = dict(row)
            row["embedding"] = np.round(np.asarray(row["embedding"], dtype=np.float32), 5).tolist()
            found[row["id"]] = {k: sorted(map(str, v)) if isinstance(v, list) and k != "embedding" else v for k, v in row.items()}
        out[kind] = found
    return out


def answers(store, questions):
    retriever = GraphRAGRetriever(store=store, similarity_top_k=5)
    return [[(n.node.node_id, round(n.score, 5)) for n in retriever.retrieve(q["question"])] for q in questions]


def nodes():
    return load_sample().nodes


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_a_bulk_load_leaves_what_the_ingest_of_the_same_nodes_leaves(make_store, spread_embed, tmp_path, adjacency):
    ingested = make_store(spread_embed, str(tmp_path / "ingest.db"), synonym_threshold=THRESHOLD, adjacency=adjacency)
    transform = GraphRAGTransform(store=ingested)
    for batch in chunked(nodes(), CHUNK):
        transform(list(batch))
    loaded = make_store(spread_embed, str(tmp_path / "bulk.db"), synonym_threshold=THRESHOLD, adjacency=adjacency)

    counts = loaded.bulk_load(iter(nodes()), GraphRAGTransform(store=loaded), chunk_size=CHUNK)

    assert counts == ingested.count() == loaded.count()
    expected, got = rows(ingested), rows(loaded)
    assert any(row["synonym_ids"] for row in got[ENTITIES].values())  # the links are compared too
    for kind in _ALL:
        assert got[kind] == expected[kind], kind
    if adjacency == "memory":
        assert content(loaded) == content(ingested)  # the caches, built as the load went, no read back
    questions = load_sample().questions
    assert answers(loaded, questions) == answers(ingested, questions)


def test_nodes_with_their_triplets_load_as_add_writes_them(make_store, tmp_path):
    added = make_store(uri=str(tmp_path / "add.db"), synonym_threshold=THRESHOLD)
    for batch in chunked(nodes(), CHUNK):
        added.add(list(batch))
    loaded = make_store(uri=str(tmp_path / "bulk.db"), synonym_threshold=THRESHOLD)
    loaded.bulk_load(nodes(), chunk_size=CHUNK, show_progress=True)
    assert rows(loaded) == rows(added)
    loaded.close()  # the caches are saved, and the next open reads them
    reopened = make_store(uri=str(tmp_path / "bulk.db"), synonym_threshold=THRESHOLD)
    assert reopened.backend.snapshot_used
    assert content(reopened) == content(added)


def test_a_store_that_holds_rows_is_refused_with_the_fix(make_store):
    store = make_store()
    store.add(nodes()[:3])
    before = rows(store)
    with pytest.raises(GraphStoreError, match=r"empty store.*overwrite=True"):
        store.bulk_load(nodes()[3:])
    assert rows(store) == before


def test_a_load_stopped_midway_is_completed_by_the_ingest(make_store, tmp_path, monkeypatch):
    complete = make_store(uri=str(tmp_path / "complete.db"))
    complete.bulk_load(nodes(), chunk_size=CHUNK)
    store = make_store(uri=str(tmp_path / "stopped.db"))
    insert, calls = store.collections.insert, []

    def refusing(kind, batch):
        calls.append(kind)
        if calls.count(PASSAGES) == 3:
            raise RuntimeError("Milvus refused the rows")
        insert(kind, batch)

    monkeypatch.setattr(store.collections, "insert", refusing)
    with pytest.raises(GraphStoreError, match="after 80 passages, which stand"):
        store.bulk_load(nodes(), chunk_size=CHUNK)
    monkeypatch.undo()
    assert store.count()[PASSAGES] == 80
    store.add(nodes())  # the stored passages are skipped, the rest written
    assert rows(store) == rows(complete)


def test_the_bulk_load_command_loads_what_ingest_loads(passages, tmp_path, capsys):  # noqa: F811
    main(["ingest", str(passages), "--uri", str(tmp_path / "ingest.db")])
    ingested = json.loads(capsys.readouterr().out)
    main(["bulk-load", str(passages), "--uri", str(tmp_path / "bulk.db")])
    out, err = capsys.readouterr()
    assert json.loads(out) == ingested
    assert "Bulk load" in err
    with pytest.raises(SystemExit):
        main(["bulk-load", str(passages), "--uri", str(tmp_path / "bulk.db")])
    assert "empty store" in capsys.readouterr().err


def test_rows_are_the_same_when_pymilvus_refuses_the_column_wise_upsert(make_store, tmp_path, monkeypatch):
    from pymilvus.client.grpc_handler import GrpcHandler

    nodes = load_sample().nodes
    columns = make_store(uri=str(tmp_path / "columns.db"))
    GraphRAGTransform(store=columns)(nodes[:CHUNK])
    calls = []

    def refused(self, *args, **kwargs):  # a pymilvus whose private call takes other arguments
        calls.append(args[0])
        raise TypeError("upsert() got an unexpected keyword argument 'schema'")

    monkeypatch.setattr(GrpcHandler, "upsert", refused)
    as_rows = make_store(uri=str(tmp_path / "rows.db"))
    GraphRAGTransform(store=as_rows)(nodes[:CHUNK])
    assert calls, "the column-wise upsert was not tried"
    assert rows(as_rows) == rows(columns)
