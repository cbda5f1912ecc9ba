"""Issue 21: how far the dev figures of a few candidate rankings can be trusted for unseen questions.

    python -m benchmarks.r2_robust [--sets musique musique_text hotpotqa wiki2]

For each candidate (a `benchmarks.r2_variants` spec, no knob chosen here):
- all-dev R@2/5/10 and paired differences vs dense and vs the default, per set (bootstrap 95%, 10,000);
- leave-one-set-out: the family's spec chosen on the other sets only, scored on the left-out one;
- "hidden-size" draws: 10,000 sets of 40 questions (64 for wiki2) drawn with replacement from each dev set:
  how often the issue's targets (ΔR@2 >= .02 on every set; ΔR@5 >= .05 MuSiQue, >= .10 MuSiQue text,
  >= .03 HotpotQA, >= .20 and ΔR@2 >= .08 on wiki2) would be met on a set of that size (an upper bound
  for a ranking designed on these questions: it assumes the dev questions are like the hidden ones);
- the gain over the default, split by question type (HotpotQA and 2Wiki types).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict

import numpy as np

from benchmarks.r2_data import Set
from benchmarks.r2_variants import Table, describe, families, fmt, objective, paired, spec

TARGETS = {  # set: (min ΔR@2, min ΔR@5) vs dense, hidden size
    "musique": (0.02, 0.05, 40), "musique_triples": (0.02, 0.05, 40), "musique_union": (0.02, 0.05, 40), "musique_text": (0.02, 0.10, 40), "hotpotqa": (0.02, 0.03, 40), "wiki2": (0.08, 0.20, 64),
}
T = dict(wt=1.0, tau=0.99)
CANDIDATES = {
    "default": spec(),
    "no hop": spec(wh=0.0),
    "topic": spec(**T),
    "topic, no hop": spec(**T, wh=0.0),
    "topic, hop .5": spec(**T, wh=0.5),
    "topic, PPR damping .7": spec(**T, ppr=(0.7, 0.05)),
    "topic, chain .5": spec(**T, cw=0.5),
    "PPR damping .7": spec(ppr=(0.7, 0.05)),
    "chain .5": spec(cw=0.5),
}


def hidden_draws(a: np.ndarray, b: np.ndarray, size: int, t2: float, t5: float, draws: int = 10_000) -> Dict[str, float]:
    rng = np.random.default_rng(1)
    idx = rng.integers(0, len(a), size=(draws, size))
    d2, d5 = (a[:, 0] - b[:, 0])[idx].mean(1), (a[:, 1] - b[:, 1])[idx].mean(1)
    return {"p_r2": round(float((d2 >= t2).mean()), 3), "p_r5": round(float((d5 >= t5).mean()), 3),
            "p_both": round(float(((d2 >= t2) & (d5 >= t5)).mean()), 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", nargs="*", default=["musique_triples", "musique_text", "hotpotqa", "wiki2"])
    parser.add_argument("--out", default="benchmarks/results/issue21/robust.json")
    args = parser.parse_args()
    sets = [Set(n) for n in args.sets]
    table = Table(sets)
    default = table.of(spec())
    report: Dict[str, Any] = {"candidates": {}, "loso": {}}
    print("| candidate | set | R@2/5/10 | ΔR@2 vs dense | ΔR@5 vs dense | ΔR@2 vs default | ΔR@5 vs default | P(R@2 target) | P(R@5 target) | P(both) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, sp in CANDIDATES.items():
        sc = table.of(sp)
        entry = {}
        for i, s in enumerate(sets):
            m = table.owner == i
            t2, t5, size = TARGETS[s.name]
            vd, vdef = paired(sc[m], table.dense[m]), paired(sc[m], default[m])
            h = hidden_draws(sc[m], table.dense[m], size, t2, t5)
            entry[s.name] = {"recall": sc[m].mean(0).round(4).tolist(), "vs_dense": vd, "vs_default": vdef, "hidden_size": h}
            print(f"| {name} | {s.name} | {' / '.join(f'{x:.3f}' for x in sc[m].mean(0))} | {fmt(vd[0])} | {fmt(vd[1])} | "
                  f"{fmt(vdef[0])} | {fmt(vdef[1])} | {h['p_r2']:.2f} | {h['p_r5']:.2f} | {h['p_both']:.2f} |")
        report["candidates"][name] = entry
    # by question type: the gain over the default
    print("\nGain over the default by question type (R@2, R@5; questions):")
    for name in ("topic", "topic, PPR damping .7", "no hop"):
        sc = table.of(CANDIDATES[name])
        for i, s in enumerate(sets):
            m = np.flatnonzero(table.owner == i)
            groups = defaultdict(list)
            for j, q in zip(m, s.questions):
                groups[q.get("type") or (q["id"].split("__")[0] if "hop" in q["id"] else "?")].append(j)
            row = {t: ((sc[js] - default[js]).mean(0)[:2].round(3).tolist(), len(js)) for t, js in sorted(groups.items())}
            print(f"  {name:24s} {s.name:13s} {row}")
            report.setdefault("by_type", {}).setdefault(name, {})[s.name] = row
    # leave one set out: each family's spec chosen on the other sets
    print("\nLeave one set out (the family's spec chosen on the other sets, R@2 + R@5 mean over them):")
    fams = families()
    for fam in ("k", "weights", "hop weight", "anchor", "ppr params", "chain weight", "topic weight", "topic combos", "hop share", "topic, hop share", "mmr rank 2", "strong link rank 2"):
        grid = fams[fam]
        scores = [table.of(g) for g in grid]
        line = []
        for i, s in enumerate(sets):
            train = table.owner != i
            best = max(range(len(grid)), key=lambda g: (objective(scores[g], table.owner, train), -g))
            m = table.owner == i
            vdef = paired(scores[best][m], default[m])
            line.append(f"{s.name}: {describe(grid[best])} -> vs default R@2 {vdef[0]['diff']:+.3f} R@5 {vdef[1]['diff']:+.3f}")
            report["loso"].setdefault(fam, {})[s.name] = {"picked": describe(grid[best]), "vs_default": vdef}
        print(f"  {fam}:\n    " + "\n    ".join(line))
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
