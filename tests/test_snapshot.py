"""The snapshot file: a Lite store builds its caches from it as it would have from Milvus, and never
trusts it once the log says the store changed."""

import logging
import shutil

import pytest
from llama_index.core.schema import TextNode

from llama_index_graphrag_milvus import GraphRAGRetriever
from llama_index_graphrag_milvus.milvus import collections as milvus_module
from llama_index_graphrag_milvus.milvus import snapshot as snapshot_module
from llama_index_graphrag_milvus.milvus.collections import Collections
from llama_index_graphrag_milvus.examples import bernoulli_documents

from facts import content
from test_store import QUESTION, ingest

SYNONYMS = [TextNode(id_="syn", text="Leonhard Euler, also L. Euler.", metadata={"triplets": [["L Euler", "is", "Leonhard Euler"]]})]


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
    assert expected_content["links"], "the fixture should hold a link"
    from_milvus.close()

    no_milvus_reads(monkeypatch)
    store = make_store(uri=uri)
    assert store.backend.snapshot.exists()
    assert content(store) == expected_content and store.backend.snapshot_used
    assert retrieved(store) == expected_retrieval
    assert store.backend.counts() == store.count()


def test_reading_milvus_in_id_ranges_gives_the_same_caches_as_one_read(saved, make_store, monkeypatch):
    uri, (expected_content, _) = saved
    pages = []
    original = Collections.pages

    def counted(self, collection, fields, where=""):
        for page in original(self, collection, fields, where):
            pages.append(len(page))
            yield page

    monkeypatch.setattr(milvus_module, "LITE_PAGE", 4)  # 5 passages, 23 relations -> 2, 6 (16 by hex) ranges
    monkeypatch.setattr(Collections, "pages", counted)
    store = make_store(uri=uri, snapshot=False)
    assert content(store) == expected_content
    assert len(pages) > 6 and max(pages) < 10


@pytest.mark.parametrize("change", ["add", "delete"])
def test_a_write_makes_the_snapshot_stale_and_close_saves_it_again(saved, make_store, monkeypatch, tmp_path, change):
    uri, _ = saved
    store = make_store(uri=uri)
    path = store.backend.snapshot
    store.backend.ready()
    shutil.copy(path, tmp_path / "before.npz")
    if change == "add":
        store.add([TextNode(id_="new", text="Ann wrote Dawn.", metadata={"triplets": [["Ann", "wrote", "Dawn"]]})])
    else:
        store.delete(bernoulli_documents()[0].doc_id)
    expected = content(store)
    store.close()
    with monkeypatch.context() as patched:
        no_milvus_reads(patched)
        reopened = make_store(uri=uri)
        assert content(reopened) == expected and reopened.backend.snapshot_used
    reopened.close()
    shutil.copy(tmp_path / "before.npz", path)  # the file from before the write: the log moved since
    again = make_store(uri=uri)
    assert content(again) == expected and not again.backend.snapshot_used
    if change == "add":
        assert "Ann" in GraphRAGRetriever(store=again).retrieve("What did Ann write?")[0].node.text


def test_rows_changed_behind_the_snapshot_make_it_stale(saved, make_store, caplog):
    uri, (expected_content, _) = saved
    other = make_store(uri=uri, snapshot=False)  # writes without knowing the file
    other.add([TextNode(id_="x", text="Bob visited Orsk.", metadata={"triplets": [["Bob", "visited", "Orsk"]]})])
    other.close()
    with caplog.at_level(logging.INFO):
        store = make_store(uri=uri)
        built = content(store)  # the caches are built when first used
    assert "holds other writes" in caplog.text
    assert store.backend.counts() == store.count()
    assert len(built["relations"]) == len(expected_content["relations"]) + 1
    assert store.match_entities("Did Bob visit Orsk?") == ["bob", "orsk"]


def test_a_damaged_snapshot_is_ignored_with_a_warning(saved, make_store, caplog):
    uri, (expected_content, _) = saved
    store = make_store(uri=uri)
    path = store.backend.snapshot
    store.close()
    path.write_bytes(b"not a numpy file")
    with caplog.at_level(logging.WARNING):
        store = make_store(uri=uri)
        assert content(store) == expected_content
    assert "unreadable snapshot" in caplog.text


def test_overwrite_and_clear_drop_the_snapshot(saved, make_store):
    uri, _ = saved
    store = make_store(uri=uri)
    path = store.backend.snapshot
    store.clear()
    assert not path.exists()
    store.close()
    assert make_store(uri=uri).count() == {"entities": 0, "relations": 0, "passages": 0}
