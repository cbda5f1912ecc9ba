"""GraphRAGIndex: from_documents, as_retriever, as_query_engine (with and without an LLM), reopen, updates."""

import json
import logging
from typing import Any, List

import pytest
from llama_index.core import Settings
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import Document

from llama_index_graphrag_milvus import GraphRAGIndex, GraphRAGRetriever, GraphRAGTransform, LLMTripletExtractor, Triplet
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.examples import ANSWER_DOC_ID, EULER_QUESTION, bernoulli_documents
from llama_index_graphrag_milvus.llm.prompts import TRIPLET_EXTRACT_PROMPT

from conftest import ScriptedLLM, graph_llm


class CountingEmbedding(HashEmbedding):
    """A hash embedding that counts the texts it embeds."""

    embedded: int = 0
    texts: List[str] = []

    def _get_text_embedding(self, text: str) -> List[float]:
        self.embedded += 1
        self.texts.append(text)
        return super()._get_text_embedding(text)

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        self.embedded += len(texts)
        self.texts.extend(texts)
        return super()._get_text_embeddings(texts)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """The Bernoulli corpus in a default store (`from_documents` opens it from `uri`), shared read-only."""
    uri = str(tmp_path_factory.mktemp("index") / "g.db")
    built = GraphRAGIndex.from_documents(bernoulli_documents(), embed_model=HashEmbedding(dim=64), uri=uri)
    yield built
    built.store.close()


@pytest.fixture(autouse=True)
def no_settings_llm():
    assert Settings._llm is None, "a test left Settings.llm set: the offline path would not be tested"


def doc_ids(nodes: Any) -> List[str]:
    return [n.node.ref_doc_id for n in nodes]


def test_from_documents_builds_the_graph_and_retrieves_offline(index):
    assert index.llm is None and index.transform is index.transformations[-1]
    assert isinstance(index.transformations[0], SentenceSplitter)
    assert index.store.count()["passages"] == 5
    retriever = index.as_retriever(similarity_top_k=2)
    assert isinstance(retriever, GraphRAGRetriever) and retriever.llm is None
    hits = retriever.retrieve("What did Daniel Bernoulli write?")
    assert doc_ids(hits)[0] == ANSWER_DOC_ID and len(hits) == 2


def test_query_engine_answers_from_the_graph_retrieved_passages(index):
    llm = graph_llm(mentions=["Euler"], chosen=["leonhard Euler studied under Johann Bernoulli", "Daniel Bernoulli son of Johann Bernoulli"])

    response = index.as_query_engine(llm=llm).query(EULER_QUESTION)

    assert str(response) == "fluid dynamics"
    assert ANSWER_DOC_ID in doc_ids(response.source_nodes)
    assert any('"named_entities"' in p for p in llm.prompts)  # the retriever used the LLM too
    answer_prompt = llm.prompts[-1]
    assert "Hydrodynamica" in answer_prompt and "graphrag_relations" not in answer_prompt


def test_query_engine_with_no_llm_returns_the_passages_offline(index, caplog):
    engine = index.as_query_engine(similarity_top_k=3)  # a retriever argument, routed to the retriever

    response = engine.query("What did Daniel Bernoulli write?")

    assert len(response.source_nodes) == 3 and doc_ids(response.source_nodes)[0] == ANSWER_DOC_ID
    assert str(response).startswith("title: Daniel Bernoulli\n\nDaniel Bernoulli (1700-1782)")  # the passages
    assert "without a synthesized answer" in caplog.text
    silent = index.as_query_engine(response_mode="no_text").query("Who taught Euler?")
    assert not silent.response and silent.source_nodes
    with pytest.raises(ValueError, match="needs an LLM"):
        index.as_query_engine(response_mode="compact")


def test_transformations_end_with_the_given_graph_transform(index):
    transform = GraphRAGTransform(store=index.store)
    assert GraphRAGIndex(store=index.store, transformations=[transform]).transform is transform
    assert GraphRAGIndex(transformations=[transform]).store is index.store
    with pytest.raises(ValueError, match="set it on yours"):
        GraphRAGIndex(store=index.store, transformations=[transform], extractor=LLMTripletExtractor(llm=graph_llm([], [])))
    with pytest.raises(ValueError, match="last"):
        GraphRAGIndex(store=index.store, transformations=[transform, SentenceSplitter()])
    with pytest.raises(TypeError, match="new store"):
        GraphRAGIndex.from_documents([], store=index.store, collection_prefix="other")


def test_reopen_an_existing_store(make_store, tmp_path):
    store = make_store()
    GraphRAGIndex.from_documents(bernoulli_documents(), store=store)
    store.close()

    reopened = GraphRAGIndex.from_existing(store=make_store(uri=str(tmp_path / "graph.db")))

    assert reopened.store.count()["passages"] == 5
    assert doc_ids(reopened.as_retriever().retrieve("What did Daniel Bernoulli write?"))[0] == ANSWER_DOC_ID
    assert GraphRAGIndex(store=reopened.store).store.count()["passages"] == 5  # the constructor reopens too
    with pytest.raises(TypeError, match="store=...|from_existing"):
        GraphRAGIndex(reopened.store)


def test_insert_delete_and_refresh(make_store):
    embed = CountingEmbedding(dim=64)
    store = make_store(embed_model=embed)
    docs = bernoulli_documents()
    index = GraphRAGIndex.from_documents(docs[:4], store=store)
    index.insert(docs[4])
    assert store.passage_ids("basel")

    index.delete_ref_doc("basel")
    assert not store.passage_ids("basel")
    index.insert_nodes(SentenceSplitter()([bernoulli_documents()[4]]))
    assert len(store.passage_ids("basel")) == 1

    before = embed.embedded
    assert index.refresh_ref_docs(bernoulli_documents()) == [False] * 5
    assert embed.embedded == before  # nothing re-embedded
    assert store.count()["passages"] == 5

    daniel = bernoulli_documents()[2]
    son = ["Daniel Bernoulli", "son of", "Johann Bernoulli"]
    born = ["Daniel Bernoulli", "born in", "Groningen"]
    changed = Document(  # new text, one relation kept, one added, four dropped
        id_=ANSWER_DOC_ID,
        text="Daniel Bernoulli (1700-1782), son of Johann Bernoulli, was born in Groningen.",
        metadata={"title": ANSWER_DOC_ID, "triplets": [son, born]},
    )
    rhine = ["Basel", "lies on", "Rhine"]
    retagged = Document(  # the same text, fewer triplets: a metadata-only change
        id_="basel", text=docs[4].text, metadata={"title": "basel", "triplets": [rhine]}
    )
    cousin = ["Nicolaus Bernoulli", "cousin of", "Daniel Bernoulli"]
    new = Document(id_="new", text="Nicolaus Bernoulli was a cousin.", metadata={"triplets": [cousin]})

    assert index.refresh_ref_docs([docs[0], changed, retagged, new]) == [False, True, True, True]

    store.compact()  # the relations no passage states any more are deleted
    old = [Triplet(*t) for t in daniel.metadata["triplets"] if t[1] != "son of"]
    kept = Triplet(*son)
    stored = store.describe([t.id for t in [*old, kept, Triplet(*born)]])
    assert set(stored.values()) == {kept, Triplet(*born)}
    assert not store.describe([Triplet("University of Basel", "founded in", "1460").id])  # the retagged one
    assert len(store.passage_ids(ANSWER_DOC_ID)) == 1 and store.passage_ids("new")


def test_refreshing_a_document_whose_metadata_alone_changed_writes_its_passages_over_in_place(make_store):
    embed = CountingEmbedding(dim=64)
    store = make_store(embed_model=embed)
    docs = bernoulli_documents()
    index = GraphRAGIndex.from_documents(docs, store=store)
    counts, before, pids = store.count(), embed.embedded, store.passage_ids(ANSWER_DOC_ID)

    docs[2].metadata["edition"] = "2nd"
    assert index.refresh_ref_docs(docs) == [False, False, True, False, False]
    assert embed.embedded - before == len(pids)  # its passages (their metadata is embedded), no entity or relation
    assert store.count() == counts and store.passage_ids(ANSWER_DOC_ID) == pids
    assert {n.metadata["edition"] for n in store.get_passages(pids).values()} == {"2nd"}
    assert index.refresh_ref_docs(docs) == [False] * 5  # the passages record the document's new hash


def test_refreshing_a_document_with_one_chunk_edited_writes_that_chunk_and_dates_the_other(make_store):
    embed = CountingEmbedding(dim=64)
    store = make_store(embed_model=embed)
    euler = "Leonhard Euler was born in Basel. He studied under Johann Bernoulli there."
    doc = Document(id_="two", text=euler + "\n\n\nDaniel Bernoulli wrote Hydrodynamica in Strasbourg.")
    index = GraphRAGIndex.from_documents([doc], store=store, transformations=[SentenceSplitter(chunk_size=24, chunk_overlap=0)])
    [kept] = [pid for pid, n in store.get_passages(store.passage_ids("two")).items() if n.text == euler]

    edited = Document(id_="two", text=euler + "\n\n\nDaniel Bernoulli wrote Hydrodynamica in Basel.")
    embed.texts.clear()
    assert index.refresh_ref_docs([edited]) == [True]
    assert "Daniel Bernoulli wrote Hydrodynamica in Basel." in embed.texts and euler not in embed.texts  # its vector is kept
    passages = store.get_passages(store.passage_ids("two"))
    assert sorted(n.text for n in passages.values()) == sorted([euler, "Daniel Bernoulli wrote Hydrodynamica in Basel."])
    assert passages[kept].source_node.hash == edited.hash  # the unchanged chunk is dated to the new version
    assert index.refresh_ref_docs([edited]) == [False]


def test_a_deleted_document_comes_back_when_ingested_again(make_store):
    """The transform writes as a side effect: a transformation cache hit would skip the write."""
    store = make_store()
    index = GraphRAGIndex.from_documents(bernoulli_documents(), store=store)
    index.delete_ref_doc(ANSWER_DOC_ID)
    assert not store.passage_ids(ANSWER_DOC_ID)

    GraphRAGIndex.from_documents(bernoulli_documents(), store=store)
    assert store.passage_ids(ANSWER_DOC_ID)

    index.delete_ref_doc(ANSWER_DOC_ID)
    index.insert(bernoulli_documents()[2])  # the same index (same steps) again
    assert store.passage_ids(ANSWER_DOC_ID)
    assert ANSWER_DOC_ID in doc_ids(index.as_retriever().retrieve("What did Daniel Bernoulli write?"))


def extraction_llm() -> ScriptedLLM:
    """An LLM that extracts two triplets from a passage: its first two words, "opens", its last word; and
    one in names the passage does not state (as an LLM resolving "he" writes)."""

    def script(prompt: str) -> str:
        words = prompt.split("Passage:\n", 1)[-1].split()
        return json.dumps({"triplets": [[" ".join(words[:2]), "opens", words[-1]], [f"Resolved {words[0]}", "is", "Canonical"]]})

    return ScriptedLLM(script=script, prompts=[])


CHUNKS = ["Ada Lovelace wrote the first program.", "Charles Babbage designed the engine.", "Alan Turing broke the code."]


def llm_index(store, llm, text, **metadata):
    """The document split in three chunks, their triplets extracted by `llm` (None: the free extractor)."""
    extractor = LLMTripletExtractor(llm=llm, num_workers=1) if llm is not None else None
    return GraphRAGIndex.from_documents([Document(id_="doc", text=text, metadata=metadata)], store=store, llm=llm,
                                        extractor=extractor, transformations=[SentenceSplitter(chunk_size=12, chunk_overlap=0)])


def llm_transform(store, llm, **options):
    return GraphRAGTransform(store=store, extractor=LLMTripletExtractor(llm=llm, num_workers=1, **options))


def stored_triplets(store):
    return {n.text: n.metadata["triplets"] for n in store.get_passages(store.passage_ids("doc")).values()}


def test_a_refresh_asks_the_llm_only_about_the_chunks_it_has_not_read(make_store, caplog):
    llm, store = extraction_llm(), make_store()
    index = llm_index(store, llm, "\n\n".join(CHUNKS))
    assert len(llm.prompts) == 3
    before = stored_triplets(store)

    edited = Document(id_="doc", text="\n\n".join(CHUNKS[:2] + ["Alan Turing broke the cipher."]))
    with caplog.at_level(logging.INFO, logger="llama_index_graphrag_milvus"):
        assert index.refresh_ref_docs([edited]) == [True]
    assert len(llm.prompts) == 4 and "Alan Turing broke the cipher." in llm.prompts[-1]  # the edited chunk alone
    assert "2 of 3 nodes took the triplets stored from the same extraction call" in caplog.text
    after = stored_triplets(store)
    assert after == {**{c: before[c] for c in CHUNKS[:2]},
                     "Alan Turing broke the cipher.": [["Alan Turing", "opens", "cipher."], ["Resolved Alan", "is", "Canonical"]]}
    assert all(len(before[c]) == 2 for c in CHUNKS)  # the triplet in names the chunk does not state stays
    assert index.refresh_ref_docs([edited]) == [False] and len(llm.prompts) == 4

    shown = Document(id_="doc", text=edited.text, metadata={"source": "v2"})  # what the LLM reads changed
    assert index.refresh_ref_docs([shown]) == [True]
    assert len(llm.prompts) == 4 + len(store.passage_ids("doc"))  # every chunk read again


def test_another_prompt_or_a_store_built_without_the_llm_is_asked_again(make_store):
    llm, store = extraction_llm(), make_store()
    llm_index(store, None, "\n\n".join(CHUNKS))  # the no-LLM extractor's triplets
    index = llm_index(store, llm, "\n\n".join(CHUNKS))
    assert len(llm.prompts) == 3  # upgraded: every chunk read by the LLM

    def split():
        return SentenceSplitter(chunk_size=12, chunk_overlap=0)([Document(id_="doc", text="\n\n".join(CHUNKS))])

    index.transform(split())
    assert len(llm.prompts) == 3  # the same nodes again: the stored extraction stands
    domain = PromptTemplate(TRIPLET_EXTRACT_PROMPT.template + "\nDomain: {domain}")
    for calls, prompt in ((6, domain.partial_format(domain="medicine")), (9, domain.partial_format(domain="law")),
                          (9, domain.partial_format(domain="law"))):
        llm_transform(store, llm, extract_prompt=prompt)(split())
        assert len(llm.prompts) == calls
    llm.system_prompt = "Answer tersely."
    llm_transform(store, llm, extract_prompt=domain.partial_format(domain="law"))(split())
    assert len(llm.prompts) == 12
    llm_transform(store, llm, extract_prompt=domain.partial_format(domain="law"),
                  max_triplets_per_node=1)(split())  # a cap the prompt does not show
    assert len(llm.prompts) == 15 and all(len(t) == 1 for t in stored_triplets(store).values())


def test_chunks_given_again_with_their_llm_triplets_keep_them_all(make_store):
    """A chunk carrying the LLM's triplets (the same node objects ingested again) keeps those in names it
    does not state: only a document's inherited triplets are narrowed to the names a chunk states."""
    llm, store = extraction_llm(), make_store()
    transform = llm_transform(store, llm)
    nodes = SentenceSplitter(chunk_size=12, chunk_overlap=0)([Document(id_="doc", text="\n\n".join(CHUNKS))])
    transform(nodes)
    before, counts = stored_triplets(store), store.count()
    transform(nodes)
    assert len(llm.prompts) == 3
    assert stored_triplets(store) == before and store.count() == counts
    assert all(len(triplets) == 2 for triplets in before.values())


def test_the_free_graph_warns_once_when_it_finds_little_to_link(make_store, tmp_path, caplog):
    nameless = [Document(id_=f"n{i}", text=f"the weather was mild all week and nothing happened, day {i}.") for i in range(4)]
    with caplog.at_level(logging.INFO, logger="llama_index_graphrag_milvus"):
        GraphRAGIndex.from_documents(bernoulli_documents(), store=make_store())  # triplets given
        GraphRAGIndex.from_documents([Document(id_=d.id_, text=d.text) for d in bernoulli_documents()],
                                     store=make_store(uri=str(tmp_path / "text.db")))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # names and titles: plenty to link
    assert "5 of 5 nodes carry no triplets; CooccurrenceExtractor gave" in caplog.text

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="llama_index_graphrag_milvus"):
        GraphRAGIndex.from_documents(nameless + bernoulli_documents()[:1], store=make_store(uri=str(tmp_path / "nameless.db")))
    [warning] = [r.getMessage() for r in caplog.records if r.name.endswith("transform")]
    assert "0 relations for 4 passages, little to link" in warning
    assert "extractor=LLMTripletExtractor(llm=...)" in warning
