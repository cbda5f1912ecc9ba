"""The write side: where triplets come from (`extract`: metadata and KG extractors, an LLM, raw text),
the rows of a write, built and checked before anything is written (`rows`), and the writes and deletes
themselves (`writes`).

May import: `errors`, `schema`, `llm` (prompts, parsing), `milvus`, `graph`, `backends`.
"""
