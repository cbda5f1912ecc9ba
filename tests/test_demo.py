"""The demo, offline on the bundled MuSiQue sample with the bundled MiniLM: Graph RAG returns a gold
passage that plain RAG misses, and the recall of both is printed."""

from __future__ import annotations

import re

from llama_index_graphrag_milvus.bench import demo


def test_the_sample_is_package_data():
    sample = demo.load_sample()
    assert 150 <= len(sample.nodes) <= 250 and 15 <= len(sample.questions) <= 25
    ids = {n.node_id for n in sample.nodes}
    assert all(set(q["gold_ids"]) <= ids for q in sample.questions)
    assert all(n.metadata["triplets"] for n in sample.nodes)
    assert any(q["id"] == demo.SHOWCASE for q in sample.questions)


def test_the_demo_shows_graph_rag_finding_a_gold_passage_plain_rag_misses(minilm, tmp_path, capsys):
    result = demo.main(["--uri", str(tmp_path / "demo.db"), "--prefix", "sample"], embed_model=minilm)
    out = capsys.readouterr().out
    assert "(prefix 'sample')" in out and "--prefix sample " in out  # written there, and said so

    shown = result.showcase
    assert shown is not None and shown.question["id"] == demo.SHOWCASE
    gold = set(shown.question["gold_ids"])
    plain, graph = shown.ids("plain"), shown.ids("graph")
    assert len(plain) == len(graph) == demo.TOP_K
    assert gold & set(graph) - set(plain), "a gold passage in Graph RAG's top k and not in plain RAG's"
    assert shown.won()

    assert "cosine similarity" in out and "PageRank, chains, hop and topic, fused" in out and "different scales" in out
    # the chain starts from a relation touching what the question names
    chain = out.split("How Graph RAG got there", 1)[1]
    first = re.search(r"1\. (.*?) —\[.*?\]→ (.*?)   \(stated in", chain)
    assert first and "grand model" in (first.group(1) + first.group(2)).lower()

    assert re.search(r"^  plain RAG +\d\.\d{3}  \d\.\d{3}$", out, re.M)
    assert re.search(r"^  Graph RAG +\d\.\d{3}  \d\.\d{3}$", out, re.M)
    assert "Reading guide" in out
    assert result.recall["graph"][5] >= result.recall["plain"][5]
