"""Scale benchmark: ingest against a raw insert of the same rows, and retrieval, expansion, open and memory,
on a synthetic corpus of a given number of relations.

    python -m benchmarks.scale --sizes 1e4,1e5                # Milvus Lite
    python -m benchmarks.scale --sizes 1e4,1e5 --server       # Milvus 2.3.5 standalone, private network namespace
    python -m benchmarks.scale --report                       # the table of benchmarks/results/scale.json

For each size a seeded corpus is drawn (`corpus.py`: power-law entity degrees, 3–10 triplets a passage),
embedded with a 32-dim hash embedding so that the embedder is not what is measured, and written two
ways into fresh collections (`writes.py`): through `GraphRAGTransform` (the ingest, 1,000 TextNodes a
call), and as a raw `MilvusClient.insert` of the same rows built by the package's row code, embedding
included (the floor Milvus sets). Reported: relations/s of each and the ratio ingest / raw.

The ingested store is then read (`reads.py`), each adjacency mode (memory, milvus) in a fresh process:
open time, the client's resident memory above an empty store, retrieval latency (100 questions naming
an entity, precomputed embeddings, `similarity_top_k=10`, no LLM), Milvus calls a retrieval, whether the
two modes return the same top 10, and the in-memory adjacency's degree-1 / degree-2 expansion. On Lite
also: open from Milvus' rows against the snapshot file, and the Python heap an open retains per relation.

Entries merge into the results file by size (`-server` on the server); the table, and a linear
extrapolation of the largest entry's rates to 10^9 relations, go to stdout. The machine is shared:
read ratios measured in one run rather than absolute times.
"""
