"""GraphRAGTransform: the ingestion step that writes passages and their triplets into the store."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Dict, List, Optional, Sequence

from llama_index.core.async_utils import asyncio_run, run_jobs
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import BaseNode, TransformComponent

from llama_index_graphrag_milvus.extract import (
    TRIPLETS_KEY,
    aextract_triplets,
    as_metadata,
    exclude_from_content,
    given_triplets,
)
from llama_index_graphrag_milvus.prompts import TRIPLET_EXTRACT_PROMPT
from llama_index_graphrag_milvus.schema import Triplet
from llama_index_graphrag_milvus.store import MilvusGraphStore

logger = logging.getLogger(__name__)


class GraphRAGTransform(TransformComponent):
    """Ingest passage nodes into a `MilvusGraphStore`: entities, relations and passages, embedded.

    Triplets come from `node.metadata["triplets"]` (`[[subject, predicate, object], ...]`), or from a
    LlamaIndex KG extractor placed before this step (e.g. `SimpleLLMPathExtractor`), or, when neither is
    there and `llm` is given, from an extraction prompt. The triplets key is kept out of the passage's
    embedded text and LLM context. Nodes are returned unchanged otherwise, so later steps still run.

    Args:
        store: The store to write to.
        llm: Extracts triplets from nodes that carry none. Without it such nodes are stored as passages
            with no relations (still found by dense retrieval).
        extract_prompt: The extraction prompt (`{text}`, `{max_triplets}`; answers JSON).
        max_triplets_per_node: At most this many triplets are extracted from one node.
        num_workers: Concurrent LLM extraction calls.
        triplets_key: The metadata key holding given triplets.
        raise_on_error: Raise on a failed extraction instead of logging it.
        show_progress: Show a progress bar for LLM extraction.
    """

    store: MilvusGraphStore = Field(exclude=True)
    llm: Optional[LLM] = Field(default=None, exclude=True)
    extract_prompt: PromptTemplate = Field(default=TRIPLET_EXTRACT_PROMPT)
    max_triplets_per_node: int = 20
    num_workers: int = 4
    triplets_key: str = TRIPLETS_KEY
    raise_on_error: bool = False
    show_progress: bool = False

    def __init__(self, store: MilvusGraphStore, llm: Optional[LLM] = None, **kwargs: Any) -> None:
        if isinstance(kwargs.get("extract_prompt"), str):
            kwargs["extract_prompt"] = PromptTemplate(kwargs["extract_prompt"])
        super().__init__(store=store, llm=llm, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "GraphRAGTransform"

    def to_dict(self, **kwargs: Any) -> Dict[str, Any]:
        # IngestionPipeline caches on this dict: name the store, so another store is never skipped.
        data = super().to_dict(**kwargs)
        data["store"] = repr(self.store)
        return data

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        triplets = self._given(nodes)
        if self.llm is not None and any(t is None for t in triplets):
            triplets = asyncio_run(self._extract_missing(nodes, triplets))
        self.store.add(nodes, [t or [] for t in triplets])
        return nodes

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        triplets = self._given(nodes)
        if self.llm is not None and any(t is None for t in triplets):
            triplets = await self._extract_missing(nodes, triplets)
        await asyncio.to_thread(self.store.add, nodes, [t or [] for t in triplets])
        return nodes

    def _given(self, nodes: Sequence[BaseNode]) -> List[Optional[List[Triplet]]]:
        triplets = []
        for node in nodes:
            exclude_from_content(node, self.triplets_key)
            triplets.append(given_triplets(node, self.triplets_key))
        missing = sum(t is None for t in triplets)
        if missing and self.llm is None:
            logger.info(
                "%d of %d nodes carry no triplets and no llm was given: they are stored as passages "
                "without relations.",
                missing,
                len(nodes),
            )
        return triplets

    async def _extract_missing(
        self, nodes: Sequence[BaseNode], triplets: List[Optional[List[Triplet]]]
    ) -> List[Optional[List[Triplet]]]:
        assert self.llm is not None
        todo = [i for i, t in enumerate(triplets) if t is None]
        jobs = [
            aextract_triplets(
                self.llm, self.extract_prompt, nodes[i], self.max_triplets_per_node, self.raise_on_error
            )
            for i in todo
        ]
        results = await run_jobs(
            jobs, workers=self.num_workers, show_progress=self.show_progress, desc="Extracting triplets"
        )
        triplets = list(triplets)
        for i, extracted in zip(todo, results):
            triplets[i] = extracted
            nodes[i].metadata[self.triplets_key] = as_metadata(extracted)
        return triplets
