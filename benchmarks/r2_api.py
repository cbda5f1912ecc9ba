"""Issue 21: the candidate rankings through the public API, on the store copies (nothing ingested).

    python -m benchmarks.r2_api --out benchmarks/results/issue21/api.json   # the three dev stores + MuSiQue graphs

Per store: dense (`store.search_passages`, Milvus' own search), `GraphRAGRetriever(store, similarity_top_k=10,
llm=None)` (the default) and the same with `reranker=benchmarks.r2_rankers.ranker(name)`; R@2/5/10 and
paired differences (bootstrap 95%, 10,000 draws; won/lost) vs dense and vs the default, per-question recalls
kept in the JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from llama_index_graphrag_milvus import GraphRAGRetriever, MilvusGraphStore
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding, evaluate, load_dataset, paired_difference
from llama_index_graphrag_milvus.embeddings import local_embed_model

from benchmarks.r2_dump import CACHE
from benchmarks.r2_rankers import ranker

DATA = "/work/shared/data"
#: name: (store copy, data dir, load_dataset kwargs)
STORES = {
    "musique": ("/work/h3/identity_musique.db", "musique", {}),
    "hotpotqa": ("/work/h3/identity_hotpotqa.db", "hotpotqa", {}),
    "wiki2": ("/work/h3/identity_wiki2.db", "wiki2", {}),
    "musique_triples": ("/work/h3/musique_triples.db", "musique", {"raw_text": True}),
    "musique_text": ("/work/h3/musique_text.db", "musique", {"triples": False}),
    "musique_union": ("/work/h3/musique_union.db", "musique", {"raw_text": True}),
}
METHODS = ("default", "topic", "topic_ppr07", "topic_chain05")


def fmt(d) -> str:
    return f"{d['diff']:+.3f} [{d['ci95'][0]:+.3f},{d['ci95'][1]:+.3f}] {d['won']}/{d['lost']}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", nargs="*", default=list(STORES))
    parser.add_argument("--methods", nargs="*", default=list(METHODS))
    parser.add_argument("--out", default="benchmarks/results/issue21/api.json")
    args = parser.parse_args()
    embed = CachedEmbedding(local_embed_model(), CACHE)
    out = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    for name in args.stores:
        db, data, kwargs = STORES[name]
        dataset = load_dataset(f"{DATA}/{data}", **kwargs)
        vectors = [embed.get_query_embedding(q["question"]) for q in dataset.questions]
        store = MilvusGraphStore(uri=db, embed_model=embed, collection_prefix="bench")
        try:
            results = {"dense": evaluate(lambda b, store=store: [n.node.node_id for n in store.search_passages(b.embedding, 10)], dataset.questions, vectors)}
            for method in args.methods:
                retriever = GraphRAGRetriever(store=store, similarity_top_k=10, llm=None,
                                              **({} if method == "default" else {"reranker": ranker(method)}))
                results[method] = evaluate(lambda b, r=retriever: [h.node.node_id for h in r.retrieve(b)], dataset.questions, vectors)
        finally:
            store.close()
        entry = {}
        for method, result in results.items():
            entry[method] = {**result.as_dict(), "per_question": result.per_question}
            if method != "dense":
                entry[method]["vs_dense"] = paired_difference(result.per_question, results["dense"].per_question)
                entry[method]["vs_default"] = paired_difference(result.per_question, results["default"].per_question)
            line = " / ".join(f"{result.recall[k]:.3f}" for k in (2, 5, 10))
            extra = "" if method == "dense" else (
                f"  vs dense R@2 {fmt(entry[method]['vs_dense']['recall@2'])} R@5 {fmt(entry[method]['vs_dense']['recall@5'])}"
                f"  vs default R@2 {fmt(entry[method]['vs_default']['recall@2'])} R@5 {fmt(entry[method]['vs_default']['recall@5'])}")
            print(f"{name:16s} {method:14s} {line}{extra}  p50 {entry[method]['p50_ms']} ms", flush=True)
        out[name] = entry
        Path(args.out).write_text(json.dumps(out))
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
