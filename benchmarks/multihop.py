"""Multi-hop recall benchmark: dense retrieval vs Graph RAG configurations on a MuSiQue-format set.

    python -m benchmarks.multihop --data ../shared/data/musique --out benchmarks/results/musique.json

The same as `graphrag-milvus eval --data DIR --out FILE`.
"""

from llama_index_graphrag_milvus.cli import main

if __name__ == "__main__":
    import sys

    main(["eval", *sys.argv[1:]])
