"""Issue 21, session 38 (a failure, recorded): a title "X, Y" named "X" by the text extractor.

`CooccurrenceExtractor` cuts a mention at a comma ("born in West Chicago, Illinois" gives "West Chicago"
and "Illinois"), but names a passage's topic by its whole title ("West Chicago, Illinois"), so no
mention ever matches a comma title. This prototype names such a topic by the part before the first
comma (after the bracket qualifier is dropped, as now), by patching the extractor's `_topic`, re-ingests
the three raw-text dev sets and compares against the default, with the pooled CV of `benchmarks.raw_text`:

    python -m benchmarks.comma_titles   # -> results/issue21/comma_titles_grid.json, comma_titles_cv.json
"""

from __future__ import annotations

import json
import os
from collections import Counter

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.raw_text import CACHE, RESULTS, pooled_cv  # noqa: E402
from llama_index_graphrag_milvus.bench.benchmark import run_benchmark  # noqa: E402
from llama_index_graphrag_milvus.ingest.extract import cooccurrence  # noqa: E402

DATA = {"musique_text": "/work/shared/data/musique", "hotpotqa": "/work/shared/data/hotpotqa",
        "wiki2": "/work/shared/data/wiki2"}
OUT = RESULTS / "issue21" / "comma_titles_grid.json"
TOPIC = cooccurrence._topic


def comma_topic(title: str) -> str:
    """"West Chicago, Illinois" -> "West Chicago"; a title without a capitalised head is kept."""
    name = TOPIC(title)
    head = name.split(", ", 1)[0].strip()
    return head if head and head != name and head[:1].isupper() else name


def main() -> None:
    done = json.loads(OUT.read_text()) if OUT.exists() else {}
    for variant, topic in (("default", TOPIC), ("comma", comma_topic)):
        cooccurrence._topic = topic
        for name, directory in DATA.items():
            if f"{variant}/{name}" not in done:
                report = run_benchmark(directory, f"/tmp/comma_{variant}_{name}.json", methods={"graphrag": {}},
                                       triples=False, cache_dir=CACHE, uri=str(CACHE / f"comma_{variant}_{name}.db"),
                                       chart=False)
                done[f"{variant}/{name}"] = {key: report[key] for key in ("counts", "per_question", "vs_dense")}
                OUT.write_text(json.dumps(done, indent=1))
    cooccurrence._topic = TOPIC
    result = pooled_cv(done, ["default", "comma"], list(DATA), splits=10)
    OUT.with_name("comma_titles_cv.json").write_text(json.dumps(result, indent=1))
    print(Counter(result["chosen_per_fold"]))


if __name__ == "__main__":
    main()
