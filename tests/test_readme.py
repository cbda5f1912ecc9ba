"""The README runs as written: every ```python block whose first line is `# runs offline` is executed.

Each marked block runs on its own (a fresh namespace, a fresh temporary working directory, so its
./graphrag_milvus.db is new), with `HashEmbedding(dim=64)` as `Settings.embed_model` so that no model is
loaded, no `Settings.llm` and no OPENAI_API_KEY: a marked block must run offline as a reader would
paste it. Blocks without the marker (those needing an API key or a server) are not run.
"""

from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from llama_index.core import Settings

from llama_index_graphrag_milvus import MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = "# runs offline"


def runnable_blocks(text: str) -> List[Tuple[str, int, str]]:
    """(section heading, first line number, code) of each marked ```python block."""
    blocks, heading = [], "top"
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#") and not line.startswith("#!"):
            heading = line.lstrip("#").strip()
        if line.strip() == "```python":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            body = lines[i + 1 : end]
            if body and body[0].strip() == MARKER:
                blocks.append((heading, i + 2, "\n".join(body)))
            i = end
        i += 1
    return blocks


BLOCKS = runnable_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_runnable_blocks():
    assert BLOCKS, f"no ```python block of README.md starts with {MARKER!r}"


def _close_stores(namespace: Dict[str, Any]) -> None:
    for value in namespace.values():
        store = value if isinstance(value, MilvusGraphStore) else getattr(value, "store", None)
        if isinstance(store, MilvusGraphStore):
            store.close()


@pytest.mark.parametrize(
    "line, code", [(line, code) for _, line, code in BLOCKS], ids=[f"{h} (line {n})" for h, n, _ in BLOCKS]
)
def test_readme_block_runs_offline(line, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    saved = Settings._embed_model, Settings._llm
    Settings.embed_model, Settings._llm = HashEmbedding(dim=64), None
    namespace: Dict[str, Any] = {"__name__": "__readme__"}
    try:
        # padded so that a traceback names the README's own line numbers
        exec(compile("\n" * (line - 1) + code, str(README), "exec"), namespace)
    finally:
        _close_stores(namespace)
        Settings._embed_model, Settings._llm = saved
