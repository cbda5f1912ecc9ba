"""Per-question top-10 passage ids and retrieval p50 of dense and each retriever configuration on a
MuSiQue-format set: run it on two versions of the package and compare the JSON files, to show that a
change keeps every ranking (not only the recall) and to measure latency side by side.

    python benchmarks/identity.py OUT.json [DATA_DIR]
    PYTHONPATH=/path/to/other/checkout python benchmarks/identity.py OTHER.json
"""
import json, sys, time, statistics
from pathlib import Path
from llama_index.core.schema import QueryBundle
from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.evaluation import CachedEmbedding, load_dataset
from llama_index_graphrag_milvus.embeddings import local_embed_model

out = sys.argv[1]
data = sys.argv[2] if len(sys.argv) > 2 else "../shared/data/musique"
cache = Path(".cache/graphrag-milvus")
emb = CachedEmbedding(local_embed_model(), cache / "embeddings.sqlite")
ds = load_dataset(data)
store = MilvusGraphStore(uri=f"/tmp/rank_{Path(out).stem}.db", embed_model=emb, collection_prefix="bench", overwrite=True)
t = time.perf_counter(); GraphRAGTransform(store=store)(ds.nodes); print("ingest", time.perf_counter() - t, store.count())
vecs = [emb.get_query_embedding(q["question"]) for q in ds.questions]
methods = {"graphrag": {}, "graphrag_no_synonyms": {"use_synonyms": False}, "graphrag_ppr": {"reranker": "ppr"}, "graphrag_similarity": {"reranker": "similarity"}, "graphrag_d2": {"expansion_degree": 2}}
res = {"dense": [[n.node.node_id for n in store.search_passages(v, 10)] for v in vecs]}
lat = {}
for name, kw in methods.items():
    r = GraphRAGRetriever(store=store, similarity_top_k=10, **kw)
    r.retrieve(QueryBundle("warm", embedding=vecs[0]))
    rows, ms = [], []
    for q, v in zip(ds.questions, vecs):
        s = time.perf_counter(); hits = r.retrieve(QueryBundle(q["question"], embedding=v)); ms.append(1000 * (time.perf_counter() - s))
        rows.append([h.node.node_id for h in hits])
    res[name] = rows; lat[name] = statistics.median(ms)
store.close()
def recall(rows, k):
    return sum(len(set(q["gold_ids"]) & set(r[:k])) / len(q["gold_ids"]) for q, r in zip(ds.questions, rows)) / len(rows)
for name, rows in res.items():
    print(name, [round(recall(rows, k), 3) for k in (2, 5, 10)], round(lat.get(name, 0), 1), "ms")
json.dump({"rankings": res, "p50": lat}, open(out, "w"))
