"""`LLMTripletExtractor`: triplets an LLM extracts from each passage, the explicit, paid way to build the
graph (by default it is built with no LLM call: `CooccurrenceExtractor`).

Each call goes through the LLM's guard (`llm.guard`): it waits at most the extraction deadline, and none
is made while the LLM's circuit breaker is open after repeated failures, except the first call of an
ingest, let through as a probe. A call that gave no answer is told apart from an answer with no
triplets: the passage is worth asking about again (`Extraction.failed`, the passage marked pending).

A passage the LLM's triplets came from records a digest of what the LLM was given (`EXTRACTION_KEY`), so
that a later ingest of the same input (a refresh of its document after another chunk changed, a
pipeline run again) takes the stored triplets instead of asking again.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

from llama_index.core.async_utils import run_jobs
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent

from llama_index_graphrag_milvus.ingest.extract.cooccurrence import CooccurrenceExtractor
from llama_index_graphrag_milvus.ingest.extract.given import (
    EXTRACTION_KEY,
    PENDING_KEY,
    TRIPLETS_KEY,
    as_metadata,
    exclude_from_content,
    given_triplets,
    is_pending,
    mark_pending,
)
from llama_index_graphrag_milvus.llm.guard import LLMUnavailable, guard_of, run_sync
from llama_index_graphrag_milvus.llm.parsing import parse_json_object
from llama_index_graphrag_milvus.llm.prompts import TRIPLET_EXTRACT_PROMPT
from llama_index_graphrag_milvus.llm.resolve import DEFAULT, LLMType, resolve_llm
from llama_index_graphrag_milvus.schema import Triplet, parse_triplets, passage_id

logger = logging.getLogger(__name__)

#: Stored passage nodes by passage id (`MilvusGraphStore.get_passages`).
StoredPassages = Callable[[List[str]], Dict[str, BaseNode]]


class LLMTripletExtractor(TransformComponent):
    """Triplets an LLM extracts from each node that carries none, one call a node:

        GraphRAGIndex.from_documents(documents, extractor=LLMTripletExtractor(llm=OpenAI(model="gpt-4o-mini")))
        GraphRAGTransform(store=store, extractor=LLMTripletExtractor(llm=llm))

    Nodes that carry triplets, and nodes with no text, cost no call; `num_workers` calls run at a time.
    While the LLM is not known to answer (its first call in the process, or after a failure), one call goes
    first, alone: in an outage it is the only call made. That first call is let through the LLM's open
    circuit breaker (`llm.guard`) as a probe, so that an ingest (or `refresh_ref_docs`) run again after an
    outage extracts at once.

    A node the LLM gives no usable answer for gets `CooccurrenceExtractor`'s triplets instead; when its call
    failed (an error, no answer within the deadline, or no call while the breaker is open) it is also marked
    pending (`metadata["graphrag_pending_extraction"]`, stored with the passage in Milvus): the next ingest
    of it, or `GraphRAGIndex.refresh_ref_docs`, asks the LLM again. A node whose passage is stored with the
    LLM's triplets for the same input, prompt and model (`GraphRAGTransform` passes its store's passages
    as `stored`) gets them back with no call.

    Args:
        llm: The LLM. By default ("default") LlamaIndex's `Settings.llm` if you set it, else OpenAI if
            OPENAI_API_KEY is set; with neither, a ValueError.
        **kwargs: The attributes below, by name.

    Attributes:
        extract_prompt: The extraction prompt (`{text}`, `{max_triplets}`; answers JSON); a string is
            made a `PromptTemplate`.
        max_triplets_per_node: At most this many triplets are kept from one node.
        num_workers: Concurrent extraction calls.
        raise_on_error: Raise on a failed extraction instead of logging it.
        show_progress: Show a progress bar.
        triplets_key: The metadata key the triplets are written to.
    """

    llm: LLM = Field(exclude=True)
    extract_prompt: PromptTemplate = Field(default=TRIPLET_EXTRACT_PROMPT)
    max_triplets_per_node: int = 20
    num_workers: int = 4
    raise_on_error: bool = False
    show_progress: bool = False
    triplets_key: str = TRIPLETS_KEY

    def __init__(self, llm: LLMType = DEFAULT, **kwargs: Any) -> None:
        resolved = resolve_llm(llm)
        if resolved is None:
            raise ValueError(
                "LLMTripletExtractor needs an LLM: pass llm=..., or set Settings.llm or OPENAI_API_KEY "
                "(without an LLM, the graph is built with CooccurrenceExtractor, the default)"
            )
        if isinstance(kwargs.get("extract_prompt"), str):
            kwargs["extract_prompt"] = PromptTemplate(kwargs["extract_prompt"])
        super().__init__(llm=resolved, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "LLMTripletExtractor"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return run_sync(self.acall(nodes, **kwargs))

    async def acall(
        self, nodes: Sequence[BaseNode], stored: Optional[StoredPassages] = None, **kwargs: Any
    ) -> Sequence[BaseNode]:
        """Extract the triplets of the nodes that carry none; `stored` reads stored passages by id, to reuse
        an extraction of the same input."""
        todo = []
        for node in nodes:
            if given_triplets(node, self.triplets_key) is not None:
                continue
            node.metadata.pop(EXTRACTION_KEY, None)  # a digest of another input: not this node's
            if node.get_content(MetadataMode.NONE).strip():
                todo.append(node)
            else:  # stored as no passage: no call
                node.metadata[self.triplets_key] = []
                mark_pending(node, False)
        digests = {id(node): self.digest(node) for node in todo}
        asked = self._reuse(todo, digests, stored) if stored is not None and todo else todo
        jobs = [self._ask(node, probe=i == 0) for i, node in enumerate(asked)]
        # while the LLM is not known to answer (its first calls, or after failures) one call goes alone
        # first: if it fails, the breaker opens and the other calls are not made
        first = [await jobs.pop(0)] if jobs and not guard_of(self.llm).answering else []
        results = first + await run_jobs(
            jobs, workers=self.num_workers, show_progress=self.show_progress, desc="Extracting triplets"
        )
        for node, extracted in zip(asked, results):
            if extracted.triplets is not None:
                node.metadata[self.triplets_key] = as_metadata(extracted.triplets)
                node.metadata[EXTRACTION_KEY] = digests[id(node)]
            mark_pending(node, extracted.failed)
        fallback = [node for node, extracted in zip(asked, results) if extracted.triplets is None]
        if fallback:
            CooccurrenceExtractor(triplets_key=self.triplets_key)(fallback)
            _report_fallback(fallback, len(asked), self.triplets_key)
        return nodes

    def digest(self, node: BaseNode) -> str:
        """The digest of the extraction call for `node` (`extraction_digest`)."""
        exclude_from_content(node, EXTRACTION_KEY)
        return extraction_digest(self.llm, self.extract_prompt, node, self.max_triplets_per_node)

    def _reuse(self, nodes: List[BaseNode], digests: Dict[int, str], stored: StoredPassages) -> List[BaseNode]:
        """Of `nodes`, those to send to the LLM; the others get the triplets stored with their passage by the
        same call (the same digest), as the LLM gave them (not narrowed to the names a chunk states)."""
        pids = {id(n): passage_id(n.ref_doc_id or n.node_id, n.get_content(MetadataMode.NONE)) for n in nodes}
        rows = stored(list(dict.fromkeys(pids.values())))
        left = []
        for node in nodes:
            old = rows.get(pids[id(node)])
            raw = old.metadata.get(self.triplets_key) if old is not None else None
            if old is None or old.metadata.get(EXTRACTION_KEY) != digests[id(node)] or not isinstance(raw, list):
                left.append(node)
                continue
            triplets = (given_triplets(old, self.triplets_key) or [])[: self.max_triplets_per_node]
            node.metadata.update({self.triplets_key: as_metadata(triplets), EXTRACTION_KEY: digests[id(node)]})
            mark_pending(node, False)
        if len(left) < len(nodes):
            logger.info("%d of %d nodes took the triplets stored from the same extraction call: no call for them.",
                        len(nodes) - len(left), len(nodes))
        return left

    async def _ask(self, node: BaseNode, probe: bool = False) -> Extraction:
        """The LLM's extraction of one node. A failed, timed-out or skipped call gives
        `Extraction(None, failed=True)`, a malformed answer `Extraction(None)`, each logged, unless
        `raise_on_error`."""
        text = node.get_content(metadata_mode=MetadataMode.LLM)
        cap = self.max_triplets_per_node
        try:
            answer = await guard_of(self.llm).call(
                "extraction", lambda: self.llm.predict(self.extract_prompt, text=text, max_triplets=cap), probe=probe
            )
            return Extraction(parse_extraction(answer, cap))
        except LLMUnavailable as exc:
            if self.raise_on_error:
                raise
            logger.log(
                logging.DEBUG if exc.skipped else logging.WARNING,
                "Node %s: the LLM gave no triplet extraction (%s); the passage is kept pending.", node.node_id, exc,
            )
            return Extraction(None, failed=True)
        except Exception as exc:  # a malformed answer, or a request refused for its content
            if self.raise_on_error:
                raise
            logger.warning("Node %s: triplet extraction failed, the answer is unusable: %s", node.node_id, exc)
            return Extraction(None)


def extraction_digest(llm: LLM, prompt: PromptTemplate, node: BaseNode, max_triplets: int) -> str:
    """A digest of an extraction call's input: the LLM (its class, metadata, system prompt and query
    wrapper) and the prompt as formatted for the passage (its partial values, the triplet cap, the passage
    as the LLM reads it: its text and the metadata shown to the LLM). Sampling settings are not in it."""
    wrapper = getattr(llm, "query_wrapper_prompt", None)
    text = node.get_content(metadata_mode=MetadataMode.LLM)
    parts = (type(llm).__name__, llm.metadata.model_dump_json(), str(getattr(llm, "system_prompt", None)),
             wrapper.get_template() if wrapper is not None else "", str(max_triplets),
             prompt.format(llm=llm, text=text, max_triplets=max_triplets))
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Extraction(NamedTuple):
    """What an LLM extraction gave: its triplets (None when it gave no usable answer), and whether the
    call itself failed or was not made (the LLM is unreachable: ask again later)."""

    triplets: Optional[List[Triplet]]
    failed: bool = False


def parse_extraction(answer: str, max_triplets: int) -> List[Triplet]:
    """Triplets from an extraction answer `{"triplets": [[s, p, o], ...]}`. Raises `ValueError`."""
    value = parse_json_object(answer).get("triplets")
    if not isinstance(value, list):
        raise ValueError(f'expected {{"triplets": [...]}}, got {answer!r:.200}')
    triplets, _ = parse_triplets(value)
    return triplets[:max_triplets]


def _report_fallback(fallback: List[BaseNode], asked: int, key: str) -> None:
    """One WARNING for the nodes the LLM gave no usable answer for (they got the free extractor's triplets)."""
    failed = sum(is_pending(node) for node in fallback)
    unusable = len(fallback) - failed
    logger.warning(
        "LLM extraction: %d of %d nodes got %d triplets from CooccurrenceExtractor (no LLM) instead%s%s.",
        len(fallback), asked, sum(len(node.metadata.get(key) or []) for node in fallback),
        f": {unusable} answered unusably" if unusable else "",
        f"{', and' if unusable else ':'} the LLM call failed for {failed}, kept pending ({PENDING_KEY}): the next "
        "ingest of them or refresh_ref_docs extracts them with the LLM" if failed else "",
    )
