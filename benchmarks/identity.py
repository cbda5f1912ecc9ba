"""Per-question top-10 passage ids and retrieval p50 of dense retrieval and of each retriever
configuration on a MuSiQue-format set: run it on two versions of the package and compare the JSON
files, to show that a change keeps every ranking (not only the recall) and to measure latency side by
side.

    python benchmarks/identity.py OUT.json [DATA_DIR]
    PYTHONPATH=/path/to/other/checkout python benchmarks/identity.py OTHER.json
"""

import json
import statistics
import sys
import time
from pathlib import Path

from llama_index.core.schema import QueryBundle

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import local_embed_model
from llama_index_graphrag_milvus.evaluation import CachedEmbedding, load_dataset

METHODS = {
    "graphrag": {},
    "graphrag_no_synonyms": {"use_synonyms": False},
    "graphrag_ppr": {"reranker": "ppr"},
    "graphrag_similarity": {"reranker": "similarity"},
    "graphrag_d2": {"expansion_degree": 2},
}


def rankings(retrieve, questions, vectors):
    """Each question's ranked passage ids, and the median milliseconds a retrieval took."""
    rows, ms = [], []
    for question, vector in zip(questions, vectors):
        start = time.perf_counter()
        ids = retrieve(QueryBundle(question["question"], embedding=vector))
        ms.append(1000 * (time.perf_counter() - start))
        rows.append(ids)
    return rows, statistics.median(ms)


def recall(questions, rows, k):
    return sum(len(set(q["gold_ids"]) & set(r[:k])) / len(q["gold_ids"]) for q, r in zip(questions, rows)) / len(rows)


def main() -> None:
    out = sys.argv[1]
    data = sys.argv[2] if len(sys.argv) > 2 else "../shared/data/musique"
    embed = CachedEmbedding(local_embed_model(), Path(".cache/graphrag-milvus") / "embeddings.sqlite")
    dataset = load_dataset(data)
    store = MilvusGraphStore(uri=f"/tmp/identity_{Path(out).stem}.db", embed_model=embed, collection_prefix="bench", overwrite=True)
    GraphRAGTransform(store=store, llm=None)(dataset.nodes)
    vectors = [embed.get_query_embedding(q["question"]) for q in dataset.questions]
    found = {"dense": rankings(lambda b: [n.node.node_id for n in store.search_passages(b.embedding, 10)], dataset.questions, vectors)}
    for name, kwargs in METHODS.items():
        retriever = GraphRAGRetriever(store=store, similarity_top_k=10, llm=None, **kwargs)
        retriever.retrieve(QueryBundle("warm up", embedding=vectors[0]))
        found[name] = rankings(lambda b, r=retriever: [h.node.node_id for h in r.retrieve(b)], dataset.questions, vectors)
    store.close()
    for name, (rows, p50) in found.items():
        print(name, [round(recall(dataset.questions, rows, k), 3) for k in (2, 5, 10)], f"{p50:.1f} ms")
    Path(out).write_text(json.dumps({"rankings": {n: r for n, (r, _) in found.items()}, "p50": {n: p for n, (_, p) in found.items()}}))


if __name__ == "__main__":
    main()
