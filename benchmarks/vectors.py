"""Benchmark of the in-memory vector cache (`vectors.py`): the hand-written inverted lists it had against
the faiss index it has now, and both against exact search.

    python -m benchmarks.vectors --out benchmarks/results/vectors.json

Both versions of `vectors.py` are loaded from their files (the old one from git, `--old-ref`), not
through the package, so only the module under test is imported. For each size and dimension a seeded
set of clustered unit vectors is generated (cluster centres in a 24-dimensional subspace, randomly
rotated into the full dimension, plus a little isotropic noise: embeddings have a low intrinsic
dimension), 1 % of the rows marked dead, and measured, one implementation at a time:

- build: the first `top_k` call, which trains and fills the index (0 when the size is under the
  implementation's exact limit, where it has none);
- top-10 latency: single-query `top_k` calls, median and mean, and recall@10 against exact search;
- memory: what the index adds to the float32 copy (`nbytes`);
- `within`: one call with 1,000 queries, each a near duplicate of a row (cosine ≈ 0.99), threshold 0.9,
  k = 6 (the store's synonym search), and the fraction of planted rows found.

A crossover sweep (`--crossover`) times exact search against the new index on small sizes, to place the
exact limits. The machine is shared: time ratios matter more than absolute times.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODULE = "llama_index_graphrag_milvus/vectors.py"


def load(name: str, source: str) -> Any:
    """A module from source text, outside the package."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, f.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    os.unlink(f.name)
    return module


def set_limit(module: Any, rows: int) -> None:
    """Make `module`'s searches exact up to `rows` rows of any dimension (0: always the index)."""
    for name in ("EXACT_SEARCH_MAX_ROWS", "EXACT_WITHIN_MAX_ROWS"):  # the old module
        if hasattr(module, name):
            setattr(module, name, rows)
    for name in ("EXACT_SEARCH_MAX_VALUES", "EXACT_WITHIN_MAX_VALUES"):  # the new one: rows × dimension
        if hasattr(module, name):
            setattr(module, name, rows * 4096)


def limits(module: Any) -> Dict[str, int]:
    return {name: getattr(module, name) for name in dir(module) if name.startswith("EXACT_")}


def uses_index(module: Any, n: int, dim: int) -> bool:
    if hasattr(module, "EXACT_SEARCH_MAX_VALUES"):
        return n * dim > module.EXACT_SEARCH_MAX_VALUES
    return n > module.EXACT_SEARCH_MAX_ROWS


def clustered(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    latent = min(dim, 24)
    centres = rng.standard_normal((max(16, n // 500), latent)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    rotation = np.linalg.qr(rng.standard_normal((dim, latent)))[0].T.astype(np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(n, start + 100_000) - start
        z = centres[rng.integers(len(centres), size=m)]
        z += 0.8 * rng.standard_normal((m, latent)).astype(np.float32) / np.sqrt(latent)
        out[start : start + m] = z @ rotation + 0.1 * rng.standard_normal((m, dim)).astype(np.float32) / np.sqrt(dim)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def near(rows: np.ndarray, scale: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = rows + scale * rng.standard_normal(rows.shape).astype(np.float32) / np.sqrt(rows.shape[1])
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def exact_top(vectors: np.ndarray, alive: np.ndarray, queries: np.ndarray, k: int) -> List[set]:
    out = []
    for start in range(0, len(queries), 64):
        scores = queries[start : start + 64] @ vectors.T
        scores[:, ~alive] = -np.inf
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        out.extend(set(row.tolist()) for row in top)
    return out


def measure(module: Any, vectors: np.ndarray, alive: np.ndarray, queries: np.ndarray, truth: List[set],
            duplicates: np.ndarray, planted: np.ndarray, latency_queries: int) -> Dict[str, Any]:
    n, dim = vectors.shape
    cache = module.VectorCache(dim)
    for start in range(0, n, 100_000):  # as the store loads it: in batches
        cache.put(np.arange(start, min(n, start + 100_000)), vectors[start : start + 100_000])
    plain = cache.nbytes
    t = time.perf_counter()
    cache.top_k(queries[0], 10, alive)
    build = time.perf_counter() - t
    times, hits = [], 0
    for query, expected in zip(queries[:latency_queries], truth):
        t = time.perf_counter()
        positions, _ = cache.top_k(query, 10, alive)
        times.append(time.perf_counter() - t)
        assert alive[positions].all()
        hits += len(set(positions.tolist()) & expected)
    t = time.perf_counter()
    found = cache.within(duplicates, 0.9, 6, alive)
    within = time.perf_counter() - t
    planted_found = np.mean([p in f[0].tolist() for p, f in zip(planted, found) if alive[p]])
    return {
        "index": uses_index(module, n, dim),  # for top_k; `within` may switch earlier
        "build_s": round(build, 3),
        "top10_ms_median": round(1e3 * float(np.median(times)), 3),
        "top10_ms_mean": round(1e3 * float(np.mean(times)), 3),
        "recall_at_10": round(hits / (10 * len(times)), 4),
        "within_1000_s": round(within, 3),
        "within_planted_found": round(float(planted_found), 4),
        "index_mb": round((cache.nbytes - plain) / 2**20, 1),
    }


def run_size(modules: Dict[str, Any], n: int, dim: int, queries: int, exact_queries: int) -> Dict[str, Any]:
    t = time.perf_counter()
    vectors = clustered(n, dim)
    rng = np.random.default_rng(1)
    alive = rng.random(n) >= 0.01
    picked = near(vectors[rng.integers(n, size=queries)], 0.5, seed=2)
    truth = exact_top(vectors, alive, picked, 10)
    planted = rng.choice(n, size=1_000, replace=False)
    duplicates = near(vectors[planted], 0.14, seed=3)  # cosine ≈ 0.99 with their row
    entry: Dict[str, Any] = {"rows": n, "dim": dim, "setup_s": round(time.perf_counter() - t, 1)}
    for name, module in modules.items():
        few = exact_queries if name == "exact" else queries
        entry[name] = measure(module, vectors, alive, picked, truth, duplicates, planted, few)
        print(f"{n:>9,} × {dim:<3} {name:<5} {entry[name]}", flush=True)
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1e5,3e5,1e6")
    parser.add_argument("--dims", default="32,384")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--exact-queries", type=int, default=30, help="queries timed for exact search")
    parser.add_argument("--crossover", default="5e3,1e4,2e4,5e4,1e5", help="sizes for exact vs index ('' skips)")
    parser.add_argument("--old-ref", default="f5c9666", help="the commit with the hand-written lists")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/vectors.json"))
    args = parser.parse_args()

    old_source = subprocess.run(["git", "show", f"{args.old_ref}:{MODULE}"], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout
    new_source = (ROOT / MODULE).read_text()
    exact = load("vectors_exact", new_source)
    set_limit(exact, 10**9)
    modules = {"old": load("vectors_old", old_source), "new": load("vectors_new", new_source), "exact": exact}
    started = time.perf_counter()
    result: Dict[str, Any] = {
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cores": os.cpu_count(),
                    "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
        "limits": {name: limits(m) for name, m in modules.items() if name != "exact"},
        "sizes": [],
        "crossover": [],
    }
    dims = [int(d) for d in args.dims.split(",")]
    for size in (s for s in args.crossover.split(",") if s):
        for dim in dims:
            probe = load("vectors_probe", new_source)
            set_limit(probe, 0)
            result["crossover"].append(run_size({"exact": exact, "index": probe}, int(float(size)), dim, 100, 100))
    for size in args.sizes.split(","):
        for dim in dims:
            result["sizes"].append(run_size(modules, int(float(size)), dim, args.queries, args.exact_queries))
    result["total_s"] = round(time.perf_counter() - started, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out} in {result['total_s']} s")


if __name__ == "__main__":
    main()
