"""The six collections of a store (`docs/design/collections.md`): their schemas, and every read and write
of their rows.

Every filter is built from escaped literals (`filters.py`). Milvus Lite's specifics (`lite.py`) are used
here: one embedded server per database path and process, a clear error when another process holds the
path, flushing written collections before a search, and quieting the harmless tracebacks Lite logs. The
passages collection is a standard LlamaIndex Milvus collection, opened through `PassageVectorStore`
(`vector_store.py`), so that plain vector RAG runs on the very same rows.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import MilvusException

import llama_index_graphrag_milvus.milvus.lite as lite
from llama_index_graphrag_milvus.errors import GraphStoreError
from llama_index_graphrag_milvus.milvus.filters import id_filter, milvus_literal
from llama_index_graphrag_milvus.milvus.vector_store import PassageVectorStore
from llama_index_graphrag_milvus.schema import MAX_NAME_LENGTH, chunked

logger = logging.getLogger(__name__)

ENTITIES, RELATIONS, PASSAGES = "entities", "relations", "passages"
STATEMENTS, LINKS, LOG = "statements", "links", "log"
#: The embedded facts; `ALL`: every collection of a store.
KINDS = (ENTITIES, RELATIONS, PASSAGES)
ALL = (*KINDS, STATEMENTS, LINKS, LOG)
#: Ids per `in [...]` filter: one query per batch.
ID_BATCH = 1000
#: Ids per query when vectors are read by primary key to score them: Milvus' cost per query is mostly per
#: id, and on Lite each query also costs about a scan, so few large ones.
VECTOR_BATCH = 8192
#: Rows a query returns at most (Milvus caps a query's window at 16,384).
QUERY_LIMIT = 16384
#: Rows per page when a collection is read whole: a server's `query_iterator` page; on Milvus Lite, where
#: each query costs about a scan whatever its limit, a primary-key range of about this many rows.
_SERVER_PAGE, LITE_PAGE = 16384, 100_000

_TEXT = {"max_length": MAX_NAME_LENGTH * 4}
#: Each collection's fields beside `id` and `embedding` (the passages' are MilvusVectorStore's).
_FIELDS: Dict[str, List[Tuple[Any, ...]]] = {
    ENTITIES: [("name", DataType.VARCHAR, _TEXT)],
    RELATIONS: [("subject_id", DataType.INT64), ("object_id", DataType.INT64), ("subject", DataType.VARCHAR, _TEXT),
                ("predicate", DataType.VARCHAR, _TEXT), ("object", DataType.VARCHAR, _TEXT)],
    STATEMENTS: [("passage_id", DataType.VARCHAR, {"max_length": 64}), ("relation_id", DataType.INT64),
                 ("subject_id", DataType.INT64), ("object_id", DataType.INT64), ("subject_slot", DataType.INT16),
                 ("object_slot", DataType.INT16), ("subject_first", DataType.BOOL), ("object_first", DataType.BOOL),
                 ("relation_count", DataType.INT32)],
    LINKS: [("a", DataType.INT64), ("b", DataType.INT64), ("score", DataType.FLOAT)],
    LOG: [],
}
#: The fields a server indexes for the Milvus adjacency mode's filters (Lite's filters scan anyway).
_INDEXED = {STATEMENTS: ("passage_id", "relation_id", "subject_id", "object_id"), LINKS: ("a", "b")}
#: Finished writes' log rows a writer leaves before it deletes them (one delete per so many rows).
LOG_SLACK = 32
#: A vector for the collections that hold none (Milvus needs one vector field).
CONSTANT = [0.0, 0.0]


def collection_names(prefix: str) -> Dict[str, str]:
    """The names of a store's collections: `{prefix}_{kind}`."""
    return {kind: f"{prefix}_{kind}" for kind in ALL}


def legacy_names(prefix: str) -> List[str]:
    """The collections only a store of version 0.1.0 has: a store with them is refused, or dropped whole."""
    return [f"{prefix}_adjacency", f"{prefix}_state"]


def is_local_path(uri: str) -> bool:
    """Whether `uri` names a Milvus Lite database (a path) rather than a server."""
    return "://" not in uri


def _id_ranges(parts: int, strings: bool) -> List[str]:
    """Filters splitting a collection into `parts` ranges of its primary key, about equal when keys are
    hashes (int64 ids: uniform; passage ids: hex digests), covering every key."""
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


def _create(client: MilvusClient, name: str, kind: str, dim: int, index_config: Dict[str, Any], consistency: str,
            scalar_indexes: bool) -> None:
    """Create one of the store's own collections (all but the passages, which are MilvusVectorStore's)."""
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    if kind == LOG:
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    else:
        schema.add_field("id", DataType.INT64, is_primary=True)
    for field, dtype, *options in _FIELDS[kind]:
        schema.add_field(field, dtype, **(options[0] if options else {}))
    embedded = kind in KINDS
    schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=dim if embedded else len(CONSTANT))
    config = dict(index_config) if embedded else {"index_type": "FLAT", "metric_type": "L2"}
    index = client.prepare_index_params()
    index.add_index(field_name="embedding", index_type=config.pop("index_type", "AUTOINDEX"),
                    metric_type=config.pop("metric_type", "COSINE"), params=config or None)
    for field in _INDEXED.get(kind, ()) if scalar_indexes else ():
        index.add_index(field_name=field, index_type="")  # the server's default scalar index
    client.create_collection(name, schema=schema, index_params=index,
                             consistency_level="Strong" if kind == LOG else consistency)


def _made_by_another(client: MilvusClient, name: str, make: Callable[[], Any]) -> Any:
    """`make()`; if it fails because another process made `name` meanwhile (two processes opening one new
    store), None: the collection is there."""
    try:
        return make()
    except MilvusException:
        time.sleep(0.5)
        if not client.has_collection(name):
            raise
        logger.info("Collection %s was created meanwhile by another client; using it.", name)
        return None


class Collections:
    """The collections of one store (`{prefix}_{kind}`) at `uri` (a Lite path or a server URI), their
    vectors of `dim` under `index_config` (Milvus `add_index` arguments), read at `consistency_level`;
    `overwrite` drops them first; `owner` is the graph store that `vector_store`'s writes go through."""

    def __init__(
        self, uri: str, token: str, prefix: str, dim: int, *, index_config: Dict[str, Any], consistency_level: str,
        overwrite: bool, client_kwargs: Dict[str, Any], owner: Any,
    ) -> None:
        self.lite_path: Optional[str] = str(lite.lite_path(uri)) if is_local_path(uri) else None
        self.uri, self.dim = self.lite_path or uri, dim
        self.prefix, self.names = prefix, collection_names(prefix)
        self._key = (self.uri, prefix) if self.is_lite else None  # one store per Lite collections
        self._token, self._client_kwargs, self._owner = token, client_kwargs, owner
        self._index_config, self.consistency_level = index_config, consistency_level
        self._unflushed: set = set()  # kinds written since their last flush (Milvus Lite)
        self.calls: Counter = Counter()  # queries and searches made, by kind (what the benchmarks count)
        self.seconds: Counter = Counter()  # time spent in those calls, by kind
        lite.claim(self._key)
        try:
            if self.is_lite:
                lite.check_lite(Path(self.uri), list(self.names.values()))
            with lite.quiet_lite():
                self.vector_store = self._open_vector_store(overwrite)
        except BaseException:
            lite.release(self._key)
            raise
        self.client: MilvusClient = self.vector_store.client
        if self.is_lite:
            lite.lite_acquire(self.uri)
        try:
            with lite.quiet_lite():
                self._create()
            self._check_dimensions()
            for name in self.names.values():
                self.client.load_collection(name)
        except BaseException:
            self.close()
            raise

    @property
    def is_lite(self) -> bool:
        return self.lite_path is not None

    # opening ----------------------------------------------------------------------------------
    def _open_vector_store(self, overwrite: bool) -> PassageVectorStore:
        if overwrite:
            client = MilvusClient(uri=self.uri, token=self._token, **self._client_kwargs)
            for name in [*self.names.values(), *legacy_names(self.prefix)]:
                client.drop_collection(name)
            client.close()

        def open_() -> PassageVectorStore:
            return PassageVectorStore(
                uri=self.uri, token=self._token, collection_name=self.names[PASSAGES], dim=self.dim,
                similarity_metric="COSINE", index_config=dict(self._index_config), use_async_client=False,
                upsert_mode=True, consistency_level=self.consistency_level, **self._client_kwargs,
            )

        try:
            try:
                vector_store = open_()
            except MilvusException:  # made meanwhile by another process: open it as it is now
                time.sleep(0.5)
                vector_store = open_()
        except Exception as exc:
            if self.is_lite and lite.held_by_another_process(self.uri):
                raise lite.held_error(self.uri) from exc
            raise
        vector_store._graph_store = self._owner
        return vector_store

    def _create(self) -> None:
        existing = set(self.client.list_collections())
        if old := sorted(existing & set(legacy_names(self.prefix))):
            raise GraphStoreError(
                f"Collections {old} at {self.uri!r} hold a store written by version 0.1.0, whose layout this "
                "version does not read. Ingest again: with overwrite=True (it drops them), or into another "
                "collection_prefix."
            )
        for kind in (ENTITIES, RELATIONS, STATEMENTS, LINKS, LOG):
            name = self.names[kind]
            if name not in existing:
                _made_by_another(self.client, name, partial(
                    _create, self.client, name, kind, self.dim, self._index_config, self.consistency_level, not self.is_lite))
        if self.names[LOG] not in existing:  # a new store's log is never empty: each has a state of its own
            self.end(uuid.uuid4().hex)

    def _check_dimensions(self) -> None:
        for name in (self.names[kind] for kind in KINDS):
            for fld in self.client.describe_collection(name)["fields"]:
                if fld["type"] == DataType.FLOAT_VECTOR and int(fld["params"]["dim"]) != self.dim:
                    raise GraphStoreError(
                        f"Collection {name!r} at {self.uri!r} holds {int(fld['params']['dim'])}-dimensional "
                        f"vectors, but the embed model gives {self.dim}. Use the embed model the collection "
                        "was built with, or another collection_prefix (or overwrite=True to rebuild it)."
                    )

    # the log ----------------------------------------------------------------------------------
    def log_ids(self) -> FrozenSet[str]:
        """The log's row ids, read Strong: a write adds one when it begins and one when it ends."""
        rows = self.client.query(self.names[LOG], filter='id != ""', output_fields=["id"], limit=QUERY_LIMIT,
                                 consistency_level="Strong")
        return frozenset(row["id"] for row in rows)

    def generation(self) -> str:
        """A digest of the log's ids: changed by every write of any store on these collections."""
        return hashlib.blake2b("\n".join(sorted(self.log_ids())).encode(), digest_size=16).hexdigest()

    def begin(self) -> str:
        """Log that a write begins (before its first row); its token."""
        token = uuid.uuid4().hex
        self.client.upsert(self.names[LOG], [{"id": f"{token}.begin", "embedding": CONSTANT}])
        return token

    def end(self, token: str) -> str:
        """Log that the write `token` ended (after its last row); the id of the row that says so."""
        done = f"{token}.end"
        self.client.upsert(self.names[LOG], [{"id": done, "embedding": CONSTANT}])
        return done

    def prune(self, keep: str, seen: Optional[Iterable[str]] = None) -> None:
        """Delete log rows but `keep`: of those `seen`, the finished writes' (both rows, or a lone `end`)
        once there are `LOG_SLACK` of them, never a write under way (its `begin` tells other writers that
        it may be writing: `ingest.writes.quiet`); with no `seen`, all (`compact`, run while nothing else writes)."""
        if seen is None:
            self.client.delete(self.names[LOG], filter=f"id != {milvus_literal(keep)}")
            return
        seen = set(seen)
        done = sorted(i for i in seen - {keep} if i.endswith(".end") or i[:-6] + ".end" in seen)
        if len(done) >= LOG_SLACK:
            self.client.delete(self.names[LOG], filter=id_filter(done))

    # reading ----------------------------------------------------------------------------------
    def query(self, kind: str, filter: str, fields: Sequence[str], limit: Optional[int] = None,
              consistency: Optional[str] = None) -> List[Dict[str, Any]]:
        """Rows of `kind` matching `filter` (an expression built by `filters.py`)."""
        kwargs = {} if limit is None else {"limit": limit}
        self.calls[f"query {kind}"] += 1
        start = time.perf_counter()
        rows = self.client.query(self.names[kind], filter=filter, output_fields=list(fields),
                                 consistency_level=consistency or self.consistency_level, **kwargs)
        self.seconds[f"query {kind}"] += time.perf_counter() - start
        return rows

    def get(self, kind: str, ids: Sequence[Any], fields: Sequence[str], batch_size: int = ID_BATCH,
            consistency: Optional[str] = None) -> List[Dict[str, Any]]:
        """The rows of `kind` with the given ids (in no particular order), `batch_size` ids a query."""
        return [row for batch in chunked(list(ids), batch_size)
                for row in self.query(kind, id_filter(batch), fields, consistency=consistency)]

    def where(self, kind: str, tests: Iterable[str], fields: Sequence[str]) -> List[Dict[str, Any]]:
        """The rows of `kind` matching any of `tests` (expressions built by `filters.py`), read whole: a
        query each, paged when one holds more than `QUERY_LIMIT` rows."""
        rows: Dict[Any, Dict[str, Any]] = {}
        for test in tests:
            found = self.query(kind, test, ["id", *fields], limit=QUERY_LIMIT)
            if len(found) == QUERY_LIMIT:  # more than one query returns: page through them
                found = [row for page in self.pages(kind, ["id", *fields], test) for row in page]
            rows.update((row["id"], row) for row in found)
        return list(rows.values())

    def count(self, kind: str, consistency: Optional[str] = None) -> int:
        return int(self.query(kind, "", ["count(*)"], consistency=consistency)[0]["count(*)"])

    def counts(self, kinds: Sequence[str] = KINDS) -> Dict[str, int]:
        """Rows stored in each collection, as Milvus counts them (Strong)."""
        return {kind: self.count(kind, "Strong") for kind in kinds}

    def search(
        self, kind: str, vectors: Sequence[Sequence[float]], limit: int, fields: Sequence[str] = (), where: str = "",
        consistency: Optional[str] = None,
    ) -> List[List[Tuple[Any, float, Dict[str, Any]]]]:
        """For each vector, the `limit` nearest rows of `kind` (those matching `where`, an expression
        built by `filters.py`) as (id, cosine, fields), best first."""
        if not len(vectors) or limit <= 0:
            return [[] for _ in vectors]
        self._flushed(kind)
        self.calls[f"search {kind}"] += 1
        start = time.perf_counter()
        hits = self.client.search(
            self.names[kind], data=[list(map(float, v)) for v in vectors], limit=limit, output_fields=list(fields),
            filter=where, anns_field="embedding", consistency_level=consistency or self.consistency_level,
        )
        self.seconds[f"search {kind}"] += time.perf_counter() - start
        return [[(h["id"], float(h["distance"]), h.get("entity", {})) for h in hit_list] for hit_list in hits]

    def pages(self, kind: str, fields: Sequence[str], where: str = "") -> Iterator[List[Dict[str, Any]]]:
        """Every row of a collection (matching `where`), a page at a time: on Lite in primary-key ranges,
        one unbounded query each; on a server by `query_iterator`, read Strong, so that caches built from
        the pages hold every write that ended before the log was read."""
        if self.is_lite:
            for filter_ in _id_ranges(-(-self.count(kind) // LITE_PAGE), kind == PASSAGES):
                test = " and ".join(f"({t})" for t in (filter_, where) if t)
                if page := self.query(kind, test, fields):
                    yield page
            return
        with lite.quiet_lite():
            iterator = self.client.query_iterator(self.names[kind], batch_size=_SERVER_PAGE, output_fields=list(fields),
                                                  filter=where, consistency_level="Strong")
            try:
                while page := iterator.next():
                    yield page
            finally:
                iterator.close()

    # writing ----------------------------------------------------------------------------------
    def upsert(self, kind: str, rows: List[Dict[str, Any]]) -> None:
        """Write whole rows (an id stored already is replaced: a fact written twice is one row)."""
        if rows:
            self.client.upsert(self.names[kind], rows)
            if self.is_lite:
                self._unflushed.add(kind)

    def delete(self, kind: str, ids: Sequence[Any], field: str = "id") -> None:
        """Delete the rows of `kind` whose `field` (the primary key by default) is one of `ids`."""
        for batch in chunked(list(dict.fromkeys(ids)), ID_BATCH):
            self.client.delete(self.names[kind], filter=id_filter(batch, field))
        if ids and self.is_lite:
            self._unflushed.add(kind)

    def delete_all(self) -> None:
        """Delete every row of the store's collections but the log (they stay, with their schema and index)."""
        for kind in (*KINDS, STATEMENTS, LINKS):
            self.client.delete(self.names[kind], filter='id != ""' if kind == PASSAGES else "id >= 0 or id < 0")

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
