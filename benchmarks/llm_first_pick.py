"""Issue 20 study: can a pick the graph does not confirm as a chain still lead, so that a half-right LLM
(its first pick right, two random) gains at R@2? Rules tried for the LLM's first pick when no chain is
confirmed (`llm_trust="confirmed"` otherwise as shipped), each with the four scripted LLMs on the three
dev sets, paired against no LLM (`benchmarks/llm_trust.py`'s `run_set`):

- `shipped`: as shipped (the pick votes);
- `first_named`: the first pick's passage leads when the pick has an entity the question names;
- `continue`: that, then the best-ranked passage stating a candidate relation of the pick's other
  (non-hub) entity, the bridge;
- `continue_only`: both passages lead only when there is such a bridge passage;
- `about` / `about_only`: as `continue` / `continue_only`, the second passage about the bridge
  (`Neighbourhood.passages_about`) when there is one;
- `grounded`: nothing more leads, but only the picks with an entity the question names vote (the
  others are ignored).

`--probe` instead reports where the first pick's passage sits in the no-LLM ranking, and how often the
first pick has a question entity, for the half-right and the random LLM.

    python -m benchmarks.llm_first_pick RULE [--probe]      # needs the stores of benchmarks/identity.py

A study (it replaces `LLMRanker._merge` in this process), not a benchmark of shipped code; its figures
are in `benchmarks/results/issue20/README.md`.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Dict, List

import numpy as np

from benchmarks import llm_trust
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding
from llama_index_graphrag_milvus.embeddings import local_embed_model
from llama_index_graphrag_milvus.graph.sparse import neighbours
from llama_index_graphrag_milvus.ranking import llm as L
from llama_index_graphrag_milvus.ranking.base import Ranking, fuse

RULES = ("shipped", "first_named", "continue", "continue_only", "about", "about_only", "grounded")
PROBE: List[Dict] = []


def _base_order(base: Ranking, passages: List[str]) -> List[str]:
    order = {p: i for i, (p, _) in enumerate(base.passages)}
    return sorted(passages, key=lambda p: order.get(p, 10**6))


def grounded(task, picks: List[int]) -> List[int]:
    """The picks with an entity the question names."""
    hood = task.neighbourhood
    named = hood.cache.entities.lookup(np.array(L._named(task), dtype=np.int64))
    named = set(named[named >= 0].tolist())
    positions = hood.cache.relations.lookup(np.array(picks, dtype=np.int64))
    return [r for r, p in zip(picks, positions.tolist()) if p >= 0 and set(neighbours(hood.graph.relation_entity, np.array([p])).tolist()) & named]


def first_lead(rule: str, task, picks: List[int], base: Ranking, passages_of: Dict) -> List[str]:
    """The passages `rule` puts first for an unconfirmed pick (none: the pick only votes)."""
    hood = task.neighbourhood
    position = hood.cache.relations.lookup(np.array(picks[:1], dtype=np.int64))
    if not len(position) or position[0] < 0:
        return []
    named = hood.cache.entities.lookup(np.array(L._named(task), dtype=np.int64))
    named = set(named[named >= 0].tolist())
    ends = neighbours(hood.graph.relation_entity, position[:1]).tolist()
    if not set(ends) & named:
        return []
    own = _base_order(base, list(passages_of.get(picks[0], [])))[:1]
    if rule == "first_named":
        return own
    bridge = [e for e in ends if e not in named and hood.graph.passage_counts[e] <= hood.hub_passages]
    candidates = set(hood.relations.tolist())
    relations = [r for r in neighbours(hood.graph.entity_relation, np.array(bridge, dtype=np.int64)).tolist() if r in candidates] if bridge else []
    ids = hood.cache.relations.ids_at(np.array(relations, dtype=np.int64)) if relations else []
    onward = {p for r in ids if r != picks[0] for p in passages_of.get(r, [])} - set(own)
    if rule.startswith("about") and bridge:
        about = set(hood.passages_about(hood.cache.entities.ids_at(np.array(bridge, dtype=np.int64)))) - set(own)
        if about or rule == "about_only":
            onward = about
    ranked = _base_order(base, list(onward))
    if not ranked:
        return own if rule in ("continue", "about") else []
    return own + ranked[:1]


def patched_merge(rule: str):
    def merge(self, task, picked, base):
        if not picked.by_llm:
            return base
        hood = task.neighbourhood
        passages_of = dict(zip(hood.relation_ids(), hood.candidate_passages))
        picks = [(r.id, r.score) for r in picked.relations]
        if rule == "probe":
            _probe(getattr(self.llm, "choose", None), task, picks, base, passages_of)
        leading, decision = self._leading(task, [r for r, _ in picks])
        firsts = first_lead(rule, task, [r for r, _ in picks], base, passages_of) if not leading and rule not in ("shipped", "probe", "grounded") else []
        if firsts:
            leading, decision = [picks[0][0]], "led: the first pick starts at the question"
        voting = [p for p in picks if p[0] not in set(leading)]
        if rule == "grounded":
            kept = set(grounded(task, [r for r, _ in voting]))
            voting = [p for p in voting if p[0] in kept]
        chosen = L._passages(voting, passages_of)
        parts = base.parts or [(base.name, [pid for pid, _ in base.passages], 1.0)]
        fused = fuse([*[(ids, w) for _, ids, w in parts], (list(chosen), self.weight)] if chosen else [(ids, w) for _, ids, w in parts], base.k)
        lead = {p: [] for p in firsts} if firsts else L._passages([p for p in picks if p[0] in set(leading)], passages_of, order=leading)
        top = fused[0][1] if fused else 0.0
        ranking = [(pid, top + (len(lead) - i) / len(lead)) for i, pid in enumerate(lead)]
        ranking += [(pid, score) for pid, score in fused if pid not in lead]
        via = {pid: lead.get(pid) or chosen.get(pid) or base.via.get(pid, []) for pid, _ in ranking}
        return Ranking(self.name, ranking, via, picks, picked.thought_process, decision=decision)

    return merge


def _probe(choose, task, picks, base, passages_of) -> None:
    hood = task.neighbourhood
    named = hood.cache.entities.lookup(np.array(L._named(task), dtype=np.int64))
    position = hood.cache.relations.lookup(np.array(picks[:1], dtype=np.int64))
    ends = set(neighbours(hood.graph.relation_entity, position).tolist()) if len(position) and position[0] >= 0 else set()
    order = [p for p, _ in base.passages]
    ranks = [order.index(p) + 1 for p in passages_of.get(picks[0][0], []) if p in order]
    llm = getattr(choose, "__qualname__", "?").split(".")[0]  # the scripted LLM's maker: half_right_llm, ...
    PROBE.append({"llm": llm, "named": bool(ends & set(named[named >= 0].tolist())), "rank": min(ranks) if ranks else None})


def main() -> None:
    llm_trust.quiet()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rule", choices=RULES)
    parser.add_argument("--probe", action="store_true")
    args = parser.parse_args()
    L.LLMRanker._merge = patched_merge("probe" if args.probe else args.rule)
    embed = CachedEmbedding(local_embed_model(), Path(os.environ.get("GRAPHRAG_CACHE", ".cache/graphrag-milvus")) / "embeddings.sqlite")
    report = {}
    for data in llm_trust.DEV_SETS:
        report[Path(data).name] = llm_trust.run_set(data, Path("/tmp"), embed, not args.probe, {}, ("confirmed",))
        for llm in sorted({p["llm"] for p in PROBE}):
            rows = [p for p in PROBE if p["llm"] == llm]
            ranks = [p["rank"] for p in rows if p["rank"] is not None]
            print(f"{Path(data).name} {llm}: first pick has a question entity {np.mean([p['named'] for p in rows]):.3f}, "
                  f"its passage in the no-LLM top 2 {np.mean([r <= 2 for r in ranks]):.3f}", flush=True)
        PROBE.clear()
    Path("/tmp/llm_first_pick.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
