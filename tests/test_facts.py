"""Every row is a fact written once: a write upserts each row once and reads none back to change it; the
order documents come in changes no row and no answer; a store with documents deleted answers as one
built without them, and after `compact()` holds its rows; the statements say what the passages say; and
constructors refuse the keywords they do not know."""

import pytest

from llama_index_graphrag_milvus import GraphRAGTransform, GraphStoreError, MilvusGraphStore
from llama_index_graphrag_milvus.bench.demo import load_sample
from llama_index_graphrag_milvus.ingest.rows import statement_rows
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, LINKS, PASSAGES, RELATIONS, STATEMENTS
from llama_index_graphrag_milvus.schema import Triplet, chunked

from facts import FACTS, answers, rows, synonyms

#: Low enough that the embedding links many names (SpreadEmbedding: no tied cosines).
THRESHOLD = 0.5
SAMPLE = load_sample()
QUESTIONS = [q["question"] for q in SAMPLE.questions]


def ingest(store, nodes, chunk=40):
    transform = GraphRAGTransform(store=store)
    for batch in chunked(list(nodes), chunk):
        transform(list(batch))


def spelled_alike(found):
    """`rows` with names compared case-folded: which spelling of a name is written first depends on the
    order of the documents."""
    for kind in (ENTITIES, RELATIONS):
        for row in found[kind].values():
            for name in ("name", "subject", "predicate", "object"):
                if name in row:
                    row[name] = row[name].casefold()
    return found


def test_a_write_upserts_each_row_once_and_reads_none_back(make_store, spread_embed, monkeypatch):
    store = make_store(spread_embed, synonym_threshold=THRESHOLD)
    upsert, query, written, read = store.collections.upsert, store.collections.query, {}, []

    def counting(kind, batch):
        for row in batch:
            written.setdefault(kind, []).append(row["id"])
        upsert(kind, batch)

    def reading(kind, filter, fields, *args, **kwargs):
        read.append((kind, tuple(fields)))
        return query(kind, filter, fields, *args, **kwargs)

    monkeypatch.setattr(store.collections, "upsert", counting)
    monkeypatch.setattr(store.collections, "query", reading)
    ingest(store, SAMPLE.nodes)
    for kind in FACTS:
        assert len(written[kind]) == len(set(written[kind])), f"a row of {kind} was written twice"
    assert len(written[PASSAGES]) == len(SAMPLE.nodes) and written[LINKS]
    # the only reads: the first build of the caches (on Lite the writer asks them what is stored), none a write
    assert {kind for kind, _ in read} <= {ENTITIES, RELATIONS, PASSAGES, LINKS}
    assert len(read) <= 8, "\n".join(map(str, read))


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_the_order_of_the_documents_changes_no_row_and_no_answer(make_store, spread_embed, tmp_path, adjacency):
    stores = [make_store(spread_embed, str(tmp_path / f"{name}.db"), synonym_threshold=THRESHOLD) for name in "ab"]
    ingest(stores[0], SAMPLE.nodes, chunk=40)
    ingest(stores[1], SAMPLE.nodes[::-1], chunk=25)
    assert spelled_alike(rows(stores[0])) == spelled_alike(rows(stores[1]))
    assert synonyms(stores[0]) == synonyms(stores[1])
    reopened = []
    for i, store in enumerate(stores):
        store.close()
        reopened.append(make_store(spread_embed, str(tmp_path / f"{'ab'[i]}.db"), synonym_threshold=THRESHOLD,
                                   adjacency=adjacency))
    assert answers(reopened[0], QUESTIONS) == answers(reopened[1], QUESTIONS)


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_deleted_documents_leave_the_answers_and_after_compact_the_rows_of_a_store_built_without_them(
    make_store, spread_embed, tmp_path, adjacency
):
    gone = {node.node_id for node in SAMPLE.nodes[::10]}  # a tenth of the documents
    kept = [node for node in SAMPLE.nodes if node.node_id not in gone]
    settings = dict(synonym_threshold=THRESHOLD, adjacency=adjacency)
    full = make_store(spread_embed, str(tmp_path / "full.db"), **settings)
    ingest(full, SAMPLE.nodes)
    for doc in sorted(gone):
        full.delete(doc)
    without = make_store(spread_embed, str(tmp_path / "without.db"), **settings)
    ingest(without, kept)

    assert answers(full, QUESTIONS) == answers(without, QUESTIONS)
    assert synonyms(full) == synonyms(without)
    assert full.count()[RELATIONS] > without.count()[RELATIONS]  # the unstated ones, until compact

    deleted = full.compact()
    assert deleted[RELATIONS] and deleted[ENTITIES] and not deleted[STATEMENTS]
    assert spelled_alike(rows(full)) == spelled_alike(rows(without))
    assert full.compact() == {kind: 0 for kind in deleted}
    assert answers(full, QUESTIONS) == answers(without, QUESTIONS)


def test_the_statements_say_what_the_passages_say(make_store):
    store = make_store()
    ingest(store, SAMPLE.nodes[:60])
    node = SAMPLE.nodes[3].model_copy()
    node.metadata = {**node.metadata, "triplets": [["Ann", "met", "Bo"], *node.metadata["triplets"][:1]]}
    store.add([node])  # restated with other relations: its statements follow
    store.delete(SAMPLE.nodes[5].node_id)
    triplets = {row["id"]: Triplet(row["subject"], row["predicate"], row["object"])
                for row in rows(store, [RELATIONS])[RELATIONS].values()}
    expected = {}
    for row in rows(store, [PASSAGES])[PASSAGES].values():
        for statement in statement_rows(row["id"], [triplets[int(r)] for r in row["relation_ids"]]):
            expected[statement["id"]] = {**statement, "embedding": [0.0, 0.0]}
    assert rows(store, [STATEMENTS])[STATEMENTS] == expected


def test_unknown_keywords_are_refused_naming_the_right_one(make_store, tmp_path, hash_embed):
    with pytest.raises(TypeError, match="'prefix': did you mean 'collection_prefix'"):
        MilvusGraphStore(uri=str(tmp_path / "a.db"), embed_model=hash_embed, prefix="tenant_a")
    with pytest.raises(TypeError, match=r"'db_name' goes to client_kwargs"):
        MilvusGraphStore(uri=str(tmp_path / "a.db"), embed_model=hash_embed, db_name="other")
    store = make_store()
    with pytest.raises(TypeError, match=r"'batchsize': did you mean 'batch_size', of MilvusGraphStore\(batch_size=...\)"):
        GraphRAGTransform(store=store, batchsize=3)
    with pytest.raises(TypeError, match="'text_link': did you mean 'text_links'"):
        GraphRAGTransform(store=store, text_link=False)
    assert store.client.list_collections()  # the refused store wrote nothing, the open one still works


def test_a_store_of_the_old_layout_is_refused_with_the_fix_and_overwrite_drops_it(make_store, tmp_path):
    uri = str(tmp_path / "old.db")
    store = make_store(uri=uri)
    store.client.create_collection("graphrag_adjacency", dimension=2)  # what version 0.1.0 left beside the rest
    store.close()
    with pytest.raises(GraphStoreError, match=r"graphrag_adjacency.*version 0\.1\.0.*overwrite=True"):
        make_store(uri=uri)
    store = make_store(uri=uri, overwrite=True)
    assert "graphrag_adjacency" not in store.client.list_collections()


def test_a_new_entity_keeps_its_best_link_search_links_and_no_more():
    import numpy as np

    from llama_index_graphrag_milvus.ingest.links import LINK_SEARCH, new_links

    rng = np.random.default_rng(0)
    base = rng.standard_normal(16)
    base /= np.linalg.norm(base)
    near = {}
    for i in range(LINK_SEARCH + 8):  # stored entities ever farther from the new one, all past the threshold
        v = base + 0.01 * (i + 1) * rng.standard_normal(16)
        near[1000 + i] = v / np.linalg.norm(v)

    class Search:
        def similar_entities(self, vectors, threshold, top_k):
            scored = sorted(((float(v @ vectors[0]), e) for e, v in near.items()), reverse=True)
            return [{e: s for s, e in scored[:top_k] if s >= threshold}]

        def entity_vectors(self, ids):
            return {e: near[e].tolist() for e in ids}

    rows = new_links(Search(), 0.5, [1], base[None, :])
    best = sorted(near, key=lambda e: -float(near[e] @ base))[:LINK_SEARCH]
    assert len(rows) == LINK_SEARCH and {r["a"] if r["b"] == 1 else r["b"] for r in rows} == set(best)
