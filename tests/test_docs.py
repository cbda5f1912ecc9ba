"""README.md and every page under docs/ run as written, and the API reference covers the public names.

Every ```python block starts with `# runs offline` (it runs) or `# skip: <reason>` (it needs a Milvus
server or an API key; the reason is shown). The marked blocks of one file run in order, in one namespace
and one fresh temporary working directory (so a page may build on its earlier blocks, and its
./graphrag_milvus.db is new), with nothing in `Settings`, no OPENAI_API_KEY, and `HashEmbedding(dim=64)` as the bundled offline
embedder, so that no model is loaded: a block runs offline
as a reader would paste it.
"""

import importlib
import re
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from llama_index.core import Settings

import llama_index_graphrag_milvus.embeddings as embeddings
from llama_index_graphrag_milvus import MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUNS, SKIP = "# runs offline", "# skip:"
#: The modules whose `__all__` the API reference must cover, name by name.
PUBLIC = ["llama_index_graphrag_milvus", "llama_index_graphrag_milvus.ranking", "llama_index_graphrag_milvus.embeddings"]


def python_blocks(text: str) -> List[Tuple[int, str]]:
    """(first line number, code) of each ```python block."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append((i + 2, "\n".join(lines[i + 1 : end])))
            i = end
        i += 1
    return blocks


BLOCKS = {page: python_blocks(page.read_text(encoding="utf-8")) for page in PAGES}
RUNNABLE = {page: [(n, code) for n, code in blocks if code.startswith(RUNS)] for page, blocks in BLOCKS.items()}


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_readme_has_runnable_blocks():
    assert RUNNABLE[ROOT / "README.md"], f"no ```python block of README.md starts with {RUNS!r}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_block_says_whether_it_runs(page):
    unmarked = [n for n, code in BLOCKS[page] if not code.startswith(RUNS) and not re.match(r"# skip: \S", code)]
    assert not unmarked, f"{_name(page)}: blocks at lines {unmarked} start with neither {RUNS!r} nor '# skip: <reason>'"


def _close_stores(namespace: Dict[str, Any]) -> None:
    for value in namespace.values():
        store = value if isinstance(value, MilvusGraphStore) else getattr(value, "store", None)
        if isinstance(store, MilvusGraphStore):
            store.close()


@pytest.mark.parametrize("page", [p for p in PAGES if RUNNABLE[p]], ids=_name)
def test_the_blocks_run_offline(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(embeddings, "local_embed_model", lambda **_: HashEmbedding(dim=64))
    saved = Settings._embed_model, Settings._llm
    Settings._embed_model, Settings._llm = None, None  # as a reader's fresh process: nothing set
    namespace: Dict[str, Any] = {"__name__": "__docs__"}
    try:
        for line, code in RUNNABLE[page]:
            # padded so that a traceback names the page's own line numbers
            exec(compile("\n" * (line - 1) + code, str(page), "exec"), namespace)
    finally:
        _close_stores(namespace)
        Settings._embed_model, Settings._llm = saved


def test_the_api_reference_covers_every_public_name():
    reference = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: ([\w.]+)", reference, flags=re.M))
    missing = [
        f"{module}.{name}"
        for module in PUBLIC
        for name in importlib.import_module(module).__all__
        if f"{module}.{name}" not in documented
    ]
    assert not missing, f"docs/api.md has no '::: <name>' entry for {missing}"
