"""Multi-hop retrieval evaluation: Recall@k of dense retrieval and of Graph RAG configurations.

The dataset format is that of HippoRAG's MuSiQue release:
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
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import NodeRelationship, QueryBundle, RelatedNodeInfo, TextNode

from llama_index_graphrag_milvus.ingest.extract import exclude_from_content


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
    """A corpus as nodes, its questions, and whether the nodes carry given triplets (`triplets.jsonl`)."""

    name: str
    nodes: List[TextNode]
    questions: List[Dict[str, Any]]
    given_triplets: bool = False


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
        if triples:
            exclude_from_content(node, "triplets")  # data, not text: neither embedded nor shown to an LLM
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=row["id"])
        nodes.append(node)
    questions = _jsonl(directory / "questions.jsonl")[:limit]
    name = directory.name if triples or not (directory / "triples.jsonl").exists() else f"{directory.name}_text_only"
    return Dataset(name=name, nodes=nodes, questions=questions, given_triplets=triples)


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
    retrieve: Callable[[QueryBundle], List[str]],
    questions: Sequence[Dict[str, Any]],
    vectors: Sequence[List[float]],
    progress: Optional[str] = None,
) -> MethodResult:
    """Recall@k of `retrieve` (a query bundle → ranked passage ids), with per-question latency.
    With `progress` (a label), a progress bar over the questions goes to stderr."""
    result = MethodResult()
    per_hops: Dict[str, List[Dict[int, float]]] = {}
    totals = {k: 0.0 for k in KS}
    pairs: Any = zip(questions, vectors)
    if progress:
        from tqdm import tqdm

        pairs = tqdm(pairs, total=len(questions), desc=progress, unit="question", file=sys.stderr)
    for question, vector in pairs:
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
