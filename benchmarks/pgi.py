"""PropertyGraphIndex on Milvus alone: MuSiQue through PGI's retriever on our store, on PGI's default
store, and our GraphRAGRetriever on the very graph PGI built.

    GRAPHRAG_DATA=$DATA python -m benchmarks.pgi [--limit N]   # -> benchmarks/results/pgi.json, pgi.md

MuSiQue's passages (`--data DIR`, default `$GRAPHRAG_DATA/musique`) become TextNodes (id = corpus id), and
their given triples PGI `Relation`s between `EntityNode`s, put in each node's metadata by a kg extractor
(as `SimpleLLMPathExtractor` does with an LLM's), so that `PropertyGraphIndex` builds the graph itself.
Measured: PGI's `VectorContextRetriever` (its default sub-retriever that needs no LLM; path depth 1 and
2) on `MilvusPropertyGraphStore` (`pgi_ours`: no vector store of PGI's own) and on PGI's defaults
(`pgi_simple`: `SimplePropertyGraphStore` and a `SimpleVectorStore`); `GraphRAGRetriever(similarity_top_k=10,
llm=None)` on `pgi_ours`' rows; `PGRetriever([GraphRAGSubRetriever, VectorContextRetriever])` on our store.
A PGI result's passage is its source chunk. MiniLM embeddings, cached; p50 is retrieval alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

from llama_index.core import PropertyGraphIndex
from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY, TRIPLET_SOURCE_KEY, EntityNode, Relation
from llama_index.core.indices.property_graph import PGRetriever, VectorContextRetriever
from llama_index.core.schema import BaseNode, TransformComponent

from benchmarks.devsets import RESULTS, cached_embed_model, data_dirs, write_result
from llama_index_graphrag_milvus import GraphRAGRetriever, MilvusPropertyGraphStore
from llama_index_graphrag_milvus.bench.evaluation import evaluate, load_dataset
from llama_index_graphrag_milvus.property_graph import GraphRAGSubRetriever


class GivenTriples(TransformComponent):
    """A kg extractor for triples that come with the data: `metadata["triplets"]` as PGI's EntityNodes and
    Relations (the output format of `SimpleLLMPathExtractor`, with no properties of their own)."""

    @classmethod
    def class_name(cls) -> str:
        return "GivenTriples"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in nodes:
            kg_nodes, kg_relations = [], []
            for triple in node.metadata.pop("triplets", []):
                if len(triple) != 3:
                    continue
                s, p, o = triple
                subject, object_ = EntityNode(name=s), EntityNode(name=o)
                kg_nodes += [subject, object_]
                kg_relations.append(Relation(label=p, source_id=subject.id, target_id=object_.id))
            node.metadata[KG_NODES_KEY], node.metadata[KG_RELATIONS_KEY] = kg_nodes, kg_relations
        return nodes


def passages_of(results) -> List[str]:
    """The ranked passage ids of PGI results: each result's source chunk (ours: plain passages)."""
    return list(dict.fromkeys(r.node.node_id for r in results if r.node.ref_doc_id is not None))


def build(nodes: List[BaseNode], embed_model, store=None) -> tuple:
    start = time.perf_counter()
    index = PropertyGraphIndex(nodes=[n.model_copy(deep=True) for n in nodes], kg_extractors=[GivenTriples()],
                               property_graph_store=store, embed_model=embed_model, use_async=False)
    return index, time.perf_counter() - start


def kg_node_texts(nodes: List[BaseNode]) -> List[str]:
    """The texts PGI's `embed_kg_nodes` embeds: `str(EntityNode)` once `triplet_source_id` is set, i.e.
    `"name ({'triplet_source_id': '<chunk id>'})"`, one per entity mention per chunk."""
    texts = []
    for node in nodes:
        for s, _, o in node.metadata.get("triplets", []):
            for name in (s, o):
                texts.append(str(EntityNode(name=name, properties={TRIPLET_SOURCE_KEY: node.node_id})))
    return texts


def measure(retriever: Any, questions, vectors) -> Dict[str, Any]:
    """Recall@k and latency of a retriever, its results read as ranked passages."""
    result = evaluate(lambda bundle: passages_of(retriever.retrieve(bundle)), questions, vectors)
    data = result.as_dict()
    data["per_question"] = result.per_question
    return data


def vector_context(index, store, embed, depth: int) -> PGRetriever:
    sub = VectorContextRetriever(store, vector_store=index.vector_store, embed_model=embed, path_depth=depth)
    return PGRetriever([sub], use_async=False)


def run(directory: Path, limit: int | None, out: Path) -> Dict[str, Any]:
    data = load_dataset(directory, limit=limit)
    embed = cached_embed_model()
    questions = data.questions
    texts = kg_node_texts(data.nodes)
    report: Dict[str, Any] = {
        "dataset": data.name, "passages": len(data.nodes), "questions": len(questions),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
        "kg_node_texts": {"count": len(texts), "unique": len(set(texts)), "example": texts[0]},
    }
    start = time.perf_counter()
    embed.get_text_embedding_batch(sorted(set(texts)))  # warm the cache: both PGI builds embed these
    report["kg_node_texts"]["warm_up_s"] = round(time.perf_counter() - start, 1)
    vectors = [embed.get_query_embedding(q["question"]) for q in questions]
    methods: Dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="graphrag-pgi-") as tmp:
        store = MilvusPropertyGraphStore(uri=str(Path(tmp) / "pgi.db"), embed_model=embed)
        try:
            ours, seconds = build(data.nodes, embed, store)
            report["ingest_s"] = {"pgi_ours": round(seconds, 1)}
            report["rows_ours"] = store.graph_store.count()
            for depth in (1, 2):
                retriever = vector_context(ours, store, embed, depth)
                methods[f"pgi_ours_depth{depth}"] = measure(retriever, questions, vectors)
            graphrag = GraphRAGRetriever(store=store.graph_store, similarity_top_k=10, llm=None)
            methods["graphrag"] = measure(graphrag, questions, vectors)
            fused = PGRetriever([GraphRAGSubRetriever(store, retriever=graphrag),
                                 VectorContextRetriever(store, embed_model=embed)], use_async=False)
            methods["fused_graphrag_then_pgi"] = measure(fused, questions, vectors)
        finally:
            store.close()
    simple, seconds = build(data.nodes, embed)
    report["ingest_s"]["pgi_simple"] = round(seconds, 1)
    for depth in (1, 2):
        retriever = vector_context(simple, simple.property_graph_store, embed, depth)
        methods[f"pgi_simple_depth{depth}"] = measure(retriever, questions, vectors)
    report["methods"] = methods
    write_result(out, report)
    out.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    return report


def markdown(report: Dict[str, Any]) -> str:
    rows = [
        ("PGI VectorContextRetriever, depth 1, on MilvusPropertyGraphStore", "pgi_ours_depth1"),
        ("PGI VectorContextRetriever, depth 1, on SimplePropertyGraphStore + SimpleVectorStore", "pgi_simple_depth1"),
        ("PGI VectorContextRetriever, depth 2, on MilvusPropertyGraphStore", "pgi_ours_depth2"),
        ("PGI VectorContextRetriever, depth 2, on SimplePropertyGraphStore + SimpleVectorStore", "pgi_simple_depth2"),
        ("GraphRAGRetriever(similarity_top_k=10, llm=None) on the PGI-built store", "graphrag"),
        ("PGRetriever([GraphRAGSubRetriever, VectorContextRetriever]) on our store", "fused_graphrag_then_pgi"),
    ]
    m = report["methods"]
    lines = [
        f"# PropertyGraphIndex on Milvus alone: {report['dataset']} ({report['passages']} passages, "
        f"{report['questions']} questions)", "",
        "`python -m benchmarks.pgi`; MiniLM embeddings (cached); p50 = retrieval only, question embedded before.", "",
        "| retriever | R@2 | R@5 | p50 ms |", "| --- | ---: | ---: | ---: |",
    ]
    for label, key in rows:
        lines.append(f"| {label} | {m[key]['recall@2']:.3f} | {m[key]['recall@5']:.3f} | {m[key]['p50_ms']:.1f} |")
    kg = report["kg_node_texts"]
    lines += [
        "", f"Ingest through `PropertyGraphIndex`: ours {report['ingest_s']['pgi_ours']} s, Simple "
        f"{report['ingest_s']['pgi_simple']} s (PGI's {kg['count']} kg-node texts embedded first, {kg['warm_up_s']} s). "
        f"Rows on ours: {report['rows_ours']}. Compare latencies within one run.", "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="the MuSiQue directory (default: $GRAPHRAG_DATA/musique)")
    parser.add_argument("--limit", type=int, default=None, help="questions (default: all)")
    parser.add_argument("--out", type=Path, default=RESULTS / "pgi.json", help="the JSON (a Markdown table beside it)")
    args = parser.parse_args()
    directory = data_dirs([args.data] if args.data else None, names=("musique",))[0]
    report = run(directory, args.limit, args.out)
    print(markdown(report))


if __name__ == "__main__":
    main()
