"""Dump, per question, everything the default ranker sees and its component rankings (issue 21), so that
the R@2 study (`benchmarks/r2_study.py`) and the ranking variants (`benchmarks/r2_variants.py`) run
offline on exactly what the retriever computes.

    python -m benchmarks.r2_dump --db /work/h3/identity_musique.db --data /work/shared/data/musique \
        --out .cache/issue21/musique.pkl
    python -m benchmarks.r2_dump --db /work/h3/identity_hotpotqa.db --data /work/shared/data/hotpotqa --out ...

The store is opened as it is (nothing is ingested, nothing embedded: the question vectors come from the
embedding cache). With `--build` the store is first built from the dataset (`--no-triples`, `--raw-text`,
`--union`: see `benchmarks/r2_union.py`).

Per question: the dense cosine of every passage; the real `PPRRanker`, `ChainRanker`, `HopRanker` and
default `FusedRanker` rankings (checked against the default retriever's output); PPR under other damping
/ passage weights; the chain's graph score per passage (so any chain weight is exact offline); the hop's
linked passages from several anchors (`store.linked_passages`, exact); the candidates and seeds.
Per set: the passage vectors, the passage x entity counts (relations of a passage naming an entity),
entity names and passage counts, so that link strength and look-alikes can be measured offline.
"""

from __future__ import annotations

import argparse
import os
import pickle
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
from llama_index.core.schema import QueryBundle

from llama_index_graphrag_milvus import GraphRAGRetriever, MilvusGraphStore
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding, load_dataset
from llama_index_graphrag_milvus.embeddings import local_embed_model
from llama_index_graphrag_milvus.graph.sparse import chain_scores, passage_scores
from llama_index_graphrag_milvus.milvus.collections import PASSAGES
from llama_index_graphrag_milvus.ranking import ChainRanker, FusedRanker, HopRanker, PPRRanker, Ranking, RankTask
from llama_index_graphrag_milvus.schema import passage_id

CACHE = os.environ.get("GRAPHRAG_EMBED_CACHE", "/work/cache/embeddings.sqlite")

#: (damping, passage weight) of the PPR variants recorded besides the default (0.5, 0.05).
PPR_GRID = [(d, pw) for d in (0.3, 0.5, 0.7, 0.85) for pw in (0.05, 0.2, 1.0)]


class Recorder:
    """The default fused ranker, recording its task and its parts."""

    name = "fused"
    needs_context = True

    def __init__(self) -> None:
        self.fused = FusedRanker()
        self.last: Dict[str, Any] = {}

    def rank(self, task: RankTask) -> Ranking:
        hood = task.neighbourhood
        parts = [PPRRanker().rank(task), ChainRanker().rank(task), HopRanker().rank(task)]
        fused = self.fused._fuse(task, parts)
        ids = hood.relation_ids()
        chain, best = chain_scores(hood.graph, hood.relations, hood.similarities, hood.hub_passages)
        positions, scores, _ = passage_scores(hood.graph, hood.relations, chain)
        ents = hood.graph.relation_entity[hood.relations]
        anchors: List[str] = []
        for ranking in (task.dense[:3], fused.passages[:3], parts[0].passages[:2], parts[1].passages[:2]):
            anchors += [p for p, _ in ranking if p not in anchors]
        linked = {a: task.store.linked_passages(a, task.hub_fraction) for a in anchors}
        ppr = {f"ppr_{d}_{pw}": [p for p, _ in PPRRanker(damping=d, passage_weight=pw).rank(task).passages] for d, pw in PPR_GRID}
        self.graph, self.cache = hood.graph, hood.cache
        self.last = {
            "fused": [p for p, _ in fused.passages],
            "fused_scores": [s for _, s in fused.passages],
            "ppr": [p for p, _ in parts[0].passages],
            "chain": [p for p, _ in parts[1].passages],
            "hop": [p for p, _ in parts[2].passages],
            **ppr,
            "chain_score": dict(zip(hood.passage_ids(positions), scores.tolist())),
            "dense_top": [p for p, _ in task.dense],
            "linked": linked,
            "candidates": [(r, float(s), ps) for r, s, ps in zip(ids, hood.similarities.tolist(), hood.candidate_passages)],
            "candidate_entities": [ents.indices[ents.indptr[i] : ents.indptr[i + 1]].tolist() for i in range(len(ids))],
            "seed_entities": [(e.id, e.name, float(e.score)) for e in task.seed_entities],
            "seed_positions": hood.cache.entities.lookup(np.asarray([e.id for e in task.seed_entities], dtype=np.int64)).tolist(),
            "seed_relations": [(r, float(s)) for r, s in task.seed_relations],
            "hubs": float(hood.hub_passages),
        }
        return fused


def _renamed(last: Dict[str, Any], corpus: Dict[str, str]) -> Dict[str, Any]:
    out = dict(last)
    for key, value in last.items():
        if key in ("fused", "ppr", "chain", "hop", "dense_top") or key.startswith("ppr_"):
            out[key] = [corpus[p] for p in value]
    out["chain_score"] = {corpus[p]: v for p, v in last["chain_score"].items()}
    out["linked"] = {corpus[a]: [corpus[p] for p in ps] for a, ps in last["linked"].items()}
    out["candidates"] = [(r, s, [corpus[p] for p in ps]) for r, s, ps in last["candidates"]]
    return out


def dump(store: MilvusGraphStore, dataset, embed, out: Path, label: str, check: bool = True) -> None:
    recorder = Recorder()
    retriever = GraphRAGRetriever(store=store, similarity_top_k=10, reranker=recorder, llm=None)
    default = GraphRAGRetriever(store=store, similarity_top_k=10, llm=None)
    ids = [n.node_id for n in dataset.nodes]
    stored = [passage_id(n.ref_doc_id or n.node_id, n.text) for n in dataset.nodes]
    corpus = dict(zip(stored, ids))
    rows, mismatched, start = [], 0, time.time()
    for q in dataset.questions:
        vector = embed.get_query_embedding(q["question"])
        bundle = QueryBundle(q["question"], embedding=vector)
        run = retriever.trace(bundle)
        cos = store.passage_similarities(vector, stored)
        last = _renamed(recorder.last, corpus)
        if check:
            shipped = [n.node.node_id for n in default.retrieve(bundle)]
            mismatched += shipped != last["fused"][:10]
        texts = store.describe([c[0] for c in last["candidates"][:80]])
        rows.append({
            "id": q["id"], "question": q["question"], "gold": list(q["gold_ids"]),
            "type": (q.get("meta") or {}).get("type") if isinstance(q.get("meta"), dict) else None,
            "mentions": list(run.mentions),
            "dense": np.array([cos.get(p, -1.0) for p in stored], dtype=np.float32),
            "texts": {r: f"{t.subject} | {t.predicate} | {t.object}" for r, t in texts.items()},
            **last,
        })
    graph, cache = recorder.graph, recorder.cache
    positions = cache.passages.lookup(stored)
    counts = (graph.passage_relation.astype(np.int32) @ graph.relation_entity.astype(np.int32)).tocsr()[positions]
    vectors = store._search.rows(PASSAGES, positions)  # unit rows, aligned with `ids`
    names = [cache.entity_name(i) for i in range(graph.shape[0])]
    payload = {
        "label": label, "passages": ids, "titles": [n.metadata.get("title") or n.text.split("\n", 1)[0] for n in dataset.nodes],
        "questions": rows, "counts": store.count(), "passage_entity_counts": counts,
        "passage_relations": np.diff(graph.passage_relation.tocsr()[positions].indptr),
        "entity_passages": np.asarray(graph.passage_counts), "entity_names": names,
        "passage_vectors": np.asarray(vectors, dtype=np.float32),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as handle:
        pickle.dump(payload, handle)
    print(f"{label}: {len(rows)} questions -> {out} in {time.time() - start:.0f}s; "
          f"default retriever's top 10 differ from the recorder's in {mismatched}; {store.count()}", flush=True)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True, help="a Milvus Lite store (a copy: it is opened, not built)")
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--label")
    parser.add_argument("--raw-text", action="store_true", help="load_dataset(raw_text=True): title + text, triples in metadata")
    parser.add_argument("--no-triples", action="store_true", help="load_dataset(triples=False)")
    parser.add_argument("--no-check", action="store_true")
    args = parser.parse_args(argv)
    dataset = load_dataset(args.data, triples=not args.no_triples, raw_text=True if args.raw_text else None)
    embed = CachedEmbedding(local_embed_model(), CACHE)
    store = MilvusGraphStore(uri=args.db, embed_model=embed, collection_prefix="bench")
    try:
        dump(store, dataset, embed, Path(args.out), args.label or Path(args.out).stem, check=not args.no_check)
    finally:
        store.close()


if __name__ == "__main__":
    main()
