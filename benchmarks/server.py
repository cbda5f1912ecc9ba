"""A real Milvus server (2.3.5 standalone, the `milvus` package) for benchmarks, run as the tests run it:
only inside a private network namespace (it listens on all interfaces), killed by process group when
done. `tests/milvus_server.py` holds the launcher; this module re-runs a benchmark's own command inside a
namespace and starts the server there.

    if not inside():                      # in the benchmark's main()
        sys.exit(rerun_inside(sys.argv))  # the same command, in a fresh namespace
    with server(data_dir) as uri:         # inside: a fresh server, data under data_dir
        ...
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import milvus_server  # noqa: E402  (tests/milvus_server.py)

_MARK = "GRAPHRAG_BENCH_IN_NAMESPACE"


def inside() -> bool:
    """Whether this process runs in the private namespace `rerun_inside` made."""
    return os.environ.get(_MARK) == "1"


def rerun_inside(argv: List[str]) -> int:
    """Run `python argv...` in a fresh private network namespace (loopback up); its exit status."""
    reason = milvus_server.why_no_server()
    if reason:
        raise SystemExit(f"no Milvus server here: {reason}")
    command = [*milvus_server.die_with_parent(), *milvus_server.namespace_command(), "sh", "-c",
               'ip link set lo up && exec "$@"', "sh", sys.executable, "-u", *argv]
    env = {**milvus_server._without_proxies(), _MARK: "1"}
    return subprocess.run(command, env=env, stdin=subprocess.DEVNULL, check=False).returncode


@contextmanager
def server(data_dir: str | None = None) -> Iterator[str]:
    """A fresh Milvus server with its data under `data_dir` (a temporary one by default); its URI."""
    path = Path(data_dir or tempfile.mkdtemp(prefix="graphrag-bench-server-"))
    process = milvus_server.MilvusServerProcess(path)
    try:
        process.start(time.time() + 600)
        print(f"Milvus 2.3.5 standalone ready in {process.ready_seconds:.1f} s", file=sys.stderr, flush=True)
        yield f"http://127.0.0.1:{milvus_server.MILVUS_PORT}"
    finally:
        process.stop()
        if data_dir is None:
            shutil.rmtree(path, ignore_errors=True)
