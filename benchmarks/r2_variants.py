"""Issue 21, part 2: candidate rankings, scored offline on the dumps of `benchmarks/r2_dump.py` and chosen by
5-fold cross-validation pooled over the dev sets (folds drawn within each set, 10 random splits; on the
training folds of all sets together the spec with the best mean over the sets of R@2 + R@5 is picked and
scored on the held-out folds only).

    python -m benchmarks.r2_variants [--sets musique hotpotqa wiki2] [--out benchmarks/results/issue21/cv.json]

A ranking is a `spec` (see `DEFAULT`): RRF with offset `k` of PPR (damping, passage weight), the chain
ranking (graph weight `cw`), the hop (from `anchor`, its links optionally `gate`d) and dense, with weights
`wp`, `wc`, `wh`, `wd`; then optionally a `post` step on the fused order (MMR against the passages above,
or rank 2 reserved for a passage strongly linked to rank 1). The default retriever is `DEFAULT` exactly
(checked: it reproduces the dumped default ranking question by question).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from benchmarks.r2_data import KS, Set, fuse, fuse_scores, recalls

DEFAULT: Dict[str, Any] = dict(k=5, wp=1.0, wc=1.0, wh=1.0, wd=0.0, cw=0.3, ppr=(0.5, 0.05), anchor="dense",
                               gate=None, empty_hop=True, post=None, wt=0.0, tau=0.95, share=0.5, wh2=0.0)
INF = 10**9


# the parts ---------------------------------------------------------------------------------------
def chain_rank(s: Set, q: Dict[str, Any], w: float) -> List[str]:
    if abs(w - 0.3) < 1e-12:
        return q["chain"]
    total = {p: s.cosine(q, p) for p in q["dense_top"]}
    for p, c in q["chain_score"].items():
        total[p] = s.cosine(q, p) + w * c
    return sorted(total, key=lambda p: -total[p])


def ppr_rank(q: Dict[str, Any], ppr: Tuple[float, float]) -> List[str]:
    return q["ppr"] if tuple(ppr) == (0.5, 0.05) else q[f"ppr_{ppr[0]}_{ppr[1]}"]


def link_entities(s: Set, anchor: str, pid: str) -> List[int]:
    """The non-hub entities `anchor` names that `pid` is about (the hop's link)."""
    return sorted(set(s.named[s.index[anchor]].indices) & set(s.about[s.index[pid]].indices))


def hop_rank(s: Set, q: Dict[str, Any], anchor: str, gate: Optional[Tuple[str, float]] = None, share: float = 0.5) -> List[str]:
    linked = [p for p in s.linked(q, anchor, share) if p != anchor]
    if gate is not None:
        kind, value = gate
        if kind == "deg":  # followed only through an entity stated in at most `value` passages
            linked = [p for p in linked if min(s.entity_passages[e] for e in link_entities(s, anchor, p)) <= value]
        elif kind == "dense":  # only the linked passages within dense's top `value`
            linked = [p for p in linked if s.dense_rank(q, p) <= value]
        elif kind == "cos":  # only the linked passages with cosine to the question >= value x the anchor's
            top = s.cosine(q, anchor)
            linked = [p for p in linked if s.cosine(q, p) >= value * top]
    return [anchor] + sorted(linked, key=lambda p: -s.cosine(q, p))


def topic_rank(s: Set, q: Dict[str, Any], tau: float) -> List[str]:
    """The passages about an entity the question names (its seed entities matched at cosine >= tau), by
    dense cosine: the parallel entity of a comparison, the first hop of a bridge."""
    ents = {e for (_, _, score), e in zip(q["seed_entities"], q["seed_positions"]) if e >= 0 and score >= tau}
    if not ents:
        return []
    about = s.about_by_entity
    found = set()
    for e in ents:
        found.update(about.indices[about.indptr[e]:about.indptr[e + 1]].tolist())
    return sorted((s.passages[i] for i in found), key=lambda p: -s.cosine(q, p))


def _fused(s: Set, q: Dict[str, Any], spec: Dict[str, Any], anchor: Optional[str]) -> Tuple[List[List[str]], List[float]]:
    parts, weights = [], []
    if spec["wp"]:
        parts.append(ppr_rank(q, spec["ppr"]))
        weights.append(spec["wp"])
    if spec["wc"]:
        parts.append(chain_rank(s, q, spec["cw"]))
        weights.append(spec["wc"])
    if spec["wh"] and anchor is not None:
        h = hop_rank(s, q, anchor, spec["gate"], spec["share"])
        if len(h) > 1 or spec["empty_hop"]:
            parts.append(h)
            weights.append(spec["wh"])
    if spec["wd"]:
        parts.append(s.dense(q, 100))
        weights.append(spec["wd"])
    if spec["wt"] or spec["wh2"]:
        t = topic_rank(s, q, spec["tau"])
        if t and spec["wt"]:
            parts.append(t)
            weights.append(spec["wt"])
        if t and spec["wh2"]:  # a second hop, from the best passage about a name the question states
            parts.append(hop_rank(s, q, t[0], spec["gate"], spec["share"]))
            weights.append(spec["wh2"])
    return parts, weights


def base_ranking(s: Set, q: Dict[str, Any], spec: Dict[str, Any]) -> Tuple[List[str], Dict[str, float]]:
    anchor_kind = spec["anchor"]
    if anchor_kind == "dense":
        anchor = q["dense_top"][0]
    elif anchor_kind == "pc":  # the top of the fusion without the hop
        p, w = _fused(s, q, {**spec, "wh": 0.0}, None)
        anchor = fuse(p, spec["k"], w)[0]
    elif anchor_kind == "fused":  # the top of the default-anchored fusion, then the hop from it
        p, w = _fused(s, q, spec, q["dense_top"][0])
        anchor = fuse(p, spec["k"], w)[0]
    elif anchor_kind == "ppr":
        anchor = ppr_rank(q, spec["ppr"])[0]
    else:
        raise ValueError(anchor_kind)
    parts, weights = _fused(s, q, spec, anchor)
    scores = fuse_scores(parts, spec["k"], weights)
    return sorted(scores, key=lambda p: -scores[p]), scores


def rank(s: Set, q: Dict[str, Any], spec: Dict[str, Any]) -> List[str]:
    ranked, scores = base_ranking(s, q, spec)
    post = spec["post"]
    if post is None or not ranked:
        return ranked
    kind = post[0]
    if kind == "mmr":  # greedy MMR over the top `m`: score / top score - lam x max cosine to those above
        lam, m = post[1], post[2]
        head, rest = ranked[:m], ranked[m:]
        top = scores[head[0]]
        chosen = [head[0]]
        pool = head[1:]
        while pool:
            best = max(pool, key=lambda p: scores[p] / top - lam * max(s.cos(p, c) for c in chosen))
            chosen.append(best)
            pool.remove(best)
        return chosen + rest
    if kind == "mmr2":  # only rank 2, against rank 1
        lam, m = post[1], post[2]
        top = scores[ranked[0]]
        best = max(ranked[1:m], key=lambda p: scores[p] / top - lam * s.cos(p, ranked[0]), default=None)
        return [ranked[0], best] + [p for p in ranked[1:] if p != best] if best else ranked
    if kind == "strong2":  # rank 2 = the best of the top m linked to rank 1 through a specific entity
        m, degree = post[1], post[2]
        r1 = ranked[0]
        for p in ranked[1:m]:
            ents = link_entities(s, r1, p) + link_entities(s, p, r1)
            if ents and min(s.entity_passages[e] for e in ents) <= degree:
                return [r1, p] + [x for x in ranked[1:] if x != p]
        return ranked
    raise ValueError(kind)


def dense_ranking(s: Set, q: Dict[str, Any]) -> List[str]:
    return s.dense(q, 100)


# the grids ---------------------------------------------------------------------------------------
def spec(**changes: Any) -> Dict[str, Any]:
    return {**DEFAULT, **changes}


def families() -> Dict[str, List[Dict[str, Any]]]:
    fams: Dict[str, List[Dict[str, Any]]] = {"default": [spec()]}
    fams["k"] = [spec(k=k) for k in (1, 2, 3, 5, 8, 10, 20, 60)]
    fams["subsets"] = [spec(wp=a, wc=b, wh=c) for a, b, c in
                       [(1, 0, 0), (0, 1, 0), (1, 1, 0), (1, 0, 1), (0, 1, 1), (1, 1, 1)]]
    fams["no hop"] = [spec(wh=0.0)]
    fams["ppr alone"] = [spec(wc=0.0, wh=0.0)]
    fams["weights"] = [spec(wp=a, wc=b, wh=c, wd=d) for a in (0.5, 1.0, 1.5) for b in (0.5, 1.0, 1.5)
                       for c in (0.0, 0.5, 1.0) for d in (0.0, 0.5, 1.0)]
    fams["dense component"] = [spec(wd=d) for d in (0.0, 0.5, 1.0, 1.5)]
    fams["hop weight"] = [spec(wh=w) for w in (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)]
    fams["anchor"] = [spec(anchor=a) for a in ("dense", "pc", "fused", "ppr")]
    fams["ppr params"] = [spec(ppr=p) for p in [(d, pw) for d in (0.3, 0.5, 0.7, 0.85) for pw in (0.05, 0.2, 1.0)]]
    fams["chain weight"] = [spec(cw=w) for w in (0.1, 0.2, 0.3, 0.5, 1.0)]
    fams["hop gate deg"] = [spec(gate=("deg", d)) for d in (2, 5, 10, 20, INF)]
    fams["hop gate dense"] = [spec(gate=("dense", r)) for r in (10, 30, 100, INF)]
    fams["empty hop"] = [spec(empty_hop=e) for e in (True, False)]
    fams["topic"] = [spec(wt=w, tau=t) for w in (0.0, 0.5, 1.0) for t in (0.9, 0.99)]
    fams["topic weight"] = [spec()] + [spec(wt=w, tau=0.99) for w in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)]
    t = dict(wt=1.0, tau=0.99)
    fams["topic combos"] = [spec(), spec(**t), spec(**t, wh=0.0), spec(**t, wh=0.5), spec(**t, k=3), spec(**t, ppr=(0.7, 0.05)),
                            spec(**t, cw=0.5), spec(wt=0.5, tau=0.99), spec(**t, anchor="pc"), spec(**t, post=("strong2", 10, 2))]
    fams["hop share"] = [spec(share=x) for x in (0.3, 0.4, 0.5, 0.7)]
    fams["topic, hop share"] = [spec(**t, share=x) for x in (0.3, 0.4, 0.5, 0.7)]
    fams["topic hop"] = [spec(**t)] + [spec(**t, wh2=w) for w in (0.5, 1.0)] + [spec(wh2=w, tau=0.99) for w in (0.5, 1.0)]
    fams["mmr"] = [spec(post=("mmr", lam, 10)) for lam in (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)]
    fams["mmr rank 2"] = [spec(post=("mmr2", lam, 10)) for lam in (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)]
    fams["strong link rank 2"] = [spec(post=None)] + [spec(post=("strong2", m, d)) for m in (3, 5, 10) for d in (2, 5, 10, 20)]
    fams["no hop, strong link rank 2"] = [spec(wh=0.0)] + [spec(wh=0.0, post=("strong2", m, d)) for m in (3, 5, 10) for d in (2, 5, 10, 20)]
    return fams


# scoring and CV ----------------------------------------------------------------------------------
class Table:
    """Per-question R@2/5/10 of every spec, over the pooled questions of the sets (cached)."""

    def __init__(self, sets: Sequence[Set]) -> None:
        self.sets = sets
        self.rows: Dict[str, np.ndarray] = {}
        self.owner = np.concatenate([[i] * len(s.questions) for i, s in enumerate(sets)])
        self.dense = self._score(lambda s, q: dense_ranking(s, q))

    def _score(self, f) -> np.ndarray:
        return np.array([recalls(f(s, q), q["gold"]) for s in self.sets for q in s.questions])

    def of(self, sp: Dict[str, Any]) -> np.ndarray:
        key = json.dumps(sp, sort_keys=True, default=str)
        if key not in self.rows:
            self.rows[key] = self._score(lambda s, q: rank(s, q, sp))
        return self.rows[key]


def folds_of(table: Table, split: int, folds: int = 5) -> np.ndarray:
    """A fold per pooled question, drawn within each set; sets of the same questions (MuSiQue's graphs)
    share one draw, so that a question is never trained on in one graph and held out in another."""
    fold = np.zeros(len(table.owner), dtype=int)
    draws: Dict[str, Dict[str, int]] = {}
    for i, s in enumerate(table.sets):
        ids = [q["id"] for q in s.questions]
        group = s.name.split("_")[0]
        if group not in draws or set(draws[group]) != set(ids):
            order = sorted(ids)
            random.Random(f"{split}:{group}").shuffle(order)
            draws[group] = {qid: j % folds for j, qid in enumerate(order)}
        for j, qid in zip(np.flatnonzero(table.owner == i), ids):
            fold[j] = draws[group][qid]
    return fold


def objective(scores: np.ndarray, owner: np.ndarray, mask: np.ndarray) -> float:
    """Mean over the sets of the mean R@2 + R@5 on the masked questions."""
    return float(np.mean([scores[mask & (owner == i), :2].sum(1).mean() for i in np.unique(owner[mask])]))


def cross_validate(table: Table, grid: List[Dict[str, Any]], splits: int = 10, folds: int = 5):
    scores = [table.of(g) for g in grid]
    held = np.zeros_like(table.dense)
    picks: List[int] = []
    for split in range(splits):
        fold = folds_of(table, split, folds)
        for f in range(folds):
            train, test = fold != f, fold == f
            best = max(range(len(grid)), key=lambda g: (objective(scores[g], table.owner, train), -g))
            picks.append(best)
            held[test] += scores[best][test]
    return held / splits, picks


def paired(a: np.ndarray, b: np.ndarray, draws: int = 10_000, seed: int = 0) -> List[Dict[str, Any]]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(draws, len(a)))
    out = []
    for j in range(len(KS)):
        d = a[:, j] - b[:, j]
        lo, hi = np.percentile(d[idx].mean(1), [2.5, 97.5])
        out.append({"diff": round(float(d.mean()), 4), "ci95": [round(float(lo), 4), round(float(hi), 4)],
                    "won": int((d > 1e-9).sum()), "lost": int((d < -1e-9).sum())})
    return out


def fmt(p: Dict[str, Any]) -> str:
    return f"{p['diff']:+.3f} [{p['ci95'][0]:+.3f},{p['ci95'][1]:+.3f}] {p['won']}/{p['lost']}"


def describe(sp: Dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sp.items() if DEFAULT.get(k) != v) or "default"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", nargs="*", default=["musique_triples", "musique_text", "hotpotqa", "wiki2"])
    parser.add_argument("--families", nargs="*")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--out", default="benchmarks/results/issue21/cv.json")
    args = parser.parse_args()
    sets = [Set(n) for n in args.sets]
    table = Table(sets)
    default = table.of(spec())
    for s, _lo in zip(sets, np.cumsum([0] + [len(x.questions) for x in sets])):  # the offline default is the retriever's
        for q in s.questions:
            assert rank(s, q, spec())[:10] == q["fused"][:10], (s.name, q["id"])
    fams = families()
    chosen = args.families or list(fams)
    fams["all (meta)"] = [g for name in chosen for g in fams[name]]
    report: Dict[str, Any] = {"sets": args.sets, "families": {}}
    for name in [*chosen, "all (meta)"]:
        grid = fams[name]
        held, picks = cross_validate(table, grid, args.splits)
        counts = np.bincount(picks, minlength=len(grid))
        mode = int(np.argmax(counts))
        entry: Dict[str, Any] = {"picked": {describe(grid[i]): int(c) for i, c in enumerate(counts) if c},
                                 "per_question_held_out": {s.name: {q["id"]: held[j].round(4).tolist() for j, q in zip(np.flatnonzero(table.owner == i), s.questions)}
                                                           for i, s in enumerate(sets)},
                                 "mode": describe(grid[mode]), "mode_share": round(float(counts[mode]) / len(picks), 2), "sets": {}}
        line = [f"\n### {name} ({len(grid)} specs); folds picked {entry['mode']} in {counts[mode]}/{len(picks)}"]
        for i, s in enumerate(sets):
            m = table.owner == i
            entry["sets"][s.name] = {
                "held_out": held[m].mean(0).round(4).tolist(),
                "vs_dense": paired(held[m], table.dense[m]), "vs_default": paired(held[m], default[m]),
                "mode_all_dev": table.of(grid[mode])[m].mean(0).round(4).tolist(),
            }
            e = entry["sets"][s.name]
            line.append(f"  {s.name:10s} held-out {np.round(e['held_out'], 3)}  vs dense R@2 {fmt(e['vs_dense'][0])} R@5 {fmt(e['vs_dense'][1])}"
                        f"  | vs default R@2 {fmt(e['vs_default'][0])} R@5 {fmt(e['vs_default'][1])}")
        print("\n".join(line), flush=True)
        report["families"][name] = entry
    # every spec on all dev questions (not held out: for reading, not for choosing)
    report["all_dev"] = {}
    for name in chosen:
        for g in fams[name]:
            sc = table.of(g)
            report["all_dev"][f"{name}: {describe(g)}"] = {s.name: sc[table.owner == i].mean(0).round(4).tolist() for i, s in enumerate(sets)}
    report["dense"] = {s.name: table.dense[table.owner == i].mean(0).round(4).tolist() for i, s in enumerate(sets)}
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()


def tables(paths: Sequence[str] = ("benchmarks/results/issue21/cv_pool4.json", "benchmarks/results/issue21/cv_pool3.json",
                                   "benchmarks/results/issue21/cv_pool4_union.json"),
           out: str = "benchmarks/results/issue21/cv_tables.md") -> None:
    """Every family's held-out figures as markdown tables (`python -c "from benchmarks.r2_variants import tables; tables()"`)."""
    def f(p: Dict[str, Any]) -> str:
        return f"{p['diff']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}] {p['won']}/{p['lost']}"
    lines = ["# Issue 21: every ranking family, 5-fold CV pooled over the sets (10 splits), held-out figures",
             "", "Produced by `python -m benchmarks.r2_variants [--sets ...]`; see `r2_study.md`. Each row: the folds' most",
             "frequent pick (share of the 50 folds), then per set the held-out recalls (each question scored only by",
             "the spec chosen without it, averaged over the 10 splits) and paired differences (bootstrap 95%, won/lost)."]
    for path in paths:
        r = json.loads(Path(path).read_text())
        lines += ["", f"## {Path(path).name} (sets: {', '.join(r['sets'])})", "",
                  "| family | folds' pick (share) | set | held-out R@2 / R@5 / R@10 | ΔR@2 vs dense | ΔR@5 vs dense | ΔR@2 vs default | ΔR@5 vs default |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, e in r["families"].items():
            for i, (s, v) in enumerate(e["sets"].items()):
                head = f"| {name} | {e['mode']} ({e['mode_share']:.2f}) " if i == 0 else "| | "
                lines.append(head + f"| {s} | {' / '.join(f'{x:.3f}' for x in v['held_out'])} | {f(v['vs_dense'][0])} | "
                             f"{f(v['vs_dense'][1])} | {f(v['vs_default'][0])} | {f(v['vs_default'][1])} |")
    Path(out).write_text("\n".join(lines) + "\n")
