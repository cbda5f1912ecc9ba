"""What the LLM costs: LLM calls and tokens per 1,000 passages at ingest and per question at query time,
for the free graph (no LLM), LLM triplet extraction at ingest and an LLM at query time, beside the recall
each gives, on the dev sets.

    GRAPHRAG_DATA=$DATA python -m benchmarks.cost      # -> benchmarks/results/cost.json

`--db-dir DIR` keeps the stores there, and reuses those it finds (as `benchmarks.llm_trust` does).

Tokens are tiktoken's `cl100k_base`, counted from the prompts the package sends, as a chat model receives
them (one user message; the answer's system + user messages), with OpenAI's cookbook count for a chat
request (3 tokens a message, its role and content, 3 priming the reply). Ingest: the extraction prompt
formatted for every chunk (`title\\ntext` as a document gives it, cut as `from_documents` cuts it); output
measured only where real LLM output exists (MuSiQue's triples, as the JSON the prompt asks for).
Query: every dev question through `GraphRAGRetriever` + `RetrieverQueryEngine` (default response mode)
with an LLM that records each call and answers with stand-ins (NER: the known names in the question;
rerank: the first 3 offered lines, no reasoning; answer: the gold answer). Recall: the free graph, the
LLM's triples (MuSiQue), and scripted LLMs at query time (`bench.scripted`: 3 random, half right, oracle).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse, CompletionResponseGen
from llama_index.core.llms import CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import Document

from benchmarks.devsets import RESULTS, cached_embed_model, data_dirs, dev_store, write_result
from llama_index_graphrag_milvus import GraphRAGRetriever
from llama_index_graphrag_milvus.bench.evaluation import evaluate, load_dataset, paired_difference
from llama_index_graphrag_milvus.bench.scripted import read_rerank_prompt, scripted_methods
from llama_index_graphrag_milvus.bench.tokens import Call, encoding, request_tokens
from llama_index_graphrag_milvus.llm.mentions import known_names
from llama_index_graphrag_milvus.llm.prompts import RERANK_PROMPT, TRIPLET_EXTRACT_PROMPT

MAX_TRIPLETS = 20  # the extraction's default cap on triplets per passage


class RecordingLLM(CustomLLM):
    """A chat model that records the messages of every call and answers `answer(last message)`."""

    answer: Callable[[str], str]
    calls: List[Tuple[Call, str]] = []  # each call's messages and answer

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="recording", is_chat_model=True)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        reply = self.answer(messages[-1].content or "")
        self.calls.append(([(m.role.value, m.content or "") for m in messages], reply))
        return ChatResponse(message=ChatMessage(role="assistant", content=reply))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.chat([ChatMessage(role="user", content=prompt)]).message.content)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)


def ingest_cost(data: Path, enc: Any) -> Dict[str, Any]:
    """LLM extraction of every chunk: the calls' input tokens, and their output where real output exists."""
    texts = [n.get_content() for n in load_dataset(data, triples=False).nodes]  # title + text: a document's
    chunks: List[str] = []
    for text in texts:  # what `from_documents` would hand the extraction: Settings' SentenceSplitter chunks
        long = len(enc.encode(text)) > 900
        chunks += [n.get_content() for n in SentenceSplitter().get_nodes_from_documents([Document(text=text)])] if long else [text]
    llm = RecordingLLM(answer=lambda _: '{"triplets": []}', calls=[])
    for chunk in chunks:  # the call `LLMTripletExtractor` makes
        llm.predict(TRIPLET_EXTRACT_PROMPT, text=chunk, max_triplets=MAX_TRIPLETS)
    n = len(texts)
    report: Dict[str, Any] = {"passages": n, "chunks": len(chunks), "calls": len(llm.calls),
                              "input_tokens": sum(request_tokens(c) for c, _ in llm.calls)}
    triples = data / "triples.jsonl"
    if triples.exists():  # real LLM output (GPT-3.5's triples), as the JSON the prompt asks for
        rows = [json.loads(line) for line in triples.read_text(encoding="utf-8").splitlines() if line.strip()]
        report["output_tokens"] = sum(len(enc.encode(json.dumps({"triplets": r.get("triples", [])}))) for r in rows)
        report["passages_over_the_cap"] = sum(len(r.get("triples", [])) > MAX_TRIPLETS for r in rows)
    for key in ("calls", "input_tokens", "output_tokens"):
        if key in report:
            report[key + "_per_1000_passages"] = round(1000 * report[key] / n, 1 if key == "calls" else None)
    return report


def kind(call: Call) -> str:
    text = call[-1][1]
    return "ner" if '"named_entities"' in text else "rerank" if '"useful_relationships"' in text else "answer"


def query_cost(dataset: Any, store: Any, enc: Any) -> Dict[str, Any]:
    """Every question through the retriever and the query engine with a recording LLM: calls and tokens."""
    now: Dict[str, Any] = {}

    def answer(text: str) -> str:
        if '"named_entities"' in text:
            return json.dumps({"named_entities": now["names"]})
        if '"useful_relationships"' in text:
            lines = [f"[{n}] {t}" for n, t in read_rerank_prompt(text)[1][:3]]
            return json.dumps({"thought_process": "", "useful_relationships": lines})
        return now["answer"]

    llm = RecordingLLM(answer=answer, calls=[])
    engine = RetrieverQueryEngine.from_args(GraphRAGRetriever(store=store, llm=llm), llm=llm)
    per_question: List[Dict[str, List[int]]] = []
    for q in dataset.questions:
        now.update(names=known_names(q["question"], store.has_entities), answer=q["answer"])
        start = len(llm.calls)
        engine.query(q["question"])
        row: Dict[str, List[int]] = {}
        for call, reply in llm.calls[start:]:
            row.setdefault(kind(call), []).append(request_tokens(call))
            row.setdefault(kind(call) + "_out", []).append(len(enc.encode(reply)))
        per_question.append(row)
    n = len(per_question)
    report: Dict[str, Any] = {"questions": n}
    for step in ("ner", "rerank", "answer"):
        calls = [t for row in per_question for t in row.get(step, [])]
        outs = [t for row in per_question for t in row.get(step + "_out", [])]
        report[step] = {"calls_per_question": round(len(calls) / n, 3), "input_tokens_mean": round(sum(calls) / n, 1),
                        "input_tokens_max": max(calls, default=0), "output_tokens_mean": round(sum(outs) / n, 1)}
    offered = [len(read_rerank_prompt(c[-1][1])[1]) for c, _ in llm.calls if kind(c) == "rerank"]
    report["rerank"]["offered_lines_median"] = statistics.median(offered) if offered else 0
    return report


def recall(store: Any, dataset: Any, embed: Any, llm: Any = None) -> Any:
    retriever = GraphRAGRetriever(store=store, llm=llm, similarity_top_k=10)
    vectors = [embed.get_query_embedding(q["question"]) for q in dataset.questions]
    return evaluate(lambda b: [n.node.node_id for n in retriever.retrieve(b)], dataset.questions, vectors)


def rounded(result: Any) -> Dict[str, float]:
    return {f"recall@{k}": round(result.recall[k], 4) for k in (2, 5)}


def run_set(data: Path, embed: Any, db_dir: Path, enc: Any, reuse: bool = False) -> Dict[str, Any]:
    dataset, store = dev_store(data, embed, db_dir, reuse=reuse, triples=False)  # the free graph: the text's own links
    free = recall(store, dataset, embed)
    scripted = scripted_methods(store, dataset)  # an LLM at query time: no real one, scripted ones
    at_query = {name: rounded(recall(store, dataset, embed, scripted["llm_" + name]["llm"]))
                for name in ("random3", "half_right", "oracle")}
    report: Dict[str, Any] = {"ingest": ingest_cost(data, enc), "query": query_cost(dataset, store, enc),
                              "recall": {"free": rounded(free), "llm_at_query_time": at_query}}
    store.close()
    if (data / "triples.jsonl").exists():  # the LLM's triples + the text's links, as `graphrag-milvus eval` builds it
        dataset, store = dev_store(data, embed, db_dir, reuse=reuse)
        given = recall(store, dataset, embed)
        diff = paired_difference(given.per_question, free.per_question)
        report["recall"]["llm_triples"] = {**rounded(given), "vs_free": {k: diff[k] for k in ("recall@2", "recall@5")}}
        store.close()
    print(f"{data.name}: {json.dumps(report)}", flush=True)
    return report


def summary(sets: Dict[str, Any], enc: Any) -> Dict[str, Any]:
    """Pooled over the sets: per 1,000 passages at ingest, per question at query time."""
    ingest = [s["ingest"] for s in sets.values()]
    passages, inputs, calls = (sum(i[key] for i in ingest) for key in ("passages", "input_tokens", "calls"))
    measured = [i for i in ingest if "output_tokens" in i]
    ratio = sum(i["output_tokens"] for i in measured) / sum(i["input_tokens"] for i in measured) if measured else None
    questions = sum(s["query"]["questions"] for s in sets.values())
    per_q = {step: {m: round(sum(s["query"][step][m] * s["query"]["questions"] for s in sets.values()) / questions, 2)
                    for m in ("calls_per_question", "input_tokens_mean", "output_tokens_mean")}
             for step in ("ner", "rerank", "answer")}
    example = re.search(r'"thought_process": "(.*?)", "useful', RERANK_PROMPT.get_template(), re.S)
    return {
        "passages": passages, "questions": questions,
        "llm_extraction_per_1000_passages": {
            "calls": round(1000 * calls / passages, 1), "input_tokens": round(1000 * inputs / passages),
            "output_tokens_measured_sets": [n for n, s in sets.items() if "output_tokens" in s["ingest"]],
            "output_tokens_per_input_token_measured": round(ratio, 4) if ratio else None,
            "output_tokens_extrapolated": round(1000 * inputs / passages * ratio) if ratio else None},
        "query_per_question": per_q,
        "rerank_thought_process_estimate_tokens": len(enc.encode(example.group(1))) if example else None,
    }


def main(argv: List[str] | None = None) -> None:
    logging.getLogger("llama_index_graphrag_milvus").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="*", help="data directories (default: $GRAPHRAG_DATA's dev sets)")
    parser.add_argument("--db-dir", help="reuse (or keep) the stores in this directory")
    parser.add_argument("--out", default=str(RESULTS / "cost.json"))
    args = parser.parse_args(argv)
    dirs, embed, enc = data_dirs(args.data), cached_embed_model(), encoding()
    with tempfile.TemporaryDirectory(prefix="graphrag-cost-") as tmp:
        db_dir = Path(args.db_dir or tmp)
        db_dir.mkdir(parents=True, exist_ok=True)
        sets = {d.name: run_set(d, embed, db_dir, enc, reuse=bool(args.db_dir)) for d in dirs}
    write_result(args.out, {"sets": sets, "pooled": summary(sets, enc)})


if __name__ == "__main__":
    main()
