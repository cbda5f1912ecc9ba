"""Tokens of the prompts the package sends, as OpenAI counts a chat request, with tiktoken's `cl100k_base`
(the copy llama-index-core bundles: nothing is downloaded)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, List, Sequence, Tuple

from llama_index.core.prompts import PromptTemplate

from llama_index_graphrag_milvus.llm.prompts import RERANK_PROMPT
from llama_index_graphrag_milvus.llm.rerank import format_candidates
from llama_index_graphrag_milvus.schema import ScoredRelation

#: The (role, content) messages of one chat request.
Call = List[Tuple[str, str]]


@lru_cache(maxsize=1)
def encoding() -> Any:
    """tiktoken's cl100k_base, from the copy llama-index-core bundles (no download)."""
    import llama_index.core
    import tiktoken

    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache"))
    return tiktoken.get_encoding("cl100k_base")


def request_tokens(call: Call) -> int:
    """The input tokens of a chat request (OpenAI's cookbook: 3 a message, its role and content; 3 priming
    the reply)."""
    enc = encoding()
    return sum(3 + len(enc.encode(role)) + len(enc.encode(content)) for role, content in call) + 3


def prompt_tokens(
    question: str, offered: Sequence[ScoredRelation], prompt: PromptTemplate = RERANK_PROMPT, top_n: int = 3
) -> int:
    """The input tokens of the rerank request for `question` with these relations offered (the prompt sent
    as one user message, as LlamaIndex sends a completion prompt to a chat model)."""
    text = prompt.format(query_str=question, relationships=format_candidates(offered), top_n=top_n)
    return request_tokens([("user", text)])
