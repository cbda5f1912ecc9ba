"""Triplets in metadata are data, not text: a splitter does not count them, nothing embeds them or shows
them to an LLM, and each chunk of a split document keeps only the triplets it names."""

import pytest
from llama_index.core import Document
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_graphrag_milvus import GraphRAGIndex, GraphRAGTransform
from llama_index_graphrag_milvus.ingest.extract import ExcludeTriplets
from llama_index_graphrag_milvus.examples import bernoulli_documents
from llama_index_graphrag_milvus.ingest.extract import given_triplets

N = 100


def many_triplets_document(**kwargs) -> Document:
    """One document of 100 sentences, each stating one of its 100 triplets (with a title)."""
    text = " ".join(f"Explorer{i:03d} charted the river Flow{i:03d} in spring." for i in range(N))
    triplets = [[f"Explorer{i:03d}", "charted", f"Flow{i:03d}"] for i in range(N)]
    return Document(id_="atlas", text=text, metadata={"title": "Atlas", "triplets": triplets}, **kwargs)


def assert_no_triplets_in_content(node):
    for mode in (MetadataMode.EMBED, MetadataMode.LLM):
        content = node.get_content(mode)
        assert "triplets" not in content and "['Explorer" not in content
        assert "title: Atlas" in content  # other metadata is still text


def test_the_splitter_counts_triplets_as_metadata_text_unless_they_are_excluded():
    with pytest.raises(ValueError, match="Metadata length"):  # what a user met before ExcludeTriplets
        SentenceSplitter().get_nodes_from_documents([many_triplets_document()])


def test_a_pipeline_with_exclude_triplets_first_ingests_a_document_with_100_triplets(make_store):
    store = make_store()
    pipeline = IngestionPipeline(
        transformations=[ExcludeTriplets(), SentenceSplitter(), GraphRAGTransform(store=store, text_links=False)],
        disable_cache=True,
    )  # text_links=False: the counts are the given triplets'; the text's links are tested in test_extract.py
    nodes = pipeline.run(documents=[many_triplets_document()])
    for node in nodes:
        assert_no_triplets_in_content(node)
    assert {s for node in nodes for s, _, _ in node.metadata["triplets"]} == {f"Explorer{i:03d}" for i in range(N)}
    assert store.count() == {"entities": 2 * N, "relations": N, "passages": len(nodes)}


def test_documents_built_with_the_exclusion_split_too():
    document = many_triplets_document(
        excluded_embed_metadata_keys=["triplets"], excluded_llm_metadata_keys=["triplets"]
    )
    for node in SentenceSplitter().get_nodes_from_documents([document]):
        assert_no_triplets_in_content(node)


def test_graph_rag_index_excludes_the_triplets_itself(make_store):
    store = make_store()
    index = GraphRAGIndex.from_documents(
        [many_triplets_document()], store=store,
        transformations=[SentenceSplitter(), GraphRAGTransform(store=store, text_links=False)],  # the given triplets alone
    )
    assert store.count()["relations"] == N
    more = " ".join(f"Sailor{i:03d} crossed the sea Wave{i:03d}." for i in range(N))
    triplets = [[f"Sailor{i:03d}", "crossed", f"Wave{i:03d}"] for i in range(N)]
    index.insert(Document(id_="more", text=more, metadata={"triplets": triplets}))
    assert store.count()["relations"] == 2 * N
    hits = index.as_retriever(similarity_top_k=2).retrieve("Which river did Explorer042 chart?")
    assert hits
    for hit in hits:
        for mode in (MetadataMode.EMBED, MetadataMode.LLM):
            assert "['Explorer" not in hit.node.get_content(mode)


def test_each_chunk_of_a_split_document_keeps_the_triplets_it_names(make_store):
    store = make_store()
    index = GraphRAGIndex.from_documents(
        [many_triplets_document()], store=store,
        transformations=[SentenceSplitter(chunk_size=128, chunk_overlap=0), GraphRAGTransform(store=store, text_links=False)],
    )
    chunks = IngestionPipeline(transformations=index.transformations[:-1], disable_cache=True).run(
        documents=[many_triplets_document(excluded_embed_metadata_keys=["triplets"],
                                          excluded_llm_metadata_keys=["triplets"])]
    )
    assert len(chunks) > 3
    seen = []
    for chunk in chunks:
        kept = given_triplets(chunk)
        assert kept and len(kept) < N
        assert all(t.subject in chunk.text or t.object in chunk.text for t in kept)
        assert chunk.metadata["triplets"] == [[t.subject, t.predicate, t.object] for t in kept]
        seen += [t.subject for t in kept]
    assert set(seen) == {f"Explorer{i:03d}" for i in range(N)}  # every triplet is stated by some chunk
    assert store.count() == {"entities": 2 * N, "relations": N, "passages": len(chunks)}
    hits = index.as_retriever(similarity_top_k=len(chunks)).retrieve("Which river did Explorer042 chart?")
    for hit in hits:  # a passage returned says only what it states
        triplets = hit.node.metadata.get("triplets") or []
        assert len(triplets) < N and all(s in hit.node.text or o in hit.node.text for s, _, o in triplets)


def chunk(text, triplets, first=False):
    node = TextNode(id_=text[:8], text=text, metadata={"triplets": triplets})
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="doc")
    other = NodeRelationship.NEXT if first else NodeRelationship.PREVIOUS
    node.relationships[other] = RelatedNodeInfo(node_id="another chunk")
    return node


def test_a_chunk_matches_names_case_insensitively_as_whole_words():
    triplets = [
        ["leonhard EULER", "studied under", "Johann Bernoulli"], ["Art", "is", "Craft"], ["Basel", "on", "Rhine"]
    ]
    kept = given_triplets(chunk("Leonhard  Euler started in Basel.", triplets, first=True))
    assert [t.subject for t in kept] == ["leonhard EULER", "Basel"]  # "Art" is not in "started"


def test_a_chunk_that_names_none_of_the_triplets_keeps_them_all():
    # nothing shows which part of the document states them (other names than the text, a pronoun):
    # dropping them could leave the document out of the graph
    triplets = [["Q937", "studied under", "Q6527"], ["Q937", "born in", "Q78"]]
    node = chunk("He was born in the city on the Rhine.", triplets)
    assert len(given_triplets(node)) == 2 and node.metadata["triplets"] == triplets


def test_a_whole_document_keeps_all_its_triplets():
    # one node a passage (the MuSiQue benchmark, bernoulli_documents): nothing is narrowed
    for document in bernoulli_documents():
        assert len(given_triplets(document)) == len(document.metadata["triplets"])
    node = TextNode(text="Euler was Swiss.", metadata={"triplets": [["Q937", "x", "Q1"], ["Euler", "was", "Swiss"]]})
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="doc")
    assert len(given_triplets(node)) == 2


def test_the_package_loaders_mark_the_triplets_as_no_text(tmp_path):
    import json

    from llama_index_graphrag_milvus.cli import _read_nodes
    from llama_index_graphrag_milvus.bench.evaluation import load_dataset

    from test_retrieval_modes import write_musique_like

    document = many_triplets_document()
    path = tmp_path / "atlas.jsonl"
    path.write_text(json.dumps({"id": "atlas", "text": document.text, "metadata": {"title": "Atlas"},
                                "triplets": document.metadata["triplets"]}) + "\n")
    (read,) = _read_nodes([str(path)])
    for node in SentenceSplitter().get_nodes_from_documents([read]):  # as `graphrag-milvus ingest` splits
        assert_no_triplets_in_content(node)
    write_musique_like(tmp_path)
    for node in load_dataset(tmp_path).nodes + bernoulli_documents():
        assert "triplets" in node.metadata
        assert "triplets" not in node.get_content(MetadataMode.EMBED) + node.get_content(MetadataMode.LLM)
