"""The dumps of `benchmarks/r2_dump.py`, loaded for offline study (issue 21): one `Set` a dump, with the
passage-level graph (who names what, who is about what) and helpers shared by `r2_study` and `r2_variants`."""

from __future__ import annotations

import pickle
from functools import cached_property
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np
import scipy.sparse as sp

DUMPS = Path(".cache/issue21")  # the dumps (pickles, 3-18 MB each; git-ignored)
KS = (2, 5, 10)
#: The three dev sets of the issue's pool, by dump name.
#: The issue's four settings (MuSiQue: raw title + text passages, its LLM triples or the text alone).
POOL = ("musique_triples", "musique_text", "hotpotqa", "wiki2")
ABOUT_SHARE = 0.5


def recall(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    return len(set(ranked[:k]) & set(gold)) / len(gold)


def recalls(ranked: Sequence[str], gold: Sequence[str]) -> List[float]:
    return [recall(ranked, gold, k) for k in KS]


class Set:
    def __init__(self, name: str, path: Path | None = None) -> None:
        with open(path or DUMPS / f"{name}.pkl", "rb") as handle:
            raw: Dict[str, Any] = pickle.load(handle)
        self.name = name
        self.passages: List[str] = raw["passages"]
        self.index = {p: i for i, p in enumerate(self.passages)}
        self.titles: List[str] = raw["titles"]
        self.questions: List[Dict[str, Any]] = raw["questions"]
        self.vectors: np.ndarray = raw["passage_vectors"]
        self.counts = raw["passage_entity_counts"].tocsr()  # P x E: relations of the passage naming the entity
        self.per_passage = np.maximum(np.asarray(raw["passage_relations"]), 1)
        self.entity_passages = np.asarray(raw["entity_passages"])
        self.entity_names: List[str] = raw["entity_names"]
        self.hubs = self.questions[0]["hubs"] if self.questions else 20.0
        for q in self.questions:
            q["dense_order"] = np.argsort(-q["dense"].astype(np.float64), kind="stable")

    # passage-level graph ------------------------------------------------------------------------
    @cached_property
    def named(self) -> sp.csr_matrix:
        """P x E, 1 where the passage states a relation naming the entity (hubs left out)."""
        m = self.counts.copy()
        m.data[:] = 1
        keep = (self.entity_passages <= self.hubs).astype(np.float64)
        return (m @ sp.diags(keep)).tocsr()

    @cached_property
    def about(self) -> sp.csr_matrix:
        """P x E, 1 where at least half of the passage's relations name the entity."""
        share = self.counts.multiply(1.0 / self.per_passage[:, None]).tocsr()
        share.data = (share.data >= ABOUT_SHARE).astype(np.float64)
        share.eliminate_zeros()
        return share

    @cached_property
    def about_by_entity(self) -> sp.csc_matrix:
        return self.about.tocsc()

    @cached_property
    def links(self) -> sp.csr_matrix:
        """P x P: L[a, p] = number of non-hub entities that `a` names and `p` is about (the hop's link)."""
        out = (self.named @ self.about.T).tocsr()
        out.setdiag(0)
        out.eliminate_zeros()
        return out

    @cached_property
    def shared(self) -> sp.csr_matrix:
        """P x P: the number of non-hub entities both passages name."""
        out = (self.named @ self.named.T).tocsr()
        out.setdiag(0)
        out.eliminate_zeros()
        return out

    def linked(self, q: Dict[str, Any], anchor: str, share: float = ABOUT_SHARE) -> List[str]:
        """The hop's passages from `anchor` (the retriever's own when dumped), unordered."""
        if share == ABOUT_SHARE and anchor in q["linked"]:
            return q["linked"][anchor]
        row = (self.links if share == ABOUT_SHARE else self.links_at(share))[self.index[anchor]]
        return [self.passages[j] for j in row.indices]

    def links_at(self, share: float) -> sp.csr_matrix:
        """`links` with another "about" share."""
        cache = self.__dict__.setdefault("_links_at", {})
        if share not in cache:
            about = self.counts.multiply(1.0 / self.per_passage[:, None]).tocsr()
            about.data = (about.data >= share).astype(np.float64)
            about.eliminate_zeros()
            out = (self.named @ about.T).tocsr()
            out.setdiag(0)
            out.eliminate_zeros()
            cache[share] = out
        return cache[share]

    def link(self, a: str, b: str) -> int:
        """Entities `a` names that `b` is about, plus those `b` names that `a` is about."""
        i, j = self.index[a], self.index[b]
        return int(self.links[i, j] + self.links[j, i])

    def cos(self, a: str, b: str) -> float:
        return float(self.vectors[self.index[a]] @ self.vectors[self.index[b]])

    # rankings -----------------------------------------------------------------------------------
    def dense(self, q: Dict[str, Any], n: int = 100) -> List[str]:
        return [self.passages[i] for i in q["dense_order"][:n]]

    def dense_rank(self, q: Dict[str, Any], pid: str) -> int:
        """1-based rank of `pid` in dense retrieval over the whole corpus."""
        d = q["dense"]
        return int((d > d[self.index[pid]]).sum()) + 1

    def cosine(self, q: Dict[str, Any], pid: str) -> float:
        return float(q["dense"][self.index[pid]])


def load(names: Sequence[str] = POOL) -> List[Set]:
    return [Set(n) for n in names]


def rank_in(ranking: Sequence[str], pid: str) -> int | None:
    """1-based rank, None when absent."""
    try:
        return list(ranking).index(pid) + 1
    except ValueError:
        return None


def fuse(rankings: Sequence[Sequence[str]], k: float, weights: Sequence[float] | None = None) -> List[str]:
    """RRF as `ranking.base.fuse` (ties: first seen)."""
    score: Dict[str, float] = {}
    for j, ranked in enumerate(rankings):
        w = 1.0 if weights is None else weights[j]
        if w == 0:
            continue
        for r, p in enumerate(ranked, start=1):
            score[p] = score.get(p, 0.0) + w / (k + r)
    return sorted(score, key=lambda p: -score[p])


def fuse_scores(rankings: Sequence[Sequence[str]], k: float, weights: Sequence[float] | None = None) -> Dict[str, float]:
    score: Dict[str, float] = {}
    for j, ranked in enumerate(rankings):
        w = 1.0 if weights is None else weights[j]
        for r, p in enumerate(ranked, start=1):
            score[p] = score.get(p, 0.0) + w / (k + r)
    return score
