"""MilvusGraphStore: entities, relations and passages of a Graph RAG index in Milvus, as facts written once
(`docs/design/collections.md`).

Milvus is the single source of truth. A passage row holds its text, `ref_doc_id`, metadata and the ids of
the relations it states; a relation row its two entities; statements, links and the log are facts written
with them. The store is a facade over three parts picked once when it opens (`backends.choice`): the
collections (`milvus.collections`), the graph backend that derives the adjacency from the facts, in this
process or read from Milvus (`backends`), and the vector search (`milvus.search`). Writes and deletes are
in `ingest.writes`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from functools import partial
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode, NodeWithScore, TransformComponent
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from llama_index_graphrag_milvus.backends.base import GraphBackend
from llama_index_graphrag_milvus.backends.choice import check_settings, open_backend
from llama_index_graphrag_milvus.embeddings import resolve_embed_model
from llama_index_graphrag_milvus.errors import GraphStoreError, unexpected_keywords
from llama_index_graphrag_milvus.ingest.compact import compact
from llama_index_graphrag_milvus.ingest.rows import MAX_PASSAGE_BYTES, PASSAGE_FIELDS, checked
from llama_index_graphrag_milvus.ingest.writes import Writer, add_in_chunks, passages_of
from llama_index_graphrag_milvus.llm.mentions import known_names
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, PASSAGES, RELATIONS, Collections, is_local_path
from llama_index_graphrag_milvus.milvus.filters import milvus_literal
from llama_index_graphrag_milvus.milvus.search import VectorSearch
from llama_index_graphrag_milvus.schema import Triplet

__all__ = ["DEFAULT_URI", "MAX_PASSAGE_BYTES", "GraphStoreError", "MilvusGraphStore", "milvus_literal"]

logger = logging.getLogger(__name__)

DEFAULT_URI = "./graphrag_milvus.db"
#: What `MilvusClient` takes (through `client_kwargs`), for the error that says where a keyword goes.
_CLIENT_KEYWORDS = ("user", "password", "db_name", "timeout", "secure", "server_pem_path", "server_name",
                    "client_pem_path", "client_key_path", "ca_pem_path")


class MilvusGraphStore:
    """Entities, relations and passages of a Graph RAG index, in Milvus.

    Args:
        uri: A Milvus Lite database path (the default, no server needed), or the URI of a Milvus server,
            a Milvus cluster or Zilliz Cloud.
        token: The token of a Milvus server or Zilliz Cloud ("user:password" or an API key).
        embed_model: For entity names, relation sentences and passages. Defaults to `Settings.embed_model`
            when it is set or OPENAI_API_KEY is, else to the bundled offline MiniLM (the `local` extra).
        collection_prefix: The collections are `{prefix}_entities`, `_relations`, `_passages`,
            `_statements`, `_links` and `_log`; stores with different prefixes never see each other's rows.
        dim: The embedding dimension; found by embedding a probe text when not given.
        batch_size: Rows per embedding call and per Milvus upsert.
        index_config: The vector index of entities, relations and passages (Milvus `add_index` arguments):
            FLAT (exact) by default on Milvus Lite, whose HNSW loses hits in filtered search, AUTOINDEX on a server.
        synonym_threshold: Entities whose embeddings are at least this close (cosine) are linked, and each
            keeps its best links as synonyms, so that chains continue across spellings; None: no links.
        vector_cache: Search a float32 copy of the vectors in memory, not Milvus (4·dim bytes a row,
            `milvus.vectors`): on by default for Milvus Lite, off for a server. Needs `adjacency="memory"`.
        adjacency: "memory" (the default) derives the sparse adjacency in this process when first used;
            "milvus" keeps none: every hop reads what it touches from Milvus, by indexed fields, for graphs
            larger than one process's memory. Both give the same answers.
        consistency_level: Of every read (and of new collections). "Session" (the default, as
            LlamaIndex's `MilvusVectorStore`) reads this store's own writes at once and other clients'
            within a moment; "Strong" reads every client's at once, at ~200 ms a call on a server (Milvus
            2.3.5 waits for its time tick). The log (`sync`, snapshots) is always read Strong.
        snapshot: Where `close()` saves the in-memory caches, for the next build to read instead of every
            row (`milvus.snapshot`). Defaults to `<database path>.graphrag-cache/<prefix>.npz` on Milvus
            Lite and to none on a server; a path turns it on, False off.
        overwrite: Drop the store's collections first.
        client_kwargs: Passed to `MilvusClient` (e.g. `{"db_name": ...}`, `{"server_pem_path": ...}`).

    Raises:
        TypeError: A keyword it does not take, naming the close match (or `client_kwargs`).
    """

    def __init__(
        self,
        uri: str = DEFAULT_URI,
        token: str = "",
        embed_model: Optional[BaseEmbedding] = None,
        collection_prefix: str = "graphrag",
        *,
        dim: Optional[int] = None,
        batch_size: int = 256,
        index_config: Optional[Dict[str, Any]] = None,
        synonym_threshold: Optional[float] = 0.9,
        vector_cache: Optional[bool] = None,
        adjacency: str = "memory",
        consistency_level: str = "Session",
        snapshot: Optional[str | bool] = None,
        overwrite: bool = False,
        client_kwargs: Optional[Dict[str, Any]] = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise unexpected_keywords("MilvusGraphStore", unknown, STORE_PARAMETERS, dict.fromkeys(
                _CLIENT_KEYWORDS, "client_kwargs={...} (the Milvus client's options)"))
        check_settings(collection_prefix, adjacency)
        self.collection_prefix, self.adjacency = collection_prefix, adjacency
        self.embed_model = resolve_embed_model(embed_model)
        self.batch_size, self.synonym_threshold = batch_size, synonym_threshold
        self.consistency_level = consistency_level
        self._dim = dim or len(self.embed_model.get_text_embedding("dimension probe"))
        self._write_lock = threading.RLock()
        self.collections = Collections(
            uri, token, collection_prefix, self._dim,
            index_config=index_config or {"index_type": "FLAT" if is_local_path(uri) else "AUTOINDEX"},
            consistency_level=consistency_level, overwrite=overwrite, client_kwargs=dict(client_kwargs or {}), owner=self,
        )
        self.uri = self.collections.uri
        #: What reopens this store elsewhere (a worker process of `IngestionPipeline`): `reopened`.
        self.settings = dict(uri=self.uri, token=token, embed_model=self.embed_model, collection_prefix=collection_prefix,
                             dim=self._dim, batch_size=batch_size, index_config=index_config,
                             synonym_threshold=synonym_threshold, vector_cache=vector_cache, adjacency=adjacency,
                             consistency_level=consistency_level, snapshot=False, client_kwargs=client_kwargs)
        self._open_backend = partial(open_backend, self.collections, adjacency, vector_cache, snapshot)
        self._connect(*self._open_backend(overwrite))

    def _connect(self, graph: GraphBackend, search: VectorSearch) -> None:
        """Read and write through `graph` and `search` from now on (a retrieval under way keeps the old)."""
        self._graph, self._search = graph, search
        self._writer = Writer(self.collections, graph, search, self.embed_model, self._dim, self.batch_size,
                              self.synonym_threshold, failed=self._renew)

    def _renew(self) -> None:
        """New caches, built from Milvus when first used (after a write failed midway, or a compaction)."""
        self._connect(*self._open_backend(False))

    def sync(self) -> bool:
        """Catch up with other stores' writes (other processes, on a server): if Milvus' log holds a write
        the caches do not, swap in new caches built from Milvus and return True; else one read of the log.
        False with `adjacency="milvus"`, which reads Milvus at every hop."""
        with self._write_lock:
            if not self._graph.behind():
                return False
            graph, search = self._open_backend(False)
            graph.ready()  # type: ignore[attr-defined]  (only the memory backend is ever behind)
            self._connect(graph, search)
            return True

    vector_store = property(lambda self: self.collections.vector_store, doc="""The passages collection as a standard
        `MilvusVectorStore`, for plain vector RAG on the same rows and `IngestionPipeline(vector_store=...)`.""")

    client = property(lambda self: self.collections.client, doc="The `MilvusClient` (None once closed).")

    #: The names of the three collections of embedded facts.
    entities_collection, relations_collection, passages_collection = (
        property(lambda self, kind=kind: self.collections.names[kind]) for kind in (ENTITIES, RELATIONS, PASSAGES))

    backend = property(lambda self: self._graph, doc="The graph backend (`MemoryGraph` or `MilvusGraph`): `expand`, hops.")
    search = property(lambda self: self._search, doc="The vector search (`CachedSearch` or `MilvusSearch`) over live rows.")

    def add(self, nodes: Sequence[BaseNode], triplets: Optional[Sequence[Sequence[Triplet]]] = None) -> List[str]:
        """Store passage nodes with their triplets (by default, those in their metadata); return their ids.

        Idempotent: a passage stored as given is skipped; one whose metadata alone changed is written again
        alone. Known entities and relations are not embedded again. Every row is a fact upserted whole, each
        passage after the facts it names: an interrupted call, run again, completes the store
        (`docs/design/consistency.md`)."""
        nodes, triplets = checked(nodes, triplets)
        with self._write_lock:
            return self._writer.add(nodes, triplets)

    def bulk_load(self, nodes: Iterable[BaseNode], transform: Optional[TransformComponent] = None, *,
                  chunk_size: int = 1000, show_progress: bool = False) -> Dict[str, int]:
        """`add` a chunk at a time, for a big load: `nodes` (any iterable, read `chunk_size` at a time) with
        their triplets, or through `transform` (a `GraphRAGTransform` on this store). Returns the rows
        stored, by collection."""
        add_in_chunks(self.add, nodes, transform, chunk_size, show_progress)
        return self.count()

    def delete(self, ref_doc_id: str) -> None:
        """Delete a document: its passages and their statements. The relations and entities only it
        stated are left out of every read from now on, and `compact()` deletes them."""
        self.delete_passages(self.passage_ids(ref_doc_id))

    def delete_passages(self, passage_ids: Sequence[str]) -> None:
        """Delete passages by id, as `delete` deletes a document's."""
        with self._write_lock:
            self._writer.delete_passages(passage_ids)

    def clear(self) -> None:
        """Delete every row of this store, and start empty (retrievals meanwhile see the store before or
        after, never a missing collection)."""
        with self._write_lock:
            self._writer.clear()

    def compact(self) -> Dict[str, int]:
        """Delete what no stored passage states (relations, entities, their links, stray statements), left by
        deletes and interrupted writes; the rows deleted, by collection. Run it while nothing else writes."""
        with self._write_lock:
            deleted = compact(self.collections)
            self._renew()
            return deleted

    async def aadd(self, nodes: Sequence[BaseNode], triplets: Optional[Sequence[Sequence[Triplet]]] = None) -> List[str]:
        """`add` off the event loop."""
        return await asyncio.to_thread(self.add, nodes, triplets)

    async def adelete(self, ref_doc_id: str) -> None:
        """`delete` off the event loop."""
        await asyncio.to_thread(self.delete, ref_doc_id)

    def flush(self) -> None:
        """Seal what was written, so that searches run on indexed segments (searches do it when needed)."""
        self.collections.flush()

    @property
    def generation(self) -> str:
        """A token of the store's state in Milvus, changed by every write of any store on it."""
        return self.collections.generation()

    def count(self) -> Dict[str, int]:
        """Rows stored in each collection of embedded facts, as Milvus counts them (live or not)."""
        return self.collections.counts()

    def passage_ids(self, ref_doc_id: str) -> List[str]:
        """The ids of a document's stored passages (`passage_id(ref_doc_id, text)` of each)."""
        return self.documents_passage_ids([ref_doc_id]).get(ref_doc_id, [])

    def documents_passage_ids(self, ref_doc_ids: Sequence[str]) -> Dict[str, List[str]]:
        """`passage_ids` of many documents at once, by document id (documents with none are left out)."""
        return passages_of(self.collections, ref_doc_ids)

    def has_entities(self, entity_ids: Sequence[int]) -> np.ndarray:
        """Whether each entity id is live (a stored passage states a relation naming it)."""
        return self._graph.live(ENTITIES, np.asarray(entity_ids, dtype=np.int64))

    def match_entities(self, text: str) -> List[str]:
        """Known entity names occurring in `text` (longest matches first, non-overlapping)."""
        return known_names(text, self.has_entities)

    def entity_vectors(self, entity_ids: Sequence[int]) -> Dict[int, List[float]]:
        """The vectors of the live entities among `entity_ids`, as the entity search compares them."""
        ids = list(dict.fromkeys(int(e) for e in entity_ids))
        live = [e for e, ok in zip(ids, self.has_entities(ids)) if ok]
        return self._search.entity_vectors(live) if live else {}

    def search_passages(self, vector: Sequence[float], top_k: int) -> List[NodeWithScore]:
        """Plain dense retrieval of passages by Milvus' own search (the vector RAG baseline)."""
        hits = self.collections.search(PASSAGES, [vector], top_k, fields=PASSAGE_FIELDS)[0]
        return [NodeWithScore(node=_to_node(row), score=score) for _, score, row in hits]

    def linked_passages(self, passage_id: str, hub_fraction: float = 0.02) -> List[str]:
        """The passages about an entity `passage_id` names (half their relations name it), hubs (entities in
        more than `hub_fraction` of the passages, 20 to 200: `hub_limit`) not followed, as in walks."""
        return self._graph.linked_passages(passage_id, hub_fraction)

    def synonyms_of(self, entity_ids: Sequence[int]) -> Dict[int, Set[int]]:
        """The synonyms of each live entity (its best links, and those keeping it among theirs)."""
        return self._graph.synonyms_of(entity_ids)

    def relations_of(self, entity_ids: Sequence[int]) -> Dict[int, Set[int]]:
        """The live relation ids of each entity that has any."""
        return self._graph.relations_of(entity_ids)

    def passages_stating(self, relation_ids: Sequence[int]) -> Dict[int, Set[str]]:
        """The ids of the passages stating each relation that some passage states."""
        return self._graph.passages_stating(relation_ids)

    def describe(self, relation_ids: Sequence[int]) -> Dict[int, Triplet]:
        """The subject, predicate and object of each stored relation (one query per 1,000 ids)."""
        rows = self.collections.get(RELATIONS, list(dict.fromkeys(relation_ids)), ["id", "subject", "predicate", "object"])
        return {row["id"]: Triplet(row["subject"], row["predicate"], row["object"]) for row in rows}

    def get_passages(self, passage_ids: Sequence[str]) -> Dict[str, BaseNode]:
        """Passage nodes by passage id, as they were ingested (node id, text and metadata)."""
        return {row["id"]: _to_node(row) for row in self.collections.get(PASSAGES, list(passage_ids), PASSAGE_FIELDS)}

    def close(self) -> None:
        """Release the database, so that another store or process can open it. Idempotent."""
        if self.collections.client is not None:
            with self._write_lock:
                try:
                    self._graph.close()
                except Exception as exc:  # a cache that cannot be saved is rebuilt next time
                    logger.warning("Could not save the caches of %r: %s", self, exc)
            self.collections.close()

    def __enter__(self) -> "MilvusGraphStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MilvusGraphStore(uri={self.uri!r}, collection_prefix={self.collection_prefix!r})"


#: The keywords `MilvusGraphStore` takes.
STORE_PARAMETERS = list(inspect.signature(MilvusGraphStore).parameters)[:-1]


def _to_node(row: Dict[str, Any]) -> BaseNode:
    return metadata_dict_to_node(row, text=row["text"])
