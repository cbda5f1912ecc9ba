"""The hop from the top passage (issue 13, session 5), offline on `benchmarks/ranking_study.py`'s dumps:
its variants chosen by cross-validation, and how an LLM's pick should meet it.

    python -m benchmarks.hop_study .cache/study/hotpotqa.pkl .cache/study/musique_text.pkl .cache/study/musique.pkl

A passage is *about* an entity when at least `share` of its relations name it; the hop ranking is the
anchor (the top dense passage, or the top of the PPR + chain fusion), then the passages about a name the
anchor states (hubs left out, or not), by dense cosine; it is fused with PPR and chain (RRF, k = 5) with
weight `w`. The grid includes "no hop"; each of 5 folds (10 random splits) picks on the 4 others.
The LLM part simulates scripted picks (oracle, 3 random, half: each gold pick paired with a random one)
with the pick beside the hop (A) or in its place (E, the default), offered from the ranking with the hop.
"""

from __future__ import annotations

import itertools
import pickle
import random
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from benchmarks.ranking_cv import Data, chain, dense, fuse, offered, recall

Variant = Optional[Tuple[str, float, bool, float]]  # (anchor, share, follow hubs, weight); None: no hop


def links(path: str, share: float, hubs: bool) -> sp.csr_matrix:
    """L[p, q] = 1 when passage p states a name that passage q is about."""
    raw = pickle.load(open(path, "rb"))
    counts = raw["passage_entity_counts"].tocsr().astype(float)
    per_passage = np.maximum(raw["passage_relations"], 1)
    named = raw["passage_entity"].tocsr()
    about = counts.multiply(1 / per_passage[:, None]).tocsr()
    about.data = (about.data >= share).astype(float)
    about.eliminate_zeros()
    if not hubs:
        spread = np.diff(named.tocsc().indptr)
        named = (named @ sp.diags((spread <= max(20, 0.02 * named.shape[0])).astype(float))).tocsr()
    out = (named @ about.T).tocsr()
    out.setdiag(0)
    out.eliminate_zeros()
    return out


def hop(data: Data, q: Dict, matrix: sp.csr_matrix, anchor: str) -> List[str]:
    found = matrix[data.index[anchor]].indices
    return [anchor] + [data.passages[j] for j in found[np.argsort(-q["dense"][found], kind="stable")]]


def recalls(ranked: List[str], gold: List[str]) -> List[float]:
    return [recall(ranked, gold, k) for k in (2, 5)]


def variants_cv(path: str, splits: int = 10, folds: int = 5) -> None:
    data = Data(path)
    matrices = {(s, h): links(path, s, h) for s in (0.5, 0.7) for h in (True, False)}
    grid: List[Variant] = [None, *itertools.product(("dense", "fused"), (0.5, 0.7), (True, False), (0.5, 1.0))]
    scores: Dict[Variant, List[List[float]]] = {g: [] for g in grid}
    base = []
    for q in data.questions:
        d, p, c = dense(data, q), q["ppr"], chain(data, q)
        f = fuse([p, c], 5)
        base.append(recalls(d, q["gold"]))
        for g in grid:
            if g is None:
                scores[g].append(recalls(f, q["gold"]))
                continue
            anchor, share, hubs, w = g
            h = hop(data, q, matrices[(share, hubs)], d[0] if anchor == "dense" else f[0])
            scores[g].append(recalls(fuse([p, c, h], 5, [1, 1, w]), q["gold"]))
    gains = {g: np.array(v) - np.array(base) for g, v in scores.items()}
    n, held, picks = len(base), [], {}
    for split in range(splits):
        order = list(range(n))
        random.Random(split).shuffle(order)
        delta = np.zeros((n, 2))
        for f in range(folds):
            test = order[f::folds]
            train = [i for i in order if i not in test]
            best = max(grid, key=lambda g: gains[g][train].sum())
            picks[best] = picks.get(best, 0) + 1
            delta[test] = gains[best][test]
        held.append(delta.mean(0))
    shipped = ("dense", 0.5, False, 1.0)
    print(f"\n## {path}")
    print(f"  vs dense R@2/R@5: held out {np.round(np.mean(held, 0), 3)}; no hop (all 60) "
          f"{np.round(gains[None].mean(0), 3)}; shipped {shipped} (all 60) {np.round(gains[shipped].mean(0), 3)}")
    print(f"  picked: {sorted(picks.items(), key=lambda kv: -kv[1])[:4]}")


def llm_simulation(path: str, weight: float = 0.6) -> None:
    data = Data(path)
    matrix = links(path, 0.5, False)
    rows: Dict[str, List[List[float]]] = {}
    for i, q in enumerate(data.questions):
        d, p, c = dense(data, q), q["ppr"], chain(data, q)
        with_hop = fuse([p, c, hop(data, q, matrix, d[0])], 5)
        rows.setdefault("no LLM", []).append(recalls(with_hop, q["gold"]))
        offer = offered(q, with_hop, 40)
        good = [x for x in offer if set(x[2]) & set(q["gold"])]
        for llm in ("oracle", "random", "half"):
            for label, parts in (("A beside the hop", [p, c, hop(data, q, matrix, d[0])]), ("E in its place", [p, c])):
                got = []
                for seed in range(1 if llm == "oracle" else 8):
                    rnd = random.Random(seed * 1000 + i).sample(offer, min(3, len(offer)))
                    picks = good if llm == "oracle" else rnd if llm == "random" else [
                        x for pair in zip(good[:3], rnd) for x in pair] + good[3:]
                    chosen = list(dict.fromkeys(pid for x in picks for pid in x[2]))
                    ranked = fuse(parts + [chosen], 5, [1.0] * len(parts) + [weight]) if chosen else with_hop
                    got.append(recalls(ranked, q["gold"]))
                rows.setdefault(f"{llm}, {label}", []).append(np.mean(got, 0).tolist())
    print(f"  LLM pick (weight {weight}), R@2/R@5:")
    for label, values in rows.items():
        print(f"    {label:26s} {np.round(np.mean(values, 0), 3)}")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        variants_cv(arg)
        llm_simulation(arg)
