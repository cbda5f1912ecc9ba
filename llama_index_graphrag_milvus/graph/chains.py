"""Whether the graph confirms an LLM's picked relations as a chain from the question.

A pick is confirmed when it lies on a chain of at least two picks that starts at an entity the question
names and walks away from it: the first pick names a question entity, and each next pick shares with a
confirmed one an entity (or a synonym of one) that is neither a question entity nor a hub. Relations
that only share the question's own entity do not chain: any candidate near the question does that, a
random pick included. The confirmed picks come back in the LLM's order (its most useful first).
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Set

import numpy as np

from llama_index_graphrag_milvus.graph.sparse import Graph, neighbours


def confirmed_chain(graph: Graph, picks: Sequence[int], question: Sequence[int], hub_passages: float) -> List[int]:
    """The picks (relation positions, in the LLM's order) the graph confirms as a chain from the
    `question` entities (positions), in that order; empty when no two picks chain."""
    asked = set(int(e) for e in question)
    ends: Dict[int, Set[int]] = {}
    for r in dict.fromkeys(int(p) for p in picks):
        own = neighbours(graph.relation_entity, np.array([r]))
        linked = neighbours(graph.entity_entity, own) if len(own) else own
        ends[r] = {int(e) for e in np.concatenate([own, linked]).tolist()}
    depth = {r: 0 for r, named in ends.items() if named & asked}
    frontier, level = list(depth), 0
    while frontier:  # breadth first: each level joins the last through a new, specific entity
        level += 1
        joints = {e for r in frontier for e in ends[r] - asked if graph.passage_counts[e] <= hub_passages}
        frontier = [r for r, named in ends.items() if r not in depth and named & joints]
        depth.update((r, level) for r in frontier)
    if not depth or max(depth.values()) == 0:
        return []
    # a pick at the question's entity is on a chain only if a pick of the next level goes on from it
    onward = {e for r, d in depth.items() if d == 1 for e in ends[r] - asked if graph.passage_counts[e] <= hub_passages}
    return [r for r in ends if r in depth and (depth[r] > 0 or ends[r] & onward)]
