"""GraphRAGIndex: a store, its ingestion steps and its retriever as a LlamaIndex `BaseIndex`.

    index = GraphRAGIndex.from_documents(documents)          # Milvus Lite at ./graphrag_milvus.db
    index.as_retriever(similarity_top_k=5).retrieve(question)
    index.as_query_engine(llm=llm).query(question)
    index.as_chat_engine(llm=llm).chat(question)
    index = GraphRAGIndex.from_existing(store=MilvusGraphStore(uri=...))   # reopen

The graph is built with no LLM call (`CooccurrenceExtractor` for passages that carry no triplets), whatever
LLM is configured; `extractor=LLMTripletExtractor(llm=...)` extracts with an LLM. The LLM (`llm=`) works at
query time and follows LlamaIndex's conventions: `Settings.llm` when you set it, else OpenAI when
OPENAI_API_KEY is set, else none (offline); `llm=None` turns it off (`llm.resolve.resolve_llm`).

Milvus holds everything: no index struct is kept and no document store (`ref_doc_info` reads the
passages' rows). `MilvusGraphStore`, `GraphRAGTransform` and `GraphRAGRetriever` stay public for
composing by hand.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Dict, List, Optional, Sequence

from llama_index.core import Settings
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.chat_engine.types import BaseChatEngine, ChatMode
from llama_index.core.data_structs import IndexLPG
from llama_index.core.indices.base import BaseIndex
from llama_index.core.ingestion import arun_transformations
from llama_index.core.llms import MockLLM
from llama_index.core.llms.llm import LLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers import BaseSynthesizer, ResponseMode
from llama_index.core.response_synthesizers.context_only import ContextOnly
from llama_index.core.response_synthesizers.no_text import NoText
from llama_index.core.schema import BaseNode, Document, TransformComponent
from llama_index.core.storage.docstore.types import RefDocInfo
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from llama_index_graphrag_milvus.ingest.extract import exclude_from_content
from llama_index_graphrag_milvus.ingest.refresh import plan_refresh
from llama_index_graphrag_milvus.ingest.rows import PASSAGE_FIELDS
from llama_index_graphrag_milvus.llm.guard import run_sync
from llama_index_graphrag_milvus.llm.resolve import DEFAULT, LLMType, is_default, resolve_llm
from llama_index_graphrag_milvus.milvus.collections import PASSAGES
from llama_index_graphrag_milvus.retriever import MOVED_ARGUMENTS, GraphRAGRetriever
from llama_index_graphrag_milvus.store import MilvusGraphStore
from llama_index_graphrag_milvus.transform import GraphRAGTransform

__all__ = ["GraphRAGIndex"]

logger = logging.getLogger(__name__)

#: The keyword arguments of the engines that go to their retriever.
_RETRIEVER_ARGUMENTS = {*inspect.signature(GraphRAGRetriever.__init__).parameters, *MOVED_ARGUMENTS} - {"self", "store"}


class GraphRAGIndex(BaseIndex[IndexLPG]):
    """A Graph RAG index on Milvus: build it with `from_documents`, reopen it with `from_existing(store=...)`.

    Args:
        nodes: Split nodes to write now (as `insert_nodes`); none to reopen `store` as it is.
        store: The store holding (or to hold) the entities, relations and passages (default:
            `MilvusGraphStore()`, Milvus Lite at ./graphrag_milvus.db).
        llm: The LLM of the query-time steps: the retriever's NER and rerank (2 calls a retrieval; the
            rerank is skipped when there is no candidate relation) and the answer of `as_query_engine` and
            `as_chat_engine`. By default ("default"), LlamaIndex's `Settings.llm` if you set it, else
            OpenAI if OPENAI_API_KEY is set, else none; resolved once, here. Never called at ingest.
            `llm=None`: the retriever matches known names and ranks with the graph alone.
        extractor: Extracts the triplets of nodes that carry none (`GraphRAGTransform(extractor=...)`):
            by default `CooccurrenceExtractor()`, no LLM call; `LLMTripletExtractor(llm=...)` pays one LLM
            call per such node.
        transformations: The steps run before the graph write on every insert (a splitter, a KG
            extractor, ...). Defaults to `Settings.transformations` (a `SentenceSplitter()` unless you
            changed them). A `GraphRAGTransform` writing to `store` follows them; to configure it, pass
            your own as the last step.
        show_progress: Show progress bars while ingesting.

    Attributes: `store`; `llm`, resolved (or None); `transformations`, every ingestion step, the last being
    `transform`, the `GraphRAGTransform` that writes to `store`.
    """

    index_struct_cls = IndexLPG

    def __init__(
        self,
        nodes: Optional[Sequence[BaseNode]] = None,
        store: Optional[MilvusGraphStore] = None,
        llm: LLMType = DEFAULT,
        extractor: Optional[TransformComponent] = None,
        transformations: Optional[Sequence[TransformComponent]] = None,
        callback_manager: Optional[CallbackManager] = None,
        show_progress: bool = False,
        **kwargs: Any,
    ) -> None:
        if isinstance(nodes, MilvusGraphStore):
            raise TypeError("GraphRAGIndex takes nodes first: pass the store as store=..., or reopen it with "
                            "GraphRAGIndex.from_existing(store=...)")
        steps = list(Settings.transformations if transformations is None else transformations)
        self.transform: GraphRAGTransform = _graph_step(steps, store, extractor)  # popped from `steps`
        self.store, self.llm = self.transform.store, resolve_llm(llm)
        super().__init__(
            nodes=nodes, index_struct=IndexLPG() if nodes is None else None, callback_manager=callback_manager,
            show_progress=show_progress, **kwargs,
        )
        self._transformations = steps  # the steps before the graph write (BaseIndex would default [] away)

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        store: Optional[MilvusGraphStore] = None,
        llm: LLMType = DEFAULT,
        extractor: Optional[TransformComponent] = None,
        embed_model: Optional[BaseEmbedding] = None,
        transformations: Optional[Sequence[TransformComponent]] = None,
        show_progress: bool = False,
        callback_manager: Optional[CallbackManager] = None,
        **store_kwargs: Any,
    ) -> "GraphRAGIndex":
        """Ingest documents and return their index; the other arguments are as in `GraphRAGIndex` (the
        ingest makes no LLM call unless `extractor=LLMTripletExtractor(llm=...)`).

        Args:
            documents: The documents; triplets in `metadata["triplets"]` are used as given.
            store: The store to write to. Defaults to `MilvusGraphStore(embed_model=embed_model,
                **store_kwargs)`: Milvus Lite at ./graphrag_milvus.db, its collections kept if they exist.
            embed_model: For the default store only.
            **store_kwargs: For the default store only (`uri`, `collection_prefix`, ...).
        """
        own_step = bool(transformations) and isinstance(list(transformations)[-1], GraphRAGTransform)
        if store is None and not own_step:
            store = MilvusGraphStore(embed_model=embed_model, **store_kwargs)
        elif embed_model is not None or store_kwargs:
            raise TypeError("embed_model and store options apply to a new store; with store=..., set them on the store.")
        index = cls(store=store, llm=llm, extractor=extractor, transformations=transformations,
                    callback_manager=callback_manager, show_progress=show_progress)
        run_sync(index._aingest(documents))
        return index

    @classmethod
    def from_existing(cls, store: MilvusGraphStore, **kwargs: Any) -> "GraphRAGIndex":
        """The index of a store written before (by this package, `GraphRAGTransform` or PGI through
        `MilvusPropertyGraphStore`); keyword arguments as in `GraphRAGIndex` (`llm`, `extractor`, ...)."""
        return cls(store=store, **kwargs)

    @property
    def transformations(self) -> List[TransformComponent]:
        """Every ingestion step: the steps before the graph write, then `transform`."""
        return [*self._transformations, self.transform]

    # retrieval ----------------------------------------------------------------------------------
    def as_retriever(self, **kwargs: Any) -> GraphRAGRetriever:
        """A `GraphRAGRetriever` over the store, with the index's `llm` unless `llm=` is given (an LLM,
        None for none, or "default" for `Settings.llm`); with an LLM, each retrieval makes 2 LLM calls
        (NER and rerank). Keyword arguments go to the retriever (`similarity_top_k`, `ranker`,
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

        Keyword arguments that `GraphRAGRetriever` takes (`similarity_top_k`, `ranker`, ...) go to the
        retriever, the others to `RetrieverQueryEngine.from_args` (`response_mode`, `node_postprocessors`,
        `streaming`, ...).
        """
        retriever = self._retriever_for(llm, kwargs)
        answering = self._answering(llm)
        if answering is None:
            answering = MockLLM()  # never called; keeps Settings.llm (OpenAI by default) unresolved
            if "response_synthesizer" not in kwargs:
                kwargs["response_synthesizer"] = _passages_only(answering, kwargs)
        return RetrieverQueryEngine.from_args(retriever, llm=answering, **kwargs)

    def as_chat_engine(self, chat_mode: ChatMode = ChatMode.BEST, llm: LLMType = DEFAULT, **kwargs: Any) -> BaseChatEngine:
        """A chat engine over the graph-retrieved passages: by default ("best", as "condense_plus_context")
        LlamaIndex's `CondensePlusContextChatEngine`, which condenses the conversation into a question,
        retrieves with it and answers from the passages; "context", "condense_question" and "simple" as in
        LlamaIndex. The LLMs are those of `as_query_engine`; a chat needs one to answer (a ValueError
        names the fix otherwise). Keyword arguments that `GraphRAGRetriever` takes go to the retriever,
        the others to the engine (`system_prompt`, `chat_history`, `memory`, ...)."""
        answering = self._answering(llm)
        if answering is None:
            raise ValueError(
                "as_chat_engine needs an LLM to answer: pass llm=..., set Settings.llm or OPENAI_API_KEY "
                "(as_query_engine() answers with the passages themselves, with no LLM)"
            )
        return _chat_engine(chat_mode, self._retriever_for(llm, kwargs), answering, kwargs)

    def _retriever_for(self, llm: LLMType, kwargs: Dict[str, Any]) -> GraphRAGRetriever:
        """The retriever of an engine, popping its arguments from `kwargs`: with the index's LLM, else the
        one given for the engine."""
        options = {key: kwargs.pop(key) for key in list(kwargs) if key in _RETRIEVER_ARGUMENTS}
        options.setdefault("llm", self.llm if self.llm is not None else (None if is_default(llm) else resolve_llm(llm)))
        return self.as_retriever(**options)

    def _answering(self, llm: LLMType) -> Optional[LLM]:
        """The LLM that answers: the one given (None: none), else the index's, else `Settings.llm` (or OpenAI)."""
        return resolve_llm(llm) if not is_default(llm) or self.llm is None else self.llm

    # writing ------------------------------------------------------------------------------------
    def insert(self, document: Document, **insert_kwargs: Any) -> None:
        """Ingest one document through the transformations."""
        run_sync(self.ainsert(document, **insert_kwargs))

    async def ainsert(self, document: Document, **insert_kwargs: Any) -> None:
        """Async `insert`."""
        await self._aingest([document])

    def insert_nodes(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        """Write nodes that are already split (their `ref_doc_id` is their document): only the graph
        step runs on them, as `insert_nodes` skips the node parser in LlamaIndex's indices."""
        run_sync(self.ainsert_nodes(nodes, **insert_kwargs))

    async def ainsert_nodes(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        """Async `insert_nodes`."""
        await self.transform.acall(list(nodes))

    def delete_ref_doc(self, ref_doc_id: str, delete_from_docstore: bool = False, **delete_kwargs: Any) -> None:
        """Delete a document's passages; what only they stated is not read again, and `compact()` deletes it."""
        self.store.delete(ref_doc_id)

    async def adelete_ref_doc(self, ref_doc_id: str, delete_from_docstore: bool = False, **delete_kwargs: Any) -> None:
        """Async `delete_ref_doc`."""
        await self.store.adelete(ref_doc_id)

    def refresh_ref_docs(self, documents: Sequence[Document], **update_kwargs: Any) -> List[bool]:
        """Re-ingest the documents that are new or changed, and extract again the passages whose LLM
        extraction failed before (pending); return, for each document, whether anything of it was written.

        A document is unchanged when the steps before the graph write (the splitter) give exactly its
        stored passages and each records the document's current hash (`ingest.refresh`): then nothing is
        embedded or written, except its pending passages when the graph step extracts with an LLM
        (`LLMTripletExtractor`, whose first call goes through the LLM's open circuit breaker, so that a
        refresh right after an outage extracts them at once); their new triplets replace the free
        extractor's. A changed document is written over in place: a passage whose embedded text is
        unchanged keeps its vector, only new entities and relations are embedded, the LLM extracts only
        the chunks it has not read as they are now, and the stored passages the new split no longer gives
        are deleted after the write: readers see the old document or the new, never neither.
        """
        return run_sync(self.arefresh_ref_docs(documents, **update_kwargs))

    async def arefresh_ref_docs(self, documents: Sequence[Document], **update_kwargs: Any) -> List[bool]:
        """Async `refresh_ref_docs`."""
        plan = plan_refresh(self.store, documents, await self._asplit(documents), self.transform.extracts_with_llm)
        if plan.nodes:
            await self.transform.acall(plan.nodes)
        self.store.delete_passages(plan.gone)
        return plan.refreshed

    @property
    def ref_doc_info(self) -> Dict[str, RefDocInfo]:
        """Each stored document's passages (their node ids) and metadata (its first passage's), read from
        the passages' rows in Milvus: one pass over them."""
        info: Dict[str, RefDocInfo] = {}
        for page in self.store.collections.pages(PASSAGES, [*PASSAGE_FIELDS, "doc_id"]):
            for row in page:
                node = metadata_dict_to_node(row, text=row["text"])
                document = info.setdefault(row["doc_id"], RefDocInfo(metadata=dict(node.metadata)))
                document.node_ids.append(node.node_id)
        return info

    # BaseIndex's hooks: Milvus holds the passages, so no docstore copy is written
    def build_index_from_nodes(self, nodes: Sequence[BaseNode], **build_kwargs: Any) -> IndexLPG:
        return self._build_index_from_nodes(nodes, **build_kwargs)

    def _build_index_from_nodes(self, nodes: Sequence[BaseNode], **build_kwargs: Any) -> IndexLPG:
        self.insert_nodes(nodes)
        return IndexLPG()

    def _insert(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        self.insert_nodes(nodes)

    def _delete_node(self, node_id: str, **delete_kwargs: Any) -> None:
        raise NotImplementedError("GraphRAGIndex deletes whole documents: delete_ref_doc(ref_doc_id), or "
                                  "refresh_ref_docs to re-ingest a changed one in place")

    # helpers ------------------------------------------------------------------------------------
    async def _aingest(self, documents: Sequence[Document]) -> None:
        """Split the documents with the steps before the graph write, then write the graph."""
        await self.ainsert_nodes(await self._asplit(documents))

    async def _asplit(self, documents: Sequence[Document]) -> List[BaseNode]:
        """The nodes the steps before the graph write give (the splitter)."""
        documents = self._excluding_triplets(documents)
        return await arun_transformations(documents, self._transformations, show_progress=self._show_progress)

    def _excluding_triplets(self, documents: Sequence[Document]) -> List[Document]:
        """The documents, their triplets key marked as no text (excluded from embedding and LLM context)
        before any step runs: a splitter then does not count the triplets against its chunk size."""
        for document in documents:
            exclude_from_content(document, self.transform.triplets_key)
        return list(documents)

    def __repr__(self) -> str:
        return f"GraphRAGIndex(store={self.store!r}, llm={type(self.llm).__name__ if self.llm else None})"


def _graph_step(
    steps: List[TransformComponent], store: Optional[MilvusGraphStore], extractor: Optional[TransformComponent]
) -> GraphRAGTransform:
    """The graph write: the `GraphRAGTransform` ending `steps` (popped), else one writing to `store`."""
    if steps and isinstance(steps[-1], GraphRAGTransform):
        transform = steps.pop()
        if store is not None and transform.store is not store:
            raise ValueError("The GraphRAGTransform of transformations writes to another store.")
        if extractor is not None:
            raise ValueError("extractor= configures the GraphRAGTransform the index adds: set it on yours.")
    else:
        transform = GraphRAGTransform(store=store or MilvusGraphStore(), extractor=extractor)
    if any(isinstance(step, GraphRAGTransform) for step in steps):
        raise ValueError("A GraphRAGTransform must be the last transformation: it writes the graph.")
    return transform


def _chat_engine(mode: ChatMode, retriever: GraphRAGRetriever, llm: LLM, kwargs: Dict[str, Any]) -> BaseChatEngine:
    """LlamaIndex's chat engine of `mode` over the retriever (as `BaseIndex.as_chat_engine` builds it)."""
    from llama_index.core import chat_engine

    if mode in (ChatMode.BEST, ChatMode.CONDENSE_PLUS_CONTEXT):
        return chat_engine.CondensePlusContextChatEngine.from_defaults(retriever, llm=llm, **kwargs)
    if mode == ChatMode.CONTEXT:
        return chat_engine.ContextChatEngine.from_defaults(retriever, llm=llm, **kwargs)
    if mode == ChatMode.CONDENSE_QUESTION:
        engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
        return chat_engine.CondenseQuestionChatEngine.from_defaults(engine, llm=llm, **kwargs)
    if mode == ChatMode.SIMPLE:
        return chat_engine.SimpleChatEngine.from_defaults(llm=llm, **kwargs)
    raise ValueError(f"chat_mode {mode!r} is not offered: use one of best, condense_plus_context, context, "
                     "condense_question, simple (or an agent around a QueryEngineTool of as_query_engine())")


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
