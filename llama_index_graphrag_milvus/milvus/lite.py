"""Milvus Lite's specifics: one embedded server per database path and process (shared by that process'
stores, released with the last), one store per collections in a process, paths checked before Lite
opens them (it prints tracebacks), a database held by another process, collections left half-created by
a killed first open, and the harmless tracebacks Lite logs."""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from llama_index_graphrag_milvus.errors import GraphStoreError

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def quiet_lite() -> Iterator[None]:
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


# Milvus Lite: one embedded server per path and process -----------------------------------------------
_lite_users: Dict[str, int] = {}
_lite_lock = threading.Lock()


def lite_acquire(path: str) -> None:
    with _lite_lock:
        _lite_users[path] = _lite_users.get(path, 0) + 1


def lite_release(path: str) -> None:
    with _lite_lock:
        _lite_users[path] -= 1
        if _lite_users[path] > 0:
            return
        del _lite_users[path]
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(path)


def held_by_another_process(path: str) -> bool:
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


# One store per Milvus Lite collections in a process: two would each keep their own adjacency, and the
# one that did not write would serve (and save) a stale one. (On a server other processes may write
# anyway: there the log keeps a snapshot from being trusted after another writer.)
_open: set = set()


def claim(key: Optional[tuple]) -> None:
    if key is None:
        return
    with _lite_lock:
        if key in _open:
            raise GraphStoreError(
                f"A MilvusGraphStore on {key[0]!r} with collection_prefix {key[1]!r} is already open in this "
                "process. Use that store (share it between threads and retrievers), or close it first."
            )
        _open.add(key)


def release(key: Optional[tuple]) -> None:
    with _lite_lock:
        _open.discard(key)


def lite_path(uri: str) -> Path:
    """The Milvus Lite database at `uri`, its folder created; an error naming the fix if it cannot be."""
    path = Path(uri).expanduser().resolve()
    if path.suffix != ".db":
        raise GraphStoreError(
            f"A Milvus Lite database path must end with .db, got {uri!r}. Pass e.g. uri='./graphrag_milvus.db', "
            "or the URI of a Milvus server (http://host:19530)."
        )
    folder = next((p for p in path.parents if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise GraphStoreError(f"{str(folder)!r} is a file, so {uri!r} cannot be created under it. Pass a path in a folder.")
    if path.exists() and not path.is_dir():
        raise GraphStoreError(
            f"{uri!r} is a file, not a Milvus Lite database (which is a folder). Pass another path, or move the file."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def held_error(path: str) -> GraphStoreError:
    """The error for a database another process holds."""
    return GraphStoreError(
        f"The Milvus Lite database {path!r} is open in another process. Close the store there "
        "(store.close()) or use another path: Milvus Lite allows one process per path."
    )


def check_lite(path: Path, names: List[str]) -> None:
    """Before Milvus Lite opens `path`: refuse a database another process holds (Lite would print a
    traceback first), and remove the folders of our collections that a killed first open left
    half-created (Lite writes a collection's folder before its schema, and refuses to create it again)."""
    if not path.is_dir():
        return
    with _lite_lock:
        ours = str(path) in _lite_users
    if not ours and held_by_another_process(str(path)):
        raise held_error(str(path))
    for name in names:
        folder = path / "collections" / name
        if folder.is_dir() and not (folder / "schema.json").exists():
            logger.warning("Removing %s: a collection left half-created by an interrupted first open.", folder)
            shutil.rmtree(folder)
