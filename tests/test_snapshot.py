"""The snapshot file: a Lite store reopens from it with the caches it would have read from Milvus, and
never trusts it once the store has changed."""

import logging

import numpy as np
import pytest
from llama_index.core.schema import TextNode

from llama_index_graphrag_milvus import GraphRAGRetriever
from llama_index_graphrag_milvus.milvus import collections as milvus_module
from llama_index_graphrag_milvus.milvus import snapshot as snapshot_module
from llama_index_graphrag_milvus.milvus.collections import Collections
from llama_index_graphrag_milvus.examples import bernoulli_documents

from test_store import QUESTION, ingest

SYNONYMS = [TextNode(id_="syn", text="Leonhard Euler, also L. Euler.", metadata={"triplets": [["L Euler", "is", "Leonhard Euler"]]})]


def content(store):
    """Everything the caches hold, by id (positions differ from one build to the next)."""
    columns = store.backend.columns()
    bounds = zip(columns.passage_offsets[:-1].tolist(), columns.passage_offsets[1:].tolist())
    passages = {pid: sorted(columns.passage_relations[a:b].tolist()) for pid, (a, b) in zip(columns.passage_ids, bounds)}
    vectors = {
        name: dict(zip(ids.tolist() if hasattr(ids, "tolist") else ids, np.round(getattr(columns, name), 5).tolist()))
        for name, ids in (
            ("relation_vectors", columns.relation_ids),
            ("passage_vectors", columns.passage_ids),
            ("entity_vectors", columns.entity_ids),
        )
    }
    return {
        "relations": sorted(zip(columns.relation_ids.tolist(), map(tuple, columns.relation_ends.tolist()))),
        "passages": passages,
        "entities": sorted(zip(columns.entity_ids.tolist(), columns.entity_names)),
        "synonyms": sorted(map(tuple, columns.entity_ids[columns.synonyms].tolist())),
        "vectors": vectors,
    }


def retrieved(store):
    return [(n.node.node_id, round(n.score, 6)) for n in GraphRAGRetriever(store=store, similarity_top_k=3).retrieve(QUESTION)]


def no_milvus_reads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("read the rows from Milvus instead of the snapshot")

    monkeypatch.setattr(snapshot_module, "read_columns", refuse)


@pytest.fixture
def saved(make_store, tmp_path):
    """A closed Lite store with the Bernoulli corpus and a synonym link; its content and retrieval."""
    uri = str(tmp_path / "snap.db")
    store = make_store(uri=uri, synonym_threshold=0.3)
    ingest(store)
    store.add(SYNONYMS)
    expected = content(store), retrieved(store)
    store.close()
    return uri, expected


def test_a_closed_lite_store_reopens_from_its_snapshot_with_the_same_caches(saved, make_store, monkeypatch):
    uri, (expected_content, expected_retrieval) = saved
    from_milvus = make_store(uri=uri, snapshot=False)
    assert content(from_milvus) == expected_content
    assert expected_content["synonyms"], "the fixture should hold a synonym link"
    from_milvus.close()

    no_milvus_reads(monkeypatch)
    store = make_store(uri=uri)
    assert store.backend.snapshot.exists()
    assert content(store) == expected_content
    assert retrieved(store) == expected_retrieval
    assert store.backend.counts() == store.count()


def test_reading_milvus_in_id_ranges_gives_the_same_caches_as_one_read(saved, make_store, monkeypatch):
    uri, (expected_content, _) = saved
    pages = []
    original = Collections.pages

    def counted(self, collection, fields):
        for page in original(self, collection, fields):
            pages.append(len(page))
            yield page

    monkeypatch.setattr(milvus_module, "LITE_PAGE", 4)  # 5 passages, 23 relations -> 2, 6 (16 by hex) ranges
    monkeypatch.setattr(Collections, "pages", counted)
    store = make_store(uri=uri, snapshot=False)
    assert content(store) == expected_content
    assert len(pages) > 6 and max(pages) < 10


def test_the_snapshot_is_deleted_before_the_first_write_and_saved_again_on_close(saved, make_store, monkeypatch):
    uri, _ = saved
    store = make_store(uri=uri)
    path = store.backend.snapshot
    assert path.exists()
    seen = []
    original = store.collections.upsert

    def upsert(kind, rows):
        seen.append(path.exists())
        original(kind, rows)

    store.collections.upsert = upsert
    store.add([TextNode(id_="new", text="Ann wrote Dawn.", metadata={"triplets": [["Ann", "wrote", "Dawn"]]})])
    assert seen and not any(seen), "a write landed while the old snapshot still existed"
    expected = content(store)
    store.close()
    assert path.exists()

    no_milvus_reads(monkeypatch)
    reopened = make_store(uri=uri)
    assert content(reopened) == expected
    assert ("Ann" in GraphRAGRetriever(store=reopened).retrieve("What did Ann write?")[0].node.text)


def test_deleting_a_document_invalidates_the_snapshot_too(saved, make_store):
    uri, _ = saved
    store = make_store(uri=uri)
    document = bernoulli_documents()[0].doc_id
    store.delete(document)
    assert not store.backend.snapshot.exists()
    expected = content(store)
    store.close()
    assert content(make_store(uri=uri)) == expected


def test_rows_changed_behind_the_snapshot_make_it_stale(saved, make_store, caplog):
    uri, (expected_content, _) = saved
    other = make_store(uri=uri, snapshot=False)  # writes without knowing the file
    other.add([TextNode(id_="x", text="Bob visited Orsk.", metadata={"triplets": [["Bob", "visited", "Orsk"]]})])
    other.close()
    with caplog.at_level(logging.INFO):
        store = make_store(uri=uri)
    assert "stale" in caplog.text
    assert store.backend.counts() == store.count()
    assert len(content(store)["relations"]) == len(expected_content["relations"]) + 1
    assert store.match_entities("Did Bob visit Orsk?") == ["bob", "orsk"]


def test_a_damaged_snapshot_is_ignored_with_a_warning(saved, make_store, caplog):
    uri, (expected_content, _) = saved
    store = make_store(uri=uri)
    path = store.backend.snapshot
    store.close()
    path.write_bytes(b"not a numpy file")
    with caplog.at_level(logging.WARNING):
        store = make_store(uri=uri)
    assert "unreadable snapshot" in caplog.text
    assert content(store) == expected_content


def test_overwrite_and_clear_drop_the_snapshot(saved, make_store):
    uri, _ = saved
    store = make_store(uri=uri)
    path = store.backend.snapshot
    store.clear()
    assert not path.exists()
    store.close()
    assert make_store(uri=uri).count() == {"entities": 0, "relations": 0, "passages": 0}
