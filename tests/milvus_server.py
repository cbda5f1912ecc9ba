"""A real Milvus server (the `milvus` package: Milvus 2.3.5 standalone) for integration tests.

The server listens on all interfaces, so it only ever runs inside a private network namespace:

    test process ──> setsid, setpriv --pdeathsig KILL: unshare --net --pid --mount-proc --fork --kill-child
                       sh -c 'ip link set lo up && exec python tests/milvus_server.py ...'   (the worker)
                         └─> milvus run standalone   (setsid: own process group; pdeathsig KILL)

The worker (this file run as a script) starts the server, waits for 127.0.0.1:19530, runs the Graph RAG
scenario against it with the store exactly as shipped, prints one JSON line and kills the server's
process group. Nothing outlives the test: the server is killed by the worker in a `finally`; should the
worker die, the kernel kills the server (parent-death signal; and, in a PID namespace, the namespace ends
with its first process); should the test process die, `unshare` gets SIGKILL (parent-death signal) and
takes its child and the namespace with it; on a timeout the test kills the whole process group.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: What the test needs installed: Milvus server 2.3.5 standalone, as a Python package.
MILVUS_REQUIREMENT = "milvus==2.3.5"
MILVUS_PORT = 19530
HEALTH_PORT = 9091  # /healthz
RESULT_MARKER = "MILVUS_WORKER_RESULT "
#: Variables that would send the worker's gRPC/HTTP traffic to a proxy outside the namespace.
PROXY_VARIABLES = ("http_proxy", "https_proxy", "grpc_proxy", "all_proxy", "no_proxy")

_UNSHARE_PID_NS = ["unshare", "--net", "--pid", "--mount-proc", "--fork", "--kill-child"]
_UNSHARE_NET_ONLY = ["unshare", "--net", "--fork", "--kill-child"]


# the test process side --------------------------------------------------------------------------
def die_with_parent() -> list[str]:
    """A command prefix that makes the command get SIGKILL when the thread that started it dies
    (`setpriv --pdeathsig`, util-linux; kept across exec). Empty where setpriv lacks the option."""
    global _pdeathsig_prefix
    if _pdeathsig_prefix is None:
        _pdeathsig_prefix = []
        if shutil.which("setpriv"):
            probe = subprocess.run(["setpriv", "--pdeathsig", "KILL", "true"], check=False, capture_output=True)
            if probe.returncode == 0:
                _pdeathsig_prefix = ["setpriv", "--pdeathsig", "KILL"]
    return _pdeathsig_prefix


_pdeathsig_prefix: list[str] | None = None


def _without_proxies(env: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if env is None else env)
    for name in PROXY_VARIABLES:
        env.pop(name, None)
        env.pop(name.upper(), None)
    env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


def why_no_server() -> str | None:
    """None if a Milvus server can be run here in a private network namespace; else the reason why not."""
    if not sys.platform.startswith("linux"):
        return f"a private network namespace needs Linux; this is {sys.platform}"
    if importlib.util.find_spec("milvus") is None:
        return f"the Milvus server package is not installed (pip install '{MILVUS_REQUIREMENT}')"
    for tool, package in (("unshare", "util-linux"), ("ip", "iproute2"), ("sh", "a POSIX shell")):
        if shutil.which(tool) is None:
            return f"`{tool}` ({package}) is not on PATH: a private network namespace cannot be set up"
    if namespace_command() is None:
        return _namespace_error
    return None


_namespace_error = ""
_namespace_cmd: list[str] | None = None
_namespace_probed = False


def namespace_command() -> list[str] | None:
    """The `unshare` command line that works here (with a PID namespace if possible), or None."""
    global _namespace_cmd, _namespace_error, _namespace_probed
    if _namespace_probed:
        return _namespace_cmd
    _namespace_probed = True
    errors = []
    for cmd in (_UNSHARE_PID_NS, _UNSHARE_NET_ONLY):
        try:
            probe = subprocess.run(
                [*cmd, "sh", "-c", "ip link set lo up && ip -o addr show dev lo"], check=False,
                capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            errors.append(f"`{' '.join(cmd)}`: {exc}")
            continue
        if probe.returncode == 0 and "127.0.0.1" in probe.stdout:
            _namespace_cmd = cmd
            return cmd
        detail = (probe.stderr.strip() or probe.stdout.strip() or f"exit code {probe.returncode}")[-500:]
        errors.append(f"`{' '.join(cmd)} sh -c 'ip link set lo up'` failed: {detail}")
    _namespace_error = (
        "cannot make a private network namespace for the Milvus server (needs root or CAP_SYS_ADMIN "
        f"and CAP_NET_ADMIN): {'; '.join(errors)}"
    )
    return None


def run_worker(data_dir: Path, prefix: str, timeout: float) -> dict[str, Any]:
    """Run the worker in a fresh private network namespace; return its JSON result.

    Raises AssertionError with the worker's output when it gives no result."""
    cmd = namespace_command()
    assert cmd is not None, _namespace_error
    argv = [*die_with_parent(), *cmd, "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
            sys.executable, "-u", str(Path(__file__).resolve()),
            "--data-dir", str(data_dir), "--prefix", prefix, "--deadline", str(time.time() + timeout - 10)]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_without_proxies(), start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        stdout, stderr = proc.communicate(timeout=30)
        raise AssertionError(
            f"the Milvus worker did not finish in {timeout:.0f} s and was killed.\n"
            f"stdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-5000:]}"
        ) from None
    finally:
        if proc.poll() is None:
            kill_group(proc.pid)
            proc.wait(timeout=30)
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_MARKER)]
    assert lines, (
        f"the Milvus worker gave no result (exit code {proc.returncode}).\n"
        f"stdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-5000:]}"
    )
    result = json.loads(lines[-1][len(RESULT_MARKER):])
    result["worker_exit_code"] = proc.returncode
    result["worker_stderr_tail"] = stderr[-3000:]
    return result


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def processes_running(executable_prefix: str) -> list[int]:
    """PIDs (as this process sees them) whose command starts with `executable_prefix`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
        except OSError:
            continue
        if argv0.startswith(executable_prefix):
            found.append(int(entry.name))
    return found


# the worker side (inside the namespace) ---------------------------------------------------------
class MilvusServerProcess:
    """`milvus run standalone` from the `milvus` package, its data under `data_dir`, in its own process
    group; `stop()` kills the group with SIGKILL."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.proc: subprocess.Popen | None = None
        self.extract_seconds = 0.0
        self.ready_seconds = 0.0

    @property
    def executable(self) -> Path:
        return self.data_dir / "bin" / "milvus"

    def start(self, deadline: float) -> None:
        import milvus  # the server package: config template and compressed binaries

        started = time.monotonic()
        config = milvus.MilvusServerConfig(data_dir=str(self.data_dir))
        config.resolve()  # writes configs/milvus.yaml: data, logs, etcd and rocksmq under data_dir
        milvus._initialize_data_files(str(self.data_dir))  # unpacks bin/ (what MilvusServer.start does)
        self.extract_seconds = time.monotonic() - started
        env = dict(os.environ)
        env.update(
            DEPLOY_MODE="STANDALONE",
            METRICS_PORT=str(HEALTH_PORT),
            MILVUS_RUN_DIR=str(self.data_dir / "run"),
            LD_LIBRARY_PATH=":".join([str(self.executable.parent), os.environ.get("LD_LIBRARY_PATH", "")]),
        )
        logs = self.data_dir / "logs"
        with open(logs / "milvus-stdout.log", "wb") as out, open(logs / "milvus-stderr.log", "wb") as err:
            self.proc = subprocess.Popen(
                [*die_with_parent(), str(self.executable), "run", "standalone"], cwd=self.data_dir, env=env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
            )
        self._wait_until_ready(deadline)
        self.ready_seconds = time.monotonic() - started

    def _wait_until_ready(self, deadline: float) -> None:
        """Until 127.0.0.1:19530 accepts connections and the health check says OK."""
        import urllib.request

        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Milvus server exited with code {self.proc.returncode}:\n{self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", MILVUS_PORT), timeout=1).close()
                with urllib.request.urlopen(f"http://127.0.0.1:{HEALTH_PORT}/healthz", timeout=2) as answer:
                    if b"OK" in answer.read():
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"the Milvus server was not ready on 127.0.0.1:{MILVUS_PORT}:\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        tails = []
        for name in ("milvus-stderr.log", "milvus-stdout.log"):
            path = self.data_dir / "logs" / name
            if path.exists():
                tails.append(f"--- {name}\n" + path.read_text(errors="replace")[-chars:])
        return "\n".join(tails)

    def stop(self) -> None:
        if self.proc is None:
            return
        kill_group(self.proc.pid)  # the server leads its own process group
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass


class Steps:
    """Runs named steps, recording value or error and time; a failed step does not stop the others."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, Any]] = {}

    def __call__(self, name: str, fn: Callable[[], Any]) -> Any:
        started = time.monotonic()
        try:
            value = fn()
            self.results[name] = {"ok": True, "value": _jsonable(value)}
            return value
        except Exception as exc:  # reported to the test, which fails on it
            self.results[name] = {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-4000:],
            }
            return None
        finally:
            self.results[name]["seconds"] = round(time.monotonic() - started, 3)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


# The scenario: shared by the worker (server) and the test (Milvus Lite reference).
QUESTION = "Who taught Leonhard Euler at the University of Basel?"
DELETED_DOC = "bernoulli-daniel"


def ingest(store: Any) -> int:
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter

    from llama_index_graphrag_milvus import GraphRAGTransform
    from llama_index_graphrag_milvus.examples import bernoulli_documents

    pipeline = IngestionPipeline(transformations=[SentenceSplitter(), GraphRAGTransform(store=store)])
    return len(pipeline.run(documents=bernoulli_documents()))


def retrieved(store: Any, question: str, k: int) -> list[list[str]]:
    """[passage id, ref_doc_id] of the retrieved nodes, in order (node ids from the splitter are random;
    passage ids are the store's deterministic row ids)."""
    from llama_index.core.schema import MetadataMode

    from llama_index_graphrag_milvus import GraphRAGRetriever
    from llama_index_graphrag_milvus.schema import passage_id

    hits = GraphRAGRetriever(store=store, similarity_top_k=k).retrieve(question)
    return [
        [passage_id(h.node.ref_doc_id or h.node.node_id, h.node.get_content(MetadataMode.NONE)), h.node.ref_doc_id]
        for h in hits
    ]


def expansion_mismatches(store: Any) -> dict[str, int]:
    """The walk by filtered reads of the statements against the in-memory walk, from every entity and
    from some relations, at degrees 1 and 2."""
    from llama_index_graphrag_milvus.backends.milvus import MilvusAdjacency
    from llama_index_graphrag_milvus.graph import walk
    from llama_index_graphrag_milvus.graph.walk import GraphAdjacency

    cache = store.backend.ready()
    graph = cache.snapshot()
    in_memory, by_reads = GraphAdjacency(graph), MilvusAdjacency(store.collections, float("inf"))
    checks = mismatches = 0
    calls = sum(store.collections.calls.values())
    for degree in (1, 2):
        for position in np.flatnonzero(graph.live_entities).tolist():
            local = set(cache.relations.ids_at(walk.expand_from_entities(in_memory, [position], degree)))
            checks += 1
            mismatches += set(walk.expand_from_entities(by_reads, cache.entities.ids_at([position]), degree).tolist()) != local
        for position in np.flatnonzero(graph.live_relations)[:8].tolist():
            local = set(cache.relations.ids_at(walk.expand_from_relations(in_memory, [position], degree)))
            checks += 1
            mismatches += set(walk.expand_from_relations(by_reads, cache.relations.ids_at([position]), degree).tolist()) != local
    return {"checks": checks, "mismatches": mismatches, "queries": sum(store.collections.calls.values()) - calls}


def milvus_mode_mismatches(store: Any, open_milvus_store: Callable[[], Any]) -> dict[str, int]:
    """A store with adjacency="milvus" on the same collections gathers the same candidates, with the
    same passages, as the in-memory store, from the same seeds."""
    from llama_index_graphrag_milvus import GraphRAGRetriever
    from llama_index_graphrag_milvus.examples import EULER_QUESTION
    from llama_index_graphrag_milvus.backends import Expansion

    other = open_milvus_store()
    checks = mismatches = 0
    try:
        for question in (QUESTION, EULER_QUESTION, "What did Jakob Bernoulli discover?"):
            for degree in (1, 2):
                reference = GraphRAGRetriever(store=store, ranker="similarity", expansion_degree=degree).trace(question)
                hood = other.backend.expand(
                    Expansion(
                        vector=other.embed_model.get_query_embedding(question),
                        entities=[e.id for e in reference.seed_entities],
                        relations=[r.id for r in reference.seed_relations],
                        degree=degree,
                        with_context=False,
                    )
                )
                want = {r.id: sorted(r.passage_ids) for r in reference.candidates}
                got = {r: sorted(hood.passages_of(r)) for r in hood.relation_ids()}
                checks += 1
                mismatches += want != got or not want
    finally:
        other.close()
    return {"checks": checks, "mismatches": mismatches}


def scenario(
    open_store: Callable[[], Any],
    steps: Steps,
    second_process: Callable[[], Any] | None = None,
    open_milvus_store: Callable[[], Any] | None = None,
) -> None:
    """Ingest, retrieve, reopen, delete, reopen: each step's outcome recorded in `steps`."""
    from llama_index_graphrag_milvus.examples import EULER_QUESTION

    store = steps("open", open_store)
    if store is None:
        return
    try:
        steps("ingest", lambda: ingest(store))
        steps("count_after_ingest", store.count)
        steps("cache_after_ingest", store.backend.counts)
        steps("retrieve_question", lambda: retrieved(store, QUESTION, 3))
        steps("retrieve_euler", lambda: retrieved(store, EULER_QUESTION, 4))
        steps("milvus_expansion_mismatches", lambda: expansion_mismatches(store))
        if open_milvus_store is not None:
            steps("milvus_mode_mismatches", lambda: milvus_mode_mismatches(store, open_milvus_store))
        second = steps("reopen_open", open_store)
        if second is not None:
            try:
                steps("reopen_count", second.count)
                steps("reopen_cache", second.backend.counts)
                steps("reopen_retrieve_question", lambda: retrieved(second, QUESTION, 3))
            finally:
                second.close()
        if second_process is not None:
            steps("other_process", second_process)
        watcher = steps("watcher_open", open_store)  # built before `store` deletes: catches up by `sync`
        if watcher is not None:
            steps("watcher_before", watcher.backend.counts)
        steps("delete", lambda: store.delete(DELETED_DOC))
        if watcher is not None:
            try:
                steps("watcher_sync", lambda: {"synced": watcher.sync(), "after": watcher.backend.counts(),
                                               "again": watcher.sync()})
            finally:
                watcher.close()
        steps("count_after_delete", store.count)
        steps("cache_after_delete", store.backend.counts)
        steps("retrieve_euler_after_delete", lambda: retrieved(store, EULER_QUESTION, 4))
        steps("compact", store.compact)
        steps("count_after_compact", store.count)
        third = steps("reopen_after_delete_open", open_store)
        if third is not None:
            try:
                steps("reopen_after_delete_count", third.count)
                steps("reopen_after_delete_cache", third.backend.counts)
            finally:
                third.close()
    finally:
        steps("close", store.close)


_OTHER_PROCESS = """
import json, sys
sys.path.insert(0, {here!r})
from milvus_server import QUESTION, retrieved
from llama_index_graphrag_milvus import MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding
store = MilvusGraphStore(uri={uri!r}, embed_model=HashEmbedding(dim=64), collection_prefix={prefix!r})
try:
    out = {{"count": store.count(), "cache": store.backend.counts(), "retrieve_question": retrieved(store, QUESTION, 3)}}
finally:
    store.close()
print("RESULT " + json.dumps(out))
"""

# another process writes while a store of the worker is open (that store catches up by `sync`)
_OTHER_WRITER = """
import json
from llama_index.core.schema import TextNode
from llama_index_graphrag_milvus import MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding
store = MilvusGraphStore(uri={uri!r}, embed_model=HashEmbedding(dim=64), collection_prefix={prefix!r})
try:
    store.add([TextNode(id_="bob", text="Bob visited Orsk.", metadata={{"triplets": [["Bob", "visited", "Orsk"]]}})])
    out = store.count()
finally:
    store.close()
print("RESULT " + json.dumps(out))
"""


# processes that open one new store at once and write their share of a corpus (disjoint documents,
# shared entities), beside one that writes it all alone
_WRITER = """
import json, sys, time
sys.path.insert(0, {here!r})
from conftest import SpreadEmbedding
from llama_index_graphrag_milvus import GraphRAGTransform, MilvusGraphStore
from llama_index_graphrag_milvus.bench.demo import load_sample
from llama_index_graphrag_milvus.schema import chunked
part, parts, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
start = time.monotonic()
store = MilvusGraphStore(uri={uri!r}, embed_model=SpreadEmbedding(dim=64), collection_prefix=prefix,
                         index_config={{"index_type": "FLAT"}})
nodes = load_sample().nodes[part::parts]
transform = GraphRAGTransform(store=store)
for batch in chunked(nodes, 20):
    transform(list(batch))
store.close()
print("RESULT " + json.dumps({{"passages": len(nodes), "seconds": round(time.monotonic() - start, 2)}}))
"""


def writers_scenario(uri: str, prefix: str, counts: Sequence[int], timeout: float) -> dict[str, Any]:
    """For each number of writers, that many processes write one new store at once; their rows and
    top-10 answers against one writer's."""
    from llama_index.core.ingestion import IngestionPipeline

    from conftest import SpreadEmbedding
    from facts import answers, rows
    from llama_index_graphrag_milvus import GraphRAGTransform, MilvusGraphStore
    from llama_index_graphrag_milvus.bench.demo import load_sample

    code = _WRITER.format(here=str(Path(__file__).resolve().parent), uri=uri)

    def write(parts: int, target: str) -> list[dict[str, Any]]:
        procs = [subprocess.Popen([sys.executable, "-c", code, str(i), str(parts), target], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL) for i in range(parts)]
        out = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=timeout)
            lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
            out.append({"exit": proc.returncode, **(json.loads(lines[-1][7:]) if lines else {"error": stderr[-2000:]})})
        return out

    def opened(target: str) -> Any:
        return MilvusGraphStore(uri=uri, embed_model=SpreadEmbedding(dim=64), collection_prefix=target,
                                index_config={"index_type": "FLAT"})

    def seen(target: str) -> tuple:
        store = opened(target)
        try:
            found = rows(store)
            for kind in ("entities", "relations"):  # which spelling of a name lands first is a race
                for row in found[kind].values():
                    for name in ("name", "subject", "predicate", "object"):
                        row[name] = row[name].casefold() if name in row else None
            return found, answers(store, questions, top_k=10)
        finally:
            store.close()

    questions = [q["question"] for q in load_sample().questions]
    result: dict[str, Any] = {"one": write(1, f"{prefix}_w1")}
    alone = seen(f"{prefix}_w1")
    for n in counts:
        runs = write(n, f"{prefix}_w{n}")
        found = seen(f"{prefix}_w{n}")
        result[str(n)] = {"runs": runs, "same_rows": found[0] == alone[0], "same_answers": found[1] == alone[1],
                          "rows": {k: len(v) for k, v in found[0].items()}}
    piped = {}
    for workers in (1, 2):
        store = opened(f"{prefix}_p{workers}")
        try:
            IngestionPipeline(transformations=[GraphRAGTransform(store=store)]).run(nodes=load_sample().nodes,
                                                                                     num_workers=workers)
        finally:
            store.close()
        piped[workers] = seen(f"{prefix}_p{workers}")
    result["pipeline"] = {"same_rows": piped[2][0] == piped[1][0], "same_answers": piped[2][1] == piped[1][1],
                          "rows": {k: len(v) for k, v in piped[2][0].items()}}
    return result


def worker_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the Graph RAG scenario against a Milvus server.")
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--deadline", required=True, type=float, help="epoch seconds")
    args = parser.parse_args(argv)
    began = time.monotonic()
    interfaces = sorted(name for _, name in socket.if_nameindex())
    result: dict[str, Any] = {"interfaces": interfaces}
    if interfaces != ["lo"]:
        # The server listens on all interfaces: never start it where it could be reached from outside.
        result["server_error"] = f"refused to start the server: not in a private network namespace {interfaces}"
        print(RESULT_MARKER + json.dumps(result), flush=True)
        return 2
    server = MilvusServerProcess(args.data_dir)
    try:
        # Started from the main thread, which lives until the end: the parent-death signal follows the
        # thread that started the process.
        try:
            server.start(deadline=min(args.deadline, time.time() + 120))
        except Exception as exc:
            result["server_error"] = f"{type(exc).__name__}: {exc}"
            return 0
        result["server"] = {
            "pid": server.proc.pid,
            "extract_seconds": round(server.extract_seconds, 2),
            "ready_seconds": round(server.ready_seconds, 2),
        }
        import logging

        logging.getLogger("pymilvus").setLevel(logging.ERROR)  # "failed to get mvccTs" on 2.3.x servers
        from pymilvus import MilvusClient

        from llama_index_graphrag_milvus import MilvusGraphStore
        from llama_index_graphrag_milvus.embeddings import HashEmbedding

        uri = f"http://127.0.0.1:{MILVUS_PORT}"
        probe = MilvusClient(uri=uri)
        result["server"]["version"] = probe.get_server_version()
        result["server"]["connected_seconds"] = round(time.monotonic() - began, 2)
        probe.close()

        def open_store() -> Any:
            return MilvusGraphStore(uri=uri, embed_model=HashEmbedding(dim=64), collection_prefix=args.prefix)

        def open_milvus_store() -> Any:
            return MilvusGraphStore(
                uri=uri, embed_model=HashEmbedding(dim=64), collection_prefix=args.prefix, adjacency="milvus"
            )

        def other_process(template: str = _OTHER_PROCESS) -> Any:
            code = template.format(here=str(Path(__file__).resolve().parent), uri=uri, prefix=args.prefix)
            out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                                 timeout=max(10.0, args.deadline - time.time() - 20), stdin=subprocess.DEVNULL)
            lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
            if out.returncode != 0 or not lines:
                raise RuntimeError(f"exit code {out.returncode}: {out.stderr[-3000:]}")
            return json.loads(lines[-1][len("RESULT "):])

        def snapshot_on_server() -> Any:
            """snapshot=True is refused on a server (no default place); a path is saved on close and
            trusted on the next open."""
            from llama_index_graphrag_milvus import GraphStoreError

            try:
                MilvusGraphStore(uri=uri, embed_model=HashEmbedding(dim=64), collection_prefix=args.prefix, snapshot=True)
                refused = ""
            except GraphStoreError as exc:
                refused = str(exc)
            path = Path(tempfile.mkdtemp(prefix="graphrag-snapshot-")) / "graph.npz"
            first = MilvusGraphStore(uri=uri, embed_model=HashEmbedding(dim=64), collection_prefix=args.prefix, snapshot=str(path))
            counts = first.backend.counts()
            first.close()
            second = MilvusGraphStore(uri=uri, embed_model=HashEmbedding(dim=64), collection_prefix=args.prefix, snapshot=str(path))
            try:
                same = second.backend.counts() == counts == second.count()  # built when first used: from the file
                return {"refused": refused, "saved": path.exists(), "reopened_from_file": second.backend.snapshot_used,
                        "same_counts": same}
            finally:
                second.close()
                shutil.rmtree(path.parent, ignore_errors=True)

        def sync_across_processes() -> Any:
            watcher = open_store()
            try:
                before = watcher.backend.counts()
                written = other_process(_OTHER_WRITER)
                return {"before": before, "written": written, "synced": watcher.sync(),
                        "after": watcher.backend.counts(), "bob": watcher.match_entities("Did Bob visit Orsk?")}
            finally:
                watcher.close()

        steps = Steps()
        scenario(open_store, steps, other_process, open_milvus_store)
        steps("snapshot_on_server", snapshot_on_server)
        steps("sync_across_processes", sync_across_processes)
        steps("writers", lambda: writers_scenario(uri, args.prefix, (2, 4), max(10.0, args.deadline - time.time() - 20)))
        result["steps"] = steps.results
    except Exception as exc:
        result["worker_error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}"
    finally:
        server.stop()
        result["server_exit_code"] = server.proc.returncode if server.proc else None
        if "server_error" in result or "worker_error" in result:
            result["server_log_tail"] = server.log_tail()
        result["worker_seconds"] = round(time.monotonic() - began, 2)
        print(RESULT_MARKER + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(worker_main())
