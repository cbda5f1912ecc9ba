"""The walkthrough notebook runs offline from top to bottom, and is stored with its outputs."""

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the dev extra: pip install -e '.[dev]'")
nbclient = pytest.importorskip("nbclient", reason="the dev extra: pip install -e '.[dev]'")
pytest.importorskip("ipykernel", reason="the dev extra: pip install -e '.[dev]'")

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "graph_rag_with_milvus.ipynb"


def outputs(notebook) -> str:
    """All the text the code cells printed or returned."""
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                texts.append(output.text)
            elif output.output_type in ("execute_result", "display_data"):
                texts.append(output.data.get("text/plain", ""))
            elif output.output_type == "error":
                texts.append(f"{output.ename}: {output.evalue}")
    return "\n".join(texts)


def images(notebook) -> int:
    return sum(
        "image/png" in output.get("data", {})
        for cell in notebook.cells
        for output in cell.get("outputs", [])
    )


def test_the_stored_notebook_carries_its_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell.execution_count for cell in code)
    assert images(notebook) == 1 and "Graph RAG, top 2:" in outputs(notebook)


def test_the_notebook_runs_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the LLM cell must skip itself
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebook's Milvus Lite database goes here
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # "python3" is ipykernel's own kernel: jupyter_client starts it with this interpreter (the venv's)
    client = nbclient.NotebookClient(
        notebook, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(tmp_path)}}
    )

    client.execute()  # raises CellExecutionError, with the cell and its traceback, if a cell fails

    text = outputs(notebook)
    for expected in (
        "nodes ingested",
        "Graph RAG, top 2:",
        "Plain vector RAG, top 2:",
        "Seed entities",
        "Chosen by the graph rerank",
        "via ",
        "GraphRAGRerankEvent",
        "OPENAI_API_KEY is not set",
    ):
        assert expected in text, expected
    assert images(notebook) == 1  # explain() drawn inline
    assert "Traceback" not in text
    left = [p.name for p in tmp_path.glob("graphrag_notebook_*")]
    assert left == [], "the notebook leaves its temporary Milvus Lite database behind"
    assert os.environ.get("OPENAI_API_KEY") is None
