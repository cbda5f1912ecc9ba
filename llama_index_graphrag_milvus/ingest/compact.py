"""`MilvusGraphStore.compact`: delete the facts no stored passage states any more.

A delete removes a document's passages and statements and leaves the relations, entities and links only
they stated: not live, so no read returns them. `compact` reads every fact's id (as a cache build does),
finds those and the statements no stored passage makes (left by an interrupted write), and
deletes them by primary key, between a `begin` and an `end` log row like any write.
"""

from __future__ import annotations

from typing import Dict, Set

from llama_index_graphrag_milvus.milvus.collections import ENTITIES, LINKS, PASSAGES, RELATIONS, STATEMENTS, Collections


def compact(collections: Collections) -> Dict[str, int]:
    """Delete the relations no stored passage states, the entities no live relation names, the links of
    those, and the statements no stored passage makes; the rows deleted, by collection."""
    passages: Dict[str, Set[int]] = {}  # passage -> the relations it states
    for page in collections.pages(PASSAGES, ["id", "relation_ids"]):
        passages.update((row["id"], set(row.get("relation_ids") or [])) for row in page)
    stated = set().union(*passages.values())
    dead: Dict[str, list] = {kind: [] for kind in (RELATIONS, ENTITIES, LINKS, STATEMENTS)}
    named: Set[int] = set()
    for page in collections.pages(RELATIONS, ["id", "subject_id", "object_id"]):
        for row in page:
            if row["id"] in stated:
                named.update((row["subject_id"], row["object_id"]))
            else:
                dead[RELATIONS].append(row["id"])
    dead[ENTITIES] = [row["id"] for page in collections.pages(ENTITIES, ["id"]) for row in page if row["id"] not in named]
    dead[LINKS] = [row["id"] for page in collections.pages(LINKS, ["a", "b"]) for row in page
                   if row["a"] not in named or row["b"] not in named]
    dead[STATEMENTS] = [row["id"] for page in collections.pages(STATEMENTS, ["passage_id", "relation_id"]) for row in page
                        if row["relation_id"] not in passages.get(row["passage_id"], ())]
    token = collections.begin()
    for kind, ids in dead.items():
        collections.delete(kind, ids)
    collections.prune(collections.end(token))
    return {kind: len(ids) for kind, ids in dead.items()}
