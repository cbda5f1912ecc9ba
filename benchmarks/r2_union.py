"""MuSiQue with its given LLM triples and the offline extractor's text links together (issue 21, part 3).

Three graphs over the same passage text (raw `title + "\\n" + text`, `load_dataset(dir, raw_text=True)`):

- triples: the given LLM triples alone (`load_dataset(dir, raw_text=True)`),
- text: the offline `CooccurrenceExtractor` alone (`load_dataset(dir, triples=False)`),
- union: each passage's given triples followed by the extractor's triplets from its raw text.

    python -m benchmarks.r2_union triples|text|union [--dir /work/h3]

Each builds `DIR/musique_<graph>.db` (overwritten) with `GraphRAGTransform(store, llm=None)` and the
cached MiniLM, then dumps what the default ranker sees (`benchmarks/r2_dump.py`) to
`.cache/issue21/musique_<graph>.pkl`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from llama_index_graphrag_milvus import GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding, load_dataset
from llama_index_graphrag_milvus.embeddings import local_embed_model
from llama_index_graphrag_milvus.ingest.extract import CooccurrenceExtractor, as_metadata, exclude_from_content
from llama_index_graphrag_milvus.schema import parse_triplets

from benchmarks.r2_dump import CACHE, dump

DATA = "/work/shared/data/musique"
DUMPS = Path(".cache/issue21")  # the dumps (pickles, 3-18 MB each; git-ignored)


def dataset_for(graph: str):
    if graph == "text":
        return load_dataset(DATA, triples=False)
    dataset = load_dataset(DATA, raw_text=True)  # raw title + text, the given triples in metadata
    if graph == "union":
        extractor = CooccurrenceExtractor()
        added = 0
        for node in dataset.nodes:
            given, _ = parse_triplets(node.metadata.get("triplets", []))
            extracted = extractor.extract(node.get_content(metadata_mode="none"))
            seen = {t.id for t in given}
            extra = [t for t in extracted if t.id not in seen]
            added += len(extra)
            node.metadata["triplets"] = as_metadata(given + extra)
            exclude_from_content(node, "triplets")
        print(f"union: {added} extractor triplets added to {len(dataset.nodes)} passages", flush=True)
    return dataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("graph", choices=("triples", "text", "union"))
    parser.add_argument("--dir", default="/work/h3")
    parser.add_argument("--dump-only", action="store_true", help="the store exists: only dump")
    args = parser.parse_args()
    dataset = dataset_for(args.graph)
    embed = CachedEmbedding(local_embed_model(), CACHE)
    uri = str(Path(args.dir) / f"musique_{args.graph}.db")
    start = time.time()
    store = MilvusGraphStore(uri=uri, embed_model=embed, collection_prefix="bench", overwrite=not args.dump_only)
    try:
        if not args.dump_only:
            GraphRAGTransform(store=store, llm=None)(dataset.nodes)
            print(f"built {uri} in {time.time() - start:.0f}s: {store.count()}", flush=True)
        dump(store, dataset, embed, DUMPS / f"musique_{args.graph}.pkl", f"musique_{args.graph}")
    finally:
        store.close()


if __name__ == "__main__":
    main()


def report(path: str = "benchmarks/results/issue21/api.json", out: str = "benchmarks/results/issue21/union.json") -> None:
    """Paired differences between the three MuSiQue graphs (same passages, same questions, same dense), per
    ranker, from `benchmarks/r2_api.py`'s per-question recalls:

        python -c "from benchmarks.r2_union import report; report()"
    """
    import json

    from llama_index_graphrag_milvus.bench.evaluation import paired_difference

    api = json.loads(Path(path).read_text())
    graphs = ("musique_triples", "musique_text", "musique_union")
    def rows(g, m):
        return [{int(k): v for k, v in q.items()} for q in api[g][m]["per_question"]]
    result = {}
    print("| ranker | graph | R@2 / R@5 / R@10 | ΔR@2 vs dense | ΔR@5 vs dense |\n|---|---|---|---|---|")
    methods = [m for m in api["musique_union"] if m != "dense"]
    for m in methods:
        for g in graphs:
            e = api[g][m]
            d = paired_difference(rows(g, m), rows(g, "dense"))
            def f(x):
                return f"{x['diff']:+.3f} [{x['ci95'][0]:+.3f}, {x['ci95'][1]:+.3f}] {x['won']}/{x['lost']}"
            print(f"| {m} | {g} | {e['recall@2']:.3f} / {e['recall@5']:.3f} / {e['recall@10']:.3f} | {f(d['recall@2'])} | {f(d['recall@5'])} |")
            result.setdefault(m, {})[g] = {"recall": [e["recall@2"], e["recall@5"], e["recall@10"]], "vs_dense": d}
    print("\n| ranker | comparison | ΔR@2 | ΔR@5 | ΔR@10 |\n|---|---|---|---|---|")
    for m in methods:
        for a, b in (("musique_union", "musique_triples"), ("musique_union", "musique_text"), ("musique_triples", "musique_text")):
            d = paired_difference(rows(a, m), rows(b, m))
            def f(x):
                return f"{x['diff']:+.3f} [{x['ci95'][0]:+.3f}, {x['ci95'][1]:+.3f}] {x['won']}/{x['lost']}"
            print(f"| {m} | {a[8:]} − {b[8:]} | {f(d['recall@2'])} | {f(d['recall@5'])} | {f(d['recall@10'])} |")
            result.setdefault(m, {})[f"{a} - {b}"] = d
    Path(out).write_text(json.dumps(result, indent=1))
