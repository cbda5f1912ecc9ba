"""Every benchmark module imports: the benchmarks reach into the package (the scale benchmark builds rows
with `ingest/rows.py` and walks the in-memory adjacency), and a refactor that moves what they import must not leave them broken unnoticed."""

import importlib
import pkgutil

import pytest

import benchmarks

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(benchmarks.__path__, "benchmarks.")
    if not m.name.endswith("__main__")
)


MAINTAINED = {
    "benchmarks.cost",
    "benchmarks.cv",
    "benchmarks.devsets",
    "benchmarks.identity",
    "benchmarks.llm_outage",
    "benchmarks.llm_trust",
    "benchmarks.milvus_mode",
    "benchmarks.pgi",
    "benchmarks.refresh",
    "benchmarks.server",
    "benchmarks.sync",
}


def test_the_benchmarks_are_found():
    assert MAINTAINED | {
        "benchmarks.scale.corpus",
        "benchmarks.scale.reads",
        "benchmarks.scale.writes",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_a_benchmark_module_imports(name):
    importlib.import_module(name)


def test_importing_the_benchmarks_leaves_the_package_logging_alone():
    """A benchmark that quiets the package does it in its command, not on import: importing it inside a
    test run must not swallow the warnings other tests read."""
    import logging

    for name in MODULES:
        importlib.import_module(name)
    assert logging.getLogger("llama_index_graphrag_milvus").level == logging.NOTSET
