"""Whether the graph confirms an LLM's picked relations as a chain from the question, and which picks it
can relate to the question at all.

A pick is confirmed when it lies on a chain of at least two picks that starts at an entity the question
names and walks away from it: the first pick names a question entity, and each next pick shares with a
confirmed one an entity (or a synonym of one) that is neither a question entity nor a hub. Relations
that only share the question's own entity do not chain: any candidate near the question does that, a
random pick included. The confirmed picks come back in the LLM's order (its most useful first).

A pick is related when it names a question entity, or shares such a specific entity with another pick;
a pick that does neither is isolated: nothing in the graph ties it to the question or to the rest of
the pick (what most random picks are).
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Set

import numpy as np

from llama_index_graphrag_milvus.graph.sparse import Graph, neighbours


def confirmed_chain(graph: Graph, picks: Sequence[int], question: Sequence[int], hub_passages: float) -> List[int]:
    """The picks (relation positions, in the LLM's order) the graph confirms as a chain from the
    `question` entities (positions), in that order; empty when no two picks chain."""
    asked = set(int(e) for e in question)
    ends = _ends(graph, picks)
    depth = {r: 0 for r, named in ends.items() if named & asked}
    frontier, level = list(depth), 0
    while frontier:  # breadth first: each level joins the last through a new, specific entity
        level += 1
        joints = {e for r in frontier for e in _specific(graph, ends[r], asked, hub_passages)}
        frontier = [r for r, named in ends.items() if r not in depth and named & joints]
        depth.update((r, level) for r in frontier)
    if not depth or max(depth.values()) == 0:
        return []
    # a pick at the question's entity is on a chain only if a pick of the next level goes on from it
    onward = {e for r, d in depth.items() if d == 1 for e in _specific(graph, ends[r], asked, hub_passages)}
    return [r for r in ends if r in depth and (depth[r] > 0 or ends[r] & onward)]


def related_picks(graph: Graph, picks: Sequence[int], question: Sequence[int], hub_passages: float) -> List[int]:
    """The picks (relation positions, in the LLM's order) that name a `question` entity or share with
    another pick an entity (or a synonym of one) that is neither a question entity nor a hub."""
    asked = set(int(e) for e in question)
    ends = _ends(graph, picks)
    specific = {r: _specific(graph, named, asked, hub_passages) for r, named in ends.items()}
    return [
        r for r, named in ends.items() if named & asked or any(specific[r] & specific[o] for o in ends if o != r)
    ]


def _ends(graph: Graph, picks: Sequence[int]) -> Dict[int, Set[int]]:
    """Each distinct pick's entities and their synonyms, in the picks' order."""
    ends: Dict[int, Set[int]] = {}
    for r in dict.fromkeys(int(p) for p in picks):
        own = neighbours(graph.relation_entity, np.array([r]))
        linked = neighbours(graph.entity_entity, own) if len(own) else own
        ends[r] = {int(e) for e in np.concatenate([own, linked]).tolist()}
    return ends


def _specific(graph: Graph, entities: Set[int], asked: Set[int], hub_passages: float) -> Set[int]:
    """The entities that can join two picks: not the question's, and stated in at most `hub_passages` passages."""
    return {e for e in entities - asked if graph.passage_counts[e] <= hub_passages}
