"""The multi-hop question of the tutorial, with the real offline embedder and a scripted LLM."""

from llama_index.core import VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import RetrieverQueryEngine

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform
from llama_index_graphrag_milvus.examples import ANSWER_DOC_ID, EULER_QUESTION, bernoulli_documents

from conftest import graph_llm

CHAIN = ["leonhard Euler studied under Johann Bernoulli", "Daniel Bernoulli son of Johann Bernoulli"]  # the hops the scripted LLM picks, in order


def ingest(make_store, minilm):
    store = make_store(embed_model=minilm)
    IngestionPipeline(transformations=[SentenceSplitter(), GraphRAGTransform(store=store)]).run(
        documents=bernoulli_documents()
    )
    return store


def test_graph_rag_finds_the_sons_passage_that_plain_vector_rag_misses(make_store, minilm):
    store = ingest(make_store, minilm)
    llm = graph_llm(mentions=["Euler"], chosen=CHAIN)

    graph_hits = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=2).retrieve(EULER_QUESTION)
    plain = VectorStoreIndex.from_vector_store(store.vector_store, embed_model=minilm)
    plain_hits = plain.as_retriever(similarity_top_k=2).retrieve(EULER_QUESTION)

    assert ANSWER_DOC_ID in [n.node.ref_doc_id for n in graph_hits]
    assert ANSWER_DOC_ID not in [n.node.ref_doc_id for n in plain_hits]
    assert len(plain_hits) == 2


def test_passages_come_back_as_the_ingested_nodes_with_their_relations(make_store, minilm):
    store = ingest(make_store, minilm)
    llm = graph_llm(mentions=["Euler"], chosen=CHAIN)
    run = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=2).trace(EULER_QUESTION)

    assert run.mentions == ["Euler"]
    assert run.thought_process == "follow the chain"
    assert [str(r) for r in run.chosen[:2]] == [
        "leonhard Euler —[studied under]→ Johann Bernoulli",
        "Daniel Bernoulli —[son of]→ Johann Bernoulli",
    ]
    assert len(run.chosen) == 2  # exactly the LLM's picks, nothing filled in
    euler, daniel = run.nodes
    assert euler.node.ref_doc_id == "euler" and daniel.node.ref_doc_id == ANSWER_DOC_ID
    assert daniel.node.text.startswith("Daniel Bernoulli (1700-1782) was the son of Johann Bernoulli.")
    assert daniel.node.metadata["title"] == "Daniel Bernoulli"
    assert daniel.node.metadata["graphrag_relations"] == ["Daniel Bernoulli —[son of]→ Johann Bernoulli"]
    assert euler.score > daniel.score
    # provenance and triplets stay out of what the answering LLM reads
    context = daniel.node.get_content(metadata_mode="llm")
    assert "graphrag_relations" not in context and "triplets" not in context and "title" in context


def test_it_runs_inside_a_standard_query_engine(make_store, minilm):
    store = ingest(make_store, minilm)
    llm = graph_llm(mentions=["Euler"], chosen=CHAIN, answer="Daniel founded fluid dynamics.")
    retriever = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=2)
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)

    response = engine.query(EULER_QUESTION)

    assert str(response) == "Daniel founded fluid dynamics."
    assert ANSWER_DOC_ID in [n.node.ref_doc_id for n in response.source_nodes]
    answer_prompt = llm.prompts[-1]
    assert "Hydrodynamica" in answer_prompt and "graphrag_relations" not in answer_prompt


async def test_async_retrieval_gives_the_same_passages(make_store, minilm):
    store = ingest(make_store, minilm)
    llm = graph_llm(mentions=["Euler"], chosen=CHAIN)
    retriever = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=2)
    sync_ids = [n.node.node_id for n in retriever.retrieve(EULER_QUESTION)]
    async_ids = [n.node.node_id for n in await retriever.aretrieve(EULER_QUESTION)]
    assert async_ids == sync_ids


def test_prompts_can_be_replaced(make_store, minilm):
    from llama_index.core.prompts import PromptTemplate

    store = ingest(make_store, minilm)
    llm = graph_llm(mentions=["Euler"], chosen=CHAIN)
    retriever = GraphRAGRetriever(store=store, llm=llm)
    assert set(retriever.get_prompts()) == {"ner_prompt", "rerank_prompt"}
    retriever.update_prompts(
        {"ner_prompt": PromptTemplate('Custom NER. Reply {{"named_entities": [...]}} for: {query_str}')}
    )
    retriever.retrieve(EULER_QUESTION)
    assert llm.prompts[0].startswith("Custom NER.")
