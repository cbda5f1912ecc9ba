"""One-off study: which candidate relations to offer the LLM, and which of its picks may vote, chosen by
cross-validation pooled over the dev sets (docs/studies/candidates.md, round 3). Kept in git history only.

    GRAPHRAG_DATA=$DATA python -m benchmarks.llm_candidates_study --db-dir DIR --out rows.json
    python -m benchmarks.llm_candidates_study --cv rows.json

Each dev question is retrieved once with no LLM (the default retriever, `similarity_top_k=10`); its
`RankTask` and the base (fused) ranking are kept. Then for each configuration (an offer and a vote rule)
the scripted LLMs of `bench.scripted` are simulated on the offered relations exactly as they read the
prompt (an oracle picks every offered gold relation, in the offered order; 3 random; half right: the
oracle's first then 2 random, seeded by the question), and the picks go through `LLMRanker._merge`:
what the retriever does with the same answer. Gold relations: the gold passages' given triplets on
MuSiQue with triplets, else every relation the gold passages state. Also per question: whether a gold
relation is offered, for each gold passage, how many, and the rerank prompt's tokens (cl100k_base).
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Dict, List

import numpy as np
from llama_index.core.schema import QueryBundle

from benchmarks.devsets import cached_embed_model, data_dirs, dev_store
from llama_index_graphrag_milvus import GraphRAGRetriever
from llama_index_graphrag_milvus.bench.evaluation import KS, paired_difference
from llama_index_graphrag_milvus.bench.scripted import gold_relations, normalized
from llama_index_graphrag_milvus.bench.tokens import prompt_tokens
from llama_index_graphrag_milvus.llm.rerank import RerankResult
from llama_index_graphrag_milvus.ranking import FusedRanker, LLMRanker, arank
from llama_index_graphrag_milvus.ranking.offer import is_topic_link, offered_relations
from llama_index_graphrag_milvus.schema import ScoredRelation, passage_id


class Capture:
    """The default ranking, keeping what it was given and what it returned."""

    name, needs_context = "capture", True

    def __init__(self) -> None:
        self.base, self.got = FusedRanker(), None

    async def arank(self, task):
        self.got = (task, await arank(self.base, task))
        return self.got[1]


@dataclass
class VoteAll(LLMRanker):
    """Today's vote: every pick the graph does not confirm votes."""

    def _judged(self, task, picks):
        leading, _, decision = super()._judged(task, picks)
        return leading, set(picks) - set(leading), decision


def breadth(passages=None, kinds=False) -> Callable:
    """Breadth first over the top `passages` passages (None: all, today's offer), with or without a
    passage's statements before its topic links."""

    def offer(task, base):
        if kinds:
            return offered_relations(task, base, passages or len(base.passages), 40, 6000)
        own = task.passage_relations
        rows = [own[pid] for pid, _ in base.passages[:passages] if pid in own]
        return _described(task, _first_of_each(rows), 40, 6000)

    return offer


def paths(first=20) -> Callable:
    """The candidates on two-hop paths from the question's entities first (naming one, then sharing a
    specific entity with such a relation; statements before topic links, then by the rank of their best
    passage), `first` of them, then today's offer with kinds."""

    def offer(task, base):
        from llama_index_graphrag_milvus.graph.chains import _ends, _specific
        from llama_index_graphrag_milvus.ranking.llm import _named

        hood = task.neighbourhood
        ids, sims = hood.relation_ids(), hood.similarities.tolist()
        rank = {pid: i for i, (pid, _) in enumerate(base.passages)}
        best = [min((rank.get(p, 10**6) for p in ps), default=10**6) for ps in hood.candidate_passages]
        ends = _ends(hood.graph, hood.relations.tolist())
        positions = hood.relations.tolist()
        asked = {int(e) for e in hood.cache.entities.lookup(np.array(_named(task), dtype=np.int64)) if e >= 0}
        level = {i: 1 for i, p in enumerate(positions) if ends[p] & asked}
        bridges = {e for i in level for e in _specific(hood.graph, ends[positions[i]], asked, hood.hub_passages)}
        level.update({i: 2 for i, p in enumerate(positions) if i not in level and ends[p] & bridges})
        texts = task.store.describe(ids)

        def key(i):
            return is_topic_link(texts[ids[i]]) if ids[i] in texts else True, level[i], best[i], -sims[i]

        picked = {ids[i]: sims[i] for i in sorted(level, key=key)[:first]}
        for relation in offered_relations(task, base, len(base.passages), 80, 10**6):
            picked.setdefault(relation.id, relation.score)
        return _described(task, list(picked.items()), 40, 6000)

    return offer


def _first_of_each(rows):
    found: Dict[int, float] = {}
    for depth in range(max((len(r) for r in rows), default=0)):
        for row in rows:
            if depth < len(row) and len(found) < 80:
                found.setdefault(*row[depth])
    return list(found.items())


def _described(task, picked, lines, chars) -> List[ScoredRelation]:
    texts, offered, used = task.store.describe([r for r, _ in picked]), [], 0
    for r, score in picked:
        if r in texts:
            t = texts[r]
            relation = ScoredRelation(r, t.subject[:100], t.predicate[:100], t.object[:100], score)
            used += len(relation.text) + 8
            if offered and (used > chars or len(offered) >= lines):
                break
            offered.append(relation)
    return offered


OFFERS = {
    "today": breadth(),
    **{f"top{n}": breadth(n) for n in (10, 15, 20, 30)},
    "kinds": breadth(None, True),
    **{f"kinds_top{n}": breadth(n, True) for n in (10, 15, 20, 30)},
    "paths20": paths(20),
    "kinds_top20_60lines": lambda task, base: offered_relations(task, base, 20, 60, 9000),  # more, in more tokens
}
VOTES = {"vote_all": VoteAll, "related": LLMRanker}


def measure(data: Path, embed: Any, db_dir: Path, **options: Any) -> tuple:
    """(set name, {config: per-question rows}) for one data set."""
    dataset, store = dev_store(data, embed, db_dir, reuse=True, **options)
    capture = Capture()
    retriever = GraphRAGRetriever(store=store, llm=None, similarity_top_k=10, ranker=capture)
    gold = gold_relations(store, dataset)
    stored = {n.node_id: passage_id(n.ref_doc_id or n.node_id, n.text) for n in dataset.nodes}
    questions = []
    for q in dataset.questions:
        retriever.retrieve(QueryBundle(q["question"], embedding=embed.get_query_embedding(q["question"])))
        passages = [stored[g] for g in q["gold_ids"]]
        questions.append((q, *capture.got, gold[q["question"]], passages))
    rows = {f"{o}|{v}": [_row(q, task, base, g, ps, offer, VOTES[v](llm=None)) for q, task, base, g, ps in questions]
            for o, offer in OFFERS.items() for v in VOTES}
    store.close()
    return dataset.name, {"ids": [q["id"] for q in dataset.questions], **rows}


def _row(q, task, base, gold, passages, offer, ranker) -> Dict[str, Any]:
    offered = offer(task, base)
    ids = {r.id for r in offered}
    by_passage = {p: set() for p in passages}
    for r, stated in gold.items():
        for p in stated:
            by_passage.setdefault(p, set()).add(r)
    texts = {normalized(o.text) for o in offered if o.id in gold}
    oracle = [o for o in offered if normalized(o.text) in texts]
    seed = f"0\x1f{q['question'].strip()}"
    rest = [o for o in offered if o.id not in {f.id for f in oracle[:1]}]
    picks = {"oracle": oracle, "random": random.Random(seed).sample(offered, min(3, len(offered))),
             "half": oracle[:1] + random.Random(seed).sample(rest, min(2, len(rest)))}
    row = {"none": _recall(base, passages), "any": bool(ids & set(gold)), "n_gold": len(ids & set(gold)),
           "each": float(np.mean([bool(ids & by_passage[p]) for p in passages])),
           "tokens": prompt_tokens(q["question"], offered)}
    for name, chosen in picks.items():
        answer = RerankResult([replace(p, score=1.0 / (1 + i)) for i, p in enumerate(chosen)])
        merged = ranker._merge(task, answer, base) if chosen else base
        row[name] = _recall(merged, passages)
        row[f"{name}_led"] = (merged.decision or "").startswith("led")
        if name == "oracle":  # what the offer allows at most: every oracle pick first (llm_trust="always")
            always = LLMRanker(llm=None, trust="always")._merge(task, answer, base) if chosen else base
            row["oracle_always"] = _recall(always, passages)
    return row


def _recall(ranking, passages) -> List[float]:
    top = [p for p, _ in ranking.passages]
    return [len(set(passages) & set(top[:k])) / len(set(passages)) for k in KS]


def cv(path: str, folds: int = 5, splits: int = 10, objective: str = "oracle") -> Dict[str, Any]:
    """Pooled CV: on the training folds of all sets, the configurations whose 3 random picks lose at most
    .05 R@2 and .03 R@5 against no LLM on every set, and whose rerank prompt takes at most 15% more tokens
    than today's, and among them the best mean gain in R@2 and R@5 of `objective` ("oracle", or several
    joined by "+"); scored on the held-out fold."""
    found = json.loads(Path(path).read_text())
    configs = [c for c in next(iter(found.values())) if c != "ids"]
    arrays = {s: {c: {k: np.array([r[k] for r in rows[c]]) for k in ("none", "oracle", "random", "half", "tokens")}
                  for c in configs} for s, rows in found.items()}
    held = {s: {k: np.zeros((len(r["ids"]), len(KS))) for k in ("none", "oracle", "random", "half")} for s, r in found.items()}
    chosen: List[str] = []
    for split in range(splits):
        rng, drawn = np.random.default_rng(split), {}
        fold_of = {s: drawn.setdefault(s.removesuffix("_text_only"), rng.permutation(len(r["ids"])) % folds)
                   for s, r in found.items()}
        for f in range(folds):
            best = min(configs, key=lambda c: _key(arrays, c, fold_of, f, objective, configs.index(c)))
            chosen.append(best)
            for s in found:
                out = fold_of[s] == f
                for k in held[s]:
                    held[s][k][out] += arrays[s][best][k][out] / splits
    report: Dict[str, Any] = {"chosen": dict(Counter(chosen).most_common()), "held_out": {}}
    def rows(a):
        return [dict(zip(KS, map(float, r))) for r in a.round(9)]

    for s in found:
        report["held_out"][s] = {k: {"recall": held[s][k].mean(axis=0).round(4).tolist(),
                                     "vs_none": paired_difference(rows(held[s][k]), rows(held[s]["none"])),
                                     "vs_today": paired_difference(rows(held[s][k]), rows(arrays[s][configs[0]][k]))}
                                 for k in ("oracle", "random", "half")}
    return report


def _key(arrays, config, fold_of, f, objective, order) -> tuple:
    violation, gains = 0.0, []
    for s, runs in arrays.items():
        train, d = fold_of[s] != f, runs[config]
        loss = (d["random"][train] - d["none"][train]).mean(axis=0)
        violation += max(0.0, -0.05 - loss[0]) + max(0.0, -0.03 - loss[1])
        today = runs[next(iter(runs))]["tokens"][train].mean()
        violation += max(0.0, d["tokens"][train].mean() / today - 1.15)
        gains.append(np.mean([(d[o][train] - d["none"][train])[:, :2].mean() for o in objective.split("+")]))
    return (round(violation, 3) > 0, round(violation, 3), -round(float(np.mean(gains)), 3), order)


def main(argv: List[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db-dir", help="the dev stores (built as `graphrag-milvus eval` builds them, or reused)")
    parser.add_argument("--out", help="write the per-question rows here")
    parser.add_argument("--cv", help="cross-validate the rows of this file")
    parser.add_argument("--objective", default="oracle")
    args = parser.parse_args(argv)
    if args.cv:
        print(json.dumps(cv(args.cv, objective=args.objective), indent=1))
        return
    embed, found = cached_embed_model(), {}
    for data in data_dirs():
        for options in ([{}, {"triples": False}] if (data / "triples.jsonl").exists() else [{}]):
            name, found[name] = measure(data, embed, Path(args.db_dir), **options)
            for config, rows in found[name].items():
                if config != "ids":
                    def mean(k, i=None, rows=rows):
                        return np.mean([r[k] if i is None else r[k][i] for r in rows])

                    print(f"{name:18s} {config:20s} any {mean('any'):.3f} each {mean('each'):.3f} tokens {mean('tokens'):.0f} "
                          + " ".join(f"{k} {mean(k, 0):.3f}/{mean(k, 1):.3f}" for k in ("none", "oracle", "random", "half")),
                          flush=True)
    Path(args.out).write_text(json.dumps(found))


if __name__ == "__main__":
    main()
