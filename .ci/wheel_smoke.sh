#!/usr/bin/env bash
# The wheel works outside the checkout: build it from the tracked files, install it with the [local]
# extra into a fresh virtual environment in a temporary directory, and from another temporary folder run
# the offline quickstart (no OPENAI_API_KEY, no download) and `graphrag-milvus demo --help`.
#
#     .ci/wheel_smoke.sh          # or: make wheel-check; PYTHON=python3.12 .ci/wheel_smoke.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/graphrag-wheel-XXXXXX")"
trap 'rm -rf "$work"' EXIT
case "$work/" in "$root"/*) echo "wheel_smoke: the temporary directory $work is inside the checkout" >&2; exit 1 ;; esac
start=$SECONDS

# The tracked files only (as a clean clone has them), so nothing untracked or built before leaks in.
mkdir "$work/src"
(cd "$root" && git ls-files -z | xargs -0 tar -cf - --) | tar -xf - -C "$work/src"

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" "$work/src"
wheel="$(ls "$work"/dist/llama_index_graphrag_milvus-*.whl)"
"$work/venv/bin/python" -m pip install --quiet "$wheel[local]"
echo "wheel_smoke: built and installed $(basename "$wheel") in $((SECONDS - start)) s"

mkdir "$work/run"
cd "$work/run"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
env -u OPENAI_API_KEY -u PYTHONPATH "$work/venv/bin/python" - "$work/venv" <<'EOF'
import sys
from pathlib import Path

import llama_index_graphrag_milvus as package
from llama_index_graphrag_milvus import GraphRAGIndex
from llama_index_graphrag_milvus.examples import bernoulli_documents

where = Path(package.__file__).resolve()
assert where.is_relative_to(Path(sys.argv[1]).resolve()), f"imported from {where}, not the installed wheel"
assert (where.parent / "py.typed").is_file(), "py.typed is not in the wheel"

index = GraphRAGIndex.from_documents(bernoulli_documents())
hits = index.as_retriever(similarity_top_k=2).retrieve("What did Daniel Bernoulli write?")
assert len(hits) == 2 and all(hit.node.get_content() for hit in hits), hits
response = index.as_query_engine().query("Who taught Leonhard Euler?")
assert response.source_nodes and str(response).strip(), response
print("wheel_smoke: quickstart ok:", [hit.node.ref_doc_id for hit in hits])
EOF
env -u PYTHONPATH "$work/venv/bin/graphrag-milvus" demo --help > /dev/null
echo "wheel_smoke: passed in $((SECONDS - start)) s"
