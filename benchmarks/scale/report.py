"""The results file: merging an entry into it, a summary table, and the log-log plot of the cost curves."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any, Dict, List

from benchmarks.scale.common import DIM

ROOT = Path(__file__).resolve().parents[2]


def entry_key(size: int, variant: str) -> str:
    """The entry's key in the results: the size, and the variant (shape, degree, tag) when not the default."""
    return f"{size}-{variant}" if variant else str(size)


def variant(entry: Dict[str, Any]) -> str:
    return entry.get("variant", entry.get("tag", ""))


def git_state() -> str:
    snapshot = ROOT / "SNAPSHOT"
    if snapshot.exists():
        return snapshot.read_text().strip()
    try:

        def run(*cmd: str) -> str:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True).stdout.strip()

        dirty = run("git", "status", "--porcelain", "llama_index_graphrag_milvus")
        return run("git", "rev-parse", "--short", "HEAD") + (
            " + uncommitted changes in llama_index_graphrag_milvus/" if dirty else ""
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def load(out: Path) -> Dict[str, Any]:
    """The entries already in the results file, by key."""
    return json.loads(out.read_text()).get("sizes", {}) if out.exists() else {}


def save(out: Path, results: Dict[str, Any], seed: int) -> None:
    """Write the results (sorted by size, then key) with the run's metadata, and the plot beside them."""
    data = {
        "meta": {
            "benchmark": "benchmarks/scale/ (python -m benchmarks.scale)",
            "embedder": f"HashEmbedding(dim={DIM})",
            "store": "MilvusGraphStore on Milvus Lite (vector cache on: the Lite default)",
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cpus (shared: compare ratios)",
            "seed": seed,
            "package_commit": git_state(),
            "note": "latencies in ms, times in s; sizes are distinct relations",
        },
        "sizes": dict(sorted(results.items(), key=lambda kv: (kv[1]["size"], kv[0]))),
    }
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False))
    plot(data["sizes"], out.with_suffix(".png"))


# --------------------------------------------------------------------------------------------------
# table
# --------------------------------------------------------------------------------------------------
def _get(entry: Dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(entry, dict) or key not in entry:
            return None
        entry = entry[key]
    return entry


def _fmt(value: Any, pattern: str) -> str:
    return pattern.format(value) if value is not None else "–"


def _memory(entry: Dict[str, Any]) -> str:
    opened = _get(entry, "memory", "open_from_snapshot", "store_bytes_per_relation less the vector cache")
    adjacency = _get(
        entry, "memory", "adjacency_bytes_per_relation without synonym links (csr + ids + edges + names)"
    )
    if adjacency is None:  # the structures measured on their own (entries written before the split)
        adjacency = _get(
            entry,
            "memory",
            "structures",
            "adjacency_bytes_per_relation without synonym links (csr + ids + edges + names)",
        )
    return f"{_fmt(adjacency, '{:.0f} B')} (open: {_fmt(opened, '{:.0f} B')})"


def table(results: Dict[str, Any]) -> str:
    """A markdown table of the headline figures, one row per entry."""
    rows = [
        "| relations | variant | retrieval p50 | expansion d=1 / d=2 p50 | ingest | open from snapshot / Milvus | adjacency B/rel (open, less vectors) |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in sorted(results.values(), key=lambda e: e["size"]):
        rows.append(
            " | ".join(
                [
                    f"| {e['size']:.0e}".replace("e+0", "e"),
                    variant(e) or "default",
                    _fmt(_get(e, "retrieval", "ms", "p50"), "{:.1f} ms"),
                    f"{_fmt(_get(e, 'expansion', 'degree_1', 'ms', 'p50'), '{:.2f}')} / "
                    f"{_fmt(_get(e, 'expansion', 'degree_2', 'ms', 'p50'), '{:.2f}')} ms",
                    _fmt(_get(e, "ingest", "relations_per_s"), "{:,.0f} rel/s"),
                    f"{_fmt(_get(e, 'open', 'from_snapshot', 'open_total_s'), '{:.2f}')} / "
                    f"{_fmt(_get(e, 'open', 'from_milvus', 'open_total_s'), '{:.2f}')} s",
                    _memory(e) + " |",
                ]
            )
        )
    return "\n".join(rows)


# --------------------------------------------------------------------------------------------------
# plot
# --------------------------------------------------------------------------------------------------
def _series(
    axis: Any, rows: List[Dict], path: tuple, unless: tuple, label: str, style: str, **kw: Any
) -> None:
    """Plot the value at `path` of each entry (of those without a value at `unless`) against its size."""
    pts = [(r["size"], _get(r, *path)) for r in rows if not (unless and _get(r, *unless) is not None)]
    pts = [(x, y) for x, y in pts if y is not None and y > 0]
    if pts:
        axis.plot(*zip(*pts), style, label=label, **kw)
        a, b = pts[-1]
        axis.annotate(f"{b:.3g}", (a, b), textcoords="offset points", xytext=(6, -3), fontsize=8)


def _groups(results: Dict[str, Any]) -> Dict[str, Any]:
    """The entries by variant ("" is the default), and by size the first measured / with a reference
    (figures the store settings barely touch, and the reference, which does not depend on them)."""
    entries = list(results.values())
    by_variant: Dict[str, List[Dict]] = {}
    for r in sorted(entries, key=lambda r: r["size"]):
        by_variant.setdefault(variant(r), []).append(r)

    def first_by_size(rows: List[Dict]) -> List[Dict]:
        picked: Dict[int, Dict] = {}
        for r in sorted(rows, key=lambda r: bool(variant(r))):
            picked.setdefault(r["size"], r)
        return [picked[k] for k in sorted(picked)]

    default = [r for r in entries if not variant(r) or r.get("shape", "default") == "default"]
    return {
        "by_variant": by_variant,
        "default": by_variant.get("", []),
        "any": first_by_size([r for r in default if "open" in r]),
        "reference": first_by_size([r for r in default if "reference" in r]),
    }


def _label(rows: List[Dict], name: str) -> str:
    kwargs = ", ".join(f"{k}={v}" for k, v in (rows[0].get("store_kwargs") or {}).items())
    return ", ".join(p for p in (name, kwargs) if p) or "store defaults"


_BUILD = ("open", "from_milvus", "adjacency_build_s (load_cache + csr)")
_HOLLOW = {"mfc": "white", "markersize": 9}
#: Each panel's curves: (entries, path of the value, skip entries with a value at, label, style, keywords).
#: Entries: "any" (the first measured at each size), "reference" (the first with a reference run), or
#: "default" (the default corpus and settings); every variant also gets a retrieval and an ingest curve.
_LATENCY = [
    ("any", ("expansion", "degree_1", "ms", "p50"), (), "expansion d=1 p50 (ours)", "s-", {"color": "C1"}),
    ("any", ("expansion", "degree_2", "ms", "p50"), (), "expansion d=2 p50 (ours)", "s-", {"color": "C2"}),
    (
        "reference",
        ("reference", "expansion_deg1_ms", "p50"),
        (),
        "expansion d=1 p50 (reference: rows of precomputed A·Aᵀ·A, Aᵀ·A)",
        "^:",
        {"color": "C3"},
    ),
]
_BUILDS = [
    (
        "default",
        ("ingest", "stopped_early", "estimated_total_s (batch-time fit)"),
        (),
        "ingest, estimated (stopped at the time budget)",
        "d",
        {"color": "C4", **_HOLLOW},
    ),
    (
        "any",
        _BUILD,
        (),
        "adjacency build on open from Milvus (ours: read rows + caches + CSR)",
        "o-",
        {"color": "C0"},
    ),
    (
        "any",
        ("open", "from_snapshot", _BUILD[2]),
        (),
        "adjacency build on open from the snapshot file (ours)",
        "o--",
        {"color": "C0", "mfc": "white"},
    ),
    ("any", ("open", "from_snapshot", "csr_build_s"), (), "CSR build only (ours)", "s-", {"color": "C1"}),
    (
        "reference",
        ("reference", "ours_in_memory_build_s"),
        (),
        "in-memory build (ours: adjacency from id rows + snapshot)",
        "s:",
        {"color": "C2"},
    ),
    (
        "reference",
        ("reference", "build_s"),
        (),
        "build (reference: lists + dense + products)",
        "^:",
        {"color": "C3"},
    ),
    (
        "reference",
        ("reference", "lists_s"),
        ("reference", "build_s"),
        "reference list build only (dense matrix would not fit)",
        "x",
        {"color": "C3", "markersize": 10},
    ),
    (
        "reference",
        ("reference", "lists_predicted_s"),
        ("reference", "lists_s"),
        "reference list build, predicted (quadratic)",
        "^",
        {"color": "C3", **_HOLLOW},
    ),
]


def _panel(axis: Any, g: Dict[str, Any], variants: tuple, curves: List[tuple], title: str, unit: str) -> None:
    """One axis: a curve per variant (solid: the default, dashed: the others), then the listed curves."""
    path, unless, what, marker, color = variants
    for i, (name, rows) in enumerate(g["by_variant"].items()):
        style = {"mfc": "white"} if name else {}
        line = ("-", "--", "-.", ":")[i % 4] if name else "-"
        _series(
            axis, rows, path, unless, f"{what} ({_label(rows, name)})", marker + line, color=color, **style
        )
    for rows, path, unless, label, style, kw in curves:
        _series(axis, g[rows], path, unless, label, style, **kw)
    axis.set_title(title)
    axis.set_ylabel(f"{unit} (log)")


def plot(results: Dict[str, Any], png: Path) -> None:
    """Log-log cost curves. Solid: the default corpus and store settings; dashed: a variant (another
    corpus shape or degree, or a tagged run such as synonym links off); hollow markers: estimates."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not any("open" in r for r in results.values()):
        return
    groups = _groups(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 7.2))
    retrieval = (("retrieval", "ms", "p50"), (), "retrieval p50, no LLM", "o", "C0")
    ingest = (("ingest", "seconds"), ("ingest", "stopped_early"), "ingest", "d", "C4")
    _panel(left, groups, retrieval, _LATENCY, "Per-query latency (ms)", "ms")
    _panel(right, groups, ingest, _BUILDS, "Build / ingest time (s)", "seconds")
    for axis in (left, right):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("relations")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=1, frameon=False)
    fig.suptitle(
        "llama_index_graphrag_milvus: graph cost vs corpus size (Milvus Lite, HashEmbedding dim 32; "
        "shared 2-core machine)"
    )
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
