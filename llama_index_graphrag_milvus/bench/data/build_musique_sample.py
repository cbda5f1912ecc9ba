"""Build the demo's MuSiQue sample (`musique_sample/`) from HippoRAG's MuSiQue release.

Maintainers only: the sample ships with the package; this script records how it was made and remakes it.
Run: ``python -m llama_index_graphrag_milvus.bench.data.build_musique_sample --data DATA/musique``.

The selection does not look at how either retriever does on a question:

1. Entities are the normalized subject and object names of each passage's triples. An entity stated in
   more than 2% of the corpus's passages is a hub (as the retriever treats them) and links nothing.
2. A question's neighbourhood: its gold passages and every passage sharing a non-hub entity with one.
3. The `QUESTIONS` questions with the smallest neighbourhoods (file order breaks ties), so that the
   whole neighbourhood of each fits in a small sample and the graph around its gold passages is complete.
4. Per question, the `DISTRACTORS` non-gold passages that plain dense retrieval (the bundled MiniLM,
   cosine) ranks highest on the full corpus: the hard negatives plain RAG meets at full scale.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Set

QUESTIONS = 15
DISTRACTORS = 5
HUB_FRACTION = 0.02
OUT = Path(__file__).with_name("musique_sample")


def _jsonl(path: Path) -> List[Dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _write(path: Path, rows: List[Dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def dense_ranking(corpus: List[Dict[str, Any]], questions: List[Dict[str, Any]], top: int) -> Dict[str, List[str]]:
    """Per question id, the `top` passage ids nearest by MiniLM cosine, embedded as the store embeds them."""
    import numpy as np
    from llama_index.core.schema import MetadataMode, TextNode

    from llama_index_graphrag_milvus.embeddings import local_embed_model

    embed = local_embed_model()
    texts = [TextNode(text=r["text"], metadata={"title": r["title"]}).get_content(MetadataMode.EMBED) for r in corpus]
    passages = np.asarray(embed.get_text_embedding_batch(texts, show_progress=True), dtype=np.float32)
    passages /= np.linalg.norm(passages, axis=1, keepdims=True)
    ranking = {}
    for q in questions:
        vector = np.asarray(embed.get_query_embedding(q["question"]), dtype=np.float32)
        scores = passages @ (vector / np.linalg.norm(vector))
        ranking[q["id"]] = [corpus[i]["id"] for i in np.argsort(-scores, kind="stable")[:top]]
    return ranking


def build(data: Path, out: Path = OUT) -> Dict[str, int]:
    from llama_index_graphrag_milvus.schema import normalize_name

    corpus, questions = _jsonl(data / "corpus.jsonl"), _jsonl(data / "questions.jsonl")
    triples = {row["id"]: row for row in _jsonl(data / "triples.jsonl")}
    entities = {
        pid: {normalize_name(name) for t in row["triples"] for name in (t[0], t[2])} for pid, row in triples.items()
    }
    frequency = Counter(e for names in entities.values() for e in names)
    hub = HUB_FRACTION * len(corpus)
    stating: Dict[str, Set[str]] = {}
    for pid, names in entities.items():
        for name in names:
            stating.setdefault(name, set()).add(pid)

    def neighbourhood(question: Dict[str, Any]) -> Set[str]:
        found = set(question["gold_ids"])
        for gold in question["gold_ids"]:
            for name in entities.get(gold, ()):
                if frequency[name] <= hub:
                    found |= stating[name]
        return found

    chosen = sorted(questions, key=lambda q: len(neighbourhood(q)))[:QUESTIONS]
    chosen = [q for q in questions if q in chosen]  # file order
    ranking = dense_ranking(corpus, chosen, DISTRACTORS + 4)
    keep: Set[str] = set()
    for q in chosen:
        keep |= neighbourhood(q)
        keep.update([pid for pid in ranking[q["id"]] if pid not in q["gold_ids"]][:DISTRACTORS])
    passages = [row for row in corpus if row["id"] in keep]
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "corpus.jsonl", passages)
    _write(out / "triples.jsonl", [triples[row["id"]] for row in passages])
    _write(out / "questions.jsonl", chosen)
    if (data / "LICENSE.hipporag").exists():
        shutil.copyfile(data / "LICENSE.hipporag", out / "LICENSE.hipporag")
    return {"questions": len(chosen), "passages": len(passages), "triples": sum(len(triples[r["id"]]["triples"]) for r in passages)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a MuSiQue directory in the layout of HippoRAG's release")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    print(json.dumps(build(args.data, args.out)))


if __name__ == "__main__":
    main()
