"""Which LLM the graph steps use: the one given, else LlamaIndex's `Settings.llm`, and `None` for none.
As `embeddings.resolve_embed_model` does for the embedder, OpenAI is never built when no key is set."""

from __future__ import annotations

import os
from typing import Optional, Union

from llama_index.core.llms import MockLLM
from llama_index.core.llms.llm import LLM

#: The `llm=` default: `Settings.llm` when set, else OpenAI when OPENAI_API_KEY is set, else no LLM.
DEFAULT = "default"

#: What an `llm=` argument takes: an LLM, None (no LLM) or `DEFAULT`.
LLMType = Union[LLM, None, str]


def resolve_llm(llm: LLMType = DEFAULT) -> Optional[LLM]:
    """The LLM `llm` stands for: an `LLM` itself; None for no LLM (as `Settings.llm = None`); `DEFAULT`:
    `Settings.llm` if you set it (to None, LlamaIndex makes it a `MockLLM`: no LLM here), else OpenAI if
    OPENAI_API_KEY is set, else None. Anything else (a model name, an LLM class) raises a TypeError."""
    if llm is None or isinstance(llm, LLM):
        return llm
    if is_default(llm):
        from llama_index.core import Settings

        if Settings._llm is None and not os.environ.get("OPENAI_API_KEY"):
            return None  # Settings.llm would build OpenAI with no key: no LLM instead
        llm = Settings.llm
        return None if type(llm) is MockLLM else llm  # what `Settings.llm = None` makes; not its subclasses
    got, fix = f"{type(llm).__name__} {llm!r:.80}", "pass an LLM object, e.g. llm=OpenAI(model=...)"
    if isinstance(llm, str):
        got, fix = f"the string {llm!r:.80}", f"pass an LLM object, e.g. llm=OpenAI(model={llm!r:.80})"
    elif isinstance(llm, type):
        made = f"create one, e.g. llm={llm.__name__}(model=...)"
        got, fix = f"the class {llm.__name__}", made if issubclass(llm, LLM) else "pass an LLM object"
    raise TypeError(
        f"llm must be a LlamaIndex LLM, None or {DEFAULT!r}, got {got}: {fix}, or llm=None for no LLM"
    )


def is_default(llm: object) -> bool:
    """Whether `llm` is the `DEFAULT` marker (follow `Settings.llm`)."""
    return isinstance(llm, str) and llm == DEFAULT
