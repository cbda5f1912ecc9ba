"""What `GraphRAGIndex.refresh_ref_docs` costs when documents' metadata changes (session 37).

MuSiQue with its triples: each corpus row is a `Document` (its title and triplets in metadata), ingested
into a fresh Milvus Lite store with the hash embedding (dim 64), which counts the texts it embeds. Then
one document in `--every` gets a new metadata value, and the changed documents are re-ingested two ways,
each on its own store built the same way:

- `refresh`: `index.refresh_ref_docs(documents)`: each changed passage is written over in place.
- `delete+insert`: `index.delete_ref_doc(id)` then `index.insert(document)` for each changed document,
  what `refresh_ref_docs` did before session 37.

It reports the texts embedded, the rows of each collection afterwards, and the seconds, then the seconds of
a `refresh_ref_docs(documents)` that finds nothing changed; and checks that both ways give the same rows
and the same passages' metadata.

    python -m benchmarks.refresh [--every 10] [--db /tmp/refresh]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List

from llama_index.core.schema import Document

from llama_index_graphrag_milvus import GraphRAGIndex, MilvusGraphStore
from llama_index_graphrag_milvus.bench.evaluation import load_dataset
from llama_index_graphrag_milvus.embeddings import HashEmbedding

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "musique"
RESULTS = Path(__file__).parent / "results"


class Counting(HashEmbedding):
    """The hash embedding, counting the texts it embeds."""

    embedded: int = 0

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        self.embedded += len(texts)
        return super()._get_text_embeddings(texts)

    def _get_text_embedding(self, text: str) -> List[float]:
        self.embedded += 1
        return super()._get_text_embedding(text)


def documents() -> List[Document]:
    """MuSiQue's passages as documents, each with its title and triplets in metadata."""
    return [Document(id_=n.node_id, text=n.text, metadata=dict(n.metadata)) for n in load_dataset(DATA).nodes]


def run(way: str, every: int, db: Path) -> Dict[str, Any]:
    shutil.rmtree(db, ignore_errors=True)
    embed = Counting(dim=64)
    store = MilvusGraphStore(uri=str(db), embed_model=embed)
    try:
        docs = documents()
        index = GraphRAGIndex.from_documents(docs, store=store)
        built, counts = embed.embedded, store.count()
        changed = docs[::every]
        for doc in changed:
            doc.metadata["edition"] = "2nd"
        embed.embedded, start = 0, time.perf_counter()
        if way == "refresh":
            flags = index.refresh_ref_docs(docs)
            assert sum(flags) == len(changed), sum(flags)
        else:
            for doc in changed:
                index.delete_ref_doc(doc.doc_id)
                index.insert(doc)
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        assert not any(index.refresh_ref_docs(docs))  # nothing changed since
        unchanged = time.perf_counter() - start
        after = store.count()
        pids = [p for doc in changed for p in store.passage_ids(doc.doc_id)]
        editions = {n.metadata.get("edition") for n in store.get_passages(pids).values()}
        return {"way": way, "documents": len(docs), "changed": len(changed), "embedded_at_build": built,
                "embedded": embed.embedded, "seconds": round(seconds, 2), "unchanged_refresh_seconds": round(unchanged, 2), "rows_before": counts,
                "rows_after": after, "editions": sorted(map(str, editions))}
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--db", default="/tmp/refresh")
    args = parser.parse_args()
    db = Path(args.db)
    db.mkdir(parents=True, exist_ok=True)
    runs = [run(way, args.every, db / f"{way}.db") for way in ("refresh", "delete+insert")]
    for r in runs:
        print(json.dumps(r))
    assert runs[0]["rows_after"] == runs[1]["rows_after"] and runs[0]["editions"] == runs[1]["editions"] == ["2nd"]
    (RESULTS / "refresh.json").write_text(json.dumps(runs, indent=1) + "\n")


if __name__ == "__main__":
    main()
