"""The no-LLM graph rankers as pure functions over small graphs computed by hand."""

import numpy as np
import pytest

from llama_index_graphrag_milvus.schema import entity_id as e
from llama_index_graphrag_milvus.graph.cache import GraphCache
from llama_index_graphrag_milvus.ranking.chain import chain_scores, passage_scores
from llama_index_graphrag_milvus.ranking.ppr import entity_passage_subgraph, personalized_pagerank, specificity


def bridge_graph(hub_passages: int = 0):
    """Q asks for X's birthplace river. r_book: (Book, by, Ann) in p_book; r_born: (Ann, born in, Town) in
    p_ann; r_river: (River, crosses, Town) in p_town; r_other: (Other, crosses, Elsewhere) in p_other.
    `hub_passages` extra passages all mention Town, making it a hub."""
    cache = GraphCache()
    cache.add_relations([(1, e("book"), e("ann")), (2, e("ann"), e("town")), (3, e("river"), e("town")), (4, e("other"), e("elsewhere"))])
    cache.add_passages([("p_book", [1]), ("p_ann", [2]), ("p_town", [3]), ("p_other", [4])])
    for i in range(hub_passages):
        cache.add_relations([(100 + i, e(f"thing{i}"), e("town"))])
        cache.add_passages([(f"p_hub{i}", [100 + i])])
    return cache


def positions(cache, ids):
    return np.array([cache.relations.position(i) for i in ids])


def test_a_relation_scores_its_similarity_plus_its_best_neighbour():
    cache = bridge_graph()
    graph = cache.snapshot()
    rels = positions(cache, [1, 2, 3, 4])
    sims = np.array([0.9, 0.1, 0.5, 0.6])
    scores, best = chain_scores(graph, rels, sims, hub_passages=10)
    # 1 chains with 2 (ann); 2 with 1 (ann) or 3 (town): best is 1; 3 with 2; 4 is alone
    assert scores.tolist() == pytest.approx([1.0, 1.0, 0.6, 0.6])
    assert best.tolist() == [1, 0, 1, -1]


def test_hub_entities_do_not_chain():
    cache = bridge_graph(hub_passages=5)  # town is now stated in 7 passages
    graph = cache.snapshot()
    rels = positions(cache, [2, 3])
    scores, best = chain_scores(graph, rels, np.array([0.1, 0.5]), hub_passages=3)
    assert scores.tolist() == pytest.approx([0.1, 0.5]) and best.tolist() == [-1, -1]
    scores, _ = chain_scores(graph, rels, np.array([0.1, 0.5]), hub_passages=10)
    assert scores.tolist() == pytest.approx([0.6, 0.6])


def test_synonyms_chain_relations_across_spellings():
    cache = GraphCache()
    cache.add_relations([(1, e("book"), e("Ann Lee")), (2, e("A. Lee"), e("town"))])
    cache.add_passages([("p1", [1]), ("p2", [2])])
    rels = positions(cache, [1, 2])
    sims = np.array([0.8, 0.3])
    unlinked, _ = chain_scores(cache.snapshot(), rels, sims, hub_passages=10)
    cache.add_links(np.array([e("Ann Lee")]), np.array([e("A. Lee")]), np.array([0.95]))
    linked, best = chain_scores(cache.snapshot(), rels, sims, hub_passages=10)
    assert unlinked.tolist() == pytest.approx([0.8, 0.3])
    assert linked.tolist() == pytest.approx([1.1, 1.1]) and best.tolist() == [1, 0]


def test_each_passage_takes_its_best_relation():
    cache = GraphCache()
    cache.add_relations([(1, e("a"), e("b")), (2, e("b"), e("c")), (3, e("c"), e("d"))])
    cache.add_passages([("p1", [1, 2]), ("p2", [3]), ("p3", [2, 3])])
    graph = cache.snapshot()
    rels = positions(cache, [1, 2, 3])
    passages, scores, via = passage_scores(graph, rels, np.array([0.2, 0.7, 0.4]))
    named = {cache.passages.ids_at([p])[0]: (s, int(v)) for p, s, v in zip(passages, scores, via)}
    assert named == {"p1": (pytest.approx(0.7), 1), "p2": (pytest.approx(0.4), 2), "p3": (pytest.approx(0.7), 1)}


def test_personalized_pagerank_spreads_from_the_seed_along_edges():
    cache = bridge_graph()
    graph = cache.snapshot()
    rels = positions(cache, [1, 2, 3, 4])
    sub = entity_passage_subgraph(graph, rels)
    ents, _, pas = sub.slices()
    seed = np.zeros(sub.adjacency.shape[0])
    seed[list(sub.entities).index(cache.entities.position(e("book")))] = 1.0
    rank = personalized_pagerank(sub.adjacency, seed)
    assert rank.sum() == pytest.approx(1.0)
    by_passage = dict(zip((cache.passages.ids_at([p])[0] for p in sub.passages), rank[pas]))
    assert by_passage["p_book"] > by_passage["p_ann"] > by_passage["p_town"] > by_passage.get("p_other", 0) == 0
    assert personalized_pagerank(sub.adjacency, np.zeros_like(seed)).sum() == 0


def test_specificity_is_one_over_the_passages_an_entity_appears_in():
    cache = bridge_graph(hub_passages=3)
    graph = cache.snapshot()
    town, book = cache.entities.position(e("town")), cache.entities.position(e("book"))
    assert specificity(graph.passage_counts[np.array([town, book])]).tolist() == pytest.approx([1 / 5, 1.0])
