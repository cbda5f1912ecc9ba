"""Which LLM the graph steps use: the one given, else LlamaIndex's `Settings.llm`, and `None` for none.

    resolve_llm(OpenAI(model="gpt-4o-mini"))   # that LLM
    resolve_llm(None)                          # None: no LLM, explicitly (as `Settings.llm = None` does)
    resolve_llm("default")                     # Settings.llm if you set it, else OpenAI if OPENAI_API_KEY
                                               # is set, else None

As `embeddings.resolve_embed_model` does for the embedder, `"default"` follows LlamaIndex's conventions
without ever building OpenAI when no key is set: with neither `Settings.llm` nor OPENAI_API_KEY, it is
None and the graph steps run offline (co-occurrence triplets, known-name NER, graph rerank).
"""

from __future__ import annotations

import os
from typing import Optional, Union

from llama_index.core.llms import MockLLM
from llama_index.core.llms.llm import LLM

__all__ = ["DEFAULT", "LLMType", "is_default", "resolve_llm"]

#: The `llm=` default: `Settings.llm` when set, else OpenAI when OPENAI_API_KEY is set, else no LLM.
DEFAULT = "default"

#: What an `llm=` argument takes: an LLM, None (no LLM) or `DEFAULT`.
LLMType = Union[LLM, None, str]


def resolve_llm(llm: LLMType = DEFAULT) -> Optional[LLM]:
    """The LLM `llm` stands for, or None for no LLM.

    - an `LLM` instance: itself;
    - None: None, no LLM (in LlamaIndex, `Settings.llm = None` disables the LLM the same way);
    - `"default"`: `Settings.llm` if you set it (not to None: LlamaIndex turns that into a `MockLLM`,
      read here as no LLM), else `Settings.llm` (OpenAI) if OPENAI_API_KEY is set, else None. OpenAI is
      never built without a key.

    Anything else (a model name, an LLM class, ...) is refused with a TypeError naming the fix.
    """
    if llm is None:
        return None
    if isinstance(llm, LLM):
        return llm
    if is_default(llm):
        return _settings_llm()
    raise TypeError(_not_an_llm(llm))


def is_default(llm: object) -> bool:
    """Whether `llm` is the `DEFAULT` marker (follow `Settings.llm`)."""
    return isinstance(llm, str) and llm == DEFAULT


def _settings_llm() -> Optional[LLM]:
    """`Settings.llm` when it is set or OpenAI is usable, without resolving the OpenAI default otherwise."""
    from llama_index.core import Settings

    if Settings._llm is None and not os.environ.get("OPENAI_API_KEY"):
        return None  # Settings.llm would build OpenAI with no key: no LLM instead
    llm = Settings.llm
    return None if type(llm) is MockLLM else llm  # what `Settings.llm = None` makes; not its subclasses


def _not_an_llm(value: object) -> str:
    if isinstance(value, str):
        return (
            f"llm must be a LlamaIndex LLM, None or {DEFAULT!r}, got the string {value!r:.80}: pass an LLM "
            f"object, e.g. llm=OpenAI(model={value!r:.80}), or llm=None for no LLM"
        )
    if isinstance(value, type):
        name = value.__name__
        fix = f"create one, e.g. llm={name}(model=...)" if issubclass(value, LLM) else "pass an LLM object"
        return f"llm must be a LlamaIndex LLM instance, got the class {name}: {fix}, or llm=None for no LLM"
    return (
        f"llm must be a LlamaIndex LLM (e.g. llm=OpenAI(model=...)), None for no LLM or {DEFAULT!r} for "
        f"Settings.llm, got {type(value).__name__} {value!r:.80}"
    )
