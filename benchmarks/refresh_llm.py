"""LLM extraction calls of `refresh_ref_docs` when one chunk of a document changes (session 38).

MuSiQue's 1,890 passages grouped five to a document (378 documents, a passage a paragraph, split on blank
lines), ingested into Milvus Lite with the hash embedding (dim 64) and a scripted LLM that extracts one
triplet a passage and counts its calls. Then one paragraph of one document in `--every` is edited, and
`refresh_ref_docs` runs twice, each on its own store built the same way:

- `reuse`: the transform as shipped (a stored extraction of the same input is reused);
- `no reuse`: the reuse turned off (`StoredExtractions.reuse` returns every node), as before session 38.

    python -m benchmarks.refresh_llm [--every 10] [--db /tmp/refresh_llm.db]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence
from unittest import mock

from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import BaseNode, Document, NodeRelationship, TextNode, TransformComponent

from llama_index_graphrag_milvus import GraphRAGIndex, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.ingest.extract.llm import StoredExtractions

from llama_index_graphrag_milvus.bench.evaluation import load_dataset

from benchmarks.refresh import DATA, RESULTS


class CountingLLM(CustomLLM):
    """Extracts one triplet from a passage (its first two words, "opens", its last word); counts calls."""

    calls: int = 0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="counting")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.calls += 1
        words = prompt.split("Passage:\n", 1)[-1].split()
        return CompletionResponse(text=json.dumps({"triplets": [[" ".join(words[:2]), "opens", words[-1]]]}))

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        yield self.complete(prompt)


class Paragraphs(TransformComponent):
    """A document's paragraphs (blank-line separated) as nodes of that document."""

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> List[BaseNode]:
        out = []
        for doc in nodes:
            for i, part in enumerate(doc.get_content().split("\n\n")):
                node = TextNode(id_=f"{doc.node_id}:{i}", text=part)
                node.relationships[NodeRelationship.SOURCE] = doc.as_related_node_info()
                out.append(node)
        return out


def documents() -> List[Document]:
    texts = [n.text for n in load_dataset(DATA, triples=False).nodes]
    return [Document(id_=f"d{i}", text="\n\n".join(texts[i:i + 5])) for i in range(0, len(texts), 5)]


def run(reuse: bool, every: int, db: Path) -> Dict[str, Any]:
    shutil.rmtree(db, ignore_errors=True)
    llm = CountingLLM()
    store = MilvusGraphStore(uri=str(db), embed_model=HashEmbedding(dim=64))
    off = mock.patch.object(StoredExtractions, "reuse", lambda self, nodes, triplets, todo: todo)
    try:
        with contextlib.nullcontext() if reuse else off:
            docs = documents()
            steps = [Paragraphs(), GraphRAGTransform(store=store, llm=llm, num_workers=4, text_links=False)]
            index = GraphRAGIndex.from_documents(docs, store=store, llm=llm, transformations=steps)
            built = llm.calls
            changed = docs[::every]
            edited = [Document(id_=d.doc_id, text=d.text.replace("\n\n", " (edited)\n\n", 1)) for d in changed]
            docs = [edited[i // every] if i % every == 0 else d for i, d in enumerate(docs)]
            llm.calls, start = 0, time.perf_counter()
            flags = index.refresh_ref_docs(docs)
            seconds = time.perf_counter() - start
            assert sum(flags) == len(changed), sum(flags)
            return {"documents": len(docs), "chunks": sum(d.text.count("\n\n") + 1 for d in docs), "built_calls": built,
                    "changed_documents": len(changed), "refresh_calls": llm.calls, "refresh_s": round(seconds, 2),
                    "rows": store.count()}
    finally:
        store.close()


def main(every: int, db: Path) -> Dict[str, Any]:
    result = {"every": every, "reuse": run(True, every, db), "no reuse": run(False, every, db)}
    assert result["reuse"]["rows"] == result["no reuse"]["rows"]
    (RESULTS / "refresh_llm.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--db", type=Path, default=Path("/tmp/refresh_llm.db"))
    args = parser.parse_args()
    print(json.dumps(main(args.every, args.db), indent=1))
