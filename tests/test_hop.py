"""The hop from the top dense passage to the passages about the names it states (a bridge question's
second passage), in both graph backends and through the retriever."""

import pytest
from llama_index.core.schema import TextNode

from llama_index_graphrag_milvus import GraphRAGRetriever, Triplet
from llama_index_graphrag_milvus.ranking import HopRanker

from conftest import ScriptedLLM, graph_llm

PASSAGES = {
    "grace": (
        "Grace Krilanovich wrote The Orange Eats Creeps. Born in Santa Cruz, she saw The Orange Eats Creeps "
        "published by Two Dollar Radio.",
        [("Grace Krilanovich", "wrote", "The Orange Eats Creeps"), ("Grace Krilanovich", "was born in", "Santa Cruz"),
         ("The Orange Eats Creeps", "was published by", "Two Dollar Radio")],
    ),
    # about Two Dollar Radio: every relation names it
    "radio": (
        "An independent press based in Columbus, Ohio, founded in 2005.",
        [("Two Dollar Radio", "is based in", "Columbus, Ohio"), ("Two Dollar Radio", "was founded in", "2005")],
    ),
    # names Two Dollar Radio once among other things: not about it
    "fair": (
        "Columbus hosts the Ohio State Fair, begun in 1850; Two Dollar Radio has a stand there.",
        [("Columbus, Ohio", "hosts", "Ohio State Fair"), ("Ohio State Fair", "began in", "1850"),
         ("Two Dollar Radio", "has a stand at", "Ohio State Fair")],
    ),
}


def stored(store):
    nodes = [TextNode(id_=name, text=text) for name, (text, _) in PASSAGES.items()]
    triplets = [[Triplet(*t) for t in rows] for _, rows in PASSAGES.values()]
    return dict(zip(PASSAGES, store.add(nodes, triplets=triplets)))


@pytest.mark.parametrize("adjacency", ["memory", "milvus"])
def test_a_passage_links_to_the_passages_about_the_names_it_states(make_store, adjacency):
    store = make_store(adjacency=adjacency)
    pid = stored(store)
    assert store.linked_passages(pid["grace"]) == [pid["radio"]]  # not "fair": it names the press once in 3
    assert store.linked_passages(pid["radio"]) == []  # grace and fair are about other names
    assert store.linked_passages(pid["fair"]) == [pid["radio"]]
    assert store.linked_passages(pid["grace"], hub_passages=2) == []  # Two Dollar Radio is in 3 passages: a hub
    assert store.linked_passages("no such passage") == []


def test_after_a_delete_the_link_is_gone(make_store):
    store = make_store()
    pid = stored(store)
    store.delete("radio")
    assert store.linked_passages(pid["grace"]) == []


def test_the_hop_ranks_the_passage_the_top_passage_names_second(make_store):
    store = make_store()
    pid = stored(store)
    question = "Where is the press that published Grace Krilanovich's The Orange Eats Creeps?"
    run = GraphRAGRetriever(store=store, similarity_top_k=3, reranker=HopRanker()).trace(question)
    assert run.dense[0][0] == pid["grace"] and [p for p, _ in run.dense].index(pid["radio"]) == 2  # dense: last
    assert [n.node.node_id for n in run.nodes][:2] == ["grace", "radio"]


def test_an_llms_pick_takes_the_hops_place_and_a_failed_answer_keeps_it(make_store):
    store = make_store()
    stored(store)
    question = "Where is the press that published Grace Krilanovich's The Orange Eats Creeps?"

    def order(llm):
        run = GraphRAGRetriever(store=store, similarity_top_k=3, llm=llm).trace(question)
        return [n.node.node_id for n in run.nodes]

    assert order(None)[:2] == ["grace", "radio"]  # no LLM: the hop puts the press second
    picked = order(graph_llm(mentions=[], chosen=["has a stand at"]))
    assert sorted(picked[:2]) == ["fair", "grace"]  # the LLM's pick, not the hop, beside the top passage
    garbage = ScriptedLLM(script=lambda prompt: "no JSON here", prompts=[])
    assert order(garbage) == order(None)  # an unusable answer: exactly the ranking without an LLM
