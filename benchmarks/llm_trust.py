"""How far to trust the LLM's pick: `llm_trust` "vote", "confirmed" and "always" with scripted LLMs (an
oracle, half right, 3 random picks, garbage), each paired against the same retriever without an LLM, on
the dev sets (their stores as `benchmarks/identity.py` ingests them).

    python -m benchmarks.identity /tmp/x.json              # once: ingests the three dev sets
    python -m benchmarks.llm_trust [--db-root /tmp] [--out benchmarks/results/issue20/llm_trust.json]

The stores are copied before they are opened (Milvus Lite: one process a database).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List

import logging

from llama_index.core.schema import QueryBundle

from llama_index_graphrag_milvus import GraphRAGRetriever, MilvusGraphStore
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding, evaluate, load_dataset, paired_difference
from llama_index_graphrag_milvus.bench.scripted import scripted_methods
from llama_index_graphrag_milvus.embeddings import local_embed_model

DEV_SETS = ("../shared/data/musique", "../shared/data/hotpotqa", "../shared/data/wiki2")
TRUST = ("vote", "confirmed", "always")


def quiet() -> None:
    """The package's warnings off for a run (scripted garbage warns per question); called by the
    commands, never on import, so that importing this module changes nothing."""
    logging.getLogger("llama_index_graphrag_milvus").setLevel(logging.ERROR)


def run_set(data: str, db_root: Path, embed: Any, decisions: bool, tweak: Dict[str, Any], trusts=TRUST) -> Dict[str, Any]:
    name = Path(data).name
    work = Path(f"/tmp/llm_trust_{name}.db")
    for suffix in ("", ".graphrag-cache"):
        shutil.rmtree(f"{work}{suffix}", ignore_errors=True)
        if Path(f"{db_root}/identity_{name}.db{suffix}").exists():
            shutil.copytree(f"{db_root}/identity_{name}.db{suffix}", f"{work}{suffix}")
    dataset = load_dataset(data)
    store = MilvusGraphStore(uri=str(work), embed_model=embed, collection_prefix="bench")
    vectors = [embed.get_query_embedding(q["question"]) for q in dataset.questions]

    def retriever_with(**kwargs: Any) -> GraphRAGRetriever:
        retriever = GraphRAGRetriever(store=store, similarity_top_k=10, **{"llm": None, **kwargs})
        for key, value in tweak.items():  # LLMRanker attributes under study (--tweak)
            if hasattr(retriever.ranker, key):
                setattr(retriever.ranker, key, tuple(value) if isinstance(value, list) else value)
        return retriever

    def measure(**kwargs: Any):
        retriever = retriever_with(**kwargs)
        return evaluate(lambda b: [n.node.node_id for n in retriever.retrieve(b)], dataset.questions, vectors)

    base = measure()
    report: Dict[str, Any] = {"none": base.as_dict()}
    for llm_name, kwargs in scripted_methods(store, dataset).items():
        for trust in trusts:
            result = measure(llm_trust=trust, **kwargs)
            report[f"{llm_name} {trust}"] = {**result.as_dict(), "vs_none": paired_difference(result.per_question, base.per_question)}
            if decisions:
                retriever = retriever_with(llm_trust=trust, **kwargs)
                led = sum((retriever.trace(QueryBundle(q["question"], embedding=v)).llm_decision or "").startswith("led")
                          for q, v in zip(dataset.questions, vectors))
                report[f"{llm_name} {trust}"]["led_share"] = round(led / len(vectors), 3)
            d = report[f"{llm_name} {trust}"]["vs_none"]
            print(f"{name:9s} {llm_name:15s} {trust:9s} ΔR@2 {d['recall@2']['diff']:+.3f} ΔR@5 {d['recall@5']['diff']:+.3f} "
                  f"ΔR@10 {d['recall@10']['diff']:+.3f} led {report[f'{llm_name} {trust}'].get('led_share', '-')}", flush=True)
    store.close()
    return report


def main(argv: List[str] | None = None) -> None:
    quiet()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="*", default=list(DEV_SETS))
    parser.add_argument("--db-root", default="/tmp")
    parser.add_argument("--decisions", action="store_true", help="also count the questions the pick led")
    parser.add_argument("--out", default="benchmarks/results/issue20/llm_trust.json")
    parser.add_argument("--tweak", default="{}", help='LLMRanker attributes as JSON, e.g. {"replaces": []}')
    parser.add_argument("--trust", nargs="*", default=list(TRUST))
    args = parser.parse_args(argv)
    embed = CachedEmbedding(local_embed_model(), Path(os.environ.get("GRAPHRAG_CACHE", ".cache/graphrag-milvus")) / "embeddings.sqlite")
    tweak = json.loads(args.tweak)
    report = {Path(d).name: run_set(d, Path(args.db_root), embed, args.decisions, tweak, args.trust) for d in args.data}
    report["tweak"] = tweak
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
