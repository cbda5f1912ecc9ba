"""The three Milvus collections of a store: create, upsert, get and delete by ids, search, count.

Every filter is built from escaped literals (`filters.py`). Milvus Lite's specifics (`lite.py`) are used here: one embedded server per database path and process
(shared by that process' stores and released with the last), a clear error when another process holds
the path, flushing written collections before a search, and quieting the harmless tracebacks Lite logs.

The passages collection is a standard LlamaIndex Milvus collection, opened through `PassageVectorStore`
(`vector_store.py`), so that plain vector RAG runs on the very same rows.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import ParamError

import llama_index_graphrag_milvus.milvus.lite as lite
from llama_index_graphrag_milvus.errors import GraphStoreError
from llama_index_graphrag_milvus.milvus.filters import id_filter, milvus_literal
from llama_index_graphrag_milvus.schema import MAX_NAME_LENGTH, MAX_SYNONYMS, chunked
from llama_index_graphrag_milvus.milvus.vector_store import PassageVectorStore

logger = logging.getLogger(__name__)

ENTITIES, RELATIONS, PASSAGES = "entities", "relations", "passages"
KINDS = (ENTITIES, RELATIONS, PASSAGES)
#: The adjacency index (`adjacency.py`): rows addressed by primary key, derived from the three above.
ADJACENCY = "adjacency"
#: Ids an adjacency row's list holds; longer lists continue in further rows (buckets).
BUCKET = 4096
#: Ids per `in [...]` filter: one query per batch.
ID_BATCH = 1000
#: Ids per query when vectors are read by primary key to score them (`search.similarities`): Milvus'
#: cost per query is mostly per id, and on Lite each query also costs about a scan, so few large ones.
VECTOR_BATCH = 8192
#: Rows per page when a server's collection is read whole (`query_iterator`).
_SERVER_PAGE = 16384
#: Rows per page when a Milvus Lite collection is read whole (each Lite query costs about a scan).
LITE_PAGE = 100_000
#: Rows a query returns at most (Milvus caps a query's window at 16,384).
QUERY_LIMIT = 16384


def collection_names(prefix: str) -> Dict[str, str]:
    """The names of a store's entities, relations, passages and adjacency collections: `{prefix}_{kind}`."""
    return {kind: f"{prefix}_{kind}" for kind in (*KINDS, ADJACENCY)}


def is_local_path(uri: str) -> bool:
    """Whether `uri` names a Milvus Lite database (a path) rather than a server."""
    return "://" not in uri


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


def _create_collections(
    client: MilvusClient, names: Dict[str, str], state_name: str, dim: int, index_config: Dict[str, Any], consistency: str
) -> List[str]:
    """Create the entities, relations, adjacency and state collections that do not exist yet (the
    passages one is MilvusVectorStore's); return the kinds created."""
    existing = set(client.list_collections())
    created = [kind for kind in (ENTITIES, RELATIONS, ADJACENCY) if names[kind] not in existing]
    name = names[ENTITIES]
    if name not in existing:
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("name", DataType.VARCHAR, max_length=MAX_NAME_LENGTH * 4)
        schema.add_field("synonym_ids", DataType.ARRAY, element_type=DataType.INT64, max_capacity=MAX_SYNONYMS)
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=dim)
        _create_collection(client, name, schema, index_config, consistency)
    name = names[RELATIONS]
    if name not in existing:
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("subject_id", DataType.INT64)
        schema.add_field("object_id", DataType.INT64)
        schema.add_field("entity_ids", DataType.ARRAY, element_type=DataType.INT64, max_capacity=2)
        for text_field in ("subject", "predicate", "object"):
            schema.add_field(text_field, DataType.VARCHAR, max_length=MAX_NAME_LENGTH * 4)
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=dim)
        _create_collection(client, name, schema, index_config, consistency)
    name = names[ADJACENCY]
    if name not in existing:  # see adjacency.py
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=48)
        schema.add_field("buckets", DataType.INT64)
        schema.add_field("passage_count", DataType.INT64)
        schema.add_field("subject_id", DataType.INT64)
        schema.add_field("object_id", DataType.INT64)
        for list_field, element in (("relation_ids", DataType.INT64), ("synonym_ids", DataType.INT64)):
            schema.add_field(list_field, DataType.ARRAY, element_type=element, max_capacity=BUCKET)
        schema.add_field("passage_ids", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=BUCKET, max_length=64)
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=2)  # Milvus needs one vector field
        _create_collection(client, name, schema, {"index_type": "FLAT", "metric_type": "L2"}, consistency)
    if state_name not in existing:
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("generation", DataType.VARCHAR, max_length=64)
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=2)  # Milvus needs one vector field
        _create_collection(client, state_name, schema, {"index_type": "FLAT", "metric_type": "L2"}, "Strong")
    return created


def upsert_columns(client: MilvusClient, name: str, rows: List[Dict[str, Any]], schemas: Dict[str, Any]) -> bool:
    """Upsert rows holding every field of a fixed schema column by column (packed ~5x faster than rows)
    through the client's connection handler, a private pymilvus call (`MilvusClient` takes rows only).
    False, writing nothing, if the rows or this pymilvus do not allow it: the caller then writes rows."""
    try:  # AttributeError, TypeError, ParamError: refused before anything is sent, by another pymilvus
        handler = client._get_connection()
        schema = schemas.get(name) or schemas.setdefault(name, handler.describe_collection(name))
        fields = {f["name"]: f["type"] for f in schema["fields"]}
        if not all(row.keys() == fields.keys() for row in rows):
            return False
        handler.upsert(name, [{"name": n, "type": t, "values": [r[n] for r in rows]} for n, t in fields.items()], schema=schema)
    except (AttributeError, TypeError, ParamError):
        return False
    return True


def _create_collection(client: MilvusClient, name: str, schema: Any, index_config: Dict[str, Any], consistency: str) -> None:
    index_params = client.prepare_index_params()
    config = dict(index_config)
    index_params.add_index(
        field_name="embedding",
        index_type=config.pop("index_type", "AUTOINDEX"),
        metric_type=config.pop("metric_type", "COSINE"),
        params=config or None,
    )
    client.create_collection(name, schema=schema, index_params=index_params, consistency_level=consistency)


class Collections:
    """The entities, relations and passages collections of one store (`{prefix}_{kind}`).

    Args:
        uri: Where Milvus is: a Lite path, or a server URI.
        token: How to log in to a server.
        prefix: The collections' name prefix.
        dim: The embedding dimension of all three.
        index_config: The vector index (Milvus `add_index` arguments).
        consistency_level: Of new collections.
        overwrite: Drop the store's five collections first.
        owner: The graph store that `vector_store`'s writes and deletes go through.
        client_kwargs: Passed to the Milvus client.
    """

    def __init__(
        self,
        uri: str,
        token: str,
        prefix: str,
        dim: int,
        *,
        index_config: Dict[str, Any],
        consistency_level: str,
        overwrite: bool,
        client_kwargs: Dict[str, Any],
        owner: Any,
    ) -> None:
        self.lite_path: Optional[str] = None
        if is_local_path(uri):
            path = lite.lite_path(uri)
            uri = str(path)
        self.uri, self.dim = uri, dim
        self.prefix, self.names = prefix, collection_names(prefix)
        self.state_name = f"{prefix}_state"  # one row: the generation token (see `advance`)
        self._key = (uri, prefix) if is_local_path(uri) else None  # one store per Lite collections
        self._token, self._client_kwargs, self._owner = token, client_kwargs, owner
        self._index_config = index_config
        self._consistency_level = consistency_level
        self._unflushed: set = set()  # kinds written since their last flush (Milvus Lite)
        self._schemas: Dict[str, Any] = {}  # by collection name, described once (`upsert_columns`)
        self.calls: Counter = Counter()  # queries and searches made, by kind (what the benchmarks count)
        self.ids_read: Counter = Counter()  # rows asked for by primary key, by collection kind
        self.seconds: Counter = Counter()  # time spent in those calls, by kind (the benchmarks' breakdown)
        lite.claim(self._key)
        try:
            if is_local_path(uri):
                lite.check_lite(Path(uri), [*self.names.values(), self.state_name])
            with lite.quiet_lite():
                self.vector_store = self._open_vector_store(overwrite)
        except BaseException:
            lite.release(self._key)
            raise
        self.client: MilvusClient = self.vector_store.client
        if is_local_path(uri):
            self.lite_path = uri
            lite.lite_acquire(uri)
        try:
            with lite.quiet_lite():
                self._create()
            self._check_dimensions()
            for name in (*self.names.values(), self.state_name):
                self.client.load_collection(name)
        except BaseException:
            self.close()
            raise

    @property
    def is_lite(self) -> bool:
        return self.lite_path is not None

    # opening ----------------------------------------------------------------------------------
    def _open_vector_store(self, overwrite: bool) -> PassageVectorStore:
        try:
            if overwrite:
                client = MilvusClient(uri=self.uri, token=self._token, **self._client_kwargs)
                for name in (*self.names.values(), self.state_name):
                    client.drop_collection(name)
                client.close()
            vector_store = PassageVectorStore(
                uri=self.uri,
                token=self._token,
                collection_name=self.names[PASSAGES],
                dim=self.dim,
                similarity_metric="COSINE",
                index_config=dict(self._index_config),
                use_async_client=False,
                upsert_mode=True,
                consistency_level=self._consistency_level,
                **self._client_kwargs,
            )
            vector_store._graph_store = self._owner
            return vector_store
        except Exception as exc:
            if is_local_path(self.uri) and lite.held_by_another_process(self.uri):
                raise lite.held_error(self.uri) from exc
            raise

    def _create(self) -> None:
        self.created = _create_collections(
            self.client, self.names, self.state_name, self.dim, self._index_config, self._consistency_level
        )

    def _check_dimensions(self) -> None:
        for name in (self.names[kind] for kind in KINDS):
            for fld in self.client.describe_collection(name)["fields"]:
                if fld["type"] == DataType.FLOAT_VECTOR and int(fld["params"]["dim"]) != self.dim:
                    raise GraphStoreError(
                        f"Collection {name!r} at {self.uri!r} holds {int(fld['params']['dim'])}-dimensional "
                        f"vectors, but the embed model gives {self.dim}. Use the embed model the collection "
                        "was built with, or another collection_prefix (or overwrite=True to rebuild it)."
                    )

    # the write generation -------------------------------------------------------------------
    def generation(self) -> str:
        """The token of the collections' current state; every write by any store changes it."""
        rows = self.client.query(self.state_name, filter="id == 0", output_fields=["generation"], consistency_level="Strong")
        return rows[0]["generation"] if rows else ""

    def advance(self) -> str:
        """A new random generation token, returned. A write calls it before its first row, so that nothing
        saved about the previous state is trusted again, and after its last (or its repair), so that a store
        that read the rows in between can tell."""
        token = uuid.uuid4().hex
        self.client.upsert(self.state_name, [{"id": 0, "generation": token, "embedding": [1.0, 0.0]}])
        return token

    # reading ----------------------------------------------------------------------------------
    def query(self, kind: str, filter: str, fields: Sequence[str], limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """Rows of `kind` matching `filter` (an expression built by this module's helpers)."""
        kwargs = {} if limit is None else {"limit": limit}
        self.calls[f"query {kind}"] += 1
        start = time.perf_counter()
        rows = self.client.query(
            self.names[kind], filter=filter, output_fields=list(fields), consistency_level=self._consistency_level, **kwargs
        )
        self.seconds[f"query {kind}"] += time.perf_counter() - start
        return rows

    def get(self, kind: str, ids: Sequence[Any], fields: Sequence[str], batch_size: int = ID_BATCH) -> List[Dict[str, Any]]:
        """The rows of `kind` with the given ids (in no particular order), `batch_size` ids a query."""
        rows: List[Dict[str, Any]] = []
        ids = list(ids)
        self.ids_read[kind] += len(ids)
        for batch in chunked(ids, batch_size):
            rows += self.query(kind, id_filter(batch), fields)
        return rows

    def count(self, kind: str) -> int:
        return int(self.query(kind, "", ["count(*)"])[0]["count(*)"])

    def counts(self) -> Dict[str, int]:
        """Rows stored in each collection, as Milvus counts them."""
        return {kind: self.count(kind) for kind in KINDS}

    def search(
        self, kind: str, vectors: Sequence[Sequence[float]], limit: int, fields: Sequence[str] = (), where: str = ""
    ) -> List[List[Tuple[Any, float, Dict[str, Any]]]]:
        """For each vector, the `limit` nearest rows of `kind` (those matching `where`, an expression
        built by `filters.py`) as (id, cosine, fields), best first."""
        if not len(vectors) or limit <= 0:
            return [[] for _ in vectors]
        self._flushed(kind)
        self.calls[f"search {kind}"] += 1
        start = time.perf_counter()
        hits = self.client.search(
            self.names[kind],
            data=[list(map(float, v)) for v in vectors],
            limit=limit,
            output_fields=list(fields),
            filter=where,
            anns_field="embedding",
            consistency_level=self._consistency_level,
        )
        self.seconds[f"search {kind}"] += time.perf_counter() - start
        return [[(h["id"], float(h["distance"]), h.get("entity", {})) for h in hit_list] for hit_list in hits]

    def pages(self, kind: str, fields: Sequence[str]) -> Iterator[List[Dict[str, Any]]]:
        """Every row of a collection, a page at a time. On Milvus Lite, where each query costs about a
        scan whatever its limit, a page is a primary-key range of about `LITE_PAGE` rows (one
        unbounded query each); on a server, `query_iterator` pages, read Strong, so that caches built
        from them hold every write that advanced the generation read before them, whichever client made
        it."""
        if self.is_lite:
            strings = kind == PASSAGES
            for filter_ in _id_ranges(-(-self.count(kind) // LITE_PAGE), strings):
                page = self.query(kind, filter_, fields)
                if page:
                    yield page
            return
        with lite.quiet_lite():
            iterator = self.client.query_iterator(
                self.names[kind], batch_size=_SERVER_PAGE, output_fields=list(fields), consistency_level="Strong"
            )
            try:
                while True:
                    page = iterator.next()
                    if not page:
                        return
                    yield page
            finally:
                iterator.close()

    # writing ----------------------------------------------------------------------------------
    def upsert(self, kind: str, rows: List[Dict[str, Any]]) -> None:
        if rows:
            if kind == PASSAGES or not upsert_columns(self.client, self.names[kind], rows, self._schemas):
                self.client.upsert(self.names[kind], rows)  # passages: their metadata keys vary
            if self.is_lite:
                self._unflushed.add(kind)

    def insert(self, kind: str, rows: List[Dict[str, Any]]) -> None:
        """Insert new rows (ids not stored: Milvus would keep both rows of an id inserted twice)."""
        if rows:
            self.client.insert(self.names[kind], rows)
            if self.is_lite:
                self._unflushed.add(kind)

    def delete(self, kind: str, ids: Sequence[Any]) -> None:
        for batch in chunked(list(ids), ID_BATCH):
            self.client.delete(self.names[kind], filter=id_filter(batch))

    def delete_all(self) -> None:
        """Delete every row of the four collections (they stay, with their schema and index)."""
        for kind in (*KINDS, ADJACENCY):
            self.client.delete(self.names[kind], filter="id >= 0 or id < 0" if kind in (ENTITIES, RELATIONS) else 'id != ""')

    def flush(self) -> None:
        """Seal what was written, so that searches run on indexed segments (Milvus Lite searches
        unsealed rows slowly; `search` flushes by itself; a server seals by itself)."""
        for kind in list(self._unflushed):
            self._flushed(kind)

    def _flushed(self, kind: str) -> None:
        if kind in self._unflushed:
            self.client.flush(self.names[kind])
            self._unflushed.discard(kind)

    def close(self) -> None:
        """Release the database (idempotent)."""
        if self.client is None:
            return
        lite.release(self._key)
        self.client.close()
        self.client = None  # type: ignore[assignment]
        if self.lite_path is not None:
            lite.lite_release(self.lite_path)
