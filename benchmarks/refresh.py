"""What `GraphRAGIndex.refresh_ref_docs` costs when documents change, on MuSiQue's 1,890 passages in
Milvus Lite with the hash embedding (dim 64), each way on its own store built the same way:

- `metadata`: each passage a `Document` (its title and triplets in metadata); one document in `--every`
  gets a new metadata value; then `refresh_ref_docs(documents)` (changed passages written over in place)
  against `delete_ref_doc` + `insert` of each changed document. Texts embedded, rows, seconds, and the
  seconds of a refresh that finds nothing changed; both ways must give the same rows and metadata.
- `llm`: the passages five to a document (a passage a paragraph), ingested with a scripted LLM that
  extracts one triplet a passage and counts its calls; one paragraph of one document in `--every` is
  edited; the LLM calls of `refresh_ref_docs` with stored extractions reused (as shipped) and with the
  reuse turned off (every chunk of a changed document asked again).

    GRAPHRAG_DATA=$DATA python -m benchmarks.refresh [--every 10]   # -> benchmarks/results/refresh.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence
from unittest import mock

from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import BaseNode, Document, NodeRelationship, TextNode, TransformComponent

from benchmarks.devsets import RESULTS, data_dirs, write_result
from llama_index_graphrag_milvus import GraphRAGIndex, GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.bench.evaluation import load_dataset
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.ingest.extract.llm import LLMTripletExtractor


class Counting(HashEmbedding):
    """The hash embedding, counting the texts it embeds."""

    embedded: int = 0

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        self.embedded += len(texts)
        return super()._get_text_embeddings(texts)

    def _get_text_embedding(self, text: str) -> List[float]:
        self.embedded += 1
        return super()._get_text_embedding(text)


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


def documents(data: Path) -> List[Document]:
    """The passages as documents, each with its title and triplets in metadata."""
    return [Document(id_=n.node_id, text=n.text, metadata=dict(n.metadata)) for n in load_dataset(data).nodes]


def metadata_change(data: Path, way: str, every: int, db: Path) -> Dict[str, Any]:
    embed = Counting(dim=64)
    store = MilvusGraphStore(uri=str(db), embed_model=embed)
    try:
        docs = documents(data)
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
        pids = [p for doc in changed for p in store.passage_ids(doc.doc_id)]
        editions = {n.metadata.get("edition") for n in store.get_passages(pids).values()}
        return {"way": way, "documents": len(docs), "changed": len(changed), "embedded_at_build": built,
                "embedded": embed.embedded, "seconds": round(seconds, 2), "unchanged_refresh_seconds": round(unchanged, 2),
                "rows_before": counts, "rows_after": store.count(), "editions": sorted(map(str, editions))}
    finally:
        store.close()


def chunk_edit(data: Path, reuse: bool, every: int, db: Path) -> Dict[str, Any]:
    llm = CountingLLM()
    store = MilvusGraphStore(uri=str(db), embed_model=HashEmbedding(dim=64))
    off = mock.patch.object(LLMTripletExtractor, "_reuse", lambda self, nodes, digests, stored: nodes)
    try:
        with contextlib.nullcontext() if reuse else off:
            texts = [n.text for n in load_dataset(data, triples=False).nodes]
            docs = [Document(id_=f"d{i}", text="\n\n".join(texts[i:i + 5])) for i in range(0, len(texts), 5)]
            extractor = LLMTripletExtractor(llm=llm, num_workers=4)
            steps = [Paragraphs(), GraphRAGTransform(store=store, extractor=extractor, text_links=False)]
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


def main(argv: List[str] | None = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="the MuSiQue directory (default: $GRAPHRAG_DATA/musique)")
    parser.add_argument("--every", type=int, default=10, help="one document in EVERY changes")
    parser.add_argument("--out", default=str(RESULTS / "refresh.json"))
    args = parser.parse_args(argv)
    data = data_dirs([args.data] if args.data else None, names=("musique",))[0]
    with tempfile.TemporaryDirectory(prefix="graphrag-refresh-") as tmp:
        runs = [metadata_change(data, way, args.every, Path(tmp) / f"{i}.db") for i, way in enumerate(("refresh", "delete+insert"))]
        assert runs[0]["rows_after"] == runs[1]["rows_after"] and runs[0]["editions"] == runs[1]["editions"] == ["2nd"]
        llm = {"every": args.every, **{name: chunk_edit(data, reuse, args.every, Path(tmp) / f"llm{reuse}.db")
                                       for name, reuse in (("reuse", True), ("no reuse", False))}}
        assert llm["reuse"]["rows"] == llm["no reuse"]["rows"]
    report = {"metadata": runs, "llm": llm}
    write_result(args.out, report)
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
