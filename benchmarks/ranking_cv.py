"""Rankings compared offline on the features `benchmarks/ranking_study.py` dumps, with parameters chosen
by cross-validation: for each of 5 folds (repeated over several random splits), the parameter with the
best training R@2 + R@5 is scored on the held-out fold only.

    python -m benchmarks.ranking_cv .cache/study/musique.pkl [...]
"""

from __future__ import annotations

import pickle
import random
import sys
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

KS = (2, 5, 10)
Ranked = List[str]


class Data:
    def __init__(self, path: str) -> None:
        with open(path, "rb") as handle:
            raw = pickle.load(handle)
        self.name = path
        self.passages: List[str] = raw["passages"]
        self.index = {p: i for i, p in enumerate(self.passages)}
        self.questions: List[Dict[str, Any]] = raw["questions"]
        self.counts = np.asarray(raw.get("entity_passages", []))


def recall(ranked: Ranked, gold: Sequence[str], k: int) -> float:
    return len(set(ranked[:k]) & set(gold)) / len(gold)


def top(scores: np.ndarray, passages: List[str], n: int = 60) -> Ranked:
    order = np.argsort(-scores, kind="stable")[:n]
    return [passages[i] for i in order]


# no-LLM rankings ---------------------------------------------------------------------------------
def dense(data: Data, q: Dict[str, Any]) -> Ranked:
    return top(q["dense"].astype(float), data.passages)


def chain(data: Data, q: Dict[str, Any], w: float = 0.3) -> Ranked:
    s = q["dense"].astype(float).copy()
    for p, c in q["chain_passages"].items():
        s[data.index[p]] += w * c
    return top(s, data.passages)


def chain_keep(data: Data, q: Dict[str, Any], m: int = 2, w: float = 0.3) -> Ranked:
    """Dense's top m kept, then the chain ranking."""
    head = dense(data, q)[:m]
    rest = [p for p in chain(data, q, w) if p not in head]
    return head + rest


def rrf(data: Data, q: Dict[str, Any], w: float = 1.0, k: int = 60, key: str = "chain_passages") -> Ranked:
    d = dense(data, q)
    g = sorted(q[key], key=lambda p: -q[key][p])
    score: Dict[str, float] = {}
    for r, p in enumerate(d):
        score[p] = score.get(p, 0) + 1 / (k + r + 1)
    for r, p in enumerate(g):
        score[p] = score.get(p, 0) + w / (k + r + 1)
    return sorted(score, key=lambda p: -score[p])


def zscore(data: Data, q: Dict[str, Any], w: float = 0.5) -> Ranked:
    """z(dense) over all passages + w z(chain) over the passages the chain reaches (0 elsewhere)."""
    d = q["dense"].astype(float)
    s = (d - d.mean()) / (d.std() + 1e-9)
    g = np.zeros_like(s)
    if q["chain_passages"]:
        vals = np.array(list(q["chain_passages"].values()))
        mu, sd = vals.mean(), vals.std() + 1e-9
        for p, c in q["chain_passages"].items():
            g[data.index[p]] = (c - mu) / sd
    return top(s + w * g, data.passages)


def ppr(data: Data, q: Dict[str, Any]) -> Ranked:
    return q["ppr"]


def relsim(data: Data, q: Dict[str, Any], w: float = 0.3) -> Ranked:
    """Dense + w × the passage's best relation cosine (no chain)."""
    s = q["dense"].astype(float).copy()
    for p, c in q["relation_passages"].items():
        s[data.index[p]] += w * c
    return top(s, data.passages)


def ppr_local(data: Data, q: Dict[str, Any], facts: int = 5, pw: float = 0.05, damp: float = 0.5, seeds: float = 0.0) -> Ranked:
    """HippoRAG 2's PPR on the candidates' entity-passage subgraph (as `ranking.PPRRanker`)."""
    import scipy.sparse as sp

    cands, ents = q["candidates"], q["candidate_entities"]
    if not cands:
        return dense(data, q)
    eidx: Dict[int, int] = {}
    pidx: Dict[str, int] = {}
    rows, cols = [], []
    for (_, _, ps), es in zip(cands, ents):
        for e in es:
            ei = eidx.setdefault(e, len(eidx))
            for p in ps:
                rows.append(ei)
                cols.append(pidx.setdefault(p, len(pidx)))
    E, P = len(eidx), len(pidx)
    B = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(E, P))
    B.data[:] = 1
    A = sp.bmat([[None, B], [B.T, None]]).tocsr()
    deg = np.asarray(A.sum(1)).ravel()
    T = (sp.diags(1 / np.maximum(deg, 1)) @ A).T.tocsr()
    r = np.zeros(E + P)
    best = sorted(range(len(cands)), key=lambda i: -cands[i][1])[:facts]
    s = np.array([cands[i][1] for i in best])
    sn = (s - s.min()) / (s.max() - s.min()) if s.max() > s.min() else np.ones_like(s)
    votes: Dict[int, List[float]] = {}
    for i, w in zip(best, sn):
        for e in ents[i]:
            votes.setdefault(e, []).append(w)
    for e, ws in votes.items():
        r[eidx[e]] += np.mean(ws) / max(1, data.counts[e])
    if seeds:  # the question's own entities, as HippoRAG 1 seeds them
        for (_, _, score), e in zip(q["seed_entities"], q.get("seed_positions", [])):
            if e in eidx:
                r[eidx[e]] += seeds * max(score, 0.0) / max(1, data.counts[e])
    plist = list(pidx)
    dv = np.array([q["dense"][data.index[p]] for p in plist], dtype=float)
    r[E:] += ((dv - dv.min()) / (dv.max() - dv.min()) if dv.max() > dv.min() else np.ones_like(dv)) * pw
    if r.sum() == 0:
        return dense(data, q)
    r /= r.sum()
    p = r.copy()
    for _ in range(50):
        p = (1 - damp) * r + damp * (T @ p)
    ranked = [plist[i] for i in np.argsort(-p[E:], kind="stable")]
    return ranked + [x for x in dense(data, q) if x not in pidx]


def fuse(rankings: List[Ranked], k: int, weights: Sequence[float] = ()) -> Ranked:
    score: Dict[str, float] = {}
    for j, ranked in enumerate(rankings):
        for r, p in enumerate(ranked, start=1):
            score[p] = score.get(p, 0.0) + (weights[j] if weights else 1.0) / (k + r)
    return sorted(score, key=lambda p: -score[p])


def fused(data: Data, q: Dict[str, Any], k: int = 5, w: float = 0.3, seeds: float = 0.0) -> Ranked:
    """The default: RRF of PPR and chain."""
    return fuse([ppr_local(data, q, seeds=seeds), chain(data, q, w)], k)


# cross-validation --------------------------------------------------------------------------------
def per_question(data: Data, f: Callable, params: Dict[str, Any]) -> np.ndarray:
    return np.array([[recall(f(data, q, **params), q["gold"], k) for k in KS] for q in data.questions])


def cross_validate(data: Data, f: Callable, grid: List[Dict[str, Any]], splits: int = 10, folds: int = 5,
                   objective: Tuple[float, float, float] = (1, 1, 0)) -> Tuple[np.ndarray, List[Dict[str, Any]]]:
    """Held-out per-question recalls, averaged over `splits` random fold assignments; the parameters
    picked per fold."""
    table = [per_question(data, f, p) for p in grid]  # grid × Q × K
    n = len(data.questions)
    held = np.zeros((n, len(KS)))
    picked = []
    for s in range(splits):
        order = list(range(n))
        random.Random(s).shuffle(order)
        for fold in range(folds):
            test = order[fold::folds]
            train = [i for i in order if i not in test]
            best = max(range(len(grid)), key=lambda g: float((table[g][train] @ np.array(objective)).mean()))
            picked.append(grid[best])
            held[test] += table[best][test]
    return held / splits, picked


def paired(a: np.ndarray, b: np.ndarray, draws: int = 10000, seed: int = 0) -> List[str]:
    rng = np.random.default_rng(seed)
    n = len(a)
    idx = rng.integers(0, n, size=(draws, n))
    out = []
    for j in range(len(KS)):
        diff = a[:, j] - b[:, j]
        means = diff[idx].mean(axis=1)
        lo, hi = np.percentile(means, [2.5, 97.5])
        out.append(f"{diff.mean():+.3f} [{lo:+.3f},{hi:+.3f}] {int((diff > 0).sum())}/{int((diff < 0).sum())}")
    return out


GRIDS: Dict[str, Tuple[Callable, List[Dict[str, Any]]]] = {
    "fused": (fused, [{"k": k, "w": w} for k in (5, 60) for w in (0.2, 0.3, 0.5)]),
    "ppr_local": (ppr_local, [{"pw": pw} for pw in (0.05, 0.2)]),
    "chain_w": (chain, [{"w": w} for w in (0.0, 0.1, 0.2, 0.3, 0.5, 0.8, 1.2)]),
    "chain_keep": (chain_keep, [{"m": m, "w": w} for m in (1, 2) for w in (0.3, 0.5, 1.0, 2.0)]),
    "rrf": (rrf, [{"w": w, "k": k} for w in (0.5, 1.0) for k in (10, 60)]),
    "zscore": (zscore, [{"w": w} for w in (0.1, 0.25, 0.5, 1.0)]),
    "relsim": (relsim, [{"w": w} for w in (0.1, 0.3, 0.5)]),
}


# scripted LLMs, offline: the LLM's pick joins the fusion as one more ranking of weight w ---------------
def offered(q: Dict[str, Any], base: Ranked, n: int = 40) -> List[Tuple[int, float, List[str]]]:
    """Breadth first down the base ranking: each passage's most similar candidate, then its second..."""
    own: Dict[str, list] = {}
    for c in q["candidates"]:  # best first
        for p in c[2]:
            own.setdefault(p, []).append(c)
    rows = [own[p] for p in base if p in own]
    out, seen = [], set()
    for depth in range(max((len(r) for r in rows), default=0)):
        for r in rows:
            if depth < len(r) and len(out) < n and r[depth][0] not in seen:
                seen.add(r[depth][0])
                out.append(r[depth])
    return out


def with_llm(data: Data, llm: str, w: float, k: int = 5, n: int = 40, seed: int = 0, front: bool = False) -> np.ndarray:
    rows = []
    for i, q in enumerate(data.questions):
        parts = [ppr_local(data, q), chain(data, q)]
        base = fuse(parts, k)
        offer = offered(q, base, n)
        if llm == "oracle":
            picks = [c for c in offer if set(c[2]) & set(q["gold"])]
        elif llm == "random":
            picks = random.Random(seed * 1000 + i).sample(offer, min(3, len(offer)))
        else:
            picks = []
        chosen = list(dict.fromkeys(p for c in picks for p in c[2]))
        if not chosen:
            ranked = base
        elif front:  # the old way: the LLM's passages first
            ranked = chosen + [p for p in base if p not in chosen]
        else:
            ranked = fuse(parts + [chosen], k, [1.0, 1.0, w])
        rows.append([recall(ranked, q["gold"], kk) for kk in KS])
    return np.array(rows)


def llm_simulation(data: Data) -> None:
    print("LLM simulation (offered 40, breadth first), Δ vs no LLM at R@2/5/10; random = mean of 4 seeds")
    for label, w, k, front in [("front (old)", 0, 5, True)] + [(f"w={w} k={k}", w, k, False) for k in (5, 10) for w in (0.5, 0.6, 0.75, 1.0)]:
        base = with_llm(data, "none", 0, k)
        oracle = with_llm(data, "oracle", w, k, front=front).mean(0) - base.mean(0)
        rand = np.mean([with_llm(data, "random", w, k, seed=s, front=front) for s in range(4)], axis=0).mean(0) - base.mean(0)
        print(f"  {label:14s} oracle {np.round(oracle, 3)}  random3 {np.round(rand, 3)}")


def main(paths: List[str]) -> None:
    for path in paths:
        data = Data(path)
        base = per_question(data, dense, {})
        print(f"\n## {path}: {len(data.questions)} q; dense {np.round(base.mean(0), 3)}")
        for name, params in [("chain .3 (today)", {"w": 0.3})]:
            t = per_question(data, chain, params)
            print(f"{name:24s} {np.round(t.mean(0), 3)}  vs dense {paired(t, base)}")
        print(f"{'ppr':24s} {np.round(per_question(data, ppr, {}).mean(0), 3)}")
        for name, (f, grid) in GRIDS.items():
            held, picked = cross_validate(data, f, grid)
            common = max(({str(p): p for p in picked}).items(), key=lambda kv: sum(str(x) == kv[0] for x in picked))[1]
            print(f"{name + ' (CV)':24s} {np.round(held.mean(0), 3)}  vs dense {paired(held, base)}  mostly {common}")
            for p in grid:
                t = per_question(data, f, p)
                print(f"    {str(p):28s} {np.round(t.mean(0), 3)}")
        llm_simulation(data)


if __name__ == "__main__":
    main(sys.argv[1:])
