"""GraphRAGIndex: a store, its ingestion steps and its retriever behind LlamaIndex's index interface.

    index = GraphRAGIndex.from_documents(documents)          # Milvus Lite at ./graphrag_milvus.db
    index.as_retriever(similarity_top_k=5).retrieve(question)
    index.as_query_engine(llm=llm).query(question)

The LLM follows LlamaIndex's conventions: `llm=` defaults to `Settings.llm` when you set it, else OpenAI
when OPENAI_API_KEY is set, else none (offline); `llm=None` turns it off (`llm.resolve.resolve_llm`).

It is a plain class with the method names of LlamaIndex's indices (`from_documents`, `as_retriever`,
`as_query_engine`, `insert`, `insert_nodes`, `delete_ref_doc`, `refresh_ref_docs`), not a `BaseIndex`:
Milvus holds everything (no index struct, no docstore). `MilvusGraphStore`, `GraphRAGTransform` and
`GraphRAGRetriever` stay public for composing by hand.
"""

from __future__ import annotations

import inspect
import logging
from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence, Set

from llama_index.core import Settings
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.llms import MockLLM
from llama_index.core.llms.llm import LLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers import BaseSynthesizer, ResponseMode
from llama_index.core.response_synthesizers.context_only import ContextOnly
from llama_index.core.response_synthesizers.no_text import NoText
from llama_index.core.schema import BaseNode, Document, MetadataMode, TransformComponent

from llama_index_graphrag_milvus.ingest.extract import exclude_from_content
from llama_index_graphrag_milvus.ingest.extract.given import is_pending, mark_pending
from llama_index_graphrag_milvus.llm.resolve import DEFAULT, LLMType, is_default, resolve_llm
from llama_index_graphrag_milvus.retriever import GraphRAGRetriever
from llama_index_graphrag_milvus.schema import passage_id
from llama_index_graphrag_milvus.store import MilvusGraphStore
from llama_index_graphrag_milvus.transform import GraphRAGTransform

__all__ = ["GraphRAGIndex"]

logger = logging.getLogger(__name__)


class GraphRAGIndex:
    """A Graph RAG index on Milvus: build it with `from_documents`, reopen it with `GraphRAGIndex(store=...)`.

    Args:
        store: The store holding (or to hold) the entities, relations and passages.
        llm: The LLM of the graph steps: triplet extraction for nodes that carry none, and the
            retriever's NER and rerank. By default ("default"), LlamaIndex's `Settings.llm` if you set it,
            else OpenAI if OPENAI_API_KEY is set, else none; resolved once, here. Its cost: at ingest, one
            LLM call per split node that carries no triplets (one node a call, not batched; 4 at a time,
            `GraphRAGTransform(num_workers=...)`; nodes with triplets in metadata or with no text cost
            none); per retrieval, 2 calls (NER, then rerank, skipped when there is no candidate
            relation). `llm=None` makes no LLM call in these steps: triplets come from metadata or
            `CooccurrenceExtractor`, and the retriever matches known names and reranks with the graph.
        transformations: The steps run before the graph write on every insert (a splitter, a KG
            extractor, ...). Defaults to `Settings.transformations` (a `SentenceSplitter()` unless you
            changed them). A `GraphRAGTransform` is appended, writing to `store` with `llm`; to configure
            it (`extractor=`, `num_workers=`, ...), pass your own as the last step.
        show_progress: Show progress bars while ingesting.

    Attributes:
        store: The `MilvusGraphStore`.
        llm: The LLM of the graph steps, resolved (or None).
        transformations: Every ingestion step; the last is `transform`.
        transform: The `GraphRAGTransform` that writes to `store`.
    """

    def __init__(
        self,
        store: MilvusGraphStore,
        llm: LLMType = DEFAULT,
        transformations: Optional[Sequence[TransformComponent]] = None,
        show_progress: bool = False,
    ) -> None:
        llm = resolve_llm(llm)
        steps = list(Settings.transformations if transformations is None else transformations)
        if steps and isinstance(steps[-1], GraphRAGTransform):
            if steps[-1].store is not store:
                raise ValueError("The GraphRAGTransform of transformations writes to another store.")
        else:
            steps.append(GraphRAGTransform(store=store, llm=llm, show_progress=show_progress))
        if any(isinstance(step, GraphRAGTransform) for step in steps[:-1]):
            raise ValueError("A GraphRAGTransform must be the last transformation: it writes the graph.")
        self.store, self.llm, self.show_progress = store, llm, show_progress
        self.transformations: List[TransformComponent] = steps
        self.transform: GraphRAGTransform = steps[-1]

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        store: Optional[MilvusGraphStore] = None,
        llm: LLMType = DEFAULT,
        embed_model: Optional[BaseEmbedding] = None,
        transformations: Optional[Sequence[TransformComponent]] = None,
        show_progress: bool = False,
        **store_kwargs: Any,
    ) -> "GraphRAGIndex":
        """Ingest documents and return their index.

        Args:
            documents: The documents; triplets in `metadata["triplets"]` are used as given.
            store: The store to write to. Defaults to `MilvusGraphStore(embed_model=embed_model,
                **store_kwargs)`: Milvus Lite at ./graphrag_milvus.db, its collections kept if they exist.
            llm, transformations, show_progress: As in `GraphRAGIndex`: `llm` defaults to `Settings.llm`
                (else OpenAI if OPENAI_API_KEY is set, else none), one call per node without triplets;
                `llm=None` ingests with no LLM call.
            embed_model, **store_kwargs: For the default store only (`uri`, `collection_prefix`, ...).
        """
        if store is None:
            store = MilvusGraphStore(embed_model=embed_model, **store_kwargs)
        elif embed_model is not None or store_kwargs:
            raise TypeError(
                "embed_model and store options apply to a new store; with store=..., set them on the store."
            )
        index = cls(store=store, llm=llm, transformations=transformations, show_progress=show_progress)
        index._run(documents)
        return index

    # retrieval ----------------------------------------------------------------------------------
    def as_retriever(self, **kwargs: Any) -> GraphRAGRetriever:
        """A `GraphRAGRetriever` over the store, with the index's `llm` unless `llm=` is given (an LLM,
        None for none, or "default" for `Settings.llm`); with an LLM, each retrieval makes 2 LLM calls
        (NER and rerank). Keyword arguments go to the retriever (`similarity_top_k`, `reranker`,
        `expansion_degree`, ...)."""
        kwargs.setdefault("llm", self.llm)  # the retriever resolves what is given
        return GraphRAGRetriever(store=self.store, **kwargs)

    def as_query_engine(self, llm: LLMType = DEFAULT, **kwargs: Any) -> RetrieverQueryEngine:
        """A `RetrieverQueryEngine` that answers from the graph-retrieved passages.

        The answering LLM is `llm` when given (an LLM, or None for none), else the index's `llm`, else
        `Settings.llm` when it is set or OPENAI_API_KEY is. The retriever uses the index's `llm`, else an
        LLM given here; `llm=None` on the index keeps the retriever LLM-free unless one is given here.
        A query costs the retriever's 2 LLM calls (NER, rerank) when it has an LLM, plus the answer's
        (one call with the default "compact" mode when the passages fit the context window).

        With no LLM at all, the engine still runs offline and makes no LLM call: it answers with the
        retrieved passages themselves, their texts joined (`response_mode="context_only"`; "no_text" gives
        an empty answer), and returns them in `response.source_nodes` as usual.

        Keyword arguments that `GraphRAGRetriever` takes (`similarity_top_k`, `reranker`, ...) go to the
        retriever, the others to `RetrieverQueryEngine.from_args` (`response_mode`, `node_postprocessors`,
        `streaming`, ...).
        """
        accepted = inspect.signature(GraphRAGRetriever.__init__).parameters
        ours = [k for k in kwargs if k in accepted and k not in ("self", "store")]
        retriever_kwargs = {k: kwargs.pop(k) for k in ours}
        given = None if is_default(llm) else resolve_llm(llm)
        retriever_kwargs.setdefault("llm", self.llm if self.llm is not None else given)
        retriever = self.as_retriever(**retriever_kwargs)
        if not is_default(llm):
            answering = given
        else:
            answering = self.llm if self.llm is not None else resolve_llm(DEFAULT)
        if answering is None:
            answering = MockLLM()  # never called; keeps Settings.llm (OpenAI by default) unresolved
            if "response_synthesizer" not in kwargs:
                kwargs["response_synthesizer"] = _passages_only(answering, kwargs)
        return RetrieverQueryEngine.from_args(retriever, llm=answering, **kwargs)

    # writing ------------------------------------------------------------------------------------
    def insert(self, document: Document) -> None:
        """Ingest one document through the transformations."""
        self._run([document])

    def insert_nodes(self, nodes: Sequence[BaseNode]) -> None:
        """Write nodes that are already split (their `ref_doc_id` is their document): only the graph
        step runs on them, as `insert_nodes` skips the node parser in LlamaIndex's indices."""
        self.transform(list(nodes))

    def delete_ref_doc(self, ref_doc_id: str) -> None:
        """Delete a document: its passages, the relations no other passage states, the orphaned entities."""
        self.store.delete(ref_doc_id)

    def refresh_ref_docs(self, documents: Sequence[Document]) -> List[bool]:
        """Re-ingest the documents that are new or changed, and extract with the LLM the passages whose
        LLM extraction failed before (pending); return, for each document, whether it was re-ingested.

        A document is unchanged when the transformations before the graph step (the splitter) give
        exactly the passages stored for it (`passage_id(ref_doc_id, text)`) and every stored passage
        records the document's current hash (`source_node.hash`, so that metadata changes, triplets
        included, count too). Unchanged documents are left alone: nothing is embedded or written, except
        their pending passages (those holding the no-LLM extractor's triplets because the LLM call
        failed), which alone are extracted again when the graph step has an LLM; their new triplets
        replace the old (the text's links, with `text_links`, stay beside them). A changed document's
        passages are written (every one records the document's new hash; a passage whose embedded text
        is unchanged keeps its vector, and only new entities and relations are embedded), then the
        stored passages its new split no longer gives are deleted: readers see the old document or the
        new, never neither. The LLM extracts only the chunks it has not read as they are now (the
        transform reuses a stored extraction of the same input, prompt and model). The steps before the
        graph write run on every document to compare (cheap for a splitter; a KG extractor there runs too).
        """
        nodes_of = self._split(documents)
        stored = self._stored([doc.doc_id for doc in documents])
        states = [self._stored_state(doc, nodes_of.get(doc.doc_id, []), stored.get(doc.doc_id, {})) for doc in documents]
        todo = [doc for doc, state in zip(documents, states) if state is None]
        gone = [pid for doc in todo for pid in set(stored.get(doc.doc_id, {})) - _passage_ids(doc, nodes_of.get(doc.doc_id, []))]
        nodes = [node for doc in todo for node in nodes_of.get(doc.doc_id, [])]
        nodes += [
            mark_pending(node)  # so that the transform asks the LLM again
            for doc, pending in zip(documents, states)
            if pending
            for node in nodes_of.get(doc.doc_id, [])
            if passage_id(doc.doc_id, node.get_content(MetadataMode.NONE)) in pending
        ]
        if nodes:
            self.transform(nodes)
        self.store.delete_passages(gone)
        return [state is None or bool(state) for state in states]

    # helpers ------------------------------------------------------------------------------------
    def _run(self, documents: Sequence[Document]) -> None:
        """Run the transformations with no cache: a cache hit would skip the graph write (the transform
        writes to the store as a side effect), e.g. when a deleted document is ingested again."""
        pipeline = IngestionPipeline(transformations=self.transformations, disable_cache=True)
        pipeline.run(documents=self._excluding_triplets(documents), show_progress=self.show_progress)

    def _split(self, documents: Sequence[Document]) -> Dict[str, List[BaseNode]]:
        """The nodes the steps before the graph write give, by document id."""
        pipeline = IngestionPipeline(transformations=self.transformations[:-1], disable_cache=True)
        by_doc: Dict[str, List[BaseNode]] = defaultdict(list)
        for node in pipeline.run(documents=self._excluding_triplets(documents), show_progress=self.show_progress):
            by_doc[_document_of(node)].append(node)
        return by_doc

    def _excluding_triplets(self, documents: Sequence[Document]) -> List[Document]:
        """The documents, their triplets key marked as no text (excluded from embedding and LLM context)
        before any step runs: a splitter then does not count the triplets against its chunk size."""
        for document in documents:
            exclude_from_content(document, self.transform.triplets_key)
        return list(documents)

    def _stored(self, document_ids: Sequence[str]) -> Dict[str, Dict[str, BaseNode]]:
        """The documents' stored passages as nodes, by document id, then passage id (batched reads)."""
        pids = self.store.documents_passage_ids(document_ids)
        nodes = self.store.get_passages([p for found in pids.values() for p in found])
        return {doc: {p: nodes[p] for p in found if p in nodes} for doc, found in pids.items()}

    def _stored_state(self, document: Document, nodes: Sequence[BaseNode], stored: Dict[str, BaseNode]) -> Optional[Set[str]]:
        """None when the document is new or changed (see `refresh_ref_docs`); else the ids of its pending
        passages to extract again (none unless the graph step extracts with an LLM). `stored`: its stored
        passages' nodes by passage id."""
        if not stored or set(stored) != _passage_ids(document, nodes):
            return None
        pending = set()
        for pid, node in stored.items():
            source = node.source_node
            if source is not None and source.hash and source.hash != document.hash:
                return None
            if is_pending(node):
                pending.add(pid)
        return pending if self.transform.extracts_with_llm else set()

    def __repr__(self) -> str:
        return f"GraphRAGIndex(store={self.store!r}, llm={type(self.llm).__name__ if self.llm else None})"


def _passage_ids(document: Document, nodes: Sequence[BaseNode]) -> Set[str]:
    """The ids of the passages a document's split (`nodes`) gives (the store skips nodes with no text)."""
    texts = [node.get_content(MetadataMode.NONE) for node in nodes]
    return {passage_id(document.doc_id, text) for text in texts if text.strip()}


def _document_of(node: BaseNode) -> str:
    """The document a node belongs to, as the store records it (a Document ingested as is is its own)."""
    return node.ref_doc_id or node.node_id


def _passages_only(llm: LLM, kwargs: Dict[str, Any]) -> BaseSynthesizer:
    """A synthesizer that needs no LLM ("context_only" or "no_text"), popping its options from `kwargs`.

    Built here, not by `get_response_synthesizer`, which would resolve `Settings.llm` (OpenAI) for them.
    """
    mode = ResponseMode(kwargs.pop("response_mode", ResponseMode.CONTEXT_ONLY))
    if mode not in (ResponseMode.CONTEXT_ONLY, ResponseMode.NO_TEXT):
        raise ValueError(
            f'response_mode="{mode.value}" needs an LLM: pass llm=..., set Settings.llm or OPENAI_API_KEY, '
            'or use response_mode="context_only" (the default without an LLM: the passages, no answer).'
        )
    logger.warning(
        "No LLM (llm=None, Settings.llm unset, no OPENAI_API_KEY): the query engine returns the retrieved "
        "passages (response.source_nodes; response_mode=%r) without a synthesized answer. "
        "Pass llm=... to answer.",
        mode.value,
    )
    synthesizer = ContextOnly if mode == ResponseMode.CONTEXT_ONLY else NoText
    streaming = kwargs.pop("streaming", False)
    return synthesizer(llm=llm, callback_manager=kwargs.get("callback_manager"), streaming=streaming)

