"""Every direct row access of the property graph store, in one place: its own side collection, and the
reads of the graph store's rows that the graph store's methods do not offer.

The side collection `{prefix}_properties` holds what a property graph has and our three collections do
not: the labels and properties of entities and relations, the chunk id a PGI chunk was written under
(the passage row's id is `passage_id(ref_doc_id, text)`), entities that no stored relation names, and
relations that no passage states or that end at a chunk (`ImplicitPathExtractor`'s SOURCE/NEXT/...).
One row a thing, keyed `entity:<entity id>`, `relation:<relation id>` or `chunk:<chunk id>`:

- entity: `name`, `label`, `properties`, `sources` (the chunks that asserted it);
- relation: `label`, `subject`/`object` (the PGI ids of its ends), `source_key`/`target_key` (their keys), `properties`,
  `sources`, and `stated` when its triplet is in the relations collection (stated by its source chunk).
  An end is an entity key, a chunk key, or, for the other end of a relation from a chunk, `node:<id>`
  (PGI's implicit relations join node ids, never entity names);
- chunk: `passage_id`, the passage row it names.

Its vector field is a 2-dimensional constant (Milvus needs one). Entities with no entity row are found
by `vector_query` through a second, small collection, `{prefix}_standalone`: their id and the embedding
of their name (by the store's embed model). Relations are looked up by scalar `in` filters on their end
keys (Milvus Lite scans an array filter about 30 times slower).

Every filter is built from escaped literals (`milvus.filters`).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set

import numpy as np
from pymilvus import DataType

from llama_index_graphrag_milvus.errors import GraphStoreError
from llama_index_graphrag_milvus.milvus.collections import ID_BATCH, QUERY_LIMIT
from llama_index_graphrag_milvus.milvus.filters import id_filter, literal_list, milvus_literal
from llama_index_graphrag_milvus.schema import MAX_NAME_LENGTH, chunked
from llama_index_graphrag_milvus.store import MilvusGraphStore

ENTITY, RELATION, CHUNK = "entity", "relation", "chunk"
#: The key kind of a relation end that is neither an entity nor a chunk: a document or another node id at
#: the far end of a relation from a chunk (`ImplicitPathExtractor`'s SOURCE edge ends at the document).
NODE = "node"
#: The id of the row that marks that some side-only relation joins two entities (until then, the
#: relations of an entity are all in the relations collection, and no side query is needed for them).
ENTITY_EDGES_MARK = "meta:entity_edges"
#: Chunks a side row remembers as its sources (a Milvus ARRAY holds at most 4,096).
MAX_SOURCES = 1024
#: The longest chunk id accepted (an element of a Milvus VARCHAR array), in UTF-8 bytes.
MAX_CHUNK_ID_BYTES = 2048
#: The largest properties a side row holds, as JSON bytes (Milvus' JSON field limit is 64 KiB).
MAX_PROPERTIES_BYTES = 65_000

SIDE_FIELDS = ["id", "kind", "name", "label", "subject", "object", "source_key", "target_key", "passage_id",
               "sources", "stated", "properties"]
_RELATION_FIELDS = ["id", "subject_id", "object_id", "subject", "predicate", "object"]


def side_id(kind: str, key: Any) -> str:
    """The side row id of a thing: `entity:<int>`, `relation:<int>`, `chunk:<chunk id>`."""
    return f"{kind}:{key}"


def key_of(sid: str) -> str:
    """The key part of a side row id."""
    return sid.split(":", 1)[1]


def check_chunk_id(chunk_id: str) -> str:
    if len(chunk_id.encode("utf-8")) > MAX_CHUNK_ID_BYTES:
        raise GraphStoreError(
            f"Chunk id {chunk_id[:60]!r}... is {len(chunk_id.encode('utf-8')):,} bytes long; the property graph "
            f"store keeps chunk ids of at most {MAX_CHUNK_ID_BYTES:,}. Give the node a shorter id_. Nothing was written."
        )
    return chunk_id


def properties_json(properties: Dict[str, Any], what: str) -> Dict[str, Any]:
    """`properties` as JSON Milvus accepts, or an error naming the fix."""
    try:
        text = json.dumps(properties, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise GraphStoreError(
            f"The properties of {what} are not JSON ({exc}). Keep property values to strings, numbers, "
            "booleans, lists and dicts. Nothing was written."
        ) from None
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PROPERTIES_BYTES:
        raise GraphStoreError(
            f"The properties of {what} take {len(text):,} bytes as JSON; a row holds at most "
            f"{MAX_PROPERTIES_BYTES:,}. Keep large values in the chunk's text. Nothing was written."
        )
    return json.loads(text)


def spellings(labels: Sequence[str]) -> List[str]:
    """A label as given, lower case, Capitalized (as PGI's extractors write them), Title Case and UPPER."""
    return sorted({v for label in labels for v in (label, label.lower(), label.capitalize(), label.title(), label.upper())})


def property_filter(field: str, key: str, value: Any) -> Optional[str]:
    """`field["key"] == value`, escaped; None when Milvus cannot compare the value (a list, a dict, None)."""
    if isinstance(value, bool):
        literal = "true" if value else "false"
    elif isinstance(value, (int, float)):
        literal = repr(value)
    elif isinstance(value, str):
        literal = milvus_literal(value)
    else:
        return None
    return f"{field}[{milvus_literal(str(key))}] == {literal}"


class Rows:
    """The side collection of a property graph store and the reads of its graph store's rows.

    Args:
        store: The graph store whose collections (and Milvus client) these rows sit beside.
        overwrite: Drop the side collection first.
    """

    def __init__(self, store: MilvusGraphStore, overwrite: bool = False) -> None:
        self.store = store
        self.name = f"{store.collection_prefix}_properties"
        self.standalone_name = f"{store.collection_prefix}_standalone"
        self.dim = store.collections.dim
        self._unflushed: Set[str] = set()  # side collections written since their last flush
        client = self.client
        for name, create in ((self.name, self._create), (self.standalone_name, self._create_standalone)):
            if overwrite:
                client.drop_collection(name)
            if name not in client.list_collections():
                create()
            client.load_collection(name)
        self._check_dimension()

    @property
    def client(self) -> Any:
        client = self.store.collections.client
        if client is None:
            raise GraphStoreError("The property graph store is closed; open a new MilvusPropertyGraphStore.")
        return client

    def _create(self) -> None:
        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=False)
        text = MAX_NAME_LENGTH * 4
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=MAX_CHUNK_ID_BYTES + 16)
        schema.add_field("kind", DataType.VARCHAR, max_length=16)
        for name in ("name", "label"):
            schema.add_field(name, DataType.VARCHAR, max_length=text)
        for name in ("subject", "object", "source_key", "target_key", "passage_id"):
            schema.add_field(name, DataType.VARCHAR, max_length=max(text, MAX_CHUNK_ID_BYTES + 16))
        schema.add_field("sources", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=MAX_SOURCES,
                         max_length=MAX_CHUNK_ID_BYTES)
        schema.add_field("stated", DataType.BOOL)
        schema.add_field("properties", DataType.JSON)
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=2)
        index = self.client.prepare_index_params()
        index.add_index(field_name="embedding", index_type="FLAT", metric_type="L2")
        for name in ("kind", "source_key", "target_key", "passage_id"):
            index.add_index(field_name=name, index_type="INVERTED")
        self.client.create_collection(self.name, schema=schema, index_params=index,
                                      consistency_level=self.store.consistency_level)

    def _create_standalone(self) -> None:
        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=self.dim)
        index = self.client.prepare_index_params()
        index.add_index(field_name="embedding", index_type="FLAT", metric_type="COSINE")
        self.client.create_collection(self.standalone_name, schema=schema, index_params=index,
                                      consistency_level=self.store.consistency_level)

    def _check_dimension(self) -> None:
        for fld in self.client.describe_collection(self.standalone_name)["fields"]:
            if fld["type"] == DataType.FLOAT_VECTOR and int(fld["params"]["dim"]) != self.dim:
                raise GraphStoreError(
                    f"Collection {self.standalone_name!r} holds {int(fld['params']['dim'])}-dimensional vectors but "
                    f"the store {self.dim}. Open it with the embed model it was built with, or use overwrite=True."
                )

    # the side collection ------------------------------------------------------------------------
    def side(self, ids: Sequence[str]) -> Dict[str, Dict[str, Any]]:
        """Side rows by id."""
        found: Dict[str, Dict[str, Any]] = {}
        for batch in chunked(list(dict.fromkeys(ids)), ID_BATCH):
            for row in self.client.query(self.name, filter=id_filter(batch), output_fields=SIDE_FIELDS):
                found[row["id"]] = row
        return found

    def side_where(self, filter: str, limit: int = QUERY_LIMIT) -> List[Dict[str, Any]]:
        """Side rows matching `filter` (built by this module's helpers)."""
        return self.client.query(self.name, filter=filter, output_fields=SIDE_FIELDS, limit=limit)

    def side_touching(self, end_keys: Sequence[str]) -> List[Dict[str, Any]]:
        """The side-only relations (not stated in the relations collection) with an end among `end_keys`
        (entity keys are only looked up once a side-only relation between entities was written: a scalar
        `in` filter costs tens of milliseconds on Milvus Lite, a primary key lookup one)."""
        if not any(k.startswith(f"{CHUNK}:") or k.startswith(f"{NODE}:") for k in end_keys) and not self.side([ENTITY_EDGES_MARK]):
            return []
        rows: List[Dict[str, Any]] = []
        for batch in chunked(list(dict.fromkeys(end_keys)), ID_BATCH):
            keys = literal_list(batch)
            rows += self.side_where(f'kind == "{RELATION}" and stated == false and '
                                    f"(source_key in {keys} or target_key in {keys})")
        return rows

    def side_with_source(self, chunk_ids: Sequence[str]) -> List[Dict[str, Any]]:
        """Entity and relation side rows that name one of the chunks as a source or as an end."""
        rows: List[Dict[str, Any]] = []
        for batch in chunked(list(dict.fromkeys(chunk_ids)), ID_BATCH):
            ends = literal_list([side_id(CHUNK, c) for c in batch])
            rows += self.side_where(f"array_contains_any(sources, {literal_list(batch)}) or source_key in {ends} "
                                    f"or target_key in {ends}")
        return rows

    def chunks_of_passages(self, passage_ids: Sequence[str]) -> Dict[str, List[str]]:
        """For each passage id, the chunk ids PGI wrote it under."""
        found: Dict[str, List[str]] = {}
        for batch in chunked(list(dict.fromkeys(passage_ids)), ID_BATCH):
            filter_ = f'kind == "{CHUNK}" and {id_filter(batch, "passage_id")}'
            for row in self.client.query(self.name, filter=filter_, output_fields=["id", "passage_id"]):
                found.setdefault(row["passage_id"], []).append(key_of(row["id"]))
        return found

    def put(self, rows: List[Dict[str, Any]]) -> None:
        """Upsert whole side rows (the fields not given are empty)."""
        if not rows:
            return
        full = []
        for row in rows:
            row = {"name": "", "label": "", "subject": "", "object": "", "source_key": "", "target_key": "",
                   "passage_id": "", "sources": [], "stated": False, "properties": {}, **row}
            row["sources"] = list(dict.fromkeys(row["sources"]))[-MAX_SOURCES:]
            full.append({k: row[k] for k in SIDE_FIELDS} | {"embedding": [1.0, 0.0]})
        for batch in chunked(full, 256):
            self.client.upsert(self.name, batch)
        self._unflushed.add(self.name)

    def drop(self, ids: Iterable[str]) -> None:
        for batch in chunked(list(dict.fromkeys(ids)), ID_BATCH):
            self.client.delete(self.name, filter=id_filter(batch))
        self._unflushed.add(self.name)

    def sealed(self) -> None:
        """Flush what this process wrote since the last read, the graph store's collections included:
        Milvus Lite answers queries on unflushed rows about ten times slower (MuSiQue just ingested:
        VectorContextRetriever 650 ms a question unflushed, 55 ms flushed). A no-op when nothing was
        written."""
        self.store.flush()
        for name in list(self._unflushed):
            self.client.flush(name)
            self._unflushed.discard(name)

    def clear(self) -> None:
        """Delete every side row and standalone entity."""
        self.client.delete(self.name, filter='id != ""')
        self.client.delete(self.standalone_name, filter="id >= 0 or id < 0")

    # standalone entities ------------------------------------------------------------------------------
    def put_standalone(self, entity_ids: Sequence[int], vectors: Sequence[Sequence[float]]) -> None:
        """Make entities findable by `vector_query` (their name's embedding) while they have no entity row."""
        rows = [{"id": int(e), "embedding": [float(x) for x in v]} for e, v in zip(entity_ids, vectors)]
        for batch in chunked(rows, 256):
            self.client.upsert(self.standalone_name, batch)
        if rows:
            self._unflushed.add(self.standalone_name)

    def standalone(self, entity_ids: Sequence[int]) -> Set[int]:
        """Which of the entities are in the standalone collection."""
        found: Set[int] = set()
        for batch in chunked(list(dict.fromkeys(int(e) for e in entity_ids)), ID_BATCH):
            found |= {r["id"] for r in self.client.query(self.standalone_name, filter=id_filter(batch), output_fields=["id"])}
        return found

    def drop_standalone(self, entity_ids: Iterable[int]) -> None:
        for batch in chunked(list(dict.fromkeys(int(e) for e in entity_ids)), ID_BATCH):
            self.client.delete(self.standalone_name, filter=id_filter(batch))
            self._unflushed.add(self.standalone_name)

    def search_standalone(self, vector: Sequence[float], top_k: int) -> List[tuple]:
        """The `top_k` standalone entities nearest to `vector`, as (entity id, cosine)."""
        hits = self.client.search(self.standalone_name, data=[list(map(float, vector))], anns_field="embedding",
                                  limit=top_k, output_fields=["id"])
        return [(int(h["id"]), float(h["distance"])) for h in hits[0]]

    def side_labels(self) -> List[Dict[str, Any]]:
        """The kind and label of side rows (for the schema)."""
        return self.client.query(self.name, filter='kind != ""', output_fields=["kind", "label"], limit=QUERY_LIMIT)

    # the graph store's rows --------------------------------------------------------------------------
    def _query(self, collection: str, filter: str, fields: Sequence[str], limit: Optional[int] = None) -> List[Dict[str, Any]]:
        kwargs = {} if limit is None else {"limit": limit}
        return self.client.query(collection, filter=filter, output_fields=list(fields), **kwargs)

    def passages(self, passage_ids: Sequence[str]) -> Dict[str, Dict[str, Any]]:
        """Passage rows by id: `doc_id`, `relation_ids` and `embedding`."""
        found: Dict[str, Dict[str, Any]] = {}
        for batch in chunked(list(dict.fromkeys(passage_ids)), ID_BATCH):
            for row in self._query(self.store.passages_collection, id_filter(batch),
                                   ["id", "doc_id", "relation_ids", "embedding"]):
                found[row["id"]] = row
        return found

    def passage_ids_where(self, key: str, value: Any) -> List[str]:
        """The passages whose metadata (or `doc_id`/`ref_doc_id`) has `key == value`."""
        filter_ = property_filter("$meta", key, value)
        if key in ("doc_id", "ref_doc_id", "document_id") and isinstance(value, str):
            filter_ = id_filter([value], "doc_id")
        if filter_ is None:
            return []
        return [row["id"] for row in self._query(self.store.passages_collection, filter_, ["id"], QUERY_LIMIT)]

    def all_passage_ids(self) -> List[str]:
        return [row["id"] for row in self._query(self.store.passages_collection, 'id != ""', ["id"], QUERY_LIMIT)]

    def passages_stating(self, relation_ids: Sequence[int]) -> Dict[int, List[str]]:
        """For each relation id, the passages that state it (the graph store's statements)."""
        return {r: sorted(pids) for r, pids in self.store.passages_stating([int(r) for r in relation_ids]).items() if pids}

    def relations_touching(self, entity_ids: Sequence[int]) -> List[Dict[str, Any]]:
        """The relation rows whose subject or object is one of the entities (found by the graph backend)."""
        found = self.store.relations_of(list(dict.fromkeys(int(e) for e in entity_ids)))
        return self.relations(sorted({r for rels in found.values() for r in rels}))

    def _live(self, kind: str, rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """The rows of live entities or relations (a stored passage states them; the others wait for
        `compact()`)."""
        live = self.store.backend.live(kind, np.array([row["id"] for row in rows], dtype=np.int64)) if rows else []
        return [row for row, ok in zip(rows, live) if ok]

    def relations_named(self, predicates: Sequence[str]) -> List[Dict[str, Any]]:
        """The live relation rows with one of these predicates, as written or in the usual cases (Milvus
        compares strings exactly; callers compare normalized)."""
        return self._live("relations", self._query(
            self.store.relations_collection, id_filter(spellings(predicates), "predicate"), _RELATION_FIELDS, QUERY_LIMIT))

    def relations(self, relation_ids: Sequence[int]) -> List[Dict[str, Any]]:
        return self._live("relations", self.store.collections.get("relations", [int(r) for r in relation_ids], _RELATION_FIELDS))

    def entity_names(self, entity_ids: Sequence[int]) -> Dict[int, str]:
        """The stored names of the live entities."""
        rows = self.store.collections.get("entities", list(dict.fromkeys(int(e) for e in entity_ids)), ["id", "name"])
        return {row["id"]: row["name"] for row in self._live("entities", rows)}

    def all_entities(self) -> Dict[int, str]:
        rows = self._query(self.store.entities_collection, "id >= 0 or id < 0", ["id", "name"], QUERY_LIMIT)
        return {row["id"]: row["name"] for row in self._live("entities", rows)}

    def predicates(self) -> List[str]:
        rows = self._query(self.store.relations_collection, "id >= 0 or id < 0", ["id", "predicate"], QUERY_LIMIT)
        return sorted({row["predicate"] for row in self._live("relations", rows)})
