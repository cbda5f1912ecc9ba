"""Lexical evidence as a fifth fused ranking (issue 21, session 35): BM25 over the passages.

MiniLM's vectors blur exact names, numbers and rare words; BM25 (Robertson et al.; k1 1.2, b .75) over
each passage's title and text matches them. A prototype outside the package: the index is built here
from the dataset's nodes (in the package it would be a cache rebuilt from Milvus' passage texts, like
the adjacency), the passages' ids computed as the store computes them, and the top 20 fused by RRF
(weight `weight`, k = 5) beside the default's PPR, chain, hop and topic:

    python -m benchmarks.bm25 grid --stores DIR   # DIR/{musique,musique_text,hotpotqa,wiki2}.db
    python -m benchmarks.bm25 cv

Per-question recalls: `benchmarks/results/issue21/bm25_grid.json`; CV: `bm25_cv.json`.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

import numpy as np
from llama_index.core.schema import MetadataMode
from scipy import sparse

from benchmarks.candidates import run_grid
from benchmarks.feedback import RESULTS, cv
from llama_index_graphrag_milvus.ranking import ChainRanker, FusedRanker, HopRanker, PPRRanker, Ranking, RankTask
from llama_index_graphrag_milvus.ranking.base import chosen_relations
from llama_index_graphrag_milvus.ranking.topic import TopicRanker
from llama_index_graphrag_milvus.schema import passage_id

GRID_PATH = RESULTS / "issue21" / "bm25_grid.json"
WORD = re.compile(r"\w+")
#: Words too common to be evidence (the question's own scaffolding).
STOP = set("a an the of in on at to for from by with and or is was were are be been who what which when where "
           "how why whom whose did does do that this these those as it its his her their he she they".split())


def words(text: str) -> List[str]:
    return [w for w in WORD.findall(text.lower()) if w not in STOP]


@dataclass
class BM25:
    ids: List[str]
    matrix: sparse.csr_matrix  # term × passage, BM25 weights
    vocabulary: Dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(cls, nodes, k1: float = 1.2, b: float = 0.75) -> "BM25":
        ids, rows, cols, tfs, lengths, vocabulary = [], [], [], [], [], {}
        for col, node in enumerate(nodes):
            ids.append(passage_id(node.ref_doc_id or node.node_id, node.get_content(MetadataMode.NONE)))
            title = node.metadata.get("title", "")
            tokens = words(f"{title}\n{node.get_content(MetadataMode.NONE)}" if title else node.get_content(MetadataMode.NONE))
            lengths.append(len(tokens))
            for word, count in Counter(tokens).items():
                rows.append(vocabulary.setdefault(word, len(vocabulary)))
                cols.append(col)
                tfs.append(count)
        tf = np.array(tfs, dtype=np.float64)
        lengths = np.array(lengths, dtype=np.float64)
        norm = k1 * (1 - b + b * lengths[cols] / lengths.mean())
        df = np.bincount(rows, minlength=len(vocabulary))
        idf = np.log(1 + (len(nodes) - df + 0.5) / (df + 0.5))
        weights = idf[rows] * tf * (k1 + 1) / (tf + norm)
        return cls(ids, sparse.csr_matrix((weights, (rows, cols)), shape=(len(vocabulary), len(nodes))), vocabulary)

    def top(self, query: str, k: int) -> List[tuple]:
        terms = sorted({self.vocabulary[w] for w in words(query) if w in self.vocabulary})
        if not terms:
            return []
        scores = np.asarray(self.matrix[terms].sum(axis=0)).ravel()
        best = np.argsort(-scores, kind="stable")[:k]
        return [(self.ids[i], float(scores[i])) for i in best if scores[i] > 0]


@dataclass
class BM25Ranker:
    index: BM25
    depth: int = 20
    name: str = "bm25"
    needs_context: bool = False

    def rank(self, task: RankTask) -> Ranking:
        ranking = self.index.top(task.query, self.depth)
        via = task.own_relation
        return Ranking(self.name, ranking, via, chosen_relations(via, ranking, task.top_n))


CONFIGS = {"default": None, "bm25_w1": {"weight": 1.0}, "bm25_w05": {"weight": 0.5}, "bm25_w2": {"weight": 2.0}}
_INDEXES: dict = {}


def make(config: dict, dataset) -> FusedRanker:
    if id(dataset) not in _INDEXES:  # once a set, not once a config
        _INDEXES[id(dataset)] = BM25.build(dataset.nodes)
    index = _INDEXES[id(dataset)]
    rankers = (PPRRanker(), ChainRanker(), HopRanker(), TopicRanker(), BM25Ranker(index))
    return FusedRanker(rankers, weights=[1.0, 1.0, 1.0, 1.0, config["weight"]])


if __name__ == "__main__":
    if sys.argv[1:2] == ["grid"]:
        stores = Path(sys.argv[sys.argv.index("--stores") + 1])
        run_grid(stores, CONFIGS, GRID_PATH, lambda config, dataset: {} if config is None else {"reranker": make(config, dataset)})
    else:
        print(json.dumps(cv(CONFIGS, GRID_PATH), indent=1))
