"""SIGKILL a process while it opens a new store (a prefix's first open), then open the same store again:
every reopen must succeed (issue 12, point 4).

    python benchmarks/kill_first_open.py [DIR] [TRIES]
"""

import random
import signal
import subprocess
import sys
import tempfile
import time

OPEN = """
import sys
from llama_index_graphrag_milvus import MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding
MilvusGraphStore(uri=sys.argv[1], embed_model=HashEmbedding(dim=16), collection_prefix=sys.argv[2])
print("opened", flush=True)
"""


def attempt(directory: str, i: int) -> tuple:
    """Kill a first open after 1-4 s; then whether a new process opens the same store, and its error."""
    uri, prefix = f"{directory}/k{i}.db", f"p{i}"
    victim = subprocess.Popen([sys.executable, "-c", OPEN, uri, prefix], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    time.sleep(random.uniform(1.0, 4.0))
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    again = subprocess.run([sys.executable, "-c", OPEN, uri, prefix], capture_output=True, text=True, timeout=120)
    ok = "opened" in again.stdout
    return ok, "" if ok else (again.stderr.strip().splitlines() or [""])[-1][:150]


def main() -> None:
    directory = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="kill-")
    tries = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    results = [attempt(directory, i) for i in range(tries)]
    for i, (ok, error) in enumerate(results):
        print(i, "reopened" if ok else f"FAILED: {error}")
    print("failures", sum(not ok for ok, _ in results), "of", tries)


if __name__ == "__main__":
    main()
