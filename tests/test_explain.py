"""retriever.explain(): the steps of one retrieval as text and as a drawing."""

import dataclasses
import hashlib
import os
import pickle
import re
import subprocess
import sys

import pytest
from llama_index.core.ingestion import IngestionPipeline

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform
from llama_index_graphrag_milvus.explain.drawing import legend_labels
from llama_index_graphrag_milvus.explain import CHOSEN, VIA, Explanation, drawn_relations
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents
from llama_index_graphrag_milvus.schema import normalize_name

from conftest import graph_llm

PNG = b"\x89PNG\r\n\x1a\n"
CHAIN = ["leonhard Euler studied under Johann Bernoulli", "Daniel Bernoulli son of Johann Bernoulli"]
CHOSEN_RED = "#d62728"


def ingested(store):
    IngestionPipeline(transformations=[GraphRAGTransform(store=store)]).run(documents=bernoulli_documents())
    return store


def text_chosen(text):
    """The relations the text lists under "Chosen by ...", and under each passage ("via")."""
    section = text.split("\nChosen by ", 1)[1].split("\nPassages (", 1)
    chosen = set(re.findall(r"^  \d+\. (.*)$", section[0].split("\nReasoning:")[0], flags=re.M))
    via = [re.findall(r"^       via (.*)$", block, flags=re.M) for block in re.split(r"\n  \d+\. \[", section[1])[1:]]
    return chosen, via


def overlapping_labels(figure):
    """Pairs of texts (names, predicates, passage boxes) whose boxes overlap in the rendered figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure).draw()
    renderer = figure.canvas.get_renderer()
    boxes = [(t.get_text(), (t.get_bbox_patch() or t).get_window_extent(renderer)) for t in figure.axes[0].texts]
    return [(a, b) for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1:] if box.overlaps(other)]


@pytest.fixture
def store(make_store):
    return ingested(make_store())


def test_explain_holds_every_step_with_the_relations_texts(store):
    retriever = GraphRAGRetriever(store=store, similarity_top_k=2)

    explanation = retriever.explain(EULER_QUESTION)

    assert isinstance(explanation, Explanation)
    assert explanation.mentions == ["euler"] and explanation.seed_entities
    assert explanation.reranker == "fused" and not explanation.by_llm and explanation.thought_process is None
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
                "Chosen by the graph rerank, fused", "Passages (2), each with the relations behind it (via):"]
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
    assert "Chosen by the LLM rerank (2):" in text
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
    assert "Passages (0), " in str(explanation)
    assert explanation.to_png(tmp_path / "empty.png").read_bytes().startswith(PNG)


def test_without_the_viz_extra_drawing_says_what_to_install(store, monkeypatch):
    explanation = GraphRAGRetriever(store=store).explain(EULER_QUESTION)
    monkeypatch.setitem(sys.modules, "networkx", None)  # import networkx now raises ImportError

    with pytest.raises(ImportError, match=r"pip install 'llama-index-graphrag-milvus\[viz\]'"):
        explanation.to_png("never.png")
    assert explanation._repr_png_() is None  # a notebook then shows the text
    assert "Question:" in str(explanation)


@pytest.mark.parametrize("case", ["graph rerank", "LLM rerank", "passages behind relations not chosen"])
def test_the_text_and_the_picture_agree_on_the_relations_chosen(store, case):
    retriever = GraphRAGRetriever(store=store, similarity_top_k=2,
                                  llm=graph_llm(mentions=["Euler"], chosen=CHAIN) if case == "LLM rerank" else None)
    explanation = retriever.explain(EULER_QUESTION)
    if case == "passages behind relations not chosen":  # as when an LLM's choice left passages unexplained
        run = dataclasses.replace(explanation.retrieval, chosen=explanation.chosen[-1:])
        explanation = Explanation(run, explanation.candidates, explanation.synonyms)
        assert explanation.drawn().of_kind(VIA)
    text, drawn = str(explanation), explanation.drawn()

    chosen, via = text_chosen(text)

    assert chosen and chosen == {str(r) for r in drawn.of_kind(CHOSEN)} == {str(r) for r in explanation.chosen}
    assert via == [[str(r) for r in drawn.links[rank]] for rank in sorted(drawn.links)]
    behind = {relation for lines in via for relation in lines}
    assert {str(r) for r in drawn.of_kind(VIA)} == behind - chosen  # green: behind a passage, not chosen
    # the same words: "Chosen by the graph rerank, chain (4):" in the text, "chosen by ..." in the legend
    words = legend_labels(explanation)
    assert f"Chosen by {explanation.chosen_by} (" in text and words[CHOSEN] == f"chosen by {explanation.chosen_by}"
    figure = explanation.figure()
    legend = {t.get_text() for t in figure.legends[0].get_texts()}
    assert {words[CHOSEN], words[VIA], words["link"]} <= legend
    red = {t.get_text().replace("\n", " ") for t in figure.axes[0].texts if t.get_color() == CHOSEN_RED}
    assert red == {r.predicate for r in explanation.chosen}  # the relation labels drawn in red


def test_synonyms_in_the_store_are_drawn_as_one_entity(make_store):
    store = ingested(make_store(synonym_threshold=0.7))  # the hash embedder puts "Euler" at 0.71 of "Leonhard Euler"
    explanation = GraphRAGRetriever(store=store, similarity_top_k=2).explain(EULER_QUESTION)

    drawn = explanation.drawn()

    linked = {frozenset(map(normalize_name, pair)) for pair in explanation.synonyms}
    assert frozenset({"euler", "leonhard euler"}) in linked
    node = drawn.node_of["euler"]
    assert drawn.node_of["leonhard euler"] == node and node in drawn.seeds
    assert drawn.entities[node].startswith("Leonhard Euler (") and "Euler" in drawn.entities[node][15:]
    assert len(drawn.entities) < len(drawn.node_of)
    assert f"Drawn as one entity: {drawn.entities[node]}" in str(explanation)
    names = {t.get_text().replace("\n", " ") for t in explanation.figure().axes[0].texts}
    assert drawn.entities[node] in names and "Euler" not in names
    # given by hand, the label is the longest name with the other in brackets
    by_hand = Explanation(explanation.retrieval, explanation.candidates, synonyms=[("Euler", "Leonhard Euler")])
    assert by_hand.drawn().entities[by_hand.drawn().node_of["euler"]] == "Leonhard Euler (Euler)"


def test_without_synonyms_only_a_names_short_form_shares_its_node_and_labels_keep_clear(make_store):
    store = ingested(make_store(synonym_threshold=None))
    explanation = GraphRAGRetriever(store=store, similarity_top_k=2).explain(EULER_QUESTION)

    drawn = explanation.drawn()

    assert explanation.synonyms == []
    merged = {key: node for key, node in drawn.node_of.items() if node != key}
    # "Euler" is the last word of exactly one drawn person-like name; nothing else is merged
    assert set(merged) <= {"euler", "leonhard euler"}
    if merged:
        assert drawn.entities[drawn.node_of["euler"]] == "Leonhard Euler (Euler)"
        assert "Drawn as one entity: Leonhard Euler (Euler)" in str(explanation)
    assert "University of Basel (" not in str(explanation)  # "Basel" stays apart from the university
    figure = explanation.figure()  # "Euler" apart from the rest: packed next to it, with room for its labels
    assert overlapping_labels(figure) == []


_RENDER = """
import hashlib, pickle, sys
from llama_index_graphrag_milvus.explain.drawing import draw
with open(sys.argv[1], "rb") as f:
    explanation = pickle.load(f)
import io
buffer = io.BytesIO()
draw(explanation).savefig(buffer, format="png", dpi=60)
print(hashlib.sha256(buffer.getvalue()).hexdigest())
"""


def test_the_picture_is_the_same_under_any_hash_seed_and_no_labels_overlap(store, tmp_path):
    explanation = GraphRAGRetriever(store=store, similarity_top_k=2).explain(EULER_QUESTION)
    assert overlapping_labels(explanation.figure()) == []
    saved = tmp_path / "explanation.pickle"
    saved.write_bytes(pickle.dumps(explanation))

    runs = [
        subprocess.Popen([sys.executable, "-c", _RENDER, str(saved)], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONHASHSEED": seed})
        for seed in ("1", "2")
    ]
    digests = [run.communicate(timeout=120)[0].strip() for run in runs]

    assert all(run.returncode == 0 for run in runs) and digests[0] == digests[1]
    assert len(digests[0]) == len(hashlib.sha256().hexdigest())


def test_a_short_form_shares_a_node_only_with_the_one_name_it_ends():
    from llama_index_graphrag_milvus.schema import Retrieval, ScoredRelation

    relations = [
        ScoredRelation(1, "leonhard Euler", "studied under", "Johann Bernoulli", 0.9),
        ScoredRelation(2, "Euler", "made contributions to", "graph theory", 0.8),
        ScoredRelation(3, "Daniel Bernoulli", "son of", "Johann Bernoulli", 0.7),
        ScoredRelation(4, "Bernoulli", "lived in", "Basel", 0.6),
        ScoredRelation(5, "University of Basel", "located in", "Basel", 0.5),
    ]
    drawn = Explanation(Retrieval(query="q", chosen=relations), relations).drawn()
    assert drawn.node_of["euler"] == drawn.node_of["leonhard euler"]
    assert len({drawn.node_of[k] for k in ("bernoulli", "johann bernoulli", "daniel bernoulli")}) == 3  # ambiguous
    assert drawn.node_of["basel"] != drawn.node_of["university of basel"]
