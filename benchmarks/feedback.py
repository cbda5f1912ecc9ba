"""Dense feedback as a fifth fused ranking (issue 21, session 35): not tried before this session.

Multi-hop dense retrieval (Xiong et al., MDR, 2021) finds a question's second passage with the question
and the first passage together. Without re-encoding, the vector form: for each of the top `anchors` dense
passages p, the passages nearest to unit(q̂ + alpha·p̂), the anchor itself left out. A bridge passage that
shares little with the question but much with its first hop comes up; the graph needs no link for it.
Fused by RRF beside the default's PPR, chain, hop and topic, through the public API (`reranker=`):

    python -m benchmarks.feedback grid --stores DIR   # DIR/{musique,musique_text,hotpotqa,wiki2}.db
    python -m benchmarks.feedback cv

Per-question recalls: `benchmarks/results/issue21/feedback_grid.json`; CV: `feedback_cv.json`.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.candidates import SETS, run_grid  # noqa: E402
from benchmarks.raw_text import RESULTS, pooled_cv  # noqa: E402
from llama_index_graphrag_milvus.milvus.collections import PASSAGES  # noqa: E402
from llama_index_graphrag_milvus.ranking import ChainRanker, FusedRanker, HopRanker, PPRRanker, Ranking, RankTask  # noqa: E402
from llama_index_graphrag_milvus.ranking.base import chosen_relations  # noqa: E402
from llama_index_graphrag_milvus.ranking.topic import TopicRanker  # noqa: E402

GRID_PATH = RESULTS / "issue21" / "feedback_grid.json"


def unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


@dataclass
class FeedbackRanker:
    anchors: int = 1
    alpha: float = 1.0
    depth: int = 20
    name: str = "feedback"
    needs_context: bool = False

    def rank(self, task: RankTask) -> Ranking:
        anchors = [pid for pid, _ in task.dense[: self.anchors]]
        if not anchors:
            return Ranking(self.name, [])
        rows = task.store.collections.get(PASSAGES, anchors, ["id", "embedding"])
        q = unit(np.asarray(task.vector, dtype=np.float64))
        best: dict = {}
        for row in rows:
            v = unit(q + self.alpha * unit(np.asarray(row["embedding"], dtype=np.float64)))
            for pid, score in task.store.search_passage_ids(v.tolist(), self.depth + len(anchors)):
                if pid not in anchors and score > best.get(pid, -2.0):
                    best[pid] = score
        ranking = sorted(best.items(), key=lambda kv: -kv[1])[: self.depth]
        via = task.own_relation
        return Ranking(self.name, ranking, via, chosen_relations(via, ranking, task.top_n))


def fused(**feedback) -> FusedRanker:
    return FusedRanker((PPRRanker(), ChainRanker(), HopRanker(), TopicRanker(), FeedbackRanker(**feedback)))


CONFIGS = {
    "default": None,
    "fb_m1_a1": {"anchors": 1, "alpha": 1.0},
    "fb_m2_a1": {"anchors": 2, "alpha": 1.0},
    "fb_m3_a1": {"anchors": 3, "alpha": 1.0},
    "fb_m1_a05": {"anchors": 1, "alpha": 0.5},
    "fb_m2_a05": {"anchors": 2, "alpha": 0.5},
}


def grid(stores: Path) -> None:
    run_grid(stores, CONFIGS, GRID_PATH, lambda config, dataset: {} if config is None else {"reranker": fused(**config)})


def cv(configs: dict = CONFIGS, path: Path = GRID_PATH) -> dict:
    result = pooled_cv(json.loads(path.read_text()), list(configs), list(SETS), splits=10)
    path.with_name(path.name.replace("_grid", "_cv")).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["grid"]:
        grid(Path(sys.argv[sys.argv.index("--stores") + 1]))
    else:
        print(json.dumps(cv(), indent=1))
