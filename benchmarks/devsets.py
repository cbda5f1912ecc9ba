"""What the dev-set benchmarks share. A data set is a directory of `corpus.jsonl` and `questions.jsonl`
(MuSiQue's also `triples.jsonl`), named by `--data DIR ...` or found under `$GRAPHRAG_DATA` (a directory
holding musique/, hotpotqa/, wiki2/). Embeddings are cached in `$GRAPHRAG_CACHE` (default
`.cache/graphrag-milvus`), so a second run embeds nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, List, Optional, Sequence

DEV_SETS = ("musique", "hotpotqa", "wiki2")
RESULTS = Path(__file__).resolve().parent / "results"


def data_dirs(given: Optional[Sequence[str]] = None, names: Sequence[str] = DEV_SETS) -> List[Path]:
    """The data directories: `given` (from `--data`), else `$GRAPHRAG_DATA/<name>` for each name."""
    if given:
        dirs = [Path(d) for d in given]
    elif os.environ.get("GRAPHRAG_DATA"):
        dirs = [Path(os.environ["GRAPHRAG_DATA"]) / name for name in names]
    else:
        raise SystemExit("no data sets: name the data directories (--data DIR ...) or set GRAPHRAG_DATA to a directory holding "
                         f"{', '.join(n + '/' for n in names)}")
    missing = [str(d) for d in dirs if not (d / "corpus.jsonl").is_file()]
    if missing:
        raise SystemExit(f"no corpus.jsonl in {', '.join(missing)}: pass --data DIR ... or set GRAPHRAG_DATA "
                         "to a directory holding musique/, hotpotqa/, wiki2/")
    return dirs


def cached_embed_model() -> Any:
    """all-MiniLM-L6-v2 behind the on-disk embedding cache of `$GRAPHRAG_CACHE`."""
    from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding
    from llama_index_graphrag_milvus.embeddings import local_embed_model

    cache = Path(os.environ.get("GRAPHRAG_CACHE", ".cache/graphrag-milvus"))
    return CachedEmbedding(local_embed_model(), cache / "embeddings.sqlite")


def dev_store(data: Path, embed: Any, db_dir: Path, reuse: bool = False, **dataset_options: Any) -> tuple:
    """The data set and a store of it in `db_dir/<name>.db`, built as `graphrag-milvus eval` builds it
    (`GraphRAGTransform(store, llm=None)`, the default extractor and text links), or reopened when `reuse`
    and it exists. Returns (dataset, store)."""
    from llama_index_graphrag_milvus import GraphRAGTransform, MilvusGraphStore
    from llama_index_graphrag_milvus.bench.evaluation import load_dataset

    dataset = load_dataset(data, **dataset_options)
    uri = Path(db_dir) / f"{dataset.name}.db"
    fresh = not (reuse and uri.exists())
    store = MilvusGraphStore(uri=str(uri), embed_model=embed, collection_prefix="bench", overwrite=fresh)
    if fresh:
        GraphRAGTransform(store=store, llm=None)(dataset.nodes)
    return dataset, store


def write_result(path: str | Path, report: Any) -> Path:
    """`report` as indented JSON at `path` (folders made)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return path
