"""Multi-hop retrieval evaluation: Recall@k of dense retrieval and of Graph RAG configurations.

The dataset format is that of HippoRAG's MuSiQue release as laid out in `shared/data/musique`:
`corpus.jsonl` (id, title, text), `triples.jsonl` (id, triples; optional) and `questions.jsonl` (id,
question, gold_ids). Passages are ingested through the public API (`GraphRAGTransform` into a
`MilvusGraphStore`) as nodes whose ids are the corpus ids; every method then runs on the same store and
embedder. Without `triples.jsonl` (or with `triples=False`) the passages are raw text: `title + "\n" +
text` and no metadata, so the transform builds the graph with its offline extractor.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import NodeRelationship, QueryBundle, RelatedNodeInfo, TextNode

from llama_index_graphrag_milvus.schema import normalize_name

KS = (2, 5, 10)


class CachedEmbedding(BaseEmbedding):
    """Wraps an embedding model with an on-disk cache keyed by model, kind (query/text) and text."""

    _inner: BaseEmbedding = PrivateAttr()
    _db: sqlite3.Connection = PrivateAttr()
    _memory: Dict[str, List[float]] = PrivateAttr(default_factory=dict)

    def __init__(self, inner: BaseEmbedding, path: str | Path, **kwargs: Any) -> None:
        super().__init__(model_name=inner.model_name, embed_batch_size=inner.embed_batch_size, **kwargs)
        self._inner = inner
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB)")
        self._memory = {}

    @classmethod
    def class_name(cls) -> str:
        return "CachedEmbedding"

    def _key(self, kind: str, text: str) -> str:
        return hashlib.sha1(f"{self.model_name}\x1f{kind}\x1f{text}".encode()).hexdigest()

    def _lookup(self, keys: Sequence[str]) -> Dict[str, List[float]]:
        found = {k: self._memory[k] for k in keys if k in self._memory}
        missing = [k for k in keys if k not in found]
        for start in range(0, len(missing), 500):
            batch = missing[start : start + 500]
            rows = self._db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(batch))})", batch
            )
            for key, blob in rows:
                found[key] = self._memory[key] = np.frombuffer(blob, dtype=np.float32).tolist()
        return found

    def _embed(self, kind: str, texts: List[str], compute: Callable[[List[str]], List[List[float]]]):
        keys = [self._key(kind, t) for t in texts]
        found = self._lookup(keys)
        todo = [i for i, k in enumerate(keys) if k not in found]
        if todo:
            vectors = compute([texts[i] for i in todo])
            with self._db:
                for i, vector in zip(todo, vectors):
                    found[keys[i]] = self._memory[keys[i]] = list(vector)
                    self._db.execute(
                        "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                        (keys[i], np.asarray(vector, dtype=np.float32).tobytes()),
                    )
        return [found[k] for k in keys]

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._embed("query", [query], lambda q: [self._inner.get_query_embedding(q[0])])[0]

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return self._embed("text", texts, self._inner.get_text_embedding_batch)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._get_query_embedding(query)

    async def _aget_text_embedding(self, text: str) -> List[float]:
        return self._get_text_embedding(text)


@dataclass
class Dataset:
    name: str
    nodes: List[TextNode]
    questions: List[Dict[str, Any]]


def _jsonl(path: Path) -> List[Dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_dataset(
    directory: str | Path, limit: Optional[int] = None, triples: bool = True, raw_text: Optional[bool] = None
) -> Dataset:
    """Passages as `TextNode`s (id = corpus id) and questions.

    With triples (`triples.jsonl` exists and `triples`), each node holds its text, and its title and
    triplets in metadata. Otherwise (`raw_text`, the default then) each node is raw text,
    `title + "\n" + text`, with no metadata at all, as a user with only documents has them.
    `raw_text=True` with triples keeps that text and puts the triplets in metadata, so that a graph from
    the given triples and one from the text alone are measured on the same passage text.
    """
    directory = Path(directory)
    triples = triples and (directory / "triples.jsonl").exists()
    given = {row["id"]: row.get("triples", []) for row in _jsonl(directory / "triples.jsonl")} if triples else {}
    raw_text = (not triples) if raw_text is None else raw_text
    nodes = []
    for row in _jsonl(directory / "corpus.jsonl"):
        title = row.get("title", "")
        if raw_text:
            text = f"{title}\n{row['text']}" if title else row["text"]
            metadata: Dict[str, Any] = {}
        else:
            text, metadata = row["text"], {"title": title}
        if triples:
            metadata["triplets"] = given.get(row["id"], [])
        node = TextNode(id_=row["id"], text=text, metadata=metadata)
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=row["id"])
        nodes.append(node)
    questions = _jsonl(directory / "questions.jsonl")[:limit]
    name = directory.name if triples or not (directory / "triples.jsonl").exists() else f"{directory.name}_text_only"
    return Dataset(name=name, nodes=nodes, questions=questions)


def hops(question_id: str) -> str:
    """The hop count of a MuSiQue question id ("2hop__...", "3hop1__..." → "2", "3")."""
    return question_id[0] if question_id[:1].isdigit() else "?"


@dataclass
class MethodResult:
    recall: Dict[int, float] = field(default_factory=dict)
    recall_by_hops: Dict[str, Dict[int, float]] = field(default_factory=dict)
    latencies_ms: List[float] = field(default_factory=list)
    per_question: List[Dict[int, float]] = field(default_factory=list)  # recall@k of each question

    def as_dict(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {f"recall@{k}": round(v, 4) for k, v in self.recall.items()}
        data["by_hops"] = {
            h: {f"recall@{k}": round(v, 4) for k, v in r.items()} for h, r in sorted(self.recall_by_hops.items())
        }
        lat = sorted(self.latencies_ms)
        data["p50_ms"] = round(statistics.median(lat), 2) if lat else None
        data["p95_ms"] = round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 2) if lat else None
        return data


def evaluate(
    retrieve: Callable[[QueryBundle], List[str]], questions: Sequence[Dict[str, Any]], vectors: Sequence[List[float]]
) -> MethodResult:
    """Recall@k of `retrieve` (a query bundle → ranked passage ids), with per-question latency."""
    result = MethodResult()
    per_hops: Dict[str, List[Dict[int, float]]] = {}
    totals = {k: 0.0 for k in KS}
    for question, vector in zip(questions, vectors):
        bundle = QueryBundle(query_str=question["question"], embedding=vector)
        start = time.perf_counter()
        ranked = retrieve(bundle)
        result.latencies_ms.append((time.perf_counter() - start) * 1000)
        gold = set(question["gold_ids"])
        scores = {k: len(gold & set(ranked[:k])) / len(gold) for k in KS}
        for k in KS:
            totals[k] += scores[k]
        result.per_question.append(scores)
        per_hops.setdefault(hops(question["id"]), []).append(scores)
    n = max(1, len(questions))
    result.recall = {k: totals[k] / n for k in KS}
    result.recall_by_hops = {
        h: {k: sum(s[k] for s in rows) / len(rows) for k in KS} for h, rows in per_hops.items()
    }
    return result


def paired_difference(
    method: Sequence[Dict[int, float]], baseline: Sequence[Dict[int, float]], draws: int = 10_000, seed: int = 0
) -> Dict[str, Any]:
    """Per k: the mean per-question difference `method - baseline`, its 95% bootstrap interval
    (questions resampled with replacement, `draws` times, fixed `seed`), and the questions won and lost."""
    rng = np.random.default_rng(seed)
    n = len(method)
    picks = rng.integers(0, n, size=(draws, n)) if n else np.zeros((0, 0), dtype=int)
    report: Dict[str, Any] = {}
    for k in KS:
        diff = np.array([m[k] - b[k] for m, b in zip(method, baseline)])
        means = diff[picks].mean(axis=1) if n else np.zeros(1)
        low, high = np.percentile(means, [2.5, 97.5])
        report[f"recall@{k}"] = {
            "diff": round(float(diff.mean()) if n else 0.0, 4),
            "ci95": [round(float(low), 4), round(float(high), 4)],
            "won": int((diff > 0).sum()),
            "lost": int((diff < 0).sum()),
        }
    return report


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


def dense_ingest_seconds(nodes: Sequence[TextNode], embed_model: BaseEmbedding, uri: str) -> float:
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
                     embed_model=embed_model)
    seconds = time.perf_counter() - start
    vector_store.client.close()
    return seconds


def run_benchmark(
    data: str | Path,
    out: str | Path,
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
) -> Dict[str, Any]:
    """Ingest `data`, then measure dense retrieval and each Graph RAG configuration in `methods`
    (name → `GraphRAGRetriever` keyword arguments). Writes JSON to `out` (and a PNG beside it).

    Without triples (`triples=False`, or a dataset with no `triples.jsonl`) the passages are raw text
    and the graph comes from `extractor` (default: the transform's `CooccurrenceExtractor`). With
    `time_ingest`, the embedder is not cached during the ingest, and a plain dense ingest of the same
    passages (embed, write to Milvus) is timed first, in the same run, for the ratio.
    """
    from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore

    if embed_model is None:
        from llama_index_graphrag_milvus.embeddings import local_embed_model

        embed_model, embed_label = local_embed_model(), "all-MiniLM-L6-v2"
    methods = methods if methods is not None else DEFAULT_METHODS
    dataset = load_dataset(data, limit, triples=triples, raw_text=raw_text)
    cache_dir = Path(cache_dir)
    cached = CachedEmbedding(embed_model, cache_dir / "embeddings.sqlite")
    uri = uri or str(cache_dir / f"{dataset.name}.db")
    ingest: Dict[str, Any] = {}
    if time_ingest:
        ingest["dense_ingest_s"] = round(dense_ingest_seconds(dataset.nodes, embed_model, str(cache_dir / "dense.db")), 2)
        log(f"plain dense ingest (embed + MilvusVectorStore): {ingest['dense_ingest_s']}s")

    store = MilvusGraphStore(
        uri=uri, embed_model=embed_model if time_ingest else cached, collection_prefix="bench", overwrite=True
    )
    try:
        start = time.perf_counter()
        transform = GraphRAGTransform(store=store, extractor=extractor)
        transform(dataset.nodes)
        ingest_s = time.perf_counter() - start
        store.embed_model = cached
        counts = store.count()
        log(f"ingested {counts} in {ingest_s:.1f}s; built from {transform.built}")
        if time_ingest:
            ingest["graph_ingest_s"] = round(ingest_s, 2)
            ingest["ratio"] = round(ingest_s / ingest["dense_ingest_s"], 2)
        vectors = [cached.get_query_embedding(q["question"]) for q in dataset.questions]

        def dense(bundle: QueryBundle) -> List[str]:
            return [n.node.node_id for n in store.search_passages(bundle.embedding, max(KS))]

        results: Dict[str, MethodResult] = {"dense": evaluate(dense, dataset.questions, vectors)}
        for name, kwargs in methods.items():
            retriever = GraphRAGRetriever(store=store, **{"similarity_top_k": max(KS), **kwargs})
            retriever.retrieve(QueryBundle(query_str="warm up", embedding=vectors[0]))
            results[name] = evaluate(
                lambda b, r=retriever: [n.node.node_id for n in r.retrieve(b)], dataset.questions, vectors
            )
    finally:
        store.close()

    report = {
        "dataset": dataset.name,
        "questions": len(dataset.questions),
        "passages": len(dataset.nodes),
        "counts": counts,
        "embed_model": embed_label or embed_model.model_name,
        "ingest_s": round(ingest_s, 2),
        **({"ingest": ingest} if ingest else {}),
        "graph_built_from": transform.built,
        "extraction": extraction_stats(dataset.nodes, extractor if "given triplets" not in transform.built else None),
        "methods": {name: r.as_dict() for name, r in results.items()},
        "vs_dense": {
            name: paired_difference(r.per_question, results["dense"].per_question)
            for name, r in results.items()
            if name != "dense"
        },
        "per_question": {
            name: {f"recall@{k}": [round(s[k], 3) for s in r.per_question] for k in KS} for name, r in results.items()
        },
        "question_ids": [q["id"] for q in dataset.questions],
        "configs": methods,
    }
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    log(format_table(report))
    if chart:
        draw_chart(report, out.with_suffix(".png"))
    return report


DEFAULT_METHODS: Dict[str, Dict[str, Any]] = {
    "graphrag": {},  # the default no-LLM retriever: chain rerank
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
    if report.get("vs_dense"):
        lines += ["", "| vs dense (95% bootstrap CI; won/lost) | R@2 | R@5 | R@10 |", "|---|---|---|---|"]
        for name, d in report["vs_dense"].items():
            cells = [
                f"{c['diff']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]; {c['won']}/{c['lost']}"
                for c in (d[f"recall@{k}"] for k in KS)
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
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
