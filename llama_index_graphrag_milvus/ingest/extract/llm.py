"""Triplets an LLM extracts from a passage, with the transform's extraction prompt.

Each call goes through the LLM's guard (`llm.guard`): it waits at most the extraction deadline, and none
is made while the LLM's circuit breaker is open after repeated failures. A call that gave no answer is
told apart from an answer with no triplets: the passage is worth asking about again (`Extraction.failed`).

A passage the LLM's triplets came from records a digest of what the LLM was given (`EXTRACTION_KEY`), so
that a later ingest of the same input (a refresh of its document after another chunk changed, a
pipeline run again) takes the stored triplets instead of asking again.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Callable, Dict, List, NamedTuple, Optional

from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_graphrag_milvus.ingest.extract.given import (
    EXTRACTION_KEY,
    as_metadata,
    exclude_from_content,
    given_triplets,
    mark_pending,
)
from llama_index_graphrag_milvus.llm.guard import LLMUnavailable, guard_of
from llama_index_graphrag_milvus.llm.parsing import parse_json_object
from llama_index_graphrag_milvus.schema import Triplet, parse_triplets, passage_id

logger = logging.getLogger(__name__)


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


class StoredExtractions:
    """The LLM extractions stored with passages already, for nodes about to be sent to the LLM: a node
    whose passage is stored with the digest of the same call (`EXTRACTION_KEY`) gets the stored triplets.

    Args:
        get_passages: Stored passage nodes by passage id (`MilvusGraphStore.get_passages`).
        llm, prompt, max_triplets: The extraction call's.
        key: The metadata key of the triplets.
    """

    def __init__(
        self, get_passages: Callable[[List[str]], Dict[str, BaseNode]], llm: LLM, prompt: PromptTemplate,
        max_triplets: int, key: str,
    ) -> None:
        self.get_passages, self.llm, self.prompt = get_passages, llm, prompt
        self.max_triplets, self.key = max_triplets, key
        self.digests: Dict[int, str] = {}  # by node position

    def digest(self, i: int, node: BaseNode) -> str:
        """The digest of the call for `node` (at position `i`), computed once."""
        if i not in self.digests:
            exclude_from_content(node, EXTRACTION_KEY)
            self.digests[i] = extraction_digest(self.llm, self.prompt, node, self.max_triplets)
        return self.digests[i]

    def reuse(self, nodes: List[BaseNode], triplets: List[Optional[List[Triplet]]], todo: List[int]) -> List[int]:
        """Of the nodes at positions `todo`, those to send to the LLM; the others get their stored triplets,
        as the LLM gave them (not narrowed to the names a chunk states), in `triplets` and their metadata."""
        pids = {i: passage_id(nodes[i].ref_doc_id or nodes[i].node_id, nodes[i].get_content(MetadataMode.NONE))
                for i in todo}
        stored = self.get_passages(list(dict.fromkeys(pids.values()))) if todo else {}
        left = []
        for i in todo:
            digest, old = self.digest(i, nodes[i]), stored.get(pids[i])  # the digest of the input as sent
            raw = old.metadata.get(self.key) if old is not None else None
            if old is None or old.metadata.get(EXTRACTION_KEY) != digest or not isinstance(raw, list):
                left.append(i)
                continue
            triplets[i] = (given_triplets(old, self.key) or [])[: self.max_triplets]
            nodes[i].metadata.update({self.key: as_metadata(triplets[i]), EXTRACTION_KEY: digest})
            mark_pending(nodes[i], False)
        if len(left) < len(todo):
            logger.info("%d of %d nodes took the triplets stored from the same extraction call: no call for them.",
                        len(todo) - len(left), len(todo))
        return left


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


async def aextract(
    llm: LLM, prompt: PromptTemplate, node: BaseNode, max_triplets: int, raise_on_error: bool = False
) -> Extraction:
    """The triplets an LLM extracts from a passage. A failed, timed-out or skipped call gives
    `Extraction(None, failed=True)`, a malformed answer `Extraction(None)`, each logged, unless
    `raise_on_error`."""
    text = node.get_content(metadata_mode=MetadataMode.LLM)
    try:
        answer = await guard_of(llm).call("extraction", lambda: llm.predict(prompt, text=text, max_triplets=max_triplets))
        return Extraction(parse_extraction(answer, max_triplets))
    except LLMUnavailable as exc:
        if raise_on_error:
            raise
        logger.log(
            logging.DEBUG if exc.skipped else logging.WARNING,
            "Node %s: the LLM gave no triplet extraction (%s); the passage is kept pending.", node.node_id, exc,
        )
        return Extraction(None, failed=True)
    except Exception as exc:  # a malformed answer, or a request refused for its content
        if raise_on_error:
            raise
        logger.warning("Node %s: triplet extraction failed, the answer is unusable: %s", node.node_id, exc)
        return Extraction(None)


async def aextract_triplets(
    llm: LLM, prompt: PromptTemplate, node: BaseNode, max_triplets: int, raise_on_error: bool = False
) -> List[Triplet]:
    """Triplets an LLM extracts from a passage; none when the call failed or the answer is malformed (see
    `aextract`)."""
    return (await aextract(llm, prompt, node, max_triplets, raise_on_error)).triplets or []
