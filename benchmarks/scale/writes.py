"""Writing the corpus two ways, each into fresh collections: through `GraphRAGTransform` (the ingest), and
as a raw insert of the same rows (the floor Milvus sets). Every time leaves out building the TextNodes
and opening the store; on Milvus Lite it ends with a flush of the collections written (which seals the
rows, as a search needs; its share is reported apart).

The raw insert builds the rows the transform writes with the package's own row code (`ingest/rows.py`:
triplets kept out of the embedded text, checked rows, statements, embeddings with the same embedder),
takes the link rows the ingest found (it does no search of its own), and inserts them all with
`MilvusClient.insert`, 1,000 rows a call, into collections the store created (the same schema). Nothing
is read back.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List

from llama_index.core.schema import MetadataMode, TextNode

from llama_index_graphrag_milvus import GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding
from llama_index_graphrag_milvus.ingest.extract import ExcludeTriplets
from llama_index_graphrag_milvus.ingest.rows import checked, embed, passage_row, statement_rows
from llama_index_graphrag_milvus.milvus.collections import ENTITIES, LINKS, PASSAGES, RELATIONS, STATEMENTS
from llama_index_graphrag_milvus.schema import chunked, passage_id

from benchmarks.scale.corpus import Corpus

DIM = 32  # the hash embedding's dimension: the embedder is not what is measured
INSERT_BATCH = 1000


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class Target:
    """Where stores go: a directory of Milvus Lite files (one per collection prefix), or a server URI."""

    where: str
    lite: bool

    def store(self, prefix: str, **kwargs: Any) -> MilvusGraphStore:
        uri = str(Path(self.where) / f"{prefix}.db") if self.lite else self.where
        return MilvusGraphStore(
            uri=uri, embed_model=HashEmbedding(DIM), dim=DIM, collection_prefix=prefix, **kwargs
        )

    def discard(self, prefix: str) -> None:
        """Remove a prefix's collections (on Lite, its database file and snapshot)."""
        if self.lite:
            path = Path(self.where) / f"{prefix}.db"
            for p in (path, path.parent / f"{path.name}.graphrag-cache"):
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
            return
        from pymilvus import MilvusClient

        client = MilvusClient(self.where)
        for name in client.list_collections():
            if name.startswith(prefix + "_"):
                client.drop_collection(name)
        client.close()


def _nodes(corpus: Corpus) -> List[TextNode]:
    return [corpus.node(p) for p in range(corpus.n_passages)]


def _rate(seconds: float, corpus: Corpus, **more: Any) -> Dict[str, Any]:
    return {
        "seconds": round(seconds, 2),
        "relations_per_s": round(corpus.size / seconds, 1),
        "passages_per_s": round(corpus.n_passages / seconds, 1),
        **more,
    }


def ingest(target: Target, prefix: str, corpus: Corpus, node_batch: int, batch_size: int) -> Dict[str, Any]:
    """The corpus through `GraphRAGTransform` into an empty store, `node_batch` TextNodes a call; the
    store is left at `prefix` for the reads. With the rows written, the link rows found (for the raw insert)."""
    nodes = _nodes(corpus)
    batches = list(chunked(nodes, node_batch))
    store = target.store(prefix, overwrite=True, batch_size=batch_size)
    try:
        transform = GraphRAGTransform(store=store, text_links=False)  # the corpus is its triplets
        start = time.perf_counter()
        for i, batch in enumerate(batches, 1):
            transform(batch)
            if i % 20 == 0:
                log(f"  ingest: {i} of {len(batches)} batches, {time.perf_counter() - start:.0f} s")
        flushing = time.perf_counter()
        store.flush()
        seconds = time.perf_counter() - start
        counts = store.count()
        links = [row for page in store.collections.pages(LINKS, ["*"]) for row in page]
    finally:
        closing = time.perf_counter()
        store.close()
    result = _rate(
        seconds,
        corpus,
        node_batch=node_batch,
        store_batch_size=batch_size,
        flush_s=round(start + seconds - flushing, 2),
        counts={**counts, LINKS: len(links)},
        close_s=round(time.perf_counter() - closing, 2),
    )
    return {**result, "link_rows": links}


def raw_rows(nodes: List[TextNode], batch_size: int, links: List[Dict[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    """The rows the transform writes for `nodes` (into an empty store), by collection, embedded; the
    links as given."""
    model = HashEmbedding(DIM)
    nodes, triplets = checked(ExcludeTriplets()(nodes), None)  # as the transform: triplets not embedded
    pids = [passage_id(n.ref_doc_id or n.node_id, n.get_content(MetadataMode.NONE)) for n in nodes]
    passages = [passage_row(pid, n, ts) for pid, n, ts in zip(pids, nodes, triplets)]
    relations = {t.id: t for ts in triplets for t in ts}
    names: Dict[int, str] = {}
    for t in relations.values():
        names.setdefault(t.subject_id, t.subject)
        names.setdefault(t.object_id, t.object)
    texts = [n.get_content(MetadataMode.EMBED) for n in nodes]
    for row, vector in zip(passages, embed(model, texts, DIM, batch_size, "passages")):
        row["embedding"] = vector.tolist()
    entities = [
        {"id": e, "name": name, "embedding": v.tolist()}
        for (e, name), v in zip(names.items(), embed(model, list(names.values()), DIM, batch_size, "entities"))
    ]
    vectors = embed(model, [t.text for t in relations.values()], DIM, batch_size, "relations")
    relation_rows = [
        {"id": t.id, "subject_id": t.subject_id, "object_id": t.object_id, "subject": t.subject,
         "predicate": t.predicate, "object": t.object, "embedding": v.tolist()}
        for t, v in zip(relations.values(), vectors)
    ]
    statements = [row for pid, ts in zip(pids, triplets) for row in statement_rows(pid, ts)]
    return {ENTITIES: entities, RELATIONS: relation_rows, STATEMENTS: statements, LINKS: links, PASSAGES: passages}


def raw_insert(target: Target, prefix: str, corpus: Corpus, batch_size: int, links: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Build the rows (embedding included) and insert them, 1,000 a call; the collections are removed after."""
    nodes = _nodes(corpus)
    store = target.store(prefix, overwrite=True)
    try:
        client, names = store.collections.client, store.collections.names
        start = time.perf_counter()
        rows = raw_rows(nodes, batch_size, links)
        built = time.perf_counter()
        for kind, kind_rows in rows.items():
            for batch in chunked(kind_rows, INSERT_BATCH):
                client.insert(names[kind], batch)
        inserted = time.perf_counter()
        for kind in rows if target.lite else ():  # as `store.flush()`: a server seals by itself
            client.flush(names[kind])
        done = time.perf_counter()
    finally:
        store.close()
        target.discard(prefix)
    return _rate(
        done - start,
        corpus,
        rows_and_embeddings_s=round(built - start, 2),
        insert_s=round(inserted - built, 2),
        flush_s=round(done - inserted, 2),
        rows={kind: len(r) for kind, r in rows.items()},
        insert_batch=INSERT_BATCH,
    )
