"""Metadata filters: compiled once (`PassageFilter`), escaped, the same meaning in Milvus and in process,
applied by the passage search and the candidate check in both adjacency modes, and kept by every ranker."""


import numpy as np
import pytest
from llama_index.core.schema import Document, TextNode
from llama_index.core.vector_stores.types import (
    ExactMatchFilter,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)

import llama_index_graphrag_milvus.milvus.search as search_module
from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform
from llama_index_graphrag_milvus.backends import Expansion
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents
from llama_index_graphrag_milvus.milvus.collections import PASSAGES
from llama_index_graphrag_milvus.milvus.filters import PassageFilter
from llama_index_graphrag_milvus.milvus.search import MilvusSearch, PassageCheck
from llama_index_graphrag_milvus.ranking import (
    ChainRanker,
    FusedRanker,
    HopRanker,
    LLMRanker,
    PPRRanker,
    RankTask,
    SimilarityRanker,
    TopicRanker,
)

from conftest import graph_llm

Op, C = FilterOperator, FilterCondition


def where(*filters, condition=C.AND):
    return MetadataFilters(filters=list(filters), condition=condition)


def f(key, value, operator=Op.EQ):
    return MetadataFilter.model_construct(key=key, value=value, operator=operator)  # unvalidated, as a user may


# compiling -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flt, expr",
    [
        (f("user", "alice"), '(exists user) and (user == "alice")'),
        (f("user", "alice", Op.NE), 'not ((exists user) and (user == "alice"))'),
        (f("n", 1, Op.GT), "(exists n) and (n > 1)"),
        (f("n", 2.5, Op.GTE), "(exists n) and (n >= 2.5)"),
        (f("n", -3, Op.LT), "(exists n) and (n < -3)"),
        (f("s", "b", Op.LTE), '(exists s) and (s <= "b")'),
        (f("user", ["a", "b"], Op.IN), '(exists user) and (user in ["a", "b"])'),
        (f("n", [1, 2.5], Op.NIN), "not ((exists n) and (n in [1.0, 2.5]))"),
        (f("tags", "x", Op.CONTAINS), '(exists tags) and (array_contains(tags, "x"))'),
        (f("tags", ["x", "y"], Op.ANY), '(exists tags) and (array_contains_any(tags, ["x", "y"]))'),
        (f("tags", [1, 2], Op.ALL), "(exists tags) and (array_contains_all(tags, [1, 2]))"),
        (f("flag", True), "(exists flag) and (flag == true)"),
        (f("user", [], Op.IN), "(exists user) and (user in [])"),
        (f("doc_id", ["d1"], Op.IN), '(doc_id in ["d1"])'),  # a field of the schema: never missing
        (ExactMatchFilter(key="user", value="bob"), '(exists user) and (user == "bob")'),
        (f("x", 1e-05), "(exists x) and (x == 1e-05)"),
    ],
)
def test_each_operator_compiles_to_a_guarded_escaped_expression(flt, expr):
    assert PassageFilter(where(flt)).expr == expr


def test_conditions_nest_and_not_means_none_holds():
    nested = where(
        f("a", 1),
        where(f("b", "x"), f("c", [1], Op.IN), condition=C.OR),
        where(f("d", 2), condition=C.NOT),
    )
    compiled = PassageFilter(nested)
    assert compiled.expr == (
        "((exists a) and (a == 1)) and (((exists b) and (b == \"x\")) or ((exists c) and (c in [1]))) and "
        "(not (((exists d) and (d == 2))))"
    )
    assert compiled.keys == ["a", "b", "c", "d"]
    assert compiled.matches({"a": 1, "b": "x", "d": 3})
    assert not compiled.matches({"a": 1, "b": "x", "d": 2})
    assert not compiled.matches({"a": 1, "b": "y", "c": 2})
    assert PassageFilter(where(f("a", 1), f("b", 2), condition=C.NOT)).matches({"a": 2})


def test_values_are_escaped_literals():
    value = 'x" or id != "\\ \n é'
    assert PassageFilter(where(f("user", value))).expr == '(exists user) and (user == "x\\" or id != \\"\\\\ \\n é")'


def test_filters_that_restrict_nothing_are_none():
    assert PassageFilter.of(None) is None
    assert PassageFilter.of(MetadataFilters(filters=[])) is None
    compiled = PassageFilter(where(f("a", 1)))
    assert PassageFilter.of(compiled) is compiled


@pytest.mark.parametrize(
    "flt, named",
    [
        (f("user", "x", Op.TEXT_MATCH), "TEXT_MATCH"),
        (f("user", "x", Op.TEXT_MATCH_INSENSITIVE), "TEXT_MATCH_INSENSITIVE"),
        (f("user", None, Op.IS_EMPTY), "IS_EMPTY"),
        (f("user", None), "None"),
        (f("user", ["a"]), "EQ takes one value"),
        (f("user", "a", Op.IN), "IN takes a list"),
        (f("tags", ["a"], Op.CONTAINS), "CONTAINS takes one value"),
        (f("tags", [], Op.ANY), "ANY needs at least one value"),
        (f("user", ["a", 1], Op.IN), "one kind"),
        (f("flag", True, Op.GT), "GT orders numbers or strings"),
        (f("n", 2**63), "64-bit"),
        (f("n", float("nan")), "finite"),
        (f("n", {"a": 1}), "type dict"),
        (f("n", [2**60 + 1, 0.5], Op.IN), "not exactly a float"),
        (f("user name", "x"), "identifier"),
        (f('user == "x" or id', "x"), "identifier"),
        (f("in", "x"), "grammar"),
        (f("Exists", "x"), "grammar"),
        (f("id", "x"), "store's own"),
        (f("text", "x"), "store's own"),
        (f("embedding", "x"), "store's own"),
    ],
)
def test_what_cannot_be_honoured_raises_naming_it(flt, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(")):
        PassageFilter(where(flt))


def test_an_empty_nested_group_raises():
    with pytest.raises(ValueError, match="nested MetadataFilters holds no filter"):
        PassageFilter(where(f("a", 1), MetadataFilters(filters=[])))


# one meaning, in Milvus and in process ------------------------------------------------------------
ROWS = [
    {"user": "alice", "n": 1, "x": 1.5, "tags": ["a", "b"], "nums": [1, 2]},
    {"user": "bob", "n": 2, "x": 2.5, "tags": ["b"], "nums": [3]},
    {"user": 'x" or id != "', "n": 3, "tags": [], "nested": {"k": "v"}},
    {"user": "é ü \\ back", "n": 10, "flag": True},
    {"other": 1, "z": None},
    {"user": "Zed", "n": -4, "x": -0.5, "flag": False},
]
#: Filters and the rows (indices of ROWS) that pass them.
TABLE = [
    (f("user", "alice"), {0}),
    (f("user", "alice", Op.NE), {1, 2, 3, 4, 5}),  # a passage without the key passes NE
    (f("n", 1, Op.GT), {1, 2, 3}),
    (f("n", 2.0, Op.GTE), {1, 2, 3}),
    (f("x", 2, Op.LT), {0, 5}),
    (f("x", 1.5, Op.LTE), {0, 5}),
    (f("user", "b", Op.GT), {1, 2, 3}),  # strings order as strings (by code point)
    (f("user", "é", Op.LT), {0, 1, 2, 5}),
    (f("user", ["alice", "bob"], Op.IN), {0, 1}),
    (f("user", ["alice"], Op.NIN), {1, 2, 3, 4, 5}),
    (f("n", [1, 2.5, 10], Op.IN), {0, 3}),
    (f("user", [], Op.IN), set()),
    (f("user", [], Op.NIN), {0, 1, 2, 3, 4, 5}),
    (f("tags", "b", Op.CONTAINS), {0, 1}),
    (f("nums", 2, Op.CONTAINS), {0}),
    (f("user", "alice", Op.CONTAINS), set()),  # not a list
    (f("tags", ["a", "zz"], Op.ANY), {0}),
    (f("tags", ["a", "b"], Op.ALL), {0}),
    (f("nums", [1.0, 3.0], Op.ANY), {0, 1}),
    (f("flag", True), {3}),
    (f("flag", True, Op.NE), {0, 1, 2, 4, 5}),
    (f("z", 1), set()),  # null is no value
    (f("z", 1, Op.NE), {0, 1, 2, 3, 4, 5}),
    (f("n", "1"), set()),  # a string is not a number
    (f("user", 'x" or id != "'), {2}),
    (f("user", "é ü \\ back"), {3}),
    (f("n", 9), set()),
    (where(f("n", 1, Op.GT), f("x", 2, Op.LT), condition=C.OR), {0, 1, 2, 3, 5}),
    (where(f("n", 1, Op.GT), where(f("user", "bob"), f("n", 10), condition=C.OR)), {1, 3}),
    (where(f("user", "alice"), f("n", 3), condition=C.NOT), {1, 3, 4, 5}),
    (where(f("n", 2, Op.GTE), condition=C.NOT), {0, 4, 5}),
]


@pytest.fixture(scope="module")
def table_store(tmp_path_factory):
    from llama_index_graphrag_milvus import MilvusGraphStore
    from llama_index_graphrag_milvus.embeddings import HashEmbedding

    store = MilvusGraphStore(uri=str(tmp_path_factory.mktemp("table") / "t.db"), embed_model=HashEmbedding(dim=64))
    nodes = [TextNode(id_=f"row{i}", text=f"Row {i} of the table.", metadata=m) for i, m in enumerate(ROWS)]
    ids = store.add(nodes, [[] for _ in nodes])
    yield store, ids
    store.close()


@pytest.mark.parametrize("flt, rows", TABLE, ids=[str(i) for i in range(len(TABLE))])
def test_milvus_and_the_check_by_key_agree_with_the_meaning(table_store, flt, rows):
    store, ids = table_store
    compiled = PassageFilter(flt if isinstance(flt, MetadataFilters) else where(flt))
    expected = {ids[i] for i in rows}
    in_milvus = {row["id"] for row in store.collections.query(PASSAGES, compiled.expr, ["id"])}
    assert in_milvus == expected
    assert PassageCheck(store.collections, compiled)(ids) == expected
    read = store.collections.get(PASSAGES, ids, ["id", *compiled.keys])
    assert {row["id"] for row in read if compiled.matches(row)} == expected


def test_the_document_id_is_filterable(table_store):
    store, ids = table_store
    for key in ("doc_id", "ref_doc_id", "document_id"):
        check = PassageCheck.of(store.collections, where(f(key, ["row1", "row4"], Op.IN)))
        assert check(ids) == {ids[1], ids[4]}


def test_unknown_or_deleted_passages_do_not_pass(table_store):
    store, ids = table_store
    check = PassageCheck.of(store.collections, where(f("user", "alice", Op.NE)))
    assert check(["no-such-passage", ids[1]]) == {ids[1]}


# the passage search, in both adjacency modes -------------------------------------------------------
OWNERS = ["alice", "bob", "carol"]


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """60 passages, `owner` one of three and `rank` 0..59, in a memory-mode and a Milvus-mode store."""
    from llama_index_graphrag_milvus import MilvusGraphStore
    from llama_index_graphrag_milvus.embeddings import HashEmbedding

    root = tmp_path_factory.mktemp("many")
    stores = {
        "memory": MilvusGraphStore(uri=str(root / "memory.db"), embed_model=HashEmbedding(dim=64)),
        "milvus": MilvusGraphStore(uri=str(root / "milvus.db"), embed_model=HashEmbedding(dim=64), adjacency="milvus"),
    }
    words = ["river", "bridge", "mountain", "valley", "harbour", "tower", "forest", "desert", "island", "canyon"]
    nodes = [
        TextNode(id_=f"p{i}", text=f"The {words[i % 10]} near the {words[(i * 7) % 10]} number {i}.",
                 metadata={"owner": OWNERS[i % 3], "rank": i})
        for i in range(60)
    ]
    for store in stores.values():
        store.add(nodes, [[] for _ in nodes])
    yield stores
    for store in stores.values():
        store.close()


def _brute_force(store, vector, check, top_k):
    """The `top_k` passing passages by cosine, ties by id: what a filtered search must give."""
    ids = [row["id"] for row in store.collections.query(PASSAGES, 'id != ""', ["id"])]
    cosines = store.search.passage_similarities(vector, sorted(check(ids)))
    return sorted(cosines, key=lambda p: (-cosines[p], p))[:top_k]


@pytest.mark.parametrize("mode", ["memory", "milvus"])
@pytest.mark.parametrize("fetch, check_max", [(16, 1024), (1, 1024), (16, 0)])  # one round, many rounds, Milvus'
def test_the_filtered_passage_search_is_exact(many, mode, fetch, check_max, monkeypatch):
    monkeypatch.setattr(search_module, "FILTER_FETCH", fetch)
    monkeypatch.setattr(search_module, "FILTER_CHECK_MAX", check_max)
    store = many[mode]
    filters = [where(f("owner", "bob")), where(f("rank", 50, Op.GTE)), where(f("rank", [3, 33, 59], Op.IN)),
               where(f("doc_id", ["p7", "p8"], Op.IN)), where(f("owner", "nobody"))]
    for question in ("a river near the tower", "island harbour", "number 42"):
        vector = store.embed_model.get_query_embedding(question)
        for flt in filters:
            check = PassageCheck.of(store.collections, flt)
            found = store.search.passages(vector, 4, check)
            assert [p for p, _ in found] == _brute_force(store, vector, check, 4)
            cosines = store.search.passage_similarities(vector, [p for p, _ in found])
            assert all(score == pytest.approx(cosines[p], abs=1e-6) for p, score in found)


def test_both_modes_search_the_same_passages(many):
    for question in ("a river near the tower", "desert canyon"):
        for flt in (where(f("owner", "carol")), where(f("rank", 10, Op.LT), f("owner", "alice", Op.NE))):
            found = [
                [p for p, _ in s.search.passages(s.embed_model.get_query_embedding(question), 5,
                                                    PassageCheck.of(s.collections, flt))]
                for s in many.values()
            ]
            assert found[0] == found[1] and len(found[0]) == 5


def test_without_filters_the_search_is_unchanged(many):
    store = many["memory"]
    vector = store.embed_model.get_query_embedding("island harbour")
    assert store.search.passages(vector, 5) == store.search.passages(vector, 5, None)


# injections widen nothing --------------------------------------------------------------------------
INJECTIONS = [
    'alice" or owner != "',
    'alice\\" or owner != \\"',
    "alice' or owner != '",
    'alice") or (owner != "',
    '"] or id != ["',
    'x" || true || "',
    "alice\\",
    '\\"',
    'alice\n or owner != "x',
    'alicé\u2028" or 1 == 1 or "',
    ") or exists owner or (",
    "alice\x00",
]


def _two_documents():
    return [
        Document(id_="alpha", text="Alpha Corp builds bridges. Alpha Corp is based in Basel.",
                 metadata={"owner": "alice", "triplets": [["Alpha Corp", "builds", "bridges"], ["Alpha Corp", "based in", "Basel"]]}),
        Document(id_="beta", text="Beta Ltd builds bridges too. Beta Ltd is based in Basel as well.",
                 metadata={"owner": "bob", "triplets": [["Beta Ltd", "builds", "bridges"], ["Beta Ltd", "based in", "Basel"]]}),
    ]


@pytest.fixture(scope="module", params=["memory", "milvus"])
def two_docs(request, tmp_path_factory):
    from llama_index_graphrag_milvus import MilvusGraphStore
    from llama_index_graphrag_milvus.embeddings import HashEmbedding

    uri = str(tmp_path_factory.mktemp("two") / "two.db")
    store = MilvusGraphStore(uri=uri, embed_model=HashEmbedding(dim=64), adjacency=request.param)
    GraphRAGTransform(store=store, llm=None)(_two_documents())
    yield store
    store.close()


def _everything(store, flt):
    """What each way of reading the store with `flt` lets through: passage ids (the vector store's
    nodes: their owners)."""
    check = PassageCheck.of(store.collections, flt)
    vector = store.embed_model.get_query_embedding("Who builds bridges in Basel?")
    ids = [row["id"] for row in store.collections.query(PASSAGES, 'id != ""', ["id"])]
    found = {
        "search": {p for p, _ in store.search.passages(vector, 10, check)},
        "milvus_search": {p for p, _ in MilvusSearch(store.collections).passages(vector, 10, check)},
        "check": check(ids),
        "query": {row["id"] for row in store.collections.query(PASSAGES, check.expr, ["id"])},
        "vector_store": {n.node.metadata["owner"] for n in _vector_store_hits(store, vector, flt)},
        "get_nodes": {n.metadata["owner"] for n in store.vector_store.get_nodes(filters=flt)},
    }
    return found


def _vector_store_hits(store, vector, flt):
    from llama_index.core.schema import NodeWithScore

    result = store.vector_store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=10, filters=flt))
    return [NodeWithScore(node=n) for n in result.nodes]


def test_a_filter_passes_one_owner_only(two_docs):
    alice = set(two_docs.passage_ids("alpha"))
    found = _everything(two_docs, where(f("owner", "alice")))
    assert {k: v for k, v in found.items() if k not in ("vector_store", "get_nodes")} == dict.fromkeys(
        ("search", "milvus_search", "check", "query"), alice)
    assert found["vector_store"] == found["get_nodes"] == {"alice"}


@pytest.mark.parametrize("value", INJECTIONS)
def test_an_injected_value_widens_nothing(two_docs, value):
    for flt in (
        where(f("owner", value)),
        where(f("owner", [value, "mallory"], Op.IN)),
        where(f("owner", "alice"), f("owner", value), condition=C.AND),
        where(f("owner", "nobody"), where(f("owner", value), f("owner", "nobody")), condition=C.OR),
    ):
        assert all(not found for found in _everything(two_docs, flt).values()), flt


def test_an_injected_key_is_refused(two_docs):
    for key in ('owner == "alice" or owner', "owner) or (1", "$meta", 'owner["x"]', "owner\n"):
        with pytest.raises(ValueError, match="identifier"):
            PassageCheck.of(two_docs.collections, where(f(key, "alice")))


def test_the_vector_store_refuses_unescaped_scalar_filters(two_docs):
    query = VectorStoreQuery(query_embedding=[0.1] * 64, similarity_top_k=3)
    with pytest.raises(ValueError, match="milvus_scalar_filters"):
        two_docs.vector_store.query(query, milvus_scalar_filters=[{"key": "owner", "value": "x", "operator": "ARRAY_CONTAINS({key}, {value})"}])
    assert two_docs.vector_store.get_nodes(node_ids=[]) == []
    assert two_docs.vector_store.get_nodes(node_ids=['x" or id != "']) == []


# the rankers see passing passages only ---------------------------------------------------------------
RANKERS = [FusedRanker(), ChainRanker(), PPRRanker(), HopRanker(), TopicRanker(), SimilarityRanker()]


@pytest.fixture(scope="module", params=["memory", "milvus"])
def bernoulli(request, tmp_path_factory):
    """The Bernoulli corpus, each document its own passage with its title in metadata."""
    from llama_index_graphrag_milvus import MilvusGraphStore
    from llama_index_graphrag_milvus.embeddings import HashEmbedding

    uri = str(tmp_path_factory.mktemp("bernoulli") / "b.db")
    store = MilvusGraphStore(uri=uri, embed_model=HashEmbedding(dim=64), adjacency=request.param)
    GraphRAGTransform(store=store, llm=None)(bernoulli_documents())
    yield store
    store.close()


def _task(store, question, check):
    """The ranking task of a filtered retrieval, step by step as the retriever takes them."""
    vector = store.embed_model.get_query_embedding(question)
    mentions = store.match_entities(question)
    entities = [e for hits in store.search.entities(store.embed_model.get_text_embedding_batch(mentions), 3) for e in hits]
    relations = store.search.relations(vector, 5)
    dense = store.search.passages(vector, 3, check)
    hood = store.backend.expand(Expansion(vector, [e.id for e in entities], [r for r, _ in relations], [p for p, _ in dense], degree=2))
    restricted = hood.restricted(check) if check is not None else hood
    task = RankTask(query=question, vector=vector, neighbourhood=restricted, dense=dense, seed_entities=entities,
                    seed_relations=relations, top_n=3, dense_seed_k=3, store=store)
    return task, hood


@pytest.mark.parametrize("title", ["Leonhard Euler", "Basel", "Jakob Bernoulli"])
def test_every_ranker_ranks_passing_passages_only(bernoulli, title):
    check = PassageCheck.of(bernoulli.collections, where(f("title", title)))
    passing = check([row["id"] for row in bernoulli.collections.query(PASSAGES, 'id != ""', ["id"])])
    assert len(passing) == 1
    llm = graph_llm(mentions=["Euler", "Johann Bernoulli"], chosen=["son of", "taught", "studied under"])
    for question in (EULER_QUESTION, "Who taught Leonhard Euler at the University of Basel?"):
        task, unrestricted = _task(bernoulli, question, check)
        assert {p for c in unrestricted.candidates() for p in c.passage_ids} - passing  # the filter has work to do
        hood = task.neighbourhood
        assert {p for c in hood.candidates() for p in c.passage_ids} <= passing
        assert [c.id for c in hood.candidates()] == [c.id for c in unrestricted.candidates()]  # the walk is the same
        assert all(set(hood.passages_of(r)) <= passing for r in hood.relation_ids())
        for pid in passing:
            assert set(hood.linked_passages(pid)) <= passing
        assert set(hood.passages_about(hood.cache.entities.ids_array().tolist())) <= passing
        assert np.array_equal(hood.graph.passage_counts, unrestricted.graph.passage_counts)  # the hub rule stays
        for ranker in [*RANKERS, LLMRanker(llm, trust="always"), LLMRanker(llm)]:
            ranked = {p for p, _ in ranker.rank(task).passages}
            assert ranked <= passing, (ranker, title)


# the retriever ------------------------------------------------------------------------------------
QUESTIONS = [EULER_QUESTION, "Who taught Leonhard Euler?", "What did Jakob Bernoulli discover?", "Where is Basel?"]


@pytest.mark.parametrize("reranker", ["fused", "chain", "ppr", "similarity", "hop", "topic", "llm"])
def test_a_retriever_filtered_to_one_document_returns_only_its_passages(bernoulli, reranker):
    llm = graph_llm(mentions=["Euler", "Johann Bernoulli"], chosen=["son of", "taught"]) if reranker == "llm" else None
    for document in bernoulli_documents():
        only = where(f("title", document.metadata["title"]))
        retriever = GraphRAGRetriever(store=bernoulli, similarity_top_k=5, expansion_degree=2, llm=llm, filters=only,
                                      ranker="fused" if reranker == "llm" else reranker)
        for question in QUESTIONS:
            run = retriever.trace(question)
            assert [n.node.node_id for n in run.nodes] == [document.doc_id], (question, document.doc_id)
            assert {p for c in run.candidates for p in c.passage_ids} <= set(bernoulli.passage_ids(document.doc_id))
            assert {p for p, _ in run.dense} <= set(bernoulli.passage_ids(document.doc_id))


@pytest.mark.parametrize("value", INJECTIONS[:6])
def test_a_retriever_with_an_injected_value_returns_nothing(two_docs, value):
    retriever = GraphRAGRetriever(store=two_docs, similarity_top_k=5, llm=None, filters=where(f("owner", value)))
    assert retriever.retrieve("Who builds bridges in Basel?") == []


def test_a_retriever_refuses_what_it_cannot_honour_before_any_search(two_docs):
    before = sum(two_docs.collections.calls.values())
    for flt in (f("owner", "x", Op.TEXT_MATCH), f("owner", None), f("owner name", "x"), f("owner", [1, "a"], Op.IN)):
        with pytest.raises(ValueError):
            GraphRAGRetriever(store=two_docs, llm=None, filters=where(flt))
    assert sum(two_docs.collections.calls.values()) == before


def test_the_index_routes_filters_to_its_retriever_and_query_engine(bernoulli):
    from llama_index_graphrag_milvus import GraphRAGIndex

    index = GraphRAGIndex.from_existing(store=bernoulli, llm=None)
    only = where(f("title", "Daniel Bernoulli"))
    assert [n.node.node_id for n in index.as_retriever(similarity_top_k=5, filters=only).retrieve(EULER_QUESTION)] == ["bernoulli-daniel"]
    response = index.as_query_engine(similarity_top_k=5, filters=only).query(EULER_QUESTION)
    assert [n.node.node_id for n in response.source_nodes] == ["bernoulli-daniel"]
