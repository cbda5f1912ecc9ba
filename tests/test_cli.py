"""`graphrag-milvus`: ingest with a progress bar, query with the relation chains, errors as one line."""

import json
import subprocess
import sys

import pytest

from llama_index_graphrag_milvus.cli import main
from llama_index_graphrag_milvus.examples import EULER_QUESTION, bernoulli_documents


@pytest.fixture
def passages(tmp_path):
    path = tmp_path / "bernoulli.jsonl"
    rows = [{"id": d.id_, "text": d.text, "triplets": d.metadata["triplets"]} for d in bernoulli_documents()]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


def test_ingest_then_query_prints_passages_with_their_relation_chains(passages, tmp_path, capsys):
    uri = str(tmp_path / "cli.db")  # the default embedder: the bundled MiniLM, offline

    main(["ingest", str(passages), "--uri", uri, "--prefix", "cli"])
    out, err = capsys.readouterr()
    # 22 given triplets, and 7 links of names sharing a sentence (the rows have no title to link)
    assert json.loads(out) == {"entities": 24, "relations": 29, "passages": 5}
    assert "Ingesting" in err and "5/5" in err  # the progress bar, over passages

    main(["query", EULER_QUESTION, "--uri", uri, "--prefix", "cli", "--top-k", "2"])
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("1. [euler] ") and lines[0].split()[2][0].isdigit()
    assert "     via Johann Bernoulli —[taught]→ Leonhard Euler" in lines
    assert any(line.startswith("2. [bernoulli-johann] ") for line in lines)
    assert sum(line.startswith("     via ") for line in lines) >= 2


def test_ingest_with_no_text_links_writes_the_given_triplets_alone(passages, tmp_path, capsys):
    main(["ingest", str(passages), "--uri", str(tmp_path / "alone.db"), "--no-text-links"])
    out, _ = capsys.readouterr()
    assert json.loads(out) == {"entities": 21, "relations": 22, "passages": 5}  # the 22 given triplets


def run_cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "llama_index_graphrag_milvus.cli", *args],
        capture_output=True, text=True, cwd=cwd, timeout=300,
    )


def test_a_jsonl_line_that_is_not_json_is_one_error_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\nnot json\n', encoding="utf-8")

    result = run_cli("ingest", str(bad), "--uri", str(tmp_path / "bad.db"), cwd=tmp_path)

    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"graphrag-milvus ingest: error: {bad}:2: not JSON (Expecting value)"]
    assert result.stdout == "" and not (tmp_path / "bad.db").exists()


def test_querying_a_database_that_does_not_exist_says_so(tmp_path):
    result = run_cli("query", "Who taught Euler?", "--uri", "missing.db", cwd=tmp_path)

    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("graphrag-milvus query: error: no Milvus Lite database at 'missing.db'")
    assert not (tmp_path / "missing.db").exists()  # not created by mistake
