"""python -m benchmarks.scale --sizes 1e4,1e5 [--server] [--out benchmarks/results/scale.json]  (see __init__)"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import benchmarks.scale as package  # noqa: E402
from benchmarks import server as milvus_server  # noqa: E402
from benchmarks.scale.corpus import corpus_stats, make_corpus  # noqa: E402
from benchmarks.scale.reads import heap, open_sources, reads  # noqa: E402
from benchmarks.scale.writes import DIM, Target, ingest, log, raw_insert  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def fmt_size(n: int) -> str:
    exp = int(round(math.log10(n)))
    return f"1e{exp}" if 10**exp == n else str(n)


def settle(uri: str, prefix: str, timeout_s: float = 3600) -> float:
    """Server: wait until every row of the prefix's collections is indexed (a server still indexing
    serves searches and lookups at half speed or worse); the seconds waited."""
    from pymilvus import MilvusClient

    client, start = MilvusClient(uri), time.perf_counter()
    names = [n for n in client.list_collections() if n.startswith(prefix + "_")]
    while time.perf_counter() - start < timeout_s:
        if not any(client.describe_index(n, "embedding").get("pending_index_rows", 0) for n in names):
            break
        time.sleep(10)
    client.close()
    return round(time.perf_counter() - start, 1)


def _in_child(target: Target, size: int, mode: str, prefix: str, args: argparse.Namespace) -> Dict[str, Any]:
    """`reads` in a fresh process, so that its resident memory is its own."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.scale",
        "--seed",
        str(args.seed),
        "--queries",
        str(args.queries),
    ]
    command += ["--reads", target.where, "lite" if target.lite else "server", str(size), mode, prefix]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][7:]) if lines else {"error": done.stderr[-2000:]}


def run_size(size: int, target: Target, args: argparse.Namespace) -> Dict[str, Any]:
    """Ingest and raw insert of one size side by side, then the reads of the ingested store."""
    corpus = make_corpus(size, args.seed)
    prefix = f"s{fmt_size(size)}"
    entry: Dict[str, Any] = {
        "size": size,
        "where": "Milvus Lite" if target.lite else "Milvus 2.3.5 standalone",
        "corpus": corpus_stats(corpus),
    }
    log(f"{size}: corpus {entry['corpus']}")
    entry["ingest"] = ingest(target, prefix, corpus, args.node_batch, args.batch_size)
    links = entry["ingest"].pop("link_rows")
    entry["raw_insert"] = raw_insert(target, f"raw_{prefix}", corpus, args.batch_size, links)
    entry["ingest_over_raw"] = round(entry["ingest"]["seconds"] / entry["raw_insert"]["seconds"], 2)
    log(
        f"{size}: ingest {entry['ingest']['relations_per_s']} rel/s, raw insert {entry['raw_insert']['relations_per_s']}"
        f" rel/s: {entry['ingest_over_raw']}x"
    )
    if target.lite:
        entry["open"] = open_sources(target, prefix, size)
        entry["memory"] = heap(target, prefix, size)
    else:
        entry["settle_s"] = settle(target.where, prefix)
    entry["modes"] = {mode: _in_child(target, size, mode, prefix, args) for mode in args.modes}
    entry["expansion"] = entry["modes"].get("memory", {}).pop("expansion", None)
    tops = [m.get("retrieval", {}).pop("top10", None) for m in entry["modes"].values()]
    if len(tops) == 2 and all(tops):
        entry["top10_identical_between_modes"] = f"{sum(a == b for a, b in zip(*tops))} of {len(tops[0])}"
    log(
        f"{size}: {json.dumps({k: entry[k] for k in ('open', 'memory', 'modes', 'expansion') if k in entry})}"
    )
    if not args.keep:
        target.discard(prefix)
    return entry


def git_state() -> str:
    def run(*cmd: str) -> str:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True).stdout.strip()

    try:
        dirty = run("git", "status", "--porcelain", "llama_index_graphrag_milvus", "benchmarks/scale")
        return run("git", "rev-parse", "--short", "HEAD") + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def save(out: Path, results: Dict[str, Any]) -> None:
    meta = {
        "benchmark": "python -m benchmarks.scale",
        "embedder": f"HashEmbedding(dim={DIM})",
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus (shared: compare ratios)",
        "note": "latencies in ms, times in s; sizes are distinct relations; keys: the size, '-server' on the server",
    }
    sizes = dict(sorted(results.items(), key=lambda kv: (kv[1]["size"], kv[0])))
    out.write_text(json.dumps({"meta": meta, "sizes": sizes}, indent=1, ensure_ascii=False))


def _get(entry: Dict[str, Any], *paths: str) -> Any:
    """The value at the first dotted path the entry holds (the later paths: entries of earlier versions)."""
    for path in paths:
        value: Any = entry
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            return value
    return None


def _f(value: Any, pattern: str) -> str:
    return pattern.format(value) if value is not None else "–"


_MEMORY = (
    "memory.store_less_vectors_bytes_per_relation",
    "memory.open_from_snapshot.store_bytes_per_relation less the vector cache",  # entries of earlier versions
)
#: The table's columns: a header, and for each figure in it a format and the paths it may be found at.
COLUMNS = [
    ("ingest (rel/s)", [("{:,.0f}", "ingest.relations_per_s")]),
    ("raw insert (rel/s)", [("{:,.0f}", "raw_insert.relations_per_s")]),
    ("ingest / raw", [("{:.2f}×", "ingest_over_raw")]),
    (
        "retrieval p50 memory / milvus (ms)",
        [
            ("{:.1f}", "modes.memory.retrieval.ms.p50", "retrieval.ms.p50"),
            ("{:.1f}", "modes.milvus.retrieval.ms.p50"),
        ],
    ),
    (
        "expansion d=1 / d=2 p50 (ms)",
        [("{:.2f}", "expansion.degree_1.ms.p50"), ("{:.2f}", "expansion.degree_2.ms.p50")],
    ),
    (
        "open: snapshot / rows (s)",
        [
            ("{:.2f}", "open.from_snapshot.with_graph_s", "open.from_snapshot.open_total_s"),
            ("{:.2f}", "open.from_milvus_rows.with_graph_s", "open.from_milvus.open_total_s"),
        ],
    ),
    ("store B/rel less vectors", [("{:.0f}", *_MEMORY)]),
]


def table(results: Dict[str, Any]) -> str:
    """The headline figures, one row per entry (entries of earlier versions show what they hold)."""
    rows = [
        "| entry | where | " + " | ".join(h for h, _ in COLUMNS) + " |",
        "|" + "---|" * (len(COLUMNS) + 2),
    ]
    for key, e in sorted(results.items(), key=lambda kv: (kv[1]["size"], kv[0])):
        cells = [
            " / ".join(_f(_get(e, *paths), pattern) for pattern, *paths in figures) for _, figures in COLUMNS
        ]
        rows.append(f"| {key} | {e.get('where', 'Milvus Lite')} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def at_scale(entry: Dict[str, Any], relations: float = 1e9) -> str:
    """A paper estimate: the entry's corpus shape and measured rates carried linearly to `relations`
    (one writer on the same machine; the memory mode's adjacency in one process)."""
    corpus, k = entry["corpus"], relations / entry["size"]
    lines = [
        f"At {relations:.0e} relations, from the {entry['size']:,}-relation entry ({entry.get('where', 'Milvus Lite')}) scaled "
        f"linearly: {corpus['entities'] * k:.2g} entities, {corpus['passages'] * k:.2g} passages"
    ]
    for name in ("ingest", "raw_insert"):
        rate = _get(entry, f"{name}.relations_per_s")
        if rate:
            lines.append(f"- {name} at {rate:,.0f} relations/s: {relations / rate / 86400:,.1f} days")
    per = _get(entry, *_MEMORY)
    if per:
        lines.append(
            f"- the store in memory, less vectors, at {per:.0f} B a relation: {per * relations / 1e9:,.0f} GB"
        )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=package.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", default="1e3,1e4", help="relations per corpus, comma separated")
    p.add_argument(
        "--server", action="store_true", help="on Milvus 2.3.5 standalone (private network namespace)"
    )
    p.add_argument("--out", default="benchmarks/results/scale.json", help="results file (entries merge)")
    p.add_argument("--modes", default="memory,milvus", help="adjacency modes, each read in its own process")
    p.add_argument("--queries", type=int, default=100, help="retrievals a mode")
    p.add_argument("--node-batch", type=int, default=1000, help="TextNodes a transform call")
    p.add_argument("--batch-size", type=int, default=256, help="MilvusGraphStore(batch_size=...)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--db-root", help="Lite: where the database files go (default: a temporary directory)")
    p.add_argument("--data-dir", help="server: its data directory, kept (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the ingested store (--db-root, --data-dir)")
    p.add_argument("--report", action="store_true", help="only print the table of --out")
    p.add_argument("--reads", nargs=5, help=argparse.SUPPRESS)  # child: WHERE lite|server SIZE MODE PREFIX
    return p


def _run(args: argparse.Namespace, target: Target, results: Dict[str, Any], out: Path) -> None:
    command = f"python -m benchmarks.scale --sizes {args.sizes}" + (" --server" if args.server else "")
    command += f" --modes {','.join(args.modes)}" if args.modes != ["memory", "milvus"] else ""
    for size in [int(float(s)) for s in args.sizes.split(",") if s.strip()]:
        started = time.perf_counter()
        entry = run_size(size, target, args)
        entry.update(
            wall_s=round(time.perf_counter() - started, 1),
            command=command,
            package_commit=args.commit,
            finished=time.strftime("%Y-%m-%dT%H:%M:%S"),
        )
        results[f"{size}-server" if args.server else str(size)] = entry
        save(out, results)


def main(argv: Optional[List[str]] = None) -> None:
    args = _parser().parse_args(argv)
    logging.getLogger("llama_index_graphrag_milvus").setLevel(logging.WARNING)
    logging.getLogger("pymilvus").setLevel(logging.ERROR)
    if args.reads:
        where, kind, size, mode, prefix = args.reads
        corpus = make_corpus(int(size), args.seed)
        print(
            "RESULT "
            + json.dumps(reads(Target(where, kind == "lite"), prefix, corpus, mode, args.queries, args.seed))
        )
        return
    if args.server and not milvus_server.inside():
        sys.exit(
            milvus_server.rerun_inside(
                ["-m", "benchmarks.scale", *(argv if argv is not None else sys.argv[1:])]
            )
        )
    args.modes, args.commit = args.modes.split(","), git_state()
    out = Path(args.out)
    results = json.loads(out.read_text()).get("sizes", {}) if out.exists() else {}
    if not args.report:
        out.parent.mkdir(parents=True, exist_ok=True)
        if args.server:
            with milvus_server.server(args.data_dir) as uri:
                _run(args, Target(uri, False), results, out)
        else:
            with tempfile.TemporaryDirectory(prefix="graphrag-scale-") as scratch:
                root = Path(args.db_root or scratch)
                root.mkdir(parents=True, exist_ok=True)
                _run(args, Target(str(root), True), results, out)
    print(table(results))
    for where in ("Milvus Lite", "Milvus 2.3.5 standalone"):
        measured = [e for e in results.values() if e.get("where", "Milvus Lite") == where and "corpus" in e]
        if measured:
            print("\n" + at_scale(max(measured, key=lambda e: e["size"])))


if __name__ == "__main__":
    main()
