"""Rankers: how the candidate relations of a retrieval order its passages, behind one protocol.

- `ChainRanker`: each candidate scores its similarity plus that of its best
  neighbouring candidate (sharing an entity or a synonym), so two-step chains count; a passage scores
  its dense similarity plus `graph_weight` times its best relation's chain score.
- `PPRRanker`: HippoRAG 2's personalized PageRank on the candidates' entity–passage subgraph, restarting
  at the entities of the relations most similar to the question and at the passages, by dense similarity.
- `HopRanker`: the top dense passage, then the passages about the entities it names: a bridge
  question's second hop.
- `TopicRanker`: the passages about the entities the question names (a comparison's own passages).
- `FusedRanker` (the default): reciprocal rank fusion of PPR, chain, hop and topic.
- `SimilarityRanker`: the notebook's order: the passages of the most similar relations, then dense.
- `LLMRanker`: an LLM picks relations among the best of another ranker (`base`, default fused), in a
  one-shot chain-of-thought prompt answered in JSON; a pick the graph confirms as a chain leads, any
  other joins the fusion beside the base's rankings (`llm_trust`). An unusable answer gives the base
  ranking.

A user can pass any object with `name`, `needs_context` and `rank`; one that waits on an LLM writes
its body as the async `arank`, and its `rank` runs it (`llm.guard.run_sync`), as `LLMRanker` does.

May import: `backends.base` (the `Neighbourhood` read), `graph` (the `Graph` and its walks), `llm`, `schema`.
"""

from llama_index_graphrag_milvus.ranking.base import Ranker, Ranking, RankTask
from llama_index_graphrag_milvus.ranking.base import Scored as Scored
from llama_index_graphrag_milvus.ranking.base import arank as arank
from llama_index_graphrag_milvus.ranking.base import chosen_relations as chosen_relations
from llama_index_graphrag_milvus.ranking.base import fuse as fuse
from llama_index_graphrag_milvus.ranking.chain import ChainRanker
from llama_index_graphrag_milvus.ranking.fused import FusedRanker
from llama_index_graphrag_milvus.ranking.fused import ThenDense
from llama_index_graphrag_milvus.ranking.fused import ranker_named as ranker_named
from llama_index_graphrag_milvus.ranking.hop import HopRanker
from llama_index_graphrag_milvus.ranking.llm import LLMRanker
from llama_index_graphrag_milvus.ranking.ppr import PPRRanker
from llama_index_graphrag_milvus.ranking.similarity import SimilarityRanker
from llama_index_graphrag_milvus.ranking.topic import TopicRanker

# The rankers, and the protocol a user's own ranker implements. The names re-exported above with
# `as` (`arank`, `fuse`, `ranker_named`, ...) are for the retriever, not the public API.
__all__ = [
    "ChainRanker",
    "FusedRanker",
    "HopRanker",
    "LLMRanker",
    "PPRRanker",
    "Ranker",
    "Ranking",
    "RankTask",
    "SimilarityRanker",
    "ThenDense",
    "TopicRanker",
]
