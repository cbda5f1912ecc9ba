"""Integration: the store, the transform and the retriever against a real Milvus server.

The server is Milvus 2.3.5 standalone from the `milvus` package; it runs in a private network namespace
(see `milvus_server.py`) with its data in a temporary directory, and is killed when the scenario is done.
Retrieval must give the same passages as the same ingest on Milvus Lite. Skipped, with the reason, where
the package is missing or no namespace can be made (not root, no CAP_SYS_ADMIN, no iproute2).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

if str(Path(__file__).resolve().parent) not in sys.path:  # also under --import-mode=importlib
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import milvus_server

# 22 given triplets and 27 links of the passages' text and titles, between 27 names
COUNTS = {"entities": 27, "relations": 49, "passages": 5}
# Daniel's 10 relations go, and the 7 names only his passage states
COUNTS_AFTER_DELETE = {"entities": 20, "relations": 39, "passages": 4}
WORKER_TIMEOUT = 900.0  # the scenario takes ~200 s alone, and more beside the rest of the suite on 2 cores


@pytest.fixture(scope="module")
def server() -> dict[str, Any]:
    """The worker's result: the scenario's steps as run against the server."""
    reason = milvus_server.why_no_server()
    if reason:
        pytest.skip(reason)
    data_dir = Path(tempfile.mkdtemp(prefix="graphrag-milvus-server-")).resolve()
    started = time.monotonic()
    leftovers = []
    try:
        result = milvus_server.run_worker(data_dir, f"it_{uuid.uuid4().hex[:8]}", WORKER_TIMEOUT)
    finally:
        leftovers = milvus_server.processes_running(str(data_dir / "bin"))
        for pid in leftovers:  # only ever the server this test started, by its executable's path
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(data_dir, ignore_errors=True)
    result["leftover_pids"] = leftovers
    result["total_seconds"] = round(time.monotonic() - started, 2)
    return result


@pytest.fixture(scope="module")
def lite(tmp_path_factory) -> dict[str, Any]:
    """The same scenario on Milvus Lite, in this process: the reference for retrieval."""
    from llama_index_graphrag_milvus import MilvusGraphStore
    from llama_index_graphrag_milvus.embeddings import HashEmbedding

    uri = str(tmp_path_factory.mktemp("lite") / "reference.db")
    steps = milvus_server.Steps()
    milvus_server.scenario(lambda: MilvusGraphStore(uri=uri, embed_model=HashEmbedding(dim=64)), steps)
    return steps.results


def value(results: dict[str, Any], step: str) -> Any:
    """The value of a step of the scenario; fails with the step's error if it raised."""
    steps = results.get("steps", results)
    assert step in steps, f"step {step!r} did not run: {_problems(results)}"
    outcome = steps[step]
    assert outcome["ok"], f"step {step!r} failed: {outcome['error']}\n{outcome['traceback']}"
    return outcome["value"]


def _problems(results: dict[str, Any]) -> str:
    keys = ("server_error", "worker_error", "server_log_tail", "worker_stderr_tail")
    return "\n".join(f"{k}: {results[k]}" for k in keys if results.get(k)) or "(no error reported)"


def test_the_server_ran_in_a_private_namespace_and_was_killed(server):
    assert not server.get("server_error") and not server.get("worker_error"), _problems(server)
    assert server["interfaces"] == ["lo"]
    assert server["server"]["version"].startswith("v2.3.5")
    assert server["server_exit_code"] == -signal.SIGKILL
    assert server["leftover_pids"] == []
    print(
        f"\nMilvus {server['server']['version']}: binaries unpacked in {server['server']['extract_seconds']} s, "
        f"ready (health check OK) after {server['server']['ready_seconds']} s, client connected after "
        f"{server['server']['connected_seconds']} s; worker {server['worker_seconds']} s, "
        f"total {server['total_seconds']} s"
    )


def test_ingest_writes_entities_relations_and_passages(server):
    assert value(server, "ingest") == 5
    assert value(server, "count_after_ingest") == COUNTS
    assert value(server, "cache_after_ingest") == COUNTS


def test_retrieval_gives_the_passages_milvus_lite_gives(server, lite):
    assert value(lite, "count_after_ingest") == COUNTS
    for step in ("retrieve_question", "retrieve_euler"):
        expected = value(lite, step)
        assert expected, f"Milvus Lite retrieved nothing for {step}"
        assert value(server, step) == expected, step


def test_a_second_connection_sees_the_same_rows(server):
    assert value(server, "reopen_count") == COUNTS
    assert value(server, "reopen_cache") == COUNTS
    assert value(server, "reopen_retrieve_question") == value(server, "retrieve_question")


def test_another_process_sees_the_same_rows(server):
    other = value(server, "other_process")
    assert other["count"] == COUNTS
    assert other["cache"] == COUNTS
    assert other["retrieve_question"] == value(server, "retrieve_question")


def test_delete_removes_the_document_and_compact_what_only_it_supported(server, lite):
    value(server, "delete")
    assert value(server, "count_after_delete") == {**COUNTS, "passages": 4}  # the rows stay, unread
    assert value(server, "cache_after_delete") == COUNTS_AFTER_DELETE
    after = value(server, "retrieve_euler_after_delete")
    assert milvus_server.DELETED_DOC not in {ref_doc_id for _, ref_doc_id in after}
    assert after == value(lite, "retrieve_euler_after_delete")
    assert value(server, "compact") == {"relations": 10, "entities": 7, "links": 1, "statements": 0}  # a gone name's link
    assert value(server, "count_after_compact") == COUNTS_AFTER_DELETE


def test_a_store_built_before_another_stores_delete_catches_up_by_sync(server):
    assert value(server, "watcher_before") == COUNTS
    assert value(server, "watcher_sync") == {"synced": True, "after": COUNTS_AFTER_DELETE, "again": False}


def test_a_store_catches_up_by_sync_with_what_another_process_wrote(server):
    seen = value(server, "sync_across_processes")
    assert seen["before"] == COUNTS_AFTER_DELETE
    assert seen["written"]["passages"] == COUNTS_AFTER_DELETE["passages"] + 1
    assert seen["synced"] is True
    assert seen["after"] == seen["written"]
    assert seen["bob"] == ["bob", "orsk"]


def test_a_store_opened_after_the_delete_sees_it(server):
    assert value(server, "reopen_after_delete_count") == COUNTS_AFTER_DELETE
    assert value(server, "reopen_after_delete_cache") == COUNTS_AFTER_DELETE


@pytest.mark.parametrize("writers", ["2", "4"])
def test_writers_in_parallel_leave_the_rows_and_answers_of_one(server, writers):
    outcome = value(server, "writers")
    assert all(run["exit"] == 0 for run in outcome["one"] + outcome[writers]["runs"]), outcome
    assert outcome[writers]["same_rows"] and outcome[writers]["same_answers"], outcome[writers]
    assert outcome[writers]["rows"]["passages"] == 162 and outcome[writers]["rows"]["links"]


def test_a_pipeline_with_worker_processes_leaves_the_rows_of_one(server):
    outcome = value(server, "writers")["pipeline"]
    assert outcome["same_rows"] and outcome["same_answers"], outcome
    assert outcome["rows"]["passages"] == 162


def test_expansion_by_filtered_reads_equals_the_in_memory_walk_on_the_server(server):
    outcome = value(server, "milvus_expansion_mismatches")
    assert outcome["checks"] == 2 * (COUNTS["entities"] + 8)  # every entity and 8 relations, at degrees 1 and 2
    assert outcome["mismatches"] == 0


def test_a_store_with_no_adjacency_in_memory_gathers_the_same_candidates_on_the_server(server):
    outcome = value(server, "milvus_mode_mismatches")
    assert outcome == {"checks": 6, "mismatches": 0}


def test_a_snapshot_on_the_server_needs_a_path_and_then_reopens_from_it(server):
    outcome = value(server, "snapshot_on_server")
    assert "needs a file path on a Milvus server" in outcome["refused"]
    assert outcome == {"refused": outcome["refused"], "saved": True, "reopened_from_file": True, "same_counts": True}
