"""`graphrag-milvus eval`: progress on a terminal only, no gRPC noise, results where --out says or in
the untracked cache, --prefix honoured."""

import io
import json
import subprocess
import sys

import pytest

from llama_index_graphrag_milvus.bench.benchmark import run_benchmark
from llama_index_graphrag_milvus.embeddings import HashEmbedding

from test_retrieval_modes import write_musique_like


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bars_on_a_terminal_and_none_when_piped(tmp_path, monkeypatch):
    write_musique_like(tmp_path)
    run = dict(embed_model=HashEmbedding(dim=64), cache_dir=tmp_path / "cache", log=lambda s: None, chart=False)

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    report = run_benchmark(tmp_path, tmp_path / "a.json", **run)
    shown = terminal.getvalue()
    assert "Ingesting (embedding)" in shown and "Embedding the questions" in shown
    for method in report["methods"]:  # the questions of each method
        assert f"{method}: 100%" in shown and "2/2" in shown
    assert f"{report['counts']['entities'] + report['counts']['relations'] + 5}/" in shown  # total known ahead

    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    run_benchmark(tmp_path, tmp_path / "b.json", **run)
    assert piped.getvalue() == ""


def test_results_default_to_the_untracked_cache_and_the_prefix_is_used(tmp_path):
    (tmp_path / "tiny").mkdir()
    write_musique_like(tmp_path / "tiny")
    cache = tmp_path / "cache"
    report = run_benchmark(
        tmp_path / "tiny", embed_model=HashEmbedding(dim=64), cache_dir=cache, log=lambda s: None, prefix="mine"
    )
    out = cache / "results" / "tiny.json"
    assert json.loads(out.read_text())["questions"] == report["questions"] == 2
    assert out.with_suffix(".png").exists()

    from pymilvus import MilvusClient

    client = MilvusClient(str(cache / "tiny.db"))
    try:
        names = client.list_collections()
    finally:
        client.close()
    assert names and all(name.startswith("mine") for name in names)


def test_the_eval_command_piped_prints_results_and_no_progress_or_grpc_noise(tmp_path):
    data = tmp_path / "tiny"
    data.mkdir()
    write_musique_like(data)
    result = subprocess.run(  # the real command, as `make bench` runs it: MiniLM, offline
        [sys.executable, "-m", "llama_index_graphrag_milvus.cli", "eval", "--data", str(data), "--no-chart"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| graphrag |" in result.stdout
    out = tmp_path / ".cache" / "graphrag-milvus" / "results" / "tiny.json"
    assert f"results: {out.relative_to(tmp_path)}" in result.stdout
    assert json.loads(out.read_text())["embed_model"] == "all-MiniLM-L6-v2"
    assert not out.with_suffix(".png").exists()  # --no-chart
    for noise in ("GOAWAY", "too_many_pings", "Traceback", "Ingesting", "%|"):
        assert noise not in result.stderr, result.stderr[-2000:]


GOAWAY_SCRIPT = """
import time
from concurrent import futures

import llama_index_graphrag_milvus  # first: it sets gRPC's log level before grpc is imported
import grpc

server = grpc.server(futures.ThreadPoolExecutor(1))
port = server.add_insecure_port("localhost:0")
server.start()
# a client that pings more often than the server allows, as pymilvus does against Milvus Lite
channel = grpc.insecure_channel(
    f"localhost:{port}",
    options=[("grpc.keepalive_time_ms", 100), ("grpc.keepalive_permit_without_calls", 1),
             ("grpc.http2.max_pings_without_data", 0)],
)
grpc.channel_ready_future(channel).result(timeout=10)
states = []
channel.subscribe(states.append)
deadline = time.monotonic() + 20
while time.monotonic() < deadline and not any(s != grpc.ChannelConnectivity.READY for s in states[1:]):
    time.sleep(0.1)  # until the server's GOAWAY closes the connection
print("done" if len(states) > 1 else "no GOAWAY")
"""


def test_grpc_goaway_lines_are_silenced():
    # GRPC_VERBOSITY=ERROR would still print this one (an ERROR of the C core); the package sets NONE
    import os

    environ = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}
    result = subprocess.run(
        [sys.executable, "-c", GOAWAY_SCRIPT], capture_output=True, text=True, timeout=120, env=environ
    )
    assert result.stdout.strip() == "done"  # the server did send its GOAWAY, closing the connection
    assert "GOAWAY" not in result.stderr and "too_many_pings" not in result.stderr, result.stderr[-2000:]


def test_eval_on_several_datasets_writes_one_summary_table(tmp_path, monkeypatch):
    from llama_index_graphrag_milvus import cli

    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        write_musique_like(tmp_path / name)
    monkeypatch.chdir(tmp_path)  # the default store: .cache/graphrag-milvus/DATASET.db under here
    cli.main(["eval", "--data", str(tmp_path / "one"), str(tmp_path / "two"), "--no-chart", "--out", "out"])
    assert json.loads((tmp_path / "out" / "one.json").read_text())["questions"] == 2
    assert json.loads((tmp_path / "out" / "two.json").read_text())["questions"] == 2
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "one" in summary and "two" in summary and "graphrag" in summary


def test_eval_on_several_datasets_refuses_one_uri_for_all(tmp_path, capsys):
    from llama_index_graphrag_milvus import cli

    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        write_musique_like(tmp_path / name)
    with pytest.raises(SystemExit):
        cli.main(["eval", "--data", str(tmp_path / "one"), str(tmp_path / "two"), "--uri", str(tmp_path / "x.db")])
    assert "each dataset needs its own: leave --uri out" in capsys.readouterr().err
    assert not (tmp_path / "x.db").exists()  # refused before anything was written
