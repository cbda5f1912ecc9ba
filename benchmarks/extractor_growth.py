"""The offline extractor's time on hostile text, size by size, and on normal passages.

    python -m benchmarks.extractor_growth                      # this checkout; JSON to benchmarks/results
    python -m benchmarks.extractor_growth --module OLD.py --max 44000 --out /tmp/old.json

Hostile texts are one run of names joined by connectors with no sentence break ("Foyt of the de la
Van " over and over, and with "Mr. A. J. " before each), plus other shapes that once cost quadratic
time ("The The ...", "!!!!..." with no space after, "In 1 1 1 ..."); each is timed at 11k to 176k
characters and 1 MB (the best of 3), and the table gives each size's seconds over the previous
size's next to its characters over the previous size's (equal is linear, their square quadratic). The texts are whole repetitions of their unit, so that no cut word at the
end names a second entity. Normal text: seconds per 1,000 HotpotQA passages (title + newline + text,
as the benchmark's raw-text nodes are), the best of 5 rounds. `--module` times another version of
`cooccurrence.py` (`git show REV:llama_index_graphrag_milvus/ingest/extract/cooccurrence.py`);
`--max` skips larger sizes, for a version that would take minutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path

from llama_index_graphrag_milvus.ingest.extract import CooccurrenceExtractor

ROOT = Path(__file__).resolve().parents[1]
HOTPOTQA = ROOT.parent / "shared" / "data" / "hotpotqa" / "corpus.jsonl"
SIZES = (11_000, 22_000, 44_000, 88_000, 176_000, 1_000_000)
HOSTILE = {
    "names": "Foyt of the de la Van ",
    "initials_names": "Mr. A. J. Foyt of the de la Van ",
    "the_run": "The ",
    "bang_run": "!",
    "in_digits": "In 1 ",
}


def extractor_class(module: str | None) -> type:
    """`CooccurrenceExtractor` of this checkout, or of the file `module`."""
    if module is None:
        return CooccurrenceExtractor
    spec = importlib.util.spec_from_file_location("cooccurrence_under_test", module)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded.CooccurrenceExtractor


def hostile_times(extractor, max_chars: int, repeats: int = 3) -> dict:
    """Seconds of `extract` per shape and size, the best of `repeats` (a size above `max_chars` is
    left out), and each size's seconds and characters over the previous size's."""
    extractor.extract("Warm Up of the Regular Expressions. And the Imports.")
    out: dict = {}
    for name, unit in HOSTILE.items():
        rows = []
        for size in (s for s in SIZES if s <= max_chars):
            body = unit * max(1, round(size / len(unit)))
            text = "A " + body if name == "bang_run" else body
            seconds = []
            for _ in range(repeats):
                start = time.perf_counter()
                extractor.extract(text)
                seconds.append(time.perf_counter() - start)
            rows.append({"chars": len(text), "seconds": min(seconds)})
        for previous, row in zip(rows, rows[1:]):
            row["ratio"] = row["seconds"] / previous["seconds"] if previous["seconds"] else None
            row["chars_ratio"] = row["chars"] / previous["chars"]
        out[name] = rows
    return out


def normal_time(extractor, rounds: int = 5) -> dict:
    """Seconds per 1,000 HotpotQA passages, best and median of `rounds`."""
    rows = [json.loads(line) for line in HOTPOTQA.read_text().splitlines() if line.strip()]
    texts = [row["title"] + "\n" + row["text"] for row in rows]
    per_thousand = []
    for _ in range(rounds):
        start = time.perf_counter()
        for text in texts:
            extractor.extract(text)
        per_thousand.append((time.perf_counter() - start) / len(texts) * 1000)
    per_thousand.sort()
    return {"passages": len(texts), "best": per_thousand[0], "median": per_thousand[len(per_thousand) // 2]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", help="another cooccurrence.py to time")
    parser.add_argument("--max", type=int, default=max(SIZES), help="largest size timed, in characters")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "extractor_growth.json"))
    args = parser.parse_args()
    extractor = extractor_class(args.module)()
    result = {"module": args.module or "this checkout", "hostile": hostile_times(extractor, args.max),
              "hotpotqa_per_1000": normal_time(extractor)}
    print(f"{'input':16} {'chars':>9} {'seconds':>9} {'ratio':>6} {'chars ratio':>11}")
    for name, rows in result["hostile"].items():
        for row in rows:
            ratio = f"{row['ratio']:6.2f} {row['chars_ratio']:11.2f}" if row.get("ratio") else ""
            print(f"{name:16} {row['chars']:>9} {row['seconds']:9.4f} {ratio}")
    normal = result["hotpotqa_per_1000"]
    print(f"HotpotQA ({normal['passages']} passages): {normal['best']:.3f} s per 1,000 (median {normal['median']:.3f})")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
