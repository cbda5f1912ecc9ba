"""What the LLM is offered to pick from: the candidate relations of the best passages of a ranking, each
passage's own statements before the links that only tie its topic to a name it mentions."""

from __future__ import annotations

from typing import Dict, List, Sequence

from llama_index_graphrag_milvus.ranking.base import MAX_NAME, Ranking, RankTask, Scored
from llama_index_graphrag_milvus.schema import ScoredRelation, Triplet

#: The predicate of the link the ingest adds from a passage's title to each name its given triplets state.
TITLE_LINK = "mentions"
#: What joins the words before and after a name in the predicate of a title link found in the text.
WINDOW_GAP = " … "


def is_topic_link(triplet: Triplet) -> bool:
    """Whether a relation only ties a passage's topic to a name it mentions, as the ingest's text links do
    (`[title, "mentions", name]`, `[title, "<words before> … <words after>", name]`), rather than state
    something of it."""
    return triplet.predicate == TITLE_LINK or WINDOW_GAP in triplet.predicate


def offered_relations(
    task: RankTask, ranking: Ranking, max_passages: int, max_lines: int, max_chars: int
) -> List[ScoredRelation]:
    """The candidates offered to the LLM: breadth first over the top `max_passages` passages of `ranking`
    (each passage's first relation in the ranking's order, then each one's second, ...), a passage's
    relations in the order statements first, then topic links, each kind by similarity to the question;
    at most `max_lines` relations and `max_chars` characters of them (about 8 more a line for its id).

    Offering the relations of the best few passages, all of each rather than one each of many, puts the
    relations a chain follows in front of the LLM: measured in `docs/studies/candidates.md`."""
    own = task.passage_relations
    rows = [own[pid] for pid, _ in ranking.passages[:max_passages] if pid in own]
    texts = task.store.describe(list(dict.fromkeys(r for row in rows for r, _ in row)))
    rows = [sorted((s for s in row if s[0] in texts), key=lambda s: is_topic_link(texts[s[0]])) for row in rows]
    offered: List[ScoredRelation] = []
    chars = 0
    for relation_id, score in _breadth_first(rows):
        t = texts[relation_id]
        relation = ScoredRelation(relation_id, t.subject[:MAX_NAME], t.predicate[:MAX_NAME], t.object[:MAX_NAME], score)
        chars += len(relation.text) + 8
        if offered and (chars > max_chars or len(offered) >= max_lines):
            break
        offered.append(relation)
    return offered


def _breadth_first(rows: Sequence[Sequence[Scored]]) -> List[Scored]:
    """Each row's first item in the rows' order, then each row's second, ...; an item seen before is skipped."""
    found: Dict[int, float] = {}
    for depth in range(max((len(row) for row in rows), default=0)):
        for row in rows:
            if depth < len(row):
                found.setdefault(*row[depth])
    return list(found.items())
