"""The multi-hop benchmark: ingest a dataset through the public API, then Recall@k of dense retrieval
and of Graph RAG configurations on the same store and embedder, paired against dense (`evaluation`
holds the datasets, the metrics and the statistics; `report` the tables)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import QueryBundle, TextNode

from llama_index_graphrag_milvus.bench.evaluation import (
    KS,
    CachedEmbedding,
    Dataset,
    MethodResult,
    evaluate,
    load_dataset,
)
from llama_index_graphrag_milvus.bench.progress import Counting, is_shown, local_model, progress_bar
from llama_index_graphrag_milvus.bench.report import compared, printable, summary_table, write
from llama_index_graphrag_milvus.bench.candidates import candidate_recall
from llama_index_graphrag_milvus.bench.scripted import scripted_methods
from llama_index_graphrag_milvus.schema import normalize_name, parse_triplets, passage_id


def extraction_stats(nodes: Sequence[TextNode], extractor: Any = None) -> Dict[str, Any]:
    """Relations and entities per passage of the triplets in the nodes' metadata, and the time the
    extractor takes on its own (on copies of the nodes, without their triplets) per 1,000 passages."""
    from llama_index_graphrag_milvus.ingest.extract import CooccurrenceExtractor

    relations = [len(n.metadata.get("triplets") or []) for n in nodes]
    entities = [
        len({normalize_name(x) for t in n.metadata.get("triplets") or [] for x in (t[0], t[2])}) for n in nodes
    ]
    stats: Dict[str, Any] = {
        "relations_per_passage": round(sum(relations) / max(1, len(nodes)), 2),
        "entities_per_passage": round(sum(entities) / max(1, len(nodes)), 2),
    }
    if extractor is not None or not any("triplets" in n.metadata for n in nodes):
        extractor = extractor or CooccurrenceExtractor()
        copies = [TextNode(id_=n.node_id, text=n.text, metadata={}) for n in nodes]
        start = time.perf_counter()
        extractor(copies)
        stats["extractor"] = repr(extractor)
        stats["extractor_s_per_1000_passages"] = round((time.perf_counter() - start) * 1000 / max(1, len(nodes)), 3)
    return stats


def dense_ingest_seconds(
    nodes: Sequence[TextNode], embed_model: BaseEmbedding, uri: str, progress: Optional[bool] = None
) -> float:
    """Plain vector RAG's ingest of the same passages: embed them and write them to a `MilvusVectorStore`."""
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.vector_stores.milvus import MilvusVectorStore

    dim = len(embed_model.get_text_embedding("warm up"))
    copies = [TextNode(id_=n.node_id, text=n.text, metadata=dict(n.metadata)) for n in nodes]
    for copy in copies:
        copy.excluded_embed_metadata_keys = ["triplets"]
    start = time.perf_counter()
    vector_store = MilvusVectorStore(uri=uri, dim=dim, collection_name="dense_ingest", overwrite=True)
    VectorStoreIndex(copies, storage_context=StorageContext.from_defaults(vector_store=vector_store),
                     embed_model=embed_model, show_progress=is_shown(progress))
    seconds = time.perf_counter() - start
    vector_store.client.close()
    return seconds


def run_benchmark(
    data: str | Path,
    out: Optional[str | Path] = None,
    methods: Optional[Dict[str, Dict[str, Any]]] = None,
    embed_model: Optional[BaseEmbedding] = None,
    cache_dir: str | Path = ".cache/graphrag-milvus",
    uri: Optional[str] = None,
    limit: Optional[int] = None,
    chart: bool = True,
    log: Callable[[str], None] = print,
    embed_label: Optional[str] = None,
    triples: bool = True,
    raw_text: Optional[bool] = None,
    extractor: Any = None,
    time_ingest: bool = False,
    prefix: str = "bench",
    progress: Optional[bool] = None,
    scripted_llms: bool = False,
    text_links: bool = True,
) -> Dict[str, Any]:
    """Ingest `data`, then measure dense retrieval and each Graph RAG configuration in `methods`
    (name → `GraphRAGRetriever` keyword arguments). Writes JSON to `out` (default:
    `cache_dir/results/<dataset>.json`, untracked) and, with `chart`, a PNG beside it.

    The store is Milvus Lite at `uri` (default: `cache_dir/<dataset>.db`), collections `prefix`_*, which
    are overwritten. Without triples (`triples=False`, or a dataset with no `triples.jsonl`) the
    passages are raw text and the graph comes from `extractor` (default: the transform's
    `CooccurrenceExtractor`). With `time_ingest`, the embedder is not cached during the ingest, and a
    plain dense ingest of the same passages (embed, write to Milvus) is timed first, in the same run,
    for the ratio. The candidates the default retriever offers an LLM are measured with no LLM
    (`bench.candidates`: whether they hold the gold relations, and the rerank prompt's tokens). With
    `scripted_llms`, the default retriever is also measured with scripted LLMs (`bench.scripted`: an
    oracle, half right, 3 random picks, garbage). `text_links=False` ingests the given
    triples without the text's own links (`GraphRAGTransform(text_links=...)`). Progress bars go to
    stderr when `progress` is True, or (None) when it is a terminal.
    """
    from llama_index_graphrag_milvus import MilvusGraphStore

    if embed_model is None:
        embed_model, embed_label = local_model(progress), "all-MiniLM-L6-v2"
    methods = methods if methods is not None else DEFAULT_METHODS
    dataset = load_dataset(data, limit, triples=triples, raw_text=raw_text)
    cache_dir = Path(cache_dir)
    out = Path(out) if out is not None else cache_dir / "results" / f"{dataset.name}.json"
    cached = CachedEmbedding(embed_model, cache_dir / "embeddings.sqlite")
    ingest: Dict[str, Any] = {}
    if time_ingest:
        seconds = dense_ingest_seconds(dataset.nodes, embed_model, str(cache_dir / "dense.db"), progress)
        ingest["dense_ingest_s"] = round(seconds, 2)
        log(f"plain dense ingest (embed + MilvusVectorStore): {ingest['dense_ingest_s']}s")
    counting = Counting(embed_model if time_ingest else cached)
    store = MilvusGraphStore(uri=uri or str(cache_dir / f"{dataset.name}.db"), embed_model=counting, collection_prefix=prefix, overwrite=True)
    try:
        built, ingest_s = _ingestshown(store, dataset, extractor, counting, progress, log, text_links)
        if time_ingest:
            ingest.update(graph_ingest_s=round(ingest_s, 2), ratio=round(ingest_s / ingest["dense_ingest_s"], 2))
        store.embed_model = cached
        store.flush()  # queries on Milvus Lite's unsealed segments are several times slower: time what a reopened store does
        counts = store.count()
        questions = progress_bar(progress, dataset.questions, desc="Embedding the questions", unit="question")
        vectors = [cached.get_query_embedding(q["question"]) for q in questions]
        if scripted_llms:
            methods = {"graphrag": {}, **methods, **scripted_methods(store, dataset)}  # LLMs vs no LLM
        results = _measure(store, dataset, methods, vectors, progress)
        candidates = candidate_recall(store, dataset, vectors)
    finally:
        store.close()
    report = {
        "dataset": dataset.name, "questions": len(dataset.questions), "passages": len(dataset.nodes),
        "counts": counts, "embed_model": embed_label or embed_model.model_name, "ingest_s": round(ingest_s, 2),
        **({"ingest": ingest} if ingest else {}), "graph_built_from": built,
        "extraction": extraction_stats(dataset.nodes, extractor if "given triplets" not in built else None),
        "candidates": candidates,
        **compared(results, dataset), "configs": {name: printable(kwargs) for name, kwargs in methods.items()},
    }
    write(report, out, chart, log)
    return report


def _ingestshown(
    store: Any, dataset: Dataset, extractor: Any, counting: "Counting", progress: Optional[bool], log: Callable[[str], None],
    text_links: bool = True,
) -> tuple:
    """`_ingest`, with a progress bar counting the texts embedded."""
    with progress_bar(progress, total=_texts_to_embed(dataset.nodes, text_links), desc="Ingesting (embedding)", unit="text") as bar:
        counting.count_on(bar)
        built, seconds = _ingest(store, dataset, extractor, text_links)
    counting.count_on(None)
    log(f"ingested {store.count()} in {seconds:.1f}s; built from {built}")
    return built, seconds


def _texts_to_embed(nodes: Sequence[TextNode], text_links: bool = True) -> Optional[int]:
    """What an ingest into an empty store embeds: the distinct entity names, relations and passages;
    None (unknown) when some node has no triplets yet (the extractor finds them during the ingest)."""
    from llama_index_graphrag_milvus.ingest.extract.cooccurrence import with_text_links

    if not all("triplets" in n.metadata for n in nodes):
        return None
    triplets = [parse_triplets(n.metadata["triplets"])[0] for n in nodes]
    if text_links:  # the links the transform adds, as it adds them
        triplets = with_text_links(nodes, triplets)[0]
    entities, relations = set(), set()
    for t in (t for node_triplets in triplets for t in node_triplets):
        relations.add(t.id)
        entities.update((t.subject_id, t.object_id))
    passages = {passage_id(n.ref_doc_id or n.node_id, n.text) for n in nodes if n.text.strip()}
    return len(entities) + len(relations) + len(passages)


def _ingest(store: Any, dataset: Dataset, extractor: Any, text_links: bool = True) -> tuple:
    """Ingest the passages through the public API; how the graph was built, and the seconds it took."""
    from llama_index_graphrag_milvus import GraphRAGTransform

    start = time.perf_counter()
    transform = GraphRAGTransform(store=store, extractor=extractor, text_links=text_links)
    transform(dataset.nodes)
    return transform.built, time.perf_counter() - start


def _measure(
    store: Any,
    dataset: Dataset,
    methods: Dict[str, Dict[str, Any]],
    vectors: List[List[float]],
    progress: Optional[bool] = None,
) -> Dict[str, MethodResult]:
    """Dense retrieval (Milvus' own search) and each retriever configuration, on the same questions."""
    from llama_index_graphrag_milvus import GraphRAGRetriever

    def dense(bundle: QueryBundle) -> List[str]:
        return [n.node.node_id for n in store.search_passages(bundle.embedding, max(KS))]

    shown = is_shown(progress)
    results: Dict[str, MethodResult] = {
        "dense": evaluate(dense, dataset.questions, vectors, progress="dense" if shown else None)
    }
    for name, kwargs in methods.items():
        retriever = GraphRAGRetriever(store=store, **{"similarity_top_k": max(KS), "llm": None, **kwargs})
        retriever.retrieve(QueryBundle(query_str="warm up", embedding=vectors[0]))
        results[name] = evaluate(
            lambda b, r=retriever: [n.node.node_id for n in r.retrieve(b)], dataset.questions, vectors,
            progress=name if shown else None,
        )
    return results


DEFAULT_METHODS: Dict[str, Dict[str, Any]] = {
    "graphrag": {},  # the default no-LLM retriever: PPR, chain, hop and topic, fused
    "graphrag_ppr": {"ranker": "ppr"},  # each ranking of the fusion alone
    "graphrag_chain": {"ranker": "chain"},
    "graphrag_hop": {"ranker": "hop"},
    "graphrag_topic": {"ranker": "topic"},
    "graphrag_similarity": {"ranker": "similarity"},
    "graphrag_no_synonyms": {"use_synonyms": False},
}


def run_benchmarks(datas: Sequence[str | Path], out_dir: Optional[str | Path] = None, log: Callable[[str], None] = print,
                   **kwargs: Any) -> Dict[str, Any]:
    """`run_benchmark` on each dataset (default passages: raw `title + "\n" + text`, the given triples
    in metadata where there are any), then one summary table of every method on every set."""
    kwargs.setdefault("raw_text", True)
    reports = {}
    for data in datas:
        out = Path(out_dir) / f"{Path(data).name}.json" if out_dir is not None else None
        report = run_benchmark(data, out, log=log, **kwargs)
        reports[report["dataset"]] = report
    log("\n" + summary_table(reports))
    if out_dir is not None:
        Path(out_dir, "summary.md").write_text(summary_table(reports) + "\n")
    return reports



