"""Dump what every retrieval's ranker sees, so that rankings can be compared offline and chosen by
cross-validation (`benchmarks/ranking_cv.py`) without re-running Milvus for each idea.

    python -m benchmarks.ranking_study --data ../shared/data/musique --raw-text --out .cache/study/musique.pkl

Per question: the dense cosine of every passage, the candidate relations (id, cosine, passages, text),
the chain ranker's graph score of every passage it reaches, and the PPR ranker's order.
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
from llama_index.core.schema import QueryBundle

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import local_embed_model
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding, load_dataset
from llama_index_graphrag_milvus.graph.sparse import chain_scores, passage_scores
from llama_index_graphrag_milvus.schema import passage_id
from llama_index_graphrag_milvus.ranking import ChainRanker, PPRRanker, Ranking, RankTask


class Recorder:
    """A ranker that records its task's features, then ranks as the default chain ranker."""

    name = "recorder"
    needs_context = True

    def __init__(self) -> None:
        self.last: Dict[str, Any] = {}

    def rank(self, task: RankTask) -> Ranking:
        hood = task.neighbourhood
        ids = hood.relation_ids()
        chain, best = chain_scores(hood.graph, hood.relations, hood.similarities, hood.hub_passages)
        positions, scores, via = passage_scores(hood.graph, hood.relations, chain)
        sim_positions, sim_scores, _ = passage_scores(hood.graph, hood.relations, hood.similarities)
        if not hasattr(self, "graph"):
            self.graph, self.cache = hood.graph, hood.cache
        ents = hood.graph.relation_entity[hood.relations]
        self.last = {
            "candidate_entities": [ents.indices[ents.indptr[i] : ents.indptr[i + 1]].tolist() for i in range(len(ids))],
            "candidates": [(r, float(s), hood.passages_of(r)) for r, s in zip(ids, hood.similarities.tolist())],
            "chain_relation": chain.tolist(),
            "chain_best": best.tolist(),
            "chain_passages": dict(zip(hood.passage_ids(positions), scores.tolist())),
            "chain_via": dict(zip(hood.passage_ids(positions), [ids[i] for i in via.tolist()])),
            "relation_passages": dict(zip(hood.passage_ids(sim_positions), sim_scores.tolist())),
            "ppr": [p for p, _ in PPRRanker().rank(task).passages],
            "seed_entities": [(e.id, e.name, float(e.score)) for e in task.seed_entities],
            "seed_positions": hood.cache.entities.lookup(np.asarray([e.id for e in task.seed_entities], dtype=np.int64)).tolist(),
            "seed_relations": list(task.seed_relations),
        }
        return ChainRanker().rank(task)


def _renamed(last: Dict[str, Any], corpus: Dict[str, str]) -> Dict[str, Any]:
    """The recorded features with corpus ids for the store's passage ids."""
    last = dict(last)
    last["candidates"] = [(r, s, [corpus[p] for p in ps]) for r, s, ps in last["candidates"]]
    for key in ("chain_passages", "chain_via", "relation_passages"):
        last[key] = {corpus[p]: v for p, v in last[key].items()}
    last["ppr"] = [corpus[p] for p in last["ppr"]]
    return last


def main(argv: List[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--raw-text", action="store_true", help="title + text as the passage text")
    parser.add_argument("--no-triples", action="store_true", help="ignore triples.jsonl: the offline extractor")
    args = parser.parse_args(argv)
    dataset = load_dataset(args.data, triples=not args.no_triples, raw_text=True if args.raw_text else None)
    embed = CachedEmbedding(local_embed_model(), ".cache/graphrag-milvus/embeddings.sqlite")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    store = MilvusGraphStore(uri=str(out.with_suffix(".db")), embed_model=embed, collection_prefix="study", overwrite=True, snapshot=False)
    try:
        GraphRAGTransform(store=store, llm=None)(dataset.nodes)
        recorder = Recorder()
        retriever = GraphRAGRetriever(store=store, similarity_top_k=10, reranker=recorder, llm=None)
        all_ids = [n.node_id for n in dataset.nodes]
        stored = [passage_id(n.ref_doc_id or n.node_id, n.text) for n in dataset.nodes]
        corpus = dict(zip(stored, all_ids))  # the store's passage ids -> the corpus ids
        rows = []
        for q in dataset.questions:
            vector = embed.get_query_embedding(q["question"])
            retriever.retrieve(QueryBundle(query_str=q["question"], embedding=vector))
            cos = store.passage_similarities(vector, stored)
            texts = store.describe([c[0] for c in recorder.last["candidates"]])
            rows.append({
                "id": q["id"], "question": q["question"], "gold": list(q["gold_ids"]),
                "dense": np.array([cos.get(p, -1.0) for p in stored], dtype=np.float32),
                "texts": {r: f"{t.subject} {t.predicate} {t.object}" for r, t in texts.items()},
                **_renamed(recorder.last, corpus),
            })
        graph, cache = recorder.graph, recorder.cache
        positions = cache.passages.lookup(stored)
        counts = (graph.passage_relation @ graph.relation_entity).tocsr()[positions]  # relations naming each entity
        passage_entity = counts.copy()
        passage_entity.data[:] = 1
        with open(out, "wb") as handle:
            pickle.dump({"passages": all_ids, "questions": rows, "counts": store.count(),
                         "passage_entity": passage_entity, "passage_entity_counts": counts,
                         "passage_relations": np.diff(graph.passage_relation.tocsr()[positions].indptr), "entity_passages": graph.passage_counts}, handle)
        print(f"{len(rows)} questions -> {out}; {store.count()}")
    finally:
        store.close()


if __name__ == "__main__":
    main()
