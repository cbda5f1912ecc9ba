"""The retriever's candidate-set knobs, cross-validated over the dev sets pooled (issue 21, session 34).

The 214 variants of `r2_variants` re-ranked a fixed candidate set. This grid changes the set itself, one
`GraphRAGRetriever` argument at a time away from the default of the time (`BEFORE`): the seeds found, the
expansion, the cap on candidates. Through the public API, on stores built with the default ingest:

    python -m benchmarks.candidates grid --stores DIR   # DIR/{musique,musique_text,hotpotqa,wiki2}.db
    python -m benchmarks.candidates cv                  # 5-fold CV pooled over the four, 10 splits
    python -m benchmarks.candidates grid --round 2 --stores DIR; python -m benchmarks.candidates cv --round 2

`musique`: text with its title in metadata, the given triples and the text's links (as `graphrag-milvus
eval` builds it); `musique_text`, `hotpotqa`, `wiki2`: raw text, the default `CooccurrenceExtractor`.
Per-question recalls go to `benchmarks/results/issue21/candidates_grid.json` (round 2:
`candidates_round2_grid.json`), the CV to `candidates_cv.json` (`candidates_round2_cv.json`) beside it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.raw_text import CACHE, RESULTS, pooled_cv  # noqa: E402
from llama_index_graphrag_milvus import GraphRAGRetriever, MilvusGraphStore  # noqa: E402
from llama_index_graphrag_milvus.bench.evaluation import KS, CachedEmbedding, evaluate, load_dataset  # noqa: E402
from llama_index_graphrag_milvus.embeddings import local_embed_model  # noqa: E402

DATA = Path("/work/shared/data")
SETS = {  # name -> (dataset directory, load_dataset arguments)
    "musique": ("musique", {}),
    "musique_text": ("musique", {"triples": False}),
    "hotpotqa": ("hotpotqa", {}),
    "wiki2": ("wiki2", {}),
}
#: The default before this grid (session 34 then made `dense_seed_k=3` the default, on its CV).
BEFORE = {"dense_seed_k": 5}
CONFIGS = {name: {**BEFORE, **change} for name, change in {  # one argument away from BEFORE each
    "dense_seed_k5": {},
    "degree2": {"expansion_degree": 2},
    "entity_top_k5": {"entity_top_k": 5},
    "relation_top_k10": {"relation_top_k": 10},
    "dense_seed_k1": {"dense_seed_k": 1},
    "dense_seed_k2": {"dense_seed_k": 2},
    "dense_seed_k3": {"dense_seed_k": 3},
    "dense_seed_k4": {"dense_seed_k": 4},
    "dense_seed_k10": {"dense_seed_k": 10},
    "candidates150": {"max_candidate_relations": 150},
    "candidates600": {"max_candidate_relations": 600},
}.items()}
#: Round 2: from the new default, the knobs round 1 left out (the hub cut, synonym links).
ROUND2 = {
    "default": {},
    "hub_fraction01": {"hub_fraction": 0.01},
    "hub_fraction05": {"hub_fraction": 0.05},
    "no_synonyms": {"use_synonyms": False},
}
ROUNDS = {"1": (CONFIGS, RESULTS / "issue21" / "candidates_grid.json"),
          "2": (ROUND2, RESULTS / "issue21" / "candidates_round2_grid.json")}


def grid(stores: Path, which: str = "1") -> None:
    configs, path = ROUNDS[which]
    run_grid(stores, configs, path)


def run_grid(stores: Path, configs: dict, path: Path, arguments=lambda config, dataset: config) -> None:
    """Every config on every set through the public API, per-question recalls to `path`:
    `arguments(config, dataset)` gives the `GraphRAGRetriever` arguments of a config."""
    embed = CachedEmbedding(local_embed_model(), CACHE / "embeddings.sqlite")
    done = {}
    for name, (directory, kwargs) in SETS.items():
        dataset = load_dataset(DATA / directory, **kwargs)
        questions = dataset.questions
        vectors = [embed.get_query_embedding(q["question"]) for q in questions]
        store = MilvusGraphStore(uri=str(stores / f"{name}.db"), embed_model=embed, collection_prefix="bench")
        try:
            dense = evaluate(lambda b, s=store: [n.node.node_id for n in s.search_passages(b.embedding, max(KS))],
                             questions, vectors)
            for label, config in configs.items():
                retriever = GraphRAGRetriever(store=store, similarity_top_k=max(KS), llm=None, **arguments(config, dataset))
                result = evaluate(lambda b, r=retriever: [n.node.node_id for n in r.retrieve(b)], questions, vectors)
                done[f"{label}/{name}"] = {"config": config, "per_question": {
                    method: {f"recall@{k}": [r[k] for r in run.per_question] for k in KS}
                    for method, run in (("dense", dense), ("graphrag", result))}}
                means = " / ".join(f"{result.recall[k]:.3f}" for k in KS)
                gains = " / ".join(f"{result.recall[k] - dense.recall[k]:+.3f}" for k in KS)
                p50 = np.median(result.latencies_ms)
                print(f"{name:13s} {label:17s} R@2/5/10 {means}  vs dense {gains}  p50 {p50:.0f} ms", flush=True)
        finally:
            store.close()
    path.write_text(json.dumps(done, indent=1))


def cv(which: str = "1") -> dict:
    configs, path = ROUNDS[which]
    result = pooled_cv(json.loads(path.read_text()), list(configs), list(SETS), splits=10)
    path.with_name(path.name.replace("_grid", "_cv")).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    which = sys.argv[sys.argv.index("--round") + 1] if "--round" in sys.argv else "1"
    if sys.argv[1:2] == ["grid"]:
        grid(Path(sys.argv[sys.argv.index("--stores") + 1]), which)
    else:
        print(json.dumps(cv(which), indent=1))
