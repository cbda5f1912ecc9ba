"""Choose between retriever configurations by k-fold cross-validation pooled over the dev sets, and print
the held-out paired differences with bootstrap intervals: how the default retriever's parameters are
chosen.

    GRAPHRAG_DATA=$DATA python -m benchmarks.cv '{"default": {}, "dense_seed_k=5": {"dense_seed_k": 5}}'

The argument is a JSON object (inline, or a file holding it) of `GraphRAGRetriever` arguments by name,
the first the baseline. Each data set is ingested once as `graphrag-milvus eval` ingests it (a set with
triplets twice: with them and its text links, and from its text alone; `--db-dir DIR` keeps the stores
for the next run) and every configuration runs on every question (no LLM, `similarity_top_k=10`). Then
`--splits` random draws of `--folds` folds, drawn within each set: on the training folds of all sets
together the configuration with the best mean gain over dense in R@2 and R@5 is chosen (ties: the one
listed first) and scored on the held-out fold only. Printed: each configuration's recall on all
questions, the folds' choices, and per set the held-out gain over dense and over the baseline (paired
per question, 95% bootstrap interval, won/lost). Written to `benchmarks/results/cv.json` (`--out`).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

from benchmarks.devsets import RESULTS, cached_embed_model, data_dirs, dev_store, write_result
from llama_index_graphrag_milvus import GraphRAGRetriever
from llama_index_graphrag_milvus.bench.evaluation import KS, evaluate, paired_difference


def recalls(configs: Dict[str, Dict[str, Any]], data: Path, embed: Any, db_dir: Path, reuse: bool, **options: Any) -> tuple:
    """(set name, {"dense" and each config: questions × KS recall array}) of one data set."""
    dataset, store = dev_store(data, embed, db_dir, reuse=reuse, **options)
    try:
        vectors = [embed.get_query_embedding(q["question"]) for q in dataset.questions]
        runs = {"dense": evaluate(lambda b: [n.node.node_id for n in store.search_passages(b.embedding, max(KS))],
                                  dataset.questions, vectors)}
        for name, kwargs in configs.items():
            retriever = GraphRAGRetriever(store=store, **{"similarity_top_k": max(KS), "llm": None, **kwargs})
            runs[name] = evaluate(lambda b, r=retriever: [n.node.node_id for n in r.retrieve(b)], dataset.questions, vectors)
    finally:
        store.close()
    return dataset.name, {name: np.array([[q[k] for k in KS] for q in run.per_question]) for name, run in runs.items()}


def pooled_cv(gains: Dict[str, np.ndarray], folds: int, splits: int, seed: int = 0) -> tuple:
    """`gains[set]`: configs × questions × KS, each config's gain over dense. Per set, the held-out gain of
    each question (averaged over the splits), and the index of the config each fold chose. A set's
    `_text_only` twin shares its folds, so that no question is trained on in one and held out in the other."""
    held = {s: np.zeros(g.shape[1:]) for s, g in gains.items()}
    chosen: List[int] = []
    for split in range(splits):
        rng = np.random.default_rng(seed + split)
        drawn: Dict[str, np.ndarray] = {}
        fold_of = {s: drawn.setdefault(s.removesuffix("_text_only"), rng.permutation(g.shape[1]) % folds)
                   for s, g in gains.items()}
        for f in range(folds):
            train = np.mean([g[:, fold_of[s] != f, :2].mean(axis=(1, 2)) for s, g in gains.items()], axis=0)
            best = int(np.argmax(np.round(train, 3)))  # the first of the best: ties go to the config listed first
            chosen.append(best)
            for s, g in gains.items():
                held[s][fold_of[s] == f] += g[best, fold_of[s] == f] / splits
    return {s: h.round(9) for s, h in held.items()}, chosen  # rounded: sums of tenths are not exact


def rows(array: np.ndarray) -> List[Dict[int, float]]:
    return [dict(zip(KS, map(float, row))) for row in array]


def shown(diff: Dict[str, Any]) -> str:
    return "  ".join(f"R@{k} {d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}] {d['won']}/{d['lost']}"
                     for k, d in ((k, diff[f"recall@{k}"]) for k in KS))


def main(argv: List[str] | None = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", help="JSON object (or a file holding it): name -> GraphRAGRetriever arguments")
    parser.add_argument("--data", nargs="*", help="data directories (default: $GRAPHRAG_DATA's dev sets)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--splits", type=int, default=10, help="random fold draws (folds x splits choices)")
    parser.add_argument("--db-dir", help="keep (and reuse) the stores in this directory")
    parser.add_argument("--out", default=str(RESULTS / "cv.json"))
    args = parser.parse_args(argv)
    configs = json.loads(Path(args.configs).read_text() if Path(args.configs).is_file() else args.configs)
    names, embed, found = list(configs), cached_embed_model(), {}
    with tempfile.TemporaryDirectory(prefix="graphrag-cv-") as tmp:
        db_dir = Path(args.db_dir or tmp)
        db_dir.mkdir(parents=True, exist_ok=True)
        for data in data_dirs(args.data):
            variants = [{}, {"triples": False}] if (data / "triples.jsonl").exists() else [{}]
            for options in variants:
                name, found[name] = recalls(configs, data, embed, db_dir, bool(args.db_dir), **options)
    report: Dict[str, Any] = {"configs": configs, "folds": args.folds, "splits": args.splits, "recall": {}, "held_out": {}}
    for s, runs in found.items():
        report["recall"][s] = {n: [round(float(x), 4) for x in r.mean(axis=0)] for n, r in runs.items()}
        print(f"{s}: R@{'/'.join(map(str, KS))} " + "; ".join(f"{n} {'/'.join(f'{x:.3f}' for x in r)}"
                                                             for n, r in report["recall"][s].items()))
    gains = {s: np.stack([runs[n] - runs["dense"] for n in names]) for s, runs in found.items()}
    held, chosen = pooled_cv(gains, args.folds, args.splits)
    report["chosen"] = {names[i]: c for i, c in Counter(chosen).most_common()}
    print(f"chosen in {len(chosen)} folds: {report['chosen']}")
    for s, runs in found.items():
        held_recall = rows(held[s] + runs["dense"])
        report["held_out"][s] = {"vs_dense": paired_difference(held_recall, rows(runs["dense"])),
                                 f"vs_{names[0]}": paired_difference(held_recall, rows(runs[names[0]]))}
        print(f"{s} held out, vs dense:     {shown(report['held_out'][s]['vs_dense'])}")
        print(f"{s} held out, vs {names[0]}: {shown(report['held_out'][s][f'vs_{names[0]}'])}")
    report["per_question"] = {s: {n: r.round(4).tolist() for n, r in runs.items()} for s, runs in found.items()}
    write_result(args.out, report)
    return report


if __name__ == "__main__":
    main()
