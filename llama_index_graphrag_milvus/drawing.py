"""Drawing an `Explanation`: entities, the relations drawn and the passages returned, as a matplotlib
figure (the `viz` extra: networkx and matplotlib)."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any, Dict, List, Sequence, Set, Tuple

from llama_index.core.schema import NodeWithScore

from llama_index_graphrag_milvus.schema import ScoredRelation, normalize_name

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from llama_index_graphrag_milvus.explain import Explanation

#: Relations drawn at most (the chosen ones, those behind the passages and the seeds always are).
MAX_DRAWN_RELATIONS = 30

_VIZ_HINT = "pip install 'llama-index-graphrag-milvus[viz]'"

# colours: seeds orange, chosen relations red, passages green, the rest grey-blue
_ENTITY, _ENTITY_EDGE = "#dbe4ee", "#6b7b8f"
_SEED = "#f39c12"
_CANDIDATE = "#a3acb9"
_SEED_RELATION = "#e67e22"
_CHOSEN = "#d62728"
_PASSAGE, _PASSAGE_EDGE = "#d8f0d2", "#2e8b3e"

_Links = Dict[int, List[ScoredRelation]]  # passage rank -> the drawn relations that chose it
_Pos = Dict[Any, Tuple[float, float]]  # layout node -> its place


def draw(explanation: "Explanation", max_relations: int = MAX_DRAWN_RELATIONS) -> "Figure":
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


def drawn_relations(explanation: Explanation, max_relations: int = MAX_DRAWN_RELATIONS) -> List[ScoredRelation]:
    """The relations a drawing shows: chosen, behind a passage, seeds, then the best candidates, up to
    `max_relations` (the first three kinds always), without repeats."""
    picked: Dict[int, ScoredRelation] = {}
    always = [*explanation.chosen]
    for hit in explanation.passages:
        always += explanation.relations_of(hit)
    always += explanation.seed_relations
    for relation in always:
        picked.setdefault(relation.id, relation)
    for relation in explanation.candidates:
        if len(picked) >= max_relations:
            break
        picked.setdefault(relation.id, relation)
    return list(picked.values())


def _draw(explanation: Explanation, nx: Any, Figure: Any, max_relations: int) -> "Figure":
    """The drawing `Explanation.figure` returns: relations under entities under passages, then the legend."""
    relations = drawn_relations(explanation, max_relations)
    names, seed_keys = _entities(explanation, relations)
    passages = list(enumerate(explanation.passages, start=1))
    drawn = {r.id for r in relations}
    links = {rank: [r for r in explanation.relations_of(hit) if r.id in drawn] for rank, hit in passages}
    pos = _layout(nx, _layout_graph(nx, names, relations, links))

    figure, ax = _canvas(explanation, Figure, len(names) + len(passages), len(relations))
    if not pos:
        ax.text(0.5, 0.5, "Nothing was found for this question.", ha="center", va="center", fontsize=13)
        return figure
    xs, ys = zip(*pos.values())
    pad_x, pad_y = 0.08 * (max(xs) - min(xs) or 1), 0.08 * (max(ys) - min(ys) or 1)
    ax.set_xlim(min(xs) - pad_x, max(xs) + pad_x)
    ax.set_ylim(min(ys) - pad_y, max(ys) + pad_y)
    _draw_relations(ax, explanation, relations, pos)
    _draw_entities(ax, names, seed_keys, pos)
    _draw_passages(ax, passages, links, pos)
    _legend(figure)
    return figure


def _entities(explanation: Explanation, relations: List[ScoredRelation]) -> Tuple[Dict[str, str], Set[str]]:
    """The entities drawn, keyed by normalized name (as the store identifies them) and shown as first
    written: the ten best seeds and the ends of the relations; and the keys of all the seeds."""
    names: Dict[str, str] = {}
    seeds = sorted(explanation.seed_entities, key=lambda e: -e[2])
    seed_keys = {normalize_name(name) for _, name, _ in seeds if name}
    for _, name, _ in seeds[:10]:
        if name:
            names.setdefault(normalize_name(name), name)
    for relation in relations:
        names.setdefault(normalize_name(relation.subject), relation.subject)
        names.setdefault(normalize_name(relation.object), relation.object)
    return names, seed_keys


def _layout_graph(nx: Any, names: Dict[str, str], relations: List[ScoredRelation], links: _Links) -> Any:
    """The graph laid out: entities, relations (the middle of their edge) and passages are all nodes, so
    that parallel relations, their labels and the passages spread apart."""
    graph = nx.Graph()
    graph.add_nodes_from(("e", key) for key in names)
    for relation in relations:
        graph.add_edge(("r", relation.id), ("e", normalize_name(relation.subject)))
        graph.add_edge(("r", relation.id), ("e", normalize_name(relation.object)))
    for rank in links:
        graph.add_node(("p", rank))
        for relation in links[rank]:
            graph.add_edge(("p", rank), ("r", relation.id), length=2.0)
    for a in links:  # passages chosen by the same relation would land on one another
        for b in links:
            if a < b and {r.id for r in links[a]} & {r.id for r in links[b]}:
                graph.add_edge(("p", a), ("p", b), length=2.5)
    return graph


def _canvas(explanation: Explanation, Figure: Any, nodes: int, drawn: int) -> Tuple["Figure", Any]:
    """The figure, sized to the `nodes` drawn, with the question and a summary line as its title."""
    width = min(22.0, 11.0 + 0.2 * nodes)
    figure = Figure(figsize=(width, width * 0.75))
    figure.subplots_adjust(left=0.01, right=0.99, top=0.9, bottom=0.09)
    ax = figure.add_subplot()
    ax.set_axis_off()
    figure.text(0.012, 0.975, textwrap.shorten(explanation.query, 120, placeholder=" ..."),
                fontsize=15, fontweight="bold", va="top")
    how = "LLM rerank" if explanation.by_llm else f"graph rerank ({explanation.reranker or 'none'})"
    summary = (f"{how} · {len(explanation.chosen)} relations chosen · {len(explanation.passages)} passages returned · "
               f"{drawn} of {len(explanation.candidates)} candidate relations drawn (the best by score)")
    figure.text(0.012, 0.94, summary, fontsize=10.5, color="#444444", va="top")
    return figure, ax


def _draw_relations(ax: Any, explanation: Explanation, relations: List[ScoredRelation], pos: _Pos) -> None:
    """Each relation subject → object through its layout point, labelled with its predicate; grey
    candidates under dashed orange seeds under red chosen ones (by the rerank, or behind a passage)."""
    from matplotlib.patches import FancyArrowPatch

    chosen = {r.id for r in explanation.chosen}
    chosen |= {r.id for hit in explanation.passages for r in explanation.relations_of(hit)}
    seeds = {r.id for r in explanation.seed_relations}
    level = {r.id: 2 if r.id in chosen else 1 if r.id in seeds else 0 for r in relations}
    for relation in sorted(relations, key=lambda r: level[r.id]):
        s, o = ("e", normalize_name(relation.subject)), ("e", normalize_name(relation.object))
        middle = pos[("r", relation.id)]
        lv = level[relation.id]
        colour = (_CANDIDATE, _SEED_RELATION, _CHOSEN)[lv]
        if s != o:
            ax.add_patch(FancyArrowPatch(
                pos[s], pos[o], arrowstyle="-|>", connectionstyle=_Through(ax, middle),
                mutation_scale=(13, 16, 20)[lv], lw=(1.1, 2.0, 3.2)[lv], color=colour,
                linestyle=("-", (0, (5, 3)), "-")[lv], shrinkA=12, shrinkB=14, zorder=1 + lv, alpha=0.9,
            ))
        else:  # a relation of an entity with itself: a plain line to its label
            ax.plot(*zip(pos[s], middle), color=colour, lw=(1.1, 2.0, 3.2)[lv], zorder=1 + lv)
        ax.text(*middle, _short(relation.predicate, 18, 2), fontsize=(8, 9, 10)[lv], color=colour if lv else "#4f5864",
                fontweight="bold" if lv == 2 else "normal", ha="center", va="center", zorder=6 + lv,
                bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85))


def _draw_entities(ax: Any, names: Dict[str, str], seed_keys: Set[str], pos: _Pos) -> None:
    """Each entity a dot with its name below; the seeds larger, orange and in bold."""
    for key, name in names.items():
        seed = key in seed_keys
        ax.scatter(*pos[("e", key)], s=560 if seed else 320, c=_SEED if seed else _ENTITY, edgecolors=_ENTITY_EDGE,
                   linewidths=1.2, zorder=10)
        ax.annotate(_short(name), pos[("e", key)], xytext=(0, -15), textcoords="offset points", ha="center", va="top",
                    fontsize=10.5 if seed else 9.5, fontweight="bold" if seed else "normal", zorder=11,
                    bbox=dict(boxstyle="round,pad=0.12", fc="white", ec="none", alpha=0.7))


def _draw_passages(ax: Any, passages: List[Tuple[int, NodeWithScore]], links: _Links, pos: _Pos) -> None:
    """Each passage a green box (rank, title, score, its opening words), dotted to the relations that chose it."""
    for rank, hit in passages:
        here = pos[("p", rank)]
        for relation in links[rank]:
            there = pos[("r", relation.id)]
            ax.plot([here[0], there[0]], [here[1], there[1]], color=_PASSAGE_EDGE, lw=1.8, ls=(0, (1, 2)), zorder=4)
        score = "" if hit.score is None else f"  {hit.score:.2f}"
        label = f"#{rank} {_short(_title(hit), 26, 1)}{score}\n{_short(hit.node.get_content(), 30, 2)}"
        ax.text(*here, label, fontsize=9, ha="center", va="center", zorder=12,
                bbox=dict(boxstyle="round,pad=0.45", fc=_PASSAGE, ec=_PASSAGE_EDGE, lw=1.6))


def _legend(figure: "Figure") -> None:
    """What the colours and line styles mean, under the drawing."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Line2D([], [], marker="o", ls="", ms=13, mfc=_SEED, mec=_ENTITY_EDGE, label="seed entity (nearest a mention)"),
        Line2D([], [], marker="o", ls="", ms=10, mfc=_ENTITY, mec=_ENTITY_EDGE, label="entity"),
        Line2D([], [], color=_CHOSEN, lw=3.2, label="chosen relation (led to a passage)"),
        Line2D([], [], color=_SEED_RELATION, lw=2, ls=(0, (5, 3)), label="seed relation (nearest the question)"),
        Line2D([], [], color=_CANDIDATE, lw=1.1, label="candidate relation (subject → object)"),
        Patch(fc=_PASSAGE, ec=_PASSAGE_EDGE, lw=1.6, label="passage returned"),
        Line2D([], [], color=_PASSAGE_EDGE, lw=1.8, ls=(0, (1, 2)), label="relation that chose the passage"),
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


def _layout(nx: Any, graph: Any) -> _Pos:
    """Kamada-Kawai per connected component (edge `length` as the distance), each component scaled to a
    mean edge length of 1, the components packed in rows from the largest."""
    if len(graph) == 0:
        return {}
    boxes = []
    for component in sorted(nx.connected_components(graph), key=lambda c: (-len(c), sorted(map(str, c)))):
        sub = graph.subgraph(component)
        if len(sub) == 1:
            placed = {next(iter(component)): (0.0, 0.0)}
        else:
            local = nx.kamada_kawai_layout(sub, weight="length")
            lengths = [
                ((local[a][0] - local[b][0]) ** 2 + (local[a][1] - local[b][1]) ** 2) ** 0.5 / d.get("length", 1.0)
                for a, b, d in sub.edges(data=True)
            ]
            scale = 1.0 / (sum(lengths) / len(lengths) or 1.0)
            lx = min(p[0] for p in local.values())
            ly = min(p[1] for p in local.values())
            placed = {n: ((p[0] - lx) * scale, (p[1] - ly) * scale) for n, p in local.items()}
        w = max(p[0] for p in placed.values())
        h = max(p[1] for p in placed.values())
        boxes.append((placed, w, h))
    # shelf packing: rows as wide as the largest component, or as the square root of the total area
    gap = 1.2
    row_width = max(max(w for _, w, _ in boxes), sum((w + gap) * (h + gap) for _, w, h in boxes) ** 0.5 * 1.3)
    pos: _Pos = {}
    x = y = row_height = 0.0
    for placed, w, h in boxes:
        if x > 0 and x + w > row_width:
            x, y, row_height = 0.0, y - row_height - gap, 0.0
        for node, (px, py) in placed.items():
            pos[node] = (px + x, y - h + py)
        x += w + gap
        row_height = max(row_height, h)
    return pos
