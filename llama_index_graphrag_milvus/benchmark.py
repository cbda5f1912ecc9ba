"""The multi-hop benchmark: ingest a dataset through the public API, then Recall@k of dense retrieval
and of Graph RAG configurations on the same store and embedder, paired against dense (`evaluation.py`
holds the datasets, the metrics and the statistics)."""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import QueryBundle, TextNode
from tqdm import tqdm

from llama_index_graphrag_milvus.evaluation import (
    KS,
    CachedEmbedding,
    Dataset,
    MethodResult,
    evaluate,
    load_dataset,
    paired_difference,
)
from llama_index_graphrag_milvus.schema import normalize_name, parse_triplets, passage_id


def extraction_stats(nodes: Sequence[TextNode], extractor: Any = None) -> Dict[str, Any]:
    """Relations and entities per passage of the triplets in the nodes' metadata, and the time the
    extractor takes on its own (on copies of the nodes, without their triplets) per 1,000 passages."""
    from llama_index_graphrag_milvus.extract import CooccurrenceExtractor

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
                     embed_model=embed_model, show_progress=_shown(progress))
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
) -> Dict[str, Any]:
    """Ingest `data`, then measure dense retrieval and each Graph RAG configuration in `methods`
    (name → `GraphRAGRetriever` keyword arguments). Writes JSON to `out` (default:
    `cache_dir/results/<dataset>.json`, untracked) and, with `chart`, a PNG beside it.

    The store is Milvus Lite at `uri` (default: `cache_dir/<dataset>.db`), collections `prefix`_*, which
    are overwritten. Without triples (`triples=False`, or a dataset with no `triples.jsonl`) the
    passages are raw text and the graph comes from `extractor` (default: the transform's
    `CooccurrenceExtractor`). With `time_ingest`, the embedder is not cached during the ingest, and a
    plain dense ingest of the same passages (embed, write to Milvus) is timed first, in the same run,
    for the ratio. With `scripted_llms`, the default retriever is also measured with scripted LLMs
    (`scripted.py`: an oracle, 3 random picks, garbage), and the ceiling of the LLM path is reported:
    the share of gold passages that some candidate relation states. Progress bars go to stderr when `progress` is True, or (None) when it is a terminal.
    """
    from llama_index_graphrag_milvus import MilvusGraphStore

    if embed_model is None:
        embed_model, embed_label = _local_model(progress), "all-MiniLM-L6-v2"
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
    counting = _Counting(embed_model if time_ingest else cached)
    store = MilvusGraphStore(uri=uri or str(cache_dir / f"{dataset.name}.db"), embed_model=counting, collection_prefix=prefix, overwrite=True)
    try:
        built, ingest_s = _ingest_shown(store, dataset, extractor, counting, progress, log)
        if time_ingest:
            ingest.update(graph_ingest_s=round(ingest_s, 2), ratio=round(ingest_s / ingest["dense_ingest_s"], 2))
        store.embed_model = cached
        counts = store.count()
        questions = _bar(progress, dataset.questions, desc="Embedding the questions", unit="question")
        vectors = [cached.get_query_embedding(q["question"]) for q in questions]
        if scripted_llms:
            methods = {"graphrag": {}, **methods, **_scripted_methods(store, dataset)}  # LLMs vs no LLM
        results = _measure(store, dataset, methods, vectors, progress)
        ceiling = _ceiling(store, dataset, vectors) if scripted_llms else None
    finally:
        store.close()
    report = {
        "dataset": dataset.name, "questions": len(dataset.questions), "passages": len(dataset.nodes),
        "counts": counts, "embed_model": embed_label or embed_model.model_name, "ingest_s": round(ingest_s, 2),
        **({"ingest": ingest} if ingest else {}), "graph_built_from": built,
        "extraction": extraction_stats(dataset.nodes, extractor if "given triplets" not in built else None),
        **({"ceiling": ceiling} if ceiling else {}),
        **_compared(results, dataset), "configs": {name: _printable(kwargs) for name, kwargs in methods.items()},
    }
    _write(report, out, chart, log)
    return report


def _stored_ids(dataset: Dataset) -> Dict[str, str]:
    """The store's passage id of each corpus passage."""
    return {n.node_id: passage_id(n.ref_doc_id or n.node_id, n.text) for n in dataset.nodes}


def _gold_relations(store: Any, dataset: Dataset) -> Dict[str, List[int]]:
    """For each question, the relations its gold passages state."""
    stored = _stored_ids(dataset)
    wanted = sorted({stored[g] for q in dataset.questions for g in q["gold_ids"] if g in stored})
    rows = {row["id"]: row["relation_ids"] for row in store.collections.get("passages", wanted, ["id", "relation_ids"])}
    return {
        q["question"]: sorted({r for g in q["gold_ids"] for r in rows.get(stored.get(g, ""), [])})
        for q in dataset.questions
    }


def _scripted_methods(store: Any, dataset: Dataset) -> Dict[str, Dict[str, Any]]:
    """The default retriever with scripted LLMs (an oracle, 3 random picks, garbage)."""
    from llama_index_graphrag_milvus.scripted import garbage_llm, oracle_llm, random_llm

    gold = _gold_relations(store, dataset)
    texts = store.describe(sorted({r for rs in gold.values() for r in rs}))
    oracle = oracle_llm({q: {texts[r].text for r in rs if r in texts} for q, rs in gold.items()})
    return {"llm_oracle": {"llm": oracle}, "llm_random3": {"llm": random_llm(3)}, "llm_garbage": {"llm": garbage_llm()}}


def _ceiling(store: Any, dataset: Dataset, vectors: List[List[float]]) -> Dict[str, Any]:
    """The room of the LLM path: the share of gold passages that some candidate relation of the default
    retriever states, and the share that some relation offered to the LLM states (what a perfect pick
    can lift), both with the gold passages already in the no-LLM top k counted too."""
    from llama_index_graphrag_milvus import GraphRAGRetriever
    from llama_index_graphrag_milvus.scripted import ScriptedLLM

    offered: List[str] = []
    recorder = ScriptedLLM(choose=lambda question, lines: offered.extend(t for _, t in lines) and None)
    # the recorder never answers, so its retrieval is exactly the one without an LLM
    with_llm = GraphRAGRetriever(store=store, similarity_top_k=max(KS), llm=recorder)
    stored = _stored_ids(dataset)
    shares: Dict[str, List[float]] = {"candidates": [], "offered": []}
    for question, vector in zip(dataset.questions, vectors):
        offered.clear()
        run = with_llm.trace(QueryBundle(query_str=question["question"], embedding=vector))
        top = {n.node.node_id for n in run.nodes}
        shown = {" ".join(t.lower().split()) for t in offered}
        by_candidates = {p for c in run.candidates for p in c.passage_ids}
        texts = store.describe([c.id for c in run.candidates])
        by_offered = {p for c in run.candidates if c.id in texts and " ".join(texts[c.id].text.lower().split()) in shown
                      for p in c.passage_ids}
        gold = set(question["gold_ids"])
        for key, reached in (("candidates", by_candidates), ("offered", by_offered)):
            shares[key].append(sum(g in top or stored.get(g) in reached for g in gold) / len(gold))
    return {
        "gold_passages_among_candidates": round(float(np.mean(shares["candidates"])), 4),
        "gold_passages_among_offered": round(float(np.mean(shares["offered"])), 4),
    }


def _printable(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """A method's arguments as JSON can hold them (an LLM by its class name)."""
    return {k: v if isinstance(v, (str, int, float, bool, type(None))) else type(v).__name__ for k, v in kwargs.items()}


def _local_model(progress: Optional[bool]) -> BaseEmbedding:
    from llama_index_graphrag_milvus.embeddings import local_embed_model

    with _model_loading_bar(_shown(progress)):
        return local_embed_model()


def _ingest_shown(
    store: Any, dataset: Dataset, extractor: Any, counting: "_Counting", progress: Optional[bool], log: Callable[[str], None]
) -> tuple:
    """`_ingest`, with a progress bar counting the texts embedded."""
    with _bar(progress, total=_texts_to_embed(dataset.nodes), desc="Ingesting (embedding)", unit="text") as bar:
        counting.count_on(bar)
        built, seconds = _ingest(store, dataset, extractor)
    counting.count_on(None)
    log(f"ingested {store.count()} in {seconds:.1f}s; built from {built}")
    return built, seconds


def _shown(progress: Optional[bool]) -> bool:
    """Whether to show progress: as asked, else (None) when stderr is a terminal, so not when piped."""
    return sys.stderr.isatty() if progress is None else progress


def _bar(progress: Optional[bool], iterable: Any = None, **kwargs: Any) -> tqdm:
    """A progress bar on stderr, shown as `_shown` says; it leaves no line behind when hidden."""
    return tqdm(iterable, disable=not _shown(progress), file=sys.stderr, **kwargs)


@contextmanager
def _model_loading_bar(shown: bool) -> Iterator[None]:
    """transformers' "Loading weights" bar, hidden when ours are (piped output)."""
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:  # no `local` extra: local_embed_model says what to install
        yield
        return
    enabled = transformers_logging.is_progress_bar_enabled()
    if enabled and not shown:
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled and not shown:
            transformers_logging.enable_progress_bar()


class _Counting(BaseEmbedding):
    """Passes through `inner`'s embeddings, counting the texts embedded on `bar` (when one is set)."""

    _inner: BaseEmbedding = PrivateAttr()
    _bar: Any = PrivateAttr(default=None)

    def __init__(self, inner: BaseEmbedding) -> None:
        super().__init__(model_name=inner.model_name, embed_batch_size=inner.embed_batch_size)
        self._inner = inner

    def count_on(self, bar: Any) -> None:
        """Count the texts embedded from now on on `bar` (None: stop counting)."""
        self._bar = bar

    @classmethod
    def class_name(cls) -> str:
        return "Counting"

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        vectors = self._inner.get_text_embedding_batch(texts)
        if self._bar is not None:
            self._bar.update(len(texts))
        return vectors

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._inner.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._get_query_embedding(query)

    async def _aget_text_embedding(self, text: str) -> List[float]:
        return self._get_text_embedding(text)


def _texts_to_embed(nodes: Sequence[TextNode]) -> Optional[int]:
    """What an ingest into an empty store embeds: the distinct entity names, relations and passages;
    None (unknown) when some node has no triplets yet (the extractor finds them during the ingest)."""
    if not all("triplets" in n.metadata for n in nodes):
        return None
    entities, relations = set(), set()
    for node in nodes:
        for t in parse_triplets(node.metadata["triplets"])[0]:
            relations.add(t.id)
            entities.update((t.subject_id, t.object_id))
    passages = {passage_id(n.ref_doc_id or n.node_id, n.text) for n in nodes if n.text.strip()}
    return len(entities) + len(relations) + len(passages)


def _ingest(store: Any, dataset: Dataset, extractor: Any) -> tuple:
    """Ingest the passages through the public API; how the graph was built, and the seconds it took."""
    from llama_index_graphrag_milvus import GraphRAGTransform

    start = time.perf_counter()
    transform = GraphRAGTransform(store=store, llm=None, extractor=extractor)  # never Settings.llm here
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

    shown = _shown(progress)
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


def _compared(results: Dict[str, MethodResult], dataset: Dataset) -> Dict[str, Any]:
    """The methods' figures, their paired differences against dense, and the per-question recalls."""
    return {
        "methods": {name: r.as_dict() for name, r in results.items()},
        "vs_dense": {
            name: paired_difference(r.per_question, results["dense"].per_question)
            for name, r in results.items()
            if name != "dense"
        },
        # an LLM's effect is measured against the same retriever without it
        "vs_graphrag": {
            name: paired_difference(r.per_question, results["graphrag"].per_question)
            for name, r in results.items()
            if name.startswith("llm_") and "graphrag" in results
        },
        "per_question": {
            name: {f"recall@{k}": [round(s[k], 3) for s in r.per_question] for k in KS} for name, r in results.items()
        },
        "question_ids": [q["id"] for q in dataset.questions],
    }


def _write(report: Dict[str, Any], out: Path, chart: bool, log: Callable[[str], None]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    log(format_table(report))
    if chart:
        draw_chart(report, out.with_suffix(".png"))
    log(f"\nresults: {out}" + (f" (chart: {out.with_suffix('.png')})" if chart else ""))


DEFAULT_METHODS: Dict[str, Dict[str, Any]] = {
    "graphrag": {},  # the default no-LLM retriever: PPR and chain, fused
    "graphrag_chain": {"reranker": "chain"},
    "graphrag_no_synonyms": {"use_synonyms": False},
    "graphrag_ppr": {"reranker": "ppr"},
    "graphrag_similarity": {"reranker": "similarity"},
}


def format_table(report: Dict[str, Any]) -> str:
    """The results as a Markdown table."""
    lines = [
        f"{report['dataset']}: {report['questions']} questions, {report['passages']} passages, "
        f"ingest {report['ingest_s']}s",
        "",
        "| method | R@2 | R@5 | R@10 | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, m in report["methods"].items():
        lines.append(
            f"| {name} | {m['recall@2']:.3f} | {m['recall@5']:.3f} | {m['recall@10']:.3f} "
            f"| {m['p50_ms']} | {m['p95_ms']} |"
        )
    for key, title in (("vs_dense", "vs dense (95% bootstrap CI; won/lost)"),
                       ("vs_graphrag", "vs graphrag without an LLM (95% CI; won/lost)")):
        if report.get(key):
            lines += ["", f"| {title} | R@2 | R@5 | R@10 |", "|---|---|---|---|"]
            for name, d in report[key].items():
                cells = [
                    f"{c['diff']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]; {c['won']}/{c['lost']}"
                    for c in (d[f"recall@{k}"] for k in KS)
                ]
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if report.get("ceiling"):
        c = report["ceiling"]
        lines += ["", f"LLM ceiling (gold passages in the no-LLM top {max(KS)}, or stated by a relation): by a candidate "
                  f"{c['gold_passages_among_candidates']:.1%}, by one offered to the LLM {c['gold_passages_among_offered']:.1%}."]
    return "\n".join(lines)


def draw_chart(report: Dict[str, Any], path: str | Path) -> None:
    """A grouped bar chart of Recall@2/5/10 per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["methods"])
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(names) + 2), 4))
    width = 0.8 / len(KS)
    for i, k in enumerate(KS):
        values = [report["methods"][n][f"recall@{k}"] for n in names]
        bars = ax.bar(np.arange(len(names)) + i * width, values, width, label=f"Recall@{k}")
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks(np.arange(len(names)) + width * (len(KS) - 1) / 2, names, fontsize=9)
    ax.set_ylim(0, 1)
    ax.set_ylabel("recall")
    ax.set_title(f"{report['dataset']}: {report['questions']} questions, {report['embed_model'].split('/')[-1]}")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
