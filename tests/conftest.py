"""Shared fixtures: the real offline embedder, a fast hash embedder, a scripted LLM, fresh stores."""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Callable, List, Optional, Sequence

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.pop("OPENAI_API_KEY", None)

import llama_index.core
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback

from llama_index_graphrag_milvus import MilvusGraphStore
from llama_index_graphrag_milvus.embeddings import HashEmbedding, local_embed_model

# The OpenAI client loads its model's tokenizer itself, outside llama-index-core's bundled tiktoken cache,
# and tiktoken would then download it: point tiktoken at that cache (it holds gpt-3.5-turbo's cl100k_base),
# so that no test depends on another having loaded the tokenizer first.
os.environ.setdefault("TIKTOKEN_CACHE_DIR", os.path.join(os.path.dirname(llama_index.core.__file__), "_static", "tiktoken_cache"))


class ScriptedLLM(CustomLLM):
    """A fake LLM: `script(prompt) -> answer`. Records every prompt it was given."""

    script: Callable[[str], str]
    prompts: List[str] = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=self.script(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)


def offered_lines(prompt: str) -> List[str]:
    """The `[n] text` candidate lines of the real task in a rerank prompt (after the example)."""
    task = prompt.split("Now the real task.", 1)[-1]
    return re.findall(r"^\[\d+\] .*$", task, flags=re.M)


def graph_llm(mentions: Sequence[str], chosen: Sequence[str], answer: str = "fluid dynamics") -> ScriptedLLM:
    """An LLM that names `mentions` for NER, picks the offered lines containing each of `chosen` for
    rerank (in that order), and otherwise answers `answer`."""

    def script(prompt: str) -> str:
        if '"named_entities"' in prompt:
            return json.dumps({"named_entities": list(mentions)})
        if '"useful_relationships"' in prompt:
            lines = offered_lines(prompt)
            picked = [line for want in chosen for line in lines if want.lower() in line.lower()]
            return json.dumps({"thought_process": "follow the chain", "useful_relationships": picked})
        return answer

    return ScriptedLLM(script=script, prompts=[])


@pytest.fixture(scope="session")
def minilm():
    return local_embed_model()


@pytest.fixture
def hash_embed():
    return HashEmbedding(dim=64)


class SpreadEmbedding(HashEmbedding):
    """A fast deterministic embedding whose cosines do not tie: the sum of a seeded Gaussian vector per
    word and per pair of neighbouring words (HashEmbedding's ±1 buckets make many exact ties, which a
    vector search may break either way)."""

    @classmethod
    def class_name(cls) -> str:
        return "SpreadEmbedding"

    def _vector(self, text: str) -> List[float]:
        words = re.findall(r"\w+", text.casefold()) or [""]
        vector = np.zeros(self.dim)
        for token in words + [f"{a} {b}" for a, b in zip(words, words[1:])]:
            seed = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
            vector += np.random.default_rng(seed).standard_normal(self.dim)
        return (vector / np.linalg.norm(vector)).tolist()


@pytest.fixture
def spread_embed():
    return SpreadEmbedding(dim=64)


@pytest.fixture
def make_store(tmp_path, hash_embed):
    """Open stores on a fresh Milvus Lite path; all are closed after the test."""
    opened: List[MilvusGraphStore] = []

    def make(embed_model: Optional[Any] = None, uri: Optional[str] = None, **kwargs: Any) -> MilvusGraphStore:
        store = MilvusGraphStore(
            uri=uri or str(tmp_path / "graph.db"), embed_model=embed_model or hash_embed, **kwargs
        )
        opened.append(store)
        return store

    yield make
    for store in opened:
        try:
            store.close()
        except Exception:
            pass


# the slowest files first, so that with `pytest -n 3 --dist loadfile` (make test) they overlap the rest
# instead of running alone at the end: one worker mostly waits for a real Milvus server to start, the
# two others share the cores
_FIRST = ("test_milvus_server.py", "test_notebook.py", "test_demo.py", "test_cli.py")


def pytest_collection_modifyitems(config, items):
    def rank(item):
        name = item.path.name
        return _FIRST.index(name) if name in _FIRST else len(_FIRST)

    items.sort(key=rank)
