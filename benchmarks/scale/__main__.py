"""python -m benchmarks.scale --sizes 1e3,1e4 [--shape issue10] [--degree 2] --out results.json"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

import benchmarks.scale as package  # noqa: E402
from benchmarks.scale import measure, report  # noqa: E402
from benchmarks.scale.common import STORE_KWARGS, fmt_size, log, remove_db  # noqa: E402
from benchmarks.scale.corpus import SHAPES, Corpus, corpus_stats, make_corpus, query_seeds  # noqa: E402
from benchmarks.scale.ingest import FIT_KEY, estimate_ingest_s, ingest, profile_ingest  # noqa: E402
from benchmarks.scale.reference import reference_benchmark  # noqa: E402


def _estimate_skip(
    size: int, args: argparse.Namespace, results: Dict[str, Any], entry: Dict[str, Any]
) -> Optional[str]:
    """Why not to ingest this size: the ingest estimated from the previous sizes (same variant first)."""
    prev = [r for r in results.values() if r.get("ingest") and r["size"] < size]
    prev = [r for r in prev if report.variant(r) == args.variant] or prev
    if not prev:
        return None
    last = max(prev, key=lambda r: r["size"])
    linear = size / last["ingest"]["relations_per_s"]
    fit = last["ingest"].get(FIT_KEY)
    fitted = estimate_ingest_s(fit, size) if fit else None
    entry["ingest_estimate_s"] = {
        "from": last["size"],
        "linear (constant relations/s)": round(linear, 1),
        "batch-time fit (batch time grows with the store)": round(fitted, 1) if fitted else None,
    }
    estimate = max(linear, fitted or 0.0)
    if estimate <= args.max_ingest_minutes * 60 or args.force:
        return None
    return (
        f"ingest estimated at {estimate / 60:.0f} min (> {args.max_ingest_minutes} min) from the batch times at "
        f"{last['size']} relations ({last['ingest']['relations_per_s']:.0f} relations/s overall there, "
        f"{linear / 60:.0f} min if that held); rerun with --force"
    )


def _ingest_step(
    corpus: Corpus, path: Path, args: argparse.Namespace, entry: Dict[str, Any]
) -> Optional[str]:
    """Ingest (and profile, at --profile-size); why the rest is not measured, if it is not."""
    size = corpus.size
    budget = args.ingest_budget_minutes or args.max_ingest_minutes
    log(f"size {size}: ingest into {path} (budget {budget} min)")
    entry["ingest"] = done = ingest(corpus, path, args.node_batch, args.batch_size, budget_s=budget * 60)
    log(
        f"size {size}: ingest {done['seconds']} s, {done['relations_per_s']} rel/s, split {done['split_share']}"
    )
    if "stopped_early" in done:
        stop = done["stopped_early"]
        return (
            f"ingest stopped after {done['seconds'] / 60:.0f} min (budget {budget} min) at "
            f"{stop['relations_ingested']} of {size} relations; estimated total "
            f"{(stop['estimated_total_s (batch-time fit)'] or 0) / 60:.0f} min (batch-time fit), "
            f"{stop['estimated_total_s (constant rate so far)'] / 60:.0f} min (constant rate); rest not measured"
        )
    if args.profile_size == size:
        log(f"size {size}: cProfile of a second ingest")
        out = Path(args.out)
        entry["ingest_profile"] = profile_ingest(
            corpus,
            args.db_root / f"profile_{fmt_size(size)}.db",
            args.node_batch,
            args.batch_size,
            out.parent / f"{out.stem}_ingest_profile_{fmt_size(size)}.prof",
        )
        log(f"size {size}: profile buckets {entry['ingest_profile']['buckets_share']}")
    return None


def _memory_step(path: Path, size: int, args: argparse.Namespace) -> Dict[str, Any]:
    """Memory retained on open, from the snapshot file, and from Milvus rows up to --memory-from-milvus-max-size
    (tracing an open from the rows is ~40x slower than the open)."""
    sources = {
        k: v
        for k, v in measure.SOURCES.items()
        if k != "from_milvus" or size <= args.memory_from_milvus_max_size
    }
    memory = {f"open_{source}": measure.open_memory(path, size, **kw) for source, kw in sources.items()}
    log(
        f"size {size}: memory on open "
        + ", ".join(
            f"{k}: {v['store_bytes_per_relation (retained less Milvus Lite)']} B/rel (store)"
            for k, v in memory.items()
        )
    )
    return memory


def _reference_step(
    corpus: Corpus,
    store: Any,
    seeds: list,
    positions: list,
    args: argparse.Namespace,
    results: Dict[str, Any],
    entry: Dict[str, Any],
) -> None:
    size = corpus.size
    earlier = [r for r in results.values() if r.get("reference", {}).get("lists_s") and r["size"] < size]
    previous = max(earlier, key=lambda r: r["size"])["reference"] if earlier else None
    entry["reference"] = ref = reference_benchmark(
        corpus, store, seeds, positions, previous, check_sets=size <= args.check_max_size
    )
    if "build_s" in ref:
        ours_open = entry["open"]["from_milvus"]["adjacency_build_s (load_cache + csr)"]
        ref["build_ratio_reference_over_ours_from_milvus"] = round(ref["build_s"] / ours_open, 2)
    log(f"size {size}: reference {ref}")


def _measure_step(corpus: Corpus, path: Path, args: argparse.Namespace, results: Dict, entry: Dict) -> None:
    """Everything measured on the ingested store at `path`."""
    size = corpus.size
    entry["memory"] = _memory_step(path, size, args)
    store, entry["open"] = measure.reopen(path, size)
    log(f"size {size}: reopen {entry['open']}")
    try:
        entry["memory"]["structures"] = measure.structure_memory(store, size)
        rng = np.random.default_rng([args.seed, size, 1])
        seeds = query_seeds(corpus, rng, args.expansion_queries)
        positions = measure.seed_positions(store, corpus, seeds)
        entry["expansion"] = {f"degree_{d}": measure.expansion_latency(store, positions, d) for d in (1, 2)}
        log(
            f"size {size}: expansion "
            + ", ".join(
                f"{k} p50 {v['ms']['p50']} ms, {v['candidates']['p50']} candidates"
                for k, v in entry["expansion"].items()
            )
        )
        entry["retrieval"] = measure.retrieval_latency(
            store, corpus, rng, args.retrieval_queries, args.degree
        )
        log(
            f"size {size}: retrieval {entry['retrieval']['ms']} ms (degree {args.degree}); "
            f"share {entry['retrieval']['time_share']}"
        )
        if not args.no_reference and size <= args.reference_max_size:
            _reference_step(corpus, store, seeds, positions, args, results, entry)
        entry["write_then_read"] = measure.write_then_read(store, corpus, size, args.degree)
        log(f"size {size}: write then read {entry['write_then_read']}")
    finally:
        store.close()


def run_size(size: int, args: argparse.Namespace, results: Dict[str, Any]) -> Dict[str, Any]:
    entry: Dict[str, Any] = {"size": size, "shape": args.shape, "degree": args.degree}
    t0 = time.perf_counter()
    corpus = make_corpus(size, args.seed, args.shape)
    entry["corpus"] = corpus_stats(corpus)
    entry["corpus"]["generate_s"] = round(time.perf_counter() - t0, 2)
    log(f"size {size}: corpus {entry['corpus']}")
    path = args.db_root / f"scale_{fmt_size(size)}{'-' + args.variant if args.variant else ''}.db"
    try:
        why = _estimate_skip(size, args, results, entry) or _ingest_step(corpus, path, args, entry)
        if why:
            entry["skipped"] = why
            log(why)
        else:
            _measure_step(corpus, path, args, results, entry)
    finally:
        if not args.keep_db:
            remove_db(path)
    return entry


def _size(text: str) -> int:
    return int(float(text))


def _add_limits(p: argparse.ArgumentParser) -> None:
    """What is skipped, stopped or checked, and from which size."""
    p.add_argument(
        "--profile-size",
        type=_size,
        default=10_000,
        help="cProfile a second ingest at this size (if it is among --sizes); 0: never",
    )
    p.add_argument(
        "--check-max-size",
        type=_size,
        default=10_000,
        help="check reference and ours give the same candidate sets up to this size",
    )
    p.add_argument("--max-ingest-minutes", type=float, default=25.0)
    p.add_argument(
        "--ingest-budget-minutes",
        type=float,
        default=None,
        help="stop an ingest after this long and extrapolate (default: --max-ingest-minutes)",
    )
    p.add_argument("--force", action="store_true", help="ingest even if estimated over the limit")
    p.add_argument(
        "--memory-from-milvus-max-size",
        type=_size,
        default=100_000,
        help="largest size at which the memory of an open from Milvus rows is traced (slow)",
    )
    p.add_argument("--no-reference", action="store_true")
    p.add_argument(
        "--reference-max-size",
        type=_size,
        default=100_000,
        help="largest size at which the reference algorithm runs (its list build is quadratic)",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=package.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", default="1e3,1e4", help="relations per corpus, comma separated (1e3,1e4,...)")
    p.add_argument("--out", default="benchmarks/results/scale.json")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        default="default",
        help="the corpus: 'default' (3-10 triplets a passage, entity use ∝ rank^-0.8, questions naming one "
        "entity) or 'issue10' (6 triplets a passage, rank^-0.9, questions naming two entities)",
    )
    p.add_argument(
        "--degree",
        type=int,
        default=None,
        help="the retriever's expansion_degree for retrieval (default: 1, or 2 for --shape issue10)",
    )
    p.add_argument("--node-batch", type=int, default=1000, help="TextNodes per transform call")
    p.add_argument("--batch-size", type=int, default=256, help="MilvusGraphStore(batch_size=...)")
    p.add_argument("--expansion-queries", type=int, default=200)
    p.add_argument("--retrieval-queries", type=int, default=100)
    _add_limits(p)
    p.add_argument("--db-root", type=Path, default=Path("/tmp/scale"), help="where the Milvus Lite files go")
    p.add_argument("--keep-db", action="store_true", help="keep the Milvus Lite files under --db-root")
    p.add_argument(
        "--synonym-threshold",
        default=None,
        help="MilvusGraphStore(synonym_threshold=...): a float, or 'none' to disable the links "
        "(default: the store's own default)",
    )
    p.add_argument("--tag", default="", help="suffix of the result key, e.g. 'nosyn' -> '1000000-nosyn'")
    p.add_argument("--report", action="store_true", help="only print the table and redraw the plot of --out")
    return p


def _finish(entry: Dict[str, Any], args: argparse.Namespace, started: float, earlier: Dict[str, Any]) -> None:
    entry.update(
        wall_s=round(time.perf_counter() - started, 1),
        command=" ".join(sys.argv),
        package_commit=args.package_commit,
        finished=time.strftime("%Y-%m-%dT%H:%M:%S"),
        tag=args.tag,
        variant=args.variant,
        store_kwargs={k: repr(v) for k, v in STORE_KWARGS.items()},
    )
    if args.no_reference and "reference" in earlier:
        entry["reference"] = dict(earlier["reference"], note="from an earlier run (--no-reference)")


def main(argv: Optional[List[str]] = None) -> None:
    args = _parser().parse_args(argv)
    args.package_commit = report.git_state()  # the code imported now, whatever is committed meanwhile
    shape = SHAPES[args.shape]
    args.degree = shape.default_degree if args.degree is None else args.degree
    parts = [
        args.shape if args.shape != "default" else "",
        f"d{args.degree}" if args.degree != shape.default_degree else "",
        args.tag,
    ]
    args.variant = "-".join(p for p in parts if p)
    if args.synonym_threshold is not None:
        text = args.synonym_threshold.lower()
        STORE_KWARGS["synonym_threshold"] = None if text == "none" else float(text)
    logging.getLogger("llama_index_graphrag_milvus").setLevel(logging.WARNING)
    logging.getLogger("pymilvus").setLevel(logging.ERROR)  # "failed to get mvccTs" on every Lite iterator
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results = report.load(out)
    if not args.report:
        args.db_root.mkdir(parents=True, exist_ok=True)
        for size in [int(float(s)) for s in args.sizes.split(",") if s.strip()]:
            started = time.perf_counter()
            entry = run_size(size, args, results)
            key = report.entry_key(size, args.variant)
            _finish(entry, args, started, results.get(key, {}))
            results[key] = entry
            report.save(out, results, args.seed)
            log(f"size {size}: done in {entry['wall_s']} s; wrote {out} and {out.with_suffix('.png')}")
    else:
        report.plot(results, out.with_suffix(".png"))
    print(report.table(results))


if __name__ == "__main__":
    main()
