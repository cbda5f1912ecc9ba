"""The seeded synthetic corpus (power-law entity degrees), and the questions and seeds asked of it.

`make_corpus(size)` draws `size` distinct relations between entities of a pool of size/2, each end drawn
with P(rank k) ∝ k^-0.8, and lays them out as passages of 3–10 triplets, about a tenth of which restate
an earlier relation. Deterministic in (size, seed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

import numpy as np
from llama_index.core.schema import TextNode

PREDICATES = tuple(
    "works with,born in,part of,located near,founded,studied under,wrote,married,succeeded,invented,funded,"
    "acquired,teaches,advises,competes with,owns,directed,discovered,collaborates with,influenced,supplies,"
    "borders,leads,member of,published by,named after,descends from,opposes,hosts,translated,painted,composed,"
    "built,governs,mentors,sponsors,visited,replaced,cites,inherited from".split(",")
)
ZIPF_S = 0.8  # P(entity of rank k) ∝ k^-ZIPF_S
TRIPLETS = (3, 11)  # triplets a passage, drawn from [low, high)
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]  # 70


def _word(i: int, min_syllables: int = 2) -> str:
    out = []
    while i or len(out) < min_syllables:
        i, r = divmod(i, len(_SYLLABLES))
        out.append(_SYLLABLES[r])
    return "".join(out)


def entity_name(i: int) -> str:
    """A unique two-word name: a unique word, and one of 97 'family' words (so embeddings vary)."""
    return f"{_word(i)} {_word(5000 + i % 97, 3)}"


@dataclass
class Corpus:
    """Relations as index arrays into `names` and `PREDICATES`; passages as slices of `passage_rels`."""

    size: int
    names: List[str]  # entity index -> display name
    subj: np.ndarray  # relation index -> entity index
    pred: np.ndarray  # relation index -> predicate index
    obj: np.ndarray
    passage_ptr: np.ndarray  # passage p states passage_rels[passage_ptr[p]:passage_ptr[p+1]]
    passage_rels: np.ndarray

    @property
    def n_passages(self) -> int:
        return len(self.passage_ptr) - 1

    def triplet(self, r: int) -> List[str]:
        return [self.names[self.subj[r]], PREDICATES[self.pred[r]], self.names[self.obj[r]]]

    def node(self, p: int) -> TextNode:
        """Passage `p` as the transform is given it: its triplets as text, and in its metadata."""
        triplets = [self.triplet(r) for r in self.passage_rels[self.passage_ptr[p] : self.passage_ptr[p + 1]]]
        text = " ".join(f"{s} {pr} {o}." for s, pr, o in triplets)
        return TextNode(id_=f"s{self.size}-p{p:07d}", text=text, metadata={"triplets": triplets})

    def used_entities(self) -> np.ndarray:
        return np.unique(np.concatenate([self.subj, self.obj]))


def _relations(rng: np.random.Generator, size: int, pool: int) -> Tuple[np.ndarray, ...]:
    """`size` distinct (subject, predicate, object) index triples, endpoints drawn by popularity rank."""
    weights = np.arange(1, pool + 1, dtype=np.float64) ** -ZIPF_S
    cdf = np.cumsum(weights) / weights.sum()
    rank_to_entity = rng.permutation(pool)  # so that entity index says nothing of degree

    def draw(n: int) -> np.ndarray:
        return rank_to_entity[np.minimum(np.searchsorted(cdf, rng.random(n)), pool - 1)]

    subj = obj = pred = np.empty(0, dtype=np.int64)
    while len(subj) < size:  # draw, drop repeated (s, p, o), draw again for the rest
        n = int((size - len(subj)) * 1.2) + 16
        s, o, p = draw(n), draw(n), rng.integers(len(PREDICATES), size=n)
        subj, obj, pred = np.concatenate([subj, s]), np.concatenate([obj, o]), np.concatenate([pred, p])
        _, first = np.unique((subj * pool + obj) * len(PREDICATES) + pred, return_index=True)
        keep = np.sort(first)
        subj, obj, pred = subj[keep], obj[keep], pred[keep]
    return subj[:size], pred[:size], obj[:size]


def _passages(rng: np.random.Generator, size: int, reuse: float) -> Tuple[np.ndarray, np.ndarray]:
    """Passages as (ptr, rels): each makes a count of draws from `TRIPLETS`, of which about `reuse`
    restate an earlier relation (dropped if the passage states it already); new relations in order."""
    ptr, rels, next_new = [0], [], 0
    while next_new < size:
        k = int(rng.integers(*TRIPLETS))
        chosen: List[int] = []
        for _ in range(k):
            if next_new > 0 and rng.random() < reuse:
                old = int(rng.integers(next_new))
                if old not in chosen:
                    chosen.append(old)
            elif next_new < size:
                chosen.append(next_new)
                next_new += 1
        rels.extend(chosen)
        ptr.append(len(rels))
    return np.asarray(ptr, dtype=np.int64), np.asarray(rels, dtype=np.int64)


def make_corpus(size: int, seed: int = 0, reuse: float = 0.1) -> Corpus:
    """`size` distinct relations between entities of a pool of size/2 (a power-law degree distribution,
    exponent ≈ 1 + 1/ZIPF_S), laid out as passages. Deterministic in (size, seed)."""
    rng = np.random.default_rng([seed, size])
    pool = max(50, size // 2)
    subj, pred, obj = _relations(rng, size, pool)
    ptr, rels = _passages(rng, size, reuse)
    names = [""] * pool  # names only for the entities used
    for e in np.unique(np.concatenate([subj, obj])).tolist():
        names[e] = entity_name(e)
    return Corpus(size, names, subj, pred, obj, ptr, rels)


def corpus_stats(corpus: Corpus) -> Dict[str, Any]:
    degree = np.bincount(np.concatenate([corpus.subj, corpus.obj]))
    degree = degree[degree > 0]
    return {
        "relations": corpus.size,
        "entities": int(len(degree)),
        "passages": corpus.n_passages,
        "triplets": int(len(corpus.passage_rels)),
        "entity_degree": {
            "median": float(np.median(degree)),
            "p99": float(np.percentile(degree, 99)),
            "max": int(degree.max()),
        },
    }


def query_seeds(corpus: Corpus, rng: np.random.Generator, n: int, k: int = 3) -> List[tuple]:
    """`n` seed sets: `k` entity indices and `k` relation indices of the corpus, uniformly at random."""
    used = corpus.used_entities()
    return [
        (
            rng.choice(used, size=k, replace=False).tolist(),
            rng.choice(corpus.size, size=k, replace=False).tolist(),
        )
        for _ in range(n)
    ]


def questions(corpus: Corpus, rng: np.random.Generator, n: int) -> List[str]:
    """`n` questions naming one entity by its exact name (so that the retriever's name matching finds
    it) and a predicate."""
    used = corpus.used_entities()
    out = []
    for _ in range(n):
        e = int(rng.choice(used))
        p = PREDICATES[int(rng.integers(len(PREDICATES)))]
        out.append(f"Who or what {p} {corpus.names[e]}, and what came of it?")
    return out
