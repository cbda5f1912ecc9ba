"""With an LLM, a pick the graph confirms as a chain leads the ranking; one it cannot confirm only votes, so
a random pick does not displace the top passage; garbage gives exactly the ranking without an LLM. On
small corpora in English and Chinese, through the retriever, `GraphRAGIndex.as_query_engine` and
`RetrieverQueryEngine`."""

import json

import pytest
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import Document

from llama_index_graphrag_milvus import GraphRAGIndex, GraphRAGRetriever
from llama_index_graphrag_milvus.ranking import LLMRanker

from conftest import ScriptedLLM, graph_llm, offered_lines

ENGLISH = {
    "xavier": ("Xavier Rhodes studied under Helen Marsh at Leiden University.",
               [["Xavier Rhodes", "studied under", "Helen Marsh"], ["Xavier Rhodes", "studied at", "Leiden University"]]),
    "helen": ("Helen Marsh taught physics at Leiden University. Her daughter is Clara Marsh.",
              [["Helen Marsh", "taught at", "Leiden University"], ["Helen Marsh", "has daughter", "Clara Marsh"]]),
    "clara": ("Clara Marsh designed the first tidal turbine, still used in the Oosterschelde.",
              [["Clara Marsh", "designed", "the first tidal turbine"], ["Clara Marsh", "was born in", "Delft"]]),
    "leiden": ("Leiden University is the oldest university in the Netherlands, founded in 1575.",
               [["Leiden University", "founded in", "1575"], ["Leiden University", "located in", "Leiden"]]),
    "delft": ("Delft is a canal city known for its blue pottery.",
              [["Delft", "known for", "blue pottery"], ["Delft", "is in", "South Holland"]]),
    "rhodes": ("Xavier Rhodes later taught mathematics in Utrecht.",
               [["Xavier Rhodes", "taught mathematics in", "Utrecht"]]),
}
QUESTION = "What lasting contribution did the daughter of Xavier Rhodes's teacher make?"
CHAIN = ["designed the first tidal turbine", "has daughter Clara", "studied under Helen"]  # the answer's first
TWO_DEGREES = {"expansion_degree": 2}  # the chain's third relation is two degrees past the question's entity
UNCONNECTED = ["blue pottery", "founded in 1575"]

CHINESE = {
    "liming": ("李明的老师是王芳。", [["李明", "的老师是", "王芳"]]),
    "wangfang": ("王芳发明了一种新型水泵。", [["王芳", "发明了", "新型水泵"]]),
}
CHINESE_QUESTION = "李明的老师发明了什么？"


def documents(corpus):
    return [Document(id_=doc, text=text, metadata={"triplets": triplets}) for doc, (text, triplets) in corpus.items()]


@pytest.fixture
def english(tmp_path, minilm):
    index = GraphRAGIndex.from_documents(documents(ENGLISH), uri=str(tmp_path / "en.db"), embed_model=minilm, llm=None)
    yield index
    index.store.close()


def top(retriever, question=QUESTION):
    return [h.node.ref_doc_id for h in retriever.retrieve(question)]


def test_a_confirmed_chain_puts_the_answer_first_through_every_entry_point(english):
    llm = graph_llm(mentions=["Xavier Rhodes"], chosen=CHAIN, answer="a tidal turbine")
    without = GraphRAGRetriever(store=english.store, llm=None, similarity_top_k=2, **TWO_DEGREES)
    assert "clara" not in top(without)
    retriever = GraphRAGRetriever(store=english.store, llm=llm, similarity_top_k=1, **TWO_DEGREES)
    assert top(retriever) == ["clara"]
    run = retriever.trace(QUESTION)
    assert run.llm_decision.startswith("led: 3 of the 3 picks chain")
    engine = english.as_query_engine(llm=llm, similarity_top_k=1, **TWO_DEGREES)
    assert [n.node.ref_doc_id for n in engine.query(QUESTION).source_nodes] == ["clara"]
    response = RetrieverQueryEngine.from_args(retriever, llm=llm).query(QUESTION)
    assert [n.node.ref_doc_id for n in response.source_nodes] == ["clara"]


def test_the_explanation_says_the_pick_led(english):
    llm = graph_llm(mentions=["Xavier Rhodes"], chosen=CHAIN)
    explanation = GraphRAGRetriever(store=english.store, llm=llm, similarity_top_k=2, **TWO_DEGREES).explain(QUESTION)
    assert "The LLM's pick led: 3 of the 3 picks chain" in explanation.to_text()


def test_picks_the_graph_ties_to_nothing_are_ignored_and_leave_the_ranking(english):
    without = top(GraphRAGRetriever(store=english.store, llm=None, similarity_top_k=6))
    llm = graph_llm(mentions=["Xavier Rhodes"], chosen=UNCONNECTED)
    retriever = GraphRAGRetriever(store=english.store, llm=llm, similarity_top_k=6)
    assert top(retriever) == without
    assert retriever.trace(QUESTION).llm_decision.startswith("ignored: the graph ties none of the")
    engine = english.as_query_engine(llm=llm, similarity_top_k=6)
    assert [n.node.ref_doc_id for n in engine.query(QUESTION).source_nodes] == without


def test_an_unconfirmed_pick_at_the_questions_entity_votes(english):
    without = top(GraphRAGRetriever(store=english.store, llm=None, similarity_top_k=6))
    llm = graph_llm(mentions=["Xavier Rhodes"], chosen=["taught mathematics in Utrecht", *UNCONNECTED])
    retriever = GraphRAGRetriever(store=english.store, llm=llm, similarity_top_k=6)
    run = retriever.trace(QUESTION)
    assert run.llm_decision.startswith("voted: no two picks chain")
    assert "picks, tied to neither the question nor another pick, are ignored" in run.llm_decision
    ranked = [h.node.ref_doc_id for h in run.nodes]
    assert without.index("rhodes") > 0 and ranked.index("rhodes") < without.index("rhodes")  # its vote lifts it
    assert [d for d in ranked if d != "rhodes"] == [d for d in without if d != "rhodes"]  # the rest keep their order


def test_garbage_gives_exactly_the_ranking_without_an_llm(english):
    garbage = ScriptedLLM(script=lambda prompt: "Sure! Here is what I think: [1] maybe", prompts=[])
    without = GraphRAGRetriever(store=english.store, llm=None, similarity_top_k=6).retrieve(QUESTION)
    with_garbage = GraphRAGRetriever(store=english.store, llm=garbage, similarity_top_k=6).retrieve(QUESTION)
    assert [(h.node.node_id, h.score) for h in with_garbage] == [(h.node.node_id, h.score) for h in without]


def test_trust_always_and_vote(english):
    llm = graph_llm(mentions=["Xavier Rhodes"], chosen=UNCONNECTED)
    always = GraphRAGRetriever(store=english.store, llm=llm, similarity_top_k=1, llm_trust="always")
    assert top(always)[0] in ("delft", "leiden")  # the pick leads even unconfirmed
    confirmed = graph_llm(mentions=["Xavier Rhodes"], chosen=CHAIN)
    vote = GraphRAGRetriever(store=english.store, llm=confirmed, similarity_top_k=6, llm_trust="vote")
    assert vote.trace(QUESTION).llm_decision.startswith("voted: llm_trust='vote'")
    with pytest.raises(ValueError, match="llm_trust must be one of always, confirmed, vote"):
        LLMRanker(llm=confirmed, trust="sometimes")


def test_llm_trust_is_checked_without_an_llm(make_store):
    """A misspelt `llm_trust` fails at construction even with `llm=None`, where no `LLMRanker` is made."""
    store = make_store()
    for trust in ("sometimes", "Confirmed", ""):
        with pytest.raises(ValueError, match="llm_trust must be one of always, confirmed, vote; got"):
            GraphRAGRetriever(store=store, llm=None, llm_trust=trust)
    for trust in ("always", "confirmed", "vote"):
        assert GraphRAGRetriever(store=store, llm=None, llm_trust=trust).ranker.name == "fused"


def test_a_confirmed_chain_leads_in_chinese(tmp_path, minilm):
    index = GraphRAGIndex.from_documents(documents(CHINESE), uri=str(tmp_path / "zh.db"), embed_model=minilm, llm=None)
    try:
        without = top(GraphRAGRetriever(store=index.store, llm=None, similarity_top_k=1), CHINESE_QUESTION)

        def script(prompt):
            if '"named_entities"' in prompt:
                return json.dumps({"named_entities": ["李明"]})
            lines = offered_lines(prompt)
            chain = [line for want in ("新型水泵", "的老师是") for line in lines if want in line]
            return json.dumps({"thought_process": "李明的老师是王芳，王芳发明了新型水泵", "useful_relationships": chain})

        llm = ScriptedLLM(script=script, prompts=[])
        assert without == ["liming"]  # the question's own passage, without the LLM
        assert top(GraphRAGRetriever(store=index.store, llm=llm, similarity_top_k=1), CHINESE_QUESTION) == ["wangfang"]
        engine = index.as_query_engine(llm=llm, similarity_top_k=1)
        assert [n.node.ref_doc_id for n in engine.query(CHINESE_QUESTION).source_nodes] == ["wangfang"]
        retriever = GraphRAGRetriever(store=index.store, llm=llm, similarity_top_k=1)
        assert [n.node.ref_doc_id for n in RetrieverQueryEngine.from_args(retriever, llm=llm).query(CHINESE_QUESTION).source_nodes] == ["wangfang"]
    finally:
        index.store.close()
