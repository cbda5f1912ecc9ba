"""`graphrag-milvus`: ingest, bulk-load, query, stats, compact, demo and eval from the command line.

Every command takes --uri (a Milvus Lite path or a server URI) and --prefix (the collection prefix).
Errors come out as one line on stderr with exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional

from llama_index_graphrag_milvus.store import DEFAULT_URI

#: Passages written per step of `ingest` (one step of its progress bar).
INGEST_BATCH = 256

#: What stats and ingest say when passages await LLM extraction.
_PENDING_NOTE = (
    "  ({n} passages hold co-occurrence triplets because their LLM extraction failed: ingest them again "
    "with --openai, or GraphRAGIndex.refresh_ref_docs, once the LLM answers)"
)


def _store(args: argparse.Namespace, existing: bool = False) -> Any:
    """The store at --uri; with `existing`, a Milvus Lite path must already hold a database."""
    from llama_index_graphrag_milvus import MilvusGraphStore

    if existing and "://" not in args.uri and not Path(args.uri).expanduser().exists():
        raise FileNotFoundError(
            f"no Milvus Lite database at {args.uri!r}: ingest first (graphrag-milvus ingest FILES --uri {args.uri})"
        )
    return MilvusGraphStore(uri=args.uri, token=args.token, collection_prefix=args.prefix)


def _read_nodes(paths: Iterable[str]) -> List[Any]:
    """Text and markdown files become Documents; a .jsonl holds one passage a line:
    {"id": ..., "text": ..., "triplets": [[s, p, o], ...], "metadata": {...}} (id, triplets optional)."""
    from llama_index.core import Document

    documents = []
    for name in paths:
        path = Path(name)
        if not path.exists():
            raise FileNotFoundError(f"{name}: no such file")
        if path.suffix == ".jsonl":
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{name}:{number}: not JSON ({exc.msg})") from None
                if not isinstance(row, dict) or not isinstance(row.get("text"), str):
                    raise ValueError(f'{name}:{number}: expected an object with a "text" string')
                metadata = dict(row.get("metadata") or {})
                if "triplets" in row:
                    metadata["triplets"] = row["triplets"]
                kwargs = {"id_": str(row["id"])} if "id" in row else {}
                # the triplets are data, not text: not embedded, not shown to an LLM, not counted by a splitter
                documents.append(
                    Document(
                        text=row["text"], metadata=metadata, excluded_embed_metadata_keys=["triplets"],
                        excluded_llm_metadata_keys=["triplets"], **kwargs,
                    )
                )
        else:
            documents.append(
                Document(id_=str(path), text=path.read_text(encoding="utf-8"), metadata={"file_name": path.name})
            )
    return documents


def _passages(args: argparse.Namespace) -> List[Any]:
    """The input files' passages, as `ingest` and `bulk-load` split them."""
    from llama_index.core.node_parser import SentenceSplitter

    documents = _read_nodes(args.paths)
    return SentenceSplitter().get_nodes_from_documents(documents, show_progress=len(documents) > 1)


def _transform(args: argparse.Namespace, store: Any) -> Any:
    """The graph step of `ingest` and `bulk-load`: the given triplets, the text's links, --openai."""
    from llama_index_graphrag_milvus import GraphRAGTransform, LLMTripletExtractor

    llm = _llm(args)
    extractor = LLMTripletExtractor(llm=llm) if llm is not None else None
    return GraphRAGTransform(store=store, extractor=extractor, text_links=not args.no_text_links)


@contextlib.contextmanager
def _quiet_transform() -> Iterator[None]:
    """The transform warns once per batch about nodes without triplets: one summary (`_report`) instead."""
    transform_log = logging.getLogger("llama_index_graphrag_milvus.transform")
    level = transform_log.level
    transform_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        transform_log.setLevel(level)


def cmd_ingest(args: argparse.Namespace) -> None:
    from tqdm.auto import tqdm

    from llama_index_graphrag_milvus.schema import chunked

    nodes = _passages(args)  # before the store opens: a bad input file creates no database
    with _store(args) as store:
        # the graph step in batches, so that the bar follows the passages (extraction, embedding, writes)
        transform = _transform(args, store)
        with _quiet_transform(), tqdm(total=len(nodes), desc="Ingesting", unit="passage") as bar:
            for batch in chunked(nodes, INGEST_BATCH):
                transform(list(batch))
                bar.update(len(batch))
        _report(args, transform, store)


def cmd_bulk_load(args: argparse.Namespace) -> None:
    nodes = _passages(args)
    with _store(args) as store:
        transform = _transform(args, store)
        with _quiet_transform():
            store.bulk_load(nodes, transform, chunk_size=args.chunk_size, show_progress=True)
        _report(args, transform, store)


def _report(args: argparse.Namespace, transform: Any, store: Any) -> None:
    """What built the graph, and the rows stored (on stdout, as JSON)."""
    from llama_index_graphrag_milvus.transform import count_pending

    names = {
        "CooccurrenceExtractor": "the offline extractor (CooccurrenceExtractor, no LLM)",
        "LLMTripletExtractor": f"the LLM ({args.openai_model})",
    }
    built = [
        f"{names.get(source, source)}: {c['triplets']} triplets from {c['passages']} passages"
        for source, c in transform.built.items()
    ]
    print("graph built from " + "; ".join(built or ["nothing (no passages)"]), file=sys.stderr)
    if "CooccurrenceExtractor" in transform.built:
        print(
            "  (for passages without triplets: names co-occurring in a sentence; --openai extracts with an LLM)",
            file=sys.stderr,
        )
    pending = count_pending(store)
    if pending:
        print(_PENDING_NOTE.format(n=pending), file=sys.stderr)
    print(json.dumps(store.count()))


def cmd_query(args: argparse.Namespace) -> None:
    from llama_index_graphrag_milvus import GraphRAGRetriever
    from llama_index_graphrag_milvus.retriever import RELATIONS_KEY

    with _store(args, existing=True) as store:
        retriever = GraphRAGRetriever(store=store, llm=_llm(args), similarity_top_k=args.top_k)
        hits = retriever.retrieve(args.question)
        if not hits:
            print("No passages found.", file=sys.stderr)
        for rank, hit in enumerate(hits, start=1):
            text = textwrap.shorten(hit.node.get_content(), 200, placeholder=" ...")
            print(f"{rank}. [{hit.node.ref_doc_id or hit.node.node_id}] {hit.score:.3f}  {text}")
            for relation in hit.node.metadata.get(RELATIONS_KEY, []):
                print(f"     via {relation}")


def count_rows(uri: str, token: str = "", prefix: str = "graphrag") -> Dict[str, int]:
    """The rows of a store's three collections, as Milvus counts them, with no embed model loaded and no
    graph read: `{"entities": n, "relations": n, "passages": n}`, and `"pending_extraction": n` when n
    passages hold the no-LLM extractor's triplets because their LLM extraction failed."""
    from pymilvus import MilvusClient

    from llama_index_graphrag_milvus.errors import GraphStoreError
    from llama_index_graphrag_milvus.ingest.extract.given import PENDING_FILTER
    from llama_index_graphrag_milvus.milvus.collections import KINDS, PASSAGES, collection_names, is_local_path

    local = is_local_path(uri)
    if local and not Path(uri).expanduser().exists():
        raise FileNotFoundError(f"no Milvus Lite database at {uri!r}: ingest first (graphrag-milvus ingest FILES --uri {uri})")
    path = str(Path(uri).expanduser().resolve()) if local else uri
    try:
        client = MilvusClient(uri=path, token=token)
    except Exception as exc:
        from llama_index_graphrag_milvus.milvus import lite

        if local and lite.held_by_another_process(path):
            raise lite.held_error(path) from exc
        raise
    try:
        present = set(client.list_collections())
        names = {kind: name for kind, name in collection_names(prefix).items() if kind in KINDS}
        if not set(names.values()) <= present:
            prefixes = sorted(n[: -len("_entities")] for n in present if n.endswith("_entities"))
            raise GraphStoreError(
                f"no store with prefix {prefix!r} at {uri!r}"
                + (f": it holds the prefixes {', '.join(prefixes)} (pass --prefix)" if prefixes else ": ingest first")
            )
        counts = {}
        for kind, name in names.items():
            client.load_collection(name)
            rows = client.query(name, filter="", output_fields=["count(*)"], consistency_level="Strong")
            counts[kind] = int(rows[0]["count(*)"])
        pending = client.query(names[PASSAGES], filter=PENDING_FILTER, output_fields=["count(*)"], consistency_level="Strong")
        if int(pending[0]["count(*)"]):
            counts["pending_extraction"] = int(pending[0]["count(*)"])
        return counts
    finally:
        client.close()


def cmd_stats(args: argparse.Namespace) -> None:
    counts = count_rows(args.uri, args.token, args.prefix)
    print(json.dumps(counts))
    if counts.get("pending_extraction"):
        print(_PENDING_NOTE.format(n=counts["pending_extraction"]), file=sys.stderr)


def cmd_compact(args: argparse.Namespace) -> None:
    with _store(args, existing=True) as store:
        print(json.dumps(store.compact()))


def cmd_demo(args: argparse.Namespace) -> None:
    from llama_index_graphrag_milvus.bench.demo import main as demo

    demo(["--uri", args.uri, "--token", args.token, "--prefix", args.prefix])


#: The default --uri of `eval`: Milvus Lite in the benchmark's cache, one database per dataset.
EVAL_URI = ".cache/graphrag-milvus/DATASET.db"


def cmd_eval(args: argparse.Namespace) -> None:
    from llama_index_graphrag_milvus.bench.benchmark import run_benchmark, run_benchmarks

    for data in args.data:
        if not Path(data, "corpus.jsonl").exists() or not Path(data, "questions.jsonl").exists():
            raise FileNotFoundError(f"{data}: expected corpus.jsonl and questions.jsonl (the layout of HippoRAG's MuSiQue release)")
    options = dict(
        uri=None if args.uri == EVAL_URI else args.uri,
        limit=args.limit,
        triples=not args.no_triples,
        time_ingest=args.time_ingest,
        prefix=args.prefix,
        chart=not args.no_chart,
        scripted_llms=args.scripted_llms,
        text_links=not args.no_text_links,
    )
    if len(args.data) == 1:  # --out None: .cache/graphrag-milvus/results/<dataset>.json, untracked
        run_benchmark(args.data[0], args.out, **options)
    else:  # --out a directory: <dataset>.json for each, and summary.md
        if options["uri"] is not None:
            raise ValueError("--uri names one database, and each dataset needs its own: leave --uri out")
        run_benchmarks(args.data, args.out, raw_text=None, **options)


def _llm(args: argparse.Namespace) -> Any:
    if not getattr(args, "openai", False):
        return None
    from llama_index.llms.openai import OpenAI

    return OpenAI(model=args.openai_model, temperature=0)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="graphrag-milvus", description="Graph RAG on Milvus for LlamaIndex.")
    commands = top.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, run: Any) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.add_argument("--uri", default=DEFAULT_URI, help="Milvus Lite path or server URI (default: %(default)s)")
        sub.add_argument("--token", default="", help="Milvus server or Zilliz Cloud token")
        sub.add_argument("--prefix", default="graphrag", help="collection prefix (default: %(default)s)")
        sub.set_defaults(run=run)
        return sub

    for name, help, run in (
        ("ingest", "Ingest text/markdown files or a JSONL of passages.", cmd_ingest),
        ("bulk-load", "A big load of what ingest takes, read and written a chunk at a time.", cmd_bulk_load),
    ):
        writes = command(name, help, run)
        writes.add_argument("paths", nargs="+")
        writes.add_argument("--openai", action="store_true", help="extract triplets with OpenAI where none are given")
        writes.add_argument("--openai-model", default="gpt-4o-mini")
        writes.add_argument("--no-text-links", action="store_true", help="the given triplets alone, without the text's links")
    writes.add_argument("--chunk-size", type=int, default=1000, help="passages planned and written at a time (default: %(default)s)")
    query = command("query", "Retrieve passages and the relation chains that chose them.", cmd_query)
    query.add_argument("question")
    query.add_argument("--top-k", type=int, default=5)
    query.add_argument("--openai", action="store_true", help="OpenAI for NER and rerank")
    query.add_argument("--openai-model", default="gpt-4o-mini")
    command("stats", "Count entities, relations and passages.", cmd_stats)
    command("compact", "Delete what no stored passage states any more (after deletes); print the rows deleted.", cmd_compact)
    demo = command(
        "demo", "The offline demo: real multi-hop questions (MuSiQue), plain vector RAG beside Graph RAG.", cmd_demo
    )
    demo.set_defaults(uri="./graphrag_demo.db", prefix="musique")  # its collections are overwritten
    evaluate = command("eval", "Multi-hop Recall@k: dense vs Graph RAG.", cmd_eval)
    # its own store, its collections overwritten: not the default store of ingest and query
    evaluate.set_defaults(uri=EVAL_URI, prefix="bench")
    evaluate.add_argument(
        "--data", required=True, nargs="+",
        help="one or more directories holding corpus.jsonl, questions.jsonl and optionally triples.jsonl (several: one summary table)",
    )
    evaluate.add_argument(
        "--out", default=None, help="results JSON, a PNG chart beside it (default: .cache/graphrag-milvus/results/DATASET.json); "
        "with several --data, a directory for DATASET.json each and summary.md",
    )
    evaluate.add_argument("--no-chart", action="store_true", help="write no PNG chart")
    evaluate.add_argument("--limit", type=int, default=None, help="evaluate only the first N questions")
    evaluate.add_argument(
        "--no-triples", action="store_true", help="ignore triples.jsonl: raw text, graph from the offline extractor (the default without the file)",
    )
    evaluate.add_argument(
        "--no-text-links", action="store_true", help="ingest the given triples alone, without the text's own links (GraphRAGTransform(text_links=False))",
    )
    evaluate.add_argument(
        "--time-ingest", action="store_true", help="time the ingest uncached, against a plain dense ingest"
    )
    evaluate.add_argument(
        "--scripted-llms", action="store_true",
        help="also measure scripted LLMs (an oracle, half right, 3 random picks, garbage) against no LLM",
    )
    return top


def main(argv: Optional[List[str]] = None) -> None:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Milvus Lite's embedded server logs the RPCs it lacks (AllocTimestamp, asked for when an index is
    # created) as errors with a traceback; they are harmless, and the client sees any real failure.
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    try:
        args.run(args)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # one readable line, not a traceback
        print(f"graphrag-milvus {args.command}: error: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
