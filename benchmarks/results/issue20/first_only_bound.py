"""The half-right model's ceiling: the oracle's first pick alone (no random picks), beside the half-right
model, under `llm_trust` "confirmed" and "always", on the three dev sets' union stores.

    python -m benchmarks.identity /tmp/identity.json        # once: the stores in /tmp
    PYTHONPATH=. python benchmarks/results/issue20/first_only_bound.py   # -> llm_first_only_bound.json
"""

import json
from pathlib import Path

import benchmarks.llm_trust as llm_trust
from llama_index_graphrag_milvus.bench import scripted
from llama_index_graphrag_milvus.bench.evaluation import CachedEmbedding
from llama_index_graphrag_milvus.embeddings import local_embed_model


def methods(store, dataset):
    gold = scripted._gold_relations(store, dataset)
    texts = store.describe(sorted({r for rs in gold.values() for r in rs}))
    stated = {q: {texts[r].text for r in rs if r in texts} for q, rs in gold.items()}
    return {
        "llm_first_only": {"llm": scripted.half_right_llm(stated, n=0)},
        "llm_half_right": {"llm": scripted.half_right_llm(stated)},
    }


if __name__ == "__main__":
    llm_trust.quiet()
    llm_trust.scripted_methods = methods
    embed = CachedEmbedding(local_embed_model(), Path(".cache/graphrag-milvus/embeddings.sqlite"))
    report = {
        Path(data).name: llm_trust.run_set(data, Path("/tmp"), embed, True, {}, ("confirmed", "always"))
        for data in llm_trust.DEV_SETS
    }
    out = Path(__file__).with_name("llm_first_only_bound.json")
    out.write_text(json.dumps(report, indent=1))
