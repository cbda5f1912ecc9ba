"""How far to trust the LLM's pick: `llm_trust` "vote", "confirmed" and "always" with scripted LLMs (an
oracle, half right, 3 random picks, garbage), each paired against the same retriever without an LLM, on
the dev sets (stores built as `graphrag-milvus eval` builds them, no LLM at ingest).

    GRAPHRAG_DATA=$DATA python -m benchmarks.llm_trust --decisions     # -> benchmarks/results/llm_trust.json

`--db-dir DIR` reuses the stores `python -m benchmarks.identity OUT.json --db-dir DIR` kept there (else
each set is ingested into a temporary store). `--decisions` also counts the questions a confirmed chain led.
Each set also gets its candidate recall (`bench.candidates`: what the LLM is offered, with no LLM).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path
from typing import Any, Dict, List

from llama_index.core.schema import QueryBundle

from benchmarks.devsets import RESULTS, cached_embed_model, data_dirs, dev_store, write_result
from llama_index_graphrag_milvus import GraphRAGRetriever
from llama_index_graphrag_milvus.bench.candidates import candidate_recall
from llama_index_graphrag_milvus.bench.evaluation import evaluate, paired_difference
from llama_index_graphrag_milvus.bench.scripted import scripted_methods

TRUST = ("vote", "confirmed", "always")


def run_set(data: Path, db_dir: Path, reuse: bool, embed: Any, decisions: bool, trusts=TRUST) -> Dict[str, Any]:
    dataset, store = dev_store(data, embed, db_dir, reuse=reuse)
    vectors = [embed.get_query_embedding(q["question"]) for q in dataset.questions]

    def retriever_with(**kwargs: Any) -> GraphRAGRetriever:
        return GraphRAGRetriever(store=store, similarity_top_k=10, **{"llm": None, **kwargs})

    def measure(**kwargs: Any):
        retriever = retriever_with(**kwargs)
        return evaluate(lambda b: [n.node.node_id for n in retriever.retrieve(b)], dataset.questions, vectors)

    base = measure()
    offered = candidate_recall(store, dataset, vectors)
    report: Dict[str, Any] = {"none": base.as_dict(), "candidates": {k: v for k, v in offered.items() if k != "per_question"}}
    print(f"{dataset.name:9s} candidates {report['candidates']}", flush=True)
    for llm_name, kwargs in scripted_methods(store, dataset).items():
        for trust in trusts:
            result = measure(llm_trust=trust, **kwargs)
            entry = report[f"{llm_name} {trust}"] = {**result.as_dict(), "vs_none": paired_difference(result.per_question, base.per_question)}
            if decisions:
                retriever = retriever_with(llm_trust=trust, **kwargs)
                led = sum((retriever.trace(QueryBundle(q["question"], embedding=v)).llm_decision or "").startswith("led")
                          for q, v in zip(dataset.questions, vectors))
                entry["led_share"] = round(led / len(vectors), 3)
            d = entry["vs_none"]
            print(f"{dataset.name:9s} {llm_name:15s} {trust:9s} ΔR@2 {d['recall@2']['diff']:+.3f} ΔR@5 {d['recall@5']['diff']:+.3f} "
                  f"ΔR@10 {d['recall@10']['diff']:+.3f} led {entry.get('led_share', '-')}", flush=True)
    store.close()
    return report


def main(argv: List[str] | None = None) -> None:
    logging.getLogger("llama_index_graphrag_milvus").setLevel(logging.ERROR)  # garbage warns per question
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="*", help="data directories (default: $GRAPHRAG_DATA's dev sets)")
    parser.add_argument("--db-dir", help="reuse (or keep) the stores in this directory")
    parser.add_argument("--decisions", action="store_true", help="also count the questions the pick led")
    parser.add_argument("--trust", nargs="*", default=list(TRUST))
    parser.add_argument("--out", default=str(RESULTS / "llm_trust.json"))
    args = parser.parse_args(argv)
    sets, embed = data_dirs(args.data), cached_embed_model()
    with tempfile.TemporaryDirectory(prefix="graphrag-llm-trust-") as tmp:
        db_dir = Path(args.db_dir or tmp)
        db_dir.mkdir(parents=True, exist_ok=True)
        report = {d.name: run_set(d, db_dir, bool(args.db_dir), embed, args.decisions, args.trust) for d in sets}
    write_result(args.out, report)


if __name__ == "__main__":
    main()
