"""The benchmark's report: paired differences against dense and against no LLM, the Markdown table, the chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List

import numpy as np

from llama_index_graphrag_milvus.bench.evaluation import KS, Dataset, MethodResult, paired_difference


def printable(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """A method's arguments as JSON can hold them (an LLM by its class name)."""
    return {k: v if isinstance(v, (str, int, float, bool, type(None))) else type(v).__name__ for k, v in kwargs.items()}


def compared(results: Dict[str, MethodResult], dataset: Dataset) -> Dict[str, Any]:
    """The methods' figures, their paired differences against dense, and the per-question recalls."""
    return {
        "methods": {name: r.as_dict() for name, r in results.items()},
        "vs_dense": {
            name: paired_difference(r.per_question, results["dense"].per_question)
            for name, r in results.items()
            if name != "dense"
        },
        # an LLM's effect is measured against the same retriever without it
        "vs_graphrag": {
            name: paired_difference(r.per_question, results["graphrag"].per_question)
            for name, r in results.items()
            if name.startswith("llm_") and "graphrag" in results
        },
        "per_question": {
            name: {f"recall@{k}": [round(s[k], 3) for s in r.per_question] for k in KS} for name, r in results.items()
        },
        "question_ids": [q["id"] for q in dataset.questions],
    }


def write(report: Dict[str, Any], out: Path, chart: bool, log: Callable[[str], None]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    log(format_table(report))
    if chart:
        draw_chart(report, out.with_suffix(".png"))
    log(f"\nresults: {out}" + (f" (chart: {out.with_suffix('.png')})" if chart else ""))


def format_table(report: Dict[str, Any]) -> str:
    """The results as a Markdown table."""
    lines = [
        f"{report['dataset']}: {report['questions']} questions, {report['passages']} passages, "
        f"ingest {report['ingest_s']}s",
        "",
        "| method | R@2 | R@5 | R@10 | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, m in report["methods"].items():
        lines.append(
            f"| {name} | {m['recall@2']:.3f} | {m['recall@5']:.3f} | {m['recall@10']:.3f} "
            f"| {m['p50_ms']} | {m['p95_ms']} |"
        )
    for key, title in (("vs_dense", "vs dense (95% bootstrap CI; won/lost)"),
                       ("vs_graphrag", "vs graphrag without an LLM (95% CI; won/lost)")):
        if report.get(key):
            lines += ["", f"| {title} | R@2 | R@5 | R@10 |", "|---|---|---|---|"]
            for name, d in report[key].items():
                cells = [
                    f"{c['diff']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]; {c['won']}/{c['lost']}"
                    for c in (d[f"recall@{k}"] for k in KS)
                ]
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if report.get("candidates"):
        lines += ["", "What the default retriever offers an LLM to pick from (measured with no LLM):", "",
                  *candidates_table({report["dataset"]: report})]
    return "\n".join(lines)


#: The columns of the candidates' table: (key in `bench.candidates`, header, format).
CANDIDATE_COLUMNS = (
    ("any_gold_offered", "questions with a gold relation offered", "{:.1%}"),
    ("gold_passages_offered", "gold passages with one offered", "{:.1%}"),
    ("gold_relations_offered", "gold relations offered", "{:.2f}"),
    ("offered", "relations offered", "{:.1f}"),
    ("prompt_tokens", "rerank prompt tokens", "{:,.0f}"),
    ("gold_passages_among_candidates", "gold passages with one among all candidates", "{:.1%}"),
)


def candidates_table(reports: Dict[str, Dict[str, Any]]) -> List[str]:
    """Each set's candidate recall (`bench.candidates`) as Markdown table lines."""
    lines = ["| set | " + " | ".join(h for _, h, _ in CANDIDATE_COLUMNS) + " |", "|---" * (len(CANDIDATE_COLUMNS) + 1) + "|"]
    for name, report in reports.items():
        c = report.get("candidates")
        if c:
            lines.append(f"| {name} | " + " | ".join(f.format(c[key]) for key, _, f in CANDIDATE_COLUMNS) + " |")
    return lines


def draw_chart(report: Dict[str, Any], path: str | Path) -> None:
    """A grouped bar chart of Recall@2/5/10 per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["methods"])
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(names) + 2), 4))
    width = 0.8 / len(KS)
    for i, k in enumerate(KS):
        values = [report["methods"][n][f"recall@{k}"] for n in names]
        bars = ax.bar(np.arange(len(names)) + i * width, values, width, label=f"Recall@{k}")
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks(np.arange(len(names)) + width * (len(KS) - 1) / 2, names, fontsize=9)
    ax.set_ylim(0, 1)
    ax.set_ylabel("recall")
    ax.set_title(f"{report['dataset']}: {report['questions']} questions, {report['embed_model'].split('/')[-1]}")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def summary_table(reports: Dict[str, Dict[str, Any]]) -> str:
    """Every method on every set: R@2 / R@5 / R@10, p50, and the paired difference vs dense."""
    lines = ["| set | method | R@2 | R@5 | R@10 | p50 ms | ΔR@2 vs dense | ΔR@5 vs dense |", "|---|---|---|---|---|---|---|---|"]
    for name, report in reports.items():
        for method, m in report["methods"].items():
            d = report["vs_dense"].get(method)
            cells = [f"{d[f'recall@{k}']['diff']:+.3f} [{d[f'recall@{k}']['ci95'][0]:+.3f}, {d[f'recall@{k}']['ci95'][1]:+.3f}]"
                     for k in (2, 5)] if d else ["", ""]
            lines.append(f"| {name} | {method} | {m['recall@2']:.3f} | {m['recall@5']:.3f} | {m['recall@10']:.3f} "
                         f"| {m['p50_ms']} | {cells[0]} | {cells[1]} |")
    if any(report.get("candidates") for report in reports.values()):
        lines += ["", "What the default retriever offers an LLM to pick from (no LLM; `bench.candidates`):", "",
                  *candidates_table(reports)]
    return "\n".join(lines)
