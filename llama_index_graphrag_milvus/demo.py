"""The demo: the Bernoulli family and Euler, plain vector RAG beside Graph RAG, on Milvus Lite.

Runs offline with the bundled MiniLM embedder and no LLM. With OPENAI_API_KEY set, OpenAI does NER,
rerank and the answer. Run: ``python -m llama_index_graphrag_milvus.demo [--uri PATH]``.
"""

from __future__ import annotations

import argparse
import os
import textwrap
from typing import List, Optional, Sequence

from llama_index.core import VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import NodeWithScore

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents
from llama_index_graphrag_milvus.retriever import RELATIONS_KEY


def _show(title: str, hits: Sequence[NodeWithScore]) -> None:
    print(f"\n{title}")
    for rank, hit in enumerate(hits, start=1):
        text = textwrap.shorten(hit.node.get_content(), 96, placeholder=" ...")
        print(f"  {rank}. [{hit.node.ref_doc_id}] score {hit.score:.3f}  {text}")
        for relation in hit.node.metadata.get(RELATIONS_KEY, []):
            print(f"       via {relation}")


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", default="./graphrag_demo.db", help="Milvus Lite path or server URI")
    parser.add_argument("--question", default=EULER_QUESTION)
    args = parser.parse_args(argv)

    llm = None
    if os.environ.get("OPENAI_API_KEY"):
        from llama_index.llms.openai import OpenAI

        llm = OpenAI(model="gpt-4o-mini", temperature=0)
    from llama_index_graphrag_milvus.embeddings import local_embed_model

    embed_model = local_embed_model()
    with MilvusGraphStore(uri=args.uri, embed_model=embed_model, collection_prefix="demo") as store:
        pipeline = IngestionPipeline(transformations=[SentenceSplitter(), GraphRAGTransform(store=store)])
        pipeline.run(documents=bernoulli_documents())  # idempotent: a second run writes nothing new
        counts = store.count()
        print(f"Milvus at {args.uri}: {counts['entities']} entities, {counts['relations']} relations, "
              f"{counts['passages']} passages")
        print(f"Question: {args.question}")
        print("LLM: " + ("OpenAI gpt-4o-mini (NER, rerank, answer)" if llm else "none (offline, graph rerank)"))

        plain = VectorStoreIndex.from_vector_store(store.vector_store, embed_model=embed_model)
        _show("Plain vector RAG, top 2:", plain.as_retriever(similarity_top_k=2).retrieve(args.question))

        retriever = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=2)
        run = retriever.trace(args.question)
        _show("Graph RAG, top 2:", run.nodes)
        print("\nChain of relations followed:")
        print("  entities in the question: " + (", ".join(run.mentions) or "(none)"))
        for relation in run.chosen:
            print(f"  {relation}")
        if run.thought_process:
            print("  reasoning: " + textwrap.shorten(run.thought_process, 300))

        if llm is not None:
            from llama_index.core.query_engine import RetrieverQueryEngine

            answer = RetrieverQueryEngine.from_args(retriever, llm=llm).query(args.question)
            print(f"\nAnswer: {answer}")


if __name__ == "__main__":
    main()
