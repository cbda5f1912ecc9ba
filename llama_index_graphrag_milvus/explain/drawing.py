"""Drawing an `Explanation`: entities, the relations drawn and the passages returned, as a matplotlib
figure (the `viz` extra: networkx and matplotlib).

What is drawn (`drawn`: the relations by kind, synonyms as one entity, the relations linked to each
passage) is decided in `drawn.py`, next to the text it must agree with; this module places and draws it.
The layout is deterministic, in points of the axes, and reserves the room each label takes.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Sequence, Tuple

from llama_index.core.schema import NodeWithScore

from llama_index_graphrag_milvus.explain.drawn import (
    CANDIDATE, CHOSEN, MAX_DRAWN_RELATIONS, SEED, VIA, Drawn, Explained, drawn, drawn_relations,
)
from llama_index_graphrag_milvus.schema import ScoredRelation, normalize_name

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["MAX_DRAWN_RELATIONS", "draw", "drawn", "drawn_relations", "legend_labels"]

_VIZ_HINT = "pip install 'llama-index-graphrag-milvus[viz]'"

_ENTITY, _ENTITY_EDGE = "#dbe4ee", "#6b7b8f"
_SEED = "#f39c12"
_PASSAGE, _PASSAGE_EDGE = "#d8f0d2", "#2e8b3e"
_ENTITY_OFFSET = 15.0  # points from an entity's dot down to its name
_GAP = 8.0  # points between packed components
_MAX_UNIT = 170.0  # points: the longest mean edge of a laid-out component

# per kind: colour, line width, line style, arrow size, label size
_STYLE = {
    CANDIDATE: ("#a3acb9", 1.1, "-", 13, 8.0),
    SEED: ("#e67e22", 2.0, (0, (5, 3)), 16, 9.0),
    VIA: (_PASSAGE_EDGE, 2.6, "-", 18, 9.5),
    CHOSEN: ("#d62728", 3.2, "-", 20, 10.0),
}
_LEVEL = {CANDIDATE: 0, SEED: 1, VIA: 2, CHOSEN: 3}

_Pos = Dict[Any, Tuple[float, float]]  # layout node -> its place, in points of the axes
_Extent = Tuple[float, float, float, float]  # how far a node's drawing reaches: left, right, below, above


def draw(explanation: Explained, max_relations: int = MAX_DRAWN_RELATIONS) -> "Figure":
    """The subgraph of `explanation` as a matplotlib `Figure` (not attached to pyplot)."""
    nx, Figure = _viz()
    return _draw(explanation, nx, Figure, max_relations)


def _viz() -> Tuple[Any, Any]:
    try:
        import networkx as nx
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            f"Drawing an Explanation needs networkx and matplotlib ({exc.name} is missing): {_VIZ_HINT}"
        ) from exc
    return nx, Figure


# labels and their extents ------------------------------------------------------------------------
class _Label(NamedTuple):
    text: str
    size: float
    bold: bool
    pad: float  # the box's padding, in font sizes


def _title(hit: NodeWithScore) -> str:
    title = hit.node.metadata.get("title")
    return str(title) if isinstance(title, str) and title.strip() else str(hit.node.ref_doc_id or hit.node.node_id)


def _short(text: str, width: int = 18, lines: int = 2) -> str:
    """`text` on at most `lines` lines of about `width` characters, cut with an ellipsis."""
    words = " ".join(str(text).split())
    wrapped = textwrap.wrap(words, width, break_long_words=True) or [""]
    if len(wrapped) > lines:
        last = wrapped[lines - 1]
        wrapped = wrapped[: lines - 1] + [(last[: width - 1] if len(last) >= width else last) + "…"]
    return "\n".join(wrapped)


def _labels(d: Drawn, passages: List[Tuple[int, NodeWithScore]]) -> Dict[Any, _Label]:
    """The label of every layout node: entity names, relation predicates, passage boxes."""
    labels: Dict[Any, _Label] = {}
    for node, name in d.entities.items():
        seed = node in d.seeds
        labels[("e", node)] = _Label(_short(name, 18, 3 if "(" in name else 2), 10.5 if seed else 9.5, seed, 0.12)
    for relation in d.relations:
        kind = d.kinds[relation.id]
        labels[("r", relation.id)] = _Label(_short(relation.predicate, 18, 2), _STYLE[kind][4], kind == CHOSEN, 0.15)
    for rank, hit in passages:
        score = "" if hit.score is None else f"  {hit.score:.2f}"
        text = f"#{rank} {_short(_title(hit), 26, 1)}{score}\n{_short(hit.node.get_content(), 30, 2)}"
        labels[("p", rank)] = _Label(text, 9.0, False, 0.45)
    return labels


def _extent(node: Any, label: _Label) -> _Extent:
    """How far a node's dot and label reach from its place, in points."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    font = FontProperties(size=label.size, weight="bold" if label.bold else "normal")
    lines = label.text.split("\n")
    width = max(TextToPath().get_text_width_height_descent(line, font, ismath=False)[0] for line in lines)
    width += 2 * label.pad * label.size + 2
    height = 1.2 * label.size * len(lines) + 2 * label.pad * label.size + 2
    if node[0] == "e":
        radius = (560 if label.bold else 320) ** 0.5 / 2
        return max(radius, width / 2), max(radius, width / 2), _ENTITY_OFFSET + height, radius
    return width / 2, width / 2, height / 2, height / 2


# the drawing ---------------------------------------------------------------------------------------
def _draw(explanation: Explained, nx: Any, Figure: Any, max_relations: int) -> "Figure":
    """The drawing `Explanation.figure` returns: relations under entities under passages, then the legend."""
    d = drawn(explanation, max_relations)
    passages = list(enumerate(explanation.passages, start=1))
    labels = _labels(d, passages)
    figure, ax, (width, height) = _canvas(explanation, Figure, d, len(passages))
    extents = {node: _extent(node, label) for node, label in labels.items()}
    pos = _layout(nx, _layout_graph(nx, d), extents, width, height)
    if not pos:
        ax.text(0.5, 0.5, "Nothing was found for this question.", ha="center", va="center", fontsize=13,
                transform=ax.transAxes)
        return figure
    # one unit is one point, so the room reserved is the room drawn (unless even 1 point an edge overflows)
    ax.set_xlim(min(0, min(p[0] - extents[n][0] for n, p in pos.items())),
                max(width, max(p[0] + extents[n][1] for n, p in pos.items())))
    ax.set_ylim(min(-height, min(p[1] - extents[n][2] for n, p in pos.items())),
                max(0, max(p[1] + extents[n][3] for n, p in pos.items())))
    _draw_relations(ax, d, labels, pos)
    _draw_entities(ax, d, labels, pos)
    _draw_passages(ax, passages, d.links, labels, pos)
    _legend(figure, explanation, d)
    return figure


def _layout_graph(nx: Any, d: Drawn) -> Any:
    """The graph laid out: entities, relations (the middle of their edge) and passages are all nodes, so
    that parallel relations, their labels and the passages spread apart."""
    graph = nx.Graph()
    graph.add_nodes_from(("e", node) for node in d.entities)
    for relation in d.relations:
        graph.add_edge(("r", relation.id), ("e", d.node_of[normalize_name(relation.subject)]))
        graph.add_edge(("r", relation.id), ("e", d.node_of[normalize_name(relation.object)]))
    for rank in d.links:
        graph.add_node(("p", rank))
        for relation in d.links[rank]:
            graph.add_edge(("p", rank), ("r", relation.id), length=2.0)
    for a in d.links:  # passages chosen by the same relation would land on one another
        for b in d.links:
            if a < b and {r.id for r in d.links[a]} & {r.id for r in d.links[b]}:
                graph.add_edge(("p", a), ("p", b), length=2.5)
    return graph


def _canvas(explanation: Explained, Figure: Any, d: Drawn, passages: int) -> Tuple["Figure", Any, Tuple[float, float]]:
    """The figure, sized to the nodes drawn, with the question and a summary line as its title; and the
    size of its axes in points."""
    width = min(22.0, 11.0 + 0.2 * (len(d.entities) + passages))
    figure = Figure(figsize=(width, width * 0.75))
    left, right, bottom, top = 0.01, 0.99, 0.09, 0.9
    figure.subplots_adjust(left=left, right=right, top=top, bottom=bottom)
    ax = figure.add_subplot()
    ax.set_axis_off()
    figure.text(0.012, 0.975, textwrap.shorten(explanation.query, 120, placeholder=" ..."),
                fontsize=15, fontweight="bold", va="top", parse_math=False)
    merged = len(d.node_of) - len(d.entities)
    chosen = len(explanation.chosen)
    summary = (f"{chosen} relation{'' if chosen == 1 else 's'} chosen by {explanation.chosen_by} · "
               f"{passages} passages returned · "
               f"{len(d.relations)} of {len(explanation.candidates)} candidate relations drawn (the best by score)"
               + (" · synonyms drawn as one entity" if merged else "")
               + (_decision(explanation.llm_decision) if explanation.llm_decision else ""))
    figure.text(0.012, 0.94, summary, fontsize=10.5, color="#444444", va="top", parse_math=False)
    return figure, ax, ((right - left) * width * 72, (top - bottom) * width * 0.75 * 72)


def _draw_relations(ax: Any, d: Drawn, labels: Dict[Any, _Label], pos: _Pos) -> None:
    """Each relation subject → object through its layout point, labelled with its predicate; grey
    candidates under dashed orange seeds under green ones behind a passage under red chosen ones."""
    from matplotlib.patches import FancyArrowPatch

    for relation in sorted(d.relations, key=lambda r: _LEVEL[d.kinds[r.id]]):
        kind = d.kinds[relation.id]
        colour, lw, style, arrow, _ = _STYLE[kind]
        lv = _LEVEL[kind]
        s = ("e", d.node_of[normalize_name(relation.subject)])
        o = ("e", d.node_of[normalize_name(relation.object)])
        middle = pos[("r", relation.id)]
        if s != o:
            ax.add_patch(FancyArrowPatch(
                pos[s], pos[o], arrowstyle="-|>", connectionstyle=_Through(ax, middle), mutation_scale=arrow,
                lw=lw, color=colour, linestyle=style, shrinkA=12, shrinkB=14, zorder=1 + lv, alpha=0.9,
            ))
        else:  # a relation of an entity with itself (or its synonym): a plain line to its label
            ax.plot(*zip(pos[s], middle), color=colour, lw=lw, linestyle=style, zorder=1 + lv)
        label = labels[("r", relation.id)]
        ax.text(*middle, label.text, fontsize=label.size, color=colour if lv else "#4f5864",
                fontweight="bold" if label.bold else "normal", ha="center", va="center", zorder=6 + lv,
                parse_math=False, bbox=dict(boxstyle=f"round,pad={label.pad}", fc="white", ec="none", alpha=0.85))


def _draw_entities(ax: Any, d: Drawn, labels: Dict[Any, _Label], pos: _Pos) -> None:
    """Each entity a dot with its name below; the seeds larger, orange and in bold."""
    for node in d.entities:
        seed, label = node in d.seeds, labels[("e", node)]
        ax.scatter(*pos[("e", node)], s=560 if seed else 320, c=_SEED if seed else _ENTITY, edgecolors=_ENTITY_EDGE,
                   linewidths=1.2, zorder=10)
        ax.annotate(label.text, pos[("e", node)], xytext=(0, -_ENTITY_OFFSET), textcoords="offset points",
                    ha="center", va="top", fontsize=label.size, fontweight="bold" if seed else "normal", zorder=11,
                    parse_math=False, bbox=dict(boxstyle=f"round,pad={label.pad}", fc="white", ec="none", alpha=0.7))


def _draw_passages(
    ax: Any, passages: List[Tuple[int, NodeWithScore]], links: Dict[int, List[ScoredRelation]],
    labels: Dict[Any, _Label], pos: _Pos,
) -> None:
    """Each passage a green box (rank, title, score, its opening words), dotted to the relations behind it."""
    for rank, _ in passages:
        here, label = pos[("p", rank)], labels[("p", rank)]
        for relation in links[rank]:
            there = pos[("r", relation.id)]
            ax.plot([here[0], there[0]], [here[1], there[1]], color=_PASSAGE_EDGE, lw=1.8, ls=(0, (1, 2)), zorder=4)
        ax.text(*here, label.text, fontsize=label.size, ha="center", va="center", zorder=12, parse_math=False,
                bbox=dict(boxstyle=f"round,pad={label.pad}", fc=_PASSAGE, ec=_PASSAGE_EDGE, lw=1.6))


def _decision(decision: str) -> str:
    """The summary's words for what the LLM's pick did (`Retrieval.llm_decision`)."""
    if decision.startswith("ignored"):
        return " · the LLM's pick was ignored"
    return " · the LLM's pick led the ranking" if decision.startswith("led") else " · the LLM's pick only voted"


def legend_labels(explanation: Explained) -> Dict[str, str]:
    """The legend's words for each kind of relation (and "link", the dotted passage lines): the same words
    as the text's "Chosen by ..." heading and "via" lines."""
    return {
        CHOSEN: f"chosen by {explanation.chosen_by}",
        VIA: "via (behind a returned passage), not chosen",
        SEED: "seed relation (nearest the question)",
        CANDIDATE: "candidate relation (subject → object)",
        "link": "via: a relation behind the passage",
    }


def _legend(figure: "Figure", explanation: Explained, d: Drawn) -> None:
    """What the colours and line styles mean, under the drawing."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    words = legend_labels(explanation)
    entity = "entity (synonyms as one)" if len(d.node_of) > len(d.entities) else "entity"
    handles = [
        Line2D([], [], marker="o", ls="", ms=13, mfc=_SEED, mec=_ENTITY_EDGE, label="seed entity (nearest a mention)"),
        Line2D([], [], marker="o", ls="", ms=10, mfc=_ENTITY, mec=_ENTITY_EDGE, label=entity),
    ]
    for kind in (CHOSEN, VIA, SEED, CANDIDATE):
        colour, lw, style, _, _ = _STYLE[kind]
        handles.append(Line2D([], [], color=colour, lw=lw, ls=style, label=words[kind]))
    handles += [
        Patch(fc=_PASSAGE, ec=_PASSAGE_EDGE, lw=1.6, label="passage returned"),
        Line2D([], [], color=_PASSAGE_EDGE, lw=1.8, ls=(0, (1, 2)), label=words["link"]),
    ]
    figure.legend(handles=handles, loc="lower center", ncol=4, fontsize=10, frameon=False)


class _Through:
    """A matplotlib connection style: the quadratic curve from A to B through a point given in data
    coordinates (the relation's place in the layout); arrow shrinking and clipping as usual."""

    def __init__(self, ax: Any, through: Sequence[float]) -> None:
        from matplotlib.patches import ConnectionStyle

        self._base = ConnectionStyle._Base()
        self._base.connect = self.connect
        self.ax, self.through = ax, through

    def connect(self, posA: Sequence[float], posB: Sequence[float]) -> Any:
        from matplotlib.path import Path as MplPath

        mx, my = self.ax.transData.transform(self.through)
        control = (2 * mx - (posA[0] + posB[0]) / 2, 2 * my - (posA[1] + posB[1]) / 2)
        return MplPath([posA, control, posB], [MplPath.MOVETO, MplPath.CURVE3, MplPath.CURVE3])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._base(*args, **kwargs)


# layout ------------------------------------------------------------------------------------------
def _shapes(nx: Any, graph: Any) -> List[_Pos]:
    """Kamada-Kawai per connected component (edge `length` as the distance), each scaled to a mean edge
    length of 1, largest first. Deterministic: each component is rebuilt in the graph's own node and edge
    order (a networkx subgraph view iterates a set, whose order follows the hash seed)."""
    shapes = []
    for component in sorted(nx.connected_components(graph), key=lambda c: (-len(c), sorted(map(str, c)))):
        sub = nx.Graph()
        sub.add_nodes_from(n for n in graph if n in component)
        sub.add_edges_from((a, b, data) for a, b, data in graph.edges(data=True) if a in component)
        if len(sub) == 1:
            shapes.append({next(iter(sub)): (0.0, 0.0)})
            continue
        local = nx.kamada_kawai_layout(sub, weight="length")
        lengths = [
            ((local[a][0] - local[b][0]) ** 2 + (local[a][1] - local[b][1]) ** 2) ** 0.5 / data.get("length", 1.0)
            for a, b, data in sub.edges(data=True)
        ]
        scale = 1.0 / (sum(lengths) / len(lengths) or 1.0)
        shapes.append({n: (float(p[0]) * scale, float(p[1]) * scale) for n, p in local.items()})
    return shapes


def _separate(placed: _Pos, extents: Dict[Any, _Extent], rounds: int = 150) -> _Pos:
    """`placed` (points) with the boxes of the nodes' drawings pushed apart until none overlap (or
    `rounds` are done): each overlapping pair moves apart, half each, along the axis it overlaps less."""
    import numpy as np

    nodes = list(placed)
    xy = np.array([placed[n] for n in nodes], dtype=float).reshape(-1, 2)
    ext = np.array([extents[n] for n in nodes], dtype=float).reshape(-1, 4) + _GAP / 4
    order = np.arange(len(nodes))
    for _ in range(rounds):
        lo = np.stack([xy[:, 0] - ext[:, 0], xy[:, 1] - ext[:, 2]], axis=1)
        hi = np.stack([xy[:, 0] + ext[:, 1], xy[:, 1] + ext[:, 3]], axis=1)
        overlap = np.minimum(hi[:, None], hi[None]) - np.maximum(lo[:, None], lo[None])  # n×n×2
        hit = (overlap > 0).all(axis=2) & (order[:, None] != order[None])
        if not hit.any():
            break
        centre = (lo + hi) / 2
        apart = centre[:, None] - centre[None]  # from j to i
        sign = np.where(apart == 0, np.where(order[:, None] > order[None], 1.0, -1.0)[..., None], np.sign(apart))
        axis = (overlap[..., 0] > overlap[..., 1]).astype(int)  # push along y where x overlaps more
        push = np.zeros_like(overlap)
        rows, cols = np.nonzero(hit)
        push[rows, cols, axis[rows, cols]] = overlap[rows, cols, axis[rows, cols]] / 2 + 0.5
        xy += (push * sign).sum(axis=1) * 0.5
    return {n: (float(x), float(y)) for n, (x, y) in zip(nodes, xy)}


def _pack(
    shapes: List[_Pos], extents: Dict[Any, _Extent], unit: float, stretch: float, width: float
) -> Tuple[_Pos, float, float]:
    """The components at `unit` points per edge, in rows at most `width` wide (each component's box holds
    its labels), from the top left; and the width and height used."""
    pos: _Pos = {}
    x = y = row_height = used = 0.0
    for shape in shapes:
        placed = _separate({n: (p[0] * unit * stretch, p[1] * unit) for n, p in shape.items()}, extents)
        left = min(p[0] - extents[n][0] for n, p in placed.items())
        right = max(p[0] + extents[n][1] for n, p in placed.items())
        bottom = min(p[1] - extents[n][2] for n, p in placed.items())
        top = max(p[1] + extents[n][3] for n, p in placed.items())
        w, h = right - left, top - bottom
        if x > 0 and x + w > width:
            x, y, row_height = 0.0, y - row_height - _GAP, 0.0
        for n, (px, py) in placed.items():
            pos[n] = (px - left + x, py - top + y)
        used, row_height = max(used, x + w), max(row_height, h)
        x += w + _GAP
    return pos, used, row_height - y


def _layout(nx: Any, graph: Any, extents: Dict[Any, _Extent], width: float, height: float) -> _Pos:
    """Places in points of a `width` × `height` axes (y from 0 down): the components laid out (`_shapes`)
    and packed with their labels' extents (`_pack`), at the longest edge unit that fits, centred."""
    if len(graph) == 0:
        return {}
    shapes = _shapes(nx, graph)
    xs, ys = zip(*shapes[0].values())  # widen the largest component towards the axes' shape, up to 1.6×
    stretch = min(1.6, max(1.0, (width / height) / (((max(xs) - min(xs)) / (max(ys) - min(ys) or 1)) or 1)))

    def fits(unit: float) -> bool:
        _, w, h = _pack(shapes, extents, unit, stretch, width)
        return w <= width and h <= height

    lo, hi = 1.0, _MAX_UNIT
    if fits(hi):
        lo = hi
    else:
        for _ in range(24):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    pos, w, h = _pack(shapes, extents, lo, stretch, width)
    dx, dy = (width - w) / 2, -(height - h) / 2
    return {n: (p[0] + dx, p[1] + dy) for n, p in pos.items()}
