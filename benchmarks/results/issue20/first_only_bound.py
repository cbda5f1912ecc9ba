"""Bound for the half-right target: the oracle's first pick alone (no random picks), each trust."""
import json, sys
from pathlib import Path
import benchmarks.llm_trust as lt
from llama_index_graphrag_milvus.bench import scripted as sc
orig = sc.scripted_methods
def methods(store, dataset):
    gold = sc._gold_relations(store, dataset)
    texts = store.describe(sorted({r for rs in gold.values() for r in rs}))
    stated = {q: {texts[r].text for r in rs if r in texts} for q, rs in gold.items()}
    return {"llm_first_only": {"llm": sc.half_right_llm(stated, n=0)}, "llm_half_right": {"llm": sc.half_right_llm(stated)}}
lt.scripted_methods = methods
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding
from llama_index_graphrag_milvus.embeddings import local_embed_model
embed = CachedEmbedding(local_embed_model(), Path(".cache/graphrag-milvus/embeddings.sqlite"))
out = {}
for data in lt.DEV_SETS:
    out[Path(data).name] = lt.run_set(data, Path("/tmp"), embed, True, {}, ("confirmed", "always"))
json.dump(out, open("/work/s33/first_only.json", "w"), indent=1)
