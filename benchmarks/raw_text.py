"""Multi-hop recall from raw text (issue 13): the offline extractor's parameters, chosen by cross-validation.

    python -m benchmarks.raw_text grid      # every config on both datasets (cached embeddings)
    python -m benchmarks.raw_text final     # the chosen config, with ingest timed against plain dense
    python -m benchmarks.raw_text names-grid; python -m benchmarks.raw_text names-cv   # session 5's
    python -m benchmarks.raw_text caps-grid; python -m benchmarks.raw_text caps-cv     # session 34's, 3 sets

Each config is ingested through the public API (raw `TextNode`s: title + newline + text, no metadata;
`GraphRAGTransform(store, extractor=CooccurrenceExtractor(**config))`) and measured with the default
`GraphRAGRetriever(store=..., similarity_top_k=10)`. The grid's per-question recalls go to
`benchmarks/results/raw_text_grid.json`; `cv` picks a config on 4 folds of the questions of both
datasets (fold i of each held out together) and scores it on the held-out fold.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from llama_index_graphrag_milvus.bench.benchmark import run_benchmark  # noqa: E402
from llama_index_graphrag_milvus.bench.evaluation import KS, paired_difference  # noqa: E402
from llama_index_graphrag_milvus.ingest.extract import CooccurrenceExtractor  # noqa: E402

DATA = {"hotpotqa": "/work/shared/data/hotpotqa", "musique_text_only": "/work/shared/data/musique"}
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CACHE = ROOT / ".cache" / "graphrag-milvus"
GRID = {  # (the defaults are 1 pair a sentence, 8 relations a passage, title links on, no years)
    "three_per_sentence": {"max_relations_per_sentence": 3, "max_relations_per_node": 12},
    "no_title_links": {"link_title": False, "max_relations_per_sentence": 3, "max_relations_per_node": 12},
    "small": {"max_relations_per_sentence": 2, "max_relations_per_node": 8},
    "large": {"max_relations_per_sentence": 5, "max_relations_per_node": 20},
    "years": {"years": True, "max_relations_per_sentence": 3, "max_relations_per_node": 12},
    "one_per_sentence": {"max_relations_per_sentence": 1, "max_relations_per_node": 8},
    "title_only": {"max_relations_per_sentence": 0, "max_relations_per_node": 8},
}
#: Session 5 (the hop from the top passage in the default ranking): how names are found. "plain" is
#: without initials ("Ann B. Davis") and with titles as written (not "Mark King (musician)" → "Mark
#: King", "The Jump" → "Jump", as mentions are trimmed).
NAMES = {
    "plain": {"initials": False, "topic_as_name": False},
    "names": {},
    "names_cap12": {"max_relations_per_node": 12},
}
#: Session 34 (the default ranking of issue 21, three sets): how many relations a passage keeps. More
#: links reach more gold passages of a question (measured before building: MuSiQue's gold passages
#: connected by a shared name in 34 → 40 of 60 questions at 12, HotpotQA 46 → 48, 2Wiki 67 → 71).
CAPS = {
    "cap8": {},
    "cap12": {"max_relations_per_node": 12},
    "cap16_2": {"max_relations_per_sentence": 2, "max_relations_per_node": 16},
    "cap6": {"max_relations_per_node": 6},
    "title_only": {"max_relations_per_sentence": 0},
}
GRIDS = {"extractor": (GRID, RESULTS / "raw_text_grid.json"), "names": (NAMES, RESULTS / "issue13" / "names_grid.json"),
         "caps": (CAPS, RESULTS / "issue21" / "caps_grid.json")}
DATASETS = {"caps": {**DATA, "wiki2": "/work/shared/data/wiki2"}}  # grids on other sets than DATA
METHODS = {"graphrag": {}}  # the default retriever only (run_benchmark adds similarity_top_k=10)


def grid(names=None, which: str = "extractor") -> None:
    configs, path = GRIDS[which]
    done = json.loads(path.read_text()) if path.exists() else {}
    for config in names or configs:
        for dataset, directory in DATASETS.get(which, DATA).items():
            if f"{config}/{dataset}" in done:
                continue
            report = run_benchmark(
                directory, f"/tmp/raw_{config}_{dataset}.json", methods=METHODS, triples=False,
                extractor=CooccurrenceExtractor(**configs[config]), cache_dir=CACHE,
                uri=str(CACHE / f"raw_{dataset}.db"), chart=False,
            )
            done[f"{config}/{dataset}"] = {
                "config": configs[config],
                "extraction": report["extraction"],
                "counts": report["counts"],
                "ingest_s": report["ingest_s"],
                "methods": report["methods"],
                "vs_dense": report["vs_dense"],
                "per_question": report["per_question"],
            }
            path.write_text(json.dumps(done, indent=1))


def cv(folds: int = 5, seed: int = 0, which: str = "extractor", splits: int = 1) -> dict:
    """`pooled_cv` of the `which` grid's configs on its datasets."""
    grid_configs, path = GRIDS[which]
    return pooled_cv(json.loads(path.read_text()), list(grid_configs), list(DATASETS.get(which, DATA)), folds, seed, splits)


def pooled_cv(done: dict, configs: list, data: list, folds: int = 5, seed: int = 0, splits: int = 1) -> dict:
    """Leave-one-fold-out choice of the config (objective: mean gain in R@2 and R@5 over dense, over the
    datasets `data` pooled; folds drawn within each set; ties go to the config listed first); returns the
    held-out per-question gains (with `splits` > 1, each question's held-out gain averaged over that many
    random fold draws) and which config each fold chose. `done["<config>/<dataset>"]["per_question"]`
    holds the per-question recalls of "dense" and "graphrag"."""
    order = list(configs)
    configs = [c for c in order if all(f"{c}/{d}" in done for d in data)]

    def gain(config, dataset, k):
        pq = done[f"{config}/{dataset}"]["per_question"]
        return np.array(pq["graphrag"][f"recall@{k}"]) - np.array(pq["dense"][f"recall@{k}"])

    sizes = {d: len(done[f"{configs[0]}/{d}"]["per_question"]["dense"]["recall@2"]) for d in data}
    chosen, held = [], {d: {k: np.zeros(n) for k in KS} for d, n in sizes.items()}
    for split in range(splits):
        rng = np.random.default_rng(seed + split)
        fold_of = {d: rng.permutation(n) % folds for d, n in sizes.items()}
        for f in range(folds):
            def train_score(config, f=f, fold_of=fold_of):
                return np.mean([gain(config, d, k)[fold_of[d] != f].mean() for d in data for k in (2, 5)])
            best = max(configs, key=lambda c: (round(train_score(c), 3), -order.index(c)))
            chosen.append(best)
            for d in data:
                for k in KS:
                    held[d][k][fold_of[d] == f] += gain(best, d, k)[fold_of[d] == f] / splits
    out = {"folds": folds, "splits": splits, "chosen_per_fold": chosen, "held_out": {}}
    for d in data:
        zeros = [{k: 0.0 for k in KS} for _ in held[d][2]]
        as_rows = [{k: float(held[d][k][i]) for k in KS} for i in range(len(held[d][2]))]
        out["held_out"][d] = paired_difference(as_rows, zeros)
    return out


def final(config: str = "one_per_sentence", ratio_passages: int = 300) -> None:
    """The chosen config on both datasets (cached embeddings), with the ingest ratio measured uncached on
    the first `ratio_passages` passages of each (a full uncached ingest takes 8-16 min on this machine)."""
    for dataset, directory in DATA.items():
        out = RESULTS / ("hotpotqa_raw.json" if dataset == "hotpotqa" else "musique_raw.json")
        ratio = ingest_ratio(dataset, ratio_passages, config)
        report = run_benchmark(
            directory, out, methods=METHODS, triples=False, extractor=CooccurrenceExtractor(**GRID[config]),
            cache_dir=CACHE, uri=str(CACHE / f"raw_{dataset}.db"), chart=False,
        )
        report["ingest_vs_dense_uncached"] = ratio
        if dataset == "musique_text_only":  # the LLM's triples on the same passage text, side by side
            llm = run_benchmark(
                directory, "/tmp/musique_llm_same_text.json", methods=METHODS, triples=True, raw_text=True,
                cache_dir=CACHE, uri=str(CACHE / "raw_musique_llm.db"), chart=False,
            )
            report["llm_triples_same_text"] = {k: llm[k] for k in ("counts", "extraction", "methods", "vs_dense")}
        report["config"] = {"name": config, **GRID[config]}
        grid_path = RESULTS / "raw_text_grid.json"
        if grid_path.exists():
            report["cross_validation"] = cv()
        out.write_text(json.dumps(report, indent=2))


def ingest_ratio(dataset: str = "hotpotqa", n: int = 300, config: str = "one_per_sentence") -> dict:
    """Plain dense ingest vs the graph ingest of the first `n` passages, uncached MiniLM, one run."""
    import time

    from llama_index_graphrag_milvus import GraphRAGTransform, MilvusGraphStore
    from llama_index_graphrag_milvus.embeddings import local_embed_model
    from llama_index_graphrag_milvus.bench.benchmark import dense_ingest_seconds
    from llama_index_graphrag_milvus.bench.evaluation import load_dataset

    model = local_embed_model()
    model.get_text_embedding_batch(["warm up"] * 64)
    nodes = load_dataset(DATA[dataset], triples=False).nodes[:n]
    dense = dense_ingest_seconds(nodes, model, str(CACHE / "ratio_dense.db"))
    store = MilvusGraphStore(uri=str(CACHE / "ratio_graph.db"), embed_model=model, collection_prefix="ratio",
                             overwrite=True)
    start = time.perf_counter()
    GraphRAGTransform(store=store, llm=None, extractor=CooccurrenceExtractor(**GRID[config]))(nodes)
    graph = time.perf_counter() - start
    counts = store.count()
    store.close()
    result = {"dataset": dataset, "passages": n, "config": config, "dense_ingest_s": round(dense, 2),
              "graph_ingest_s": round(graph, 2), "ratio": round(graph / dense, 2), "counts": counts}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "grid"
    if command == "grid":
        grid(sys.argv[2:] or None)
    elif command == "names-grid":
        grid(sys.argv[2:] or None, which="names")
    elif command == "caps-grid":
        grid(sys.argv[2:] or None, which="caps")
    elif command == "caps-cv":
        print(json.dumps(cv(which="caps", splits=10), indent=1))
    elif command == "names-cv":
        print(json.dumps(cv(which="names"), indent=1))
    elif command == "ratio":
        ingest_ratio(*sys.argv[2:3], *[int(a) for a in sys.argv[3:4]])
    elif command == "cv":
        print(json.dumps(cv(), indent=1))
    else:
        final(*sys.argv[2:])
