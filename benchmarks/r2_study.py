"""Issue 21, part 1: why gold passages sit at ranks 3-10 (and beyond) under the default ranking, on the dumps
of `benchmarks/r2_dump.py` (exactly what the default `GraphRAGRetriever(store, similarity_top_k=10,
llm=None)` computes: the dumps were checked against it, question by question).

    python -m benchmarks.r2_study [SET ...]          # default: musique_triples musique_text hotpotqa wiki2
    python -m benchmarks.r2_study --examples 3 wiki2  # also print a few cases of each category

A *miss* is a gold passage outside the default top 2 in a question whose top 2 holds a non-gold passage
(when both top-2 passages are gold, the third gold of a 4-gold question is not an R@2 failure). Each miss
gets one primary category, first that applies:

1. comparison: the question compares two (or four) parallel entities (HotpotQA "comparison", 2Wiki
   "comparison" / "bridge_comparison"), and the missed gold is one side.
2. unreached: beyond rank 10 and no component ranks it in its top 10 (no graph path from the question's
   seeds or from the top passage, and dense too far).
3. fusion: some component (dense, PPR, chain, hop) has it in its top 2, but the fusion puts it lower.
4. look-alike of rank 1: a non-gold passage in the top 2 is closer to the other top-2 passage
   (passage-passage cosine >= LOOKALIKE) than the missed gold is, or shares its title's head words.
5. hub: a non-gold top-2 passage is lifted by the graph (dense would rank it below 2; a graph component
   ranks it 1-2) through an entity stated in >= FREQUENT passages (frequent, under the hub cut).
6. wrong link: the same, through specific entities: the graph followed a real but wrong link.
7. dense prefers the intruder: a non-gold top-2 passage that dense also ranks 1-2 (the question's wording
   matches it better) and none of the above.
(4b. namesake: a non-gold top-2 passage is a look-alike of the missed gold itself: same head words or
   cosine >= LOOKALIKE, e.g. the book for the TV series.)

Besides the category, each miss records: its rank in each component, whether the hop's link (from the
default top passage) reaches it, whether any candidate relation states it, its cosine to rank 1.
Writes `benchmarks/results/issue21/r2_study.json` (every miss) and prints the tables of `r2_study.md`.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from benchmarks.r2_data import POOL, Set, rank_in, recalls

LOOKALIKE = 0.6
FREQUENT = 10
COMPONENTS = ("dense", "ppr", "chain", "hop")
CATEGORIES = ("comparison", "unreached", "fusion", "look-alike", "namesake", "hub", "wrong link", "dense prefers", "other")
OUT = Path("benchmarks/results/issue21/r2_study.json")
COMPARISON = {"comparison", "bridge_comparison"}


def _head(title: str) -> set:
    words = re.findall(r"[A-Za-z0-9]+", re.sub(r"\(.*?\)", "", title).lower())
    return {w for w in words if len(w) > 2 and w not in {"the", "and", "film", "album", "song", "list"}}


def lookalike(s: Set, a: str, b: str) -> bool:
    ta, tb = _head(s.titles[s.index[a]]), _head(s.titles[s.index[b]])
    return s.cos(a, b) >= LOOKALIKE or bool(ta & tb)


def linking_degree(s: Set, q: Dict[str, Any], pid: str) -> Optional[int]:
    """How the graph reaches `pid`: the smallest passage count of the entities of its best candidate
    relation, or of the entity the hop followed from dense's top passage to it. None: not reached."""
    anchor = q["dense_top"][0]
    degrees = []
    if pid in s.linked(q, anchor) and pid != anchor:
        a, p = s.index[anchor], s.index[pid]
        entities = set(s.named[a].indices) & set(s.about[p].indices)
        degrees += [int(s.entity_passages[e]) for e in entities]  # the entity the hop followed
    for (_r, _sim, ps), ents in zip(q["candidates"], q["candidate_entities"]):
        if pid in ps:
            degrees.append(max(int(s.entity_passages[e]) for e in ents) if ents else 0)  # its most-stated end
            break  # candidates are best first
    return min(degrees) if degrees else None  # the weaker of the two ways in


def component_ranks(s: Set, q: Dict[str, Any], pid: str) -> Dict[str, Optional[int]]:
    return {
        "fused": rank_in(q["fused"], pid), "dense": s.dense_rank(q, pid),
        "ppr": rank_in(q["ppr"], pid), "chain": rank_in(q["chain"], pid), "hop": rank_in(q["hop"], pid),
    }


def cause(s: Set, q: Dict[str, Any], g: str, ranks, best, intruders, top, row) -> str:
    """The category of a miss, the question type aside (steps 2-7)."""
    fused_rank = ranks["fused"]
    if (fused_rank is None or fused_rank > 10) and (best is None or best > 10):
        return "unreached"
    if best is not None and best <= 2:
        return "fusion"
    for i in intruders:
        other = [p for p in top if p != i]
        ref = other[0] if other else q["fused"][0]
        if ref != i and lookalike(s, i, ref) and s.cos(i, ref) >= s.cos(g, ref):
            return "look-alike"
    for i in intruders:
        if lookalike(s, i, g):
            return "namesake"
    for i in intruders:
        ir = component_ranks(s, q, i)
        if ir["dense"] > 2 and min(ir[c] or 99 for c in ("ppr", "chain", "hop")) <= 2:
            degree = linking_degree(s, q, i)
            row["intruder_link_degree"] = degree
            return "hub" if degree is not None and degree >= FREQUENT else "wrong link"
    if any(component_ranks(s, q, i)["dense"] <= 2 for i in intruders):
        return "dense prefers"
    return "other"


def categorise(s: Set, q: Dict[str, Any]) -> List[Dict[str, Any]]:
    gold, top = set(q["gold"]), q["fused"][:2]
    intruders = [p for p in top if p not in gold]
    if not intruders:
        return []
    rows = []
    reached = {p for _, _, ps in q["candidates"] for p in ps}
    for g in q["gold"]:
        if g in top:
            continue
        ranks = component_ranks(s, q, g)
        row: Dict[str, Any] = {
            "set": s.name, "question_id": q["id"], "question": q["question"], "type": q.get("type"),
            "gold": g, "gold_title": s.titles[s.index[g]], "ranks": ranks,
            "top2": [{"id": p, "title": s.titles[s.index[p]], "gold": p in gold, "ranks": component_ranks(s, q, p)} for p in top],
            "stated_by_candidate": g in reached,
            "hop_reaches": g in s.linked(q, q["dense_top"][0]),
            "linked_to_rank1": s.link(q["fused"][0], g) > 0 if q["fused"][0] != g else None,
            "cos_to_rank1": round(s.cos(q["fused"][0], g), 3),
            "question_cos": round(s.cosine(q, g), 3),
        }
        best = min((ranks[c] for c in COMPONENTS if ranks[c] is not None), default=None)
        row["cause"] = cause(s, q, g, ranks, best, intruders, top, row)
        row["category"] = "comparison" if q.get("type") in COMPARISON else row["cause"]
        rows.append(row)
    return rows


def bucket(rank: Optional[int]) -> str:
    if rank is None:
        return "absent"
    return "1-2" if rank <= 2 else "3-5" if rank <= 5 else "6-10" if rank <= 10 else ">10"


def summary(s: Set, examples: int = 0) -> Dict[str, Any]:
    qs = s.questions
    table = {}
    for name in ("dense", "fused", "ppr", "chain", "hop"):
        get = (lambda q: s.dense(q)) if name == "dense" else (lambda q, n=name: q[n])
        table[name] = np.mean([recalls(get(q), q["gold"]) for q in qs], axis=0).round(3).tolist()
    misses = [row for q in qs for row in categorise(s, q)]
    n_questions = len({m["question_id"] for m in misses})
    counts = Counter(m["category"] for m in misses)
    where = {c: Counter(bucket(m["ranks"][c]) for m in misses) for c in ("fused", *COMPONENTS)}
    flags = {
        "stated by a candidate": sum(m["stated_by_candidate"] for m in misses),
        "the hop reaches it": sum(m["hop_reaches"] for m in misses),
        "linked to fused rank 1": sum(bool(m["linked_to_rank1"]) for m in misses),
        "rank 1 is gold": sum(any(t["gold"] for t in m["top2"][:1]) for m in misses),
    }
    print(f"\n## {s.name}: {len(qs)} questions; R@2/5/10: " + "; ".join(f"{k} {v}" for k, v in table.items()))
    print(f"misses (gold outside the top 2 while a non-gold is in it): {len(misses)} in {n_questions} questions")
    print("| category | misses |\n|---|---|")
    for c in CATEGORIES:
        if counts.get(c):
            print(f"| {c} | {counts[c]} |")
    comp = Counter(m["cause"] for m in misses if m["category"] == "comparison")
    if comp:
        print("comparison misses by cause:", dict(comp))
    print("| where the misses sit | 1-2 | 3-5 | 6-10 | >10 | absent |\n|---|---|---|---|---|---|")
    for c, b in where.items():
        print(f"| {c} | " + " | ".join(str(b.get(x, 0)) for x in ("1-2", "3-5", "6-10", ">10", "absent")) + " |")
    print("flags:", flags)
    # the non-gold passages in the top 2: which components put them there (rank 1-2), and rank 1 vs rank 2
    sources, slots = Counter(), Counter()
    fusion_from = Counter(c for m in misses if m["cause"] == "fusion" for c in COMPONENTS if (m["ranks"][c] or 99) <= 2)
    for q in qs:
        gold = set(q["gold"])
        for slot, p in enumerate(q["fused"][:2], start=1):
            if p not in gold:
                r = component_ranks(s, q, p)
                sources["+".join(c for c in COMPONENTS if (r[c] or 99) <= 2) or "none"] += 1
                slots[f"rank {slot}"] += 1
    top1 = {"dense": float(np.mean([s.dense(q, 1)[0] in q["gold"] for q in qs])),
            "fused": float(np.mean([q["fused"][0] in q["gold"] for q in qs]))}
    print(f"non-gold passages in the top 2: {dict(slots)}; put there by (components ranking them 1-2): {dict(sources.most_common())}")
    print(f"fusion misses: the component that had the gold at 1-2: {dict(fusion_from)}; rank 1 gold: {top1}")
    by_cat = defaultdict(list)
    for m in misses:
        by_cat[m["category"]].append(m)
    for c in CATEGORIES:
        if c in by_cat:
            ms = by_cat[c]
            med = {k: (float(np.median([m["ranks"][k] for m in ms if m["ranks"][k] is not None])) if any(m["ranks"][k] for m in ms) else None) for k in ("fused", *COMPONENTS)}
            print(f"  {c}: median ranks {med}; cos to rank 1 {np.median([m['cos_to_rank1'] for m in ms]):.2f}; "
                  f"linked to rank 1 {sum(bool(m['linked_to_rank1']) for m in ms)}/{len(ms)}")
    if examples:
        for c in CATEGORIES:
            for m in by_cat.get(c, [])[:examples]:
                print(f"    [{c}] {m['question']}\n       gold {m['gold_title']!r} {m['ranks']}\n       top2 "
                      + "; ".join(f"{t['title']!r}{'*' if t['gold'] else ''} {t['ranks']}" for t in m["top2"]))
    return {"recall": table, "misses": misses, "counts": dict(counts), "comparison_causes": dict(comp), "where": {c: dict(b) for c, b in where.items()}, "flags": flags, "intruder_sources": dict(sources), "intruder_slots": dict(slots), "fusion_from": dict(fusion_from), "top1_gold": top1,
            "questions_with_misses": n_questions}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sets", nargs="*", default=list(POOL))
    parser.add_argument("--examples", type=int, default=0)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    report = {name: summary(Set(name), args.examples) for name in args.sets}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    print(f"\n-> {args.out}")


if __name__ == "__main__":
    main()
