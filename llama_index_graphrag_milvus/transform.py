"""GraphRAGTransform: the ingestion step that writes passages and their triplets into the store."""

from __future__ import annotations

import asyncio
import logging
import uuid
import warnings
from typing import Any, Dict, List, Optional, Sequence

from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent

from llama_index_graphrag_milvus.ingest.extract import (
    TRIPLETS_KEY,
    CooccurrenceExtractor,
    LLMTripletExtractor,
    as_metadata,
    exclude_from_content,
    given_triplets,
)
from llama_index_graphrag_milvus.ingest.extract.cooccurrence import with_text_links
from llama_index_graphrag_milvus.ingest.extract.given import (
    EXTRACTION_KEY,
    PENDING_FILTER,
    PENDING_KEY,
    is_pending,
)
from llama_index_graphrag_milvus.errors import unexpected_keywords
from llama_index_graphrag_milvus.llm.guard import run_sync
from llama_index_graphrag_milvus.llm.resolve import is_default, resolve_llm
from llama_index_graphrag_milvus.milvus.collections import PASSAGES
from llama_index_graphrag_milvus.schema import Triplet
from llama_index_graphrag_milvus.store import STORE_PARAMETERS, MilvusGraphStore

logger = logging.getLogger(__name__)

#: Relations a passage under which the free extractor's ingest gets a WARNING naming LLM extraction.
SPARSE_RELATIONS_PER_PASSAGE = 1.0
#: The log line of an ingest where nodes carried no triplets, and its end when there is little to link.
_NO_TRIPLETS = "%d of %d nodes carry no triplets; %s gave %d triplets%s%s."
_LITTLE = (
    ": {} relations for {} passages, little to link (text without names or titles?). For a richer graph, "
    "extract with an LLM: GraphRAGTransform(extractor=LLMTripletExtractor(llm=...)), or "
    "GraphRAGIndex.from_documents(documents, extractor=LLMTripletExtractor(llm=...))"
)
#: The triplets each node carries (None: none), and each node's triplets as written.
_Triplets = List[Optional[List[Triplet]]]
_Linked = List[List[Triplet]]
_MOVED = (
    "GraphRAGTransform(llm=..., extract_prompt=..., num_workers=..., ...) is deprecated and will be removed "
    "in the next release: the graph is built with no LLM call unless you ask for one, with "
    "extractor=LLMTripletExtractor(llm=..., extract_prompt=..., num_workers=..., ...)"
)
#: Arguments that moved to `LLMTripletExtractor` (with `llm`), still accepted for one release.
MOVED_TO_EXTRACTOR = tuple(
    "extract_prompt max_triplets_per_node num_workers raise_on_error show_progress".split()
)


class GraphRAGTransform(TransformComponent):
    """Ingest passage nodes into a `MilvusGraphStore`: entities, relations and passages, embedded.

    A node's triplets are those it carries, in `metadata["triplets"]` (`[[subject, predicate, object],
    ...]`) or as a LlamaIndex KG extractor before this step leaves them. Nodes that carry none get theirs
    from `extractor`: by default `CooccurrenceExtractor()` (no LLM, no model; a WARNING names LLM
    extraction when it finds under one relation a passage); any `TransformComponent` that leaves triplets
    in either form; or `LLMTripletExtractor(llm=...)`, one paid LLM call a node, whose failed nodes stay
    pending (`count_pending`) until their next ingest or `GraphRAGIndex.refresh_ref_docs`. With
    `text_links`, a passage's text links (its title to each name it states, names sharing a sentence) are
    written beside its triplets. `built` counts what each source gave. Nodes are returned as they came,
    the triplets key kept out of their embedded text and LLM context.

    Deprecated, still accepted for one release with a FutureWarning: `llm=` with an LLM (and
    `extract_prompt`, `max_triplets_per_node`, `num_workers`, `raise_on_error`, `show_progress`), now
    `extractor=LLMTripletExtractor(llm=..., ...)`. `llm=None` is accepted silently: it is the default.

    Attributes:
        store: The store to write to.
        extractor: Extracts triplets from nodes that carry none (None: `CooccurrenceExtractor()`).
        text_links: Add the text's own links to the triplets a passage carries or an extractor gave.
        triplets_key: The metadata key holding given triplets.
    """

    store: MilvusGraphStore = Field(exclude=True)
    extractor: Optional[TransformComponent] = Field(default=None, exclude=True)
    text_links: bool = True
    triplets_key: str = TRIPLETS_KEY
    _built: Dict[str, Dict[str, Any]] = PrivateAttr(default_factory=dict)

    def __init__(
        self, store: MilvusGraphStore, extractor: Optional[TransformComponent] = None, **kwargs: Any
    ) -> None:
        moved = {key: kwargs.pop(key) for key in MOVED_TO_EXTRACTOR if key in kwargs}
        llm = kwargs.pop("llm", None)
        if unknown := set(kwargs) - set(type(self).model_fields):
            own = ["store", "extractor", *sorted(set(type(self).model_fields) - {"store", "extractor"})]
            raise unexpected_keywords("GraphRAGTransform", sorted(unknown), own, {
                key: f"MilvusGraphStore({key}=...), the store's" for key in STORE_PARAMETERS if key not in own})
        llm = None if is_default(llm) else resolve_llm(llm)
        if llm is not None or moved:
            warnings.warn(_MOVED, FutureWarning, stacklevel=2)
            if llm is not None and extractor is None:
                extractor = LLMTripletExtractor(llm=llm, **moved)
        super().__init__(store=store, extractor=extractor, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "GraphRAGTransform"

    def to_dict(self, **kwargs: Any) -> Dict[str, Any]:
        # IngestionPipeline caches a step's output (here: a write) on a hash of this dict and the nodes:
        # naming the store's generation, a cached run never stands in for a write the store no longer holds
        data = {**super().to_dict(**kwargs), "store": repr(self.store)}
        try:
            data["store_generation"] = self.store.generation
        except Exception:  # a closed store: no cache hit can be right
            data["store_generation"] = uuid.uuid4().hex
        if self.extractor is not None:
            data["extractor"] = repr(self.extractor)
        return data

    def __getstate__(self) -> Dict[str, Any]:
        """What a worker process of `IngestionPipeline.run(num_workers=N)` gets: the transform, with the
        settings that reopen its store there (a server's: each worker writes its own rows)."""
        if self.store.collections.is_lite:
            raise TypeError(
                f"GraphRAGTransform writes to the Milvus Lite database {self.store.uri!r}, which one process opens "
                "at a time, so it cannot be sent to worker processes: run the pipeline with num_workers=1 (the "
                "default), or store on a Milvus server, whose store every worker reopens. LLM extraction runs "
                "concurrently anyway: LLMTripletExtractor(num_workers=...)."
            )
        state = BaseModel.__getstate__(self)  # (not BaseComponent's, which drops from the live object what it cannot pickle)
        return {**state, "__dict__": {**state["__dict__"], "store": _Reopened(self.store.settings)}}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        store = state["__dict__"]["store"]
        if isinstance(store, _Reopened):
            state["__dict__"] = {**state["__dict__"], "store": store.open()}
        super().__setstate__(state)

    @property
    def built(self) -> Dict[str, Dict[str, Any]]:
        """How the graph was built so far: for each source ("given triplets", the extractor's name, or
        "text links"), the passages and triplets it gave."""
        return {source: dict(counts) for source, counts in self._built.items()}

    @property
    def extracts_with_llm(self) -> bool:
        """Whether nodes without triplets are extracted with an LLM (so pending nodes are retried)."""
        return isinstance(self.extractor, LLMTripletExtractor)

    @property
    def _free(self) -> bool:
        """Whether nodes without triplets get `CooccurrenceExtractor`'s, as the only extractor."""
        return self.extractor is None or isinstance(self.extractor, CooccurrenceExtractor)

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return run_sync(self.acall(nodes, **kwargs))

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        await self.store.aadd(nodes, await self._atriplets(nodes))  # rewrites a passage whose pending mark changed
        return nodes

    async def _atriplets(self, nodes: Sequence[BaseNode]) -> _Linked:
        """What `acall` writes for each node: its triplets, given, extracted and linked; nothing is written."""
        triplets = self._given(nodes)
        todo = [i for i, t in enumerate(triplets) if t is None]
        free = await self._extract(nodes, triplets, todo) if todo else []
        linked = await asyncio.to_thread(self._with_text_links, nodes, triplets, free)
        self._report(nodes, triplets, linked, todo, free)
        return linked

    def _given(self, nodes: Sequence[BaseNode]) -> _Triplets:
        """The triplets each node carries (None: none). A pending node's triplets (the free extractor's)
        are dropped when this transform extracts with an LLM: it asks again."""
        triplets = []
        for node in nodes:
            exclude_from_content(node, self.triplets_key)
            if PENDING_KEY in node.metadata:
                exclude_from_content(node, PENDING_KEY)
                if is_pending(node) and self.extracts_with_llm:
                    node.metadata.pop(self.triplets_key, None)
            triplets.append(given_triplets(node, self.triplets_key))
        return triplets

    async def _extract(self, nodes: Sequence[BaseNode], triplets: _Triplets, todo: List[int]) -> List[int]:
        """The extractor's triplets for the nodes at `todo` (they carry none), in `triplets` and metadata;
        return the nodes whose triplets `CooccurrenceExtractor` gave: as the default extractor, or as an
        LLM extractor's fallback (the nodes without an LLM extraction's digest)."""
        extractor = self.extractor or CooccurrenceExtractor(triplets_key=self.triplets_key)
        for i in todo:
            nodes[i].metadata.pop(EXTRACTION_KEY, None)  # an LLM extraction of another input: not this node's
        # an LLMTripletExtractor reuses an extraction stored with a passage for the same call
        options = {"stored": self.store.get_passages} if self.extracts_with_llm else {}
        out = list(await extractor.acall([nodes[i] for i in todo], **options) or [])
        if len(out) != len(todo):
            got = f"extractor {type(extractor).__name__} returned {len(out)} nodes for {len(todo)}"
            raise ValueError(f"{got}: it must return the nodes it was given, with their triplets in metadata")
        for i, node in zip(todo, out):
            if node is not nodes[i]:
                nodes[i].metadata.update(node.metadata)
            exclude_from_content(nodes[i], self.triplets_key)
            triplets[i] = given_triplets(nodes[i], self.triplets_key) or []
            nodes[i].metadata[self.triplets_key] = as_metadata(triplets[i])
        if self._free:
            return todo
        return [i for i in todo if EXTRACTION_KEY not in nodes[i].metadata] if self.extracts_with_llm else []

    def _with_text_links(self, nodes: Sequence[BaseNode], triplets: _Triplets, free: List[int]) -> _Linked:
        """Each node's triplets, then (`text_links`) its text's links, unless the free extractor gave them."""
        if not self.text_links:
            return [list(t or []) for t in triplets]
        own = self.extractor if isinstance(self.extractor, CooccurrenceExtractor) else None  # as configured
        linked, added = with_text_links(nodes, triplets, set(free), own)
        _count(self._built, "text links", [new for new in added if new])
        return linked

    def _report(
        self,
        nodes: Sequence[BaseNode],
        triplets: _Triplets,
        linked: _Linked,
        todo: List[int],
        free: List[int],
    ) -> None:
        """Count what each source gave (`built`); when some nodes carried no triplets, one log line: a
        WARNING when the free extractor found little to link."""
        done, by_text, cooccurrence = set(todo), set(free), CooccurrenceExtractor.class_name()
        extractor = cooccurrence if self.extractor is None else type(self.extractor).__name__
        _count(self._built, "given triplets", [t for i, t in enumerate(triplets) if i not in done])
        _count(self._built, extractor, [triplets[i] for i in todo if i not in by_text])
        _count(self._built, cooccurrence, [triplets[i] for i in free])
        if not todo:
            return
        with_text = [i for i in todo if nodes[i].get_content(MetadataMode.NONE).strip()]
        relations, empty = sum(len(linked[i]) for i in with_text), sum(not linked[i] for i in with_text)
        sparse = self._free and relations < SPARSE_RELATIONS_PER_PASSAGE * len(with_text)
        gave = sum(len(triplets[i] or []) for i in todo)
        none = f"; {empty} of them gave none and are stored as passages only" if empty else ""
        little = _LITTLE.format(relations, len(with_text)) if sparse else ""
        level = logging.WARNING if sparse else logging.INFO
        logger.log(level, _NO_TRIPLETS, len(todo), len(nodes), extractor, gave, none, little)


class _Reopened:
    """A store's settings, reopened once per process (the store a worker's transforms share)."""

    _open: Dict[str, MilvusGraphStore] = {}

    def __init__(self, settings: Dict[str, Any]) -> None:
        self.settings = settings

    def open(self) -> MilvusGraphStore:
        key = f"{self.settings['uri']}\x1f{self.settings['collection_prefix']}"
        if key not in self._open or self._open[key].client is None:
            self._open[key] = MilvusGraphStore(**self.settings)
        return self._open[key]


def _count(built: Dict[str, Dict[str, Any]], source: str, rows: _Triplets) -> None:
    """Add the passages and triplets a source gave to `built`."""
    if rows:
        counts = built.setdefault(source, {"passages": 0, "triplets": 0})
        counts["passages"] += len(rows)
        counts["triplets"] += sum(len(t or []) for t in rows)


def count_pending(store: MilvusGraphStore) -> int:
    """The store's passages whose LLM extraction failed and awaits another try (marked pending)."""
    return int(store.collections.query(PASSAGES, PENDING_FILTER, ["count(*)"])[0]["count(*)"])
