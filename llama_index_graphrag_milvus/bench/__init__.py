"""Measuring it: datasets, Recall@k and paired bootstrap (`evaluation`), the multi-hop benchmark
(`benchmark`) and its tables (`report`), scripted LLMs (`scripted`), and the offline demo with its
bundled MuSiQue sample (`demo`, `data/`).

May import: the whole package, through its public entry points.
"""
