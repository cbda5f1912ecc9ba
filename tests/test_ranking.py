"""Rankers are objects behind one protocol: a user's own ranker, and an LLM rerank merged into a graph
ranking (never instead of it)."""

from dataclasses import dataclass

import pytest

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform
from llama_index_graphrag_milvus.examples import ANSWER_DOC_ID, EULER_QUESTION, bernoulli_documents
from llama_index_graphrag_milvus.ranking import (
    ChainRanker,
    FusedRanker,
    HopRanker,
    LLMRanker,
    PPRRanker,
    Ranking,
    RankTask,
    SimilarityRanker,
    TopicRanker,
)

from conftest import ScriptedLLM, graph_llm, offered_lines


@pytest.fixture
def store(make_store):
    store = make_store()
    GraphRAGTransform(store=store)(bernoulli_documents())
    return store


def ids(nodes):
    return [n.node.node_id for n in nodes]


@dataclass
class Reversed:
    """A user's ranker: dense retrieval's passages, worst first."""

    name: str = "reversed"
    needs_context: bool = False

    def rank(self, task: RankTask) -> Ranking:
        return Ranking(self.name, list(reversed(task.dense)))


def test_a_users_ranker_orders_the_passages(store):
    run = GraphRAGRetriever(store=store, similarity_top_k=5, ranker=Reversed()).trace(EULER_QUESTION)
    assert run.reranker == "reversed" and len(run.dense) == 5
    worst_first = [p for p, _ in reversed(run.dense)]
    nodes = store.get_passages(worst_first)
    assert ids(run.nodes) == [nodes[p].node_id for p in worst_first]


def test_strings_name_the_built_in_rankers_and_a_wrong_name_says_which_exist(store):
    fused = GraphRAGRetriever(store=store).ranker
    assert isinstance(fused, FusedRanker) and [type(r) for r in fused.rankers] == [PPRRanker, ChainRanker, HopRanker, TopicRanker]
    assert isinstance(GraphRAGRetriever(store=store, ranker="similarity").ranker, SimilarityRanker)
    llm_ranker = GraphRAGRetriever(store=store, llm=graph_llm([], []), ranker="chain").ranker
    assert isinstance(llm_ranker, LLMRanker) and isinstance(llm_ranker.base, ChainRanker)
    assert isinstance(GraphRAGRetriever(store=store, llm=graph_llm([], [])).ranker.base, FusedRanker)
    assert [r.name for r in (GraphRAGRetriever(store=store, ranker=n).ranker for n in ("hop", "topic"))] == ["hop", "topic"]
    with pytest.raises(ValueError, match="fused, chain, ppr, similarity, hop, topic"):
        GraphRAGRetriever(store=store, ranker="pagerank")


def test_the_old_argument_names_still_work_with_a_warning(store):
    with pytest.warns(FutureWarning, match=r"reranker=\.\.\.\) is deprecated .* use ranker="):
        assert isinstance(GraphRAGRetriever(store=store, reranker="similarity").ranker, SimilarityRanker)
    with pytest.warns(FutureWarning) as warned:
        chain = GraphRAGRetriever(store=store, reranker="chain", graph_weight=0.7).ranker
    assert any("ChainRanker(graph_weight=...)" in str(w.message) for w in warned)
    assert chain == ChainRanker(graph_weight=0.7)
    moved = GraphRAGRetriever(store=store, similarity_top_k=5, ranker=ChainRanker(graph_weight=0.7))
    with pytest.warns(FutureWarning):
        old = GraphRAGRetriever(store=store, similarity_top_k=5, reranker="chain", graph_weight=0.7)
    assert ids(old.retrieve(EULER_QUESTION)) == ids(moved.retrieve(EULER_QUESTION))
    with pytest.raises(TypeError, match="ranker= alone"), pytest.warns(FutureWarning):
        GraphRAGRetriever(store=store, ranker="chain", reranker="chain")
    with pytest.raises(TypeError, match="unexpected keyword argument.*similarity_topk"):
        GraphRAGRetriever(store=store, similarity_topk=3)


def test_an_llm_ranker_given_as_the_ranker_is_used_as_it_is(store):
    llm = graph_llm(["Euler"], ["studied under"])
    ranker = LLMRanker(llm, ChainRanker(), trust="vote")
    assert GraphRAGRetriever(store=store, llm=llm, ranker=ranker).ranker is ranker


@pytest.mark.parametrize("answer", ["not json", '{"useful_relationships": ["[999] nothing offered"]}', ""])
def test_an_unusable_llm_answer_gives_exactly_the_graph_ranking(store, answer):
    def script(prompt: str) -> str:
        return '{"named_entities": ["Euler"]}' if '"named_entities"' in prompt else answer

    no_llm = GraphRAGRetriever(store=store, similarity_top_k=5, ranker="chain").trace(EULER_QUESTION)
    llm = ScriptedLLM(script=script, prompts=[])
    with_llm = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=5, ranker="chain").trace(EULER_QUESTION)
    assert [(n.node.node_id, n.score) for n in with_llm.nodes] == [(n.node.node_id, n.score) for n in no_llm.nodes]
    assert with_llm.reranker == "chain"


def test_the_llms_choice_lifts_its_passage_within_the_graph_ranking(make_store):
    store = make_store()  # the given triplets alone: with the text's links the chain ranks the answer first already
    GraphRAGTransform(store=store, text_links=False)(bernoulli_documents())
    chain = GraphRAGRetriever(store=store, similarity_top_k=8, ranker="chain").trace(EULER_QUESTION)
    assert ids(chain.nodes).index(ANSWER_DOC_ID) > 0, "the test needs the answer below the top without the LLM"
    llm = graph_llm(mentions=["Euler"], chosen=["son of"])
    # a lone pick the graph ties to nothing would be ignored under the default trust: here it only votes
    run = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=8, ranker="chain", llm_trust="vote").trace(EULER_QUESTION)
    assert run.reranker == "llm" and run.thought_process == "follow the chain"
    assert ids(run.nodes).index(ANSWER_DOC_ID) < ids(chain.nodes).index(ANSWER_DOC_ID)
    # the passages the LLM did not choose keep the graph ranking's order
    unchosen = [i for i in ids(run.nodes) if i != ANSWER_DOC_ID]
    assert unchosen == [i for i in ids(chain.nodes) if i in unchosen]


def test_the_llm_is_offered_the_best_relations_of_the_graph_ranking_breadth_first(store):
    llm = graph_llm(mentions=["Euler"], chosen=[])
    retriever = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=8)
    retriever.ranker.max_offered = 4
    retriever.trace(EULER_QUESTION)
    base = GraphRAGRetriever(store=store, similarity_top_k=8).trace(EULER_QUESTION)
    lines = offered_lines(llm.prompts[-1])
    assert len(lines) == 4
    # the first line is a relation of the graph ranking's top passage
    top = {r.text for r in base.via[base.nodes[0].node.node_id]}
    assert lines[0].split("] ", 1)[1] in top, (lines, top)


def test_known_names_are_matched_without_an_adjacency_in_memory(make_store, tmp_path):
    store = make_store(uri=str(tmp_path / "remote.db"), adjacency="milvus")
    GraphRAGTransform(store=store)(bernoulli_documents())
    assert store.match_entities("Did Euler study at the University of Basel?") == ["euler", "university of basel"]
    run = GraphRAGRetriever(store=store).trace(EULER_QUESTION)
    assert run.mentions == ["euler"] and run.seed_entities


def test_a_fusion_needs_rankers_and_one_weight_each():
    with pytest.raises(ValueError, match="at least one ranker"):
        FusedRanker(rankers=())
    with pytest.raises(ValueError, match="1 weights for 4 rankers"):
        FusedRanker(weights=[1.0])
