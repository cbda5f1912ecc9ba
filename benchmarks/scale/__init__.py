"""Scale benchmark of the graph part: ingest, open, memory, expansion and retrieval latency.

    python -m benchmarks.scale --sizes 1e3,1e4,1e5,1e6 --out benchmarks/results/scale.json
    python -m benchmarks.scale --sizes 1e3,1e4 --shape issue10 --out /tmp/scale_issue10.json

For each size (the number of distinct relations) a seeded synthetic corpus is generated (`corpus`: shape
"default", 3–10 triplets a passage, or "issue10", 6 a passage and questions naming two entities, run
with expansion_degree=2), ingested through `GraphRAGTransform` into a fresh Milvus Lite store (`ingest`),
and measured (`measure`):

- ingest throughput, split into embedding (a 32-dim `HashEmbedding`, so the embedder is not what is
  measured), Milvus upserts and the rest (our Python and LlamaIndex's node handling);
- reopening the store, from the rows in Milvus and from the snapshot file saved on close;
- memory: tracemalloc around opening a store (from either source), per relation, with Milvus Lite's
  share (it serves from this process) apart, and the in-memory adjacency's structures one by one;
- expansion latency at degrees 1 and 2 with ~3 entity and ~3 relation seeds, and the candidate set size;
- whole retrieval latency with no LLM (`GraphRAGRetriever.retrieve`, a precomputed query embedding,
  `--degree`), split by step from the retriever's instrumentation events;
- a write, then reads (what a write costs the next retrieval);
- the reference notebook's algorithm side by side (`reference`), where it fits in ~2 GB and ~5 minutes.

Results merge into the JSON file (one entry per size and variant), with a log-log PNG of the cost curves
next to it and a summary table on stdout (`report`). Every use of the package's internals is in
`internals`. Time ratios matter more than absolute times: the machine is shared.
"""
