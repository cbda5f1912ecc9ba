"""GraphRAGTransform: the ingestion step that writes passages and their triplets into the store."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple

from llama_index.core.async_utils import run_jobs
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent

from llama_index_graphrag_milvus.ingest.extract import (
    TRIPLETS_KEY,
    CooccurrenceExtractor,
    as_metadata,
    exclude_from_content,
    given_triplets,
)
from llama_index_graphrag_milvus.ingest.extract.cooccurrence import with_text_links
from llama_index_graphrag_milvus.ingest.extract.given import PENDING_FILTER, PENDING_KEY, is_pending, mark_pending
from llama_index_graphrag_milvus.ingest.extract.llm import EXTRACTION_KEY, StoredExtractions, aextract
from llama_index_graphrag_milvus.llm.guard import guard_of, run_sync
from llama_index_graphrag_milvus.llm.resolve import DEFAULT, LLMType, resolve_llm
from llama_index_graphrag_milvus.llm.prompts import TRIPLET_EXTRACT_PROMPT
from llama_index_graphrag_milvus.milvus.collections import PASSAGES
from llama_index_graphrag_milvus.schema import Triplet
from llama_index_graphrag_milvus.store import MilvusGraphStore

logger = logging.getLogger(__name__)


class GraphRAGTransform(TransformComponent):
    """Ingest passage nodes into a `MilvusGraphStore`: entities, relations and passages, embedded.

    Triplets come from `node.metadata["triplets"]` (`[[subject, predicate, object], ...]`), or from a
    LlamaIndex KG extractor placed before this step (e.g. `SimpleLLMPathExtractor`). Nodes that carry
    none get theirs from, in this order:
    - `extractor`, any `TransformComponent` that leaves triplets in `metadata["triplets"]` or LlamaIndex
      KG output (`KG_RELATIONS_KEY`): spaCy, GLiNER, an LLM extractor you already have;
    - else, when there is an LLM (`llm`; by default `Settings.llm`, see below), the extraction prompt:
      one LLM call per such node (nodes with no text are skipped), `num_workers` of them at a time;
    - else `CooccurrenceExtractor()`: named entities co-occurring in a sentence, no LLM, no model.
    So a graph is always built; a WARNING per call says how many nodes had no triplets and what was done.
    Nodes that carry triplets never cost an LLM call, nor do nodes stored already whose stored triplets
    the LLM gave for the same input, prompt and model (a refresh of a document with one chunk edited
    asks about that chunk alone).

    With `text_links` (the default), every passage also gets its text's links (`CooccurrenceExtractor`:
    its title to each name it states, names sharing a sentence) beside the triplets it carries or the LLM
    gave, when written (not in its metadata): triplets state facts, title links what a passage is about.

    When the LLM gives no usable answer for a node, the node gets `CooccurrenceExtractor`'s triplets
    instead. When its call failed (an error, no answer within the deadline, or no call at all: after
    repeated failures the LLM's circuit breaker stops calling it for a while, see `llm.guard`), the node
    is also marked pending (`metadata["graphrag_pending_extraction"]`, stored with the passage in Milvus):
    the next ingest of it, or `GraphRAGIndex.refresh_ref_docs`, asks the LLM again, and its triplets then
    replace the co-occurrence ones in its metadata (with `text_links`, the text's links stay beside them
    in the graph). `count_pending(store)` counts the pending passages. While the LLM is
    not known to answer (its first call in the process, or after a failure), one extraction call goes
    first, alone: in an outage it is the only call made.

    The triplets key is kept out of the passage's embedded text and LLM context. Nodes are returned
    unchanged otherwise, so later steps still run.

    Args:
        store: The store to write to.
        llm: Extracts triplets from nodes that carry none (unless `extractor` is given). By default
            ("default") LlamaIndex's `Settings.llm` if you set it, else OpenAI if OPENAI_API_KEY is set,
            else none; resolved once, here (`llm.resolve.resolve_llm`). `llm=None` makes no LLM call at all.
            The attribute holds the resolved LLM, or None.
        extractor: Extracts triplets from nodes that carry none; it sees only those nodes.
        extract_prompt: The extraction prompt (`{text}`, `{max_triplets}`; answers JSON).
        max_triplets_per_node: At most this many triplets are extracted from one node by the LLM.
        num_workers: Concurrent LLM extraction calls.
        text_links: Add the text's own links to the triplets a passage carries or the LLM gave (see above).
        triplets_key: The metadata key holding given triplets.
        raise_on_error: Raise on a failed extraction instead of logging it.
        show_progress: Show a progress bar for LLM extraction.
    """

    store: MilvusGraphStore = Field(exclude=True)
    llm: Optional[LLM] = Field(default=DEFAULT, exclude=True, validate_default=True)
    extractor: Optional[TransformComponent] = Field(default=None, exclude=True)
    extract_prompt: PromptTemplate = Field(default=TRIPLET_EXTRACT_PROMPT)
    max_triplets_per_node: int = 20
    num_workers: int = 4
    text_links: bool = True
    triplets_key: str = TRIPLETS_KEY
    raise_on_error: bool = False
    show_progress: bool = False
    _built: Dict[str, Dict[str, Any]] = PrivateAttr(default_factory=dict)

    def __init__(
        self,
        store: MilvusGraphStore,
        llm: LLMType = DEFAULT,
        extractor: Optional[TransformComponent] = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(kwargs.get("extract_prompt"), str):
            kwargs["extract_prompt"] = PromptTemplate(kwargs["extract_prompt"])
        super().__init__(store=store, llm=llm, extractor=extractor, **kwargs)

    @field_validator("llm", mode="before")
    @classmethod
    def _resolve_llm(cls, llm: Any) -> Optional[LLM]:
        return resolve_llm(llm)

    @classmethod
    def class_name(cls) -> str:
        return "GraphRAGTransform"

    def to_dict(self, **kwargs: Any) -> Dict[str, Any]:
        # IngestionPipeline caches a step's output on a hash of this dict and of the nodes. This step's
        # real output is its write to the store, so the hash names the store and its current generation:
        # once the store changed (a delete, a clear, an overwrite, another writer), a cached run never
        # stands in for a write the store no longer holds.
        data = super().to_dict(**kwargs)
        data["store"] = repr(self.store)
        try:
            data["store_generation"] = self.store.generation
        except Exception:  # a closed store: no cache hit can be right
            data["store_generation"] = uuid.uuid4().hex
        if self.extractor is not None:
            data["extractor"] = repr(self.extractor)
        return data

    @property
    def built(self) -> Dict[str, Dict[str, Any]]:
        """How the graph was built so far: for each source ("given triplets", the extractor's name, "LLM",
        or "text links"), the passages and triplets it gave."""
        return {source: dict(counts) for source, counts in self._built.items()}

    def _source(self) -> str:
        if self.extractor is not None:
            return type(self.extractor).__name__
        return "LLM" if self.llm is not None else CooccurrenceExtractor.class_name()

    def __getstate__(self) -> Dict[str, Any]:
        raise TypeError(
            "GraphRAGTransform writes to a MilvusGraphStore open in this process and cannot be sent to "
            "worker processes: run the pipeline with num_workers=1 (the default). Extraction runs "
            "concurrently anyway: GraphRAGTransform(num_workers=...)."
        )

    @property
    def extracts_with_llm(self) -> bool:
        """Whether nodes without triplets are extracted with the LLM (so pending nodes are retried)."""
        return self.extractor is None and self.llm is not None

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return run_sync(self.acall(nodes, **kwargs))

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        triplets = self._given(nodes)
        todo, fallback = [i for i, t in enumerate(triplets) if t is None], []
        if todo and self.extracts_with_llm:
            triplets, fallback = await self._extract_missing(nodes, triplets)
        elif todo:
            extractor = self.extractor or CooccurrenceExtractor(triplets_key=self.triplets_key)
            self._extracted(nodes, triplets, todo, await extractor.acall([nodes[i] for i in todo]))
        linked = await asyncio.to_thread(self._with_text_links, nodes, triplets, todo, fallback)
        self._report(nodes, triplets, linked, todo, fallback)
        await self.store.aadd(nodes, linked)  # it also rewrites a passage whose pending mark alone changed
        return nodes

    def _given(self, nodes: Sequence[BaseNode]) -> List[Optional[List[Triplet]]]:
        """The triplets each node carries (None: none). A pending node's triplets (the no-LLM extractor's)
        are dropped when this transform extracts with the LLM: it asks again."""
        triplets = []
        for node in nodes:
            exclude_from_content(node, self.triplets_key)
            if PENDING_KEY in node.metadata:
                exclude_from_content(node, PENDING_KEY)
                if is_pending(node) and self.extracts_with_llm:
                    node.metadata.pop(self.triplets_key, None)
            triplets.append(given_triplets(node, self.triplets_key))
        return triplets

    def _with_text_links(
        self, nodes: Sequence[BaseNode], triplets: List[Optional[List[Triplet]]], todo: List[int], fallback: List[int]
    ) -> List[List[Triplet]]:
        """Each node's triplets, then (`text_links`) its text's links, except where CooccurrenceExtractor gave them."""
        if not self.text_links:
            return [list(t or []) for t in triplets]
        own = self.extractor if isinstance(self.extractor, CooccurrenceExtractor) else None  # as configured
        skip = set(fallback if self.extracts_with_llm else todo if own is not None or self.extractor is None else ())
        linked, added = with_text_links(nodes, triplets, skip, own)
        _count(self._built, "text links", [new for new in added if new])
        return linked

    def _extracted(
        self, nodes: Sequence[BaseNode], triplets: List[Optional[List[Triplet]]], todo: List[int], out: Any
    ) -> None:
        """Read the triplets an extractor left on the nodes it was given (or on the nodes it returned)."""
        out = list(out) if out is not None else []
        if len(out) != len(todo):
            raise ValueError(
                f"extractor {self._source()} returned {len(out)} nodes for {len(todo)}: it must return the "
                "nodes it was given, with their triplets in metadata"
            )
        for i, node in zip(todo, out):
            if node is not nodes[i]:
                nodes[i].metadata.update(node.metadata)
            nodes[i].metadata.pop(EXTRACTION_KEY, None)  # not the LLM's triplets
            exclude_from_content(nodes[i], self.triplets_key)
            triplets[i] = given_triplets(nodes[i], self.triplets_key) or []
            nodes[i].metadata[self.triplets_key] = as_metadata(triplets[i])

    def _report(
        self, nodes: Sequence[BaseNode], triplets: List[Optional[List[Triplet]]], linked: List[List[Triplet]],
        todo: List[int], fallback: List[int],
    ) -> None:
        """Count what each source gave (`built`); when some nodes carried no triplets, one WARNING."""
        done, instead = set(todo), set(fallback)
        _count(self._built, "given triplets", [t for i, t in enumerate(triplets) if i not in done])
        _count(self._built, self._source(), [triplets[i] for i in todo if i not in instead])
        _count(self._built, CooccurrenceExtractor.class_name(), [triplets[i] for i in fallback])
        if not todo:
            return
        extracted = sum(len(triplets[i] or []) for i in todo if i not in instead)
        if self.extractor is not None:
            how = f"; extracted {extracted} triplets with the given extractor {self._source()}"
        elif self.llm is not None:
            how = f"; got {extracted} triplets from the LLM" + _fallback_report(nodes, triplets, fallback)
        else:
            how = (
                f" and no llm was given: extracted {extracted} triplets with {self._source()} (names that "
                "co-occur in a sentence; pass llm= or extractor=, or set Settings.llm, for better triplets)"
            )
        empty = sum(not linked[i] for i in todo if i not in instead)
        logger.warning("%d of %d nodes carry no triplets%s%s.", len(todo), len(nodes), how,
                       f"; {empty} of them gave none and are stored as passages only" if empty else "")

    async def _extract_missing(
        self, nodes: Sequence[BaseNode], triplets: List[Optional[List[Triplet]]]
    ) -> Tuple[List[Optional[List[Triplet]]], List[int]]:
        """Extract with the LLM the triplets of the nodes that carry none; return every node's triplets and
        the nodes that got `CooccurrenceExtractor`'s instead (no usable answer; pending if the call failed)."""
        assert self.llm is not None
        todo = [i for i, t in enumerate(triplets) if t is None]
        triplets = list(triplets)
        for i in todo:  # the store skips nodes with no text: no LLM call for them
            if not nodes[i].get_content(MetadataMode.NONE).strip():
                triplets[i] = []
                nodes[i].metadata[self.triplets_key] = []
                mark_pending(nodes[i], False)
        stored = StoredExtractions(self.store.get_passages, self.llm, self.extract_prompt, self.max_triplets_per_node,
                                   self.triplets_key)
        todo = await asyncio.to_thread(stored.reuse, nodes, triplets, [i for i in todo if triplets[i] is None])
        jobs = [
            aextract(self.llm, self.extract_prompt, nodes[i], self.max_triplets_per_node, self.raise_on_error)
            for i in todo
        ]
        # while the LLM is not known to answer (its first calls, or after failures) one call goes alone
        # first: if it fails, the breaker opens and the other calls are not made
        first = [await jobs.pop(0)] if jobs and not guard_of(self.llm).answering else []
        results = first + await run_jobs(
            jobs, workers=self.num_workers, show_progress=self.show_progress, desc="Extracting triplets"
        )
        for i, extracted in zip(todo, results):
            if extracted.triplets is not None:
                triplets[i] = extracted.triplets
                nodes[i].metadata[self.triplets_key] = as_metadata(extracted.triplets)
                nodes[i].metadata[EXTRACTION_KEY] = stored.digest(i, nodes[i])
            mark_pending(nodes[i], extracted.failed)
        fallback = [i for i, extracted in zip(todo, results) if extracted.triplets is None]
        if fallback:
            extractor = CooccurrenceExtractor(triplets_key=self.triplets_key)
            self._extracted(nodes, triplets, fallback, await asyncio.to_thread(extractor, [nodes[i] for i in fallback]))
        return triplets, fallback


def _count(built: Dict[str, Dict[str, Any]], source: str, rows: List[Optional[List[Triplet]]]) -> None:
    """Add the passages and triplets a source gave to `built`."""
    if rows:
        counts = built.setdefault(source, {"passages": 0, "triplets": 0})
        counts["passages"] += len(rows)
        counts["triplets"] += sum(len(t or []) for t in rows)


def count_pending(store: MilvusGraphStore) -> int:
    """The store's passages whose LLM extraction failed and awaits another try (marked pending)."""
    return int(store.collections.query(PASSAGES, PENDING_FILTER, ["count(*)"])[0]["count(*)"])


def _fallback_report(nodes: Sequence[BaseNode], triplets: List[Optional[List[Triplet]]], fallback: List[int]) -> str:
    """What was done for the nodes the LLM gave no usable answer for."""
    if not fallback:
        return ""
    failed = sum(is_pending(nodes[i]) for i in fallback)
    unusable = len(fallback) - failed
    return (
        f"; {len(fallback)} of them got {sum(len(triplets[i] or []) for i in fallback)} triplets from "
        f"{CooccurrenceExtractor.class_name()} (no LLM) instead"
        + (f": {unusable} answered unusably" if unusable else "")
        + (
            f"{', and' if unusable else ':'} the LLM call failed for {failed}, kept pending ({PENDING_KEY}): the "
            "next ingest of them or refresh_ref_docs extracts them with the LLM"
            if failed else ""
        )
    )
