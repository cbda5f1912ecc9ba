"""MilvusGraphStore: entities, relations and passages in three Milvus collections.

Milvus is the single source of truth. A relation row holds its subject and object entity ids; a passage
row holds its text, `ref_doc_id`, metadata and the ids of the relations it states (the relation→passage
edges live on the passage side: a passage states a bounded number of relations, while a relation may be
stated by any number of passages, and an edge is then written once, atomically with its passage).
The sparse adjacency (`GraphCache`) is rebuilt from these rows when the store opens and kept current on
every write.

The passages collection is a standard LlamaIndex Milvus collection: `store.vector_store` is a
`MilvusVectorStore` over it, so plain vector RAG runs on the very same rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
from llama_index.vector_stores.milvus import MilvusVectorStore
from pymilvus import DataType, MilvusClient

from llama_index_graphrag_milvus import snapshot as snapshot_module
from llama_index_graphrag_milvus.extract import given_triplets
from llama_index_graphrag_milvus.adjacency import GraphCache
from llama_index_graphrag_milvus.graph import Graph
from llama_index_graphrag_milvus.remote import MilvusExpander
from llama_index_graphrag_milvus.vectors import VectorCache
from llama_index_graphrag_milvus.schema import (
    MAX_NAME_LENGTH,
    ScoredRelation,
    Triplet,
    chunked,
    entity_id,
    normalize_name,
    passage_id,
)

logger = logging.getLogger(__name__)

DEFAULT_URI = "./graphrag_milvus.db"
_ID_BATCH = 1000  # ids per `in [...]` filter
_READ_BATCH = 16384  # rows per page when rebuilding the adjacency from a server
_LITE_PAGE = 100_000  # rows per page when rebuilding it from Milvus Lite
_PASSAGE_FIELDS = ["id", "text", "_node_content", "_node_type"]
_MAX_SYNONYMS = 8
#: The longest passage text a row holds (a Milvus VARCHAR).
MAX_PASSAGE_BYTES = 65_535
_WORD = re.compile(r"\w+", re.UNICODE)
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
_MAX_CJK_NAME = 16


@contextlib.contextmanager
def _quiet_lite():
    """Milvus Lite lacks a timestamp RPC (AllocTimestamp) that `query_iterator` and index creation try
    first, and its embedded server logs a traceback each time; silence that harmless noise."""
    loggers = [logging.getLogger(name) for name in ("grpc._server", "pymilvus.orm.iterator", "pymilvus")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


class PassageVectorStore(MilvusVectorStore):
    """The passages collection as a standard `MilvusVectorStore` (`store.vector_store`), for plain vector
    RAG and for `IngestionPipeline(vector_store=...)`: its writes and deletes go through the graph store,
    so deleting a document also removes the relations and entities only it supported, every filter is
    escaped, and the adjacency follows. Queries are MilvusVectorStore's own."""

    _graph_store: Any = PrivateAttr(default=None)

    def add(self, nodes: List[BaseNode], **add_kwargs: Any) -> List[str]:
        self._graph_store.add(nodes)
        return [n.node_id for n in nodes]

    async def async_add(self, nodes: List[BaseNode], **add_kwargs: Any) -> List[str]:
        await asyncio.to_thread(self._graph_store.add, nodes)
        return [n.node_id for n in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        self._graph_store.delete(ref_doc_id)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self._graph_store.delete, ref_doc_id)

    def delete_nodes(self, node_ids: Optional[List[str]] = None, filters: Any = None, **kwargs: Any) -> None:
        raise NotImplementedError("Delete passages by document: MilvusGraphStore.delete(ref_doc_id).")

    async def adelete_nodes(self, node_ids: Optional[List[str]] = None, filters: Any = None, **kwargs: Any) -> None:
        self.delete_nodes(node_ids, filters)

    def clear(self) -> None:
        self._graph_store.clear()

    async def aclear(self) -> None:
        await asyncio.to_thread(self._graph_store.clear)


class GraphStoreError(RuntimeError):
    """A store cannot be opened or written as asked; the message says how to fix it."""


_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def milvus_literal(value: str) -> str:
    """A Milvus filter string literal for `value`, escaped so that it can never widen an expression.

    Milvus accepts the escapes \\" \\' \\\\ \\n \\r \\t and no others (not \\uXXXX, which is why
    `json.dumps` is wrong for non-ASCII text).
    """
    if not isinstance(value, str):
        raise TypeError(f"expected a string id, got {type(value).__name__}")
    return '"' + value.translate(_ESCAPES) + '"'


def _int_list(values: Iterable[int]) -> str:
    return "[" + ",".join(str(int(v)) for v in values) + "]"


def _is_local_path(uri: str) -> bool:
    return "://" not in uri


# Milvus Lite runs one embedded server per database path and process; it holds a file lock until it is
# released. Stores sharing a path in one process share that server, so it is released with the last.
_lite_users: Dict[str, int] = {}
_lite_lock = threading.Lock()


def _lite_acquire(path: str) -> None:
    with _lite_lock:
        _lite_users[path] = _lite_users.get(path, 0) + 1


def _lite_release(path: str) -> None:
    with _lite_lock:
        _lite_users[path] -= 1
        if _lite_users[path] > 0:
            return
        del _lite_users[path]
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(path)


def _held_by_another_process(path: str) -> bool:
    """Whether another process holds the Milvus Lite lock on `path`."""
    import fcntl

    lock_file = Path(path) / "LOCK"
    if not lock_file.exists():
        return False
    with open(lock_file, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def _id_ranges(parts: int, strings: bool) -> List[str]:
    """Filters splitting a collection into `parts` ranges of its primary key, about equal when keys are
    hashes (entity and relation ids: uniform int64; passage ids: hex digests), covering every key."""
    if parts <= 1:
        return [""]
    if strings:  # by leading hex digits: 16**digits ranges
        digits = 1
        while 16**digits < parts:
            digits += 1
        bounds = [milvus_literal(f"{i:0{digits}x}") for i in range(1, 16**digits)]
    else:
        bounds = [str(int(b)) for b in np.linspace(-(2**63), 2**63 - 1, parts + 1)[1:-1]]
    filters = [f"id < {bounds[0]}"]
    filters += [f"id >= {lo} and id < {hi}" for lo, hi in zip(bounds[:-1], bounds[1:])]
    return filters + [f"id >= {bounds[-1]}"]


def _indices(ids: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Pairs of ids as pairs of indices into `ids`; pairs naming an id not in `ids` are dropped."""
    order = np.argsort(ids, kind="stable")
    at = np.minimum(np.searchsorted(ids[order], pairs), max(len(ids) - 1, 0))
    found = (ids[order][at] == pairs).all(axis=1) if len(ids) else np.zeros(len(pairs), dtype=bool)
    return order[at[found]].reshape(-1, 2)


def _float32(rows: List[Any], dim: int) -> np.ndarray:
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), dim)


def _resolve_embed_model(embed_model: Optional[BaseEmbedding]) -> BaseEmbedding:
    """The given model; else `Settings.embed_model` if set or OpenAI is usable; else the bundled MiniLM."""
    if embed_model is not None:
        return embed_model
    from llama_index.core import Settings

    if Settings._embed_model is not None or os.environ.get("OPENAI_API_KEY"):
        return Settings.embed_model
    try:
        from llama_index_graphrag_milvus.embeddings import local_embed_model

        return local_embed_model()
    except ImportError as exc:
        raise GraphStoreError(
            "No embed_model was given, Settings.embed_model is unset and OPENAI_API_KEY is not set. "
            "Pass embed_model=..., set OPENAI_API_KEY, or install the offline embedder: "
            "pip install 'llama-index-graphrag-milvus[local]'"
        ) from exc


class MilvusGraphStore:
    """Entities, relations and passages of a Graph RAG index, in Milvus.

    Args:
        uri: A Milvus Lite database path (the default, no server needed), or the URI of a Milvus server,
            a Milvus cluster or Zilliz Cloud.
        token: The token of a Milvus server or Zilliz Cloud ("user:password" or an API key).
        embed_model: The embedding model for entity names, relation sentences and passages.
            Defaults to `Settings.embed_model` when it is set or OPENAI_API_KEY is, else to the bundled
            offline MiniLM (the `local` extra).
        collection_prefix: The three collections are `{prefix}_entities`, `{prefix}_relations` and
            `{prefix}_passages`; stores with different prefixes never see each other's rows.
        dim: The embedding dimension; found by embedding a probe text when not given.
        batch_size: Rows per embedding call and per Milvus insert.
        index_config: The vector index of the three collections (Milvus `add_index` arguments). Defaults
            to FLAT (exact) on Milvus Lite, whose HNSW loses hits in filtered search, and to AUTOINDEX on
            a server.
        synonym_threshold: Entities whose embeddings are at least this close (cosine) are linked as
            synonyms, so that chains continue across spellings; None disables the links. With the
            vector cache, new entities are compared with all stored ones exactly up to 5×10^4 entities,
            through inverted lists above.
        vector_cache: Keep a float32 copy of the vectors in memory and search it there instead of
            asking Milvus (4·dim bytes per entity, relation and passage): exactly up to 2×10^5 rows,
            through inverted lists above (see `vectors.py`). Defaults to on for Milvus Lite, whose every
            call costs tens of milliseconds, and off for a server.
        adjacency: "memory" (the default) keeps the sparse adjacency in this process, rebuilt on open;
            "milvus" keeps none: writes, deletes and retrieval load the neighbourhood they touch from
            Milvus with batched queries, for graphs larger than one process's memory (known entity
            names are then not matched without an LLM, and there is no vector cache).
        consistency_level: Of new collections. "Strong" (the default) reads every write at once; on a
            Milvus server "Bounded" or "Session" read faster but may miss writes for a few seconds.
        snapshot: Where to save the in-memory caches on `close()`, so that the next open builds them
            from that file instead of re-reading every row (see `snapshot.py`). Defaults to
            `<database path>.graphrag-cache/<prefix>.npz` on Milvus Lite and to none on a server, where
            other processes may write; a path turns it on (only if this process is the only writer),
            False turns it off. The file is deleted before the first write and trusted only while
            Milvus counts the rows it counted.
        overwrite: Drop the three collections first.
        **client_kwargs: Passed to `MilvusClient` (e.g. `db_name`, `server_pem_path`).
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
        consistency_level: str = "Strong",
        snapshot: Optional[str | bool] = None,
        overwrite: bool = False,
        **client_kwargs: Any,
    ) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,200}", collection_prefix):
            raise GraphStoreError(
                f"collection_prefix {collection_prefix!r} is not a valid Milvus collection name start: "
                "use letters, digits and underscores, starting with a letter or underscore."
            )
        self.uri = uri
        self.collection_prefix = collection_prefix
        self._snapshot_path: Optional[Path] = None  # set below, once the caches can be built
        self._snapshot_current = False  # the file holds exactly what the caches hold
        self.embed_model = _resolve_embed_model(embed_model)
        self.batch_size = batch_size
        self.synonym_threshold = synonym_threshold
        if adjacency not in ("memory", "milvus"):
            raise GraphStoreError(f'adjacency must be "memory" or "milvus", got {adjacency!r}')
        self.adjacency = adjacency
        self.consistency_level = consistency_level
        self.entities_collection = f"{collection_prefix}_entities"
        self.relations_collection = f"{collection_prefix}_relations"
        self.passages_collection = f"{collection_prefix}_passages"
        self._index_config = index_config or {"index_type": "FLAT" if _is_local_path(uri) else "AUTOINDEX"}
        self._dim = dim or len(self.embed_model.get_text_embedding("dimension probe"))
        self._write_lock = threading.Lock()
        self._unflushed: set = set()  # collections written since the last flush
        self._lite_path: Optional[str] = None
        if _is_local_path(uri):
            path = Path(uri).expanduser().resolve()
            path.parent.mkdir(parents=True, exist_ok=True)
            self.uri = uri = str(path)
        self._token, self._client_kwargs = token, client_kwargs
        with _quiet_lite():
            self.vector_store = self._open_vector_store(token, overwrite, client_kwargs)
        self.client: MilvusClient = self.vector_store.client
        if _is_local_path(uri):
            self._lite_path = uri
            _lite_acquire(uri)
        in_memory = adjacency == "memory"
        self._use_vectors = in_memory and (self._lite_path is not None if vector_cache is None else vector_cache)
        self._snapshot_path = self._snapshot_location(snapshot) if in_memory else None
        if overwrite and self._snapshot_path is not None:
            snapshot_module.discard(self._snapshot_path)
        self._reset_caches()
        try:
            with _quiet_lite():
                self._create_collections()
            self._check_dimensions()
            for name in (self.entities_collection, self.relations_collection, self.passages_collection):
                self.client.load_collection(name)
            if in_memory:
                self._load_cache()
        except BaseException:
            self._snapshot_path = None
            self.close()
            raise

    # opening ------------------------------------------------------------------------------------
    def _open_vector_store(self, token: str, overwrite: bool, client_kwargs: Dict[str, Any]) -> MilvusVectorStore:
        try:
            if overwrite:
                client = MilvusClient(uri=self.uri, token=token, **client_kwargs)
                for name in (self.entities_collection, self.relations_collection, self.passages_collection):
                    client.drop_collection(name)
                client.close()
            vector_store = PassageVectorStore(
                uri=self.uri,
                token=token,
                collection_name=self.passages_collection,
                dim=self._dim,
                similarity_metric="COSINE",
                index_config=dict(self._index_config),
                use_async_client=False,
                upsert_mode=True,
                consistency_level=self.consistency_level,
                **client_kwargs,
            )
            vector_store._graph_store = self
            return vector_store
        except Exception as exc:
            if _is_local_path(self.uri) and _held_by_another_process(self.uri):
                raise GraphStoreError(
                    f"The Milvus Lite database {self.uri!r} is open in another process. Close the store "
                    "there (store.close()) or use another path: Milvus Lite allows one process per path."
                ) from exc
            raise

    def _snapshot_location(self, snapshot: Optional[str | bool]) -> Optional[Path]:
        if snapshot is None or snapshot is True:
            if self._lite_path is not None:
                return Path(f"{self._lite_path}.graphrag-cache") / f"{self.collection_prefix}.npz"
            if snapshot:
                self.close()
                raise GraphStoreError(
                    'snapshot=True needs a file path on a Milvus server, e.g. snapshot="graph.npz" '
                    "(and only if this process is the only writer)."
                )
            return None
        return Path(snapshot).expanduser() if snapshot else None

    def _reset_caches(self) -> None:
        self._cache = GraphCache()
        self._entity_vectors = VectorCache(self._dim) if self._use_vectors else None
        self._relation_vectors = VectorCache(self._dim) if self._use_vectors else None
        self._passage_vectors = VectorCache(self._dim) if self._use_vectors else None

    def _create_collections(self) -> None:
        client = self.client
        existing = set(client.list_collections())
        if self.entities_collection not in existing:
            schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field("id", DataType.INT64, is_primary=True)
            schema.add_field("name", DataType.VARCHAR, max_length=MAX_NAME_LENGTH * 4)
            schema.add_field("synonym_ids", DataType.ARRAY, element_type=DataType.INT64, max_capacity=_MAX_SYNONYMS)
            schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=self._dim)
            self._create(self.entities_collection, schema)
        if self.relations_collection not in existing:
            schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field("id", DataType.INT64, is_primary=True)
            schema.add_field("subject_id", DataType.INT64)
            schema.add_field("object_id", DataType.INT64)
            schema.add_field("entity_ids", DataType.ARRAY, element_type=DataType.INT64, max_capacity=2)
            schema.add_field("subject", DataType.VARCHAR, max_length=MAX_NAME_LENGTH * 4)
            schema.add_field("predicate", DataType.VARCHAR, max_length=MAX_NAME_LENGTH * 4)
            schema.add_field("object", DataType.VARCHAR, max_length=MAX_NAME_LENGTH * 4)
            schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=self._dim)
            self._create(self.relations_collection, schema)

    def _create(self, name: str, schema: Any) -> None:
        index_params = self.client.prepare_index_params()
        config = dict(self._index_config)
        index_params.add_index(
            field_name="embedding",
            index_type=config.pop("index_type", "AUTOINDEX"),
            metric_type=config.pop("metric_type", "COSINE"),
            params=config or None,
        )
        self.client.create_collection(
            name, schema=schema, index_params=index_params, consistency_level=self.consistency_level
        )

    def _check_dimensions(self) -> None:
        for name in (self.entities_collection, self.relations_collection, self.passages_collection):
            info = self.client.describe_collection(name)
            for fld in info["fields"]:
                if fld["type"] == DataType.FLOAT_VECTOR:
                    dim = int(fld["params"]["dim"])
                    if dim != self._dim:
                        raise GraphStoreError(
                            f"Collection {name!r} at {self.uri!r} holds {dim}-dimensional vectors, but the "
                            f"embed model gives {self._dim}. Use the embed model the collection was built "
                            "with, or another collection_prefix (or overwrite=True to rebuild it)."
                        )

    def _pages(self, collection: str, fields: List[str]) -> Iterable[List[Dict[str, Any]]]:
        """Every row of a collection, a page at a time. On Milvus Lite, where each query costs about a
        scan of the collection whatever its limit, a page is an id range of ~`_LITE_PAGE` rows (one
        unbounded query each: 100 s for 10^6 relations and their entities and passages, against 427 s
        with `query_iterator`); on a server, the iterator."""
        if self._lite_path is not None:
            total = int(self.client.query(collection, filter="", output_fields=["count(*)"])[0]["count(*)"])
            strings = collection == self.passages_collection
            for filter_ in _id_ranges(-(-total // _LITE_PAGE), strings):
                page = self.client.query(collection, filter=filter_, output_fields=fields)
                if page:
                    yield page
            return
        with _quiet_lite():
            iterator = self.client.query_iterator(collection, batch_size=_READ_BATCH, output_fields=fields)
            try:
                while True:
                    page = iterator.next()
                    if not page:
                        return
                    yield page
            finally:
                iterator.close()

    def _upsert(self, collection: str, rows: List[Dict[str, Any]]) -> None:
        self.client.upsert(collection, rows)
        if self._lite_path is not None:
            self._unflushed.add(collection)

    def flush(self) -> None:
        """Seal what was written, so that searches run on indexed segments. On Milvus Lite, searches call
        it when needed (Lite searches unsealed rows slowly); a server seals by itself."""
        for collection in list(self._unflushed):
            self._ready(collection)

    def _ready(self, collection: str) -> MilvusClient:
        if collection in self._unflushed:
            self.client.flush(collection)
            self._unflushed.discard(collection)
        return self.client

    def _load_cache(self) -> None:
        """Build the adjacency, the entity names and the vector cache: from the snapshot file when it is
        current, else from the rows in Milvus."""
        self._snapshot_current = False
        if self._snapshot_path is not None and self._snapshot_path.exists():
            with ThreadPoolExecutor(max_workers=1) as pool:
                counting = pool.submit(self.count)  # Milvus counts while the file is read
                loaded = snapshot_module.load(self._snapshot_path, self._snapshot_meta())
                if loaded is not None:
                    self._fill(loaded[0])
                    counted = counting.result()
                    if loaded[1] == counted:
                        self._snapshot_current = True
                        return
                    logger.info(
                        "Snapshot %s is stale (it holds %s rows, Milvus %s); rebuilding from Milvus.",
                        self._snapshot_path, loaded[1], counted,
                    )
                    self._reset_caches()
        self._fill(self._read_columns())

    def _snapshot_meta(self) -> Dict[str, Any]:
        return {"prefix": self.collection_prefix, "dim": self._dim, "vectors": self._use_vectors}

    def _read_columns(self) -> snapshot_module.Columns:
        """The columns the caches are built from, read page by page from the three collections."""
        vectors = ["embedding"] if self._use_vectors else []
        ids, ends, relation_vectors = [], [], []
        for page in self._pages(self.relations_collection, ["id", "subject_id", "object_id", *vectors]):
            ids.append(np.fromiter((r["id"] for r in page), np.int64, len(page)))
            ends.append(np.array([(r["subject_id"], r["object_id"]) for r in page], dtype=np.int64).reshape(-1, 2))
            relation_vectors += [_float32([r["embedding"] for r in page], self._dim)] if vectors else []
        passage_ids: List[str] = []
        lengths, flat, passage_vectors = [], [], []
        for page in self._pages(self.passages_collection, ["id", "relation_ids", *vectors]):
            passage_ids += [r["id"] for r in page]
            lengths += [len(r.get("relation_ids") or []) for r in page]
            flat += [rel for r in page for rel in r.get("relation_ids") or []]
            passage_vectors += [_float32([r["embedding"] for r in page], self._dim)] if vectors else []
        entity_ids: List[int] = []
        names: List[str] = []
        synonyms: List[Tuple[int, int]] = []
        entity_vectors = []
        for page in self._pages(self.entities_collection, ["id", "name", "synonym_ids", *vectors]):
            entity_ids += [r["id"] for r in page]
            names += [r["name"] for r in page]
            synonyms += [(r["id"], other) for r in page for other in r.get("synonym_ids") or []]
            entity_vectors += [_float32([r["embedding"] for r in page], self._dim)] if vectors else []
        stack = lambda parts, shape: np.concatenate(parts) if parts else np.zeros(shape, dtype=np.float32)  # noqa: E731
        entity_ids = np.array(entity_ids, dtype=np.int64)
        return snapshot_module.Columns(
            relation_ids=np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64),
            relation_ends=np.concatenate(ends) if ends else np.zeros((0, 2), dtype=np.int64),
            passage_ids=passage_ids,
            passage_offsets=np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64),
            passage_relations=np.array(flat, dtype=np.int64),
            entity_ids=entity_ids,
            entity_names=names,
            synonyms=_indices(entity_ids, np.array(synonyms, dtype=np.int64).reshape(-1, 2)),
            relation_vectors=stack(relation_vectors, (0, self._dim)) if vectors else None,
            passage_vectors=stack(passage_vectors, (0, self._dim)) if vectors else None,
            entity_vectors=stack(entity_vectors, (0, self._dim)) if vectors else None,
        )

    def _fill(self, columns: snapshot_module.Columns) -> None:
        cache = self._cache
        cache.add_relations(np.column_stack([columns.relation_ids, columns.relation_ends]))
        cache.add_passage_columns(columns.passage_ids, columns.passage_offsets, columns.passage_relations)
        cache.name_entities(columns.entity_ids, columns.entity_names)
        entities = cache.entities.lookup(columns.entity_ids)
        cache.add_synonym_positions(entities[columns.synonyms[:, 0]], entities[columns.synonyms[:, 1]])
        if self._use_vectors and columns.has_vectors:
            assert self._relation_vectors and self._passage_vectors and self._entity_vectors
            # a fresh cache filled from distinct ids gives them positions 0, 1, ... in order
            fresh = len(cache.relations) == len(columns.relation_ids) and len(cache.passages) == len(columns.passage_ids)
            if fresh:
                relations, passages = np.arange(len(columns.relation_ids)), np.arange(len(columns.passage_ids))
            else:
                relations = cache.relations.lookup(columns.relation_ids)
                passages = cache.passages.lookup(columns.passage_ids)
            self._relation_vectors.put(relations, columns.relation_vectors)
            self._passage_vectors.put(passages, columns.passage_vectors)
            used = entities >= 0  # an entity with no relation (left by an interrupted write) is not searched
            self._entity_vectors.put(entities[used], columns.entity_vectors[used])
        cache.compact()

    def _columns(self) -> snapshot_module.Columns:
        """What the caches hold, as `Columns` (the inverse of `_fill`)."""
        exported = self._cache.export()
        columns = snapshot_module.Columns(
            relation_ids=exported["relation_ids"],
            relation_ends=exported["relation_ends"],
            passage_ids=exported["passage_ids"],
            passage_offsets=exported["passage_offsets"],
            passage_relations=exported["passage_relations"],
            entity_ids=exported["entity_ids"],
            entity_names=exported["entity_names"],
            synonyms=exported["synonyms"],
        )
        if self._use_vectors:
            assert self._relation_vectors and self._passage_vectors and self._entity_vectors
            columns.relation_vectors = self._relation_vectors.rows(exported["relation_positions"])
            columns.passage_vectors = self._passage_vectors.rows(exported["passage_positions"])
            columns.entity_vectors = self._entity_vectors.rows(exported["entity_positions"])
        return columns

    def _save_snapshot(self) -> None:
        """Save the caches for the next open, if they hold what Milvus holds."""
        if self._snapshot_path is None or self._snapshot_current:
            return
        columns = self._columns()
        held = {"relations": len(columns.relation_ids), "passages": len(columns.passage_ids)}
        counted = self.count()
        # Milvus may also hold entities with no relation, left by an interrupted write: not cached
        if held != {k: counted[k] for k in held} or len(columns.entity_ids) > counted["entities"]:
            logger.info("Not saving a snapshot: the caches hold %s rows, Milvus %s.", held, counted)
            return
        snapshot_module.save(self._snapshot_path, columns, self._snapshot_meta(), counted)
        self._snapshot_current = True

    def _changing(self) -> None:
        """Called before any write: the snapshot file no longer describes the store."""
        if self._snapshot_path is not None:
            snapshot_module.discard(self._snapshot_path)
        self._snapshot_current = False

    # writing ------------------------------------------------------------------------------------
    def add(self, nodes: Sequence[BaseNode], triplets: Optional[Sequence[Sequence[Triplet]]] = None) -> List[str]:
        """Store passage nodes with their triplets (by default, those in their metadata); return the
        passage ids.

        Idempotent: a passage already stored with the same relations is skipped, and known entities and
        relations are not embedded again. Writes go entities, then relations, then passages, so that an
        interrupted call never leaves a passage pointing at a relation that is not stored.
        """
        if triplets is None:
            triplets = [given_triplets(node) or [] for node in nodes]
        if len(nodes) != len(triplets):
            raise ValueError(f"got {len(nodes)} nodes but {len(triplets)} triplet lists")
        for node in nodes:  # check everything before writing anything
            size = len(node.get_content(MetadataMode.NONE).encode("utf-8"))
            if size > MAX_PASSAGE_BYTES:
                raise GraphStoreError(
                    f"Node {node.node_id} holds {size:,} bytes of text; a passage holds at most "
                    f"{MAX_PASSAGE_BYTES:,}. Split it first, e.g. with SentenceSplitter(chunk_size=1024) "
                    "before GraphRAGTransform. Nothing was written."
                )
        empty = [n.node_id for n in nodes if not n.get_content(MetadataMode.NONE).strip()]
        if empty:
            logger.warning("Skipped %d node(s) with no text: %s", len(empty), ", ".join(empty[:10]))
            kept = [(n, t) for n, t in zip(nodes, triplets) if n.get_content(MetadataMode.NONE).strip()]
            nodes, triplets = [n for n, _ in kept], [t for _, t in kept]
        with self._write_lock:
            return self._add(nodes, triplets)

    def _add(self, nodes: Sequence[BaseNode], triplets: Sequence[Sequence[Triplet]]) -> List[str]:
        pids = [passage_id(n.ref_doc_id or n.node_id, n.get_content(MetadataMode.NONE)) for n in nodes]
        cache = self._cache if self.adjacency == "memory" else self.neighbourhood(
            passage_ids=pids,
            relation_ids=[t.id for ts in triplets for t in ts],
            entity_ids=[e for ts in triplets for t in ts for e in (t.subject_id, t.object_id)],
        )
        todo: Dict[str, Tuple[BaseNode, List[Triplet]]] = {}
        for pid, node, node_triplets in zip(pids, nodes, triplets):
            if cache.passage_relations(pid) == {t.id for t in node_triplets}:
                continue  # stored already, with the same relations
            todo[pid] = (node, list(node_triplets))
        if not todo:
            return pids
        self._changing()
        replaced = [pid for pid in todo if cache.has_passage(pid)]
        orphans = cache.remove_passages(replaced) if replaced else ([], [])

        entities: Dict[int, str] = {}
        relations: Dict[int, Triplet] = {}
        for _, node_triplets in todo.values():
            for t in node_triplets:
                relations.setdefault(t.id, t)
                entities.setdefault(t.subject_id, t.subject)
                entities.setdefault(t.object_id, t.object)
        new_entities = {e: n for e, n in entities.items() if not cache.has_entity(e)}
        new_relations = {r: t for r, t in relations.items() if not cache.has_relation(r)}

        entity_rows = [{"id": e, "name": name} for e, name in new_entities.items()]
        vectors = np.asarray(self._embed(list(new_entities.values())), dtype=np.float32).reshape(len(entity_rows), self._dim)
        synonyms = self._find_synonyms(cache, list(new_entities), vectors)
        for row, vector in zip(entity_rows, vectors):
            row["embedding"] = vector.tolist()
            row["synonym_ids"] = synonyms.get(row["id"], [])
        for batch in chunked(entity_rows, self.batch_size):
            self._upsert(self.entities_collection, batch)
        rows = []
        for rid, t in new_relations.items():
            subj, obj = t.subject_id, t.object_id
            rows.append(
                {
                    "id": rid,
                    "subject_id": subj,
                    "object_id": obj,
                    "entity_ids": [subj, obj],
                    "subject": t.subject,
                    "predicate": t.predicate,
                    "object": t.object,
                }
            )
        self._upsert_embedded(self.relations_collection, rows, [t.text for t in new_relations.values()])
        cache.add_relations((r["id"], r["subject_id"], r["object_id"]) for r in rows)
        if self._relation_vectors is not None:
            self._relation_vectors.put(
                [cache.relations.position[r["id"]] for r in rows], [r.pop("embedding") for r in rows]
            )
        cache.add_synonyms((a, b) for a, linked in synonyms.items() for b in linked)
        cache.name_entities(list(new_entities), list(new_entities.values()))
        if self._entity_vectors is not None:
            positions = cache.entities.lookup(np.fromiter(new_entities, np.int64, len(new_entities)))
            self._entity_vectors.put(positions[positions >= 0], vectors[positions >= 0])

        items = list(todo.items())
        missing = [i for i, (_, (node, _)) in enumerate(items) if node.embedding is None]
        texts = [items[i][1][0].get_content(metadata_mode=MetadataMode.EMBED) for i in missing]
        vectors = dict(zip(missing, self._embed(texts)))
        rows = []
        for i, (pid, (node, node_triplets)) in enumerate(items):
            row = node_to_metadata_dict(node, remove_text=True, flat_metadata=False)
            document = node.ref_doc_id or node.node_id  # a Document ingested as is is its own document
            row.update(
                id=pid,
                doc_id=document,
                ref_doc_id=document,
                document_id=document,
                text=node.get_content(MetadataMode.NONE),
                embedding=vectors.get(i, node.embedding),
                relation_ids=[t.id for t in node_triplets],
            )
            rows.append(row)
        for batch in chunked(rows, self.batch_size):
            self._upsert(self.passages_collection, batch)
            cache.add_passages((r["id"], r["relation_ids"]) for r in batch)
            if self._passage_vectors is not None:
                self._passage_vectors.put([cache.passages.position[r["id"]] for r in batch], [r["embedding"] for r in batch])

        self._delete_orphans(cache, *orphans)
        return pids

    def neighbourhood(
        self,
        passage_ids: Sequence[str] = (),
        relation_ids: Sequence[int] = (),
        entity_ids: Sequence[int] = (),
        with_entity_relations: bool = True,
    ) -> GraphCache:
        """A `GraphCache` of the part of the stored graph that a write, a delete or a query touches,
        loaded with batched queries: the given passages and the relations they state; every passage
        stating one of those relations; the relations' entities and every relation of those entities
        (and of `entity_ids`; unless `with_entity_relations` is False), with their synonym links. Writes
        and deletes run on it unchanged, so they behave as with the whole adjacency in memory; its size
        follows what is touched."""
        local = GraphCache()
        literals = lambda batch: ",".join(milvus_literal(p) for p in batch)  # noqa: E731
        rows: Dict[str, List[int]] = {}
        for batch in chunked(list(dict.fromkeys(passage_ids)), _ID_BATCH):
            for row in self.client.query(self.passages_collection, filter=f"id in [{literals(batch)}]", output_fields=["id", "relation_ids"]):
                rows[row["id"]] = row.get("relation_ids") or []
        relations = set(relation_ids) | {r for rels in rows.values() for r in rels}
        for batch in chunked(sorted(relations), _ID_BATCH):
            for row in self.client.query(
                self.passages_collection, filter=f"json_contains_any(relation_ids, {_int_list(batch)})",
                output_fields=["id", "relation_ids"], limit=16384,
            ):
                rows[row["id"]] = row.get("relation_ids") or []
        ends = set(entity_ids)
        for batch in chunked(sorted(relations), _ID_BATCH):
            found = self.client.query(
                self.relations_collection, filter=f"id in {_int_list(batch)}", output_fields=["id", "subject_id", "object_id"]
            )
            local.add_relations((row["id"], row["subject_id"], row["object_id"]) for row in found)
            ends.update(e for row in found for e in (row["subject_id"], row["object_id"]))
        if with_entity_relations:
            expander = MilvusExpander(self.client, self.relations_collection)
            local.add_relations((r, s_, o) for r, (s_, o) in expander.relations_of_entities(ends).items())
        local.add_passages(rows.items())
        synonyms = []
        for batch in chunked(sorted(ends), _ID_BATCH):
            for row in self.client.query(self.entities_collection, filter=f"id in {_int_list(batch)}", output_fields=["id", "synonym_ids"]):
                synonyms.extend((row["id"], other) for other in row.get("synonym_ids") or [])
        local.add_synonyms(synonyms)
        return local

    def relations_of_passages(self, passage_ids: Sequence[str]) -> List[int]:
        """The ids of the relations the given passages state, read from their rows."""
        found: List[int] = []
        for batch in chunked(list(passage_ids), _ID_BATCH):
            literals = ",".join(milvus_literal(p) for p in batch)
            for row in self.client.query(self.passages_collection, filter=f"id in [{literals}]", output_fields=["relation_ids"]):
                found.extend(row.get("relation_ids") or [])
        return list(dict.fromkeys(found))

    def _find_synonyms(self, cache: GraphCache, entity_ids: List[int], vectors: np.ndarray) -> Dict[int, List[int]]:
        """Links from new entities to the entities, stored or new, whose embedding is within
        `synonym_threshold` (cosine): "Leonhard Euler" ~ "leonhard euler" ~ "L. Euler"."""
        if self.synonym_threshold is None or len(entity_ids) == 0:
            return {}
        k, threshold = _MAX_SYNONYMS, self.synonym_threshold
        found: Dict[int, Dict[int, float]] = {e: {} for e in entity_ids}
        if self._entity_vectors is not None:  # the stored entities are in memory: search them there
            ids, mask = self._cache.entities.ids, self._cache.entities.mask()
            hits = self._entity_vectors.within(vectors, threshold, k + 1, mask)
            for eid, (positions, scores) in zip(entity_ids, hits):
                for p, score in zip(positions.tolist(), scores.tolist()):
                    if ids[p] != eid:
                        found[eid][ids[p]] = score
        elif self.adjacency == "milvus" or cache.counts()["entities"]:
            client = self._ready(self.entities_collection)
            for start in range(0, len(entity_ids), self.batch_size):
                batch = vectors[start : start + self.batch_size]
                hits = client.search(
                    self.entities_collection, data=batch.tolist(), limit=k, output_fields=[], anns_field="embedding"
                )
                for eid, row in zip(entity_ids[start : start + self.batch_size], hits):
                    for hit in row:
                        if hit["distance"] >= threshold and hit["id"] != eid:
                            found[eid][hit["id"]] = float(hit["distance"])
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = vectors / np.where(norms == 0, 1, norms)
        for start in range(0, len(entity_ids), 1024):  # among the new entities, block by block
            sims = unit[start : start + 1024] @ unit.T
            rows, cols = np.nonzero(sims >= threshold)
            for i, j in zip(rows.tolist(), cols.tolist()):
                if start + i != j:
                    found[entity_ids[start + i]][entity_ids[j]] = float(sims[i, j])
        return {
            e: [other for other, _ in sorted(links.items(), key=lambda kv: -kv[1])[:k]]
            for e, links in found.items()
            if links
        }

    def _embed(self, texts: List[str]) -> List[List[float]]:
        vectors: List[List[float]] = []
        for batch in chunked(texts, self.batch_size):
            vectors.extend(self.embed_model.get_text_embedding_batch(list(batch)))
        return vectors

    def _upsert_embedded(self, collection: str, rows: List[Dict[str, Any]], texts: List[str]) -> None:
        for row_batch, text_batch in zip(chunked(rows, self.batch_size), chunked(texts, self.batch_size)):
            vectors = self.embed_model.get_text_embedding_batch(list(text_batch))
            for row, vector in zip(row_batch, vectors):
                row["embedding"] = vector
            self._upsert(collection, row_batch)

    def _delete_orphans(self, cache: GraphCache, relation_ids: List[int], entity_ids: List[int]) -> None:
        relation_ids = [r for r in relation_ids if not cache.has_relation(r)]
        entity_ids = [e for e in entity_ids if not cache.has_entity(e)]
        for batch in chunked(relation_ids, _ID_BATCH):
            self.client.delete(self.relations_collection, filter=f"id in {_int_list(batch)}")
        for batch in chunked(entity_ids, _ID_BATCH):
            self.client.delete(self.entities_collection, filter=f"id in {_int_list(batch)}")

    def delete(self, ref_doc_id: str) -> None:
        """Delete a document: its passages, the relations no other passage states, and the entities left
        with no relation. The adjacency follows."""
        with self._write_lock:
            rows = self.client.query(
                self.passages_collection, filter=f"doc_id == {milvus_literal(ref_doc_id)}", output_fields=["id"]
            )
            pids = [r["id"] for r in rows]
            if not pids:
                return
            self._changing()
            cache = self._cache if self.adjacency == "memory" else self.neighbourhood(passage_ids=pids)
            orphans = cache.remove_passages(pids)
            for batch in chunked(pids, _ID_BATCH):
                literals = ",".join(milvus_literal(p) for p in batch)
                self.client.delete(self.passages_collection, filter=f"id in [{literals}]")
            self._delete_orphans(cache, *orphans)

    def clear(self) -> None:
        """Drop every entity, relation and passage of this store (its three collections), and start empty."""
        with self._write_lock:
            self._changing()
            for name in (self.entities_collection, self.relations_collection, self.passages_collection):
                self.client.drop_collection(name)
            self.vector_store._collection_initialized = False
            self._unflushed.clear()
        reopened = self._open_vector_store(self._token, False, self._client_kwargs)
        self.client.close()
        self.vector_store, self.client = reopened, reopened.client
        self._create_collections()
        for name in (self.entities_collection, self.relations_collection, self.passages_collection):
            self.client.load_collection(name)
        self._reset_caches()

    async def aadd(self, nodes: Sequence[BaseNode], triplets: Optional[Sequence[Sequence[Triplet]]] = None) -> List[str]:
        """Async `add`: the work runs off the event loop."""
        return await asyncio.to_thread(self.add, nodes, triplets)

    async def adelete(self, ref_doc_id: str) -> None:
        """Async `delete`: the work runs off the event loop."""
        await asyncio.to_thread(self.delete, ref_doc_id)

    # reading ------------------------------------------------------------------------------------
    @property
    def graph(self) -> Graph:
        """An immutable snapshot of the adjacency."""
        return self._cache.snapshot()

    @property
    def cache(self) -> GraphCache:
        """The in-memory adjacency (positions ↔ ids)."""
        return self._cache

    def count(self) -> Dict[str, int]:
        """Rows stored in each collection, as Milvus counts them."""
        counts = {}
        for kind, name in (
            ("entities", self.entities_collection),
            ("relations", self.relations_collection),
            ("passages", self.passages_collection),
        ):
            counts[kind] = int(self.client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"])
        return counts

    def match_entities(self, text: str, max_words: int = 6) -> List[str]:
        """Known entity names occurring in `text` (longest matches first, non-overlapping)."""
        words = [normalize_name(w) for w in _WORD.findall(text)]
        found: List[str] = []
        i = 0
        while i < len(words):
            for n in range(min(max_words, len(words) - i), 0, -1):
                candidate = " ".join(words[i : i + n])
                if self._cache.has_entity(entity_id(candidate)) and not (n == 1 and candidate in _STOPWORDS):
                    found.append(candidate)
                    i += n
                    break
            else:
                i += 1
        # scripts written without spaces (Chinese, Japanese, Korean): longest known names within each run
        for run in _CJK_RUN.findall(normalize_name(text)):
            i = 0
            while i < len(run):
                for n in range(min(_MAX_CJK_NAME, len(run) - i), 1, -1):
                    if self._cache.has_entity(entity_id(run[i : i + n])):
                        found.append(run[i : i + n])
                        i += n
                        break
                else:
                    i += 1
        return list(dict.fromkeys(found))

    def search_entities(self, vectors: List[List[float]], top_k: int) -> List[List[Tuple[int, str, float]]]:
        """For each vector, the `top_k` nearest entities as (entity id, name, cosine)."""
        if not vectors:
            return []
        if self._entity_vectors is not None:
            ids, mask = self._cache.entities.ids, self._cache.entities.mask()
            return [
                [(ids[p], self._cache.entity_name(p), float(s)) for p, s in zip(positions.tolist(), scores.tolist())]
                for positions, scores in self._entity_vectors.top_k_many(vectors, top_k, mask)
            ]
        results = self._ready(self.entities_collection).search(
            self.entities_collection, data=vectors, limit=top_k, output_fields=["name"], anns_field="embedding"
        )
        return [[(h["id"], h["entity"]["name"], float(h["distance"])) for h in hits] for hits in results]

    def search_relations(
        self, vector: List[float], top_k: int, among: Optional[Sequence[int]] = None, with_text: bool = True
    ) -> List[ScoredRelation]:
        """The `top_k` relations nearest to `vector`, optionally only `among` the given relation ids.
        With `with_text=False` their subject, predicate and object are left empty (see `describe`)."""
        if among is not None and len(among) == 0:
            return []
        if among is not None and len(among) > _ID_BATCH:  # one filter per 1,000 ids, best kept
            found: List[ScoredRelation] = []
            for batch in chunked(list(among), _ID_BATCH):
                found += self.search_relations(vector, top_k, among=batch, with_text=False)
            found = sorted(found, key=lambda r: -r.score)[:top_k]
            return self.describe(found) if with_text else found
        if self._relation_vectors is not None:
            relations = self._cached_relations(vector, top_k, among)
            return self.describe(relations) if with_text else relations
        filter_ = "" if among is None else f"id in {_int_list(among)}"
        limit = top_k if among is None else min(top_k, len(among))
        hits = self._ready(self.relations_collection).search(
            self.relations_collection,
            data=[vector],
            filter=filter_,
            limit=limit,
            output_fields=["subject", "predicate", "object"] if with_text else [],
            anns_field="embedding",
        )[0]
        return [
            ScoredRelation(
                id=h["id"],
                subject=h["entity"].get("subject", ""),
                predicate=h["entity"].get("predicate", ""),
                object=h["entity"].get("object", ""),
                score=float(h["distance"]),
                passage_ids=self._cache.passages_of_relation(h["id"]),
            )
            for h in hits
        ]

    def _cached_relations(self, vector: List[float], top_k: int, among: Optional[Sequence[int]]) -> List[ScoredRelation]:
        assert self._relation_vectors is not None
        cache = self._cache
        if among is None:
            positions, scores = self._relation_vectors.top_k(vector, top_k, cache.relations.mask())
        else:
            found = cache.relations.lookup(np.array(list(among), dtype=np.int64))
            positions, scores = self.rank_positions(vector, found[found >= 0], top_k)
        return self._scored(positions, scores)

    def rank_positions(self, vector: List[float], positions: np.ndarray, top_k: int) -> Tuple[np.ndarray, np.ndarray]:
        """The `top_k` of the adjacency `positions` most similar to `vector`, best first, with their
        cosines. Its cost follows the number of positions, not the size of the graph."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return positions, np.zeros(0)
        if self._relation_vectors is None:  # ask Milvus, 1,000 ids per filter
            ids = self._cache.relations.ids
            found: List[ScoredRelation] = []
            for batch in chunked(positions.tolist(), _ID_BATCH):
                found += self.search_relations(vector, top_k, among=[ids[p] for p in batch], with_text=False)
            found = sorted(found, key=lambda r: -r.score)[:top_k]
            index = self._cache.relations.position
            return np.array([index[r.id] for r in found], dtype=np.int64), np.array([r.score for r in found])
        scores = self._relation_vectors.similarity(vector, positions)
        if len(positions) > top_k:
            keep = np.argpartition(-scores, top_k - 1)[:top_k]
            positions, scores = positions[keep], scores[keep]
        order = np.argsort(-scores, kind="stable")
        return positions[order], scores[order]

    def rank_relations(
        self, vector: List[float], positions: np.ndarray, top_k: int, with_text: bool = True
    ) -> List[ScoredRelation]:
        """`rank_positions`, as `ScoredRelation`s."""
        relations = self._scored(*self.rank_positions(vector, positions, top_k))
        return self.describe(relations) if with_text else relations

    def _scored(self, positions: np.ndarray, scores: np.ndarray) -> List[ScoredRelation]:
        cache, graph = self._cache, self._cache.snapshot()
        ids = cache.relations.ids
        return [
            ScoredRelation(
                id=ids[p], subject="", predicate="", object="", score=float(s),
                passage_ids=cache.passage_ids(graph.passages_of_relation(p)),
            )
            for p, s in zip(positions.tolist(), scores.tolist())
        ]

    def describe(self, relations: Sequence[ScoredRelation]) -> List[ScoredRelation]:
        """Fill in the subject, predicate and object of relations that lack them (one query)."""
        missing = [r for r in relations if not r.predicate]
        for batch in chunked(missing, _ID_BATCH):
            rows = self.client.query(
                self.relations_collection,
                filter=f"id in {_int_list(r.id for r in batch)}",
                output_fields=["subject", "predicate", "object"],
            )
            found = {row["id"]: row for row in rows}
            for relation in batch:
                row = found.get(relation.id)
                if row is not None:
                    relation.subject, relation.predicate, relation.object = row["subject"], row["predicate"], row["object"]
        return list(relations)

    def search_passages(self, vector: List[float], top_k: int) -> List[NodeWithScore]:
        """Plain dense retrieval of passages (the vector RAG baseline, on the same rows)."""
        hits = self._ready(self.passages_collection).search(
            self.passages_collection, data=[vector], limit=top_k, output_fields=_PASSAGE_FIELDS,
            anns_field="embedding",
        )[0]
        return [NodeWithScore(node=self._to_node(h["entity"]), score=float(h["distance"])) for h in hits]

    def search_passage_ids(self, vector: List[float], top_k: int) -> List[Tuple[str, float]]:
        """The `top_k` passages nearest to `vector`, as (passage id, cosine)."""
        if self._passage_vectors is not None:
            positions, scores = self._passage_vectors.top_k(vector, top_k, self._cache.passages.mask())
            return list(zip(self._cache.passage_ids(positions), scores.tolist()))
        hits = self._ready(self.passages_collection).search(
            self.passages_collection, data=[vector], limit=top_k, output_fields=[], anns_field="embedding"
        )[0]
        return [(h["id"], float(h["distance"])) for h in hits]

    def passage_similarities(self, vector: List[float], passage_ids: Sequence[str]) -> Dict[str, float]:
        """The cosine of `vector` with each of the given passages."""
        if self._passage_vectors is not None:
            found = self._cache.passages.lookup(list(passage_ids)) if len(passage_ids) else np.zeros(0, np.int64)
            known = [p for p, position in zip(passage_ids, found.tolist()) if position >= 0]
            scores = self._passage_vectors.similarity(vector, found[found >= 0])
            return dict(zip(known, scores.tolist()))
        found: Dict[str, float] = {}
        client = self._ready(self.passages_collection)
        for batch in chunked(list(passage_ids), _ID_BATCH):
            literals = ",".join(milvus_literal(p) for p in batch)
            hits = client.search(
                self.passages_collection, data=[vector], filter=f"id in [{literals}]", limit=len(batch),
                output_fields=[], anns_field="embedding",
            )[0]
            found.update((h["id"], float(h["distance"])) for h in hits)
        return found

    def get_passages(self, passage_ids: Sequence[str]) -> Dict[str, BaseNode]:
        """Passage nodes by passage id, as they were ingested (node id, text and metadata)."""
        found: Dict[str, BaseNode] = {}
        for batch in chunked(list(passage_ids), _ID_BATCH):
            literals = ",".join(milvus_literal(p) for p in batch)
            for row in self.client.query(
                self.passages_collection, filter=f"id in [{literals}]", output_fields=_PASSAGE_FIELDS
            ):
                found[row["id"]] = self._to_node(row)
        return found

    @staticmethod
    def _to_node(row: Dict[str, Any]) -> BaseNode:
        return metadata_dict_to_node(row, text=row["text"])

    def close(self) -> None:
        """Release the database, so that another store or process can open it. Idempotent."""
        if self.client is None:
            return
        try:
            with self._write_lock:
                self._save_snapshot()
        except Exception as exc:  # a cache that cannot be saved is rebuilt next time
            logger.warning("Could not save the snapshot %s: %s", self._snapshot_path, exc)
        self.client.close()
        self.client = None  # type: ignore[assignment]
        if self._lite_path is not None:
            _lite_release(self._lite_path)

    def __enter__(self) -> "MilvusGraphStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MilvusGraphStore(uri={self.uri!r}, collection_prefix={self.collection_prefix!r})"


_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his how in is it its of on or "
    "she that the their them they this to was were what when where which who whom whose why will with".split()
)
