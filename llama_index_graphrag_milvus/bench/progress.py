"""Progress on a terminal, nothing when piped: the benchmark's bars, and an embedder that counts on one."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from tqdm import tqdm


def local_model(progress: Optional[bool]) -> BaseEmbedding:
    from llama_index_graphrag_milvus.embeddings import local_embed_model

    with _model_loading_bar(is_shown(progress)):
        return local_embed_model()


def is_shown(progress: Optional[bool]) -> bool:
    """Whether to show progress: as asked, else (None) when stderr is a terminal, so not when piped."""
    return sys.stderr.isatty() if progress is None else progress


def progress_bar(progress: Optional[bool], iterable: Any = None, **kwargs: Any) -> tqdm:
    """A progress bar on stderr, shown as `is_shown` says; it leaves no line behind when hidden."""
    return tqdm(iterable, disable=not is_shown(progress), file=sys.stderr, **kwargs)


@contextmanager
def _model_loading_bar(shown: bool) -> Iterator[None]:
    """transformers' "Loading weights" bar, hidden when ours are (piped output)."""
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:  # no `local` extra: local_embed_model says what to install
        yield
        return
    enabled = transformers_logging.is_progress_bar_enabled()
    if enabled and not shown:
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled and not shown:
            transformers_logging.enable_progress_bar()


class Counting(BaseEmbedding):
    """Passes through `inner`'s embeddings, counting the texts embedded on `bar` (when one is set)."""

    _inner: BaseEmbedding = PrivateAttr()
    _bar: Any = PrivateAttr(default=None)

    def __init__(self, inner: BaseEmbedding) -> None:
        super().__init__(model_name=inner.model_name, embed_batch_size=inner.embed_batch_size)
        self._inner = inner

    def count_on(self, bar: Any) -> None:
        """Count the texts embedded from now on on `bar` (None: stop counting)."""
        self._bar = bar

    @classmethod
    def class_name(cls) -> str:
        return "Counting"

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        vectors = self._inner.get_text_embedding_batch(texts)
        if self._bar is not None:
            self._bar.update(len(texts))
        return vectors

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._inner.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._get_query_embedding(query)

    async def _aget_text_embedding(self, text: str) -> List[float]:
        return self._get_text_embedding(text)
