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


def stored(store, passages=PASSAGES):
    nodes = [TextNode(id_=name, text=text) for name, (text, _) in passages.items()]
    triplets = [[Triplet(*t) for t in rows] for _, rows in passages.values()]
    return dict(zip(passages, store.add(nodes, triplets=triplets)))


BACKENDS = pytest.mark.parametrize("adjacency", ["memory", "milvus"])


@BACKENDS
def test_a_passage_links_to_the_passages_about_the_names_it_states(make_store, adjacency):
    store = make_store(adjacency=adjacency)
    pid = stored(store)
    assert store.linked_passages(pid["grace"]) == [pid["radio"]]  # not "fair": it names the press once in 3
    assert store.linked_passages(pid["radio"]) == []  # grace and fair are about other names
    assert store.linked_passages(pid["fair"]) == [pid["radio"]]
    assert store.linked_passages("no such passage") == []


@BACKENDS
def test_a_hub_is_not_followed(make_store, adjacency):
    store = make_store(adjacency=adjacency)
    fans = {f"fan{i}": (f"Fan {i} of the press.", [("Two Dollar Radio", "is read by", f"Fan {i}"),
                                                   (f"Fan {i}", "lives in", f"Town {i}"), (f"Fan {i}", "was born in", "1990")])
            for i in range(20)}
    pid = stored(store, {**PASSAGES, **fans})  # the press is now stated in 23 passages: more than 20
    assert store.linked_passages(pid["grace"]) == []
    assert store.linked_passages(pid["grace"], hub_fraction=1.0) == [pid["radio"]]  # 23 passages of 23: no hub
    assert store.linked_passages(pid["fan0"]) == []  # Fan 0 is about itself; nothing is about Town 0 or 1990


def test_a_hub_costs_a_bounded_read_in_milvus_mode(make_store, monkeypatch):
    """A hub's passages are counted on a slice of the slots first: telling it is a hub reads a share of
    its statements, not all of them (here the cap is 4 passages, as it is 200 in a big store)."""
    from llama_index_graphrag_milvus.backends import base, milvus
    from llama_index_graphrag_milvus.schema import entity_id

    for module in (base, milvus):
        monkeypatch.setattr(module, "HUB_CAP", 4.0)
    store = make_store(adjacency="milvus")
    fans = {f"fan{i}": (f"Fan {i} of the press.", [("Two Dollar Radio", "is read by", f"Fan {i}")]) for i in range(300)}
    pid = stored(store, {**PASSAGES, **fans})
    hub, read, where = entity_id("Two Dollar Radio"), [], store.collections.where
    monkeypatch.setattr(store.collections, "where", lambda kind, tests, fields: read.extend(found := where(kind, tests, fields)) or found)
    assert store.linked_passages(pid["grace"]) == []
    hub_rows = sum(hub in (row.get("subject_id"), row.get("object_id")) for row in read)
    assert 0 < hub_rows < 100  # of its 303 statements


@BACKENDS
def test_an_entity_in_at_most_20_passages_is_never_a_hub(make_store, adjacency):
    store = make_store(adjacency=adjacency)
    pid = stored(store)
    assert store.linked_passages(pid["grace"], hub_fraction=0.0) == [pid["radio"]]  # the floor of 20


@BACKENDS
def test_the_hub_limit_follows_the_passages_stored_now(make_store, adjacency):
    store = make_store(adjacency=adjacency)
    fans = {f"fan{i}": (f"Fan {i}.", [("Two Dollar Radio", "is read by", f"Fan {i}"), (f"Fan {i}", "lives in", f"Town {i}"),
                                      (f"Fan {i}", "likes", f"Band {i}")]) for i in range(18)}
    others = {f"other{i}": (f"Other {i}.", [(f"Other {i}", "is", f"Thing {i}")]) for i in range(29)}
    pid = stored(store, {**PASSAGES, **fans, **others})  # the press in 21 of 50 passages
    assert store.linked_passages(pid["grace"], hub_fraction=0.5) == [pid["radio"]]  # limit 25: no hub
    for i in range(20):
        store.delete(f"other{i}")
    assert store.linked_passages(pid["grace"], hub_fraction=0.5) == []  # 21 of 30 stored: limit 20, a hub


def test_the_retrievers_hub_fraction_reaches_the_hop(make_store):
    store = make_store()
    fans = {f"fan{i}": (f"Fan {i} of the press.", [("Two Dollar Radio", "is read by", f"Fan {i}"),
                                                   (f"Fan {i}", "lives in", f"Town {i}"), (f"Fan {i}", "likes", f"Band {i}")])
            for i in range(20)}  # each names the press in 1 relation of 3: not about it
    stored(store, {**PASSAGES, **fans})  # the press in 23 passages: a hub at the default 2%
    question = "Where is the press that published Grace Krilanovich's The Orange Eats Creeps?"

    def hop(**kwargs):
        run = GraphRAGRetriever(store=store, similarity_top_k=3, ranker=HopRanker(), **kwargs).trace(question)
        return [n.node.node_id for n in run.nodes]

    assert hop() == ["grace"]  # nothing to hop to
    assert hop(hub_fraction=1.0) == ["grace", "radio"]


@BACKENDS
def test_about_is_at_least_half_of_a_passages_distinct_relations(make_store, adjacency):
    store = make_store(adjacency=adjacency)
    pid = stored(store, {
        "namer": ("Xavier met Yolanda.", [("Xavier", "met", "Yolanda")]),
        "half": ("Xavier sings; Zed paints.", [("Xavier", "sings", "songs"), ("Zed", "paints", "walls")]),
        # the same triplet twice counts once: Xavier names 1 of its 3 distinct relations
        "repeated": ("Xavier is tall. Zed paints. Zed sings.", [("Xavier", "is", "tall"), ("Xavier", "is", "tall"),
                                                                ("Zed", "paints", "walls"), ("Zed", "sings", "songs")]),
    })
    assert store.linked_passages(pid["namer"]) == [pid["half"]]


@BACKENDS
def test_after_a_delete_the_link_is_gone(make_store, adjacency):
    store = make_store(adjacency=adjacency)
    pid = stored(store)
    store.delete("radio")
    assert store.linked_passages(pid["grace"]) == []


def test_the_hop_ranks_the_passage_the_top_passage_names_second(make_store):
    store = make_store()
    pid = stored(store)
    question = "Where is the press that published Grace Krilanovich's The Orange Eats Creeps?"
    run = GraphRAGRetriever(store=store, similarity_top_k=3, ranker=HopRanker()).trace(question)
    assert run.dense[0][0] == pid["grace"] and [p for p, _ in run.dense].index(pid["radio"]) == 2  # dense: last
    assert [n.node.node_id for n in run.nodes][:2] == ["grace", "radio"]


def test_an_llms_pick_takes_the_hops_place_and_a_failed_answer_keeps_it(make_store):
    store = make_store()
    stored(store)
    question = "Where is the press that published Grace Krilanovich's The Orange Eats Creeps?"

    def order(llm, trust="confirmed"):
        run = GraphRAGRetriever(store=store, similarity_top_k=3, llm=llm, llm_trust=trust).trace(question)
        return [n.node.node_id for n in run.nodes]

    assert order(None)[:2] == ["grace", "radio"]  # no LLM: the hop puts the press second
    lone = graph_llm(mentions=[], chosen=["has a stand at"])  # names nothing the question names, alone
    assert sorted(order(lone, trust="vote")[:2]) == ["fair", "grace"]  # its vote, not the hop, beside the top
    assert order(lone) == order(None)  # under the default trust the graph ties it to nothing: ignored
    garbage = ScriptedLLM(script=lambda prompt: "no JSON here", prompts=[])
    assert order(garbage) == order(None)  # an unusable answer: exactly the ranking without an LLM


@BACKENDS
def test_hubs_by_relations_or_by_passages_are_skipped_alike(make_store, adjacency):
    """Milvus answers in bounded queries and asks again entity by entity when a limit is reached."""
    store = make_store(adjacency=adjacency)
    crowd = {f"p{i}": (f"Passage {i}.", [("Hub", f"has part {i}a", f"Part {i}"), ("Hub", f"has part {i}b", f"Piece {i}"),
                                          ("Hub", f"has part {i}c", f"Bit {i}")] + ([("Mid", "appears in", f"Part {i}")] if i < 60 else []))
             for i in range(210)}  # Hub: 630 relations in 210 passages; Mid: 60 relations in 60 passages
    passages = {**crowd, "namer": ("Hub, Mid and Leaf.", [("Hub", "holds", "Mid"), ("Mid", "holds", "Leaf")]),
                "leaf": ("Leaf grows.", [("Leaf", "grows in", "spring")]),
                # about Hub and about Mid, but both are hubs (in more than 20 of the 215 passages)
                "hubpage": ("Hub is big.", [("Hub", "is", "big"), ("Hub", "has", "walls")]),
                "midpage": ("Mid is small.", [("Mid", "is", "small"), ("Mid", "has", "legs")])}
    pid = stored(store, passages)
    assert store.linked_passages(pid["namer"]) == [pid["leaf"]]


def test_the_hub_limit_is_a_fraction_of_the_store_between_20_and_200_passages():
    from llama_index_graphrag_milvus.backends import hub_limit

    assert hub_limit(994, 0.02) == 20.0  # HotpotQA: the floor
    assert hub_limit(6_119, 0.02) == pytest.approx(122.38)  # 2Wiki: the fraction
    assert hub_limit(170_962, 0.02) == 200.0  # the 10^6-relation synthetic corpus: the cap, not 3,419
    assert hub_limit(10**8, 1.0) == 200.0  # however large the store or the fraction
