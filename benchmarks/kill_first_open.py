"""SIGKILL a process while it opens a new store (a prefix's first open), then open the same store again:
every reopen must succeed (issue 12, point 4).

    python benchmarks/kill_first_open.py [DIR]
"""
import random, signal, subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
PY = sys.executable
code = '''
import sys
from llama_index_graphrag_milvus import MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding
MilvusGraphStore(uri=sys.argv[1], embed_model=HashEmbedding(dim=16), collection_prefix=sys.argv[2])
print("opened", flush=True)
'''
DIR = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="kill-")
fails = 0; results = []
for i in range(10):
    uri, prefix = f"{DIR}/k{i}.db", f"p{i}"
    p = subprocess.Popen([PY, "-c", code, uri, prefix], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    time.sleep(random.uniform(1.0, 4.0))
    p.send_signal(signal.SIGKILL); p.wait()
    r = subprocess.run([PY, "-c", code, uri, prefix], capture_output=True, text=True, timeout=120)
    ok = "opened" in r.stdout
    results.append((i, ok, r.stderr.strip().splitlines()[-1][:150] if not ok and r.stderr.strip() else ""))
    fails += not ok
for r in results: print(r)
print("failures", fails)
