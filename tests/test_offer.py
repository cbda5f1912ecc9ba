"""What the LLM is offered (the relations of the graph ranking's best passages, a passage's statements
before its topic links) and which of its picks the graph ties to the question or to one another."""

import numpy as np

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents
from llama_index_graphrag_milvus.ranking.picks import confirmed_chain, related_picks
from llama_index_graphrag_milvus.ranking.offer import is_topic_link
from llama_index_graphrag_milvus.schema import Triplet, passage_id

from conftest import graph_llm, offered_lines
from test_rank import bridge_graph, positions
from llama_index_graphrag_milvus.schema import entity_id as e


def test_topic_links_are_the_links_the_ingest_adds_from_a_title():
    assert is_topic_link(Triplet("Daniel Bernoulli", "mentions", "Hydrodynamica"))
    assert is_topic_link(Triplet("Basel", "a city on … in Switzerland", "Rhine"))
    assert not is_topic_link(Triplet("Daniel Bernoulli", "son of", "Johann Bernoulli"))


def picks(cache, relation_ids, question_names, hub_passages=10):
    graph = cache.snapshot()
    question = [cache.entities.position(e(name)) for name in question_names]
    chosen = positions(cache, relation_ids)
    return graph, chosen, question, hub_passages


def ids(cache, found):
    return cache.relations.ids_at(np.array(found, dtype=np.int64))


def test_a_chain_from_the_question_is_confirmed_and_related():
    cache = bridge_graph()  # 1: book by ann; 2: ann born in town; 3: river crosses town; 4: other crosses elsewhere
    args = picks(cache, [1, 2, 4], ["book"])
    assert ids(cache, confirmed_chain(*args)) == [1, 2]
    assert ids(cache, related_picks(*args)) == [1, 2]  # 4 shares nothing with the question or the others


def test_picks_sharing_a_specific_entity_are_related_without_the_question():
    cache = bridge_graph()
    args = picks(cache, [2, 3], ["book"])
    assert ids(cache, confirmed_chain(*args)) == []  # neither names the question's entity
    assert ids(cache, related_picks(*args)) == [2, 3]  # they meet at town


def test_picks_meeting_only_at_a_hub_are_not_related():
    cache = bridge_graph(hub_passages=5)  # town is stated in 7 passages
    assert ids(cache, related_picks(*picks(cache, [2, 3], ["book"], hub_passages=3))) == []
    assert ids(cache, related_picks(*picks(cache, [2, 3], ["book"], hub_passages=10))) == [2, 3]


def test_a_lone_pick_is_related_only_when_it_names_the_question():
    cache = bridge_graph()
    assert ids(cache, related_picks(*picks(cache, [1], ["ann"]))) == [1]
    assert ids(cache, related_picks(*picks(cache, [3], ["ann"]))) == []


def test_the_llm_is_offered_the_top_passages_statements_before_their_topic_links(make_store):
    store = make_store()
    GraphRAGTransform(store=store)(bernoulli_documents())  # the given triplets and the text's links
    base = GraphRAGRetriever(store=store, llm=None, similarity_top_k=5).trace(EULER_QUESTION)
    node = base.nodes[0].node
    top = passage_id(node.ref_doc_id or node.node_id, node.text)  # its id in the store
    llm = graph_llm(mentions=[], chosen=[])
    retriever = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=5)
    retriever.ranker.max_offered_passages = 1
    run = retriever.trace(EULER_QUESTION)
    texts = store.describe([c.id for c in run.candidates])
    stated = [texts[c.id] for c in run.candidates if top in c.passage_ids and c.id in texts]
    lines = [line.split("] ", 1)[1] for line in offered_lines(llm.prompts[-1])]
    assert sorted(lines) == sorted(t.text for t in stated)  # every candidate of the top passage, and no other
    kinds = [is_topic_link(next(t for t in stated if t.text == line)) for line in lines]
    assert True in kinds and False in kinds, "the test needs statements and topic links in the top passage"
    assert kinds == sorted(kinds)  # its statements, then its topic links
