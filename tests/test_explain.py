"""retriever.explain(): the steps of one retrieval as text and as a drawing."""

import sys

import pytest
from llama_index.core.ingestion import IngestionPipeline

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform
from llama_index_graphrag_milvus.explain import Explanation, drawn_relations
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents

from conftest import graph_llm

PNG = b"\x89PNG\r\n\x1a\n"
CHAIN = ["studied under", "son of"]


@pytest.fixture
def store(make_store):
    store = make_store()
    IngestionPipeline(transformations=[GraphRAGTransform(store=store)]).run(documents=bernoulli_documents())
    return store


def test_explain_holds_every_step_with_the_relations_texts(store):
    retriever = GraphRAGRetriever(store=store, similarity_top_k=2)

    explanation = retriever.explain(EULER_QUESTION)

    assert isinstance(explanation, Explanation)
    assert explanation.mentions == ["euler"] and explanation.seed_entities
    assert explanation.reranker == "chain" and not explanation.by_llm and explanation.thought_process is None
    # the retriever leaves the texts of candidates out without an LLM; the explanation fills them in
    assert explanation.candidates and all(r.predicate for r in explanation.candidates)
    assert all(r.predicate for r in explanation.seed_relations)
    scores = [r.score for r in explanation.candidates]
    assert scores == sorted(scores, reverse=True)
    assert [str(r) for r in explanation.chosen] == [str(r) for r in explanation.retrieval.chosen]
    assert [n.node.node_id for n in explanation.passages] == [
        n.node.node_id for n in retriever.retrieve(EULER_QUESTION)
    ]
    for hit in explanation.passages:  # the relations that chose a passage, as objects
        assert [str(r) for r in explanation.relations_of(hit)] == hit.node.metadata["graphrag_relations"]


def test_it_prints_one_section_per_step(store):
    explanation = GraphRAGRetriever(store=store, similarity_top_k=2).explain(EULER_QUESTION)

    text = str(explanation)

    sections = ["Question:", "Mentions:", "Seed entities", "Seed relations", "Candidates after expansion",
                "Chosen by the graph rerank, chain", "Passages (2)"]
    positions = [text.index(s) for s in sections]
    assert positions == sorted(positions)
    for relation in explanation.chosen:
        assert str(relation) in text
    for hit in explanation.passages:
        assert f"[{hit.node.ref_doc_id or hit.node.node_id}]" in text
        for relation in hit.node.metadata["graphrag_relations"]:
            assert f"via {relation}" in text
    assert "Reasoning" not in text
    assert len(explanation.to_text(max_candidates=3).splitlines()) < len(text.splitlines())
    assert repr(explanation).startswith("Explanation(query=")


def test_with_an_llm_it_shows_the_chosen_relations_and_the_reasoning(store):
    retriever = GraphRAGRetriever(store=store, llm=graph_llm(mentions=["Euler"], chosen=CHAIN), similarity_top_k=2)

    explanation = retriever.explain(EULER_QUESTION)

    assert explanation.by_llm and explanation.thought_process == "follow the chain"
    text = str(explanation)
    assert "Chosen by the LLM rerank (3):" in text
    assert "  1. leonhard Euler —[studied under]→ Johann Bernoulli" in text
    assert "  2. Daniel Bernoulli —[son of]→ Johann Bernoulli" in text
    assert "Reasoning:\n  follow the chain" in text


async def test_aexplain_matches_explain(store):
    retriever = GraphRAGRetriever(store=store, similarity_top_k=2)
    sync, async_ = retriever.explain(EULER_QUESTION), await retriever.aexplain(EULER_QUESTION)
    assert str(async_) == str(sync)


def test_to_png_draws_the_subgraph(store, tmp_path):
    explanation = GraphRAGRetriever(store=store, similarity_top_k=2).explain(EULER_QUESTION)

    path = explanation.to_png(tmp_path / "out" / "subgraph.png")

    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) > 20_000
    inline = explanation._repr_png_()
    assert inline.startswith(PNG)
    figure = explanation.figure()
    labels = {t.get_text() for t in figure.axes[0].texts}
    assert any(label.startswith("#1 ") for label in labels)  # the passages
    assert {"studied under", "son of"} <= {label.replace("\n", " ") for label in labels}
    legend = {t.get_text() for t in figure.legends[0].get_texts()}
    assert "seed entity (nearest a mention)" in legend  # seeds are found by embedding search, not named


def test_the_drawing_keeps_the_best_candidates_and_always_the_chosen(store):
    explanation = GraphRAGRetriever(store=store, similarity_top_k=2).explain(EULER_QUESTION)
    always = {r.id for r in explanation.chosen} | {r.id for r in explanation.seed_relations}
    always |= {r.id for hit in explanation.passages for r in explanation.relations_of(hit)}

    few = {r.id for r in drawn_relations(explanation, max_relations=1)}
    everything = {r.id for r in drawn_relations(explanation, max_relations=1000)}

    assert few == always
    assert everything == {r.id for r in explanation.candidates} | always
    capped = drawn_relations(explanation, max_relations=len(always) + 2)
    extra = [r for r in capped if r.id not in always]
    best = [r for r in explanation.candidates if r.id not in always][:2]
    assert [r.id for r in extra] == [r.id for r in best]


def test_an_empty_store_explains_and_draws_nothing_found(make_store, tmp_path):
    explanation = GraphRAGRetriever(store=make_store()).explain(EULER_QUESTION)
    assert explanation.passages == [] and explanation.candidates == []
    assert "Passages (0):" in str(explanation)
    assert explanation.to_png(tmp_path / "empty.png").read_bytes().startswith(PNG)


def test_without_the_viz_extra_drawing_says_what_to_install(store, monkeypatch):
    explanation = GraphRAGRetriever(store=store).explain(EULER_QUESTION)
    monkeypatch.setitem(sys.modules, "networkx", None)  # import networkx now raises ImportError

    with pytest.raises(ImportError, match=r"pip install 'llama-index-graphrag-milvus\[viz\]'"):
        explanation.to_png("never.png")
    assert explanation._repr_png_() is None  # a notebook then shows the text
    assert "Question:" in str(explanation)
