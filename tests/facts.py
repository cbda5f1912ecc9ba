"""What tests compare stores by: every fact row (`rows`), what the in-memory caches hold (`content`), and
the answers of the default retriever (`answers`)."""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from llama_index_graphrag_milvus import GraphRAGRetriever
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, LINKS, PASSAGES, RELATIONS, STATEMENTS

#: The collections of facts (the log's rows are tokens of writes, different in every run).
FACTS = (ENTITIES, RELATIONS, PASSAGES, STATEMENTS, LINKS)


def rows(store: Any, kinds=FACTS) -> Dict[str, Dict[Any, Dict[str, Any]]]:
    """Every row of the fact collections, by collection and id (vectors rounded, lists sorted)."""
    out = {}
    for kind in kinds:
        found = {}
        for page in store.collections.pages(kind, ["*"]):
            for row in page:
                row = dict(row)
                row["embedding"] = np.round(np.asarray(row["embedding"], dtype=np.float32), 5).tolist()
                found[row["id"]] = {k: sorted(map(str, v)) if isinstance(v, list) and k != "embedding" else v
                                    for k, v in row.items()}
        out[kind] = found
    return out


def content(store: Any) -> Dict[str, Any]:
    """Everything the in-memory caches hold, by id (positions differ from one build to the next)."""
    columns = store.backend.columns()
    bounds = zip(columns.passage_offsets[:-1].tolist(), columns.passage_offsets[1:].tolist())
    passages = {pid: sorted(columns.passage_relations[a:b].tolist()) for pid, (a, b) in zip(columns.passage_ids, bounds)}
    vectors = {
        name: dict(zip(ids.tolist() if hasattr(ids, "tolist") else ids, np.round(getattr(columns, name), 5).tolist()))
        for name, ids in (
            ("relation_vectors", columns.relation_ids),
            ("passage_vectors", columns.passage_ids),
            ("entity_vectors", columns.entity_ids),
        )
        if getattr(columns, name) is not None
    }
    links = columns.entity_ids[columns.links] if len(columns.links) else np.zeros((0, 2), dtype=np.int64)
    return {
        "relations": sorted(zip(columns.relation_ids.tolist(), map(tuple, columns.relation_ends.tolist()))),
        "passages": passages,
        "entities": sorted(zip(columns.entity_ids.tolist(), columns.entity_names)),
        "links": sorted(zip(map(tuple, np.sort(links, axis=1).tolist()), np.round(columns.link_scores, 5).tolist())),
        "vectors": vectors,
    }


def answers(store: Any, questions: List[str], top_k: int = 5) -> List[List[Any]]:
    """The default retriever's top passages (node id, score) for each question, with no LLM."""
    retriever = GraphRAGRetriever(store=store, similarity_top_k=top_k, llm=None)
    return [[(n.node.node_id, round(n.score, 5)) for n in retriever.retrieve(q)] for q in questions]


def synonyms(store: Any) -> Dict[int, List[int]]:
    """Every live entity's synonyms, as the store derives them."""
    entities = [int(row["id"]) for page in store.collections.pages(ENTITIES, ["id"]) for row in page]
    return {e: sorted(others) for e, others in store.synonyms_of(entities).items()}
