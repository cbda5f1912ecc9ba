"""The package's surface and shape: the public names, the module paths README names, and imports that
point down the data flow (nodes -> transform -> store -> retriever -> nodes), never back up."""

import ast
import importlib
from pathlib import Path

import pytest

import llama_index_graphrag_milvus as package

PACKAGE = Path(package.__file__).resolve().parent

PUBLIC = [
    "CooccurrenceExtractor", "Explanation", "GraphRAGIndex", "GraphRAGRetriever", "GraphRAGSubRetriever",
    "GraphRAGTransform", "GraphStoreError", "LLMTripletExtractor", "MilvusGraphStore", "MilvusPropertyGraphStore",
    "Retrieval", "ScoredRelation", "Triplet",
]

#: Module paths README names, with a name each must give.
README_PATHS = {
    "llama_index_graphrag_milvus.ranking": ["FusedRanker", "HopRanker", "LLMRanker", "PPRRanker", "ChainRanker",
                                             "SimilarityRanker", "RankTask", "Ranking", "Ranker"],
    "llama_index_graphrag_milvus.embeddings": ["local_embed_model", "HashEmbedding"],
    "llama_index_graphrag_milvus.events": ["GraphRAGRerankEvent", "GraphRAGExpansionEvent"],
    "llama_index_graphrag_milvus.examples": ["bernoulli_documents"],
}

#: Each subpackage, and the parts of the package it may import (besides itself, `errors` and `schema`).
MAY_IMPORT = {
    "graph": set(),
    "milvus": {"graph"},
    "backends": {"graph", "milvus"},
    "llm": set(),
    "ingest": {"llm", "milvus", "graph", "backends"},
    "ranking": {"backends", "graph", "llm", "store"},  # `store` only as a type
    "explain": {"milvus", "store"},  # `store` only as a type
    "property_graph": {"milvus", "store", "retriever"},
}


def test_the_public_names_are_exactly_these():
    assert sorted(package.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(package, name) is not None


@pytest.mark.parametrize("module, names", README_PATHS.items())
def test_the_module_paths_readme_names_still_import(module, names):
    imported = importlib.import_module(module)
    for name in names:
        assert hasattr(imported, name), f"{module} has no {name}"


def _imports(path: Path):
    """The package's modules a file imports (anywhere in it, type-only imports included)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("llama_index_graphrag_milvus"):
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("llama_index_graphrag_milvus"))


@pytest.mark.parametrize("subpackage", MAY_IMPORT)
def test_a_subpackage_imports_only_what_lies_below_it(subpackage):
    allowed = MAY_IMPORT[subpackage] | {subpackage, "errors", "schema"}
    for path in (PACKAGE / subpackage).rglob("*.py"):
        for module in _imports(path):
            parts = module.split(".")
            assert len(parts) > 1 and parts[1] in allowed, f"{path.relative_to(PACKAGE)} imports {module}"


def test_every_subpackage_says_what_it_holds_and_what_it_may_import():
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "May import" in doc, f"{init.relative_to(PACKAGE)} does not say what it may import"


def test_at_most_twelve_modules_at_the_top_level():
    assert len([p for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]) <= 12
