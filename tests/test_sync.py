"""`store.sync()`: a store catches up with what other stores wrote to its collections (other processes, on
a server), told by the log. The other store is simulated on Milvus Lite, which lets one store open a
path: a writer on the same collections with caches of its own, as another process has."""

import threading

import pytest
from llama_index.core.schema import TextNode

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphStoreError
from llama_index_graphrag_milvus.backends.choice import open_backend
from llama_index_graphrag_milvus.ingest.rows import checked
from llama_index_graphrag_milvus.ingest.writes import Writer

from facts import content
from test_store import ingest

BOB = TextNode(id_="bob", text="Bob visited Orsk.", metadata={"triplets": [["Bob", "visited", "Orsk"]]})
QUESTION = "Did Bob visit Orsk?"


def other_store(store):
    """A writer on `store`'s collections that `store` does not know of."""
    graph, search = open_backend(store.collections, store.adjacency, None, False, False)
    return Writer(store.collections, graph, search, store.embed_model, len(store.embed_model.get_text_embedding("x")),
                  store.batch_size, store.synonym_threshold)


def add(writer, nodes):
    writer.add(*checked(nodes, None))


def ids(store):
    return [n.node.node_id for n in GraphRAGRetriever(store=store, similarity_top_k=3).retrieve(QUESTION)]


def test_sync_brings_in_what_another_store_wrote(make_store, tmp_path):
    store = make_store(uri=str(tmp_path / "a.db"))
    ingest(store)
    assert not store.sync()  # its own writes: nothing to catch up with
    add(other_store(store), [BOB])
    assert store.match_entities(QUESTION) == [] and "bob" not in ids(store)
    assert store.sync()
    assert store.match_entities(QUESTION) == ["bob", "orsk"]
    assert "bob" in ids(store)
    assert store.backend.counts() == store.count()
    assert not store.sync()
    synced = content(store)
    store.close()
    assert content(make_store(uri=str(tmp_path / "a.db"))) == synced  # what a reopen builds


def test_a_store_that_caches_nothing_has_nothing_to_sync(make_store):
    store = make_store(adjacency="milvus")
    ingest(store)
    add(other_store(store), [BOB])
    assert store.match_entities(QUESTION) == ["bob", "orsk"]
    assert not store.sync()


def test_a_sync_during_another_stores_write_is_followed_by_one_after_it(make_store, monkeypatch):
    """The writer logs a row when it begins and one when it ends, so a store that synced in between (and
    read part of the write) syncs again."""
    store = make_store()
    ingest(store)
    assert "bob" not in ids(store)
    other = other_store(store)
    upsert, during = store.collections.upsert, []

    def sync_before_the_passages(kind, rows):
        if kind == "passages" and not during:
            during.append(store.sync())  # the relations are in, the passage not yet
        upsert(kind, rows)

    monkeypatch.setattr(store.collections, "upsert", sync_before_the_passages)
    add(other, [BOB])
    assert during == [True]
    assert "bob" not in ids(store)
    assert store.sync()
    assert "bob" in ids(store)
    assert store.backend.counts() == store.count()


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_a_sync_keeps_writing_through_the_new_caches(make_store, adjacency):
    store = make_store(adjacency=adjacency)
    ingest(store)
    add(other_store(store), [BOB])
    store.sync()
    store.delete("bob")
    store.add([TextNode(id_="ann", text="Ann visited Orsk.", metadata={"triplets": [["Ann", "visited", "Orsk"]]})])
    assert store.match_entities("Did Ann or Bob visit Orsk?") == ["ann", "orsk"]
    store.compact()
    assert store.backend.counts() == store.count()
    assert not store.sync()


def test_writes_and_deletes_need_no_caches_and_land_beside_another_stores(make_store):
    store = make_store()
    ingest(store)
    before = store.count()
    add(other_store(store), [BOB])
    store.delete("bob")  # a document only the other store wrote: found, and deleted
    assert store.count()["passages"] == before["passages"]
    add(other_store(store), [BOB])
    store.add([TextNode(id_="ann", text="Ann visited Orsk.", metadata={"triplets": [["Ann", "visited", "Orsk"]]})])
    assert store.sync()  # the other's write, after this store built its caches
    assert store.match_entities("Did Ann or Bob visit Orsk?") == ["ann", "bob", "orsk"]
    store.compact()
    assert store.backend.counts() == store.count()
    assert not store.sync()


def test_a_refused_write_that_a_store_synced_in_the_middle_of_is_caught_up_after(make_store, monkeypatch):
    """A write refused midway still logs its end, so a store that read part of it catches up with the
    rest: what it wrote before the refusal stands."""
    store = make_store()
    ingest(store)
    other = other_store(store)
    upsert, calls = store.collections.upsert, []

    def sync_then_refuse(kind, rows):
        if kind == "statements":
            calls.append(store.sync())
        upsert(kind, rows)
        if kind == "statements":
            raise RuntimeError("refused")

    monkeypatch.setattr(store.collections, "upsert", sync_then_refuse)
    with pytest.raises(GraphStoreError, match="refused"):
        add(other, [BOB])
    monkeypatch.undo()
    assert calls == [True]
    assert store.sync()  # the statements came after its sync
    assert store.match_entities(QUESTION) == []  # the passage was not written: nothing names Bob
    add(other, [BOB])
    assert store.sync() and store.match_entities(QUESTION) == ["bob", "orsk"]


def test_retrievals_in_threads_run_across_syncs(make_store):
    store = make_store()
    ingest(store)
    other = other_store(store)
    stop, errors = threading.Event(), []

    def retrieve():
        while not stop.is_set():
            try:
                ids(store)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    threads = [threading.Thread(target=retrieve) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for i in range(6):
            add(other, [TextNode(id_=f"v{i}", text=f"Visitor {i} visited Orsk.",
                                 metadata={"triplets": [[f"Visitor {i}", "visited", "Orsk"]]})])
            assert store.sync()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    assert store.match_entities("Did Visitor 5 visit Orsk?") == ["visitor 5", "orsk"]


@pytest.mark.parametrize("when", ["_plan", "_write"])
def test_another_stores_write_while_this_one_plans_or_writes_is_caught_up_after(make_store, monkeypatch, when):
    """A write that another store's write overlapped reads the log after its own end: the caches are then
    marked behind, and the next sync catches up (the other's log row is not deleted)."""
    store = make_store()
    ingest(store)
    store.backend.ready()
    other, writer = other_store(store), store._writer
    step, others = getattr(writer, when), []

    def step_and_other_write(*args, **kwargs):
        done = step(*args, **kwargs)
        if not others:  # once: the other store's own write goes through its own writer
            others.append(add(other, [BOB]))
        return done

    monkeypatch.setattr(writer, when, step_and_other_write)
    store.add([TextNode(id_="ann", text="Ann visited Tula.", metadata={"triplets": [["Ann", "visited", "Tula"]]})])
    assert store.sync()
    assert store.match_entities("Did Ann or Bob visit Orsk or Tula?") == ["ann", "bob", "orsk", "tula"]
    assert store.backend.counts() == store.count()


def test_a_write_is_quiet_only_if_the_log_shows_no_other_write_between_its_two_reads():
    from llama_index_graphrag_milvus.ingest.writes import quiet

    before = frozenset({"a.begin", "a.end", "b.end"})
    assert quiet(before, before | {"t.begin"}, "t")
    assert not quiet(before, before | {"t.begin", "c.begin"}, "t")  # another began meanwhile
    assert not quiet(before, frozenset({"t.begin", "c.end"}), "t")  # began, wrote and pruned the log: its end
    assert not quiet(before | {"c.begin"}, before | {"c.begin", "t.begin"}, "t")  # under way before


def test_writes_prune_finished_writes_from_the_log_never_one_under_way(make_store):
    from llama_index_graphrag_milvus.milvus.collections import LOG, LOG_SLACK

    store = make_store()
    log = store.collections
    log.client.upsert(log.names[LOG], [{"id": "crashed.begin", "embedding": [0.0, 0.0]}])  # a writer that died
    for i in range(LOG_SLACK + 4):
        store.add([TextNode(id_=f"n{i}", text=f"Bob{i} visited Orsk.", metadata={"triplets": [[f"Bob{i}", "visited", "Orsk"]]})])
    rows = log.log_ids()
    assert "crashed.begin" in rows and len(rows) <= LOG_SLACK + 2
    store.compact()  # nothing else writes: the log keeps compact's own end alone
    assert len(log.log_ids()) == 1
