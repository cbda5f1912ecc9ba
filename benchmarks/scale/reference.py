"""The reference notebook's algorithm (list.index build, dense incidence, A·Aᵀ products), side by side
with ours: build time, degree-1 expansion time, and a check that both give the same candidate sets."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import scipy.sparse as sp

from llama_index_graphrag_milvus import MilvusGraphStore

from benchmarks.scale import internals
from benchmarks.scale.common import percentiles
from benchmarks.scale.corpus import Corpus

MAX_DENSE_BYTES = 2 * 1024**3
MAX_SECONDS = 300.0


class Reference:
    """The tutorial notebook's build and expansion, as written there (degree 1).

    The entity and relation lists are built with `x not in list` and `list.index` in the loop; the
    incidence matrix is a dense np.zeros((E, R)) converted to CSR; A·Aᵀ, Aᵀ·A and (A·Aᵀ)·A are computed
    at build; a query takes the nonzero columns of the seeds' rows."""

    def __init__(self) -> None:
        self.timings: Dict[str, float] = {}

    def build_lists(self, passages: List[List[List[str]]]) -> None:
        t0 = time.perf_counter()
        entities: List[str] = []
        relations: List[str] = []
        entityid_2_relationids: Dict[int, List[int]] = defaultdict(list)
        relationid_2_passageids: Dict[int, List[int]] = defaultdict(list)
        for passage_id, triplets in enumerate(passages):
            for triplet in triplets:
                if triplet[0] not in entities:
                    entities.append(triplet[0])
                if triplet[2] not in entities:
                    entities.append(triplet[2])
                relation = " ".join(triplet)
                if relation not in relations:
                    relations.append(relation)
                    entityid_2_relationids[entities.index(triplet[0])].append(len(relations) - 1)
                    entityid_2_relationids[entities.index(triplet[2])].append(len(relations) - 1)
                relationid_2_passageids[relations.index(relation)].append(passage_id)
        self.entities, self.relations = entities, relations
        self.entityid_2_relationids = entityid_2_relationids
        self.relationid_2_passageids = relationid_2_passageids
        self.timings["lists_s"] = time.perf_counter() - t0

    def build_matrices(self, degree: int = 1) -> None:
        t0 = time.perf_counter()
        adj = np.zeros((len(self.entities), len(self.relations)))
        for eid in range(len(self.entities)):
            adj[eid, self.entityid_2_relationids[eid]] = 1
        t1 = time.perf_counter()
        adj = sp.csr_matrix(adj)
        t2 = time.perf_counter()
        entity_adj_1 = adj @ adj.T
        relation_adj_1 = adj.T @ adj
        entity_adj = entity_adj_1
        for _ in range(degree - 1):
            entity_adj = entity_adj * entity_adj_1
        relation_adj = relation_adj_1
        for _ in range(degree - 1):
            relation_adj = relation_adj * relation_adj_1
        entity_relation_adj = entity_adj @ adj
        t3 = time.perf_counter()
        self.adj, self.relation_adj, self.entity_relation_adj = adj, relation_adj, entity_relation_adj
        self.timings.update(dense_fill_s=t1 - t0, to_csr_s=t2 - t1, products_s=t3 - t2)
        self.product_nnz = {
            "A": int(adj.nnz),
            "A·Aᵀ": int(entity_adj_1.nnz),
            "Aᵀ·A": int(relation_adj.nnz),
            "(A·Aᵀ)·A": int(entity_relation_adj.nnz),
        }
        self.product_bytes = int(
            sum(
                m.data.nbytes + m.indices.nbytes + m.indptr.nbytes
                for m in (adj, relation_adj, entity_relation_adj)
            )
        )

    def expand(self, entity_seeds: Sequence[int], relation_seeds: Sequence[int]) -> List[int]:
        from_relations: set = set()
        from_entities: set = set()
        for r in relation_seeds:
            from_relations.update(self.relation_adj[r].nonzero()[1].tolist())
        for e in entity_seeds:
            from_entities.update(self.entity_relation_adj[e].nonzero()[1].tolist())
        return list(from_relations | from_entities)


def _too_slow(corpus: Corpus, previous: Optional[Dict[str, Any]], dense_bytes: int) -> Dict[str, Any]:
    """The list build is quadratic: its time predicted from the previous size, and why it is skipped."""
    if not (previous and previous.get("lists_s")):
        return {}
    predicted = previous["lists_s"] * (corpus.size / previous["size"]) ** 2
    out: Dict[str, Any] = {"lists_predicted_s": round(predicted, 1)}
    if predicted > MAX_SECONDS:
        out["skipped"] = (
            f"list build predicted at {predicted:.0f} s (> {MAX_SECONDS:.0f} s, quadratic from "
            f"{previous['lists_s']:.2f} s at {previous['size']}); dense matrix would be {dense_bytes / 1e9:.1f} GB"
        )
    return out


def _ours_in_memory_s(corpus: Corpus) -> float:
    """Our adjacency built from the same data held in memory (id rows, no Milvus)."""
    rel_rows = [internals.relation_row(corpus.triplet(r)) for r in range(corpus.size)]
    pas_rows = [
        (
            f"p{p}",
            [rel_rows[r][0] for r in corpus.passage_rels[corpus.passage_ptr[p] : corpus.passage_ptr[p + 1]]],
        )
        for p in range(corpus.n_passages)
    ]
    return internals.build_in_memory(rel_rows, pas_rows)


def _times(fn: Any, seeds: List[tuple]) -> List[float]:
    for e, r in seeds[:5]:  # warm up
        fn(e, r)
    times = []
    for e, r in seeds:
        t0 = time.perf_counter()
        fn(e, r)
        times.append(time.perf_counter() - t0)
    return times


def reference_benchmark(
    corpus: Corpus,
    store: MilvusGraphStore,
    seeds: List[tuple],
    our_pos: List[tuple],
    previous: Optional[Dict[str, Any]],
    check_sets: bool,
) -> Dict[str, Any]:
    """Run the reference where it fits; compare build and degree-1 expansion with ours on the same seeds."""
    n_ent = int(len(corpus.used_entities()))
    dense_bytes = n_ent * corpus.size * 8
    out: Dict[str, Any] = {"dense_matrix_bytes": dense_bytes, **_too_slow(corpus, previous, dense_bytes)}
    if "skipped" in out:
        return out
    ref = Reference()
    ref.build_lists([corpus.passage_triplets(p) for p in range(corpus.n_passages)])
    out.update(lists_s=round(ref.timings["lists_s"], 3), size=corpus.size)
    assert len(ref.relations) == corpus.size and len(ref.entities) == n_ent, "reference lists disagree"
    if dense_bytes > MAX_DENSE_BYTES:
        out["skipped"] = (
            f"dense np.zeros(({n_ent}, {corpus.size})) would take {dense_bytes / 1e9:.1f} GB "
            f"(> {MAX_DENSE_BYTES / 1e9:.1f} GB): list build measured, matrices not built"
        )
        return out
    ref.build_matrices(degree=1)
    build = sum(ref.timings.values())
    out.update({k: round(v, 3) for k, v in ref.timings.items()})
    out.update(build_s=round(build, 3), product_nnz=ref.product_nnz, product_bytes=ref.product_bytes)
    ours_mem = _ours_in_memory_s(corpus)
    out["ours_in_memory_build_s"] = round(ours_mem, 4)
    out["build_ratio_reference_over_ours_in_memory"] = round(build / ours_mem, 1)

    # the same seeds, mapped to the reference's list positions (mapping not timed)
    ent_index = {name: i for i, name in enumerate(ref.entities)}
    rel_index = {text: i for i, text in enumerate(ref.relations)}
    ref_seeds = [
        ([ent_index[corpus.names[e]] for e in ents], [rel_index[" ".join(corpus.triplet(r))] for r in rels])
        for ents, rels in seeds
    ]
    graph = internals.graph(store)
    ref_times = _times(ref.expand, ref_seeds)
    our_times = _times(lambda e, r: np.union1d(*internals.expand(graph, e, r, 1)), our_pos)
    out["expansion_deg1_ms"] = percentiles(ref_times, 1e3)
    out["expansion_ratio_reference_over_ours_p50"] = round(
        float(np.median(ref_times)) / float(np.median(our_times)), 2
    )
    if check_sets:
        out["same_candidate_sets"] = _same_sets(corpus, store, ref, ref_seeds, our_pos)
    return out


def _same_sets(
    corpus: Corpus, store: MilvusGraphStore, ref: Reference, ref_seeds: List[tuple], our_pos: List[tuple]
):
    """Both algorithms' degree-1 candidate sets, compared by relation id: union, from entities, from relations."""
    text_to_id = {
        " ".join(corpus.triplet(r)): internals.relation_key(corpus.triplet(r)) for r in range(corpus.size)
    }
    graph = internals.graph(store)

    def reference(e: List[int], r: List[int]) -> set:
        return {text_to_id[ref.relations[i]] for i in ref.expand(e, r)}

    def ours(e: List[int], r: List[int]) -> set:
        return set(internals.relation_ids_at(store, np.union1d(*internals.expand(graph, e, r, 1)).tolist()))

    mismatches = 0
    for (re_, rr), (oe, orr) in zip(ref_seeds, our_pos):
        for ref_args, our_args in (((re_, rr), (oe, orr)), ((re_, []), (oe, [])), (([], rr), ([], orr))):
            mismatches += reference(*ref_args) != ours(*our_args)
    return {
        "queries": len(ref_seeds),
        "checks (union, from entities, from relations)": 3 * len(ref_seeds),
        "mismatches": mismatches,
    }
