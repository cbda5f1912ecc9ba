"""The store: reopening, idempotent ingest, deletes, clear errors, escaped filters."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters, VectorStoreQuery
from llama_index.core.schema import MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, GraphStoreError, Triplet
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents

QUESTION = "Who taught Leonhard Euler at the University of Basel?"


def ingest(store, documents=None):
    # the counts below are the given triplets' (the text's own links: tests/test_extract.py)
    pipeline = IngestionPipeline(transformations=[SentenceSplitter(), GraphRAGTransform(store=store, text_links=False)])
    return pipeline.run(documents=documents or bernoulli_documents())


def retrieved(store, question=QUESTION, k=3):
    return [n.node.node_id for n in GraphRAGRetriever(store=store, similarity_top_k=k).retrieve(question)]


def test_ingest_writes_entities_relations_and_passages(make_store):
    store = make_store()
    ingest(store)
    # 22 distinct triplets; "leonhard Euler" and "Leonhard Euler" are one entity
    assert store.count() == {"entities": 21, "relations": 22, "passages": 5}
    assert store.backend.counts() == store.count()


def test_running_the_pipeline_twice_changes_no_row_count(make_store):
    store = make_store()
    ingest(store)
    before = store.count()
    ingest(store)  # SentenceSplitter gives new random node ids; passage ids come from content
    assert store.count() == before


EULER = "Euler studied under Johann Bernoulli in Basel."
STUDIED = [Triplet("Leonhard Euler", "studied under", "Johann Bernoulli")]


def chunk(**kwargs):
    """A chunk of document "euler" as a splitter gives it: a new random node id on every run."""
    return TextNode(text=EULER, relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="euler")}, **kwargs)


def upserted(store, monkeypatch):
    """The collections each later upsert writes to, in order."""
    kinds, upsert = [], store.collections.upsert

    def recording(kind, rows):
        kinds.append(kind)
        return upsert(kind, rows)

    monkeypatch.setattr(store.collections, "upsert", recording)
    return kinds


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_the_same_passage_with_new_metadata_is_stored_and_embedded_again_alone(make_store, hash_embed, monkeypatch, adjacency):
    store = make_store(adjacency=adjacency)
    [pid] = store.add([chunk(metadata={"source": "v1"})], [STUDIED])
    kinds = upserted(store, monkeypatch)
    store.add([chunk(metadata={"source": "v1"})], [STUDIED])  # a new node id, the same content
    assert kinds == []

    renewed = chunk(metadata={"source": "v2"})
    assert store.add([renewed], [STUDIED]) == [pid]
    assert kinds == ["passages"]  # the graph is untouched
    assert store.get_passages([pid])[pid].metadata == {"source": "v2"}
    vector = hash_embed.get_text_embedding(renewed.get_content(MetadataMode.EMBED))  # the metadata is embedded
    assert store.search.passage_similarities(vector, [pid])[pid] == pytest.approx(1.0, abs=1e-5)
    assert store.count() == {"entities": 2, "relations": 1, "passages": 1}


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_a_metadata_key_dropped_on_a_rewrite_no_longer_matches_filters(make_store, hash_embed, adjacency):
    """Milvus keeps a dynamic field that an upsert leaves out: a dropped key must be cleared."""
    store = make_store(adjacency=adjacency)

    def tagged(value):
        query = VectorStoreQuery(query_embedding=hash_embed.get_text_embedding(EULER), similarity_top_k=5,
                                 filters=MetadataFilters(filters=[ExactMatchFilter(key="tag", value=value)]))
        return [n.metadata for n in store.vector_store.query(query).nodes]

    [pid] = store.add([chunk(metadata={"tag": "secret", "v": 1})], [STUDIED])
    store.add([chunk(metadata={"tag": "public", "v": 2})], [STUDIED])
    assert tagged("secret") == [] and tagged("public") == [{"tag": "public", "v": 2}]
    store.add([chunk(metadata={"v": 3})], [STUDIED])  # the same relations: the metadata alone
    assert tagged("public") == []
    store.add([chunk(metadata={"tag": "public"})], [STUDIED])
    store.add([chunk(metadata={})], [[*STUDIED, Triplet("Leonhard Euler", "lived in", "Basel")]])  # new relations too
    assert tagged("public") == [] and store.get_passages([pid])[pid].metadata == {}


def test_a_new_embedding_a_node_carries_replaces_the_stored_one(make_store, monkeypatch):
    store = make_store()
    first, second = np.eye(64)[0].tolist(), np.eye(64)[1].tolist()
    [pid] = store.add([chunk(embedding=first)], [STUDIED])
    kinds = upserted(store, monkeypatch)
    store.add([chunk(embedding=first)], [STUDIED])
    assert kinds == []
    store.add([chunk(embedding=second)], [STUDIED])
    assert kinds == ["passages"]
    assert store.search.passage_similarities(second, [pid])[pid] == pytest.approx(1.0, abs=1e-5)
    assert store.search_passages(second, 1)[0].node.get_content() == EULER


def test_a_carried_embedding_of_another_dimension_on_a_stored_passage_is_refused_with_the_fix(make_store):
    store = make_store()
    store.add([chunk()], [STUDIED])
    with pytest.raises(GraphStoreError, match=r"dimension \[32\].*Use the model the store was built with"):
        store.add([chunk(embedding=[0.1] * 32)], [STUDIED])


def test_the_passage_ids_of_many_documents_come_by_document(make_store):
    store = make_store()
    nodes = [TextNode(text=f"passage {i}", relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc {i % 150}")})
             for i in range(300)]
    store.add(nodes, [[] for _ in nodes])
    found = store.documents_passage_ids([f"doc {i}" for i in range(151)])  # in two queries; "doc 150" has none
    assert sorted(found) == sorted(f"doc {i}" for i in range(150)) and {len(p) for p in found.values()} == {2}
    assert sorted(found["doc 7"]) == sorted(store.passage_ids("doc 7"))


def test_a_second_store_on_the_same_path_retrieves_the_same_passages(make_store, tmp_path):
    uri = str(tmp_path / "reopen.db")
    first = make_store(uri=uri)
    ingest(first)
    expected = retrieved(first)
    first.close()

    second = make_store(uri=uri)
    assert second.count() == {"entities": 21, "relations": 22, "passages": 5}
    assert second.backend.counts() == second.count()
    assert retrieved(second) == expected


def test_a_new_process_retrieves_the_same_passages(make_store, tmp_path):
    uri = str(tmp_path / "process.db")
    store = make_store(uri=uri)
    ingest(store)
    expected = retrieved(store)
    store.close()
    script = textwrap.dedent(
        f"""
        from llama_index_graphrag_milvus import GraphRAGRetriever, MilvusGraphStore
        from llama_index_graphrag_milvus.embeddings import HashEmbedding
        store = MilvusGraphStore(uri={uri!r}, embed_model=HashEmbedding(dim=64))
        hits = GraphRAGRetriever(store=store, similarity_top_k=3).retrieve({QUESTION!r})
        print("|".join(n.node.node_id for n in hits))
        store.close()
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1].split("|") == expected


def test_a_path_held_by_another_process_gives_a_clear_error(make_store, tmp_path, capfd):
    uri = str(tmp_path / "locked.db")
    make_store(uri=uri).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from llama_index_graphrag_milvus import MilvusGraphStore
            from llama_index_graphrag_milvus.embeddings import HashEmbedding
            store = MilvusGraphStore(uri={uri!r}, embed_model=HashEmbedding(dim=64))
            print("open", flush=True)
            sys.stdin.read()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(GraphStoreError) as err:
            make_store(uri=uri)
        assert "open in another process" in str(err.value) and uri in str(err.value)
        assert "Traceback" not in capfd.readouterr().err  # refused before Milvus Lite prints its own
    finally:
        holder.communicate("", timeout=120)


def test_an_embedder_of_another_dimension_is_refused_and_nothing_is_touched(make_store, tmp_path):
    uri = str(tmp_path / "dims.db")
    store = make_store(uri=uri)
    ingest(store)
    store.close()
    with pytest.raises(GraphStoreError) as err:
        make_store(uri=uri, embed_model=HashEmbedding(dim=32))
    assert "64-dimensional" in str(err.value) and "gives 32" in str(err.value)
    assert make_store(uri=uri).count() == {"entities": 21, "relations": 22, "passages": 5}


def test_delete_removes_the_document_and_what_only_it_supported(make_store):
    store = make_store()
    ingest(store)
    store.delete("bernoulli-daniel")
    # Daniel's 5 relations go, and 5 of its 6 entities: "Johann Bernoulli" is still used elsewhere; their
    # rows stay, unread, until compact()
    assert store.backend.counts() == {"entities": 16, "relations": 17, "passages": 4}
    assert store.count() == {"entities": 21, "relations": 22, "passages": 4}
    assert store.compact() == {"relations": 5, "entities": 5, "links": 1, "statements": 0}  # a link of a gone name
    assert store.count() == store.backend.counts()
    assert "bernoulli-daniel" not in {
        n.node.ref_doc_id for n in GraphRAGRetriever(store=store, similarity_top_k=4).retrieve(EULER_QUESTION)
    }


def test_an_id_crafted_to_widen_a_filter_deletes_nothing(make_store):
    store = make_store()
    ingest(store)
    before = store.count()
    for evil in ['zzz"] or doc_id not in ["', 'x" or id != "', "x' or id != '", 'a\\" or 1==1 or "']:
        store.delete(evil)
    assert store.count() == before


def test_names_with_quotes_backslashes_newlines_and_chinese_are_stored_and_found(make_store):
    store = make_store()
    weird = TextNode(
        id_="weird",
        text="周杰伦 wrote the song 'Say \"hi\"\\' with a line\nbreak.",
        metadata={"triplets": [["周杰伦", "wrote", 'Say "hi"\\'], ['Say "hi"\\', "has", "line\nbreak"]]},
    )
    GraphRAGTransform(store=store, text_links=False)([weird])  # the given names (its first line is no title)
    assert store.count() == {"entities": 3, "relations": 2, "passages": 1}
    assert store.match_entities("Which song did 周杰伦 write?") == ["周杰伦"]
    [hit] = GraphRAGRetriever(store=store, similarity_top_k=1).retrieve("周杰伦")
    assert hit.node.node_id == "weird"
    assert hit.node.text == weird.text


def test_texts_embedded_shortest_first_come_back_in_their_order():
    from llama_index_graphrag_milvus.ingest.rows import embed

    texts = ["a much longer text with many words in it", "short", "mid length text", "x"]
    calls = []

    class Recording(HashEmbedding):
        def _get_text_embeddings(self, batch):
            calls.append(list(batch))
            return super()._get_text_embeddings(batch)

    model = Recording(dim=16)
    matrix = embed(model, texts, 16, 2, "texts")
    assert calls == [["x", "short"], ["mid length text", texts[0]]]  # batches of like lengths
    assert np.allclose(matrix, np.asarray([HashEmbedding(dim=16).get_text_embedding(t) for t in texts]))
