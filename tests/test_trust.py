"""Trust: a stale cache is never served, a write is never skipped or half done, bad input names its fix."""

import shutil
import threading

import numpy as np
import pytest
from llama_index.core.ingestion import IngestionCache, IngestionPipeline
from llama_index.core.schema import Document, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, GraphStoreError, MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.examples import bernoulli_documents
from llama_index_graphrag_milvus.llm.mentions import MAX_QUESTION_WORDS, known_names

EMPTY = {"entities": 0, "relations": 0, "passages": 0}


def node(doc, text, triplets):
    return Document(id_=doc, text=text, metadata={"triplets": triplets})


NADIA = node("nadia", "Nadia runs Mill.", [["Nadia", "runs", "Mill"]])
OMAR = node("omar", "Omar owns Dock.", [["Omar", "owns", "Dock"]])


def top(store, question):
    hits = GraphRAGRetriever(store=store, similarity_top_k=1).retrieve(question)
    return (hits[0].node.ref_doc_id or hits[0].node.node_id) if hits else None


# 1. the snapshot is trusted only while Milvus holds the very state it was saved from ----------------
@pytest.mark.parametrize("writer", [{"snapshot": False}, {"adjacency": "milvus"}])
def test_a_write_by_a_store_that_keeps_no_snapshot_makes_the_snapshot_stale(make_store, tmp_path, writer):
    uri = str(tmp_path / "s.db")
    first = make_store(uri=uri)
    first.add([OMAR])
    first.close()  # saves the snapshot
    other = make_store(uri=uri, **writer)
    other.delete("omar")
    other.add([NADIA])  # the same shape: one passage, one relation, two entities
    other.compact()
    assert other.count() == {"entities": 2, "relations": 1, "passages": 1}
    other.close()
    reopened = make_store(uri=uri)
    assert not reopened.backend.snapshot_used
    assert top(reopened, "Who runs Mill?") == "nadia"
    assert reopened.match_entities("Nadia and Omar") == ["nadia"]


def test_a_second_store_on_the_same_collections_in_one_process_is_refused(make_store, tmp_path):
    uri = str(tmp_path / "s.db")
    make_store(uri=uri)
    with pytest.raises(GraphStoreError, match="already open in this process.*close it first"):
        make_store(uri=uri)
    make_store(uri=uri, collection_prefix="other").close()  # other collections on the same path are fine


def test_a_snapshot_saved_from_other_collections_is_not_trusted(make_store, tmp_path):
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    first = make_store(uri=a)
    first.add([OMAR])
    first.close()
    second = make_store(uri=b)
    second.add([NADIA])  # same prefix, dimension and counts
    path = second.backend.snapshot
    second.close()
    shutil.copy(tmp_path / "a.db.graphrag-cache" / "graphrag.npz", path)
    reopened = make_store(uri=b)
    assert not reopened.backend.snapshot_used
    assert top(reopened, "Who runs Mill?") == "nadia"


def test_a_killed_snapshot_write_leaves_no_partial_file(make_store, tmp_path):
    store = make_store(uri=str(tmp_path / "s.db"))
    store.add([OMAR])
    partial = store.backend.snapshot.with_name(store.backend.snapshot.name + ".12345.partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes(b"half a file")
    store.close()
    assert store.backend.snapshot.exists() and not partial.exists()


# 2. the pipeline's cache never stands in for a write the store does not hold ----------------------
@pytest.mark.parametrize("persisted", [False, True])
def test_cached_and_uncached_pipelines_leave_the_same_store(make_store, tmp_path, persisted):
    cache_dir = str(tmp_path / "cache")
    docs = bernoulli_documents()

    def pipeline(store):
        cache = IngestionCache.from_persist_path(cache_dir + "/c.json") if persisted and (tmp_path / "cache").exists() else IngestionCache()
        return IngestionPipeline(transformations=[GraphRAGTransform(store=store)], cache=cache)

    store = make_store(uri=str(tmp_path / "s.db"))
    run = pipeline(store)
    run.run(documents=docs)
    full = store.count()
    store.delete(docs[0].doc_id)
    run.run(documents=docs)  # the same pipeline, same cache
    assert store.count() == full
    store.clear()
    run.run(documents=docs)
    assert store.count() == full
    if persisted:
        run.cache.persist(cache_dir + "/c.json")
        store.close()
        fresh = make_store(uri=str(tmp_path / "s.db"), overwrite=True)
        pipeline(fresh).run(documents=docs)
        assert fresh.count() == full


# 3. every row is checked before the first write; a refused write is rolled back --------------------
@pytest.mark.parametrize(
    "bad, says",
    [
        (Document(id_="x" * 70_000, text="Ann met Bo.", metadata={"triplets": [["Ann", "met", "Bo"]]}), "document id"),
        (TextNode(text="Ann met Bo.", metadata={"$meta": 1, "triplets": [["Ann", "met", "Bo"]]}), "reserved"),
        (TextNode(text="Ann met Bo.", metadata={"thing": object(), "triplets": [["Ann", "met", "Bo"]]}), "not JSON"),
        (TextNode(text="Ann met Bo.", metadata={"note": "a\ud800b", "triplets": [["Ann", "met", "Bo"]]}), "surrogate"),
    ],
)
def test_input_milvus_would_refuse_is_refused_before_anything_is_written(make_store, bad, says):
    store = make_store()
    with pytest.raises(GraphStoreError, match=says) as refused:
        store.add([bad])
    assert "Nothing was written" in str(refused.value)
    assert store.count() == EMPTY == store.backend.counts()


def test_nothing_of_a_write_milvus_refuses_midway_is_read(make_store, monkeypatch):
    store = make_store()
    store.add([OMAR])
    before = store.count()
    upsert = store.collections.upsert

    def refuse_passages(kind, rows):
        if kind == "passages":
            raise RuntimeError("disk full")
        upsert(kind, rows)

    monkeypatch.setattr(store.collections, "upsert", refuse_passages)
    with pytest.raises(GraphStoreError, match="disk full.*midway: 0 of its 1 passages"):
        store.add([NADIA])
    monkeypatch.undo()
    assert store.backend.counts() == before  # Nadia's entities and relation are stored, stated by no passage
    assert store.match_entities("Did Nadia run Mill?") == []
    assert top(store, "Who runs Mill?") == "omar"  # nothing of Nadia's is a candidate


@pytest.mark.parametrize("vector", [[float("nan")] * 64, [float("inf")] + [0.0] * 63, [1.0] * 8])
def test_bad_vectors_from_the_embedder_are_refused(make_store, vector):
    class Broken(HashEmbedding):
        def _get_text_embeddings(self, texts):
            return [list(vector) for _ in texts]

    store = make_store(embed_model=Broken(dim=64), dim=64)
    with pytest.raises(GraphStoreError, match="NaN or infinite|dimension"):
        store.add([NADIA])
    assert store.count() == EMPTY


# 4. a collection left half-created by a killed first open ----------------------------------------
def test_a_half_created_collection_is_repaired_on_open(make_store, tmp_path):
    uri = tmp_path / "s.db"
    make_store(uri=str(uri), collection_prefix="a").close()
    (uri / "collections" / "b_entities").mkdir(parents=True)
    (uri / "collections" / "b_entities" / "schema.json.tmp").write_text("{")
    store = make_store(uri=str(uri), collection_prefix="b")
    store.add([NADIA])
    assert store.count()["entities"] == 2


# 5. the vector store we hand out escapes its filters ---------------------------------------------
def test_doc_ids_in_a_vector_store_query_are_escaped(make_store):
    store = make_store()
    store.add([NADIA, OMAR])
    query = lambda doc_ids: VectorStoreQuery(  # noqa: E731
        query_embedding=HashEmbedding(dim=64).get_query_embedding("Mill"), similarity_top_k=10, doc_ids=doc_ids
    )
    assert store.vector_store.query(query(['zzz"] or doc_id not in ["zzz'])).ids == []
    assert len(store.vector_store.query(query(["nadia"])).ids) == 1


# 6. smaller defects --------------------------------------------------------------------------------
def test_only_the_head_of_a_huge_question_is_read_for_names(make_store):
    store = make_store()
    store.add([NADIA])
    filler = " ".join(["word"] * (MAX_QUESTION_WORDS + 10))
    assert known_names("Nadia " + filler, store.has_entities) == ["nadia"]
    assert known_names(filler + " Nadia", store.has_entities) == []
    assert known_names("米" * 10**6, store.has_entities) == []


def test_one_passage_given_twice_in_a_call_states_the_triplets_of_both(make_store):
    store = make_store()
    first, again = node("d", "Ann met Bo.", [["Ann", "met", "Bo"]]), node("d", "Ann met Bo.", [["Bo", "knows", "Cy"]])
    assert len(set(store.add([first, again]))) == 1  # one passage id: the same document and text
    assert store.count() == {"entities": 3, "relations": 2, "passages": 1} == store.backend.counts()
    assert store.add([node("d", "Ann met Bo.", [["Ann", "met", "Bo"], ["Bo", "knows", "Cy"]])]) and store.count()["relations"] == 2


def test_a_pipeline_with_worker_processes_says_how_to_run_it(make_store):
    store = make_store()
    pipeline = IngestionPipeline(transformations=[GraphRAGTransform(store=store)])
    with pytest.raises(Exception, match="num_workers=1"):
        pipeline.run(documents=[NADIA], num_workers=2)


def test_clear_racing_retrievals_never_fails_a_reader(make_store):
    store = make_store()
    store.add(bernoulli_documents())
    retriever = GraphRAGRetriever(store=store)
    errors = []

    def read():
        for _ in range(15):
            try:
                retriever.retrieve("Who taught Euler?")
            except Exception as exc:  # pragma: no cover - the failure this test looks for
                errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for thread in readers:
        thread.start()
    for _ in range(3):
        store.clear()
        store.add(bernoulli_documents())
    for thread in readers:
        thread.join()
    assert errors == []


def test_surviving_entities_lose_their_links_to_deleted_ones(make_store):
    from llama_index_graphrag_milvus.schema import entity_id

    store = make_store(synonym_threshold=0.3)
    store.add([node("a", "Ann Lee wrote Dawn.", [["Ann Lee", "wrote", "Dawn"]]),
               node("b", "Lee Ann was born in Orsk.", [["Lee Ann", "born in", "Orsk"]])])
    ann_lee, lee_ann = entity_id("Ann Lee"), entity_id("Lee Ann")
    assert lee_ann in store.synonyms_of([ann_lee])[ann_lee]  # the same words: one hash vector
    store.delete("b")
    found = store.synonyms_of([ann_lee, lee_ann])
    assert lee_ann not in found and all(lee_ann not in others for others in found.values())


@pytest.mark.parametrize(
    "uri, says",
    [("{tmp}/plain", "must end with .db"), ("{tmp}/afile/graph.db", "is a file, so"), ("{tmp}/x.db", "is a file, not")],
)
def test_paths_that_cannot_hold_a_database_name_the_fix(tmp_path, uri, says):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "x.db").write_text("SQLite format 3")
    with pytest.raises(GraphStoreError, match=says):
        MilvusGraphStore(uri=uri.format(tmp=tmp_path), embed_model=HashEmbedding(dim=64))


def test_a_declared_dim_the_model_does_not_give_is_named(make_store):
    store = make_store(dim=8)
    with pytest.raises(GraphStoreError, match="8-dimensional.*right dim="):
        store.add([NADIA])
    assert np.array_equal(list(store.count().values()), [0, 0, 0])
