"""Seeded synthetic corpora (power-law entity degrees) and the questions and seeds asked of them.

Two shapes:

- "default": 3–10 triplets a passage, entity use ∝ rank^-0.8, questions naming one entity and a predicate
  (the corpus of the published figures: the same seed gives the same corpus as before the split);
- "issue10": 6 triplets a passage, entity use ∝ rank^-0.9, questions naming two entities two hops apart
  (a relation a–b and a relation b–c: the question names a and c), for `expansion_degree=2`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Dict, List, Tuple

import numpy as np
from llama_index.core.schema import TextNode

PREDICATES = (
    "works with",
    "born in",
    "part of",
    "located near",
    "founded",
    "studied under",
    "wrote",
    "married",
    "succeeded",
    "invented",
    "funded",
    "acquired",
    "teaches",
    "advises",
    "competes with",
    "owns",
    "directed",
    "discovered",
    "collaborates with",
    "influenced",
    "supplies",
    "borders",
    "leads",
    "member of",
    "published by",
    "named after",
    "descends from",
    "opposes",
    "hosts",
    "translated",
    "painted",
    "composed",
    "built",
    "governs",
    "mentors",
    "sponsors",
    "visited",
    "replaced",
    "cites",
    "inherited from",
)
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]  # 70


@dataclass(frozen=True)
class Shape:
    """How a corpus is drawn: entity popularity exponent, triplets a passage, and what a question names."""

    name: str
    zipf_s: float  # P(entity of rank k) ∝ k^-zipf_s
    triplets: Tuple[int, int]  # triplets a passage, drawn from [low, high)
    exact: bool  # keep drawing until a passage has its count (else restated duplicates are dropped)
    question_entities: int  # entities a question names: 1 (with a predicate) or 2 (two hops apart)
    default_degree: int  # the retriever's expansion_degree for this shape


SHAPES = {
    "default": Shape(
        "default", zipf_s=0.8, triplets=(3, 11), exact=False, question_entities=1, default_degree=1
    ),
    "issue10": Shape(
        "issue10", zipf_s=0.9, triplets=(6, 7), exact=True, question_entities=2, default_degree=2
    ),
}


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
    seed: int
    shape: str
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

    def passage_triplets(self, p: int) -> List[List[str]]:
        return [self.triplet(r) for r in self.passage_rels[self.passage_ptr[p] : self.passage_ptr[p + 1]]]

    def node(self, p: int, prefix: str = "") -> TextNode:
        triplets = self.passage_triplets(p)
        text = " ".join(f"{s} {pr} {o}." for s, pr, o in triplets)
        return TextNode(id_=f"{prefix}s{self.size}-p{p:07d}", text=text, metadata={"triplets": triplets})

    def relations_stated_by(self, end: int) -> int:
        """Distinct relations stated by passages [0, end): new relations are numbered in order of first use."""
        stated = int(self.passage_ptr[end])
        return int(self._highest_stated[stated - 1]) + 1 if stated else 0

    @cached_property
    def _highest_stated(self) -> np.ndarray:
        return np.maximum.accumulate(self.passage_rels)

    def used_entities(self) -> np.ndarray:
        return np.unique(np.concatenate([self.subj, self.obj]))


def _relations(rng: np.random.Generator, size: int, pool: int, zipf_s: float) -> Tuple[np.ndarray, ...]:
    """`size` distinct (subject, predicate, object) index triples, endpoints drawn by popularity rank."""
    weights = np.arange(1, pool + 1, dtype=np.float64) ** -zipf_s
    cdf = np.cumsum(weights) / weights.sum()
    rank_to_entity = rng.permutation(pool)  # so that entity index says nothing of degree

    def draw(n: int) -> np.ndarray:
        return rank_to_entity[np.minimum(np.searchsorted(cdf, rng.random(n)), pool - 1)]

    subj = np.empty(0, dtype=np.int64)
    obj = np.empty(0, dtype=np.int64)
    pred = np.empty(0, dtype=np.int64)
    while len(subj) < size:  # draw, drop repeated (s, p, o), draw again for the rest
        n = int((size - len(subj)) * 1.2) + 16
        s, o, p = draw(n), draw(n), rng.integers(len(PREDICATES), size=n)
        subj, obj, pred = np.concatenate([subj, s]), np.concatenate([obj, o]), np.concatenate([pred, p])
        key = (subj * pool + obj) * len(PREDICATES) + pred
        _, first = np.unique(key, return_index=True)
        keep = np.sort(first)
        subj, obj, pred = subj[keep], obj[keep], pred[keep]
    return subj[:size], pred[:size], obj[:size]


def _passages(
    rng: np.random.Generator, size: int, shape: Shape, reuse: float
) -> Tuple[np.ndarray, np.ndarray]:
    """Passages as (ptr, rels): each states a count of triplets drawn from `shape.triplets`, of which about
    `reuse` restate an earlier relation. With `shape.exact`, draws continue until the count is reached."""
    ptr = [0]
    rels: List[int] = []
    next_new = 0
    while next_new < size:
        k = int(rng.integers(*shape.triplets))
        chosen: List[int] = []
        draws = 0
        while (len(chosen) < k and next_new < size) if shape.exact else draws < k:
            draws += 1
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


def make_corpus(size: int, seed: int = 0, shape: str = "default", reuse: float = 0.1) -> Corpus:
    """`size` distinct relations between entities of a pool of size/2, each endpoint drawn with
    P(rank k) ∝ k^-zipf_s (a power-law degree distribution, exponent ≈ 1 + 1/zipf_s); passages as
    `_passages` lays them out. Deterministic in (size, seed, shape)."""
    spec = SHAPES[shape]
    rng = np.random.default_rng([seed, size])
    pool = max(50, size // 2)
    subj, pred, obj = _relations(rng, size, pool, spec.zipf_s)
    ptr, rels = _passages(rng, size, spec, reuse)
    names = [""] * pool  # names only for the entities used (unused pool slots stay unnamed)
    for e in np.unique(np.concatenate([subj, obj])).tolist():
        names[e] = entity_name(e)
    return Corpus(size, seed, shape, names, subj, pred, obj, ptr, rels)


def corpus_stats(corpus: Corpus) -> Dict[str, Any]:
    ends = np.concatenate([corpus.subj, corpus.obj])
    degree = np.bincount(ends)
    degree = degree[degree > 0]
    per_passage = np.diff(corpus.passage_ptr)
    return {
        "shape": corpus.shape,
        "relations": corpus.size,
        "entities": int(len(degree)),
        "passages": corpus.n_passages,
        "triplets": int(len(corpus.passage_rels)),
        "triplets_per_passage_mean": round(float(per_passage.mean()), 2),
        "entity_degree": {
            "mean": round(float(degree.mean()), 2),
            "median": float(np.median(degree)),
            "p99": float(np.percentile(degree, 99)),
            "max": int(degree.max()),
        },
    }


# --------------------------------------------------------------------------------------------------
# questions and seeds
# --------------------------------------------------------------------------------------------------
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


def _two_hop_pair(
    corpus: Corpus, rng: np.random.Generator, by_entity: np.ndarray, starts: np.ndarray
) -> tuple:
    """(a, c): the far ends of two relations a–b and b–c sharing the entity b, with a ≠ c."""
    while True:
        r = int(rng.integers(corpus.size))
        a, b = (corpus.subj[r], corpus.obj[r]) if rng.random() < 0.5 else (corpus.obj[r], corpus.subj[r])
        incident = by_entity[starts[b] : starts[b + 1]] % corpus.size  # relations of b
        s = int(rng.choice(incident))
        c = corpus.obj[s] if corpus.subj[s] == b else corpus.subj[s]
        if s != r and c != a and c != b and a != b:
            return int(a), int(c)


def questions(corpus: Corpus, rng: np.random.Generator, n: int) -> List[str]:
    """`n` questions of the corpus's shape, naming entities by their exact names (so that the no-LLM
    retriever's name matching finds them): one entity and a predicate, or two entities two hops apart."""
    if SHAPES[corpus.shape].question_entities == 1:
        used = corpus.used_entities()
        out = []
        for _ in range(n):
            e = int(rng.choice(used))
            p = PREDICATES[int(rng.integers(len(PREDICATES)))]
            out.append(f"Who or what {p} {corpus.names[e]}, and what came of it?")
        return out
    ends = np.concatenate([corpus.subj, corpus.obj])  # position i: relation i % size
    by_entity = np.argsort(ends, kind="stable")
    starts = np.searchsorted(ends[by_entity], np.arange(len(corpus.names) + 1))
    pairs = [_two_hop_pair(corpus, rng, by_entity, starts) for _ in range(n)]
    return [f"What connects {corpus.names[a]} to {corpus.names[c]}, and through whom?" for a, c in pairs]
