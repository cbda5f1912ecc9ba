"""The demo: real multi-hop questions (a MuSiQue sample), plain vector RAG beside Graph RAG, on Milvus Lite.

Runs offline with the bundled MiniLM embedder and no LLM. With OPENAI_API_KEY set, OpenAI does NER,
rerank and the answer. Run: ``python -m llama_index_graphrag_milvus.bench.demo [--uri PATH]``.

The sample ships with the package (`llama_index_graphrag_milvus/bench/data/musique_sample`: 15 questions of
MuSiQue, CC BY 4.0, with their passages, distractors and the triples HippoRAG extracted, MIT; see the
README there). The demo ingests it, shows one question where Graph RAG returns a gold passage that
plain RAG misses, the chain of relations that led there, and then recall@k of both on every question.
The Euler/Bernoulli toy corpus (`llama_index_graphrag_milvus.examples`) is the notebook's walkthrough.
"""

from __future__ import annotations

import argparse
import json
import os
import textwrap
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode

from llama_index_graphrag_milvus import GraphRAGRetriever, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.schema import Retrieval, ScoredRelation, normalize_name

#: The package data directory of the sample (same layout as HippoRAG's MuSiQue release).
SAMPLE = "musique_sample"
#: The question shown side by side, chosen by measuring the offline setup (MiniLM, no LLM, top 5):
#: plain RAG finds neither gold passage in its top 5, Graph RAG both. Another winning question of the
#: sample is shown instead if this one does not win in a given setup (another embedder, an LLM).
SHOWCASE = "2hop__32362_37771"
TOP_K = 5
KS = (2, 5)
PREFIX = "musique"


@dataclass
class Sample:
    nodes: List[TextNode]
    questions: List[Dict[str, Any]]
    titles: Dict[str, str]  # passage (node) id -> title


def _read(name: str) -> List[Dict[str, Any]]:
    text = resources.files("llama_index_graphrag_milvus.bench").joinpath("data", SAMPLE, name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_sample() -> Sample:
    """The bundled MuSiQue sample: passages as `TextNode`s (id = corpus id, title and triplets in
    metadata, as `evaluation.load_dataset` builds them) and the questions with their gold passage ids."""
    triples = {row["id"]: row["triples"] for row in _read("triples.jsonl")}
    nodes = []
    for row in _read("corpus.jsonl"):
        node = TextNode(id_=row["id"], text=row["text"], metadata={"title": row["title"], "triplets": triples[row["id"]]})
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=row["id"])
        nodes.append(node)
    return Sample(nodes, _read("questions.jsonl"), {n.node_id: n.metadata["title"] for n in nodes})


@dataclass
class Outcome:
    """What one question gave: the top passage ids of each retriever, and the Graph RAG trace."""

    question: Dict[str, Any]
    plain: List[NodeWithScore]
    run: Retrieval

    @property
    def gold(self) -> Set[str]:
        return set(self.question["gold_ids"])

    def ids(self, which: str) -> List[str]:
        hits = self.plain if which == "plain" else self.run.nodes
        return [h.node.node_id for h in hits]

    def recall(self, which: str, k: int) -> float:
        return len(self.gold & set(self.ids(which)[:k])) / len(self.gold)

    def won(self) -> List[str]:
        """Gold passages in Graph RAG's top k that plain RAG's top k misses, in Graph RAG's order."""
        plain = set(self.ids("plain"))
        return [pid for pid in self.ids("graph") if pid in self.gold and pid not in plain]


@dataclass
class DemoResult:
    """What `main` measured (for tests and for anyone scripting the demo)."""

    showcase: Optional[Outcome]
    outcomes: List[Outcome] = field(default_factory=list)
    recall: Dict[str, Dict[int, float]] = field(default_factory=dict)
    ingest_s: float = 0.0
    retrieve_s: float = 0.0


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _side_by_side(outcome: Outcome, titles: Dict[str, str], graph_label: str) -> None:
    width = 44
    left_head = "Plain vector RAG (cosine similarity)"
    print(f"\n     {left_head:<{width + 9}}Graph RAG ({graph_label})")
    rows = max(len(outcome.plain), len(outcome.run.nodes))
    for i in range(rows):
        cells = []
        for hits in (outcome.plain, outcome.run.nodes):
            if i < len(hits):
                hit = hits[i]
                mark = "★ " if hit.node.node_id in outcome.gold else "  "
                title = _short(titles.get(hit.node.node_id, hit.node.node_id), width - 2)
                cells.append(f"{mark}{title:<{width - 2}} {hit.score:6.3f}")
            else:
                cells.append(" " * (width + 7))
        print(f"  {i + 1}. " + "  ".join(cells))
    found = {w: len(outcome.gold & set(outcome.ids(w))) for w in ("plain", "graph")}
    n = len(outcome.gold)
    print(f"  ★ gold passage. Plain RAG has {found['plain']} of the {n} gold passages in its top {TOP_K}, "
          f"Graph RAG {found['graph']} of {n}.")
    print("  The two score columns are on different scales: compare the ranks, not the numbers.")


def _chain(run: Retrieval, relations: Sequence[ScoredRelation]) -> List[ScoredRelation]:
    """The relations that selected a passage, ordered as a path: first one that touches an entity the
    question names (or an entity found for it), then each one sharing an entity with the path so far."""
    named = {normalize_name(m) for m in run.mentions} | {normalize_name(e.name) for e in run.seed_entities}
    todo = list({r.id: r for r in relations}.values())
    path: List[ScoredRelation] = []
    reached = set(named)
    while todo:
        nxt = next((r for r in todo if {normalize_name(r.subject), normalize_name(r.object)} & reached), todo[0])
        todo = [r for r in todo if r.id != nxt.id]  # (if nothing connects, the ranker's order)
        path.append(nxt)
        reached |= {normalize_name(nxt.subject), normalize_name(nxt.object)}
    return path


def _show_chain(outcome: Outcome, store: MilvusGraphStore, titles: Dict[str, str]) -> None:
    run = outcome.run
    print("\nHow Graph RAG got there (relations from the passages' triples):")
    mentioned = {normalize_name(m) for m in run.mentions}
    names = list(dict.fromkeys(e.name for e in run.seed_entities if normalize_name(e.name) in mentioned))
    print("  the question names: " + (", ".join(names or run.mentions) or "(no known entity; found by similarity)"))
    stated = {}
    for pid in outcome.won():
        for relation in _chain(run, run.via.get(pid, [])):
            stated.setdefault(relation.id, relation)
    passages = store.get_passages([p for r in stated.values() for p in r.passage_ids])
    by_passage = {key: node.node_id for key, node in passages.items()}
    for target in outcome.won():
        print(f"  → to ★ {titles.get(target, target)!r}:")
        for step, relation in enumerate(_chain(run, run.via.get(target, [])), start=1):
            sources = [titles.get(by_passage.get(p, ""), "?") for p in relation.passage_ids]
            print(f"     {step}. {relation}   (stated in {', '.join(repr(s) for s in sources) or '?'})")
    if run.reranker == "llm" and run.chosen:
        print("  the LLM chose: " + "; ".join(str(r) for r in run.chosen))
        if run.thought_process:
            print("  its reasoning: " + textwrap.shorten(run.thought_process, 300))
    target = outcome.won()[0]
    text = next(h.node.get_content() for h in run.nodes if h.node.node_id == target)
    answer = outcome.question.get("answer", "")
    at = text.find(answer) if answer else -1
    excerpt = text[max(0, at - 120) : at + len(answer) + 60] if at >= 0 else text[:240]
    print(f"  ★ {titles[target]!r} says: …{' '.join(excerpt.split())}…")


def _show_recall(result: DemoResult, sample: Sample, graph_name: str) -> None:
    n = len(result.outcomes)
    print(f"\nRecall on the whole sample ({n} questions, {len(sample.nodes)} passages):")
    print("                 " + "  ".join(f"R@{k:<4}" for k in KS))
    for which, name in (("plain", "plain RAG"), ("graph", graph_name)):
        print(f"  {name:<14} " + "  ".join(f"{result.recall[which][k]:.3f}" for k in KS))
    k = max(KS)
    better = sum(o.recall("graph", k) > o.recall("plain", k) for o in result.outcomes)
    worse = sum(o.recall("graph", k) < o.recall("plain", k) for o in result.outcomes)
    print(f"  at k={k}: Graph RAG finds more gold passages on {better} questions, fewer on {worse}, "
          f"as many on {n - better - worse}.")
    print("  Reading guide: R@k is the share of a question's gold passages found in the top k, averaged over "
          "the questions (1.0 = all found); higher is better.")


def run_demo(
    uri: str, embed_model: BaseEmbedding, llm: Any = None, question_id: str = SHOWCASE, top_k: int = TOP_K,
    prefix: str = PREFIX, token: str = "",
) -> Tuple[DemoResult, Sample, MilvusGraphStore, GraphRAGRetriever]:
    """Ingest the sample afresh at `uri` (collections `prefix`_*, overwritten) and retrieve every question
    with both retrievers; the store is returned open (the caller closes it)."""
    sample = load_sample()
    start = time.perf_counter()
    store = MilvusGraphStore(uri=uri, token=token, embed_model=embed_model, collection_prefix=prefix, overwrite=True)
    try:
        GraphRAGTransform(store=store)(sample.nodes)
        ingest_s = time.perf_counter() - start
        plain = VectorStoreIndex.from_vector_store(store.vector_store, embed_model=embed_model).as_retriever(
            similarity_top_k=top_k
        )
        retriever = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=top_k)
        start = time.perf_counter()
        outcomes = []
        for question in sample.questions:
            bundle = QueryBundle(question["question"], embedding=embed_model.get_query_embedding(question["question"]))
            outcomes.append(Outcome(question, plain.retrieve(bundle), retriever.trace(bundle)))
        retrieve_s = time.perf_counter() - start
    except BaseException:
        store.close()
        raise
    wins = [o for o in outcomes if o.won()]
    showcase = next((o for o in wins if o.question["id"] == question_id), wins[0] if wins else None)
    recall = {w: {k: sum(o.recall(w, k) for o in outcomes) / len(outcomes) for k in KS} for w in ("plain", "graph")}
    return DemoResult(showcase, outcomes, recall, ingest_s, retrieve_s), sample, store, retriever


def main(argv: Optional[List[str]] = None, embed_model: Optional[BaseEmbedding] = None) -> DemoResult:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", default="./graphrag_demo.db", help="Milvus Lite path or server URI")
    parser.add_argument("--token", default="", help="Milvus server or Zilliz Cloud token")
    parser.add_argument("--prefix", default=PREFIX, help="collection prefix, overwritten (default: %(default)s)")
    parser.add_argument("--question", default=SHOWCASE, help="the id of the sample question to show first")
    args = parser.parse_args(argv)

    llm = None
    if os.environ.get("OPENAI_API_KEY"):
        from llama_index.llms.openai import OpenAI

        llm = OpenAI(model="gpt-4o-mini", temperature=0)
    if embed_model is None:
        from llama_index_graphrag_milvus.embeddings import local_embed_model

        embed_model = local_embed_model()

    print("Multi-hop questions from MuSiQue (CC BY 4.0), with the triples HippoRAG extracted from each passage.")
    result, sample, store, retriever = run_demo(
        args.uri, embed_model, llm, args.question, prefix=args.prefix, token=args.token
    )
    with store:
        counts = store.count()
        print(f"Milvus at {args.uri} (prefix {args.prefix!r}): {counts['entities']} entities, {counts['relations']} "
              f"relations, {counts['passages']} passages; ingested and embedded in {result.ingest_s:.1f} s")
        print("Embedder: all-MiniLM-L6-v2, bundled. LLM: "
              + ("OpenAI gpt-4o-mini (NER, rerank, answer)" if llm else "none (offline: graph rerank, no LLM call)"))
        graph_label = (
            "the LLM's chosen relations lift their passages" if llm else "PageRank, chains, hop and topic, fused"
        )
        graph_name = "Graph RAG + LLM" if llm else "Graph RAG"

        shown = result.showcase
        if shown is None:
            print("\nOn this sample and setup, Graph RAG found no gold passage that plain RAG missed.")
        else:
            q = shown.question
            print(f"\nQuestion ({q['id'].split('__')[0]}, {q['id']}): {q['question']}")
            print(f"Answer: {q['answer']}   Gold passages: {', '.join(repr(sample.titles[g]) for g in q['gold_ids'])}")
            _side_by_side(shown, sample.titles, graph_label)
            _show_chain(shown, store, sample.titles)
            if llm is not None:
                from llama_index.core.query_engine import RetrieverQueryEngine

                answer = RetrieverQueryEngine.from_args(retriever, llm=llm).query(q["question"])
                print(f"\nAnswer from Graph RAG's passages: {answer}")

        _show_recall(result, sample, graph_name)
        print(f"\nTimes: ingest {result.ingest_s:.1f} s, {len(result.outcomes)} questions × 2 retrievers "
              f"{result.retrieve_s:.1f} s.")
        print(f"Try another: graphrag-milvus query \"...\" --uri {args.uri} --prefix {args.prefix}  "
              f"(questions in {SAMPLE}/questions.jsonl of the package data)")
    return result


if __name__ == "__main__":
    main()
