"""What an LLM outage costs, through the real OpenAI client with its default retries, pointed at a local
OpenAI-compatible server (on 127.0.0.1, in this process) whose chat endpoint answers 500.

    python -m benchmarks.llm_outage            # -> benchmarks/results/llm_outage.json (no data set, offline)

Retrieval: the wall time of the first retrieval with the endpoint down and of the next five, and the chat
requests each made. Ingest: 6 raw-text documents with the endpoint down (time, requests, relations, pending
passages); then, with it back, one `refresh_ref_docs` (requests: only the pending passages are asked).
The guard's defaults stand (NER deadline 4 s, breaker after 3 failures, 30 s cooldown).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List

from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import Document
from llama_index.llms.openai import OpenAI

from benchmarks.devsets import RESULTS, write_result
from llama_index_graphrag_milvus import GraphRAGIndex, GraphRAGRetriever, GraphRAGTransform, LLMTripletExtractor, MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents
from llama_index_graphrag_milvus.llm.guard import LLMGuard, set_guard
from llama_index_graphrag_milvus.transform import count_pending


class Endpoint:
    """A chat endpoint on 127.0.0.1: a 500 while `up` is False, else an extraction answer."""

    def __init__(self) -> None:
        self.up, self.requests = False, 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests += 1
                text = body["messages"][-1]["content"].split("Passage:\n", 1)[-1].split()
                content = json.dumps({"triplets": [[" ".join(text[:2]), "is described in", "the passage"]]})
                status, payload = (500, {"error": {"message": "down", "type": "server_error"}}) if not endpoint.up else (
                    200, {"id": "s", "object": "chat.completion", "created": 0, "model": body["model"],
                          "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"


def client(endpoint: Endpoint) -> OpenAI:
    """The OpenAI LLM as a user makes it (its default max_retries=3); gpt-3.5-turbo's tokenizer ships offline."""
    return OpenAI(model="gpt-3.5-turbo", api_key="sk-test", api_base=endpoint.url)


def retrieval(directory: Path) -> Dict:
    endpoint = Endpoint()
    store = MilvusGraphStore(uri=str(directory / "retrieval.db"), embed_model=HashEmbedding(dim=64))
    GraphRAGTransform(store=store, llm=None)(bernoulli_documents())
    retriever = GraphRAGRetriever(store=store, llm=client(endpoint), similarity_top_k=2)
    runs: List[Dict] = []
    for _ in range(6):
        before, start = endpoint.requests, time.perf_counter()
        retriever.retrieve(EULER_QUESTION)
        runs.append({"seconds": round(time.perf_counter() - start, 3), "chat_requests": endpoint.requests - before})
    store.close()
    endpoint.server.shutdown()
    return {"first": runs[0], "next": runs[1:]}


def ingest(directory: Path) -> Dict:
    endpoint = Endpoint()
    llm = client(endpoint)
    names = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Emmy Noether", "Niels Bohr", "Marie Curie"]
    cities = ["London", "Manchester", "New York", "Erlangen", "Copenhagen", "Warsaw"]
    documents = [
        Document(id_=f"doc-{i}", text=f"{n} was born in {c}. {n} corresponded with {names[i - 1]} in Paris.")
        for i, (n, c) in enumerate(zip(names, cities))
    ]
    store = MilvusGraphStore(uri=str(directory / "ingest.db"), embed_model=HashEmbedding(dim=64))
    steps = [SentenceSplitter(), GraphRAGTransform(store=store, extractor=LLMTripletExtractor(llm=llm))]
    start = time.perf_counter()
    index = GraphRAGIndex.from_documents(documents, store=store, llm=llm, transformations=steps)
    down = {"seconds": round(time.perf_counter() - start, 2), "chat_requests": endpoint.requests,
            **store.count(), "pending": count_pending(store)}
    endpoint.up, before = True, endpoint.requests
    set_guard(llm, LLMGuard(cooldown=0))  # the cooldown has passed (instead of waiting 30 s)
    start = time.perf_counter()
    refreshed = index.refresh_ref_docs(documents)
    back = {"seconds": round(time.perf_counter() - start, 2), "chat_requests": endpoint.requests - before,
            "refreshed": sum(refreshed), **store.count(), "pending": count_pending(store)}
    store.close()
    endpoint.server.shutdown()
    return {"documents": len(documents), "endpoint_down": down, "endpoint_back": back}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS / "llm_outage.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = {"retrieval": retrieval(Path(tmp)), "ingest": ingest(Path(tmp))}
    write_result(args.out, report)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
